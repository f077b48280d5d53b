"""Nothing outlives an interrupted run: Ctrl-C, SIGTERM and SIGKILL, to the controller or a worker.

Every case starts a real run (``pytest --acp-agent=...``, serial or ``-n 2``; the client suite
against a client; ``python -m mock_client``; ``python -m acp_conformance proxy``; the
``acp_drive_agent`` fixture) against a peer that ignores stdin EOF and SIGTERM and leaves a
sleeper in a session of its own (``undying`` in ``tests/peers/hostile_agents.py`` and
``hostile_clients.py``), waits until that peer is up, signals the process under test, and then
asserts from ``/proc`` that no process of the run is alive within the bound the issue sets:

* SIGINT / SIGTERM to the controller: it stops within a few seconds, writes the report it has,
  marked interrupted, and leaves nothing (teardown, and SIGTERM handled as Ctrl-C);
* SIGKILL to the controller or to one worker: within 10 s nothing that process started remains
  (workers die with their controller, ``PR_SET_PDEATHSIG``; each process's watchdog,
  ``acp_conformance._watchdog``, kills what its owner had started).

Waiting for the peer to come up polls ``/proc`` under a deadline: the peer is another process,
and its appearance in the process table is the event.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.e2e._suite_run import ROOT
from tests.hostile._run import HOSTILE, HOSTILE_CLIENTS, PY

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="process-table checks need Linux /proc"),
]

#: How long a peer may take to come up on a loaded 2-core CI machine.
STARTUP = 60.0
#: SIGINT / SIGTERM: the run must be over within this (teardown of a peer that ignores SIGTERM
#: takes the transport's grace periods, about 4 s, plus pytest's own wind-down).
STOP_BOUND = 20.0
#: SIGKILL: everything the killed process started must be gone within this (the issue's bound).
KILL_BOUND = 10.0
#: Exec the command with SIGINT at its default.  A process started in the background of a
#: non-interactive shell (a CI step, ``cmd &``) inherits SIGINT *ignored*, exec keeps it so, and
#: Python then installs no KeyboardInterrupt handler: the SIGINT cases would wait out their bound
#: on a run that never saw the signal, whatever the code under test does.
SIGINT_DEFAULT = [
    PY,
    "-c",
    "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); os.execv(sys.argv[1], sys.argv[1:])",
]
CLIENT_ARGS = "{permission} --caps fs,terminal --agent {agent} --prompt {prompt} --quiet"


@dataclass
class Proc:
    pid: int
    ppid: int
    cmd: str
    spawn_tag: bytes


def tagged(tag: str) -> list[Proc]:
    """Live processes carrying the run's ``HOSTILE_RUN_TAG`` (the peers and everything they started)."""
    needle = f"HOSTILE_RUN_TAG={tag}".encode()
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            fields = stat[stat.rindex(")") + 2 :].split()
            env = (entry / "environ").read_bytes().split(b"\0")
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except (OSError, ValueError):
            continue
        if fields[0] in "ZX" or needle not in env:
            continue
        spawn = next((e for e in env if e.startswith(b"ACP_CONFORMANCE_SPAWN=")), b"")
        out.append(Proc(int(entry.name), int(fields[1]), cmd, spawn))
    return out


def wait_until(check: Callable[[], bool], timeout: float, what: str) -> float:
    """Poll ``check`` until true; the time it took.  Fails with ``what`` at the deadline."""
    start = time.monotonic()
    while not check():
        if time.monotonic() - start > timeout:
            raise AssertionError(f"{what}: not within {timeout:g} s")
        time.sleep(0.02)
    return time.monotonic() - start


@dataclass
class Started:
    proc: subprocess.Popen[bytes]
    tag: str
    report: Path
    output: Path

    def peers(self) -> list[Proc]:
        return tagged(self.tag)

    def text(self) -> str:
        return self.output.read_text("utf-8", "replace")


@pytest.fixture
def start(tmp_path: Path) -> Iterator[Callable[..., Started]]:
    """Start a command with the run's tag given to its peer; everything is killed afterwards."""
    runs: list[Started] = []

    def go(argv: list[str], *, peer_env_option: str | None, cwd: Path | None = None) -> Started:
        tag = uuid.uuid4().hex
        state = tmp_path / f"state-{len(runs)}"
        state.mkdir()
        report = tmp_path / f"report-{len(runs)}.json"
        output = tmp_path / f"output-{len(runs)}.txt"
        env = {k: v for k, v in os.environ.items() if k not in ("PYTEST_XDIST_WORKER", "PYTEST_ADDOPTS")}
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
        peer_env = {"HOSTILE_RUN_TAG": tag, "HOSTILE_STATE_DIR": str(state)}
        if peer_env_option is None:
            env.update(peer_env)  # the peer inherits it
        else:
            argv = [*argv, *(f"{peer_env_option}={k}={v}" for k, v in peer_env.items())]
        argv = [a.replace("{report}", str(report)) for a in argv]
        with output.open("wb") as out:
            # A session of its own, so that our signals reach exactly the process we aim at.
            # stdin: a pipe we never write to (a proxy waits on it for its client).
            proc = subprocess.Popen(
                [*SIGINT_DEFAULT, *argv],
                cwd=cwd or tmp_path,
                env=env,
                stdin=subprocess.PIPE,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        started = Started(proc, tag, report, output)
        runs.append(started)
        return started

    yield go
    for run in runs:
        if run.proc.poll() is None:
            os.killpg(run.proc.pid, signal.SIGKILL)
            run.proc.wait(timeout=30)
        if run.proc.stdin is not None:
            run.proc.stdin.close()
        for p in run.peers():
            try:
                os.kill(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def suite_argv(role: str, workers: int) -> list[str]:
    peer = (
        f"--acp-agent={PY} {HOSTILE} undying"
        if role == "agent"
        else f"--acp-client={PY} {HOSTILE_CLIENTS} undying {CLIENT_ARGS}"
    )
    argv = [PY, "-m", "pytest", "-p", "no:cacheprovider", "-q", peer, "--acp-report-json={report}"]
    if role == "client":
        argv.append("--acp-client-profile=mock-client")
    return argv + (["-n", str(workers)] if workers else [])


def peer_up(run: Started, *, worker: bool = False) -> Callable[[], bool]:
    """The peer is running (under an xdist worker, not the controller, when ``worker``)."""

    def check() -> bool:
        if run.proc.poll() is not None:
            raise AssertionError(f"the run ended before its peer came up:\n{run.text()[-3000:]}")
        return any(p.ppid != run.proc.pid for p in run.peers()) if worker else bool(run.peers())

    return check


def agent_up(run: Started) -> bool:
    """The hostile agent itself runs (not merely a client whose command line names it)."""
    return any(p.cmd.startswith(f"{PY} {HOSTILE} undying") for p in run.peers())


def stacks(run: Started) -> str:
    """Every thread's stack of a run that hangs: pytest's faulthandler dumps them on SIGABRT."""
    run.proc.send_signal(signal.SIGABRT)
    try:
        run.proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        pass
    return run.text()[-12000:]


def assert_nothing_left(run: Started, bound: float, what: str) -> None:
    try:
        wait_until(lambda: not run.peers(), bound, what)
    except AssertionError:
        left = [f"{p.pid}: {p.cmd}" for p in run.peers()]
        raise AssertionError(f"{what}: still alive after {bound:g} s: {left}\n{run.text()[-2000:]}") from None


# ------------------------------------------------------------- the suite runs
@pytest.mark.parametrize(
    ("role", "sig", "workers"),
    [
        ("agent", signal.SIGINT, 0),
        ("agent", signal.SIGINT, 2),
        ("agent", signal.SIGTERM, 0),
        ("agent", signal.SIGTERM, 2),
        ("client", signal.SIGTERM, 2),
    ],
    ids=["agent-SIGINT-serial", "agent-SIGINT-n2", "agent-SIGTERM-serial", "agent-SIGTERM-n2", "client-SIGTERM-n2"],
)
def test_interrupting_the_controller_stops_reports_and_leaves_nothing(
    start: Callable[..., Started], role: str, sig: signal.Signals, workers: int
) -> None:
    run = start(suite_argv(role, workers), peer_env_option=f"--acp-{role}-env")
    wait_until(peer_up(run, worker=workers > 0), STARTUP, f"the {role} under test came up")
    run.proc.send_signal(sig)
    try:
        took = wait_until(lambda: run.proc.poll() is not None, STOP_BOUND, f"the run stopped after {sig.name}")
    except AssertionError:
        raise AssertionError(
            f"the run did not stop within {STOP_BOUND:g} s of {sig.name}; where it was stuck:\n{stacks(run)}"
        ) from None
    assert_nothing_left(run, KILL_BOUND, f"processes of the run after {sig.name}")
    out = run.text()
    assert run.proc.returncode == pytest.ExitCode.INTERRUPTED, out[-3000:]
    assert "ACP verdict: INTERRUPTED after" in out, out[-3000:]
    report = json.loads(run.report.read_text("utf-8"))
    assert report["interrupted"] is True and report["verdict"]["interrupted"] is True
    assert report["verdict"]["conformant"] is None, "an interrupted run decides nothing about conformance"
    print(f"{role} {'-n 2' if workers else 'serial'}: stopped {took:.1f} s after {sig.name}")


@pytest.mark.parametrize(
    ("role", "workers", "target"),
    [
        ("agent", 0, "controller"),
        ("agent", 2, "controller"),
        ("agent", 2, "worker"),
        ("client", 2, "worker"),
    ],
)
def test_sigkill_leaves_nothing_of_what_the_killed_process_started(
    start: Callable[..., Started], role: str, workers: int, target: str
) -> None:
    run = start(suite_argv(role, workers), peer_env_option=f"--acp-{role}-env")
    wait_until(peer_up(run, worker=workers > 0), STARTUP, f"the {role} under test came up")
    if target == "controller":
        victim, mine = run.proc.pid, None
    else:
        # The worker running a test right now: the parent of a peer that is not the controller's.
        peer = next(p for p in run.peers() if p.ppid != run.proc.pid)
        victim = peer.ppid
        mine = {p.spawn_tag for p in run.peers() if p.ppid == victim}
    os.kill(victim, signal.SIGKILL)
    if mine is None:
        assert_nothing_left(run, KILL_BOUND, "processes of the run after SIGKILL to the controller")
        return
    # The run goes on (xdist replaces the worker): only what the killed worker started must go.
    try:
        wait_until(lambda: not [p for p in run.peers() if p.spawn_tag in mine], KILL_BOUND, "the worker's peers")
    except AssertionError:
        left = [f"{p.pid}: {p.cmd}" for p in run.peers() if p.spawn_tag in mine]
        raise AssertionError(f"still alive {KILL_BOUND:g} s after SIGKILL to worker {victim}: {left}") from None


# ------------------------------------------------------- the other launchers
def test_sigkill_to_mock_client_takes_its_agent_along(start: Callable[..., Started], tmp_path: Path) -> None:
    argv = [PY, "-m", "mock_client", "--agent", f"{PY} {HOSTILE} undying", "--prompt", "hello", "--quiet"]
    run = start([*argv, "--cwd", str(tmp_path)], peer_env_option=None)
    wait_until(lambda: agent_up(run), STARTUP, "the agent came up")
    run.proc.kill()
    assert_nothing_left(run, KILL_BOUND, "the agent of a killed mock_client")


def test_sigkill_to_the_proxy_takes_its_agent_along(start: Callable[..., Started]) -> None:
    # The proxy starts its agent at once and waits for a client on its stdin (ours: none).
    run = start([PY, "-m", "acp_conformance", "proxy", "--", PY, str(HOSTILE), "undying"], peer_env_option=None)
    wait_until(lambda: agent_up(run), STARTUP, "the agent came up")
    run.proc.kill()
    assert_nothing_left(run, KILL_BOUND, "the agent of a killed proxy")


def test_sigkill_to_a_project_using_the_drive_fixture_leaves_nothing(
    start: Callable[..., Started], tmp_path: Path
) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "conftest.py").write_text('pytest_plugins = ["acp_conformance.testing"]\n')
    (project / "test_mine.py").write_text(
        "import sys\n\n"
        "def test_drive(acp_drive_agent):\n"
        f"    acp_drive_agent({f'{PY} {HOSTILE} undying'!r}, timeout=120)\n"
    )
    run = start([PY, "-m", "pytest", "-p", "no:cacheprovider", "-q", "test_mine.py"], peer_env_option=None, cwd=project)
    wait_until(lambda: agent_up(run), STARTUP, "the agent came up")
    run.proc.kill()
    assert_nothing_left(run, KILL_BOUND, "the client and agent of a killed pytest using acp_drive_agent")


def test_sigkill_to_a_proof_takes_its_inner_run_along(start: Callable[..., Started], tmp_path: Path) -> None:
    # What every proof in tests/e2e does: run_suite runs the whole suite in a subprocess. Killed (a CI
    # time limit, an OOM killer), the proof must not leave that run and its agent going on: here the
    # inner run waits 120 s for a silent agent's first answer, printing nothing that would fail on
    # its dead reader first.
    inner = tmp_path / "inner"
    inner.mkdir()
    code = (
        "import sys; from pathlib import Path; from tests.e2e._suite_run import run_suite; "
        "run_suite(sys.argv[1], Path(sys.argv[2]), '--acp-startup-timeout=120', timeout=300)"
    )
    run = start([PY, "-c", code, f"{PY} {HOSTILE} silent", str(inner)], peer_env_option=None)
    wait_until(
        lambda: any(p.cmd.startswith(f"{PY} {HOSTILE} silent") for p in run.peers()),
        STARTUP,
        "the inner run's agent came up",
    )
    run.proc.kill()
    assert_nothing_left(run, STOP_BOUND, "the inner suite run of a killed proof, and its agent")
