"""Folding per-test clause results into a per-clause verdict, and writing it.

Nothing here knows about pytest: the plugin feeds ``RunResults`` with the
results each test produced and asks for JSON, Markdown and terminal lines.

The verdict (also in the README): the peer is **conformant** iff no
*applicable*, *checked*, mandatory (MUST / MUST NOT) clause is FAIL,
NOT_TESTED or INCONCLUSIVE.  Applicable: the clause constrains the peer's role
(or both roles) and is observable on the wire.  Checked: this suite version has a
check bound to it; clauses it does not check yet are listed as coverage
gaps and never counted as passing.  A run with no FAIL whose mandatory clauses
could not all be judged (a peer that crashed before answering, a race nothing
proved) is **inconclusive**: never a CONFORMANT nobody earned.
"""

from __future__ import annotations

import datetime as _dt
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from acp_conformance.clauses import Clause, Registry
from acp_conformance.redaction import machine_paths, redact_data, redactor
from acp_conformance.results import NOT_EXERCISED_IN_RUN, ClauseResult, Status, adjust, combine, not_exercised

__all__ = ["RunResults", "TestRecord"]


@dataclass
class TestRecord:
    """What one test contributed."""

    nodeid: str
    outcome: str  # passed / failed / skipped / error
    results: list[ClauseResult]
    #: Seconds the test took (setup, call and teardown).
    duration: float = 0.0


@dataclass
class RunResults:
    """Everything a report needs, accumulated during a run."""

    registry: Registry
    role: str
    command: str
    checked: set[str]
    passive: set[str] = field(default_factory=set)
    schema: dict[str, Any] = field(default_factory=dict)
    peer: dict[str, Any] | None = None
    tests: list[TestRecord] = field(default_factory=list)
    #: Why this run is partial (the selection options as the user gave them), or None for a full run.
    selection: str | None = None
    #: The clauses a ``--acp-clause`` / ``--acp-area`` / ``--acp-level`` selection named (empty: no such
    #: option). A partial run is judged on these, or on every clause it judged when empty.
    selected: frozenset[str] = frozenset()
    #: The run was stopped before its end (Ctrl-C, SIGTERM, a pytest ``-x`` stop is not this):
    #: a partial run, whatever was selected.
    interrupted: bool = False
    extra: dict[str, Any] = field(default_factory=dict)

    def add(self, record: TestRecord) -> None:
        self.tests.append(record)

    # ------------------------------------------------------------- folding
    def clause_status(self) -> dict[str, tuple[Status, list[tuple[TestRecord, ClauseResult]]]]:
        by_clause: dict[str, list[tuple[TestRecord, ClauseResult]]] = defaultdict(list)
        for t in sorted(self.tests, key=lambda t: t.nodeid):
            for r in t.results:
                by_clause[r.clause].append((t, r))
        out: dict[str, tuple[Status, list[tuple[TestRecord, ClauseResult]]]] = {}
        for clause in self.registry.for_role(self.role):
            got = by_clause.get(clause.id, [])
            status = combine([self._adjust(clause, r.status) for _, r in got])
            if not got and clause.id in self.passive and self.tests:
                # Judged on every frame, but no frame of its kind ever came.
                status = not_exercised(clause.id, run=True).status
            out[clause.id] = (status, got)
        return out

    @staticmethod
    def _adjust(clause: Clause, status: Status) -> Status:
        return adjust(clause, status)

    def is_checked(self, clause: Clause, got: list[tuple[TestRecord, ClauseResult]]) -> bool:
        """Whether this run has a check for ``clause``: one is bound to it, or it produced a result
        (a clause that was judged was checked, whatever the static bindings say)."""
        return clause.id in self.checked or bool(got)

    @property
    def partial(self) -> bool:
        """A run selected by clause, area, level, ``-k``, ``-m`` or test path: it can say whether what
        it selected passes, never whether the peer conforms (everything else went unrun)."""
        return self.selection is not None or self.interrupted

    def verdict(self) -> dict[str, Any]:
        statuses = self.clause_status()
        failed, not_tested, inconclusive, gaps, warned, info, judged = [], [], [], [], [], [], []
        counts: dict[str, int] = defaultdict(int)
        for clause in self.registry.for_role(self.role):
            status, got = statuses[clause.id]
            counts[status.value] += 1
            if got and (not self.selected or clause.id in self.selected):
                judged.append(clause.id)
            if status is Status.FAIL:
                # Only a MUST / MUST NOT can be FAIL (results.adjust), and a FAIL always counts:
                # even on a clause the static bindings call unchecked or unobservable.
                failed.append(clause.id)
                continue
            if clause.untestable and not got:
                continue
            if not self.is_checked(clause, got):
                gaps.append(clause.id)
                continue
            if status is Status.WARN:
                warned.append(clause.id)
            elif status is Status.INFO:
                info.append(clause.id)
            elif clause.mandatory and status is Status.NOT_TESTED:
                not_tested.append(clause.id)
            elif clause.mandatory and status is Status.INCONCLUSIVE:
                if not self.selected or clause.id in self.selected:
                    inconclusive.append(clause.id)
        common = {
            "warnings": warned,
            "info": info,
            "coverage_gaps": gaps,
            "counts": dict(sorted(counts.items())),
            "tests": len(self.tests),
        }
        if self.partial:
            selected_failed = [c for c in failed if not self.selected or c in self.selected]
            return {
                "scope": "selected",
                "selection": self.selection or "all tests",
                "interrupted": self.interrupted,
                # A partial run decides nothing about conformance: null, not false.
                "conformant": None,
                "selected_pass": not selected_failed and bool(self.tests),
                "judged": judged,
                "selected": sorted(self.selected),
                "failed_mandatory": selected_failed,
                "failed_outside_selection": [c for c in failed if c not in selected_failed],
                "not_tested_mandatory": [],
                "inconclusive_mandatory": inconclusive,
                **common,
                "definition": (
                    "a partial run: selected_pass iff no judged clause of the selection is FAIL; it gives no "
                    "conformance verdict (run the whole suite for that)"
                ),
            }
        return {
            "scope": "full",
            "conformant": not failed and not not_tested and not inconclusive and bool(self.tests),
            "failed_mandatory": failed,
            "not_tested_mandatory": not_tested,
            "inconclusive_mandatory": inconclusive,
            **common,
            "definition": (
                "conformant iff no applicable, checked MUST/MUST NOT clause is FAIL, NOT_TESTED or INCONCLUSIVE "
                "(applicable: constrains this role and is observable on the wire; checked: this suite "
                "version has a check for it - the others are listed as coverage_gaps); with no FAIL and "
                "mandatory clauses left INCONCLUSIVE the verdict is INCONCLUSIVE"
            ),
        }

    def passed(self) -> bool:
        """What the exit status says: conformant (a full run), or every selected clause passing."""
        v = self.verdict()
        return bool(v["selected_pass"] if self.partial else v["conformant"])

    def verdict_line(self) -> str:
        """The one line people quote: the conformance verdict, or what a partial run can say."""
        return verdict_line(self.verdict())

    # -------------------------------------------------------------- output
    def to_json(self) -> dict[str, Any]:
        """The report as JSON data, every string redacted.

        This is the one place results leave the process (Markdown and the terminal
        summary are made from it), and the strings come from the peer: observed
        values in failure messages, schema messages quoting a field, the agent's
        stderr tail, its agentInfo, the command line.  So values of secret-looking
        environment variables (ours and those registered for the peer, see
        ``transcript.register_secrets``) and well-known credential shapes are masked
        here, whatever put them in. So is every path of this machine (``machine_paths``):
        a report is read and committed elsewhere, and must read the same wherever it ran.
        """
        secrets = redactor()
        data: dict[str, Any] = redact_data(self._unredacted_json(), lambda text: machine_paths(secrets(text)))
        return data

    def _unredacted_json(self) -> dict[str, Any]:
        statuses = self.clause_status()
        clauses = []
        for clause in self.registry.for_role(self.role):
            status, got = statuses[clause.id]
            entry: dict[str, Any] = {
                "id": clause.id,
                "area": clause.area,
                "role": clause.role,
                "level": clause.level,
                "status": status.value,
                "text": clause.text,
                "reference": clause.reference,
                "checked": self.is_checked(clause, got),
                "tests": [
                    {
                        "nodeid": t.nodeid,
                        "outcome": t.outcome,
                        "duration": round(t.duration, 3),
                        "status": self._adjust(clause, r.status).value,
                        "message": r.message,
                        **({"evidence": r.evidence} if r.evidence and r.status is not Status.PASS else {}),
                    }
                    for t, r in _dedupe(got)
                ],
            }
            if clause.hint:
                entry["hint"] = clause.hint
            if clause.untestable:
                entry["untestable"] = clause.untestable
            elif status is Status.NOT_APPLICABLE and not got:
                entry["not_applicable_reason"] = NOT_EXERCISED_IN_RUN
            elif not self.is_checked(clause, got):
                entry["not_tested_reason"] = "no check for this clause in this suite version"
            clauses.append(entry)
        peer = {"role": self.role, "command": self.command, "info": None, "capabilities": None}
        if self.peer:
            peer.update(self.peer)
        from acp_conformance import __version__

        return {
            "tool": {"name": "acp-conformance", "version": __version__},
            "generated": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
            "peer": peer,
            "schema": self.schema,
            "selection": self.selection,
            "interrupted": self.interrupted,
            "verdict": self.verdict(),
            "clauses": clauses,
            **self.extra,
        }

    def to_markdown(self) -> str:
        from acp_conformance.reporting.markdown import render_markdown

        return render_markdown(self.to_json())

    def terminal_lines(self, data: dict[str, Any] | None = None) -> list[str]:
        """The per-area summary, findings and verdict line (from ``data``, the report already
        made, when the caller has it)."""
        data = data if data is not None else self.to_json()
        lines: list[str] = []
        by_area: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
        for c in data["clauses"]:
            if c["checked"]:
                by_area[c["area"]][c["status"]] += 1
        for area, counts in by_area.items():
            summary = ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))
            lines.append(f"{area:<14} {summary}")
        findings = [c for c in data["clauses"] if c["status"] in ("FAIL", "WARN")]
        if findings:
            lines.append("")
        for c in sorted(findings, key=lambda c: (c["status"], c["id"])):
            msg = next((t["message"] for t in c["tests"] if t["status"] == c["status"]), "")
            lines.append(f"{c['status']:<5} {c['id']} ({c['level']}): {msg[:200]}")
        unjudged = inconclusive_reasons(data)
        if unjudged:
            lines.append("")
            lines += [f"INCONCLUSIVE ({n} MUST clauses): {why[:300]}" for why, n in unjudged]
        lines.append("")
        lines.append(f"ACP verdict: {self.verdict_line()}")
        return lines


def verdict_line(v: dict[str, Any]) -> str:
    """The verdict line of a report's ``verdict`` (JSON): one wording for the terminal, the
    Markdown and the HTML, also when re-rendered from a saved report."""
    if v.get("interrupted"):
        failed = v["failed_mandatory"]
        fails = f"{len(failed)} FAIL ({', '.join(failed)})" if failed else "no FAIL"
        return (
            f"INTERRUPTED after {v['tests']} tests: {len(v['judged'])} clauses judged, {fails}, "
            f"{len(v['warnings'])} WARN, {len(v['info'])} INFO (selection: {v['selection']}); "
            "no conformance verdict from a run that did not finish"
        )
    unjudged = v.get("inconclusive_mandatory") or []
    if v.get("scope") == "selected":
        head = (
            f"SELECTED CLAUSES: no FAIL, {len(unjudged)} MUST INCONCLUSIVE ({', '.join(unjudged)})"
            if v["selected_pass"] and unjudged
            else "SELECTED CLAUSES: all PASS"
            if v["selected_pass"]
            else f"SELECTED CLAUSES: {len(v['failed_mandatory'])} FAIL ({', '.join(v['failed_mandatory'])})"
            if v["failed_mandatory"]
            else "SELECTED CLAUSES: nothing judged"
        )
        selected = v.get("selected") or []
        return (
            f"{head} ({len(v['judged'])}{f' of {len(selected)} selected' if selected else ''} "
            f"clauses judged, {len(v['warnings'])} WARN, {len(v['info'])} INFO; "
            f"partial run: {v['selection']}; no conformance verdict without the whole suite)"
        )
    return (
        f"{verdict_word_of(v)} "
        f"({len(v['failed_mandatory'])} mandatory FAIL, {len(v['not_tested_mandatory'])} mandatory NOT_TESTED, "
        f"{len(unjudged)} mandatory INCONCLUSIVE{f' ({_ids(unjudged)})' if unjudged else ''}, "
        f"{len(v['warnings'])} WARN, {len(v['info'])} INFO; "
        f"{len(v['coverage_gaps'])} clauses of this role not yet checked by this suite version)"
    )


def inconclusive_reasons(data: dict[str, Any], most: int = 3) -> list[tuple[str, int]]:
    """Why the mandatory clauses a verdict could not judge were left INCONCLUSIVE: the commonest
    reasons first, with how many clauses each, so a verdict of INCONCLUSIVE says what to do about it."""
    wanted = set(data["verdict"].get("inconclusive_mandatory") or [])
    counts: dict[str, int] = defaultdict(int)
    for c in data["clauses"]:
        if c["id"] in wanted:
            why = next((t["message"] for t in c["tests"] if t["status"] == "INCONCLUSIVE"), "")
            counts[why] += 1
    return sorted(counts.items(), key=lambda item: -item[1])[:most]


def verdict_word_of(v: dict[str, Any]) -> str:
    """A full run's verdict word: the one place CONFORMANT / NOT CONFORMANT / INCONCLUSIVE is decided
    from a report's ``verdict`` (the terminal, Markdown, HTML, JUnit and the matrix all call it)."""
    if v["conformant"]:
        return "CONFORMANT"
    if not v["failed_mandatory"] and not v["not_tested_mandatory"] and v.get("inconclusive_mandatory"):
        return "INCONCLUSIVE"
    return "NOT CONFORMANT"


def _ids(ids: list[str], shown: int = 5) -> str:
    more = f", and {len(ids) - shown} more" if len(ids) > shown else ""
    return ", ".join(ids[:shown]) + more


def baseline_line(gate: dict[str, Any]) -> str:
    """The gate's line, from its JSON form (what a report holds)."""
    from acp_conformance.reporting.baseline import GateResult

    return GateResult(
        gate["file"], dict(gate["expected"]), list(gate["new"]), dict(gate["stale"]), list(gate["unjudged"])
    ).line()


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")[:300]


def _dedupe(got: list[tuple[TestRecord, ClauseResult]]) -> list[tuple[TestRecord, ClauseResult]]:
    """One line per (test, status): passive PASSes repeat once per connection."""
    seen: set[tuple[str, Status, str]] = set()
    out = []
    for t, r in got:
        key = (t.nodeid, r.status, r.message if r.status is not Status.PASS else "")
        if key in seen:
            continue
        seen.add(key)
        out.append((t, r))
    return out
