"""JSON-RPC 2.0 hygiene: ids, one answer per request, no answers to notifications."""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import Any

import pytest

from acp_conformance.checks.shapes import unknown_method_answer
from acp_conformance.core.events import Event, Request, Response, Violation
from acp_conformance.core.ids import same_id
from acp_conformance.core.jsonrpc import answered_notification_clause
from acp_conformance.endpoints.client import PermissionPolicy
from acp_conformance.errors import PeerError, PeerTimeout
from acp_conformance.harness import AgentHarness, Connection
from acp_conformance.results import Status
from acp_conformance.suite._support import new_session, not_applicable, run_turn, silence_judged_once
from acp_conformance.suite.agent._helpers import PING, describe, is_prompt_response, wait_prompt_response

pytestmark = pytest.mark.anyio


@pytest.mark.acp_clause("jsonrpc.unknown-method")
async def test_unknown_method_gets_method_not_found(acp_agent: AgentHarness) -> None:
    """A request the agent does not implement, under a name we may send: an extension name
    (extensibility.mdx: every name without a leading ``_`` is reserved for the protocol, so a
    made-up protocol-looking name is input we may not send, which the fuzz campaigns judge as a
    robustness finding).  The same probe the client suite uses."""
    async with acp_agent.connect() as conn:
        resp = await conn.peer.call("_acp_conformance/no_such_method", {"sessionId": "x"})
        verdict = unknown_method_answer(resp.is_error, resp.error)
        if verdict is None:
            not_applicable(
                f"the agent answered our made-up extension request with a result ({describe(resp)}): it "
                "handles the name (a catch-all handler), so that it does not implement it is not shown"
            )
        acp_agent.check(
            "jsonrpc.unknown-method",
            verdict,
            "error -32601 (Method not found) for a method the agent does not implement",
            f"error {resp.error!r}" if resp.is_error else f"a result {resp.result!r}",
        )


# An unanswered extension request breaks ext.request.respond, the narrower clause of
# jsonrpc.every-request-answered: the connection charges it there, once (``Peer._unanswered``).
# The error object, error code and result-xor-error clauses are judged on every transcript; bound
# here, where an error answer is sure to come (so a targeted run of them does not need the whole
# suite).
@pytest.mark.acp_clause(
    "ext.request.respond",
    "ext.request.unknown",
    "jsonrpc.every-request-answered",
    "jsonrpc.error-object",
    "error.codes",
    "jsonrpc.result-xor-error",
)
async def test_unknown_extension_request_gets_method_not_found(acp_agent: AgentHarness) -> None:
    async with acp_agent.connect() as conn:
        expected = "error -32601 for an unrecognised _-prefixed request"
        try:
            resp = await conn.peer.call("_acp_conformance/no_such_extension", {"probe": True})
        except PeerTimeout as exc:
            silence_judged_once(acp_agent, "ext.request.unknown", expected, exc)
            return
        # The peer pairs responses by id: one that arrived carries ours.
        acp_agent.record("ext.request.respond", Status.PASS, f"a response with the request's id {resp.id!r}")
        verdict = unknown_method_answer(resp.is_error, resp.error)
        if verdict is None:
            not_applicable(
                f"the agent answered our made-up extension request with a result ({describe(resp)}): it handles "
                "the name (a catch-all handler), and extensibility.mdx asks for -32601 only when the receiver "
                '"doesn\'t recognize the custom method name"'
            )
        acp_agent.check("ext.request.unknown", verdict, expected, f"error {resp.error!r}")


@pytest.mark.acp_clause("jsonrpc.response-id-echo", "jsonrpc.id-types")
async def test_string_and_zero_ids_are_echoed(acp_agent: AgentHarness) -> None:
    """Our first request uses id 0, then a string and a negative integer id: each must come back
    unchanged in type and value, and be served as a plain integer id is."""
    async with acp_agent.connect() as conn:  # initialize went out with id 0
        first = conn.peer.events
        zero = next((e for e in first if isinstance(e, Response) and e.method == "initialize"), None)
        # The id as the agent wrote it (``Response.id`` is the request it answers: "0" is paired with 0).
        echoed = zero.message.get("id") if zero is not None and isinstance(zero.message, dict) else None
        acp_agent.check(
            "jsonrpc.response-id-echo",
            zero is not None and same_id(echoed, 0),
            "the initialize response to carry id 0",
            f"id {echoed!r}" if zero else "no response matched id 0",
        )
        await _odd_ids_are_accepted(acp_agent, conn)


#: The ids ``jsonrpc.id-types`` is judged on, beside the plain positive integers the suite sends:
#: a string, and a negative integer (the schema's ``RequestId`` is a string or any int64).
ODD_IDS: tuple[tuple[str, Any], ...] = (("string", "acp-conformance-id-1"), ("negative integer", -1))


async def _odd_ids_are_accepted(acp_agent: AgentHarness, conn: Connection) -> None:
    """``jsonrpc.id-types``: ``session/new`` under a string id, and under a negative integer id,
    fares as it does under a positive integer.

    The same request goes out first under a positive integer id, as the baseline: a peer that
    does not answer ``session/new`` at all breaks what that call judges, not the id types.  Each
    odd id's request is the only one in flight (``Peer.answer_under_id``): an error without any id is
    its refusal.  Silence is this clause's FAIL, unless a response under an id matching no request
    came meanwhile (``Peer.strays_since``: perhaps its answer under the wrong id, the echo
    clause's breach), which leaves it open."""
    params = {"cwd": str(conn.sandbox.root), "mcpServers": []}
    base = await conn.peer.call("session/new", params)
    refused: list[str] = []
    unproven: list[str] = []
    for kind, rid in ODD_IDS:
        got = await conn.peer.answer_under_id("session/new", params, rid)
        if why := got.refusal(base):
            refused.append(f"under the {kind} id {rid!r}: {why}")
        elif got.response is None:
            unproven.append(f"no answer under the {kind} id {rid!r}, not proven unanswered: {got.unproven}")
    if unproven and not refused:
        acp_agent.record(
            "jsonrpc.id-types",
            Status.INCONCLUSIVE,
            "; ".join(unproven) + " (jsonrpc.response-id-echo): whether it took the id cannot be told",
        )
        return
    acp_agent.check(
        "jsonrpc.id-types",
        not refused,
        f"session/new under a string id and under a negative integer id answered as under a positive integer "
        f"id ({'an error' if base.is_error else 'a result'})",
        "; ".join(refused),
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


async def _answers_after(acp_agent: AgentHarness, conn: Connection, method: str, params: object) -> list[str]:
    """What answers the notification ``method``: anything answer-like before two full round trips
    that follow it (an answer to it would precede theirs on the agent's one output stream)."""
    mark = len(conn.peer.events)
    await conn.peer.notify(method, params)
    await new_session(acp_agent, conn)
    await new_session(acp_agent, conn)
    return answers_to_notifications(conn.peer.events[mark:])


# One defect, one clause: an answer to session/cancel is cancel.is-notification's (the clause
# that names that method); jsonrpc.notification-no-response is judged on another notification.
@pytest.mark.acp_clause("cancel.is-notification", "jsonrpc.notification-no-response")
async def test_notifications_get_no_response(acp_agent: AgentHarness) -> None:
    async with acp_agent.connect() as conn:
        sid = await new_session(acp_agent, conn)
        stray = await _answers_after(acp_agent, conn, "session/cancel", {"sessionId": sid})  # idle: nothing to cancel
        acp_agent.check(
            answered_notification_clause("session/cancel"),
            not stray,
            "no response to the session/cancel notification",
            f"answer(s): {stray}",
            stop=False,
        )
        stray = await _answers_after(acp_agent, conn, "_acp_conformance/notice", {"probe": True})
        acp_agent.check(
            answered_notification_clause("_acp_conformance/notice"),
            not stray,
            "no response to a notification (an unknown _-prefixed one)",
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


def _held_kind(e: Event) -> bool:
    """A request of the agent that the suite's client holds (permission with the hold policy,
    ``fs/*`` and ``terminal/*`` with ``hold_methods``)."""
    if not isinstance(e, Request):
        return False
    return e.method == "session/request_permission" or e.method.startswith(("fs/", "terminal/"))


def _answer_kind(resp: Response) -> str:
    return f"error {resp.code!r}" if resp.is_error else "a result"


async def _hold_first_request(acp_agent: AgentHarness, conn: Connection) -> tuple[Request, Any, int]:
    """Start the tool turn and hold the agent's first request to us (a permission request, or an
    ``fs/*`` / ``terminal/*`` call): ``(that request, our prompt's id, where the turn started)``.
    Until ``_release_turn``, the agent provably has a request of its own pending."""
    conn.client.hold_methods = {"fs/*", "terminal/*"}
    sid = await new_session(acp_agent, conn)
    rid, start = await conn.client.send_prompt(sid, acp_agent.config.tool_prompt)
    first = await conn.peer.wait_for(
        lambda e: _held_kind(e) or is_prompt_response(rid)(e),
        start=start,
        what="a request of the agent or the end of the tool turn",
        awaiting="session/prompt",
    )
    if not isinstance(first, Request):
        not_applicable("the agent asked the client nothing during the tool turn: it never had a request pending")
    return first, rid, start


async def _release_turn(conn: Connection) -> None:
    """Answer what we hold (allowing) and hold nothing more: the turn runs on as any allowed one."""
    conn.client.hold_methods = set()
    conn.client.release_all()
    conn.client.permission = PermissionPolicy("allow_once")
    for call in conn.client.permission_calls:
        if call.outcome is None:
            options = call.request.params.get("options", []) if isinstance(call.request.params, dict) else []
            outcome = conn.client.permission.choose(options)
            assert outcome is not None  # allow_once always decides
            await conn.client.answer_permission(call, outcome)


@pytest.mark.acp_clause("jsonrpc.bidirectional")
async def test_requests_served_while_the_agent_waits_on_us(acp_agent: AgentHarness) -> None:
    """The agent is client and server at once: while its own request to us is pending (held), it
    still answers our requests."""
    async with acp_agent.connect(permission="hold") as conn:
        window = conn.peer.timeout
        new_session_params: dict[str, object] = {"cwd": str(conn.sandbox.root), "mcpServers": []}
        probes: list[tuple[str, dict[str, object]]] = [("session/new", new_session_params)]
        try:
            # Our extension request counts only if the agent answers one at all (else that is
            # ext.request.respond's finding, not this clause's); not flagged here.
            ping = await conn.peer.send_request(PING, {"purpose": "baseline"})
            await conn.peer.wait_response(ping, method=PING, timeout=window, flag=False)
            probes.insert(0, (PING, {"purpose": "served while the agent waits"}))
        except PeerTimeout:
            conn.transcript.note(f"the agent did not answer {PING} outside a turn: only session/new is probed")
        first, rid, start = await _hold_first_request(acp_agent, conn)
        served: list[str] = []
        unserved: list[tuple[str, Any]] = []
        for method, params in probes:
            ours = await conn.peer.send_request(method, params)
            try:
                # Not flagged: the answer may still come once we release (judged below).
                await conn.peer.wait_response(ours, method=method, timeout=window, flag=False)
                served.append(method)
            except PeerTimeout:
                unserved.append((method, ours))
        expected = (
            f"answers to our {' and '.join(m for m, _ in probes)} while the agent's {first.method} "
            f"(id {first.id!r}) was pending, held by us"
        )
        await _release_turn(conn)
        # The clock alone proves nothing: an answer that comes only once we answer the agent's own
        # request shows it waited for us; one that never comes is jsonrpc.every-request-answered's.
        after: list[str] = []
        for method, ours in unserved:
            with contextlib.suppress(PeerError):
                await conn.peer.wait_response(ours, method=method)
                after.append(method)
        if after:
            acp_agent.check(
                "jsonrpc.bidirectional",
                False,
                expected,
                f"answered within {window:g} s: {served or 'neither'}; {' and '.join(after)} answered only once "
                f"we had answered the agent's {first.method}: it waited for us",
                stop=False,
            )
        elif unserved:
            acp_agent.record(
                "jsonrpc.bidirectional",
                Status.INCONCLUSIVE,
                f"{' and '.join(m for m, _ in unserved)} not answered within {window:g} s while we held the agent's "
                f"{first.method}, nor after we answered it: not shown to wait for us",
            )
        else:
            acp_agent.check("jsonrpc.bidirectional", True, expected, "")
        await wait_prompt_response(conn, rid, start)


@pytest.mark.acp_clause("jsonrpc.id-spaces-independent")
async def test_request_reusing_the_agents_pending_id(acp_agent: AgentHarness) -> None:
    """While the agent waits on its own request (id N, held by us), we send a request with id N: the
    agent answers it as it answers the same request with a fresh id, and its turn still ends once we
    answer its request N.  Each side's ids name its own requests only (JSON-RPC 2.0 § 5)."""
    async with acp_agent.connect(permission="hold") as conn:
        first, rid, start = await _hold_first_request(acp_agent, conn)
        theirs = first.id
        baseline = await conn.peer.call(PING, {"purpose": "baseline"})
        if conn.peer.conn.is_outstanding(theirs):
            # Our own pending request (the prompt) already shares the agent's id: the overlap is there.
            reused = None
        else:
            reused = await conn.peer.call(PING, {"purpose": "reuses the id of the agent's pending request"}, id=theirs)
            acp_agent.check(
                "jsonrpc.id-spaces-independent",
                _answer_kind(reused) == _answer_kind(baseline),
                f"our {PING} with id {theirs!r} (the id of the agent's pending {first.method}) answered as the same "
                f"request with a fresh id was ({_answer_kind(baseline)})",
                f"{_answer_kind(reused)}: {describe(reused)}",
                stop=False,
            )
        await _release_turn(conn)
        # The silence, if any, is this clause's (not also jsonrpc.every-request-answered's); a turn
        # still streaming at the deadline is at work, not silent (INCONCLUSIVE, Peer.wait_response).
        resp = await wait_prompt_response(conn, rid, start, flag=False)
        overlap = "our request with its id" if reused is not None else f"our pending session/prompt (id {rid!r})"
        acp_agent.check(
            "jsonrpc.id-spaces-independent",
            resp is not None,
            f"the turn to end once we answered the agent's {first.method} (id {theirs!r}), after {overlap}",
            f"no session/prompt answer within {conn.peer.timeout:g} s",
        )
