"""Sessions: session/new (cwd, MCP servers), load and its replay, resume, close, list, delete.

The helpers at the top are shared by the other session-area modules
(modes/config, extensibility, auth): ``open_session`` and ``prompt_turn``
report an agent that refuses with -32000 (auth_required) while no
``--acp-auth-method`` was given as INCONCLUSIVE ("blocked"), never as a
pass or a failure of the clause under test.
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from acp_conformance.checks.sessions import (
    extra_result_keys,
    history,
    is_within,
    message_id_problems,
    replay_problems,
    session_updates,
    update_kind,
)
from acp_conformance.checks.turns import STOP_REASONS, position_of
from acp_conformance.core import jsonrpc
from acp_conformance.core.events import Notification, Request, Response
from acp_conformance.errors import PeerTimeout
from acp_conformance.harness import AgentHarness, Connection
from acp_conformance.results import Status
from acp_conformance.suite._support import inconclusive, not_applicable, silence_judged_once
from acp_conformance.suite.agent._helpers import (
    NO_PERMISSION,
    NOT_WAITING,
    Json,
    ask_permission,
    check_auth,
    describe,
    hold_proves,
    no_tool_reason,
    open_session,
    position,
    prompt_turn,
    require,
    round_trip,
    short,
    start_long_turn,
    stop_reason,
    wait_cancelled_turn,
)

pytestmark = pytest.mark.anyio

RESOURCE_NOT_FOUND = jsonrpc.ErrorCode.RESOURCE_NOT_FOUND


# -------------------------------------------------------------- session/new
@pytest.mark.acp_clause("session.cwd.relative-rejected")
async def test_relative_cwd_is_rejected(acp_agent: AgentHarness) -> None:
    async with acp_agent.connect() as conn:
        await open_session(acp_agent, conn)  # an auth-gated agent is reported as blocked, not judged
        resp = await conn.peer.call("session/new", {"cwd": "acp-conformance/relative", "mcpServers": []})
        acp_agent.check(
            "session.cwd.relative-rejected",
            resp.is_error,
            "an error for session/new with the relative cwd 'acp-conformance/relative'",
            describe(resp),
        )


MCP_STUB = '''\
"""A minimal stdio MCP server (no tools) written by acp-conformance."""
import json
import sys

for line in sys.stdin:
    try:
        msg = json.loads(line)
    except ValueError:
        continue
    if not isinstance(msg, dict) or "id" not in msg or "method" not in msg:
        continue
    method, params = msg["method"], msg.get("params") or {}
    if method == "initialize":
        result = {
            "protocolVersion": params.get("protocolVersion", "2025-06-18"),
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "acp-conformance-stub", "version": "1"},
        }
        out = {"jsonrpc": "2.0", "id": msg["id"], "result": result}
    elif method == "tools/list":
        out = {"jsonrpc": "2.0", "id": msg["id"], "result": {"tools": []}}
    elif method == "ping":
        out = {"jsonrpc": "2.0", "id": msg["id"], "result": {}}
    else:
        out = {"jsonrpc": "2.0", "id": msg["id"], "error": {"code": -32601, "message": "Method not found"}}
    sys.stdout.write(json.dumps(out) + "\\n")
    sys.stdout.flush()
'''


@pytest.mark.acp_clause("session.mcp.stdio")
async def test_stdio_mcp_server_is_accepted(acp_agent: AgentHarness) -> None:
    """Every agent supports stdio MCP servers: a well-formed entry must not be refused."""
    stub = acp_agent.workdir / "acp_conformance_mcp_stub.py"
    stub.write_text(MCP_STUB, "utf-8")
    server = {"name": "acp-conformance-stub", "command": sys.executable, "args": [str(stub)], "env": []}
    async with acp_agent.connect() as conn:
        await open_session(
            acp_agent,
            conn,
            extra={"mcpServers": [server]},
            clause="session.mcp.stdio",
            expected=f"session/new with the stdio MCP server {server} to succeed",
        )


def _paths_of_turn(conn: Connection, start: int, end: int) -> list[tuple[str, str]]:
    """``(where, absolute path)`` for every path the agent used in ``events[start:end]``."""
    found: list[tuple[str, str]] = []

    def add(where: str, path: Any) -> None:
        if isinstance(path, str) and os.path.isabs(path):
            found.append((where, path))

    def locations(where: str, obj: Any) -> None:
        if not isinstance(obj, dict):
            return
        for loc in obj.get("locations") or []:
            if isinstance(loc, dict):
                add(f"{where} location", loc.get("path"))
        for item in obj.get("content") or []:
            if isinstance(item, dict) and item.get("type") == "diff":
                add(f"{where} diff", item.get("path"))

    for ev in conn.peer.events[start:end]:
        params = ev.params if isinstance(ev, (Request, Notification)) and isinstance(ev.params, dict) else None
        if params is None:
            continue
        if isinstance(ev, Request):
            if ev.method in ("fs/read_text_file", "fs/write_text_file"):
                add(ev.method, params.get("path"))
            elif ev.method == "terminal/create":
                add("terminal/create cwd", params.get("cwd"))
            elif ev.method == "session/request_permission":
                locations("permission toolCall", params.get("toolCall"))
        elif update_kind(params) in ("tool_call", "tool_call_update"):
            locations(update_kind(params) or "", params.get("update"))
    return found


@pytest.mark.acp_clause("session.cwd.authoritative", "session.roots.boundary")
async def test_tool_paths_follow_the_session_cwd(acp_agent: AgentHarness) -> None:
    """A tool turn: paths must resolve against the session cwd, not the agent's own process directory.

    The agent process runs in another directory (the temp dir, or --acp-agent-cwd);
    a file the tool prompt names (acp-probe.txt by default) that turns up in that
    directory instead of the session cwd is what resolving against it produces.
    """
    process_dir = Path(acp_agent.config.cwd or tempfile.gettempdir()).resolve()
    async with acp_agent.connect() as conn:
        root = conn.sandbox.root
        sid = await open_session(acp_agent, conn)
        turn = await prompt_turn(acp_agent, conn, sid, acp_agent.config.tool_prompt)
        paths = _paths_of_turn(conn, turn.start_event, turn.end_event)
        if not paths:
            inconclusive("the tool turn used no file path (no fs/*, terminal cwd or tool call location)")
        outside = [p for p in paths if not is_within(p[1], root)]
        acp_agent.check(
            "session.roots.boundary",
            not outside,
            f"every path of the tool turn inside the session's root set [{root}]",
            f"outside: {outside[:5]}",
        )
        inside = [p for p in paths if is_within(p[1], root)]
        # A file the prompt names, placed in the process directory instead of the session cwd.
        prompt = acp_agent.config.tool_prompt
        stray = [p for p in outside if is_within(p[1], process_dir) and os.path.basename(p[1]) in prompt]
        if stray or inside:
            acp_agent.check(
                "session.cwd.authoritative",
                not stray,
                f"files the tool prompt names resolved against the session cwd {root}, not against the "
                f"agent's process directory {process_dir}",
                f"resolved against the process directory: {stray[:5]}",
            )
        else:
            acp_agent.record(
                "session.cwd.authoritative",
                Status.INCONCLUSIVE,
                f"no path of the tool turn lies in the session cwd or names a file of the prompt: {paths[:5]}",
            )


# ------------------------------------------------------------- session/load
@dataclass
class _Load:
    """One session/load as observed."""

    where: str
    resp: Response
    #: every session/update between the request and its response, in order
    replay: list[Json] = field(default_factory=list)
    #: history updates of the session after the response (until a round trip)
    late: list[Json] = field(default_factory=list)


async def _load(acp: AgentHarness, conn: Connection, sid: str, cwd: str, where: str) -> _Load:
    start = len(conn.peer.events)
    resp = await conn.peer.call("session/load", {"sessionId": sid, "cwd": cwd, "mcpServers": []})
    check_auth(acp, conn, resp)
    end = position(conn.peer.events, resp)
    load = _Load(where, resp, session_updates(conn.peer.events, start, end))
    if not resp.is_error:
        await open_session(acp, conn)  # a round trip: replay sent after the answer would precede its answer
        load.late = history(session_updates(conn.peer.events, end + 1, None, sid))
    return load


def _judge_load(acp: AgentHarness, load: _Load, sid: str, turns: Sequence[tuple[str, Sequence[Json]]]) -> None:
    result = load.resp.result
    if result is None:
        # The docs' example answers null; the schema wants an object: schema.null-result (a SHOULD).
        acp.check("schema.null-result", False, "an object result (LoadSessionResponse)", f"result null {load.where}")
    else:
        acp.check("schema.null-result", True, "an object result (LoadSessionResponse), not null", "")
        acp.check(
            "session.load.response",
            isinstance(result, dict),
            f"an object result (LoadSessionResponse) {load.where}",
            f"result {short(result)}",
        )
    foreign = [u.get("sessionId") for u in load.replay if u.get("sessionId") != sid]
    acp.check(
        "session.load.replay-session-id",
        not foreign,
        f"every update replayed {load.where} to carry the loaded sessionId {sid!r}",
        f"sessionIds {sorted(set(map(str, foreign)))}",
    )
    acp.check(
        "session.load.replay-before-response",
        not load.late,
        f"the whole replay before the session/load response {load.where}",
        f"{len(load.late)} history update(s) after the response, first: {short(load.late[:1])}",
    )
    problems = replay_problems(turns, load.replay)
    acp.check(
        "session.load.replay-all",
        not problems,
        f"the whole conversation ({len(turns)} turn(s)) replayed before the response {load.where}",
        "; ".join(problems) + f" (replayed kinds: {[update_kind(u) for u in load.replay][:30]})",
    )
    chunks = [u for u in load.replay if isinstance(u.get("update"), dict) and "messageId" in u["update"]]
    if not any(isinstance(u["update"].get("messageId"), str) for u in chunks):
        acp.record(
            "session.load.message-ids", Status.NOT_APPLICABLE, f"no replayed chunk carries a messageId {load.where}"
        )
        return
    bad = message_id_problems(load.replay)
    acp.check(
        "session.load.message-ids",
        not bad,
        f"a distinct messageId per replayed message {load.where}",
        "; ".join(bad),
    )


async def _continue(acp: AgentHarness, conn: Connection, sid: str, where: str) -> tuple[str, list[Json]]:
    prompt = acp.config.prompt
    turn = await conn.client.prompt(sid, prompt)
    check_auth(acp, conn, turn.response)
    resp = turn.response
    acp.check(
        "session.load.continue",
        resp is not None and not resp.is_error and isinstance(resp.result, dict) and "stopReason" in resp.result,
        f"a session/prompt on the session loaded {where} to end with a stopReason",
        describe(resp),
    )
    return prompt, [n.params for n in turn.updates]


def _unknown_session_error(resp: Response) -> bool:
    err = resp.error if isinstance(resp.error, dict) else {}
    text = str(err.get("message", "")).lower()
    return resp.code == RESOURCE_NOT_FOUND or any(
        s in text for s in ("not found", "unknown", "no such", "does not exist", "doesn't exist")
    )


@pytest.mark.acp_clause(
    "session.load.response",
    "schema.null-result",
    "session.load.replay-session-id",
    "session.load.replay-before-response",
    "session.load.replay-all",
    "session.load.message-ids",
    "session.load.continue",
)
async def test_load_replays_the_conversation(acp_agent: AgentHarness) -> None:
    """A plain and a tool turn, then session/load on the same connection and on a fresh agent process."""
    turns: list[tuple[str, Sequence[Json]]] = []
    async with acp_agent.connect() as conn:
        require(conn, "loadSession", "loadSession")
        sid = await open_session(acp_agent, conn)
        cwd = str(conn.sandbox.root)
        for prompt in (acp_agent.config.prompt, acp_agent.config.tool_prompt):
            turn = await prompt_turn(acp_agent, conn, sid, prompt)
            turns.append((prompt, [n.params for n in turn.updates]))
            with contextlib.suppress(PeerTimeout):
                # Output written right behind an answer (prompt.updates.before-response's finding) lands
                # before the next prompt goes out, not in the next turn's window, where it would be
                # expected in the replay.
                await round_trip(conn)
        same = await _load(acp_agent, conn, sid, cwd, "on the same connection")
        if not same.resp.is_error:
            _judge_load(acp_agent, same, sid, turns)
            turns.append(await _continue(acp_agent, conn, sid, same.where))
    async with acp_agent.connect() as conn:
        fresh = await _load(acp_agent, conn, sid, cwd, "by a fresh agent process")
        if not fresh.resp.is_error:
            _judge_load(acp_agent, fresh, sid, turns)
            await _continue(acp_agent, conn, sid, fresh.where)
        elif not same.resp.is_error:
            why = "it does not know the session" if _unknown_session_error(fresh.resp) else "it answered an error"
            note = (
                f"a fresh agent process could not load the session ({why}: {describe(fresh.resp)}); "
                "the replay was judged on the same-connection load only"
            )
            conn.transcript.note(note)
            for clause in ("session.load.replay-all", "session.load.replay-before-response"):
                acp_agent.record(clause, Status.INCONCLUSIVE, note)
        else:
            acp_agent.check(
                "session.load.replay-all",
                False,
                "session/load of a session this agent created to replay it, on the same connection or a fresh one",
                f"same connection: {describe(same.resp)}; fresh process: {describe(fresh.resp)}",
            )


@pytest.mark.acp_clause("error.resource-not-found")
async def test_load_of_an_unknown_session_is_not_found(acp_agent: AgentHarness) -> None:
    async with acp_agent.connect() as conn:
        require(conn, "loadSession", "loadSession")
        await open_session(acp_agent, conn)
        bogus = f"acp-conformance-unknown-{uuid.uuid4().hex}"
        resp = await conn.peer.call(
            "session/load", {"sessionId": bogus, "cwd": str(conn.sandbox.root), "mcpServers": []}
        )
        acp_agent.check(
            "error.resource-not-found",
            resp.code == RESOURCE_NOT_FOUND,
            f"error -32002 (resource not found) for session/load of the unknown sessionId {bogus!r}, not a success",
            describe(resp),
        )


@pytest.mark.acp_clause("session.load.unsupported")
async def test_load_without_the_capability_is_refused(acp_agent: AgentHarness) -> None:
    async with acp_agent.connect() as conn:
        if conn.client.agent_supports("loadSession"):
            not_applicable("the agent advertises loadSession")
        sid = await open_session(acp_agent, conn)
        expected = "an error for session/load, which the agent does not advertise (loadSession absent or false)"
        try:
            resp = await conn.peer.call(
                "session/load", {"sessionId": sid, "cwd": str(conn.sandbox.root), "mcpServers": []}
            )
        except PeerTimeout as exc:
            silence_judged_once(acp_agent, "session.load.unsupported", expected, exc)
            return
        acp_agent.check("session.load.unsupported", resp.is_error, expected, describe(resp))


# ----------------------------------------------------------- session/resume
@pytest.mark.acp_clause("session.resume.response", "session.resume.no-replay")
async def test_resume_answers_without_replay(acp_agent: AgentHarness) -> None:
    async with acp_agent.connect() as conn:
        require(conn, "sessionCapabilities.resume", "sessionCapabilities.resume")
        sid = await open_session(acp_agent, conn)
        await prompt_turn(acp_agent, conn, sid, acp_agent.config.prompt)
        await open_session(acp_agent, conn)  # a round trip: output trailing the turn is not taken for replay
        start = len(conn.peer.events)
        resp = await conn.peer.call(
            "session/resume", {"sessionId": sid, "cwd": str(conn.sandbox.root), "mcpServers": []}
        )
        check_auth(acp_agent, conn, resp)
        replayed = history(session_updates(conn.peer.events, start, position(conn.peer.events, resp), sid))
        acp_agent.check(
            "session.resume.response",
            not resp.is_error and isinstance(resp.result, dict),
            "an object result (ResumeSessionResponse) for session/resume of a session of this connection",
            describe(resp),
        )
        acp_agent.check(
            "session.resume.no-replay",
            not replayed,
            "no history (chunks, tool calls, plans) of the session before the session/resume response",
            f"{len(replayed)} history update(s), kinds {[update_kind(u) for u in replayed][:20]}",
        )


# ------------------------------------------------------------ session/close
#: Why a closed turn that did not end ``cancelled`` is not judged: nothing proves it was still running.
CLOSE_UNHELD = (
    "the turn ended with {what} after our session/close, but nothing held it open when the close went out "
    "(no request of the agent was waiting for our answer, no model stream of the suite's was open): it may have "
    "ended before the agent read the close. The held form of this test (a tool turn that asks permission, "
    "--acp-tool-prompt) is judged"
)


async def judge_closed_turn(
    acp: AgentHarness, conn: Connection, sid: str, rid: Any, held: str | None, *, request_held: bool = False
) -> None:
    """Close the session of a running turn and judge how the turn ended (session.close.cancels-work).

    The close cancels "as if session/cancel had been called" (session-setup.mdx), so the turn MUST
    end with stopReason ``cancelled``; but only a turn provably still running when the agent read
    the close can be held to it. ``held`` is what kept it from ending by itself when the close went
    out (``ClientEndpoint.holding``). With ``request_held`` that is a request of the agent we had not
    answered: ``send_close`` answers it ``cancelled`` right behind the close (as a client does after
    a cancel), and an agent that answered the turn before that answer was not waiting for it, so the
    hold proves nothing then. A turn still unanswered at our deadline is not judged either: the spec
    sets no deadline, and how soon a cancelled turn ends is cancel.stop-asap's; nor is the close's
    own answer (an agent may answer it only once the turn has wound down)."""
    mark = len(conn.peer.events)
    close_rid = await conn.client.send_close(sid)
    released_at = len(conn.peer.events)
    resp = await wait_cancelled_turn(conn, rid, mark)
    limit = conn.peer.timeout
    if resp is None:
        inconclusive(
            f"the running turn was still unanswered {limit:g} s after session/close: whether it would have "
            "ended cancelled cannot be told (how soon a cancelled turn ends is cancel.stop-asap's, a SHOULD)"
        )
    try:
        close: Response | None = await conn.peer.wait_response(close_rid, method="session/close", flag=False)
    except PeerTimeout:
        close = None
    answered = position_of(conn.peer.events, resp)
    if answered < mark:
        inconclusive(f"the turn ended ({describe(resp)}) before session/close was sent")
    proof = hold_proves(held, released_at if request_held else None, answered)
    note = NOT_WAITING if held is not None and proof is None else ""
    held = proof
    stop = stop_reason(resp)
    if not resp.is_error and stop not in STOP_REASONS:
        # Ended, but without a stop reason that says how (none, or one the schema does not list:
        # prompt.response.stop-reason's / prompt.stop-reason.enum's finding).
        inconclusive(
            f"the running turn ended when its session was closed, but its answer names no valid stopReason "
            f"({describe(resp)}), so whether it was cancelled cannot be told"
        )
    if stop != "cancelled" and held is None:
        inconclusive(CLOSE_UNHELD.format(what=describe(resp)) + note)
    acp.check(
        "session.close.cancels-work",
        stop == "cancelled",
        "the running session/prompt to end with a result stopReason 'cancelled' when its session is closed",
        f"prompt: {describe(resp)}, although the turn could not have ended by itself when the close went out "
        f"({held}); session/close: {describe(close) if close is not None else f'unanswered after {limit:g} s'}",
    )


@pytest.mark.acp_clause("session.close.cancels-work")
async def test_close_cancels_the_running_turn(acp_agent: AgentHarness) -> None:
    """Close the session while the long turn streams: judged when the turn ends ``cancelled``, or
    when an adapter profile's scripted model stream held it open (``CLOSE_UNHELD`` otherwise)."""
    async with acp_agent.connect() as conn:
        require(conn, "sessionCapabilities.close", "sessionCapabilities.close")
        sid = await open_session(acp_agent, conn)
        rid, _ = await start_long_turn(acp_agent, conn, sid)
        await judge_closed_turn(acp_agent, conn, sid, rid, conn.client.holding(sid))


@pytest.mark.acp_clause("session.close.cancels-work")
async def test_close_while_permission_pending(acp_agent: AgentHarness) -> None:
    """Close the session while the agent waits for our answer to its permission request (we hold
    it; the close then answers it ``cancelled``): the turn cannot have ended by itself, so it must
    end ``cancelled``: the provable form of a close mid-turn."""
    async with acp_agent.connect(permission="hold") as conn:
        require(conn, "sessionCapabilities.close", "sessionCapabilities.close")
        sid = await open_session(acp_agent, conn)
        rid, start, call = await ask_permission(acp_agent, conn, sid)
        if isinstance(call, Response):
            check_auth(acp_agent, conn, call)
            not_applicable(no_tool_reason(conn.peer.events, sid, start, what=NO_PERMISSION))
        await judge_closed_turn(acp_agent, conn, sid, rid, conn.client.holding(sid), request_held=True)


@pytest.mark.acp_clause("session.close.response", "session.close.unknown")
async def test_close_of_idle_and_unknown_sessions(acp_agent: AgentHarness) -> None:
    async with acp_agent.connect() as conn:
        require(conn, "sessionCapabilities.close", "sessionCapabilities.close")
        sid = await open_session(acp_agent, conn)
        resp = await conn.peer.call("session/close", {"sessionId": sid})
        acp_agent.check(
            "session.close.response",
            not resp.is_error and isinstance(resp.result, dict) and not extra_result_keys(resp.result),
            "result {} (only _meta allowed) for session/close of an idle session",
            describe(resp),
        )
        bogus = f"acp-conformance-unknown-{uuid.uuid4().hex}"
        try:
            unknown: Response | None = await conn.peer.call("session/close", {"sessionId": bogus})
        except PeerTimeout:
            unknown = None
        # A MAY whose only breach is a hang: the note beside jsonrpc.every-request-answered's FAIL.
        acp_agent.check(
            "session.close.unknown",
            unknown is not None,
            f"an answer (result or error) to session/close of the unknown session {bogus!r}",
            f"no answer within {acp_agent.config.timeout:g} s",
        )
