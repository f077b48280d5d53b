"""The verdict and the per-clause statuses can never contradict each other."""

from __future__ import annotations

import json
import sys
import sysconfig
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from acp_conformance.clauses import registry
from acp_conformance.errors import ConfigurationError
from acp_conformance.reporting import RunResults
from acp_conformance.reporting import TestRecord as Record
from acp_conformance.results import ClauseResult, Status, adjust, breach_status

REG = registry()
CLIENT_CLAUSES = [c.id for c in REG.for_role("client")]
STATUSES = list(Status)


@settings(max_examples=200, deadline=None)
@given(
    results=st.lists(st.tuples(st.sampled_from(CLIENT_CLAUSES), st.sampled_from(STATUSES)), min_size=1, max_size=40),
    checked=st.sets(st.sampled_from(CLIENT_CLAUSES)),
)
def test_no_report_shows_a_must_fail_beside_a_conformant_verdict(
    results: list[tuple[str, Status]], checked: set[str]
) -> None:
    run = RunResults(registry=REG, role="client", command="c", checked=checked)
    run.add(Record("t::x", "passed", [ClauseResult(cid, status) for cid, status in results]))
    data = run.to_json()
    fails = [c for c in data["clauses"] if c["status"] == "FAIL"]
    assert all(REG.get(c["id"]).mandatory for c in fails), "only a MUST / MUST NOT can be FAIL"
    if fails:
        assert not data["verdict"]["conformant"]
        assert {c["id"] for c in fails} <= set(data["verdict"]["failed_mandatory"])
    warned = [c for c in data["clauses"] if c["status"] == "WARN"]
    assert all(REG.get(c["id"]).level in ("SHOULD", "SHOULD NOT") for c in warned), "WARN is for SHOULD only"
    infos = [c for c in data["clauses"] if c["status"] == "INFO"]
    assert all(REG.get(c["id"]).level == "MAY" for c in infos), "INFO is for MAY only"


def test_a_fail_on_a_clause_the_bindings_call_unchecked_still_fails_the_verdict() -> None:
    # The client report once said CONFORMANT beside ext.method.underscore FAIL (then a MUST, role
    # both): the clause was in the client coverage gaps, so its FAIL was skipped.
    clause = "jsonrpc.every-request-answered"
    assert REG.get(clause).level == "MUST" and REG.get(clause).role == "both"
    run = RunResults(registry=REG, role="client", command="c", checked=set())
    run.add(Record("t::x", "failed", [ClauseResult(clause, Status.FAIL, "no answer")]))
    verdict = run.verdict()
    assert not verdict["conformant"]
    assert verdict["failed_mandatory"] == [clause]
    assert clause not in verdict["coverage_gaps"]


def test_levels_decide_the_status_of_a_breach() -> None:
    for clause in REG:
        expected = {"MUST": Status.FAIL, "MUST NOT": Status.FAIL, "SHOULD": Status.WARN, "SHOULD NOT": Status.WARN}
        assert breach_status(clause) is expected.get(clause.level, Status.INFO)
        for status in (Status.FAIL, Status.WARN, Status.INFO):
            assert adjust(clause, status) is breach_status(clause)
        for status in (Status.PASS, Status.NOT_APPLICABLE, Status.INCONCLUSIVE, Status.NOT_TESTED):
            assert adjust(clause, status) is status


def test_reports_carry_no_path_of_the_machine_that_wrote_them(tmp_path: Path) -> None:
    """A report is read and committed elsewhere: the checkout, the Python environment, the home
    and temporary directories never appear in it, whatever message or evidence quoted them."""
    checkout = Path(__file__).resolve().parents[2]
    site = sysconfig.get_paths()["purelib"]
    quoted = [
        f"{checkout}/scenarios/agent/cancel-long-turn.yaml:36 steps[7]: expected cancelled",
        f"Traceback: File {site}/acp/connection.py, line 3",
        f"{sys.prefix}/bin/python -m mock_agent.relay --control unix:{tmp_path}/c.sock",
        "File /opt/other-venv/lib/python3.12/site-packages/x.py; /usr/local/bin/node dist/index.js",
        "at run (/opt/peers/node_modules/acpx/dist/queue.js:1611:6)",
        f"config at {Path.home()}/.config/agent.json",
    ]
    run = RunResults(registry=REG, role="agent", command=f"{sys.prefix}/bin/python -m mock_agent", checked=set())
    run.add(Record("t::x", "failed", [ClauseResult("cancel.stop-reason", Status.FAIL, m) for m in quoted]))
    text = json.dumps(run.to_json()) + run.to_markdown()
    for machine in (str(checkout), site, sys.prefix, tempfile.gettempdir() + "/", str(Path.home()) + "/", "/opt/"):
        assert machine not in text
    assert "scenarios/agent/cancel-long-turn.yaml:36" in text  # a checkout path stays, relative
    assert "<site-packages>/acp/connection.py" in text and "python -m mock_agent.relay" in text
    assert "(node_modules/acpx/dist/queue.js:1611:6)" in text


def test_a_partial_run_judges_its_selection_and_never_says_conformant() -> None:
    run = RunResults(
        registry=REG,
        role="agent",
        command="a",
        checked={"cancel.stop-reason", "cancel.no-error"},
        selection="--acp-clause cancel.*",
        selected=frozenset({"cancel.stop-reason", "cancel.no-error"}),
    )
    run.add(Record("t::a", "passed", [ClauseResult("cancel.stop-reason", Status.PASS)]))
    v = run.verdict()
    assert v["scope"] == "selected" and v["conformant"] is None and v["selected_pass"] and run.passed()
    assert v["judged"] == ["cancel.stop-reason"] and v["not_tested_mandatory"] == []
    assert run.verdict_line().startswith("SELECTED CLAUSES: all PASS (1 of 2 selected clauses judged")
    run.add(Record("t::b", "failed", [ClauseResult("cancel.no-error", Status.FAIL, "an error")]))
    assert not run.passed() and run.verdict()["failed_mandatory"] == ["cancel.no-error"]
    assert run.verdict_line().startswith("SELECTED CLAUSES: 1 FAIL (cancel.no-error)")
    full = RunResults(registry=REG, role="agent", command="a", checked={"cancel.stop-reason", "cancel.no-error"})
    full.add(Record("t::a", "passed", [ClauseResult("cancel.stop-reason", Status.PASS)]))
    assert full.verdict()["scope"] == "full" and full.verdict()["conformant"] is False  # the rest NOT_TESTED


def test_an_interrupted_run_is_partial_and_says_so() -> None:
    """Ctrl-C or SIGTERM half-way: what finished is reported, no conformance verdict either way."""
    run = RunResults(registry=REG, role="agent", command="a", checked={"cancel.stop-reason", "cancel.no-error"})
    run.add(Record("t::a", "passed", [ClauseResult("cancel.stop-reason", Status.PASS)]))
    run.add(Record("t::b", "failed", [ClauseResult("cancel.no-error", Status.FAIL, "an error")]))
    run.interrupted = True
    v = run.verdict()
    assert v["interrupted"] is True and v["conformant"] is None and v["failed_mandatory"] == ["cancel.no-error"]
    assert run.verdict_line().startswith("INTERRUPTED after 2 tests: 2 clauses judged, 1 FAIL (cancel.no-error)")
    assert run.to_json()["interrupted"] is True


def test_selection_by_glob_prefix_area_and_level() -> None:
    cancel = {c.id for c in REG.for_role("agent") if c.id.startswith("cancel.")}
    assert set(REG.select("agent", ["cancel.*"])) == cancel == set(REG.select("agent", ["cancel"]))
    musts = set(REG.select("agent", ["cancel"], levels=["must"]))
    assert musts == {c for c in cancel if REG.get(c).level in ("MUST", "MUST NOT")} and musts < cancel
    assert set(REG.select("agent", areas=["cancellation"])) == {
        c.id for c in REG.for_role("agent") if c.area == "cancellation"
    }
    assert REG.select("agent", ["cancel.stop-reason", "init.first"]) == [
        c.id for c in REG.for_role("agent") if c.id in ("cancel.stop-reason", "init.first")
    ]
    for bad, message in (
        ({"patterns": ["cancel.stop-" + "reasn"]}, "Did you mean cancel.stop-reason"),  # split: an unregistered id
        ({"areas": ["cancel"]}, "unknown area 'cancel'; the areas are:"),
        ({"levels": ["OPTIONAL"]}, "unknown level 'OPTIONAL'"),
        ({"patterns": ["elicit.*"], "levels": ["MAY"], "areas": ["jsonrpc"]}, "names no agent clause"),
    ):
        with pytest.raises(ConfigurationError, match=message):
            REG.select("agent", **bad)


def test_an_exception_group_of_peer_errors_is_its_first_peer_error() -> None:
    """Concurrent tasks failing together when the peer dies (anyio raises them as a group) are
    the peer's doing, not a suite bug; a group holding anything else stays a suite error."""
    from acp_conformance.errors import ConformanceFailure, PeerExited
    from acp_conformance.plugin.outcomes import cause

    gone = PeerExited("the peer closed its output", None, [])
    group = BaseExceptionGroup("two tasks", [gone, PeerExited("again", None, [])])
    assert cause(group) is gone
    finding = ConformanceFailure("jsonrpc.every-request-answered", "an answer", "none")
    assert cause(BaseExceptionGroup("g", [gone, BaseExceptionGroup("inner", [finding])])) is finding
    bug = BaseExceptionGroup("g", [gone, KeyError("suite bug")])
    assert cause(bug) is bug
    assert cause(None) is None and cause(gone) is gone


def test_mandatory_clauses_left_inconclusive_are_never_a_conformant_verdict() -> None:
    """An agent that exits before answering anything leaves every clause INCONCLUSIVE and fails
    none: the verdict says INCONCLUSIVE and names them; the exit status and JUnit agree."""
    from acp_conformance.reporting.junit import junit_xml

    checked = {"cancel.stop-reason", "cancel.no-error"}
    run = RunResults(registry=REG, role="agent", command="a", checked=checked)
    run.add(Record("t::a", "passed", [ClauseResult("cancel.stop-reason", Status.PASS)]))
    run.add(Record("t::b", "skipped", [ClauseResult("cancel.no-error", Status.INCONCLUSIVE, "could not be judged")]))
    v = run.verdict()
    assert "cancel.no-error" in v["inconclusive_mandatory"] and v["conformant"] is False and not run.passed()
    assert run.verdict_line().startswith("INCONCLUSIVE (0 mandatory FAIL, ")
    assert "mandatory INCONCLUSIVE (" in run.verdict_line() and "cancel.no-error" in run.verdict_line()
    xml = junit_xml(run.to_json()).decode()
    assert 'name="verdict.unjudged-mandatory"' in xml and "cancel.no-error" in xml
    # A FAIL beside it: NOT CONFORMANT, the FAIL decides.
    run.add(Record("t::c", "failed", [ClauseResult("cancel.stop-reason", Status.FAIL, "bad")]))
    assert run.verdict_line().startswith("NOT CONFORMANT (1 mandatory FAIL")
    # A partial run: no FAIL is still "no FAIL", never "all PASS", while a selected MUST is unjudged.
    part = RunResults(
        registry=REG,
        role="agent",
        command="a",
        checked=checked,
        selection="--acp-clause cancel.*",
        selected=frozenset(checked),
    )
    part.add(Record("t::b", "skipped", [ClauseResult("cancel.no-error", Status.INCONCLUSIVE, "a race")]))
    assert part.verdict_line().startswith("SELECTED CLAUSES: no FAIL, 1 MUST INCONCLUSIVE (cancel.no-error)")


def test_an_inconclusive_verdict_says_why_commonest_reason_first() -> None:
    from acp_conformance.reporting import inconclusive_reasons

    checked = {"cancel.stop-reason", "cancel.no-error", "cancel.updates-before-response"}
    run = RunResults(registry=REG, role="agent", command="a", checked=checked)
    gone = "could not be judged: the agent exited (agent stderr: fatal: no config file found)"
    run.add(Record("t::a", "skipped", [ClauseResult(c, Status.INCONCLUSIVE, gone) for c in sorted(checked)[:2]]))
    run.add(Record("t::b", "skipped", [ClauseResult("cancel.updates-before-response", Status.INCONCLUSIVE, "a race")]))
    data = run.to_json()
    assert inconclusive_reasons(data) == [(gone, 2), ("a race", 1)]
    assert f"INCONCLUSIVE (2 MUST clauses): {gone}" in run.terminal_lines(data)
    assert f"- INCONCLUSIVE (2 MUST clauses): {gone}" in run.to_markdown()


def test_a_completed_test_passes_no_clause_it_did_not_judge() -> None:
    """A bound clause nothing recorded is INCONCLUSIVE after a test that passed (its check may have
    found nothing to judge), not a PASS without evidence; a clause judged wherever its traffic
    occurs (passive, or the suite agent's per-request judgements) is not exercised here."""
    from acp_conformance.harness.base import HarnessBase
    from acp_conformance.plugin.bindings import passive_clauses
    from acp_conformance.plugin.outcomes import UNJUDGED, test_results

    harness = HarnessBase("t::x")
    harness.record("perm.auto", Status.PASS, "an option of kind allow_*")
    got = test_results(
        ["perm.auto", "perm.cancelled-on-cancel", "session.new.params"],
        harness,
        "passed",
        None,
        passive_clauses("client"),
    )
    by = {r.clause: r for r in got}
    assert by["perm.auto"].status is Status.PASS
    assert (by["perm.cancelled-on-cancel"].status, by["perm.cancelled-on-cancel"].message) == (
        Status.INCONCLUSIVE,
        UNJUDGED,
    )
    assert by["session.new.params"].status is Status.NOT_APPLICABLE


def test_a_conforming_judgement_is_a_pass_with_what_was_seen_and_a_breach_outweighs_it() -> None:
    from acp_conformance.checks import passive_results
    from acp_conformance.core.events import Violation
    from acp_conformance.transcript import Transcript

    t = Transcript()
    t.add("in", b'{"jsonrpc":"2.0","id":0,"method":"initialize","params":{}}')
    t.conformed("session.new.params", "session/new carried cwd and mcpServers")
    t.conformed("session.new.params", "session/new carried cwd and mcpServers")
    t.conformed("mode.set.valid", "session/set_mode named 'a', one of ['a']")
    t.violation(Violation("mode.set.valid", "session/set_mode names 'x'", "error", None, None))
    by = {(r.clause, r.status): r.message for r in passive_results(t, "client")}
    assert by[("session.new.params", Status.PASS)] == "session/new carried cwd and mcpServers (1 more judged alike)"
    assert ("mode.set.valid", Status.PASS) not in by and ("mode.set.valid", Status.WARN) in by


def test_a_report_names_the_commit_and_says_when_the_suite_code_differs_from_it(tmp_path: Path) -> None:
    import shutil
    import subprocess

    from acp_conformance.plugin.reporter import _commit

    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    git = ["git", "-C", str(tmp_path), "-c", "user.name=t", "-c", "user.email=t@example.org"]
    (tmp_path / "acp_conformance").mkdir()
    (tmp_path / "acp_conformance" / "x.py").write_text("A = 1\n")
    (tmp_path / "notes.txt").write_text("n\n")
    (tmp_path / ".gitignore").write_text("__pycache__/\n")
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "c"], check=True)
    head = subprocess.run([*git, "rev-parse", "--short=12", "HEAD"], capture_output=True, text=True).stdout.strip()
    (tmp_path / "notes.txt").write_text("changed, but not the suite's code\n")
    (tmp_path / "scratch.py").write_text("new, but not the suite's code\n")
    (tmp_path / "acp_conformance" / "__pycache__").mkdir()
    (tmp_path / "acp_conformance" / "__pycache__" / "x.pyc").write_bytes(b"ignored")
    assert _commit(tmp_path) == head
    # A file of the suite not yet added to git judges as much as a changed one.
    (tmp_path / "acp_conformance" / "new.py").write_text("B = 1\n")
    assert _commit(tmp_path) == f"{head}+modified"
    (tmp_path / "acp_conformance" / "new.py").unlink()
    (tmp_path / "acp_conformance" / "x.py").write_text("A = 2\n")
    assert _commit(tmp_path) == f"{head}+modified"


def test_a_silence_to_an_extension_request_is_one_finding_of_the_narrower_clause() -> None:
    """``ext.request.respond`` is the MUST for exactly these requests: the connection charges the
    silence there, and the transcript gives ``jsonrpc.every-request-answered`` neither a second
    FAIL nor a PASS that would deny it."""
    from acp_conformance.checks import passive_results
    from acp_conformance.core.events import Violation
    from acp_conformance.transcript import Transcript

    t = Transcript()
    t.add("in", b'{"jsonrpc":"2.0","id":0,"result":{}}')
    t.violation(Violation("ext.request.respond", "no response to _x/y (id 3) within 1 s", "error", None, None))
    statuses = {(r.clause, r.status) for r in passive_results(t, "agent")}
    assert ("ext.request.respond", Status.FAIL) in statuses
    assert not [s for c, s in statuses if c == "jsonrpc.every-request-answered"]
