"""The agent suite holds against hostile agents (``tests/peers/hostile_agents.py``).

Each case runs the agent suite in a subprocess, as a user does, against one
hostile agent with small deadlines, and checks what the issue asks for:

* the run ends within a time bound (deadlines, not luck);
* the clauses the attack breaks are FAIL (or INCONCLUSIVE, where the attack
  makes them unjudgeable), with messages a person understands;
* the tests the attack does not touch still PASS;
* the suite process's peak RSS stays bounded (``_rss_probe``), relative to a
  run against the reference agent;
* afterwards no process the agent started survives (process-table scan for
  the run's tag, see ``_run.py``).

To keep CI time bounded whatever the suite grows into, each run selects a
fixed set of core tests with ``-k`` (the rest are NOT_TESTED, so no verdict
is conformant here).  ``docs/hostile-peers.md`` tabulates the outcomes.
``test_memory.py`` measures, in-process, what the suite keeps under the floods.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import sys
from pathlib import Path

import pytest

from tests.hostile._run import REFERENCE, HostileRun, run_hostile

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="process-table checks need Linux /proc"),
]

CORE = (
    "test_initialize_v1",
    "test_unknown_method_gets_method_not_found",
    "test_every_request_answered_exactly_once",
    "test_session_ids_are_unique",
    "test_basic_prompt_turn",
    "test_stdout_carries_only_protocol",
    "test_exits_after_stdin_closes",
)
#: Clauses whose tests involve no prompt turn (unaffected by attacks on turns).
NO_PROMPT = {"init.response.protocol-version", "jsonrpc.unknown-method", "session.new.unique-id"}
PROMPT = {"content.text.baseline", "prompt.response.stop-reason", "prompt.stop-reason.enum"}
FAST = ("--acp-timeout=2", "--acp-startup-timeout=3")
#: Extra peak RSS allowed over the reference run for attacks the suite bounds (the frame cap is 64 MiB).
BOUNDED_EXTRA_MIB = 96


def only(*tests: str) -> tuple[str, str]:
    return ("-k", " or ".join(tests))


@pytest.fixture(scope="session")
def baseline_mib(tmp_path_factory: pytest.TempPathFactory) -> float:
    """Peak RSS of the suite run against the reference agent (same tests).

    Measured once per session: xdist workers share it through a file in the
    session's common temporary directory, under a lock (a run costs seconds).
    """
    shared = tmp_path_factory.getbasetemp().parent if os.environ.get("PYTEST_XDIST_WORKER") else None
    with contextlib.ExitStack() as stack:
        if shared is not None:
            lock = stack.enter_context(open(shared / "hostile-baseline.lock", "w"))
            fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
            cached = shared / "hostile-baseline-mib"
            if cached.is_file():
                return float(cached.read_text())
        run = run_hostile("reference", tmp_path_factory.mktemp("reference"), *only(*CORE), *FAST, command=REFERENCE)
        assert not run.with_status("FAIL", "WARN"), run.summary()
        if shared is not None:
            cached.write_text(repr(run.peak_rss_mib))
        return run.peak_rss_mib


def check_run(run: HostileRun, *, seconds: float, baseline: float, extra_mib: float = BOUNDED_EXTRA_MIB) -> None:
    """What holds for every hostile run."""
    assert not run.strays, f"processes of {run.name} survived the run: {run.strays}"
    assert run.seconds < seconds, f"the run took {run.seconds:.1f} s (bound {seconds} s)\n{run.summary()}"
    assert run.peak_rss_mib < baseline + extra_mib, (
        f"peak RSS {run.peak_rss_mib:.0f} MiB, reference run {baseline:.0f} MiB\n{run.summary()}"
    )
    assert "INTERNALERROR" not in run.suite.stdout, run.summary()
    for clause in run.report["clauses"]:
        for test in clause["tests"]:
            message = test["message"]
            where = f"{clause['id']} in {test['nodeid']}"
            assert not message.startswith("suite error"), f"{where}: a bug in the suite: {message}"
            if test["status"] in ("FAIL", "WARN", "INCONCLUSIVE"):
                assert message.strip(), f"{where}: {test['status']} without a message"
                assert len(message) < 2000, f"{where}: a {len(message)}-character message"
                assert "Traceback" not in message, f"{where}: {message}"
                assert message.replace("\n", " ").isprintable(), f"{where}: unprintable message {message!r}"


def statuses_of(run: HostileRun, clauses: set[str]) -> dict[str, str]:
    s = run.statuses()
    return {c: s[c] for c in sorted(clauses)}


# ------------------------------------------------------------------- silence
def test_silent_agent(tmp_path: Path, baseline_mib: float) -> None:
    """Never writes a byte: every wait ends at its deadline, nothing passes."""
    tests = ("test_initialize_v1", "test_unknown_method_gets_method_not_found", "test_basic_prompt_turn")
    run = run_hostile("silent", tmp_path, *only(*tests), "--acp-timeout=1", "--acp-startup-timeout=1")
    check_run(run, seconds=60, baseline=baseline_mib)
    assert run.with_status("FAIL") == {"jsonrpc.every-request-answered"}, run.summary()
    assert set(run.messages("jsonrpc.every-request-answered")) == {"no response to initialize (id 0) within 1 s"}
    assert not run.with_status("PASS"), run.summary()
    judged = NO_PROMPT - {"session.new.unique-id"} | {"content.text.baseline"}
    assert set(statuses_of(run, judged).values()) == {"INCONCLUSIVE"}, run.summary()
    assert all("no response to initialize (id 0) within 1 s" in m for m in run.messages("content.text.baseline"))


def assert_prompt_unanswered(messages: list[str]) -> None:
    """Only prompts went unanswered, each after the 2 s deadline.  The ids are the connections'
    next ones: 2 on a fresh connection, more on one borrowed from an earlier test."""
    assert messages, "no unanswered request reported"
    for m in messages:
        assert re.fullmatch(r"no response to session/prompt \(id \d+\) within 2 s", m), messages


def test_agent_answering_only_some_requests(tmp_path: Path, baseline_mib: float) -> None:
    run = run_hostile("answers-some", tmp_path, *only(*CORE), *FAST)
    check_run(run, seconds=90, baseline=baseline_mib)
    assert run.with_status("FAIL") == {"jsonrpc.every-request-answered"}, run.summary()
    assert_prompt_unanswered(run.messages("jsonrpc.every-request-answered", "FAIL"))
    assert statuses_of(run, NO_PROMPT) == dict.fromkeys(sorted(NO_PROMPT), "PASS"), run.summary()
    assert run.statuses()["content.text.baseline"] == "INCONCLUSIVE"
    assert run.statuses()["transport.stdio.exit-on-stdin-close"] == "PASS"


def test_agent_hanging_mid_line(tmp_path: Path, baseline_mib: float) -> None:
    """Half a response frame, no newline, then silence: a deadline, not a hang."""
    run = run_hostile("partial-frame", tmp_path, *only(*CORE), *FAST)
    check_run(run, seconds=90, baseline=baseline_mib)
    assert run.with_status("FAIL") == {"jsonrpc.every-request-answered"}, run.summary()
    assert_prompt_unanswered(run.messages("jsonrpc.every-request-answered", "FAIL"))
    assert statuses_of(run, NO_PROMPT) == dict.fromkeys(sorted(NO_PROMPT), "PASS"), run.summary()


def test_unterminated_line_is_shown_in_the_report(tmp_path: Path) -> None:
    run = run_hostile("partial-frame", tmp_path, *only("test_basic_prompt_turn"), *FAST)
    shown = [t["message"] + t.get("evidence", "") for c in run.report["clauses"] for t in c["tests"]]
    assert any(re.search(r'\{"stopRea(?!son)', s) or "without a terminating newline" in s for s in shown), run.summary()


# -------------------------------------------------------------------- volume
def test_agent_writing_a_100_mib_line(tmp_path: Path, baseline_mib: float) -> None:
    """Over our 64 MiB frame cap: the line is discarded unjudged and noted (INFO: the spec sets no
    size limit, RFC 8259 § 9 lets a receiver set one), memory stays bounded, the turn goes on."""
    run = run_hostile("huge-line", tmp_path, *only(*CORE), "--acp-timeout=15", "--acp-startup-timeout=5")
    check_run(run, seconds=120, baseline=baseline_mib)
    assert not run.with_status("FAIL", "WARN"), run.summary()
    assert run.with_status("INFO") == {"transport.frame-limit"}, run.summary()
    for message in run.messages("transport.frame-limit", "INFO"):
        assert "line of at least 104857771 bytes exceeds the frame cap of 67108864 bytes" in message
        assert "--acp-max-frame-bytes" in message
    assert statuses_of(run, NO_PROMPT | PROMPT) == dict.fromkeys(sorted(NO_PROMPT | PROMPT), "PASS"), run.summary()


def test_agent_flooding_stdout_with_valid_notifications(tmp_path: Path, baseline_mib: float) -> None:
    """40,000 valid updates in one turn: the suite keeps up (the pipe applies backpressure),
    every check still passes, memory stays bounded (the event log and the transcript keep a
    head and a tail: see test_memory.py), and the report says how many frames it dropped."""
    run = run_hostile(
        "stdout-flood",
        tmp_path,
        *only("test_initialize_v1", "test_basic_prompt_turn", "test_session_ids_are_unique"),
        "--acp-timeout=60",
        agent_env={"HOSTILE_FLOOD_FRAMES": "40000"},
    )
    check_run(run, seconds=150, baseline=baseline_mib)
    assert not run.with_status("FAIL", "WARN", "INCONCLUSIVE"), run.summary()
    assert statuses_of(run, PROMPT) == dict.fromkeys(sorted(PROMPT), "PASS")
    counts = [
        re.search(r"(\d+) of (\d+) frame\(s\) dropped from the evidence", m) for m in run.messages("schema.valid")
    ]
    dropped = [(int(c[1]), int(c[2])) for c in counts if c]
    assert dropped and 30_000 < dropped[0][0] < dropped[0][1] and dropped[0][1] > 40_000, run.messages("schema.valid")


def test_agent_flooding_stderr(tmp_path: Path, baseline_mib: float) -> None:
    """16 MiB of stderr in the first process, 1 MiB in each other (lines, a megabyte without
    a newline, binary) never stalls stdout."""
    flood = {"HOSTILE_STDERR_MIB": "16"}
    run = run_hostile("stderr-flood", tmp_path, *only(*CORE), "--acp-timeout=10", agent_env=flood)
    check_run(run, seconds=120, baseline=baseline_mib)
    assert not run.with_status("FAIL", "WARN", "INCONCLUSIVE"), run.summary()
    assert statuses_of(run, NO_PROMPT | PROMPT) == dict.fromkeys(sorted(NO_PROMPT | PROMPT), "PASS")


def test_agent_writing_binary_and_invalid_utf8(tmp_path: Path, baseline_mib: float) -> None:
    run = run_hostile("binary-garbage", tmp_path, *only(*CORE), *FAST)
    check_run(run, seconds=90, baseline=baseline_mib)
    failed = run.with_status("FAIL")
    assert "transport.utf8" in failed and failed <= {"transport.utf8", "transport.stdio.stdout-clean"}, run.summary()
    assert run.with_status("WARN") <= {"transport.stdio.strict-framing"}
    assert any("frame is not valid UTF-8 (invalid start byte at byte 0)" in m for m in run.messages("transport.utf8"))
    # The checks of the tests themselves still ran to completion.
    assert statuses_of(run, NO_PROMPT | PROMPT) == dict.fromkeys(sorted(NO_PROMPT | PROMPT), "PASS"), run.summary()


# ----------------------------------------------------------------- lifecycle
def test_agent_closing_stdout_but_running_on(tmp_path: Path, baseline_mib: float) -> None:
    """Closing its output proves nothing about the request that crossed it (the agent may never
    have read it): no FAIL, the tests it cut short INCONCLUSIVE with its stderr."""
    run = run_hostile("stdout-closed", tmp_path, *only(*CORE), *FAST)
    check_run(run, seconds=90, baseline=baseline_mib)
    assert not run.with_status("FAIL"), run.summary()
    assert run.statuses()["init.response.protocol-version"] == "PASS"
    for cid in ("session.new.unique-id", "jsonrpc.unknown-method", "content.text.baseline"):
        assert run.statuses()[cid] == "INCONCLUSIVE", run.summary()
        assert all("(agent stderr: hostile: closed my stdout, still running)" in m for m in run.messages(cid))
        assert all("nothing shows it had read the request" in m for m in run.messages(cid))
        # It exits by itself once teardown closes its stdin, and the message says how.
        assert all("; it exited with status 0 (agent stderr:" in m for m in run.messages(cid))


def test_agent_exiting_in_the_middle_of_a_turn(tmp_path: Path, baseline_mib: float) -> None:
    """A crash mid-turn is INCONCLUSIVE for the turn, never a jsonrpc.every-request-answered FAIL
    the order of nothing proves; the crash is shown with the agent's stderr."""
    run = run_hostile("exits-mid-turn", tmp_path, *only(*CORE), *FAST)
    check_run(run, seconds=90, baseline=baseline_mib)
    assert not run.with_status("FAIL"), run.summary()
    assert statuses_of(run, NO_PROMPT) == dict.fromkeys(sorted(NO_PROMPT), "PASS"), run.summary()
    assert run.statuses()["content.text.baseline"] == "INCONCLUSIVE"
    messages = run.messages("content.text.baseline")
    assert any("segmentation fault (simulated)" in m for m in messages), messages
    assert any("; it exited with status 3 (agent stderr:" in m for m in messages), messages
    # The id is the connection's next one: 2 on a fresh connection, more on a borrowed one.
    closed = r"the peer closed its output before answering session/prompt \(id \d+\)"
    assert any(re.search(closed, m) for m in messages), messages


def test_agent_ignoring_stdin_eof_and_sigterm(tmp_path: Path, baseline_mib: float) -> None:
    """Only SIGKILL ends it; each connection costs the two teardown grace periods (2 s each)."""
    tests = ("test_initialize_v1", "test_basic_prompt_turn", "test_exits_after_stdin_closes")
    run = run_hostile("immortal", tmp_path, *only(*tests), *FAST)
    check_run(run, seconds=90, baseline=baseline_mib)
    assert run.with_status("FAIL", "WARN") == set(), run.summary()
    # Exiting on stdin EOF is a MAY: not doing it is conformant, and noted (INFO).
    assert run.with_status("INFO") == {"transport.stdio.exit-on-stdin-close"}
    assert "still running 5 s after its stdin closed" in run.messages("transport.stdio.exit-on-stdin-close")[0]
    assert run.statuses()["init.response.protocol-version"] == run.statuses()["content.text.baseline"] == "PASS"


@pytest.mark.parametrize(
    ("name", "sleepers"),
    [
        ("grandchildren", {"same-group", "setpgid", "setsid"}),  # holding the pipes
        ("daemon", {"double"}),  # no pipes, no environment, its own session
        ("launcher", set()),  # the agent itself moved to a new process group and outlives its launcher
    ],
)
def test_agent_leaving_processes_behind(tmp_path: Path, baseline_mib: float, name: str, sleepers: set[str]) -> None:
    run = run_hostile(name, tmp_path, *only(*CORE), *FAST)
    check_run(run, seconds=90, baseline=baseline_mib)
    assert not run.with_status("FAIL", "WARN", "INCONCLUSIVE"), run.summary()
    # What it left behind was still running after stdin EOF: the agent did not (all) exit (a MAY).
    assert run.with_status("INFO") == {"transport.stdio.exit-on-stdin-close"}, run.summary()
    started = run.records("sleepers")
    assert {s["how"] for s in started} == sleepers
    # One escape of each kind per agent process: at least the pool's and the exit test's own.
    assert len(started) >= len(sleepers) * 2, "fewer escapes than agent processes: the attack did not run"


def test_agent_behind_an_exiting_launcher_is_judged_on_stdin_eof(tmp_path: Path) -> None:
    run = run_hostile("launcher", tmp_path, *only("test_exits_after_stdin_closes"), *FAST)
    assert run.statuses()["transport.stdio.exit-on-stdin-close"] == "INFO", run.summary()


# ------------------------------------------------------------------ requests
def test_agent_flooding_us_with_requests(tmp_path: Path, baseline_mib: float) -> None:
    """5,000 fs requests at once, answers read only afterwards: all answered, nothing deadlocks
    (answers wait in a bounded outbox, handlers in flight are bounded: see test_memory.py)."""
    run = run_hostile(
        "request-flood",
        tmp_path,
        *only("test_initialize_v1", "test_basic_prompt_turn"),
        "--acp-timeout=60",
        agent_env={"HOSTILE_FLOOD_REQUESTS": "5000"},
    )
    check_run(run, seconds=150, baseline=baseline_mib)
    assert not run.with_status("FAIL", "WARN", "INCONCLUSIVE"), run.summary()
    assert run.statuses()["fs.read.shape"] == "PASS"
    # Every one answered (file not found: the path is inside the sandbox, the file absent).
    assert run.records("request-flood") == [{"sent": 5000, "errors": 5000}]


def test_agent_reusing_our_request_ids(tmp_path: Path, baseline_mib: float) -> None:
    """Ids are per sender: the agent's requests 0, 1, 2, "0", "1" collide with ours and are
    answered as its own; nothing is confused or flagged."""
    run = run_hostile("id-collision", tmp_path, *only(*CORE), *FAST)
    check_run(run, seconds=90, baseline=baseline_mib)
    assert not run.with_status("FAIL", "WARN", "INCONCLUSIVE"), run.summary()
    seen = run.records("id-collision")
    assert seen and all(r["wrong"] == [] for r in seen), seen


# ------------------------------------------------------------------- sandbox
def test_agent_attacking_the_sandbox_over_the_wire(tmp_path: Path, baseline_mib: float) -> None:
    """fs and terminal requests aimed outside the sandbox: each refused with an error,
    nothing outside read or written, terminals show the sandbox's environment."""
    outside = tmp_path / "outside"
    outside.mkdir()
    canary = outside / "canary.txt"
    canary.write_text("CANARY-3f9a7c content that must never leave this file\n")
    marker = "USER-ONLY-7d1e5b-value"
    run = run_hostile(
        "sandbox-escape",
        tmp_path / "run",
        *only("test_basic_prompt_turn", "test_every_request_answered_exactly_once"),
        "--acp-timeout=10",
        agent_env={"HOSTILE_CANARY": str(canary)},
        suite_env={"HOSTILE_USER_ONLY_SETTING": marker},
    )
    check_run(run, seconds=90, baseline=baseline_mib)
    assert not run.with_status("FAIL", "WARN", "INCONCLUSIVE"), run.summary()
    assert canary.read_text() == "CANARY-3f9a7c content that must never leave this file\n"
    assert sorted(p.name for p in outside.iterdir()) == ["canary.txt"], "something was created outside"
    lines: list[str] = run.records("sandbox-escape")
    assert len(lines) >= 2 * 28, "the attack did not run in both tests"
    for line in lines:
        if line.startswith(("read ", "write ")):
            assert ": error -32602" in line or ": error -32002" in line, f"not refused: {line}"
    env_outputs = [line for line in lines if line.startswith(("terminal env", "terminal printenv"))]
    assert env_outputs and all("PWD=" in line for line in env_outputs)
    everything = "\n".join(lines) + run.files["report.json"] + run.files["report.md"]
    assert "CANARY-3f9a7c" not in everything
    assert marker not in everything, "the user's environment reached the agent through a terminal"


#: Tests that each need a prompt answered (or a turn to progress), in several modules.
PROMPT_TESTS = (
    "test_basic_prompt_turn",
    "test_cancel_while_streaming",
    "test_cancel_twice",
    "test_cancel_early_in_the_turn",
    "test_cancel_when_idle_leaves_the_session_usable",
    "test_rejected_tool_does_not_run",
    "test_stop_reason_refusal",
)


@pytest.mark.parametrize(
    ("name", "method"), [("answers-some", "session/prompt"), ("wrong-session-new-id", "session/new")]
)
def test_a_method_that_hangs_twice_is_not_waited_for_again(tmp_path: Path, name: str, method: str) -> None:
    """Two missed deadlines for one method, then every later test needing it ends at once,
    INCONCLUSIVE, naming where it was missed: a hanging peer costs two deadlines, not one per test."""
    run = run_hostile(name, tmp_path, *only(*PROMPT_TESTS), *FAST)
    # An answer under an id we never sent is one breach, of the echo clause: the request it leaves
    # without an answer under its own id is not also unanswered (Peer.strays_since); its deadline
    # still counts.
    clause = "jsonrpc.response-id-echo" if name == "wrong-session-new-id" else "jsonrpc.every-request-answered"
    assert clause in run.with_status("FAIL"), run.summary()
    if name == "wrong-session-new-id":
        assert "jsonrpc.every-request-answered" not in run.with_status("FAIL"), run.summary()
    else:
        missed = [m for m in run.messages("jsonrpc.every-request-answered", "FAIL") if method in m]
        assert 1 <= len(missed) <= 2, missed
    given_up = f"{method} not sent: the peer already let its deadline pass"
    gave_up = [
        t["message"]
        for c in run.report["clauses"]
        for t in c["tests"]
        if t["status"] == "INCONCLUSIVE" and given_up in t["message"]
    ]
    assert gave_up, run.summary()
    assert all(m.count("::test_") >= 2 for m in gave_up), gave_up[:1]  # both earlier tests named
