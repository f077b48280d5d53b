"""Per-clause outcomes and how they combine.

A test yields ``ClauseResult``s; a clause's status over a run is the
strongest of its results (FAIL > WARN > PASS > INCONCLUSIVE >
NOT_APPLICABLE > NOT_TESTED).  Nothing becomes PASS unless a check
actually exercised the clause; a failure of a clause that is not
mandatory (SHOULD, MAY) is reported as WARN.
"""

from __future__ import annotations

import enum
from dataclasses import asdict, dataclass
from typing import Any

__all__ = ["ClauseResult", "Status", "combine"]


class Status(enum.StrEnum):
    PASS = "PASS"
    FAIL = "FAIL"
    WARN = "WARN"
    NOT_APPLICABLE = "NOT_APPLICABLE"
    NOT_TESTED = "NOT_TESTED"
    INCONCLUSIVE = "INCONCLUSIVE"


_RANK = {
    Status.FAIL: 5,
    Status.WARN: 4,
    Status.PASS: 3,
    Status.INCONCLUSIVE: 2,
    Status.NOT_APPLICABLE: 1,
    Status.NOT_TESTED: 0,
}


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


def combine(statuses: list[Status]) -> Status:
    """The status of a clause given the statuses its tests produced."""
    if not statuses:
        return Status.NOT_TESTED
    return max(statuses, key=_RANK.__getitem__)
