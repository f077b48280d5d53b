"""Self-tests of the reference client (``mock_client``) against the reference agent.

The client runs for real (``python -m mock_client``) against ``python -m
mock_agent``, whose prompt keywords make it ask for permission, write and
read files and run terminals.  Every wait has a deadline.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import given
from hypothesis import strategies as st

from acp_conformance.peer import HandlerError
from mock_client import RealTerminals, parse_caps, tail_on_char_boundary

REPO = Path(__file__).resolve().parents[2]
PY = sys.executable
AGENT = f"{PY} -m mock_agent"
DEADLINE = 60


def run_client(tmp: Path, *args: str, agent: str = AGENT) -> tuple[int, dict[str, Any], str]:
    report = tmp / "report.json"
    proc = subprocess.run(
        [PY, "-m", "mock_client", "--agent", agent, "--report", str(report), "--cwd", str(tmp), *args],
        capture_output=True,
        text=True,
        timeout=DEADLINE,
        cwd=tmp,
    )
    data = json.loads(report.read_text()) if report.is_file() else {}
    return proc.returncode, data, proc.stdout + proc.stderr


def test_plain_and_tool_turns(tmp_path: Path) -> None:
    code, report, out = run_client(tmp_path, "--prompt", "hello", "--prompt", "acp:tool please")
    assert code == 0, out
    assert [t["stopReason"] for t in report["turns"]] == ["end_turn", "end_turn"]
    assert report["permissions"][0]["outcome"] == {"outcome": "selected", "optionId": "allow-once"}
    # The agent wrote through fs/write_text_file into the session directory, and read it back.
    assert (tmp_path / "acp-probe.txt").read_text() == "hello from the mock agent\n"
    assert "You said:" in out
    assert report["agent_violations"] == []


def test_reject_policy(tmp_path: Path) -> None:
    code, report, out = run_client(tmp_path, "--prompt", "acp:tool", "--permission", "reject")
    assert code == 0, out
    assert report["permissions"][0]["outcome"] == {"outcome": "selected", "optionId": "reject-once"}
    assert not (tmp_path / "acp-probe.txt").exists()


def test_cancel_after_permission(tmp_path: Path) -> None:
    code, report, out = run_client(tmp_path, "--prompt", "acp:tool", "--cancel-after-permission")
    assert code == 0, out
    assert report["turns"][0]["stopReason"] == "cancelled"
    assert report["permissions"][0]["outcome"] == {"outcome": "cancelled"}


def test_no_capabilities_means_no_fs(tmp_path: Path) -> None:
    code, report, out = run_client(tmp_path, "--prompt", "acp:tool", "--caps", "none")
    assert code == 0, out
    assert report["turns"][0]["stopReason"] == "end_turn"
    assert not (tmp_path / "acp-probe.txt").exists()  # the agent never calls fs/* unadvertised


def test_sigint_cancels_the_running_turn(tmp_path: Path) -> None:
    report = tmp_path / "r.json"
    proc = subprocess.Popen(
        [PY, "-m", "mock_client", "--agent", AGENT, "--prompt", "acp:long", "--report", str(report)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path,
    )
    try:
        assert proc.stdout is not None
        for line in proc.stdout:  # the agent streams "tick" chunks while the turn runs
            if "tick 1" in line:
                break
        proc.send_signal(signal.SIGINT)
        assert proc.wait(DEADLINE) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert json.loads(report.read_text())["turns"][0]["stopReason"] == "cancelled"


def test_prompts_from_stdin(tmp_path: Path) -> None:
    report = tmp_path / "r.json"
    proc = subprocess.run(
        [PY, "-m", "mock_client", "--agent", AGENT, "--report", str(report)],
        input="first\n\nsecond\n", capture_output=True, text=True, timeout=DEADLINE, cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    assert [t["prompt"] for t in json.loads(report.read_text())["turns"]] == ["first", "second"]


def test_unsupported_version_disconnects(tmp_path: Path) -> None:
    agent = f"{PY} {REPO / 'tests' / 'peers' / 'broken_agents.py'} answers-version-2"
    code, report, out = run_client(tmp_path, "--prompt", "hello", agent=agent)
    assert code == 1
    assert "supports only 1" in out
    assert report["turns"] == []


def test_agent_that_does_not_start_is_reported(tmp_path: Path) -> None:
    code, report, _ = run_client(tmp_path, "--prompt", "x", agent=f"{PY} -c 'import sys; sys.exit(4)'")
    assert code == 1
    assert report["errors"]


@pytest.mark.parametrize(
    ("spec", "read", "write", "terminal"),
    [("fs,terminal", True, True, True), ("none", False, False, False), ("read", True, False, False),
     ("write,terminal", False, True, True)],
)
def test_parse_caps(spec: str, read: bool, write: bool, terminal: bool) -> None:
    caps = parse_caps(spec)
    assert (caps.fs_read, caps.fs_write, caps.terminal) == (read, write, terminal)


@pytest.mark.parametrize("spec", ["fs,bogus", "none,fs"])
def test_parse_caps_rejects_nonsense(spec: str) -> None:
    import argparse

    with pytest.raises(argparse.ArgumentTypeError):
        parse_caps(spec)


@given(st.text(), st.integers(min_value=0, max_value=64))
def test_tail_on_char_boundary(text: str, limit: int) -> None:
    data = text.encode()
    tail, cut = tail_on_char_boundary(data, limit)
    assert cut == (len(data) > limit)
    assert len(tail) <= limit or not cut
    assert data.endswith(tail)
    tail.decode("utf-8")  # never splits a character
    assert len(tail) >= min(len(data), limit) - 3


# ------------------------------------------------------------- real terminals
@pytest.mark.anyio
async def test_real_terminals_lifecycle(tmp_path: Path) -> None:
    with anyio.fail_after(DEADLINE):
        async with anyio.create_task_group() as tg:
            terms = RealTerminals(tg.start_soon, str(tmp_path))
            tid = (await terms.create({"command": "sh", "args": ["-c", "printf 'a€b'; exit 2"],
                                       "outputByteLimit": 4}))["terminalId"]
            assert await terms.wait_for_exit(tid) == {"exitCode": 2, "signal": None}
            out = await terms.output(tid)
            assert out == {"output": "€b", "truncated": True, "exitStatus": {"exitCode": 2, "signal": None}}
            long = (await terms.create({"command": "sh", "args": ["-c", "sleep 60"]}))["terminalId"]
            assert "exitStatus" not in await terms.output(long)
            await terms.kill(long)
            status = await terms.wait_for_exit(long)
            assert status["signal"] == "SIGKILL" and status["exitCode"] is None
            await terms.release(long)
            with pytest.raises(HandlerError):
                await terms.output(long)
            await terms.close_all()
            tg.cancel_scope.cancel()


@pytest.mark.anyio
async def test_real_terminal_env_and_missing_command(tmp_path: Path) -> None:
    with anyio.fail_after(DEADLINE):
        async with anyio.create_task_group() as tg:
            terms = RealTerminals(tg.start_soon, str(tmp_path))
            tid = (await terms.create({"command": "sh", "args": ["-c", "printf %s \"$ACP_X\""],
                                       "env": [{"name": "ACP_X", "value": "42"}]}))["terminalId"]
            await terms.wait_for_exit(tid)
            assert (await terms.output(tid))["output"] == "42"
            with pytest.raises(HandlerError):
                await terms.create({"command": "/nonexistent/binary-xyz"})
            tg.cancel_scope.cancel()


def test_no_stray_processes_after_a_run(tmp_path: Path) -> None:
    code, _, out = run_client(tmp_path, "--prompt", "acp:tool")
    assert code == 0, out
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cwd = os.readlink(entry / "cwd")
            except OSError:
                continue
            assert not cwd.startswith(str(tmp_path)), f"process {entry.name} still runs in {cwd}"
