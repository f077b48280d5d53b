"""Cancelling a prompt turn (prompt-turn.mdx § Cancellation, cancellation.mdx).

Each interleaving is forced by the client, never hoped for: the turn is
kept busy by ``--acp-long-prompt`` (cancelled while it streams), blocked on
a permission request we hold (``permission="hold"``), or blocked on an
``fs/*`` / ``terminal/*`` request we hold (``hold_methods``), and every step
waits for an event - the agent's output, our own round trip, or the answer -
not for time to pass.

Once ``session/cancel`` has arrived, the turn must end with a *result*
``stopReason: "cancelled"`` (never a JSON-RPC error), and every update of
the turn must precede that result.

Races are judged only where the order is provable.  An answer the agent had
already decided (or written) when our cancel reached it cannot be told from
one decided after it: "we had not read the answer yet" and "a request sent
after the cancel was answered first" prove nothing about an agent that
handles messages concurrently.  So a turn that does not end ``cancelled``
FAILs only when something the suite held kept it open at the moment the
cancel went out (``ClientEndpoint.holding``): a request of the agent we had
not answered, or a slow model stream of the suite's scripted endpoint.  An
agent waiting for our answer cannot have finished its turn.  Otherwise the
result is INCONCLUSIVE, with the reason.  A turn still unanswered at the
deadline warns on cancel.stop-asap and leaves the other clauses
INCONCLUSIVE.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass
from typing import Any

import pytest

from acp_conformance.checks.turns import (
    STOP_REASONS,
    late_turn_output,
    position_of,
    responses_to,
    tool_mentions,
    unattributed_side_effects,
)
from acp_conformance.core.events import Event, Request, Response
from acp_conformance.endpoints.client import PermissionCall, PermissionPolicy
from acp_conformance.harness import AgentHarness, Connection
from acp_conformance.results import Status
from acp_conformance.suite._support import inconclusive, new_session, not_applicable
from acp_conformance.suite.agent._helpers import (
    NO_PERMISSION,
    NOT_WAITING,
    ask_permission,
    close_out,
    describe_effect,
    hold_proves,
    is_prompt_response,
    no_tool_reason,
    plain_prompt_elsewhere,
    round_trip,
    stop_reason,
    turn_sign,
    wait_cancelled_turn,
    wait_prompt_response,
)

pytestmark = pytest.mark.anyio

CANCELLED = {"outcome": "cancelled"}
#: The error code of a request aborted by cancellation (schema ErrorCode, cancellation.mdx).
REQUEST_CANCELLED = -32800
#: How long the "never answer" scenario lets the agent end the turn on its own before a
#: conforming client's (late) cancelled answer goes out.  An observation window, not a sync.
NEVER_ANSWER_PATIENCE = 1.0
ENDED_EARLY = (
    "the turn ended (stopReason {reason}) before our cancellation went out, so the race could not be "
    "provoked; give a {option} that keeps the agent busy"
)
#: Why a turn that did not end ``cancelled`` is not judged: nothing proves it was still running.
UNHELD = (
    "the turn ended with {what} after our session/cancel, but nothing held it open when the cancel went out "
    "(no request of the agent was waiting for our answer, no model stream of the suite's was open): the turn "
    "may have ended before the cancel reached the agent. A turn blocked on the suite is judged: a tool turn "
    "that asks permission (--acp-tool-prompt), or an adapter profile whose scripted model streams --acp-long-prompt"
)
TURN_CLAUSES = ("prompt.response.stop-reason", "prompt.stop-reason.enum")


def ended_before(conn: Connection, rid: Any, option: str = "--acp-long-prompt") -> None:
    """INCONCLUSIVE when the turn's answer is already here: there is nothing left to cancel."""
    done = responses_to(conn.peer.events, rid, "session/prompt")
    if done:
        resp = done[0][1]
        reason = "error" if resp.is_error else repr(stop_reason(resp))
        inconclusive(ENDED_EARLY.format(reason=reason, option=option))


async def await_end(acp: AgentHarness, conn: Connection, rid: Any, since: int) -> Response:
    """The answer to the cancelled turn; cancel.stop-asap is judged on whether it came in time."""
    resp = await wait_cancelled_turn(conn, rid, since)
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
    """One cancelled turn, and what (if anything) held it open when the cancel went out."""

    sid: str
    rid: Any
    prompt: str
    #: What the suite held that kept the turn from ending by itself when the cancel went out
    #: (``ClientEndpoint.holding``); None: nothing, so a non-cancelled end is not judged.
    held: str | None = None
    #: Event index at which the suite answered the request it held (None: not a request, or never).
    released_at: int | None = None
    #: A ``cancelled`` permission outcome went out before session/cancel: the agent may end the turn
    #: ``cancelled`` on it alone, before reading the cancel.
    outcome_first: bool = False
    #: session/cancel notifications we sent for the turn: with more than one, the agent may have read
    #: the last one after its answer (output then may be its reaction to that crossing cancel).
    cancels: int = 1
    note: str = ""


async def send_cancel(conn: Connection, turn: Cancelled, *, answer_pending: bool = True) -> int:
    """``session/cancel`` for the turn, noting what held it open at that moment; returns the
    event index before the cancel (its answer comes after)."""
    turn.held = conn.client.holding(turn.sid)
    mark = len(conn.peer.events)
    await conn.client.cancel(turn.sid, answer_pending=answer_pending)
    if answer_pending and turn.held is not None and turn.released_at is None:
        turn.released_at = len(conn.peer.events)  # the endpoint answered the pending permission requests
    return mark


def _still_held(turn: Cancelled, answered: int) -> str | None:
    """The turn's hold, if it is still proof (``hold_proves``); noted on the turn when it is not."""
    held = hold_proves(turn.held, turn.released_at, answered)
    if held is None and turn.held is not None:
        turn.note += NOT_WAITING
    return held


async def judge_cancelled_turn(
    acp: AgentHarness, conn: Connection, turn: Cancelled, resp: Response, clause: str = "cancel.stop-reason"
) -> None:
    """A cancelled turn: a result (not an error) with stopReason cancelled, and no output after it.

    ``clause`` carries the stop-reason requirement: cancel.stop-reason, or perm.agent-cancel-race
    when the cancel met a pending permission request (one defect, one clause).  A turn that did
    not end ``cancelled`` FAILs only when the suite held it open (``UNHELD`` otherwise).
    """
    events = conn.peer.events
    answered = position_of(events, resp)
    held = _still_held(turn, answered)
    await round_trip(conn)  # output trailing the answer would precede the round trip's answer
    late = late_turn_output(events, turn.sid, answered)
    result = resp.result if not resp.is_error and isinstance(resp.result, dict) else {}
    # The MUST binds updates sent after *receiving* the cancel. Proof that the agent had read it when
    # it answered: the turn was held by us when the cancel went out, or it answered "cancelled" with
    # nothing but our session/cancel to end it on. Otherwise the cancel may have crossed the answer,
    # and output after it is prompt.updates.before-response's (its own tests), not this MUST's.
    read_first = held is not None or (
        result.get("stopReason") == "cancelled" and not turn.outcome_first and turn.cancels == 1
    )
    if late and not read_first:
        acp.record(
            "cancel.updates-before-response",
            Status.INCONCLUSIVE,
            f"{len(late)} update(s) after the response (first: {late[:1]}), but the agent may have answered "
            f"before it read the cancel{turn.note}: not judged here",
        )
    else:
        acp.check(
            "cancel.updates-before-response",
            not late,
            "every update of the cancelled turn sent before its session/prompt response",
            f"{len(late)} update(s) after the response, first: {late[:1]}",
            stop=False,
        )
    what = f"error {resp.error!r}" if resp.is_error else f"stopReason {result.get('stopReason')!r}"
    if resp.is_error and held is None:
        inconclusive(UNHELD.format(what=what) + turn.note)
    acp.check(
        "cancel.no-error",
        not resp.is_error,
        'a result with stopReason "cancelled" (a cancelled turn is not an error)',
        f"error {resp.error!r} (the turn could not have ended by itself: {held})",
    )
    acp.check(
        "prompt.response.stop-reason",
        "stopReason" in result,
        "session/prompt to end with a result carrying stopReason",
        f"result {resp.result!r}",
    )
    reason = result["stopReason"]
    acp.check("prompt.stop-reason.enum", reason in STOP_REASONS, f"stopReason in {sorted(STOP_REASONS)}", repr(reason))
    if reason != "cancelled" and held is None:
        inconclusive(UNHELD.format(what=what) + turn.note)
    acp.check(
        clause,
        reason == "cancelled",
        'stopReason "cancelled" once session/cancel had arrived' + turn.note,
        f"stopReason {reason!r} for session {turn.sid!r} (prompt id {turn.rid!r}), although the turn could not "
        f"have ended by itself when the cancel went out: {held}",
        stop=False,  # what the agent did with the tool is judged after this, independently
    )


async def start_long_turn(acp: AgentHarness, conn: Connection, sid: str) -> Cancelled:
    """Send --acp-long-prompt and wait until the agent visibly works on it."""
    rid, start = await conn.client.send_prompt(sid, acp.config.long_prompt)
    await conn.peer.wait_for(
        turn_sign(sid, rid), start=start, what="the first output of the long turn", awaiting="session/prompt"
    )
    ended_before(conn, rid)
    return Cancelled(sid, rid, acp.config.long_prompt)


CANCEL_CLAUSES = ("cancel.stop-reason", "cancel.no-error", "cancel.updates-before-response", "cancel.stop-asap")


@pytest.mark.acp_clause(*CANCEL_CLAUSES, *TURN_CLAUSES)
async def test_cancel_while_streaming(acp_agent: AgentHarness, request: pytest.FixtureRequest) -> None:
    """Cancel once the long turn streams its first output."""
    async with acp_agent.connect() as conn:
        sid = await new_session(acp_agent, conn)
        turn = await start_long_turn(acp_agent, conn, sid)
        mark = await send_cancel(conn, turn)
        resp = await await_end(acp_agent, conn, turn.rid, mark)
        await judge_cancelled_turn(acp_agent, conn, turn, resp)
        close_out(acp_agent, request.node, "not judged on this path")


@pytest.mark.acp_clause(*CANCEL_CLAUSES, *TURN_CLAUSES)
async def test_cancel_early_in_the_turn(acp_agent: AgentHarness, request: pytest.FixtureRequest) -> None:
    """Cancel as soon as the agent has taken the prompt: after a round trip (its answer proves the
    prompt was read) or its first frame, whichever comes first - typically before any output."""
    async with acp_agent.connect() as conn:
        sid = await new_session(acp_agent, conn)
        rid, start = await conn.client.send_prompt(sid, acp_agent.config.long_prompt)
        await round_trip(conn, also=turn_sign(sid, rid))
        ended_before(conn, rid)
        events = conn.peer.events
        output = late_turn_output(events, sid, start - 1, len(events))
        when = "before any turn output" if not output else f"after {len(output)} update(s) of turn output"
        turn = Cancelled(sid, rid, acp_agent.config.long_prompt, note=f" (cancelled {when})")
        mark = await send_cancel(conn, turn)
        resp = await await_end(acp_agent, conn, rid, mark)
        await judge_cancelled_turn(acp_agent, conn, turn, resp)
        close_out(acp_agent, request.node, "not judged on this path")


@pytest.mark.acp_clause(*CANCEL_CLAUSES, *TURN_CLAUSES)
async def test_cancel_twice(acp_agent: AgentHarness, request: pytest.FixtureRequest) -> None:
    """Two session/cancel for the same running turn: still one answer, stopReason cancelled."""
    async with acp_agent.connect() as conn:
        sid = await new_session(acp_agent, conn)
        turn = await start_long_turn(acp_agent, conn, sid)
        mark = await send_cancel(conn, turn)
        await conn.client.cancel(sid)
        turn.cancels = 2
        resp = await await_end(acp_agent, conn, turn.rid, mark)
        await judge_cancelled_turn(acp_agent, conn, turn, resp)
        close_out(acp_agent, request.node, "not judged on this path")


@pytest.mark.acp_clause("cancel.idle")
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
            ok = not resp.is_error and stop_reason(resp) not in (None, "cancelled")
            if not resp.is_error and stop_reason(resp) is None:
                # The turn ran and ended, but names no stop reason (prompt.response.stop-reason's finding):
                # whether the cancel ended it cannot be told.
                acp_agent.record(
                    "cancel.idle",
                    Status.INCONCLUSIVE,
                    f"the turn after a session/cancel {when} ended without a stopReason: whether the cancel "
                    "ended it cannot be told",
                )
                return
            if not ok and resp.is_error:
                # The cancel's doing only if the same prompt, uncancelled, ends normally.
                baseline = await plain_prompt_elsewhere(acp_agent, conn)
                if baseline is None or baseline.is_error:
                    acp_agent.record(
                        "cancel.idle",
                        Status.INCONCLUSIVE,
                        f"the turn after a session/cancel {when} failed ({resp.error!r}), but so does the same "
                        "prompt on a session never cancelled: nothing shows the cancel was the cause",
                    )
                    return
            if not acp_agent.check(
                "cancel.idle",
                ok,
                f"a session/cancel {when} ignored: the next turn ends normally",
                f"error {resp.error!r}" if resp.is_error else f"stopReason {stop_reason(resp)!r}",
            ):
                return


@pytest.mark.acp_clause("prompt.concurrent-same-session", "jsonrpc.every-request-answered")
async def test_a_second_prompt_while_one_runs_gets_one_answer(acp_agent: AgentHarness) -> None:
    """A second session/prompt on the same session while the long turn runs (unspecified: it may
    be refused or queued), then session/cancel: each of the two prompts is answered exactly once."""
    async with acp_agent.connect() as conn:
        sid = await new_session(acp_agent, conn)
        first = await start_long_turn(acp_agent, conn, sid)
        second, _ = await conn.client.send_prompt(sid, acp_agent.config.prompt)
        await round_trip(conn, also=is_prompt_response(second))  # the second prompt was read
        ended_before(conn, first.rid)
        await conn.client.cancel(sid)
        if await wait_cancelled_turn(conn, first.rid, len(conn.peer.events)) is None:
            inconclusive(
                f"the cancelled long turn was still unanswered {conn.peer.timeout:g} s after session/cancel "
                "(how soon it must end is cancel.stop-asap's, judged by the cancel tests)"
            )
        # The second prompt was read (the round trip above) and not cancelled on its own: never answered,
        # it is jsonrpc.every-request-answered (a MUST), flagged by the wait at its deadline, whatever
        # the MAY about overlapping prompts allows.
        await conn.peer.wait_response(second, method="session/prompt")
        await round_trip(conn)  # a second answer to either would precede this one
        events = conn.peer.events
        counts = [len(responses_to(events, rid, "session/prompt")) for rid in (first.rid, second)]
        second_answer = responses_to(events, second, "session/prompt")[0][1]
        how = "refused it with an error" if second_answer.is_error else f"ran it ({describe_answer(second_answer)})"
        # Refusing or queueing the second prompt is the agent's choice (a MAY): PASS either way, with how;
        # a second answer to either is jsonrpc.no-duplicate-response, judged on the transcript.
        acp_agent.check(
            "prompt.concurrent-same-session",
            counts == [1, 1],
            "exactly one answer (a result or an error) to each of two overlapping session/prompt requests",
            f"{counts[0]} answer(s) to the first (running) prompt, {counts[1]} to the second",
        )
        acp_agent.results[-1].message += f"; the agent {how}"


@pytest.mark.acp_clause("cancel.after-response", "prompt.updates.before-response")
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
        # One defect, one clause: output after the turn's answer is prompt.updates.before-response's,
        # a second answer jsonrpc.no-duplicate-response's (on the transcript); the MAY only notes it.
        acp_agent.check(
            "prompt.updates.before-response",
            not late,
            "no output of the turn after its session/prompt answer, also when a session/cancel follows it",
            f"{len(late)} update(s) of turn output after the answer, provoked by the cancel (first: {late[:1]})",
        )
        acp_agent.check(
            "cancel.after-response",
            not late and len(answers) == 1,
            "no turn output and no second answer after a session/cancel that followed the turn's answer",
            f"{len(late)} update(s) of turn output (first: {late[:1]}), {len(answers)} answer(s)",
        )


@pytest.mark.usefixtures("passive_bookkeeping")
@pytest.mark.acp_clause("cancelreq.must-answer", "error.cancelled", "cancelreq.shape")
async def test_cancel_request_for_the_prompt_gets_one_answer(acp_agent: AgentHarness) -> None:
    """``$/cancel_request`` naming the pending session/prompt (support is optional): the request
    still gets exactly one response.  If the agent ignores it, session/cancel ends the turn."""
    async with acp_agent.connect(permission="hold") as conn:
        sid = await new_session(acp_agent, conn)
        # A tool turn blocked on a permission request we hold, when the agent asks one (the turn
        # then cannot end by itself, so an error it ends with answers our notification); else the
        # long turn, where only -32800 or a result can be judged.
        rid, start = await conn.client.send_prompt(sid, acp_agent.config.tool_prompt)
        first = await conn.peer.wait_for(
            lambda e: (
                (isinstance(e, Request) and e.method == "session/request_permission") or is_prompt_response(rid)(e)
            ),
            start=start,
            what="a permission request or the end of the tool turn",
            awaiting="session/prompt",
        )
        if isinstance(first, Response):
            conn.client.permission = PermissionPolicy("allow_once")
            rid = (await start_long_turn(acp_agent, conn, sid)).rid
        events = conn.peer.events
        mark = len(events)
        while isinstance(first, Request) and not conn.client.holding(sid):
            await conn.client.wait_permission(index=len(conn.client.permission_calls))
        held = conn.client.holding(sid)
        await conn.peer.notify("$/cancel_request", {"requestId": rid})
        await round_trip(conn, also=is_prompt_response(rid))
        if held is not None:
            # Blocked on us: an agent that acts on the notification ends the turn without our
            # answer (an observation window, not a sync: one that takes longer is not judged).
            await wait_prompt_response(conn, rid, mark, timeout=min(NEVER_ANSWER_PATIENCE, conn.peer.timeout))
        also_cancelled = not responses_to(events, rid, "session/prompt")
        if also_cancelled:
            await conn.client.cancel(sid)
        # No answer at all is cancelreq.must-answer's (the clause that names it), not flagged twice;
        # a turn still streaming at the deadline is winding down, not silent (INCONCLUSIVE: the spec
        # sets no time for it, cancel.stop-asap is a SHOULD; Peer.wait_response).
        resp = await wait_prompt_response(conn, rid, mark, flag=False)
        via = "$/cancel_request and session/cancel" if also_cancelled else "$/cancel_request"
        acp_agent.check(
            "cancelreq.must-answer",
            resp is not None,
            f"a response to the session/prompt targeted by $/cancel_request (ended after {via})",
            f"no response within {conn.peer.timeout:g} s of {via}",
        )
        assert resp is not None
        code = resp.code
        if also_cancelled:
            # It ignored $/cancel_request (support is optional); the turn ended through session/cancel,
            # whose answer cancel.no-error judges.
            reason = "the agent did not act on $/cancel_request; the turn ended after session/cancel"
            acp_agent.record("error.cancelled", Status.NOT_APPLICABLE, reason)
        elif not resp.is_error:
            reason = f"the agent answered the session/prompt with a result after {via}, not with an error"
            acp_agent.record("error.cancelled", Status.NOT_APPLICABLE, reason)
        elif code != REQUEST_CANCELLED and held is None:
            # An error the turn may have ended with by itself before the notification reached it.
            acp_agent.record(
                "error.cancelled",
                Status.INCONCLUSIVE,
                f"the session/prompt ended with error {resp.error!r} after $/cancel_request, but nothing held the "
                "turn open when it went out: the error may have been decided before the agent read it",
            )
        else:
            # cancellation.mdx: a valid result, or an error with -32800 (Request Cancelled).
            acp_agent.check(
                "error.cancelled",
                code == REQUEST_CANCELLED,
                f"error code {REQUEST_CANCELLED} (Request Cancelled) for the session/prompt answered with an "
                f"error after {via}",
                f"error {resp.error!r} (the turn could not have ended by itself: {held})",
            )
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
    rid, start, call = await ask_permission(acp, conn, sid)
    if isinstance(call, Response):
        not_applicable(no_tool_reason(conn.peer.events, sid, start, what=NO_PERMISSION))
    return Cancelled(sid, rid, acp.config.tool_prompt), call, position_of(conn.peer.events, call.request)


ORDERS = ("cancel-then-answer", "answer-then-cancel", "answer-after-round-trip", "never-answer")


@pytest.mark.parametrize("order", ORDERS)
@pytest.mark.acp_clause(
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
    short observation window it does, late).  Answering first releases the agent before the
    cancel goes out, so that order is judged only when the turn ends ``cancelled``."""
    async with acp_agent.connect(permission="hold") as conn:
        sid = await new_session(acp_agent, conn)
        turn, call, asked = await pending_permission(acp_agent, conn, sid)
        rid = turn.rid
        events = conn.peer.events
        if order == "cancel-then-answer":
            mark = await send_cancel(conn, turn)
        elif order == "answer-then-cancel":
            await conn.client.answer_permission(call, CANCELLED)
            mark = await send_cancel(conn, turn)
            turn.outcome_first = True
            turn.note = "; the cancelled outcome went out before session/cancel, so the agent could end on it alone"
        elif order == "answer-after-round-trip":
            mark = await send_cancel(conn, turn, answer_pending=False)
            await round_trip(conn, also=is_prompt_response(rid))
            turn.released_at = len(events)
            await conn.client.answer_permission(call, CANCELLED)
        else:
            mark = await send_cancel(conn, turn, answer_pending=False)
            patience = min(NEVER_ANSWER_PATIENCE, conn.peer.timeout)
            if await wait_prompt_response(conn, rid, mark, timeout=patience) is None:
                turn.note = f"; the agent waited for the permission answer, sent {patience:g} s after the cancel"
            turn.released_at = len(events)
            await conn.client.answer_permission(call, CANCELLED)
        resp = await await_end(acp_agent, conn, rid, mark)
        await judge_cancelled_turn(acp_agent, conn, turn, resp, clause="perm.agent-cancel-race")
        mentions = tool_mentions(events, sid)
        effects = unattributed_side_effects(events, mentions, {call.tool_call_id}, asked)
        acp_agent.check(
            "perm.agent-honours-outcome",
            not effects,
            f"the tool call {call.tool_call_id!r} not run after the cancelled outcome" + turn.note,
            f"{len(effects)} call(s): " + ", ".join(describe_effect(r) for _, r in effects[:3]),
        )
        close_out(acp_agent, request.node, "not judged on this path")


@pytest.mark.acp_clause(*CANCEL_CLAUSES, *TURN_CLAUSES)
async def test_cancel_right_after_allowing(acp_agent: AgentHarness, request: pytest.FixtureRequest) -> None:
    """Allow the tool, then cancel at once: the tool may have started, the turn still ends cancelled.
    Nothing is held once the permission is answered, so only a ``cancelled`` end is judged here
    (``test_cancel_while_a_client_request_is_held`` is the provable version)."""
    async with acp_agent.connect(permission="hold") as conn:
        sid = await new_session(acp_agent, conn)
        turn, call, _ = await pending_permission(acp_agent, conn, sid)
        rid = turn.rid
        options = call.request.params.get("options", []) if isinstance(call.request.params, dict) else []
        outcome = PermissionPolicy("allow_once").choose(options)
        if outcome is None or outcome.get("outcome") != "selected":
            not_applicable("the agent offered no allow option in its permission request")
        await conn.client.answer_permission(call, outcome)
        ended_before(conn, rid, "--acp-tool-prompt")
        mark = await send_cancel(conn, turn)
        resp = await await_end(acp_agent, conn, rid, mark)
        await judge_cancelled_turn(acp_agent, conn, turn, resp)
        close_out(acp_agent, request.node, "not judged on this path")


#: The client requests a tool turn may make once allowed, held by the suite to keep the turn open.
HELD_METHODS = ("fs/*", "terminal/*")


@pytest.mark.acp_clause(*CANCEL_CLAUSES, *TURN_CLAUSES)
async def test_cancel_while_a_client_request_is_held(acp_agent: AgentHarness, request: pytest.FixtureRequest) -> None:
    """Allow the tool, hold the first ``fs/*`` or ``terminal/*`` request the agent then makes,
    cancel while it is held, then serve it: the agent was waiting for us when the cancel went
    out, so the turn must end ``cancelled`` (the provable form of a cancel mid-tool)."""
    async with acp_agent.connect(permission="allow_once") as conn:
        conn.client.hold_methods.update(HELD_METHODS)
        sid = await new_session(acp_agent, conn)
        rid, start = await conn.client.send_prompt(sid, acp_agent.config.tool_prompt)

        def held_or_done(e: Event) -> bool:
            return (
                isinstance(e, Request)
                and any(fnmatch.fnmatchcase(e.method, m) for m in HELD_METHODS)
                and isinstance(e.params, dict)
                and e.params.get("sessionId") == sid
            ) or is_prompt_response(rid)(e)

        ev = await conn.peer.wait_for(
            held_or_done, start=start, what="an fs/* or terminal/* request, or the end", awaiting="session/prompt"
        )
        if isinstance(ev, Response):
            what = "made no fs/* or terminal/* request of the client during its tool turn"
            not_applicable(no_tool_reason(conn.peer.events, sid, start, what=what))
        assert isinstance(ev, Request)
        held = next((h for h in conn.client.held if h.request is ev), None)
        while held is None:  # the endpoint registers the request in its own handler task
            await conn.client.wait_held(index=len(conn.client.held))
            held = next((h for h in conn.client.held if h.request is ev), None)
        turn = Cancelled(sid, rid, acp_agent.config.tool_prompt, note=f" (cancelled while {ev.method} was held)")
        mark = await send_cancel(conn, turn)
        turn.released_at = len(conn.peer.events)
        conn.client.hold_methods.clear()
        conn.client.release_all()
        resp = await await_end(acp_agent, conn, rid, mark)
        await judge_cancelled_turn(acp_agent, conn, turn, resp)
        close_out(acp_agent, request.node, "not judged on this path")


def describe_answer(resp: Response) -> str:
    return f"error {resp.error!r}" if resp.is_error else f"stopReason {stop_reason(resp)!r}"
