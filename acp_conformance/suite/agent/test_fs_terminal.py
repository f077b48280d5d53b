"""The agent's use of the client's file system and terminals (file-system.mdx, terminals.mdx).

With every capability advertised and the tool allowed, whatever fs/* and
terminal/* calls the agent makes are judged: absolute paths (the endpoint
flags relative ones as they arrive), 1-based line numbers, and every
terminal it creates released - after a normal turn and after a turn
cancelled while its command exists.  An agent that does its work without
the client's fs or terminals gets NOT_APPLICABLE for those clauses.
"""

from __future__ import annotations

import pytest

from acp_conformance.core.events import Event, Request
from acp_conformance.harness import AgentHarness, Connection
from acp_conformance.results import Status
from acp_conformance.suite._support import inconclusive, new_session, not_applicable, run_turn
from acp_conformance.suite.agent._helpers import (
    close_out,
    is_prompt_response,
    no_tool_reason,
    record,
    round_trip,
    wait_cancelled_turn,
)

pytestmark = pytest.mark.anyio


def flagged(conn: Connection, clause: str) -> list[str]:
    """Violations of ``clause`` recorded on this connection (by the endpoint or the validator)."""
    return [v.message for v in conn.peer.violations() if v.clause_id == clause]


def judge_unreleased(acp: AgentHarness, conn: Connection, when: str) -> None:
    terms = conn.client.terminals.terminals
    left = conn.client.terminals.unreleased
    acp.check(
        "term.agent-releases",
        not left,
        f"every one of the {len(terms)} terminal(s) created released with terminal/release {when}",
        f"never released: {[(t, terms[t].command) for t in left]}",
    )


@pytest.mark.acp_clause(
    "fs.read.shape", "fs.write.shape", "term.create.shape", "term.agent-releases", "session.lines.one-based"
)
async def test_fs_and_terminal_calls(acp_agent: AgentHarness, request: pytest.FixtureRequest) -> None:
    async with acp_agent.connect(permission="allow_once") as conn:
        sid = await new_session(acp_agent, conn)
        turn = await run_turn(acp_agent, conn, sid, acp_agent.config.tool_prompt)
        await round_trip(conn)  # a terminal released right after the answer counts
        events = conn.peer.events
        for clause, method, what in (
            ("fs.read.shape", "fs/read_text_file", "read no file through the client (fs/read_text_file)"),
            ("fs.write.shape", "fs/write_text_file", "wrote no file through the client (fs/write_text_file)"),
            ("term.create.shape", "terminal/create", "started no command in a client terminal (terminal/create)"),
        ):
            calls = conn.peer.requests(method)
            if not calls:
                reason = no_tool_reason(events, sid, turn.start_event, what=what)
                record(acp_agent, Status.NOT_APPLICABLE, reason, clause)
                continue
            problems = flagged(conn, clause)
            acp_agent.check(
                clause,
                not problems,
                f"{len(calls)} well-formed {method} call(s) with absolute paths",
                "; ".join(problems[:3]),
            )
            if method == "fs/read_text_file":
                zero = [r for r in calls if isinstance(r.params, dict) and r.params.get("line") == 0]
                # Schema-valid (minimum 0) but lines count from 1 (no BCP 14 keyword: a SHOULD).
                acp_agent.check(
                    "session.lines.one-based",
                    not zero,
                    f"1-based line numbers in all {len(calls)} fs/read_text_file call(s)",
                    f"fs/read_text_file with line 0: {zero[0].raw[:160]!r}" if zero else "",
                )
        if not conn.client.terminals.terminals:
            what = "started no command in a client terminal (terminal/create)"
            reason = no_tool_reason(events, sid, turn.start_event, what=what)
            record(acp_agent, Status.NOT_APPLICABLE, reason, "term.agent-releases")
        else:
            judge_unreleased(acp_agent, conn, "by the end of the turn")
        close_out(acp_agent, request.node, "not judged on this path")


@pytest.mark.acp_clause("term.agent-releases")
async def test_terminal_released_after_cancel(acp_agent: AgentHarness) -> None:
    """Cancel the tool turn as soon as it creates a terminal: the agent still releases it."""
    async with acp_agent.connect(permission="allow_once") as conn:
        sid = await new_session(acp_agent, conn)
        rid, start = await conn.client.send_prompt(sid, acp_agent.config.tool_prompt)

        def created_or_done(e: Event) -> bool:
            return (isinstance(e, Request) and e.method == "terminal/create") or is_prompt_response(rid)(e)

        ev = await conn.peer.wait_for(
            created_or_done, start=start, what="terminal/create or the turn's end", awaiting="session/prompt"
        )
        if not isinstance(ev, Request):
            what = "started no command in a client terminal (terminal/create)"
            not_applicable(no_tool_reason(conn.peer.events, sid, start, what=what))
        mark = len(conn.peer.events)
        await conn.client.cancel(sid)
        if await wait_cancelled_turn(conn, rid, mark) is None:
            inconclusive(f"the cancelled turn was still unanswered {conn.peer.timeout:g} s after session/cancel")
        await round_trip(conn)  # a release right after the answer counts
        judge_unreleased(acp_agent, conn, "although the turn was cancelled")
