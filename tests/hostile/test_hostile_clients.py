"""The client suite holds against hostile clients (``tests/peers/hostile_clients.py``).

The client side of ``test_hostile_agents.py``: each case runs the client suite
(``--acp-client``, mock-client profile) in a subprocess against one hostile
client with small deadlines and a fixed selection of core tests, and checks
that the run ends within a time bound, that the clauses the attack breaks are
FAIL (or INCONCLUSIVE) with messages a person understands, that the tests the
attack does not touch still PASS, and that afterwards no process the client
started (the relay agent, sleepers, a daemon) is alive: the client gets a
unique ``HOSTILE_RUN_TAG`` (inherited by the relay it launches), and the
process table is scanned for it.  ``docs/hostile-peers.md`` tabulates the
outcomes.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import pytest

from tests.hostile._run import HOSTILE_CLIENTS, PY, HostileRun, run_hostile
from tests.hostile.test_hostile_agents import check_run, only

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="process-table checks need Linux /proc"),
]

ARGS = "{permission} --caps fs,terminal --agent {agent} --prompt {prompt} --quiet"
CORE = (
    "test_initialize_request",
    "test_session_and_prompt",
    "test_read_text_file",
    "test_stdin_carries_only_protocol",
    "test_every_agent_request_is_answered_once",
)
FAST = ("--acp-timeout=2", "--acp-startup-timeout=3")
#: Clauses of ``test_initialize_request`` and ``test_session_and_prompt``: no agent request involved.
HANDSHAKE = {"init.request.protocol-version", "init.request.client-info", "session.new.params", "prompt.params"}
#: Peak RSS of a client-suite run (the suite process, not the client): one relay connection per test.
RSS_BOUND_MIB = 250.0


def hostile_client(name: str, tmp: Path, *extra: str, **kw: object) -> HostileRun:
    return run_hostile(name, tmp, *extra, role="client", command=f"{PY} {HOSTILE_CLIENTS} {name} {ARGS}", **kw)  # type: ignore[arg-type]


def check(run: HostileRun, seconds: float) -> None:
    check_run(run, seconds=seconds, baseline=RSS_BOUND_MIB, extra_mib=0)


def statuses(run: HostileRun, clauses: set[str]) -> dict[str, str]:
    s = run.statuses()
    return {c: s.get(c, "absent") for c in sorted(clauses)}


# ------------------------------------------------------------------- silence
@pytest.mark.parametrize("name", ["mute", "partial-frame"])
def test_client_that_never_sends_initialize(tmp_path: Path, name: str) -> None:
    """Launches the agent and writes nothing (or half a line): the first two tests give up at the
    startup deadline; later ones are not started again (INCONCLUSIVE, at once).  No init.first
    FAIL: a client that sends nothing creates no session without initializing first."""
    tests = ("test_initialize_request", "test_session_and_prompt", "test_read_text_file")
    run = hostile_client(name, tmp_path, *only(*tests), *FAST)
    check(run, seconds=60)
    assert run.with_status("FAIL") <= {"transport.stdio.newline-delimited"}, run.summary()
    assert run.statuses()["init.first"] == "INCONCLUSIVE", run.summary()
    gave_up = "could not be judged: the client launched the agent but sent no initialize within 3 s"
    waited = {t["nodeid"] for c in run.report["clauses"] for t in c["tests"] if t["message"].startswith(gave_up)}
    assert len(waited) == 2, run.summary()
    spared = {t["nodeid"] for c in run.report["clauses"] for t in c["tests"] if "not started again" in t["message"]}
    assert len(spared) == 1, run.summary()  # the third test: INCONCLUSIVE at once
    assert not run.with_status("PASS"), run.summary()
    if name == "partial-frame":  # the half line is shown: in the transcript at the deadline, and as a violation at EOF
        shown = "\n".join(run.evidence(c) for c in ("init.first", "transport.stdio.newline-delimited"))
        assert re.search(r'"protocolVers(?!ion)', shown), run.summary()
        assert any(
            "stream ended in the middle of a line (69 bytes" in m
            for m in run.messages("transport.stdio.newline-delimited", "FAIL")
        ), run.summary()


def test_client_that_never_answers_the_agent(tmp_path: Path) -> None:
    """Drives its session but answers none of the agent's requests: each wait ends at its deadline."""
    tests = [t for t in CORE if t != "test_every_agent_request_is_answered_once"]  # 3 more deadlines, nothing new
    run = hostile_client("never-answers", tmp_path, *only(*tests), *FAST)
    check(run, seconds=60)
    assert run.with_status("FAIL") == {"jsonrpc.every-request-answered"}, run.summary()
    messages = set(run.messages("jsonrpc.every-request-answered", "FAIL"))
    assert "no response to fs/read_text_file (id 0) within 2 s" in messages, messages
    assert "no response to session/request_permission (id 0) within 2 s" in messages, messages
    assert any("could not be judged: no response to fs/read_text_file" in m for m in run.messages("fs.read.response"))
    assert statuses(run, HANDSHAKE) == dict.fromkeys(sorted(HANDSHAKE), "PASS"), run.summary()


# ------------------------------------------------------------------- crashes
def test_client_exiting_in_the_middle_of_a_turn(tmp_path: Path) -> None:
    """Dies at the first update; our permission request may cross its exit unread, so the crash is
    INCONCLUSIVE for what it cut short (with its stderr), never a FAIL nothing proves."""
    run = hostile_client("exits-mid-turn", tmp_path, *only(*CORE), *FAST)
    check(run, seconds=60)
    assert not run.with_status("FAIL"), run.summary()
    cut = [t["message"] for c in run.report["clauses"] for t in c["tests"] if t["status"] == "INCONCLUSIVE"]
    assert any("segmentation fault (simulated)" in m for m in cut), run.summary()
    assert any("nothing shows it had read the request" in m for m in cut), run.summary()
    assert statuses(run, HANDSHAKE) == dict.fromkeys(sorted(HANDSHAKE), "PASS"), run.summary()


# -------------------------------------------------------------------- volume
def test_client_flooding_the_agent_and_its_own_stdout(tmp_path: Path) -> None:
    """40,000 valid notifications to the agent and 8 MiB of user-facing output: nothing flagged,
    the report says how many frames it dropped from the evidence."""
    run = hostile_client("stdout-flood", tmp_path, *only(*CORE), "--acp-timeout=30", "--acp-startup-timeout=10")
    check(run, seconds=90)
    assert (run.state / "client-stdout-flood").exists(), "the flood never ran"
    assert not run.with_status("FAIL", "WARN", "INCONCLUSIVE"), run.summary()
    found = (re.search(r"(\d+) of (\d+) frame\(s\) dropped from the evidence", m) for m in run.messages("schema.valid"))
    counts = list(found)
    dropped = [(int(c[1]), int(c[2])) for c in counts if c]
    assert dropped and dropped[0][0] > 30_000 and dropped[0][1] > 40_000, run.messages("schema.valid")


def test_client_writing_binary_and_invalid_utf8(tmp_path: Path) -> None:
    run = hostile_client("binary-garbage", tmp_path, *only(*CORE), *FAST)
    check(run, seconds=60)
    assert {"transport.utf8", "transport.stdio.stdin-clean"} <= run.with_status("FAIL"), run.summary()
    assert run.with_status("FAIL") <= {"transport.utf8", "transport.stdio.stdin-clean"}, run.summary()
    assert any("frame is not valid UTF-8" in m for m in run.messages("transport.utf8", "FAIL"))
    assert any("not an ACP message" in m for m in run.messages("transport.stdio.stdin-clean", "FAIL"))


# ----------------------------------------------------------------- processes
def test_client_ignoring_stdin_eof_and_sigterm(tmp_path: Path) -> None:
    """Stays alive (agent and all) after its turns, SIGTERM ignored: no clause asks a client to exit on
    stdin EOF, so nothing is flagged; each teardown costs the exit grace plus the SIGTERM wait, then SIGKILL."""
    run = hostile_client("immortal", tmp_path, *only("test_initialize_request", "test_session_and_prompt"), *FAST)
    check(run, seconds=60)
    assert not run.with_status("FAIL", "WARN", "INCONCLUSIVE"), run.summary()
    pids = [r["pid"] for r in run.records("immortal")]
    assert pids, "the client never reached its immortal phase"
    assert not any(Path(f"/proc/{pid}").exists() and _alive(pid) for pid in pids)


def test_client_leaving_processes_behind(tmp_path: Path) -> None:
    """Sleepers in its group, in a new group, in a new session, and a double-forked daemon with an
    empty environment: the run is unaffected and all of them are killed at teardown."""
    run = hostile_client("grandchildren", tmp_path, *only("test_initialize_request", "test_session_and_prompt"), *FAST)
    check(run, seconds=60)
    assert not run.with_status("FAIL", "WARN", "INCONCLUSIVE"), run.summary()
    started = run.records("sleepers")
    assert {s["how"] for s in started} == {"same-group", "setpgid", "setsid", "double"}, started
    assert not any(_alive(s["pid"]) for s in started)


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2] not in "ZX" and os.path.exists(f"/proc/{pid}")
