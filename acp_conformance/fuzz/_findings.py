"""Findings of a fuzz run, and how they become clause results (PASS, FAIL, WARN, INCONCLUSIVE)."""

from __future__ import annotations

import re
import warnings
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from acp_conformance.clauses import registry
from acp_conformance.errors import ConformanceFailure
from acp_conformance.fuzz._budget import FuzzBudget
from acp_conformance.harness import AcpSpecWarning
from acp_conformance.results import Status, breach_status


class Recorder(Protocol):
    """What a campaign needs of the harness under test (``AgentHarness`` and ``ClientHarness`` both are)."""

    def record(self, clause: str, status: Status, message: str = "", evidence: str = "") -> None: ...


@dataclass
class Finding:
    """A clause broken by one (shrunk) example."""

    clause: str
    message: str
    example: str
    blob: str | None = None
    evidence: str = ""
    #: False: seen once, but Hypothesis's replay of the example went otherwise (a timing-dependent
    #: outcome). Such a finding is INCONCLUSIVE, never a FAIL or WARN: a verdict must recur.
    recurred: bool = True
    #: Why the example, though it recurs, proves no breach (e.g. the peer exited with our request
    #: pending and nothing shows it had read it): INCONCLUSIVE with this reason.
    unproven: str = ""


class FuzzFinding(AssertionError):
    """Raised inside a Hypothesis example; one subclass per clause keeps distinct bugs apart."""

    clause = ""

    def __init__(self, message: str, example: str, evidence: str, unproven: str = "") -> None:
        super().__init__(f"[{self.clause}] {message}: {example}")
        self.message = message
        self.example = example
        self.evidence = evidence
        self.unproven = unproven


_FINDING_TYPES: dict[str, type[FuzzFinding]] = {}


def finding_type(clause: str) -> type[FuzzFinding]:
    t = _FINDING_TYPES.get(clause)
    if t is None:
        name = "Fuzz_" + re.sub(r"\W", "_", clause)
        t = _FINDING_TYPES[clause] = type(name, (FuzzFinding,), {"clause": clause})
    return t


def record_findings(
    harness: Recorder,
    budget: FuzzBudget,
    what: str,
    clauses: Sequence[str],
    exercised: Counter[str],
    findings: list[Finding],
    ran: int,
    skipped: int,
    key: str = "",
    role: str = "agent",
) -> None:
    """Turn a campaign into clause results; raise ``ConformanceFailure`` for a MUST broken.

    ``role`` is the role of the peer under test (it names the pytest option in the replay line)."""
    reg = registry()
    seen: dict[str, Finding] = {}
    for f in findings:
        seen.setdefault(f.clause, f)
    tail = f" ({budget.describe()}; {ran} run" + (f", {skipped} not run: budget spent" if skipped else "") + ")"
    first_must: Finding | None = None
    for clause, f in seen.items():
        msg = f"{f.message}; {what}: {f.example}; {budget.replay_hint(f.blob, clause, key, role)}{tail}"
        if not f.recurred:
            harness.record(
                clause,
                Status.INCONCLUSIVE,
                f"seen once but did not recur on replay, so not a verdict (timing-dependent): {msg}",
                f.evidence,
            )
            continue
        if f.unproven:
            harness.record(clause, Status.INCONCLUSIVE, f"not a verdict: {f.unproven}: {msg}", f.evidence)
            continue
        status = breach_status(reg.get(clause))
        harness.record(clause, status, msg, f.evidence)
        if status is Status.FAIL and first_must is None:
            first_must = f
        elif status is Status.WARN:
            warnings.warn(AcpSpecWarning(f"[{clause}] {msg}"), stacklevel=2)
    for clause in clauses:
        if clause in seen:
            continue
        if exercised[clause]:
            harness.record(clause, Status.PASS, f"{exercised[clause]} judgement(s) over {ran} {what}(s){tail}")
        else:
            harness.record(clause, Status.INCONCLUSIVE, f"no {what} exercised it{tail}")
    if first_must is not None:
        raise ConformanceFailure(
            first_must.clause, f"no finding in {what}s", f"{first_must.message}: {first_must.example}"
        )
