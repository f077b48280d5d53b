"""How long a fuzz example waits for the answer to a frame the spec forbids us to send.

Real adapters need ``--acp-timeout=30`` for their model turns; a peer that drops malformed lines
made every such example, its replay and each shrinking step wait that out (zed codex-acp: 20
minutes of a run).  Such a frame asks for a rejection, and what the peer says to it is a
robustness finding at most, so the wait is ``--acp-fuzz-patience`` while the peer writes nothing,
and up to the deadline while it does (it may be working on the frame).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from tests.e2e._suite_run import ROOT, run_suite

PY = sys.executable
AGENTS = ROOT / "tests" / "peers" / "patience_agents.py"
#: The campaign that sends strings escaping lone surrogates, bounded by its examples, not the clock.
CAMPAIGN = ("-k", "test_fuzz_survives_unusual_frames", "--acp-fuzz-seconds=600", "--acp-fuzz-shrink-seconds=2")
#: The campaign whose valid requests under unusual ids the stray-idless and late agents hold.
ODD_IDS = ("-k", "test_fuzz_odd_ids", "--acp-fuzz-seconds=600", "--acp-fuzz-shrink-seconds=2")
PATIENT = ("--acp-timeout=30", "--acp-fuzz-patience=1")


def test_a_peer_silent_on_frames_it_cannot_read_is_judged_after_the_patience(tmp_path: Path) -> None:
    run = run_suite(f"{PY} {AGENTS} silent", tmp_path, *CAMPAIGN, *PATIENT)
    assert run.statuses()["jsonrpc.parse-error"] == "WARN", run.stdout[-3000:]
    said = " ".join(run.messages("jsonrpc.parse-error", "WARN"))
    assert "no answer within 1.0 s, the last 1 s of it without a frame from the peer" in said, said


def test_the_patience_runs_from_the_peers_last_frame(tmp_path: Path) -> None:
    """A frame the peer writes just after ours for its own reasons restarts the patience; it does
    not buy a second whole one (waits in steps of the patience gave 2 s here)."""
    run = run_suite(f"{PY} {AGENTS} aside", tmp_path, *CAMPAIGN, *PATIENT)
    assert run.statuses()["jsonrpc.parse-error"] == "WARN", run.stdout[-3000:]
    said = run.messages("jsonrpc.parse-error", "WARN")
    waits = [float(w) for m in said for w in re.findall(r"no answer within ([0-9.]+) s", m)]
    assert waits and all(1.0 <= w < 1.9 for w in waits), said


def test_an_error_without_an_id_is_the_answer_to_a_frame_the_peer_could_not_read(tmp_path: Path) -> None:
    """zed codex-acp answers a line its parser rejects with -32700 and no ``id`` at all: that is
    its answer (a robustness finding: JSON-RPC wants id null), not silence to wait out."""
    run = run_suite(f"{PY} {AGENTS} idless", tmp_path, *CAMPAIGN, "--acp-timeout=30", "--acp-fuzz-patience=5")
    statuses = run.statuses()
    assert statuses["jsonrpc.parse-error"] not in ("WARN", "FAIL"), run.messages("jsonrpc.parse-error")
    assert statuses["jsonrpc.survives-invalid-input"] == "WARN", run.stdout[-3000:]
    said = " ".join(run.messages("jsonrpc.survives-invalid-input", "WARN"))
    assert "an error without an id" in said and "no answer" not in said, said


def test_a_peer_that_works_on_its_rejection_and_says_so_gets_the_deadline(tmp_path: Path) -> None:
    """1.5 s to answer, an extension notification every 0.3 s meanwhile: longer than the patience,
    and answered: no finding."""
    run = run_suite(f"{PY} {AGENTS} slow", tmp_path, *CAMPAIGN, *PATIENT)
    assert run.statuses()["jsonrpc.survives-invalid-input"] == "PASS", run.stdout[-3000:]
    assert not run.with_status("FAIL", "WARN"), {c: run.messages(c) for c in run.with_status("FAIL", "WARN")}


def test_an_error_without_an_id_after_a_valid_frame_does_not_end_its_wait(tmp_path: Path) -> None:
    """Before each valid odd-id request it is sent, the peer writes an error without an id (as a late
    answer to something earlier would come), then answers the request under its id 0.3 s later.
    That error answers no valid frame of the example: the wait goes on for the real answer (taken
    for the answer, it is judged "without an id: the id was readable", a jsonrpc.response-id-echo
    FAIL; seen with ``idless_ok`` forced on).  For a frame the spec forbids us to send it does end
    the wait, and the real answer coming after it is no answer "to nothing" (it was a
    jsonrpc.response-id-echo FAIL, provoked by forbidden input, until the campaign let such an id
    go unpaired: ``FrameFuzzer._exchange``; this test failed on it in 4 of 5 runs before)."""
    run = run_suite(f"{PY} {AGENTS} stray-idless", tmp_path, *ODD_IDS, "--acp-timeout=30", "--acp-fuzz-patience=1")
    statuses = run.statuses()
    assert statuses["jsonrpc.every-request-answered"] == "PASS", run.stdout[-3000:]
    # For a frame the spec forbids us to send it may end the wait (a robustness finding then).
    assert statuses["jsonrpc.response-id-echo"] == "PASS", run.messages("jsonrpc.response-id-echo")


def test_an_answer_after_the_deadline_is_no_second_finding(tmp_path: Path) -> None:
    """A valid odd-id request answered 1.5 s late, past a 1 s deadline: jsonrpc.every-request-answered
    FAILs once; the late answer, when it comes, is no "response to an id that matches no request"
    (jsonrpc.response-id-echo) on top."""
    run = run_suite(f"{PY} {AGENTS} late", tmp_path, *ODD_IDS, "--acp-timeout=1", "--acp-fuzz-patience=1")
    statuses = run.statuses()
    assert statuses["jsonrpc.every-request-answered"] == "FAIL", run.stdout[-3000:]
    assert statuses["jsonrpc.response-id-echo"] == "PASS", run.messages("jsonrpc.response-id-echo")
