"""JSON-RPC 2.0 hygiene: ids, one answer per request, no answers to notifications."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from acp_conformance.core.events import Event, Response, Violation
from acp_conformance.core.ids import same_id
from acp_conformance.core.jsonrpc import ErrorCode
from acp_conformance.errors import PeerError
from acp_conformance.harness import AgentHarness
from acp_conformance.suite._support import new_session, run_turn

pytestmark = pytest.mark.anyio


@pytest.mark.acp_clause("jsonrpc.unknown-method")
async def test_unknown_method_gets_method_not_found(acp_agent: AgentHarness) -> None:
    async with acp_agent.connect() as conn:
        resp = await conn.peer.call("session/acp_conformance_no_such_method", {"sessionId": "x"}, validate=False)
        code = resp.error.get("code") if resp.is_error and isinstance(resp.error, dict) else None
        acp_agent.check(
            "jsonrpc.unknown-method",
            code == ErrorCode.METHOD_NOT_FOUND,
            "error -32601 (Method not found) for a method the agent does not implement",
            f"error {resp.error!r}" if resp.is_error else f"a result {resp.result!r}",
        )


# An unanswered extension request is the every-request-answered breach this test exposes.  The
# error object and result-xor-error clauses are judged on every transcript; bound here, where an
# error answer is sure to come (so a targeted run of them does not need the whole suite).
@pytest.mark.acp_clause(
    "ext.request.unknown", "jsonrpc.every-request-answered", "jsonrpc.error-object", "jsonrpc.result-xor-error"
)
async def test_unknown_extension_request_gets_method_not_found(acp_agent: AgentHarness) -> None:
    async with acp_agent.connect() as conn:
        resp = await conn.peer.call("_acp_conformance/no_such_extension", {"probe": True})
        code = resp.error.get("code") if resp.is_error and isinstance(resp.error, dict) else None
        acp_agent.check(
            "ext.request.unknown",
            code == ErrorCode.METHOD_NOT_FOUND,
            "error -32601 for an unrecognised _-prefixed request",
            f"error {resp.error!r}" if resp.is_error else f"a result {resp.result!r}",
        )


@pytest.mark.acp_clause("jsonrpc.response-id-echo", "jsonrpc.id-types")
async def test_string_and_zero_ids_are_echoed(acp_agent: AgentHarness) -> None:
    """Our first request uses id 0, then a string id: both must come back unchanged in type and value."""
    async with acp_agent.connect() as conn:  # initialize went out with id 0
        first = conn.peer.events
        zero = next((e for e in first if isinstance(e, Response) and e.method == "initialize"), None)
        acp_agent.check(
            "jsonrpc.response-id-echo",
            zero is not None and same_id(zero.id, 0),
            "the initialize response to carry id 0",
            f"id {zero.id!r}" if zero else "no response matched id 0",
        )
        try:
            resp = await conn.peer.call(
                "session/new", {"cwd": str(conn.sandbox.root), "mcpServers": []}, id="acp-conformance-id-1"
            )
            got = repr(resp.id)
        except PeerError as exc:
            resp, got = None, f"no answer to the string id ({exc.message})"
        acp_agent.check(
            "jsonrpc.id-types",
            resp is not None and same_id(resp.id, "acp-conformance-id-1"),
            'a response to the string id "acp-conformance-id-1"',
            got,
        )


@pytest.mark.acp_clause("jsonrpc.every-request-answered", "jsonrpc.no-duplicate-response")
async def test_every_request_answered_exactly_once(acp_agent: AgentHarness) -> None:
    async with acp_agent.connect() as conn:
        sid = await new_session(acp_agent, conn)
        await run_turn(acp_agent, conn, sid, acp_agent.config.prompt)
        # A later round trip flushes any duplicate answer the agent might still send.
        await new_session(acp_agent, conn)
        pending = conn.peer.conn.pending_outgoing
        acp_agent.check(
            "jsonrpc.every-request-answered",
            not pending,
            "every request answered",
            f"unanswered: {pending}",
        )


def answers_to_notifications(events: Sequence[Event]) -> list[str]:
    """What in ``events`` answers a notification: a response that pairs with no request of ours,
    or an answer without any id that the core attributed to a notification."""
    out = [f"a response with id {e.id!r}" for e in events if isinstance(e, Response) and e.method is None]
    out += [v.message for v in events if isinstance(v, Violation) and v.clause_id == "jsonrpc.notification-no-response"]
    return out


@pytest.mark.acp_clause("jsonrpc.notification-no-response")
async def test_notifications_get_no_response(acp_agent: AgentHarness) -> None:
    async with acp_agent.connect() as conn:
        sid = await new_session(acp_agent, conn)
        mark = len(conn.peer.events)
        await conn.peer.notify("session/cancel", {"sessionId": sid})  # idle session: nothing to cancel
        # Two full round trips after the notification: an answer to it would precede these.
        await new_session(acp_agent, conn)
        await new_session(acp_agent, conn)
        stray = answers_to_notifications(conn.peer.events[mark:])
        acp_agent.check(
            "jsonrpc.notification-no-response",
            not stray,
            "no response to the session/cancel notification",
            f"answer(s): {stray}",
        )


@pytest.mark.acp_clause("ext.notification.ignore")
async def test_unknown_extension_notification_is_ignored(acp_agent: AgentHarness) -> None:
    async with acp_agent.connect() as conn:
        mark = len(conn.peer.events)
        await conn.peer.notify("_acp_conformance/notice", {"probe": True})
        try:
            await new_session(acp_agent, conn)
            await new_session(acp_agent, conn)
            alive = True
        except PeerError:
            alive = False
        # One defect, one clause: an answer to the notification is jsonrpc.notification-no-response's
        # (a MUST NOT, judged on the transcript); this SHOULD judges that nothing else was disrupted.
        stray = answers_to_notifications(conn.peer.events[mark:])
        acp_agent.check(
            "ext.notification.ignore",
            alive,
            "the unknown _-notification ignored: the next requests still served"
            + (f" (it was answered, judged as jsonrpc.notification-no-response: {stray[0]})" if stray else ""),
            "the agent exited or stopped answering",
        )
