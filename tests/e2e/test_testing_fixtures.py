"""acp_conformance.testing as another project uses it: a conftest line, fixtures, no --acp-*."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BROKEN = ROOT / "tests" / "peers" / "broken_agents.py"

PROJECT = f"""
import sys

def test_my_agent_passes(acp_drive_agent, acp_mock_agent):
    run = acp_drive_agent(acp_mock_agent(), "hello")
    run.raise_for_violations()
    assert run.turns[0]["stopReason"] == "end_turn"

def test_my_broken_agent_is_caught(acp_drive_agent):
    run = acp_drive_agent(sys.executable + " {BROKEN} jsonrpc-1.0", "hello", timeout=60)
    assert run.violations
    run.raise_for_violations()   # fails this test, naming the violations
"""


def run_project(project: Path) -> subprocess.CompletedProcess[str]:
    """pytest in another project's directory, as that project runs it (this checkout importable)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-rA"],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )


def test_fixtures_drive_an_agent_and_turn_violations_into_failures(tmp_path: Path) -> None:
    (tmp_path / "conftest.py").write_text('pytest_plugins = ["acp_conformance.testing"]\n')
    (tmp_path / "test_mine.py").write_text(PROJECT)
    proc = run_project(tmp_path)
    out = proc.stdout + proc.stderr
    assert "1 failed, 1 passed" in out, out[-4000:]
    assert "test_my_broken_agent_is_caught" in out and "ACP violation(s)" in out, out[-4000:]


DOC = ROOT / "docs" / "using-the-mocks.md"


def documented_files() -> dict[str, str]:
    """The example files of docs/using-the-mocks.md: each code block that starts with its name."""
    out = {}
    for body in re.findall(r"```(?:python|js)\n(.*?)```", DOC.read_text("utf-8"), flags=re.S):
        first = body.splitlines()[0]
        named = re.fullmatch(r"(?:#|//) ([\w.]+\.(?:py|mjs))", first)
        if named:
            out[named.group(1)] = body
    return out


@pytest.mark.skipif(shutil.which("node") is None, reason="the documented client in another language is Node.js")
def test_every_documented_fixture_example_runs_as_written(tmp_path: Path) -> None:
    files = documented_files()
    tests = sorted(name for name in files if name.startswith("test_"))
    assert {"conftest.py", "client.mjs"} <= files.keys(), sorted(files)
    assert tests == ["test_drive_agent.py", "test_inprocess_agent.py", "test_mock_agent.py", "test_model_stub.py"]
    for name, body in files.items():
        (tmp_path / name).write_text(body)
    proc = run_project(tmp_path)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0 and f"{len(tests)} passed" in out, out[-4000:]
