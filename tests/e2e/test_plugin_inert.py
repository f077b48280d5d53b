"""Installed, the plugin stays out of other projects' pytest runs until an --acp-* option asks."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

PROJECT_TEST = '''
import pytest

@pytest.mark.clause("foo")          # the project's own marker, no business of ours
@pytest.mark.acp_clause("not.a.registered.clause")
def test_mine():
    assert True
'''


def _pytest(tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args],
        cwd=tmp,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_without_acp_options_the_plugin_judges_nothing(tmp_path: Path) -> None:
    (tmp_path / "test_project.py").write_text(PROJECT_TEST)
    proc = _pytest(tmp_path, "-q")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    assert "1 passed" in out
    for ours in ("unknown clause id", "ACP verdict", "ACP conformance", "acp schema"):
        assert ours not in out, out


def test_with_acp_options_the_markers_are_checked(tmp_path: Path) -> None:
    (tmp_path / "test_project.py").write_text(PROJECT_TEST)
    proc = _pytest(tmp_path, "-q", "--acp-agent=python -m mock_agent", "test_project.py")
    assert proc.returncode == 4, proc.stdout + proc.stderr
    assert "@pytest.mark.acp_clause: unknown clause id 'not.a.registered.clause'" in proc.stdout + proc.stderr


def test_collecting_the_agent_suite_loads_no_scenario_models_or_fuzzer(tmp_path: Path) -> None:
    # A pytest start's fixed cost (issue: certify in about a minute): collection reads the scenario
    # library's cached index and the cached clause bindings; pydantic (the scenario models) and
    # Hypothesis's engine load only in the tests that play a file or fuzz.
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    argv = [sys.executable, "-X", "importtime", "-m", "pytest", "-p", "no:cacheprovider", "--co", "-q"]
    proc = subprocess.run(
        [*argv, "--acp-agent=python -m mock_agent"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "test_scenario[" in proc.stdout and "test_fuzz_" in proc.stdout  # the whole suite was collected
    imported = {line.rsplit("|", 1)[-1].strip() for line in proc.stderr.splitlines() if line.startswith("import time:")}
    assert not {"pydantic", "acp_conformance.scenario.model", "hypothesis.core"} & imported
