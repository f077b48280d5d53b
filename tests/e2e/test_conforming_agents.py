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
    run = run_suite(
        f"{PY} {CONFORMING} {name}", tmp_path, "-k", "tool or scenario", "--acp-timeout=5", "-n", "2"
    )
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
