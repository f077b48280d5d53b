"""What the agent suite's test modules share: opening sessions, running and reading turns,
describing answers, recording what a test could not judge.

Test modules import from here, never from each other (a test module is a list of cases, not a
library; importing one also collects its tests' fixtures and markers where they do not belong).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any

import pytest

from acp_conformance.checks import PASSIVE_CLAUSES
from acp_conformance.checks.turns import (
    position_of,
    tool_activity,
)
from acp_conformance.core import jsonrpc
from acp_conformance.core.events import Event, Notification, Request, Response
from acp_conformance.core.ids import same_id
from acp_conformance.core.vocabulary import TURN_OUTPUT
from acp_conformance.endpoints.client import PermissionCall, Turn
from acp_conformance.errors import PeerTimeout
from acp_conformance.harness import AgentHarness, Connection
from acp_conformance.plugin.markers import marked_clauses
from acp_conformance.results import Status
from acp_conformance.suite._support import (
    AUTH_REQUIRED,
    blocked_by_auth,
    check_auth,
    check_or_stop,
    inconclusive,
    not_applicable,
    unless_answered_elsewhere,
)

__all__ = [
    "AUTH_REQUIRED",
    "Json",
    "NO_PERMISSION",
    "PING",
    "STEER",
    "NOT_WAITING",
    "answers",
    "ask_permission",
    "asked_or_done",
    "authenticate_if_configured",
    "blocked_by_auth",
    "check_auth",
    "close_out",
    "describe",
    "describe_effect",
    "hold_proves",
    "is_prompt_response",
    "no_tool_reason",
    "open_session",
    "passive_not_exercised",
    "permission_calls",
    "position",
    "prompt_turn",
    "record",
    "require",
    "round_trip",
    "short",
    "start_long_turn",
    "stop_reason",
    "turn_sign",
    "update_for",
    "wait_cancelled_turn",
    "wait_prompt_response",
]


Json = dict[str, Any]


# ------------------------------------------------------------------ helpers


def short(value: Any, limit: int = 300) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def describe(resp: Response | None) -> str:
    if resp is None:
        return "no answer"
    return f"error {short(resp.error, 500)}" if resp.is_error else f"result {short(resp.result, 500)}"


async def authenticate_if_configured(acp: AgentHarness, conn: Connection) -> None:
    """What the harness does after its own initialize, for tests that initialize themselves."""
    if acp.config.auth_method:
        await conn.peer.request("authenticate", {"methodId": acp.config.auth_method})


async def open_session(
    acp: AgentHarness,
    conn: Connection,
    *,
    cwd: str | os.PathLike[str] | None = None,
    extra: Json | None = None,
    clause: str = "session.new.unique-id",
    expected: str = "session/new to succeed with a string sessionId",
) -> str:
    """``session/new`` (in the sandbox unless ``cwd``), judged on ``clause``."""
    params: Json = {"cwd": str(cwd or conn.sandbox.root), "mcpServers": [], **(extra or {})}
    resp = await conn.peer.call("session/new", params)
    check_auth(acp, conn, resp)
    ok = not resp.is_error and isinstance(resp.result, dict) and isinstance(resp.result.get("sessionId"), str)
    check_or_stop(acp, clause, ok, expected, describe(resp))
    assert isinstance(resp.result, dict)
    sid: str = resp.result["sessionId"]
    conn.client.sessions[sid] = resp.result
    return sid


async def plain_prompt_elsewhere(acp: AgentHarness, conn: Connection) -> Response | None:
    """The answer to the plain prompt on a fresh session: what the agent does with a prompt free
    of whatever a test added (``_meta``, a cancel before it).  A failure of the test's own prompt
    is that addition's doing only if this one ends normally; otherwise it is the baseline
    clauses' (content.text.baseline, prompt.response.stop-reason) and the test's is INCONCLUSIVE."""
    sid = await open_session(acp, conn)
    return (await conn.client.prompt(sid, acp.config.prompt)).response


async def prompt_turn(acp: AgentHarness, conn: Connection, sid: str, prompt: Any) -> Turn:
    """One prompt turn; an auth_required answer makes the test INCONCLUSIVE."""
    turn = await conn.client.prompt(sid, prompt)
    check_auth(acp, conn, turn.response)
    resp = turn.response
    assert resp is not None
    acp.check(
        "prompt.response.stop-reason",
        not resp.is_error and isinstance(resp.result, dict) and "stopReason" in resp.result,
        "session/prompt to end with a result carrying stopReason",
        describe(resp),
    )
    return turn


def position(events: Sequence[Event], ev: Event) -> int:
    """Where ``ev`` (this very object) sits in the arrival order."""
    return next(i for i, e in enumerate(events) if e is ev)


def answers(rid: Any) -> Callable[[Event], bool]:
    key = jsonrpc.id_key(rid)
    return lambda e: isinstance(e, Response) and e.method is not None and jsonrpc.id_key(e.id) == key


def update_for(sid: str) -> Callable[[Event], bool]:
    """An update of the session that is turn output (see ``TURN_OUTPUT``)."""
    return lambda e: (
        isinstance(e, Notification)
        and e.method == "session/update"
        and isinstance(e.params, dict)
        and e.params.get("sessionId") == sid
        and isinstance(e.params.get("update"), dict)
        and e.params["update"].get("sessionUpdate") in TURN_OUTPUT
    )


async def start_long_turn(acp: AgentHarness, conn: Connection, sid: str) -> tuple[Any, int]:
    """Start the long prompt and wait until it streams turn output (the turn is then provably
    running: session metadata such as available_commands_update may come before the agent even
    reads the prompt); INCONCLUSIVE if it ends first."""
    rid, start = await conn.client.send_prompt(sid, acp.config.long_prompt)
    is_update, is_answer = update_for(sid), answers(rid)
    first = await conn.peer.wait_for(
        lambda e: is_update(e) or is_answer(e),
        start=start,
        what="the first update of the long prompt turn",
        awaiting="session/prompt",
    )
    if isinstance(first, Response):
        check_auth(acp, conn, first)
        inconclusive(f"the long prompt turn ended before streaming anything ({describe(first)})")
    return rid, start


#: Why a tool clause could not be judged when the agent did not use a tool.
STEER = "the agent made no tool call for --acp-tool-prompt; steer it with --acp-tool-prompt"


#: A request no agent implements: the answer (-32601 expected, anything will do) closes a round trip.
PING = "_acp_conformance/ping"


# ------------------------------------------------------------ shared helpers
def record(acp: AgentHarness, status: Status, reason: str, *clauses: str) -> None:
    """Give each clause ``status`` (NOT_APPLICABLE / INCONCLUSIVE) for this test, with the reason."""
    for clause in clauses:
        acp.record(clause, status, reason)


def close_out(acp: AgentHarness, node: pytest.Item, reason: str) -> None:
    """Every clause this test is bound to but did not judge becomes INCONCLUSIVE, so that the
    plugin never counts an unexercised clause as passed."""
    judged = {r.clause for r in acp.results}
    for clause in marked_clauses(node):
        # Passive clauses are judged on the transcript when the connection closes, after this.
        if clause not in judged and clause not in PASSIVE_CLAUSES:
            acp.record(clause, Status.INCONCLUSIVE, reason)


def passive_not_exercised(acp: AgentHarness, node: pytest.Item) -> None:
    """Call after the test's connections closed (``passive_bookkeeping`` does): every stream-level
    clause the test is bound to that none of its transcripts exercised becomes NOT_APPLICABLE, so
    that the plugin does not count the test passing as the clause passing."""
    judged = {r.clause for r in acp.results}
    for clause in marked_clauses(node):
        if clause in PASSIVE_CLAUSES and clause not in judged:
            acp.record(clause, Status.NOT_APPLICABLE, "the agent sent no frame of this kind in this test")


def is_prompt_response(rid: Any) -> Callable[[Event], bool]:
    return lambda e: isinstance(e, Response) and e.method == "session/prompt" and same_id(e.id, rid)


async def round_trip(conn: Connection, *, also: Callable[[Event], bool] | None = None) -> Event:
    """Send a request every agent must answer and wait for the answer (or, if given, for an
    event matching ``also``): frames the agent wrote before answering are on record afterwards."""
    mark = len(conn.peer.events)
    rid = await conn.peer.send_request(PING, {"purpose": "round trip"})

    def done(e: Event) -> bool:
        return (isinstance(e, Response) and e.method == PING and same_id(e.id, rid)) or (also is not None and also(e))

    return await conn.peer.wait_for(done, start=mark, what=f"an answer to our {PING} request")


async def wait_cancelled_turn(conn: Connection, rid: Any, start: int) -> Response | None:
    """The answer to a turn we cancelled (or whose session we closed), or None if none came in time.

    Its silence flags nothing: the spec sets no deadline, and an agent that ignores the cancel and
    goes on with a slow model call cannot be told from one that dropped the prompt.  How soon a
    cancelled turn ends is ``cancel.stop-asap``'s (a SHOULD), its stop reason the cancel clauses'
    (judged when it comes); charging ``jsonrpc.every-request-answered`` too would count one defect
    twice, and its deadline miss would stop later tests from prompting at all (``DeadlineMemory``),
    so what they find would depend on test order."""
    return await wait_prompt_response(conn, rid, start, flag=False)


async def wait_prompt_response(
    conn: Connection, rid: Any, start: int, timeout: float | None = None, *, flag: bool = True
) -> Response | None:
    """The session/prompt response, or None if none came in time.  A full deadline passing is
    ``jsonrpc.every-request-answered`` (and a miss the run remembers, so a peer that never answers
    prompts costs two deadlines, not one per test); a shorter observation window flags nothing,
    nor does a wait whose silence a more specific clause judges (``flag=False``): that silence,
    when it is not proven (``Peer.why_unproven``: a response under an id matching nothing we sent
    came meanwhile), ends the test INCONCLUSIVE instead of reaching the caller's check."""
    full = flag and (timeout is None or timeout >= conn.peer.timeout)
    try:
        return await conn.peer.wait_response(rid, method="session/prompt", timeout=timeout, flag=full)
    except PeerTimeout as exc:
        if not flag:
            unless_answered_elsewhere(exc)
        return None


def permission_calls(conn: Connection, sid: str, start: int = 0, end: int | None = None) -> list[PermissionCall]:
    """Our record of the permission requests of ``sid`` that arrived in the event window."""
    events = conn.peer.events
    out = []
    for call in conn.client.permission_calls:
        if call.session_id != sid:
            continue
        pos = position_of(events, call.request)
        if pos >= start and (end is None or pos < end):
            out.append(call)
    return out


def turn_sign(sid: str, rid: Any) -> Callable[[Event], bool]:
    """The agent is working on the turn: any session/update, any request of its own, or the answer."""

    def pred(e: Event) -> bool:
        if isinstance(e, Notification) and e.method == "session/update":
            return True
        return isinstance(e, Request) or is_prompt_response(rid)(e)

    return pred


def asked_or_done(sid: str, rid: Any) -> Callable[[Event], bool]:
    """The agent asked permission in session ``sid``, or answered the prompt ``rid``: what a test
    that holds a tool turn on its permission request waits for."""

    def pred(e: Event) -> bool:
        return (
            isinstance(e, Request)
            and e.method == "session/request_permission"
            and isinstance(e.params, dict)
            and e.params.get("sessionId") == sid
        ) or is_prompt_response(rid)(e)

    return pred


async def ask_permission(acp: AgentHarness, conn: Connection, sid: str) -> tuple[Any, int, PermissionCall | Response]:
    """Start a tool turn (``--acp-tool-prompt``) and wait for its first permission request, which a
    connection made with ``permission="hold"`` leaves unanswered, or for the turn's answer if it
    asked nothing.  Returns ``(prompt id, event index before the prompt, the call or the answer)``."""
    rid, start = await conn.client.send_prompt(sid, acp.config.tool_prompt)
    ev = await conn.peer.wait_for(
        asked_or_done(sid, rid), start=start, what="a permission request or the turn's end", awaiting="session/prompt"
    )
    if isinstance(ev, Response):
        return rid, start, ev
    while True:  # the endpoint registers the request in its own handler task
        call = next((c for c in conn.client.permission_calls if c.request is ev), None)
        if call is not None:
            return rid, start, call
        await conn.client.wait_permission(index=len(conn.client.permission_calls))


def stop_reason(resp: Response) -> Any:
    """The stopReason of a session/prompt result; None for an error or a result without one."""
    return resp.result.get("stopReason") if not resp.is_error and isinstance(resp.result, dict) else None


#: Why a hold stopped being proof: the agent answered the turn before we answered its request.
NOT_WAITING = "; the agent ended the turn while its request was still unanswered: it was not waiting for it"


def hold_proves(held: str | None, released_at: int | None, answered: int) -> str | None:
    """``held`` (what kept the turn from ending by itself when our cancel or close went out), if it
    is still proof once the turn was answered at event ``answered``: an agent that answered before
    we answered the request we held (at ``released_at``; None: a hold we never released, such as a
    scripted model stream) was not waiting for it, nor, then, blocked by it."""
    if held is None or (released_at is not None and answered < released_at):
        return None
    return held


def require(conn: Connection, capability: str, what: str) -> None:
    """NOT_APPLICABLE unless the agent advertised ``capability`` (a dotted path of its capabilities)."""
    if not conn.client.agent_supports(capability):
        not_applicable(f"the agent does not advertise {what}")


def no_tool_reason(events: Sequence[Event], sid: str, start: int = 0, end: int | None = None, *, what: str) -> str:
    """Why a tool clause is not applicable: no tool call at all, or the agent did not do ``what``."""
    if not tool_activity(events, sid, start, end):
        return STEER
    return f"the agent {what} for --acp-tool-prompt"


NO_PERMISSION = "asked no permission (asking is optional: perm.may-request)"


def describe_effect(req: Request) -> str:
    """``fs/write_text_file /path`` or ``terminal/create cmd``: a side effect in a message."""
    p = req.params if isinstance(req.params, dict) else {}
    return f"{req.method} {p.get('path') or p.get('command') or ''}".rstrip()
