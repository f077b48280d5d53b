"""The agent-direction scenario library (``scenarios/agent/*.yaml``), run against the agent under test.

Each file is one test, bound (statically, through its parametrize marks) to
the clauses its expectations name; every expectation's outcome is recorded
on its clause with the file, line, expected vs actual and the transcript
around it.  The scenarios hold the logic: races forced by holding the
permission request, load replay order, capability gating, duplicate and
late responses, the tool-call lifecycle.  See ``scenarios/README.md``.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from acp_conformance.harness import AgentHarness
from acp_conformance.scenario.library_index import library_entries
from acp_conformance.suite._support import conclude, inconclusive

pytestmark = pytest.mark.anyio


def _library() -> list[Any]:
    # A bad library file is a collection error, naming file and line (library_entries reads them).
    return [
        pytest.param(e.path, marks=pytest.mark.acp_clause(*e.clauses), id=e.scenario)
        for e in library_entries("agent")
        if e.plays == "client" and "not-in-suite" not in e.tags
    ]


SCENARIOS = _library()


@pytest.mark.parametrize("path", SCENARIOS)
async def test_scenario(acp_agent: AgentHarness, path: Path) -> None:
    # The engine and its models load here, not at collection: most runs never play a file.
    from acp_conformance.scenario.engine import run_scenario
    from acp_conformance.scenario.loader import load_scenario
    from acp_conformance.scenario.result import Settings

    scenario = load_scenario(path)
    config = acp_agent.config
    settings = Settings(
        timeout=config.timeout,
        startup_timeout=config.startup_timeout,
        prompts={
            "prompt": config.prompt,
            "tool_prompt": config.tool_prompt,
            "long_prompt": config.long_prompt,
            "elicit_prompt": config.elicit_prompt,
        },
    )
    async with acp_agent.connect(initialize=False) as conn:
        result = await run_scenario(
            scenario, conn.peer, endpoint=conn.client, sandbox=conn.sandbox.root, settings=settings
        )
        if acp_agent.peer_info is None:
            acp_agent._remember_peer(_init_result(conn.peer.events))
        refused = _auth_refusal(conn.peer.events)
        if refused is not None:
            # The library's scenarios initialize on their own and never authenticate: against an
            # agent that requires it their expectations judge the refusal, not the agent.
            inconclusive(
                f"the agent answered {refused} with -32000 (auth_required); the scenario library does not "
                "authenticate, so its scenarios run only against agents that need no authentication"
            )
        # Recorded before the connection closes, every clause of the file, undecided ones included:
        # a stream-level finding raised on exit must not hide what the expectations found, and
        # must not turn a clause the stopped scenario never judged into a default PASS (the
        # plugin passes unrecorded clauses of a test whose body completed).
        for r in result.scenario_results():
            acp_agent.record(r.clause, r.status, r.message, r.evidence)
    conclude(result)


def _auth_refusal(events: Sequence[Any]) -> str | None:
    """The method of the first request the agent refused with -32000 (auth_required), if any."""
    from acp_conformance.core.events import Response

    for ev in events:
        if isinstance(ev, Response) and ev.code == -32000:
            return str(ev.method)
    return None


def _init_result(events: Sequence[Any]) -> dict[str, Any]:
    from acp_conformance.core.events import Response

    for ev in events:
        if isinstance(ev, Response) and ev.method == "initialize" and isinstance(ev.result, dict):
            return ev.result
    return {}
