"""Per-clause outcomes: what a finding is worth, and how results combine.

Rule 1 (after h11's ``_state.py``): every decision about a clause's *status*
lives in this module.  How a clause's level turns a breach into a status
(``breach_status``), how a status produced elsewhere is brought in line with
the level (``adjust``), how a check's outcome becomes a status (``judged``),
how the results of many tests fold into one (``combine``), and what a
stream-level clause nobody exercised is (``not_exercised``).  Everything else
calls these; ``tests/test_results_rule.py`` keeps it that way.

The rules, from the BCP 14 keywords the spec uses:

* a breach of a MUST / MUST NOT is ``FAIL`` (the peer is not conformant);
* a breach of a SHOULD / SHOULD NOT is ``WARN`` (conformant, but the spec
  recommends otherwise; robustness clauses, which judge how a peer copes with
  input the spec does not allow, are SHOULDs and so are WARNs at most);
* not doing a MAY is conformant: it is ``INFO`` (noted, never a warning);
* nothing becomes ``PASS`` unless a check actually exercised the clause.
"""

from __future__ import annotations

import enum
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from acp_conformance.clauses import Clause

__all__ = [
    "BREACHES",
    "NOT_EXERCISED_HERE",
    "NOT_EXERCISED_IN_RUN",
    "ClauseResult",
    "Status",
    "adjust",
    "breach_status",
    "combine",
    "judged",
    "not_exercised",
]


class Status(enum.StrEnum):
    PASS = "PASS"
    FAIL = "FAIL"
    WARN = "WARN"
    INFO = "INFO"
    NOT_APPLICABLE = "NOT_APPLICABLE"
    NOT_TESTED = "NOT_TESTED"
    INCONCLUSIVE = "INCONCLUSIVE"


#: Strongest first: a clause's status over a run is the strongest of its results.
_RANK = {
    Status.FAIL: 6,
    Status.WARN: 5,
    # A note beats a pass: a MAY done in one test and not in another shows the note (and why).
    Status.INFO: 4,
    Status.PASS: 3,
    Status.INCONCLUSIVE: 2,
    Status.NOT_APPLICABLE: 1,
    Status.NOT_TESTED: 0,
}

#: The statuses that say the peer did not do what the clause asks (at the clause's level).
BREACHES = frozenset({Status.FAIL, Status.WARN, Status.INFO})


@dataclass
class ClauseResult:
    """One judgement of one clause by one test."""

    clause: str
    status: Status
    message: str = ""
    evidence: str = ""

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["status"] = self.status.value
        return d

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> ClauseResult:
        return cls(d["clause"], Status(d["status"]), d.get("message", ""), d.get("evidence", ""))


def breach_status(clause: Clause) -> Status:
    """What a breach of ``clause`` is worth: FAIL for MUST / MUST NOT, WARN for SHOULD /
    SHOULD NOT, INFO for MAY (not doing what the spec merely allows is conformant)."""
    if clause.mandatory:
        return Status.FAIL
    if clause.level in ("SHOULD", "SHOULD NOT"):
        return Status.WARN
    return Status.INFO


def adjust(clause: Clause, status: Status) -> Status:
    """A status as the clause's level allows it: any breach (FAIL, WARN, INFO), whoever
    produced it, becomes the breach status of the level; other statuses are kept."""
    return breach_status(clause) if status in BREACHES else status


def judged(clause: Clause, ok: bool) -> Status:
    """The status of a check of ``clause`` that held (``ok``) or did not."""
    return Status.PASS if ok else breach_status(clause)


def combine(statuses: list[Status]) -> Status:
    """The status of a clause given the statuses its tests produced."""
    if not statuses:
        return Status.NOT_TESTED
    return max(statuses, key=_RANK.__getitem__)


#: Why a stream-level clause nothing exercised is NOT_APPLICABLE (in one test, or over a run).
NOT_EXERCISED_HERE = "the peer sent no frame of this kind here"
NOT_EXERCISED_IN_RUN = "judged on every frame, but the peer sent no frame it applies to"


def not_exercised(clause_id: str, *, run: bool = False) -> ClauseResult:
    """A stream-level clause (judged on every frame) whose kind of frame the traffic never
    carried: NOT_APPLICABLE, never a default PASS (``run``: over the whole run)."""
    return ClauseResult(clause_id, Status.NOT_APPLICABLE, NOT_EXERCISED_IN_RUN if run else NOT_EXERCISED_HERE)
