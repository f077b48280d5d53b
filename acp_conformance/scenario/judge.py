"""Turning what an expectation found into outcomes on the ``ScenarioResult``.

A failed expectation of a MUST clause is FAIL and stops the scenario; of a
SHOULD/MAY clause it is WARN and the scenario goes on.  A failed
``precondition`` makes the rest INCONCLUSIVE.  A failed expectation whose search
window holds frames the peer garbled (a framing, JSON-RPC or schema violation on
a frame that could have been the expected one) is INCONCLUSIVE, and so is a
``race`` expectation whose send nothing held: the order it asserts was not
provable.
"""

from __future__ import annotations

import fnmatch
from typing import Any

from acp_conformance.clauses import registry
from acp_conformance.core.events import Event, Notification, Request, Response, Violation
from acp_conformance.peer import Peer
from acp_conformance.results import Status, breach_status
from acp_conformance.scenario.model import CallSpec, ExpectSpec, NothingSpec, Scenario
from acp_conformance.scenario.result import Outcome, ScenarioResult, Settings, Stop
from acp_conformance.transcript import Entry

__all__ = ["Judge"]

_KIND_OF: dict[type, str] = {ExpectSpec: "expect", NothingSpec: "expect_nothing", CallSpec: "call"}


class Judge:
    """Records one run's outcomes, and decides what a failed expectation counts as."""

    def __init__(self, scenario: Scenario, peer: Peer, result: ScenarioResult, settings: Settings) -> None:
        self.s = scenario
        self.peer = peer
        self.result = result
        self.settings = settings
        self.reg = registry()
        #: send name (with held_by) -> what held the peer's turn open when it went out (None: nothing)
        self.held: dict[str, str | None] = {}
        #: names an expectation should have captured but did not (it failed without stopping)
        self.missing: set[str] = set()

    def where(self, path: str) -> str:
        line = self.s.line_of(path)
        return f"{self.s.source}:{line} {path}" if line else f"{self.s.source} {path}"

    def record(
        self, clauses: list[str] | None, path: str, kind: str, status: Status, message: str, evidence: str = ""
    ) -> None:
        self.result.outcomes.append(
            Outcome(path, self.s.line_of(path), kind, list(clauses or []), status, message, evidence)
        )

    def passed(self, spec: ExpectSpec | NothingSpec | CallSpec, path: str, message: str) -> None:
        clauses = list(spec.clause or [])
        kind = _KIND_OF[type(spec)]
        if clauses:
            self.record(clauses, path, kind, Status.PASS, message)

    def unheld(self, spec: Any, path: str, kind: str, message: str, near: list[Event]) -> bool:
        """A race expectation whose send nothing held: record it INCONCLUSIVE (True), or False to
        judge it (its turn was held open, so the order is proven)."""
        race = getattr(spec, "race", None)
        if race is None or self.held.get(race) is not None:
            return False
        self.record(
            list(spec.clause or []),
            path,
            kind,
            Status.INCONCLUSIVE,
            f"{self.where(path)}: {message} - not judged: nothing held the peer's turn open when {race!r} went "
            "out, so the turn may have ended before it reached the peer",
            self.evidence(near),
        )
        return True

    def held_note(self, spec: Any) -> str:
        race = getattr(spec, "race", None)
        held = self.held.get(race) if race is not None else None
        return f" (the turn could not have ended by itself when {race!r} went out: {held})" if held else ""

    def fail(
        self,
        spec: ExpectSpec | NothingSpec | CallSpec,
        path: str,
        what: str,
        why: str,
        start: int,
        kind: str,
        method: str | None,
        near: list[Event] | None = None,
        unproven: str = "",
    ) -> None:
        """``unproven``: why the answer missing from our request proves no breach (``Peer.why_unproven``):
        the step is INCONCLUSIVE with that reason and the scenario stops, as when the frames were garbled."""
        near = near or []
        message = f"expected {what}; observed {why}"
        as_ = getattr(spec, "as_", None)
        if as_:
            self.missing.add(as_)
        if self.unheld(spec, path, _KIND_OF[type(spec)], message, near):
            return
        message += self.held_note(spec)
        if unproven:
            kind = _KIND_OF[type(spec)]
            self.record(list(spec.clause or []), path, kind, Status.INCONCLUSIVE, f"{message} - not judged: {unproven}")
            raise Stop("inconclusive", f"{self.where(path)}: no answer, not proven unanswered: {unproven}")
        precondition = getattr(spec, "precondition", None)
        if precondition is not None:
            raise Stop(
                "inconclusive",
                f"precondition not met at {self.where(path)}: {precondition} ({message})",
            )
        garbled = self.garbled(start, kind, method) if kind else []
        if garbled:
            clauses = sorted({v.clause_id for v in garbled})
            self.record(
                list(spec.clause or []),
                path,
                _KIND_OF[type(spec)],
                Status.INCONCLUSIVE,
                f"{message} - not judged: {len(garbled)} frame(s) in the window broke {', '.join(clauses)} "
                "(reported by the transcript checks) and may have been the one expected",
                self.evidence(near),
            )
            raise Stop("inconclusive", f"{self.where(path)}: the peer's frames were garbled ({', '.join(clauses)})")
        self.failure(list(spec.clause or []), path, _KIND_OF[type(spec)], message, near, True)

    def failure(self, clauses: list[str], path: str, kind: str, message: str, near: list[Event], stop: bool) -> None:
        """Record a breach of ``clauses`` at each one's level; a MUST breach stops the run when ``stop``."""
        evidence = self.evidence(near)
        where = self.where(path)
        by_status: dict[Status, list[str]] = {}
        for c in clauses:
            by_status.setdefault(breach_status(self.reg.get(c)), []).append(c)
        mandatory = by_status.get(Status.FAIL, [])
        for status, group in by_status.items():
            self.record(group, path, kind, status, f"{where}: {message}", evidence)
        if mandatory and stop:
            raise Stop("failed", f"[{mandatory[0]}] {where}: {message}")

    def violations_on(self, frame: Event) -> list[Violation]:
        index = getattr(frame, "index", None)
        return [
            v
            for v in self.peer.events
            if isinstance(v, Violation) and v.severity == "error" and index is not None and v.index == index
        ]

    def garbled(self, start: int, kind: str, method: str | None) -> list[Violation]:
        """Violations on inbound frames from ``start`` on that could be the frame expected."""
        events = self.peer.events[start:]
        messages: dict[int, Event] = {e.index: e for e in events if isinstance(e, (Request, Notification, Response))}
        out = []
        for v in events:
            if not isinstance(v, Violation) or v.severity != "error":
                continue
            ev = messages.get(v.index) if v.index is not None else None
            if ev is None:
                out.append(v)  # a frame that decoded to no message at all
            elif kind in ("response", "response_id") and isinstance(ev, Response):
                out.append(v)
            elif kind == "request" and isinstance(ev, Request) and fnmatch.fnmatchcase(ev.method, method or "*"):
                out.append(v)
            elif (
                kind == "notification"
                and isinstance(ev, Notification)
                and fnmatch.fnmatchcase(ev.method, method or "*")
            ):
                out.append(v)
        return out

    def evidence(self, near: list[Event]) -> str:
        t = self.peer.transcript
        raws = {id(e.raw) for e in near if e is not None and not isinstance(e, Violation)}
        around: list[Entry] = [e for e in t.entries if id(e.raw) in raws]
        text = t.excerpt(around, last=self.settings.evidence_lines)
        tail = self.peer.stderr_tail()
        if tail:
            text += "\n--- peer stderr (last lines) ---\n" + "\n".join(tail[-10:])
        return text
