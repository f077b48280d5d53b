"""What a scenario run produced: the settings it ran with, one ``Outcome`` per judged step,
and the ``ScenarioResult`` that turns them into per-clause results and a verdict.

Nothing here runs a scenario: the mock agent, the runners and the suites read results
without needing the engine (``engine.py``), which fills them in.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from acp_conformance import prompts
from acp_conformance.clauses import registry
from acp_conformance.results import ClauseResult, Status, adjust, combine
from acp_conformance.scenario.model import Scenario

__all__ = ["DEFAULT_PROMPTS", "Outcome", "ScenarioResult", "Settings", "Stop"]

#: The texts of ``{{prompt}}`` and friends (``acp_conformance.prompts`` holds them; the options override).
DEFAULT_PROMPTS = {
    "prompt": prompts.DEFAULT_PROMPT,
    "tool_prompt": prompts.DEFAULT_TOOL_PROMPT,
    "long_prompt": prompts.DEFAULT_LONG_PROMPT,
    "elicit_prompt": prompts.DEFAULT_ELICIT_PROMPT,
}


@dataclass
class Settings:
    """How a runner wants scenarios run."""

    #: Default deadline of every wait (a scenario's ``timeout`` and a step's ``within`` override it).
    timeout: float = 10.0
    #: Deadline of the first ``initialize`` answer.
    startup_timeout: float = 20.0
    #: Faker seed (overrides the scenario's).
    seed: int | None = None
    #: Texts for ``{{prompt}}``, ``{{tool_prompt}}``, ``{{long_prompt}}``, ``{{elicit_prompt}}`` (steering real agents).
    prompts: dict[str, str] = field(default_factory=lambda: dict(DEFAULT_PROMPTS))
    #: Transcript entries shown as evidence of a failure.
    evidence_lines: int = 30


@dataclass
class Outcome:
    """What one judged step found."""

    step: str
    line: int | None
    kind: str
    clauses: list[str]
    status: Status
    message: str
    evidence: str = ""

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "step": self.step,
            "line": self.line,
            "kind": self.kind,
            "clauses": self.clauses,
            "status": self.status.value,
            "message": self.message,
        }
        if self.evidence and self.status is not Status.PASS:
            out["evidence"] = self.evidence
        return out


@dataclass
class ScenarioResult:
    """A finished run: per-expectation outcomes, and per-clause results."""

    scenario: Scenario
    seed: int
    outcomes: list[Outcome] = field(default_factory=list)
    #: completed | failed | inconclusive | not_applicable | error
    end: str = "completed"
    reason: str = ""
    #: clause -> why it is NOT_APPLICABLE (its only expectations sat in a branch not taken)
    skipped: dict[str, str] = field(default_factory=dict)
    #: transcript-level (passive) results the runner added
    passive: list[ClauseResult] = field(default_factory=list)
    transcript: Any = None
    started: float = field(default_factory=time.monotonic)
    duration: float = 0.0

    def scenario_results(self) -> list[ClauseResult]:
        """One result per clause the scenario names."""
        out = []
        reg = registry()
        for cid in self.scenario.clauses():
            mine = [o for o in self.outcomes if cid in o.clauses]
            if mine:
                status = combine([_per_clause(o.status, cid, reg) for o in mine])
                worst = next(o for o in mine if _per_clause(o.status, cid, reg) is status)
                out.append(ClauseResult(cid, status, worst.message, worst.evidence))
            elif cid in self.skipped:
                out.append(ClauseResult(cid, Status.NOT_APPLICABLE, self.skipped[cid]))
            elif self.end == "not_applicable":
                out.append(ClauseResult(cid, Status.NOT_APPLICABLE, self.reason))
            else:
                why = f"not reached: {self.reason}" if self.reason else "not reached"
                out.append(ClauseResult(cid, Status.INCONCLUSIVE, why))
        return out

    def clause_results(self) -> list[ClauseResult]:
        """Scenario results plus the transcript-level (passive) ones."""
        return self.scenario_results() + list(self.passive)

    @property
    def failed(self) -> bool:
        reg = registry()
        return any(r.status is Status.FAIL and reg.get(r.clause).mandatory for r in self.clause_results())

    def verdict_word(self) -> str:
        if self.end == "error":
            return "error"
        if self.failed:
            return "fail"
        if self.end in ("inconclusive", "not_applicable"):
            return self.end
        if any(o.status is Status.INCONCLUSIVE for o in self.outcomes):
            return "inconclusive"  # an expectation could not be judged (e.g. a race nothing held)
        return "pass"

    def exit_status(self) -> int:
        """0 pass / not applicable, 1 fail, 2 error (bad scenario or setup), 3 inconclusive."""
        return {"pass": 0, "not_applicable": 0, "fail": 1, "error": 2, "inconclusive": 3}[self.verdict_word()]

    def verdict(self, *, command: str | None = None, transcript_path: str | None = None) -> dict[str, Any]:
        """The JSON verdict (what ``--verdict FILE`` writes)."""
        tested = "agent" if self.scenario.plays == "client" else "client"
        results = self.clause_results()
        counts: dict[str, int] = {}
        for r in results:
            counts[r.status.value] = counts.get(r.status.value, 0) + 1
        stderr = self.transcript.stderr()[-20:] if self.transcript is not None else []
        return {
            "scenario": self.scenario.scenario,
            "file": self.scenario.source,
            "plays": self.scenario.plays,
            "peer": {"role": tested, "command": command, "stderr_tail": stderr},
            "seed": self.seed,
            "verdict": self.verdict_word(),
            "exit_status": self.exit_status(),
            "end": self.end,
            "reason": self.reason,
            "duration_s": round(self.duration, 3),
            "counts": dict(sorted(counts.items())),
            "clauses": [r.to_json() for r in results],
            "expectations": [o.to_json() for o in self.outcomes],
            "transcript": transcript_path,
        }

    def summary(self) -> str:
        """Human-readable lines: one per expectation that did not pass, then the verdict."""
        lines = []
        for o in self.outcomes:
            if o.status is not Status.PASS:
                where = f"{self.scenario.source}:{o.line}" if o.line else self.scenario.source
                lines.append(f"{o.status.value:<12} {', '.join(o.clauses) or '-'} at {where} {o.step}: {o.message}")
        for r in self.passive:
            if r.status in (Status.FAIL, Status.WARN):
                lines.append(f"{r.status.value:<12} {r.clause} (transcript): {r.message}")
        lines.append(
            f"scenario {self.scenario.scenario}: {self.verdict_word().upper()} ({self.end}"
            + (f": {self.reason}" if self.reason and self.end != "completed" else "")
            + f"; seed {self.seed})"
        )
        return "\n".join(lines)


def _per_clause(status: Status, cid: str, reg: Any) -> Status:
    return adjust(reg.get(cid), status)


class Stop(Exception):
    """Ends a run early, with its ``ScenarioResult.end`` and ``reason``."""

    def __init__(self, end: str, reason: str) -> None:
        super().__init__(reason)
        self.end = end
        self.reason = reason
