"""session/new and a basic prompt turn, with every update judged."""

from __future__ import annotations

import pytest

from acp_conformance.checks.turns import STOP_REASONS, TURN_OUTPUT
from acp_conformance.core.events import Notification
from acp_conformance.harness import AgentHarness
from acp_conformance.suite._support import new_session, run_turn

pytestmark = pytest.mark.anyio

METHOD_NOT_FOUND = -32601


@pytest.mark.acp_clause("session.new.unique-id")
async def test_session_ids_are_unique(acp_agent: AgentHarness) -> None:
    async with acp_agent.connect() as conn:
        ids = [await new_session(acp_agent, conn) for _ in range(3)]
        acp_agent.check("session.new.unique-id", len(set(ids)) == 3, "three distinct sessionIds", f"{ids}")


@pytest.mark.acp_clause("mode.state.shape")
async def test_session_modes_are_consistent(acp_agent: AgentHarness) -> None:
    async with acp_agent.connect() as conn:
        sid = await new_session(acp_agent, conn)
        modes = conn.client.sessions[sid].get("modes")
        if modes is None:
            from acp_conformance.suite._support import not_applicable

            not_applicable("session/new returned no modes")
        ids = [m.get("id") for m in modes.get("availableModes", []) if isinstance(m, dict)]
        acp_agent.check(
            "mode.state.shape",
            modes.get("currentModeId") in ids,
            "currentModeId to be one of availableModes",
            f"currentModeId {modes.get('currentModeId')!r}, available {ids}",
        )


@pytest.mark.usefixtures("passive_bookkeeping")
@pytest.mark.acp_clause(
    "cap.session-baseline",
    "prompt.response.stop-reason",
    "prompt.stop-reason.enum",
    "prompt.updates.session-id",
    "content.text.baseline",
    # Stream-level clauses judged on every transcript; bound here because this is the
    # smallest test whose traffic includes a session/new result and message chunks.
    "schema.valid",
    "update.discriminator",
    "update.chunk.shape",
    "jsonrpc.request-shape",
    "jsonrpc.id-not-null",
    "update.no-unstable-variants",
    "update.notice.gated",
    "update.notice.shape",
    "update.compaction.gated",
    "update.compaction.shape",
    "content.block.shapes",
    "content.base64",
    "config.shape",
)
async def test_basic_prompt_turn(acp_agent: AgentHarness) -> None:
    async with acp_agent.connect() as conn:
        sid = await new_session(acp_agent, conn)
        turn = await conn.client.prompt(sid, acp_agent.config.prompt)
        resp = turn.response
        assert resp is not None
        missing = resp.code == METHOD_NOT_FOUND
        acp_agent.check(
            "cap.session-baseline",
            not missing,
            "session/new and session/prompt implemented whatever the capabilities (session/cancel and "
            "session/update are judged by the cancellation and turn tests)",
            f"session/prompt answered {resp.error!r}",
        )
        acp_agent.check(
            "content.text.baseline",
            not resp.is_error,
            "a prompt made of one text block to be accepted (answered with a result)",
            f"error {resp.error!r}",
        )
        acp_agent.check(
            "prompt.response.stop-reason",
            isinstance(resp.result, dict) and "stopReason" in resp.result,
            "a result carrying stopReason",
            f"result {resp.result!r}",
        )
        acp_agent.check(
            "prompt.stop-reason.enum",
            turn.stop_reason in STOP_REASONS,
            f"stopReason in {sorted(STOP_REASONS)}",
            f"stopReason {turn.stop_reason!r}",
        )
        foreign = [
            n.params
            for n in conn.peer.notifications("session/update")
            if not (isinstance(n.params, dict) and n.params.get("sessionId") == sid)
        ]
        acp_agent.check(
            "prompt.updates.session-id",
            not foreign,
            f"every session/update to name the session {sid!r}",
            f"updates for other sessions: {foreign[:3]}",
        )


@pytest.mark.acp_clause("prompt.updates.before-response")
async def test_no_turn_output_after_the_response(acp_agent: AgentHarness) -> None:
    async with acp_agent.connect() as conn:
        sid = await new_session(acp_agent, conn)
        turn = await run_turn(acp_agent, conn, sid, acp_agent.config.prompt)
        await new_session(acp_agent, conn)  # a round trip: late output would precede its answer
        late = [
            e
            for e in conn.peer.events[turn.end_event :]
            if isinstance(e, Notification)
            and e.method == "session/update"
            and isinstance(e.params, dict)
            and e.params.get("sessionId") == sid
            and isinstance(e.params.get("update"), dict)
            and e.params["update"].get("sessionUpdate") in TURN_OUTPUT
        ]
        acp_agent.check(
            "prompt.updates.before-response",
            not late,
            "all output of the turn before its session/prompt response",
            f"{len(late)} update(s) after the response, first: {late[0].params if late else None}",
        )
