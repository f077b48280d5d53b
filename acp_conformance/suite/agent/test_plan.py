"""Agent plans (agent-plan.mdx § Updating Plans): "The Agent MUST send a complete list of all plan
entries in each update and their current status."

A plan update with fewer entries than the last one is not by itself a breach: the agent MAY add,
remove or modify entries as it goes.  Only against a plan the suite knows is an update decidably
partial: ``--acp-dictated-plans`` says the agent plans exactly the steps the plan prompt dictates
(the reference agent does); then every plan update of that turn must list every one of them.
Without it the clause is NOT_APPLICABLE, with that reason.
"""

from __future__ import annotations

import pytest

from acp_conformance.checks.sessions import update_kind
from acp_conformance.harness import AgentHarness
from acp_conformance.prompts import dictated_steps
from acp_conformance.suite._support import new_session, not_applicable, run_turn

pytestmark = pytest.mark.anyio


@pytest.mark.acp_clause("plan.full-list")
async def test_plan_updates_carry_every_entry(acp_agent: AgentHarness) -> None:
    if not acp_agent.config.dictated_plans:
        not_applicable(
            "the suite cannot know the agent's full plan (an agent MAY add or remove entries); "
            "--acp-dictated-plans says it plans exactly the steps the plan prompt dictates"
        )
    steps = dictated_steps(acp_agent.config.plan_prompt)
    async with acp_agent.connect() as conn:
        sid = await new_session(acp_agent, conn)
        turn = await run_turn(acp_agent, conn, sid, acp_agent.config.plan_prompt)
        plans = [u.params["update"] for u in turn.updates if update_kind(u.params) == "plan"]
        if not plans:
            not_applicable("the agent sent no plan update for the plan prompt (planning is optional)")
        partial = []
        for n, plan in enumerate(plans):
            entries = plan.get("entries") if isinstance(plan.get("entries"), list) else []
            listed = {e.get("content") for e in entries if isinstance(e, dict)}
            missing = [s for s in steps if s not in listed]
            if missing:
                partial.append(f"update {n + 1} of {len(plans)} lacks {missing}")
        acp_agent.check(
            "plan.full-list",
            not partial,
            f"each of the {len(plans)} plan update(s) to list all {len(steps)} dictated entries {steps}",
            "; ".join(partial[:3]),
        )
