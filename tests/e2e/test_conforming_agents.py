"""Conforming agents the suite once misjudged: their runs show no finding at all.

Races are judged only where the order is provable.
A conforming agent whose turns end at once (``tests/peers/conforming_agents.py fast-turns``)
makes every cancel a race with the turn's own end: its ``end_turn`` may already be in the pipe
when the cancel arrives, and that is conforming.  The cancellation tests and the cancellation
scenarios run 20 times in a row against it (``--keep-duplicates``): never a FAIL or a WARN,
whatever the interleaving.  The agents that really ignore a cancel while the suite holds their
turn (a permission or an fs request we have not answered) keep failing on the right clause
(``tests/e2e/test_broken_agents.py``, and below for the one a fast agent would hide).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.e2e._suite_run import ROOT, run_suite

PY = sys.executable
CONFORMING = ROOT / "tests" / "peers" / "conforming_agents.py"
SUITE = ROOT / "acp_conformance" / "suite" / "agent"
REPEATS = 20


def test_a_fast_conforming_agent_never_fails_a_cancellation_race(tmp_path: Path) -> None:
    paths = [str(SUITE / "test_cancellation.py"), str(SUITE / "test_scenarios.py")] * REPEATS
    run = run_suite(
        f"{PY} {CONFORMING} fast-turns",
        tmp_path,
        "--keep-duplicates",
        "-k",
        "test_cancel or cancel- or permission-",
        "-n",
        "2",
        *paths,
        timeout=600,
    )
    ran = [t for c in run.report["clauses"] for t in c["tests"] if "cancel" in t["nodeid"]]
    assert len({t["nodeid"] for t in ran}) >= 10, run.stdout[-3000:]
    findings = run.with_status("FAIL", "WARN")
    assert not findings, {c: run.messages(c) for c in findings}
    judged = run.statuses()
    # The held races are still judged (and pass), the unheld ones are INCONCLUSIVE at worst.
    assert judged["perm.agent-cancel-race"] == "PASS"
    assert judged["cancel.stop-reason"] == "PASS"


@pytest.mark.parametrize(
    ("name", "clauses"),
    [
        # Two tool calls in one turn, each updated after its own announcement: no tool.update.known-id WARN.
        ("two-tool-calls", ("tool.update.known-id", "prompt.tool-in-progress")),
        # The tool call announced only once it runs, with in_progress: no prompt.tool-in-progress WARN.
        ("announces-when-running", ("prompt.tool-in-progress", "tool.report")),
    ],
)
def test_conforming_tool_call_orders_get_no_finding(tmp_path: Path, name: str, clauses: tuple[str, ...]) -> None:
    run = run_suite(f"{PY} {CONFORMING} {name}", tmp_path, "-k", "tool or scenario", "--acp-timeout=5", "-n", "2")
    findings = run.with_status("FAIL", "WARN", "INFO")
    assert not findings, {c: run.messages(c) for c in findings}
    for clause in clauses:
        assert run.statuses()[clause] == "PASS", clause


def test_session_metadata_after_a_cancelled_turn_is_no_late_output(tmp_path: Path) -> None:
    """A title pushed after a cancelled turn's response is not turn output: the cancellation
    tests and scenarios find nothing (they once failed cancel.updates-before-response on it)."""
    run = run_suite(
        f"{PY} {CONFORMING} retitles-after-each-turn",
        tmp_path,
        "-k",
        "test_cancel or cancel- or permission-",
        "-n",
        "2",
        str(SUITE / "test_cancellation.py"),
        str(SUITE / "test_scenarios.py"),
    )
    findings = run.with_status("FAIL", "WARN")
    assert not findings, {c: run.messages(c) for c in findings}
    assert run.statuses()["cancel.updates-before-response"] == "PASS"


def test_an_agent_with_every_quirk_the_spec_allows_gets_no_finding(tmp_path: Path) -> None:
    """String request ids, frames written in pieces, ``_meta`` on everything, a new session's
    commands pushed before its ``session/new`` answer, session metadata pushed after it, a thought
    and a plan opening every turn, session ids that look like paths, the prompt echoed back, stderr
    full of logs, one session per session/list page, no deleting a session still open (the suite
    closes it first), a cancelled turn's pending requests withdrawn with ``$/cancel_request`` and
    the turn ended without waiting for their answers: the whole suite finds nothing, and judges
    the updates it would not have seen otherwise.  (``slow-answers``, every answer 0.3 s late, and
    ``auth-optional`` are run by hand: 75 s, and INCONCLUSIVE without --acp-auth-method.)"""
    run = run_suite(f"{PY} {CONFORMING} all-unusual", tmp_path, "-n", "2")
    findings = run.with_status("FAIL", "WARN", "INFO")
    assert not findings, {c: run.messages(c) for c in findings}
    assert "ACP verdict: CONFORMANT" in run.stdout, run.stdout[-2000:]
    for clause in (
        "update.commands.shape",
        "update.session-info.shape",
        "perm.agent-honours-outcome",
        "session.delete.response",
    ):
        assert run.statuses()[clause] == "PASS", clause


def test_options_that_depend_on_another_are_no_incomplete_answer(tmp_path: Path) -> None:
    """An agent that offers its model choice in one mode only answers a change of mode without it
    (session-config-options.mdx: the complete state "allows Agents to reflect dependent changes");
    set back, the model is there again: config.set.response-complete PASSes (it once FAILed).  Its
    config_option_update after the change leaves the model out too, as the complete state read
    after it does: config.update.complete PASSes (it once WARNed)."""
    run = run_suite(
        f"{PY} {CONFORMING} mode-dependent-models",
        tmp_path,
        "--acp-clause",
        "config.set.response-complete",
        "--acp-clause",
        "config.update.complete",
    )
    assert run.statuses()["config.set.response-complete"] == "PASS", run.messages("config.set.response-complete")
    assert run.statuses()["config.update.complete"] == "PASS", run.messages("config.update.complete")


def test_a_turn_still_winding_down_at_the_deadline_is_not_judged_unanswered(tmp_path: Path) -> None:
    """An agent that, once its turn is cancelled, streams what it is doing for eight seconds before
    answering ``cancelled``: past a two-second deadline the turn is at work, not silent.
    cancelreq.must-answer is INCONCLUSIVE, saying so (it once FAILed); how soon a cancelled turn
    ends is cancel.stop-asap's, a SHOULD."""
    run = run_suite(
        f"{PY} {CONFORMING} winds-down-slowly",
        tmp_path,
        "--acp-timeout=2",
        "-k",
        "test_cancel_request_for_the_prompt_gets_one_answer",
    )
    assert run.statuses()["cancelreq.must-answer"] == "INCONCLUSIVE"
    assert any("kept streaming turn output" in m for m in run.messages("cancelreq.must-answer"))
    assert not run.with_status("FAIL"), {c: run.messages(c) for c in run.with_status("FAIL")}


def test_logout_from_an_agent_that_never_needed_authentication_is_no_finding(tmp_path: Path) -> None:
    """Authentication offered but never required, logout advertised: after a logout a new session
    needs no authentication, as none ever did.  auth.logout.reauth is NOT_APPLICABLE, saying why
    (it was a WARN)."""
    run = run_suite(
        f"{PY} {CONFORMING} auth-optional-with-logout",
        tmp_path,
        "--acp-auth-method=token",
        "--acp-clause",
        "auth.*",
    )
    assert run.statuses()["auth.logout.reauth"] == "NOT_APPLICABLE", run.messages("auth.logout.reauth")
    assert "require no authentication" in run.messages("auth.logout.reauth")[0]
    assert not run.with_status("FAIL", "WARN"), {c: run.messages(c) for c in run.with_status("FAIL", "WARN")}


def test_an_agent_that_refuses_every_prompt_is_never_failed(tmp_path: Path) -> None:
    """A conforming agent that does nothing (every turn ends ``refusal`` at once) breaks no clause:
    what needs a tool call, a permission or a running turn is INCONCLUSIVE or NOT_APPLICABLE, the
    verdict INCONCLUSIVE, never NOT CONFORMANT."""
    run = run_suite(f"{PY} {CONFORMING} refuses-everything", tmp_path, "-n", "2")
    findings = run.with_status("FAIL", "WARN", "INFO")
    assert not findings, {c: run.messages(c) for c in findings}
    statuses = run.statuses()
    assert statuses["cancel.stop-reason"] == "INCONCLUSIVE"
    assert statuses["perm.agent-honours-outcome"] in ("INCONCLUSIVE", "NOT_APPLICABLE")
    assert "ACP verdict: INCONCLUSIVE" in run.stdout, run.stdout[-2000:]


def test_an_agent_offering_no_reject_option_is_judged_on_the_cancelled_answer(tmp_path: Path) -> None:
    """The agent picks its permission options (tool-calls.mdx); one offering "Allow once" only gets
    ``cancelled`` where the suite would reject, and its tool is still judged not to run after it:
    no finding, and perm.agent-honours-outcome PASSes rather than going unjudged."""
    run = run_suite(f"{PY} {CONFORMING} allow-only-options", tmp_path, "--acp-clause=perm.*", "-n", "2")
    findings = run.with_status("FAIL", "WARN", "INFO")
    assert not findings, {c: run.messages(c) for c in findings}
    assert run.statuses()["perm.agent-honours-outcome"] == "PASS", run.messages("perm.agent-honours-outcome")
    assert run.statuses()["perm.option.shape"] == "PASS"


def test_an_agent_that_handles_every_extension_name_is_not_judged_on_unknown_ones(tmp_path: Path) -> None:
    """A catch-all extension handler answers our made-up extension names with a result: that it
    "doesn't recognize" them (extensibility.mdx's condition for -32601) is not shown, so
    ext.request.unknown and jsonrpc.unknown-method are NOT_APPLICABLE, saying why (it once WARNed)."""
    run = run_suite(
        f"{PY} {CONFORMING} catch-all-extensions",
        tmp_path,
        "--acp-clause=ext.request.unknown",
        "--acp-clause=jsonrpc.unknown-method",
    )
    findings = run.with_status("FAIL", "WARN", "INFO")
    assert not findings, {c: run.messages(c) for c in findings}
    assert run.statuses()["ext.request.unknown"] == "NOT_APPLICABLE", run.stdout[-2000:]
    assert any("catch-all" in m for m in run.messages("ext.request.unknown", "NOT_APPLICABLE"))


def test_an_error_answered_after_later_requests_is_no_silence(tmp_path: Path) -> None:
    """JSON-RPC lets a peer answer in any order: an agent whose error for an unparseable line or an
    invalid request comes after its answers to the requests behind it is not silent.  The fuzz
    campaigns read silence off those answers; the example reported is run again with its answer
    waited for, which comes: INCONCLUSIVE with why, not the WARN it once was."""
    run = run_suite(
        f"{PY} {CONFORMING} late-errors-to-malformed-lines",
        tmp_path,
        "-k",
        "test_fuzz_unparseable_lines or test_fuzz_invalid_requests",
        "-n",
        "2",
    )
    findings = run.with_status("FAIL", "WARN", "INFO")
    assert not findings, {c: run.messages(c) for c in findings}
    for clause in ("jsonrpc.parse-error", "jsonrpc.invalid-request"):
        assert run.statuses()[clause] == "INCONCLUSIVE", clause
        assert any("an answer came" in m for m in run.messages(clause, "INCONCLUSIVE")), run.messages(clause)
