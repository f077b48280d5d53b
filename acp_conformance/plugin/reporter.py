"""From test outcomes to the per-clause verdict: the worker side and the controller side.

On the side that runs a test (an xdist worker, or the only process), ``collect`` turns the
harness's results and the test's outcome into clause results and ships them in the teardown
report's ``user_properties``, which xdist carries to the controller.  There ``Reporter`` adds
them to the run, writes the JSON and Markdown reports, prints the per-clause summary and sets
the exit status from the verdict (not from the test outcomes: a WARN passes, a FAIL judged on
the traffic of a passing test fails the run).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from acp_conformance.clauses import registry
from acp_conformance.errors import ConformanceFailure
from acp_conformance.plugin import options
from acp_conformance.plugin.bindings import checked_clauses, passive_clauses
from acp_conformance.plugin.keys import HARNESS, POOL_OUTPUT, STATE
from acp_conformance.plugin.markers import marked_clauses
from acp_conformance.plugin.outcomes import is_suite_error, test_results
from acp_conformance.plugin.state import AcpState
from acp_conformance.redaction import redactor
from acp_conformance.reporting import RunResults, TestRecord
from acp_conformance.reporting.baseline import GateResult, compare, write_baseline
from acp_conformance.results import ClauseResult, Status

__all__ = ["Reporter", "collect"]

#: item.stash: how the test body ended (``rep.outcome`` and the exception), kept for teardown.
_CALL = pytest.StashKey[tuple[str, BaseException | None]]()


def collect(item: pytest.Item, call: pytest.CallInfo[None], rep: pytest.TestReport) -> None:
    """The worker side of ``pytest_runtest_makereport``, for tests that hold a harness."""
    harness = item.stash.get(HARNESS, None)
    if harness is None:
        return
    if call.when == "call" and rep.passed and harness.pending_failure is not None:
        # A MUST judged without stopping the test failed after the last connection closed.
        pending = harness.pending_failure
        harness.pending_failure = None
        harness.body_completed = True
        rep.outcome = "failed"
        rep.longrepr = str(pending)
        call = pytest.CallInfo.from_call(lambda: _raise(pending), when="call")
    if call.when == "call" or (call.when == "setup" and rep.outcome != "passed"):
        exc = call.excinfo.value if call.excinfo is not None else None
        item.stash[_CALL] = (rep.outcome, exc)
        if rep.failed:
            evidence = harness.evidence()
            if evidence:
                rep.sections.append(("acp transcript (most recent last)", evidence))
    if call.when == "call" and rep.failed:
        _expected_by_baseline(item, call, rep)
    if rep.failed:
        # pytest's own rendering of a failure quotes observed values: mask them like the reports.
        redact = redactor()
        if rep.longrepr is not None:
            # Flattening the structured repr to a string would cost pytest's short summary its
            # message line ("acp_agent = <acp_conforma..."): only a repr that shows a secret is.
            text = str(rep.longrepr)
            masked = redact(text)
            if masked != text:
                rep.longrepr = masked
        rep.sections = [(title, redact(text)) for title, text in rep.sections]
    if call.when != "teardown":
        return
    outcome, exc = item.stash.get(_CALL, ("error", None))
    marked = marked_clauses(item)
    results = test_results(marked, harness, outcome, exc, passive_clauses(harness.peer_word))
    rep.user_properties.append(("acp_results", [r.to_json() for r in results]))
    if harness.peer_info is not None:
        rep.user_properties.append(("acp_peer", harness.peer_info))
    del item.stash[HARNESS]  # its transcripts are in the report now; keep no harness past its test


def _expected_by_baseline(item: pytest.Item, call: pytest.CallInfo[None], rep: pytest.TestReport) -> None:
    """A test failing on a clause the baseline lists is pytest's xfail, with the baseline's reason:
    the terminal shows it as known, and pytest's exit status no longer counts it (the reporter's
    gate still fails the run on a new FAIL or a stale entry)."""
    state = item.config.stash.get(STATE, None)
    exc = call.excinfo.value if call.excinfo is not None else None
    if state is None or state.baseline is None or not isinstance(exc, ConformanceFailure):
        return
    listed = state.baseline.for_role(state.role)
    if exc.clause_id in listed:
        rep.outcome = "skipped"
        reason = listed[exc.clause_id]
        rep.wasxfail = f"expected by {state.baseline.path}: {exc.clause_id}" + (f" ({reason})" if reason else "")


def run_metadata(config: pytest.Config, state: AcpState) -> dict[str, Any]:
    """What a stranger needs to rerun this exactly: versions, platform, options, the fuzz seed."""
    import platform

    from acp_conformance import __version__

    return {
        "suite_version": __version__,
        "suite_commit": _commit(),
        "python": platform.python_version(),
        "pytest": pytest.__version__,
        "platform": f"{platform.system()} {platform.machine()}",
        "args": [str(a) for a in config.invocation_params.args],
        "fuzz": state.fuzz_line,
        "schema_pin": state.schema.version,
        "schema_sha256": state.schema.sha256,
        "workers": getattr(config.option, "numprocesses", None) or 0,
    }


def _commit(root: Path | None = None) -> str | None:
    """The suite's git commit when run from a checkout (a wheel has none), with ``+modified`` when
    the suite's code differs from it: a report names the code that judged, and a commit alone
    would name code that did not."""
    import subprocess

    root = root or Path(__file__).resolve().parents[2]
    if not (root / ".git").exists():
        return None
    git = ["git", "-C", str(root)]
    try:
        out = subprocess.run([*git, "rev-parse", "--short=12", "HEAD"], capture_output=True, text=True, timeout=5)
        code = ["acp_conformance", "mock_agent", "mock_client", "scenarios"]
        dirty = subprocess.run(
            # Untracked files count (a new module judges as much as a changed one); ignored ones
            # (__pycache__) do not.
            [*git, "status", "--porcelain", "--untracked-files=normal", "--", *code],
            capture_output=True,
            text=True,
            timeout=5,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    commit = out.stdout.strip()
    if not commit:
        return None
    return f"{commit}+modified" if dirty.returncode != 0 or dirty.stdout.strip() else commit


def _raise(exc: ConformanceFailure) -> None:
    raise exc


class Reporter:
    """Controller-side: collects per-test results, writes reports, sets the exit status."""

    def __init__(self, config: pytest.Config, state: AcpState) -> None:
        self.config = config
        self.state = state
        self.run = RunResults(
            registry=registry(),
            role=state.role,
            command=state.command,
            checked=checked_clauses(state.role),
            passive=passive_clauses(state.role),
            schema=state.schema.describe(),
            selection=options.partial_run(config),
            selected=frozenset(state.clauses),
        )
        #: ``--collect-only`` runs nothing: no verdict, no report, pytest's own exit status.
        self.collect_only = bool(config.option.collectonly)
        self._gate_result: GateResult | None = None
        #: The report data, made once at the end of the session.
        self._data: dict[str, Any] | None = None
        #: Tests that failed for anything but a clause the baseline expects.
        self._failed_tests: set[str] = set()
        #: Tests whose outcome their clause results fully account for (no suite error): a pytest
        #: failure of one of them (a peer that exited, a FAIL) is already in the verdict.
        self._accounted: set[str] = set()
        self._durations: dict[str, float] = {}
        self.run.extra["run"] = run_metadata(config, state)

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.failed:
            self._failed_tests.add(report.nodeid)
        self._durations[report.nodeid] = self._durations.get(report.nodeid, 0.0) + report.duration
        if report.when != "teardown":
            return
        props: dict[str, Any] = dict(report.user_properties)
        raw = props.get("acp_results")
        if raw is None:
            return
        results = [ClauseResult.from_json(r) for r in raw]
        if not any(is_suite_error(r) for r in results):
            self._accounted.add(report.nodeid)
        if self.run.peer is None and props.get("acp_peer"):
            self.run.peer = props["acp_peer"]
        outcome = "failed" if any(r.status is Status.FAIL for r in results) else "passed"
        fails = {r.clause for r in results if r.status is Status.FAIL}
        if self.state.baseline is not None and fails and fails <= set(self.state.baseline.for_role(self.state.role)):
            self._failed_tests.discard(report.nodeid)  # failed only on expected clauses
        self.run.add(TestRecord(report.nodeid, outcome, results, self._durations.pop(report.nodeid, 0.0)))
        # Keep --junitxml readable: clause ids and statuses, not evidence blobs.
        report.user_properties = [(k, v) for k, v in report.user_properties if k not in ("acp_results", "acp_peer")]
        for r in results:
            report.user_properties.append(("acp_clause", f"{r.clause}={r.status.value}"))

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        if self.collect_only:
            return
        interrupted = exitstatus == pytest.ExitCode.INTERRUPTED
        self.run.interrupted = interrupted
        self._gate()  # before the report is made: it carries the gate's result
        # Made (and redacted) once: the JSON, Markdown, JUnit and terminal outputs all render it.
        self._data = data = self.run.to_json()
        path = self.config.getoption("acp_report_json")
        if path:
            import orjson

            from acp_conformance.reporting.markdown import render_markdown

            out = Path(path)
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_bytes(orjson.dumps(data, option=orjson.OPT_INDENT_2) + b"\n")
            out.with_suffix(".md").write_text(render_markdown(data) + "\n", "utf-8")
        junit = self.config.getoption("acp_report_junit")
        if junit:
            from acp_conformance.reporting.junit import junit_xml

            out = Path(junit)
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_bytes(junit_xml(data))
        gate = self._gate()
        if interrupted:
            pass  # pytest's own status (2) says it: nothing was decided
        elif gate is not None:
            # The gate decides: every FAIL listed and no entry stale passes, whatever the verdict.
            if not gate.passed:
                session.exitstatus = pytest.ExitCode.TESTS_FAILED
            elif session.exitstatus == pytest.ExitCode.TESTS_FAILED and not self._failed_tests:
                session.exitstatus = pytest.ExitCode.OK
        elif not self.run.passed():
            if session.exitstatus == 0:
                session.exitstatus = pytest.ExitCode.TESTS_FAILED
        elif session.exitstatus == pytest.ExitCode.TESTS_FAILED and self._failed_tests <= self._accounted:
            # The exit status is the verdict's: a test that ended INCONCLUSIVE (its peer exited) while
            # other tests judged every clause it is bound to fails no conformant run.  A suite error does.
            session.exitstatus = pytest.ExitCode.OK
        written = self.config.getoption("acp_write_baseline")
        if written:
            write_baseline(written, self.state.role, self._failures())

    def _statuses(self) -> dict[str, str]:
        return {cid: status.value for cid, (status, _) in self.run.clause_status().items()}

    def _failures(self) -> dict[str, str]:
        out: dict[str, str] = {}
        for cid, (status, got) in self.run.clause_status().items():
            if status is Status.FAIL:
                message = next((r.message for _, r in got if r.status is Status.FAIL), "")
                # The observation is the reason worth keeping ("observed protocolVersion 0").
                out[cid] = "observed " + message.rsplit("; observed ", 1)[-1] if "; observed " in message else message
        return out

    def _gate(self) -> GateResult | None:
        if self.state.baseline is None:
            return None
        if self._gate_result is None:
            self._gate_result = compare(self.state.baseline, self.state.role, self._statuses())
            self.run.extra["baseline"] = self._gate_result.to_json()
        return self._gate_result

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        """An xdist worker ended: keep its pool summary for the terminal summary."""
        summary = getattr(node, "workeroutput", {}).get(POOL_OUTPUT)
        if summary:
            worker = getattr(getattr(node, "gateway", None), "id", "worker")
            self.state.pool_lines.append(f"[{worker}] {summary}")

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if self.collect_only:
            return
        terminalreporter.section("ACP conformance (per clause)")
        for line in self.run.terminal_lines(self._data):
            terminalreporter.write_line(line)
        gate = self._gate()
        if gate is not None:
            terminalreporter.write_line(f"ACP {gate.line()}")
        if self.state.fuzz_line:
            terminalreporter.write_line(self.state.fuzz_line)
        for line in sorted(self.state.pool_lines):
            terminalreporter.write_line(line)
        path = self.config.getoption("acp_report_json")
        if path:
            terminalreporter.write_line(f"reports: {path} and {Path(path).with_suffix('.md')}")
