"""The ``acp-conformance`` command as people type it: one obvious way to certify, no tracebacks."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.e2e._suite_run import ROOT

PY = sys.executable


def cli(*args: str, cwd: Path, stdin: str = "") -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTEST_XDIST_WORKER", "PYTEST_ADDOPTS")}
    env["PYTHONPATH"] = str(ROOT)
    return subprocess.run(
        [PY, "-m", "acp_conformance", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120
    )


def collected(out: str) -> str:
    return next(line for line in out.splitlines() if "tests collected" in line or "test collected" in line)


def test_agent_subcommand_runs_the_same_suite_as_the_pytest_option(tmp_path: Path) -> None:
    via_cli = cli("agent", "--co", "-q", "--", PY, "-m", "mock_agent", cwd=tmp_path)
    assert via_cli.returncode == 0, via_cli.stdout + via_cli.stderr
    env = {k: v for k, v in os.environ.items() if k not in ("PYTEST_XDIST_WORKER", "PYTEST_ADDOPTS")}
    via_pytest = subprocess.run(
        [PY, "-m", "pytest", "-p", "no:cacheprovider", "--co", "-q", f"--acp-agent={PY} -m mock_agent"],
        cwd=tmp_path,
        env={**env, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert collected(via_cli.stdout).split(" in ")[0] == collected(via_pytest.stdout).split(" in ")[0]


def test_agent_subcommand_without_a_command_says_how(tmp_path: Path) -> None:
    got = cli("agent", "-n", "2", cwd=tmp_path)
    assert got.returncode == 2 and "Traceback" not in got.stderr
    assert 'give the agent command after "--"' in got.stderr and "acp-conformance agent" in got.stderr


def test_version_names_the_suite_and_the_schema_pin(tmp_path: Path) -> None:
    got = cli("--version", cwd=tmp_path)
    assert got.returncode == 0 and got.stdout.startswith("acp-conformance ")
    assert "@agentclientprotocol/sdk@" in got.stdout and "sha256" in got.stdout


def test_help_is_plain_text(tmp_path: Path) -> None:
    got = cli("--help", cwd=tmp_path)
    assert got.returncode == 0 and "``" not in got.stdout and "agent [PYTEST OPTIONS] -- AGENT COMMAND" in got.stdout


def test_a_closed_pipe_is_not_a_traceback(tmp_path: Path) -> None:
    """``acp-conformance clauses | head -1``: the reader leaves early.  Forced here: the reading end
    is closed before the command writes anything, so its first write meets a broken pipe."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTEST_XDIST_WORKER", "PYTEST_ADDOPTS")}
    try:
        got = subprocess.run(
            [PY, "-m", "acp_conformance", "clauses"],
            cwd=tmp_path,
            env={**env, "PYTHONPATH": str(ROOT)},
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            timeout=120,
        )
    finally:
        os.close(write_end)
    assert got.returncode == 0 and got.stderr == "", got.stderr
