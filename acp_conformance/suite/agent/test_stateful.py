"""Stateful fuzzing of the agent under test: random session lifecycles, checked step by step.

The machine (``acp_conformance.fuzz.stateful.AgentSessions``) drives a live
agent through ``session/new``, ``session/load``, ``session/prompt`` (plain,
long and tool turns), permission answers, ``session/cancel``,
``session/set_mode`` and ``session/close``, in any order, several sessions at
once, and checks the session invariants after every step (the clauses in
``CLAUSES``; see that module for each).  This module is its pytest test.

Each example runs on a fresh agent process.  A failure is shrunk to a
minimal step sequence, replayed once more, and that replay's transcript is
written as a scenario file (``acp_conformance.scenario`` format; a JSONL
transcript beside it) next to the report (``--acp-report-json``), or in
``$ACP_FUZZ_OUT``, or in the test's temporary directory.  Budget and seed as
in fuzz/campaign.py (``ACP_FUZZ_EXAMPLES`` / 3 runs of 15 steps: 8 by default).
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from hypothesis import seed as hypothesis_seed
from hypothesis.errors import Flaky
from hypothesis.stateful import run_state_machine_as_test

from acp_conformance.fuzz.campaign import (
    Finding,
    FuzzBudget,
    FuzzFinding,
    hypothesis_settings,
    portal_for,
    record_findings,
    replay_blobs,
    shrink_time_limit,
    with_replay,
)
from acp_conformance.fuzz.stateful import CLAUSES, STEPS, StatefulContext, machine_for, write_scenario
from acp_conformance.harness import AgentHarness
from acp_conformance.results import Status

# Own process under --acp-isolation=connection: the machine explores state a later test would inherit.
# It runs in the loop the run's synchronous tests share (``ThreadHost``), one fresh process per example.
pytestmark = pytest.mark.acp_own_process

ENV_OUT = "ACP_FUZZ_OUT"


def _out_dir(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    report = request.config.getoption("acp_report_json", default=None)
    if report:
        return Path(report).resolve().parent / "acp-fuzz"
    if os.environ.get(ENV_OUT):
        return Path(os.environ[ENV_OUT])
    return tmp_path / "acp-fuzz"


@pytest.mark.acp_clause(*CLAUSES)
def test_stateful_session_lifecycle(acp_agent: AgentHarness, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    """Random interleavings of session/new, load, prompt, permission answers, cancel, set_mode and close."""
    budget = FuzzBudget.from_env()
    runs = max(3, budget.examples // 3)
    findings: list[Finding] = []
    with portal_for(acp_agent) as portal:
        ctx = StatefulContext(acp_agent, portal, budget, deadline=time.monotonic() + budget.seconds)
        machine = hypothesis_seed(budget.seed)(machine_for(ctx))
        machine = with_replay(machine, budget)
        settings = hypothesis_settings(budget, max_examples=runs, stateful_step_count=STEPS)
        try:
            with shrink_time_limit(budget.shrink_seconds):
                run_state_machine_as_test(machine, settings=settings)
        except Exception as exc:
            flaky = False
            for sub, found_blob in replay_blobs(exc):
                if isinstance(sub, FuzzFinding):
                    findings.append(
                        Finding(sub.clause, sub.message, sub.example, found_blob, sub.evidence, unproven=sub.unproven)
                    )
                elif isinstance(sub, Flaky):
                    flaky = True
                else:
                    raise exc
            if flaky and not findings:
                # Seen failing, but the replay went otherwise (a timing-dependent defect): report what was seen.
                for clause, (_, steps, message, evidence) in ctx.failing.items():
                    example = "steps: " + "; ".join(steps)
                    findings.append(Finding(clause, message, example, None, evidence, recurred=False))
    out = _out_dir(request, tmp_path)
    for f in findings:
        saved = ctx.failing.get(f.clause)
        if saved is not None:
            where = write_scenario(out, f, saved[0], saved[1], budget.replay_hint(f.blob, f.clause))
            f.message += f"; replayable scenario: {where}"
    for failure in ctx.stream_failures:
        acp_agent.record(
            failure.clause_id, Status.FAIL, f"{failure.actual} (during stateful fuzzing, {budget.describe()})"
        )
    record_findings(acp_agent, budget, "run", CLAUSES, ctx.exercised, findings, ctx.runs, ctx.skipped)
