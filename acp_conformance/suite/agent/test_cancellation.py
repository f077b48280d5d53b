"""Cancelling a prompt turn (prompt-turn.mdx § Cancellation, cancellation.mdx).

Each interleaving is forced by the client, never hoped for: the turn is
kept busy by ``--acp-long-prompt`` (cancelled while it streams) or blocked
on a permission request we hold (``permission="hold"``), and every step
waits for an event - the agent's output, our own round trip, or the
answer - not for time to pass.

Once ``session/cancel`` has arrived, the turn must end with a *result*
``stopReason: "cancelled"`` (never a JSON-RPC error), and every update of
the turn must precede that result.  A race the run could not provoke (the
turn ended before our cancel went out) is INCONCLUSIVE with the reason; a
turn still unanswered at the deadline warns on cancel.stop-asap and
leaves the other clauses INCONCLUSIVE.

One race stays open on any wire: an answer the agent had already written
when our cancel went out cannot be told from one written after it read
the cancel.  Where the agent is blocked on us (a permission request we
hold) it cannot have ended on its own, and the answer is judged as it is.
Otherwise a turn that does not end ``cancelled`` is re-run on the same
session, not cancelled, for twice as long as the cancelled one took: if it
ends by itself in that window, the first may have too (INCONCLUSIVE); if it
is still running, the first ended because of our cancel and is judged.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import anyio
import pytest

from acp_conformance.checks.turns import (
    STOP_REASONS,
    late_turn_output,
    position_of,
    responses_to,
    tool_mentions,
    unattributed_side_effects,
)
from acp_conformance.client import PermissionCall, PermissionPolicy
from acp_conformance.core.events import Event, Request, Response
from acp_conformance.harness import AgentHarness, Connection
from acp_conformance.results import Status
from acp_conformance.suite._support import inconclusive, new_session, not_applicable
from acp_conformance.suite.agent.test_permission import NO_PERMISSION, describe
from acp_conformance.suite.agent.test_tool_calls import (
    close_out,
    is_prompt_response,
    no_tool_reason,
    passive_bookkeeping,
    round_trip,
    turn_sign,
    wait_prompt_response,
)

pytestmark = pytest.mark.anyio
__all__ = ["passive_bookkeeping"]  # the fixture, used by name below

CANCELLED = {"outcome": "cancelled"}
#: The error code of a request aborted by cancellation (schema ErrorCode, cancellation.mdx).
REQUEST_CANCELLED = -32800
#: How long the "never answer" scenario lets the agent end the turn on its own before a
#: conforming client's (late) cancelled answer goes out.  An observation window, not a sync.
NEVER_ANSWER_PATIENCE = 1.0
#: The shortest window in which a re-run, uncancelled turn may end by itself (see the module doc).
MIN_RECHECK_WINDOW = 0.5
ENDED_EARLY = (
    "the turn ended (stopReason {reason}) before our cancellation went out, so the race could not be "
    "provoked; give a {option} that keeps the agent busy"
)
TURN_CLAUSES = ("prompt.response.stop-reason", "prompt.stop-reason.enum")


def _stop_reason(resp: Response) -> Any:
    return resp.result.get("stopReason") if not resp.is_error and isinstance(resp.result, dict) else None


def ended_before(conn: Connection, rid: Any, option: str = "--acp-long-prompt") -> None:
    """INCONCLUSIVE when the turn's answer is already here: there is nothing left to cancel."""
    done = responses_to(conn.peer.events, rid, "session/prompt")
    if done:
        resp = done[0][1]
        reason = "error" if resp.is_error else repr(_stop_reason(resp))
        inconclusive(ENDED_EARLY.format(reason=reason, option=option))


async def await_end(acp: AgentHarness, conn: Connection, rid: Any, since: int) -> Response:
    """The answer to the cancelled turn; cancel.stop-asap is judged on whether it came in time."""
    resp = await wait_prompt_response(conn, rid, since)
    limit = conn.peer.timeout
    if resp is None:
        acp.check(
            "cancel.stop-asap",
            False,
            f"the cancelled turn answered within {limit:g} s of session/cancel",
            f"no session/prompt response {limit:g} s after session/cancel",
        )
        inconclusive(f"the cancelled turn was still unanswered {limit:g} s after session/cancel")
    acp.check("cancel.stop-asap", True, f"the cancelled turn answered within {limit:g} s of session/cancel", "")
    return resp


@dataclass
class Cancelled:
    """One cancelled turn, with what a re-run needs to tell "ended on its own" from "ignored the cancel"."""

    sid: str
    rid: Any
    prompt: str
    sent_at: float
    #: The agent was waiting for us (a held permission request) when the cancel went out.
    blocked: bool = False
    #: How a re-run answers permission requests (None: the connection's own policy).
    permission: str | None = None
    note: str = ""


async def ends_on_its_own(acp: AgentHarness, conn: Connection, turn: Cancelled, took: float) -> bool:
    """Re-run the turn's prompt, not cancelled: does it end by itself within twice the time the
    cancelled one took?  The re-run is tidied up with a cancel and judged nowhere."""
    conn.client.cancelled_sessions.discard(turn.sid)  # the endpoint would answer its permission "cancelled"
    if turn.permission is not None:
        conn.client.permission = PermissionPolicy(turn.permission)
    rid, start = await conn.client.send_prompt(turn.sid, turn.prompt)
    window = max(2 * took, MIN_RECHECK_WINDOW)
    if await wait_prompt_response(conn, rid, start, timeout=window) is not None:
        return True
    await conn.client.cancel(turn.sid)
    await wait_prompt_response(conn, rid, start)
    return False


async def judge_cancelled_turn(
    acp: AgentHarness, conn: Connection, turn: Cancelled, resp: Response, clause: str = "cancel.stop-reason"
) -> None:
    """A cancelled turn: a result (not an error) with stopReason cancelled, and no output after it.

    ``clause`` carries the stop-reason requirement: cancel.stop-reason, or perm.agent-cancel-race
    when the cancel met a pending permission request.
    """
    events = conn.peer.events
    answered = position_of(events, resp)
    took = anyio.current_time() - turn.sent_at
    await round_trip(conn)  # output trailing the answer would precede the round trip's answer
    late = late_turn_output(events, turn.sid, answered)
    result = resp.result if not resp.is_error and isinstance(resp.result, dict) else {}

    async def crossed() -> None:
        """INCONCLUSIVE when the answer may have been written before the agent read our cancel."""
        if not turn.blocked and await ends_on_its_own(acp, conn, turn, took):
            what = "an error" if resp.is_error else f"stopReason {result.get('stopReason')!r}"
            inconclusive(
                f"the turn ended with {what} after our cancel, but the same prompt not cancelled also ended "
                f"within {max(2 * took, MIN_RECHECK_WINDOW):.2f} s: its answer may have crossed our cancel; "
                "give a prompt that keeps the agent busy"
            )

    if resp.is_error:
        await crossed()
    acp.check(
        "cancel.no-error",
        not resp.is_error,
        'a result with stopReason "cancelled" (a cancelled turn is not an error)',
        f"error {resp.error!r}",
    )
    acp.check(
        "prompt.response.stop-reason",
        "stopReason" in result,
        "session/prompt to end with a result carrying stopReason",
        f"result {resp.result!r}",
    )
    reason = result["stopReason"]
    acp.check("prompt.stop-reason.enum", reason in STOP_REASONS, f"stopReason in {sorted(STOP_REASONS)}", repr(reason))
    if reason != "cancelled":
        await crossed()
    why = "the agent was waiting for our answer" if turn.blocked else "the same prompt not cancelled ran on"
    acp.check(
        clause,
        reason == "cancelled",
        'stopReason "cancelled" once session/cancel had arrived' + turn.note,
        f"stopReason {reason!r} (not a crossing: {why})",
    )
    acp.check(
        "cancel.updates-before-response",
        not late,
        "every update of the cancelled turn sent before its session/prompt response",
        f"{len(late)} update(s) after the response, first: {late[:1]}",
    )


async def start_long_turn(acp: AgentHarness, conn: Connection, sid: str) -> Cancelled:
    """Send --acp-long-prompt and wait until the agent visibly works on it."""
    sent_at = anyio.current_time()
    rid, start = await conn.client.send_prompt(sid, acp.config.long_prompt)
    await conn.peer.wait_for(turn_sign(sid, rid), start=start, what="the first output of the long turn")
    ended_before(conn, rid)
    return Cancelled(sid, rid, acp.config.long_prompt, sent_at)


CANCEL_CLAUSES = ("cancel.stop-reason", "cancel.no-error", "cancel.updates-before-response", "cancel.stop-asap")


@pytest.mark.clause(*CANCEL_CLAUSES, *TURN_CLAUSES)
async def test_cancel_while_streaming(acp_agent: AgentHarness, request: pytest.FixtureRequest) -> None:
    """Cancel once the long turn streams its first output."""
    async with acp_agent.connect() as conn:
        sid = await new_session(acp_agent, conn)
        turn = await start_long_turn(acp_agent, conn, sid)
        mark = len(conn.peer.events)
        await conn.client.cancel(sid)
        resp = await await_end(acp_agent, conn, turn.rid, mark)
        await judge_cancelled_turn(acp_agent, conn, turn, resp)
        close_out(acp_agent, request.node, "not judged on this path")


@pytest.mark.clause(*CANCEL_CLAUSES, *TURN_CLAUSES)
async def test_cancel_early_in_the_turn(acp_agent: AgentHarness, request: pytest.FixtureRequest) -> None:
    """Cancel as soon as the agent has taken the prompt: after a round trip (its answer proves the
    prompt was read) or its first frame, whichever comes first - typically before any output."""
    async with acp_agent.connect() as conn:
        sid = await new_session(acp_agent, conn)
        sent_at = anyio.current_time()
        rid, start = await conn.client.send_prompt(sid, acp_agent.config.long_prompt)
        await round_trip(conn, also=turn_sign(sid, rid))
        ended_before(conn, rid)
        events = conn.peer.events
        mark = len(events)
        output = late_turn_output(events, sid, start - 1, mark)
        await conn.client.cancel(sid)
        resp = await await_end(acp_agent, conn, rid, mark)
        when = "before any turn output" if not output else f"after {len(output)} update(s) of turn output"
        turn = Cancelled(sid, rid, acp_agent.config.long_prompt, sent_at, note=f" (cancelled {when})")
        await judge_cancelled_turn(acp_agent, conn, turn, resp)
        close_out(acp_agent, request.node, "not judged on this path")


@pytest.mark.clause(*CANCEL_CLAUSES, *TURN_CLAUSES)
async def test_cancel_twice(acp_agent: AgentHarness, request: pytest.FixtureRequest) -> None:
    """Two session/cancel for the same running turn: still one answer, stopReason cancelled."""
    async with acp_agent.connect() as conn:
        sid = await new_session(acp_agent, conn)
        turn = await start_long_turn(acp_agent, conn, sid)
        mark = len(conn.peer.events)
        await conn.client.cancel(sid)
        await conn.client.cancel(sid)
        resp = await await_end(acp_agent, conn, turn.rid, mark)
        await judge_cancelled_turn(acp_agent, conn, turn, resp)
        close_out(acp_agent, request.node, "not judged on this path")


@pytest.mark.clause("cancel.idle")
async def test_cancel_when_idle_leaves_the_session_usable(acp_agent: AgentHarness) -> None:
    """session/cancel with no turn running (a fresh session, then after a finished turn): ignored,
    so the next turn runs normally instead of ending cancelled."""
    async with acp_agent.connect() as conn:
        sid = await new_session(acp_agent, conn)
        for when in ("on a fresh session", "after a finished turn"):
            # Straight on the wire: the endpoint's cancel() would also arm its "answer later
            # permission requests with cancelled" behaviour for the session.
            await conn.peer.notify("session/cancel", {"sessionId": sid})
            await round_trip(conn)
            turn = await conn.client.prompt(sid, acp_agent.config.prompt)
            assert turn.response is not None
            resp = turn.response
            ok = not resp.is_error and _stop_reason(resp) not in (None, "cancelled")
            if not acp_agent.check(
                "cancel.idle",
                ok,
                f"a session/cancel {when} ignored: the next turn ends normally",
                f"error {resp.error!r}" if resp.is_error else f"stopReason {_stop_reason(resp)!r}",
            ):
                return


@pytest.mark.clause("prompt.concurrent-same-session")
async def test_a_second_prompt_while_one_runs_gets_one_answer(acp_agent: AgentHarness) -> None:
    """A second session/prompt on the same session while the long turn runs (unspecified: it may
    be refused or queued), then session/cancel: each of the two prompts is answered exactly once."""
    async with acp_agent.connect() as conn:
        sid = await new_session(acp_agent, conn)
        first = await start_long_turn(acp_agent, conn, sid)
        second, start = await conn.client.send_prompt(sid, acp_agent.config.prompt)
        await round_trip(conn, also=is_prompt_response(second))  # the second prompt was read
        ended_before(conn, first.rid)
        await conn.client.cancel(sid)
        for rid in (first.rid, second):
            await wait_prompt_response(conn, rid, start)
        await round_trip(conn)  # a second answer to either would precede this one
        events = conn.peer.events
        counts = [len(responses_to(events, rid, "session/prompt")) for rid in (first.rid, second)]
        acp_agent.check(
            "prompt.concurrent-same-session",
            counts == [1, 1],
            "exactly one answer (a result or an error) to each of two overlapping session/prompt requests",
            f"{counts[0]} answer(s) to the first (running) prompt, {counts[1]} to the second",
        )


@pytest.mark.clause("cancel.after-response")
async def test_cancel_crossing_the_response_changes_nothing(acp_agent: AgentHarness) -> None:
    """session/cancel sent once the turn's end_turn answer is in (from the agent's side, the cancel
    crosses an answer already on the wire): nothing more for that turn, no second answer."""
    async with acp_agent.connect() as conn:
        sid = await new_session(acp_agent, conn)
        turn = await conn.client.prompt(sid, acp_agent.config.prompt)
        assert turn.response is not None
        events = conn.peer.events
        answered = position_of(events, turn.response)
        await conn.peer.notify("session/cancel", {"sessionId": sid})
        await round_trip(conn)  # anything the cancel provoked precedes this answer
        late = late_turn_output(events, sid, answered)
        answers = responses_to(events, turn.response.id, "session/prompt")
        acp_agent.check(
            "cancel.after-response",
            not late and len(answers) == 1,
            "no turn output and no second answer after a session/cancel that followed the turn's answer",
            f"{len(late)} update(s) of turn output (first: {late[:1]}), {len(answers)} answer(s)",
        )


@pytest.mark.usefixtures("passive_bookkeeping")
@pytest.mark.clause("cancelreq.must-answer", "error.cancelled", "cancelreq.shape")
async def test_cancel_request_for_the_prompt_gets_one_answer(acp_agent: AgentHarness) -> None:
    """``$/cancel_request`` naming the pending session/prompt (support is optional): the request
    still gets exactly one response.  If the agent ignores it, session/cancel ends the turn."""
    async with acp_agent.connect() as conn:
        sid = await new_session(acp_agent, conn)
        rid = (await start_long_turn(acp_agent, conn, sid)).rid
        events = conn.peer.events
        mark = len(events)
        await conn.peer.notify("$/cancel_request", {"requestId": rid})
        await round_trip(conn, also=is_prompt_response(rid))
        also_cancelled = not responses_to(events, rid, "session/prompt")
        if also_cancelled:
            await conn.client.cancel(sid)
        resp = await wait_prompt_response(conn, rid, mark)
        via = "$/cancel_request and session/cancel" if also_cancelled else "$/cancel_request"
        acp_agent.check(
            "cancelreq.must-answer",
            resp is not None,
            f"a response to the session/prompt targeted by $/cancel_request (ended after {via})",
            f"no response within {conn.peer.timeout:g} s of {via}",
        )
        assert resp is not None
        if also_cancelled:
            # It ignored $/cancel_request (support is optional); the turn ended through session/cancel,
            # whose answer cancel.no-error judges.
            reason = "the agent did not act on $/cancel_request; the turn ended after session/cancel"
            acp_agent.record("error.cancelled", Status.NOT_APPLICABLE, reason)
        elif resp.is_error:
            # cancellation.mdx: a valid result, or an error with -32800 (Request Cancelled).
            code = resp.error.get("code") if isinstance(resp.error, dict) else None
            acp_agent.check(
                "error.cancelled",
                code == REQUEST_CANCELLED,
                f"error code {REQUEST_CANCELLED} (Request Cancelled) for the session/prompt answered with an "
                f"error after {via}",
                f"error {resp.error!r}",
            )
        else:
            reason = f"the agent answered the session/prompt with a result after {via}, not with an error"
            acp_agent.record("error.cancelled", Status.NOT_APPLICABLE, reason)
        await round_trip(conn)  # a second answer would precede this one
        answers = responses_to(events, rid, "session/prompt")
        acp_agent.check(
            "cancelreq.must-answer",
            len(answers) == 1,
            "exactly one response to the session/prompt targeted by $/cancel_request",
            f"{len(answers)} responses",
        )


# --------------------------------------------------- cancel vs pending permission
async def pending_permission(acp: AgentHarness, conn: Connection, sid: str) -> tuple[Cancelled, PermissionCall, int]:
    """Start a tool turn and wait for its first permission request (held, unanswered).

    Returns ``(the turn, the PermissionCall, its position)``; NOT_APPLICABLE when the turn ends
    without asking."""
    sent_at = anyio.current_time()
    rid, start = await conn.client.send_prompt(sid, acp.config.tool_prompt)

    def asked_or_done(e: Event) -> bool:
        return (
            isinstance(e, Request)
            and e.method == "session/request_permission"
            and isinstance(e.params, dict)
            and e.params.get("sessionId") == sid
        ) or is_prompt_response(rid)(e)

    ev = await conn.peer.wait_for(asked_or_done, start=start, what="a permission request or the turn's end")
    if isinstance(ev, Response):
        not_applicable(no_tool_reason(conn.peer.events, sid, start, what=NO_PERMISSION))
    while True:  # the endpoint registers the request in its own handler task
        call = next((c for c in conn.client.permission_calls if c.request is ev), None)
        if call is not None:
            turn = Cancelled(sid, rid, acp.config.tool_prompt, sent_at, blocked=True, permission="allow_once")
            return turn, call, position_of(conn.peer.events, ev)
        await conn.client.wait_permission(index=len(conn.client.permission_calls))


ORDERS = ("cancel-then-answer", "answer-then-cancel", "answer-after-round-trip", "never-answer")


@pytest.mark.parametrize("order", ORDERS)
@pytest.mark.clause(
    "perm.agent-cancel-race",
    "perm.agent-honours-outcome",
    "cancel.no-error",
    "cancel.updates-before-response",
    "cancel.stop-asap",
    *TURN_CLAUSES,
)
async def test_cancel_while_permission_pending(
    acp_agent: AgentHarness, order: str, request: pytest.FixtureRequest
) -> None:
    """Cancel while the agent waits for a permission answer, the client answering ``cancelled``
    after the cancel, before it, one round trip later, or never (a client MUST answer, so after a
    short observation window it does, late)."""
    async with acp_agent.connect(permission="hold") as conn:
        sid = await new_session(acp_agent, conn)
        turn, call, asked = await pending_permission(acp_agent, conn, sid)
        rid = turn.rid
        events = conn.peer.events
        mark = len(events)
        note = ""
        if order == "cancel-then-answer":
            await conn.client.cancel(sid)
        elif order == "answer-then-cancel":
            await conn.client.answer_permission(call, CANCELLED)
            await conn.client.cancel(sid)
        elif order == "answer-after-round-trip":
            await conn.client.cancel(sid, answer_pending=False)
            await round_trip(conn, also=is_prompt_response(rid))
            await conn.client.answer_permission(call, CANCELLED)
        else:
            await conn.client.cancel(sid, answer_pending=False)
            patience = min(NEVER_ANSWER_PATIENCE, conn.peer.timeout)
            if await wait_prompt_response(conn, rid, mark, timeout=patience) is None:
                note = f"; the agent waited for the permission answer, sent {patience:g} s after the cancel"
            else:
                note = "; the agent ended the turn without waiting for the permission answer"
            await conn.client.answer_permission(call, CANCELLED)
        resp = await await_end(acp_agent, conn, rid, mark)
        turn.note = note
        await judge_cancelled_turn(acp_agent, conn, turn, resp, clause="perm.agent-cancel-race")
        mentions = tool_mentions(events, sid)
        effects = unattributed_side_effects(events, mentions, {call.tool_call_id}, asked)
        acp_agent.check(
            "perm.agent-honours-outcome",
            not effects,
            f"the tool call {call.tool_call_id!r} not run after the cancelled outcome" + note,
            f"{len(effects)} call(s): " + ", ".join(describe(r) for _, r in effects[:3]),
        )
        close_out(acp_agent, request.node, "not judged on this path")


@pytest.mark.clause(*CANCEL_CLAUSES, *TURN_CLAUSES)
async def test_cancel_right_after_allowing(acp_agent: AgentHarness, request: pytest.FixtureRequest) -> None:
    """Allow the tool, then cancel at once: the tool may have started, the turn still ends cancelled."""
    async with acp_agent.connect(permission="hold") as conn:
        sid = await new_session(acp_agent, conn)
        turn, call, _ = await pending_permission(acp_agent, conn, sid)
        turn.blocked = False  # once allowed, the tool runs: the turn may end on its own
        rid = turn.rid
        options = call.request.params.get("options", []) if isinstance(call.request.params, dict) else []
        outcome = PermissionPolicy("allow_once").choose(options)
        if outcome is None or outcome.get("outcome") != "selected":
            not_applicable("the agent offered no allow option in its permission request")
        await conn.client.answer_permission(call, outcome)
        ended_before(conn, rid, "--acp-tool-prompt")
        mark = len(conn.peer.events)
        await conn.client.cancel(sid)
        resp = await await_end(acp_agent, conn, rid, mark)
        await judge_cancelled_turn(acp_agent, conn, turn, resp)
        close_out(acp_agent, request.node, "not judged on this path")
