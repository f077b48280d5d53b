"""Conforming agents with unusual timing, for proving that the suite's verdicts do not depend on it.

``python tests/peers/conforming_agents.py NAME [mock_agent options]`` runs one.  Each is the
reference agent with behaviour the spec allows but that makes races likely; the suite must
never FAIL them (``tests/e2e/test_race_soundness.py``).
"""

from __future__ import annotations

import base64
import contextlib
import sys
from collections.abc import Awaitable, Callable
from dataclasses import replace
from pathlib import Path

if __name__ == "__main__":  # run as a file: make the repository root importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from typing import Any

import anyio

from acp_conformance.core.events import Request, Response
from acp_conformance.core.jsonrpc import ErrorCode
from acp_conformance.errors import PeerExited
from acp_conformance.peer import NO_ANSWER, HandlerError, Peer
from acp_conformance.transport.base import Transport
from mock_agent import MockAgent, Turn
from mock_agent.agent import AgentLog, AgentPeer, Session
from mock_agent.cli import run
from tests.peers._quirks import MetaOnSent, SplitSends, StringIds, answer_extensions, with_meta

Json = dict[str, Any]


class FastTurns(MockAgent):
    """Every turn the agent is not blocked on the client for ends at once: the long prompt's
    turn streams one chunk and answers ``end_turn`` straight away (a model that is done).  A
    cancel that reaches a running turn still ends it ``cancelled``; one that reaches a turn
    already answered is ignored, as the spec allows (prompt-turn.mdx § Cancellation)."""

    long_turn_ticks = 1
    long_turn_seconds = 0.0


class TwoToolCalls(MockAgent):
    """Every tool turn first announces and finishes a read-only lookup (its own toolCallId), then
    does the usual write: two tool calls per turn, each updated only after its announcement (the
    TypeScript SDK example does this; the suite once warned tool.update.known-id on the second)."""

    async def turn_tool(self, turn: Turn) -> str:
        lookup = turn.session.next_tool_call_id()
        await self.emit(
            turn,
            {
                "sessionUpdate": "tool_call",
                "toolCallId": lookup,
                "title": "Look around",
                "kind": "read",
                "status": "pending",
            },
        )
        await self.emit(turn, self.tool_update(lookup, "in_progress"))
        await self.emit(turn, self.tool_update(lookup, "completed", [self.text_content("nothing to see")]))
        return await super().turn_tool(turn)


class AnnouncesWhenRunning(MockAgent):
    """Asks permission first and announces the tool call only once it runs, with status
    in_progress (zed codex-acp does this; prompt-turn.mdx § 5 asks for the status, not a frame)."""

    async def emit(self, turn: Turn, update: Json) -> None:
        if update.get("sessionUpdate") == "tool_call":
            self._announce = update  # held back until the permission is granted
            return
        if update.get("sessionUpdate") == "tool_call_update" and update.get("status") == "in_progress":
            announced = getattr(self, "_announce", None)
            if announced is not None and announced.get("toolCallId") == update.get("toolCallId"):
                self._announce = None
                update = {**announced, **{k: v for k, v in update.items() if k != "sessionUpdate"}}
                update["sessionUpdate"] = "tool_call"
        await super().emit(turn, update)

    async def request_permission(self, turn: Turn, tool_call_id: str) -> str:
        decision = await super().request_permission(turn, tool_call_id)
        announced = getattr(self, "_announce", None)
        if decision not in ("allow_once", "allow_always") and announced is not None:
            self._announce = None
            await super().emit(turn, announced)  # a rejected call is still announced, then failed
        return decision


class RetitlesAfterEachTurn(MockAgent):
    """Sends a ``session_info_update`` (a new title) right after every ``session/prompt``
    response, cancelled turns included (claude-agent-acp does this).  Session metadata may be
    pushed at any time (session-list.mdx § Updating Session Metadata); only "content or tool call
    updates" must precede a cancelled turn's response (prompt-turn.mdx § Cancellation)."""

    async def after_prompt_response(self, turn: Turn) -> None:
        title = f"{turn.text.strip()[:40] or 'untitled'} ({'cancelled' if turn.cancelled else 'done'})"
        await self.peer.notify(
            "session/update",
            {"sessionId": turn.session.id, "update": {"sessionUpdate": "session_info_update", "title": title}},
        )


class _StringIdPeer(StringIds, AgentPeer):
    """Names its own requests "agent-req-1", ... instead of numbers."""

    id_prefix = "agent-req-"


class StringRequestIds(MockAgent):
    """Its requests to the client (permission, fs, terminal, elicitation) carry string ids: JSON-RPC
    allows a String or a Number (schema ``RequestId``), and the client's ids live in another space."""

    def make_peer(self, transport: Transport) -> Peer:
        return _StringIdPeer(transport, validator=self.validator, transcript=AgentLog("mock-agent"))


class SplitWrites(MockAgent):
    """Writes every frame in three pieces with pauses between (a Node agent's stream may do so)."""

    def make_peer(self, transport: Transport) -> Peer:
        return super().make_peer(SplitSends(transport))


class _MetaPeer(MetaOnSent, AgentPeer):
    """Puts ``_meta`` on every request and notification it sends, and on every update."""


class MetaEverywhere(MockAgent):
    """Extension data under ``_meta`` on everything it sends: every result, request, notification
    and update (extensibility.mdx: every type may carry it; the receiver must not interpret it)."""

    def make_peer(self, transport: Transport) -> Peer:
        return _MetaPeer(transport, validator=self.validator, transcript=AgentLog("mock-agent"))

    def install_handlers(self, peer: Peer) -> None:
        super().install_handlers(peer)
        for method, handler in list(peer.handlers.items()):
            peer.handlers[method] = with_meta(handler)


class Chatty(MockAgent):
    """Pushes the session's commands and a title right after every ``session/new`` answer (as
    claude-agent-acp and codex-acp do) and opens every turn with a thought and a plan: all allowed
    at any time in a session (prompt-turn.mdx § 3, agent-plan.mdx, slash-commands.mdx,
    session-list.mdx § Updating Session Metadata)."""

    def install_handlers(self, peer: Peer) -> None:
        super().install_handlers(peer)
        new_session = peer.handlers["session/new"]

        async def answer_then_push(req: Request) -> Any:
            result = await new_session(req)
            await peer.respond(req.id, result, method=req.method)
            sid = result.get("sessionId") if isinstance(result, dict) else None
            if isinstance(sid, str):
                commands = [{"name": "review", "description": "Review the changes", "input": None}]
                await self.send_update(
                    sid, {"sessionUpdate": "available_commands_update", "availableCommands": commands}
                )
                await self.send_update(sid, {"sessionUpdate": "session_info_update", "title": "New session"})
            return NO_ANSWER

        peer.handlers["session/new"] = answer_then_push

    async def prompt_turn(self, turn: Turn) -> str:
        await self.emit(turn, self.message_chunk("agent_thought_chunk", "Thinking.", None))
        await self.emit(
            turn,
            self.plan_update([{"content": "Answer the prompt", "priority": "medium", "status": "in_progress"}]),
        )
        return await super().prompt_turn(turn)


class CommandsBeforeTheAnswer(MockAgent):
    """Pushes the new session's commands before its ``session/new`` answer: the session exists once
    the agent made it, and no sentence orders the answer before the session's first update
    (slash-commands.mdx: "After creating a session, the Agent MAY send a list of available
    commands").  A client that cannot place an update for a session it has not been told of yet
    copes (ignores or buffers it); the suite must not flag the agent for it."""

    def install_handlers(self, peer: Peer) -> None:
        super().install_handlers(peer)
        new_session = peer.handlers["session/new"]

        async def push_then_answer(req: Request) -> Any:
            result = await new_session(req)
            sid = result.get("sessionId") if isinstance(result, dict) else None
            if isinstance(sid, str):
                commands = [{"name": "review", "description": "Review the changes", "input": None}]
                await self.send_update(
                    sid, {"sessionUpdate": "available_commands_update", "availableCommands": commands}
                )
            return result

        peer.handlers["session/new"] = push_then_answer


class CascadesCancellation(MockAgent):
    """On ``session/cancel`` withdraws its pending requests to the client at once with
    ``$/cancel_request`` and ends the turn ``cancelled`` without waiting for their answers, as
    cancellation.mdx's cascading example does ("The calling side MAY implement graceful
    cancellation processing by waiting for the response"; it need not).  The client's late
    answers to the withdrawn requests are ignored."""

    cancel_grace = 0.0


class AllowOnlyOptions(MockAgent):
    """Offers only "Allow once" in its permission requests (a user who does not want the tool
    cancels the question instead): tool-calls.mdx lets the agent choose the options, and a client
    can always answer ``cancelled``."""

    def permission_options(self) -> list[Json]:
        return [{"optionId": "go", "name": "Go ahead", "kind": "allow_once"}]


class CatchAllExtensions(MockAgent):
    """Answers every extension request with a result (``null``), whatever its name: a catch-all
    handler, as the Python SDK's examples have.  extensibility.mdx asks for -32601 only from a
    receiver that "doesn't recognize the custom method name"; one that handles every name is not
    shown not to, so neither ext.request.unknown nor jsonrpc.unknown-method is judged on it."""

    def install_handlers(self, peer: Peer) -> None:
        super().install_handlers(peer)

        async def handled(req: Request) -> Any:
            return None

        answer_extensions(peer, handled)


class RefusesEverything(MockAgent):
    """Ends every turn at once with ``refusal`` and says nothing: a conforming, useless agent.  No
    clause may FAIL for what it never does (tool calls, permissions, files, plans)."""

    async def prompt_turn(self, turn: Turn) -> str:
        return "refusal"


class SlowAnswers(MockAgent):
    """Every answer to a request goes out 0.3 s after the agent has it (a model-backed agent is
    slower than that): well within any deadline the suite gives."""

    def install_handlers(self, peer: Peer) -> None:
        super().install_handlers(peer)
        for method, handler in list(peer.handlers.items()):
            peer.handlers[method] = _late(handler)


def _late(handler: Callable[[Request], Awaitable[Any]]) -> Callable[[Request], Awaitable[Any]]:
    async def answer(req: Request) -> Any:
        try:
            return await handler(req)
        finally:
            await anyio.sleep(0.3)

    return answer


class _LateErrorsPeer(AgentPeer):
    """Answers a line it cannot read 0.3 s later than it would (the requests behind it first)."""

    def answer_malformed(self, code: int, message: str) -> None:
        async def late() -> None:
            await anyio.sleep(0.3)
            with contextlib.suppress(PeerExited):
                await self.respond_error(None, code, message)

        self.start_soon(late)


class LateErrorsToMalformedLines(MockAgent):
    """Its error for an unparseable line or an invalid request comes after its answers to the
    requests written behind that line: JSON-RPC lets responses come in any order."""

    def make_peer(self, transport: Transport) -> Peer:
        return _LateErrorsPeer(transport, validator=self.validator, transcript=AgentLog("mock-agent"))


class OddSessionIds(MockAgent):
    """Session ids with a slash, dots, a space and non-ASCII letters: the schema's ``SessionId`` is
    any string, so the client must not read it as a path or a token of its own."""

    def new_session_id(self) -> str:
        return f"../sess/ü {super().new_session_id()} ✓"


class EchoesThePrompt(MockAgent):
    """Streams the prompt back as a ``user_message_chunk`` before answering (the schema allows
    that update at any time in a session; some agents echo the user's message)."""

    async def prompt_turn(self, turn: Turn) -> str:
        await self.emit(turn, self.message_chunk("user_message_chunk", turn.text or "(no text)", None))
        return await super().prompt_turn(turn)


class AuthOptional(MockAgent):
    """Advertises an authentication method but serves everyone without it (authentication.mdx:
    the agent returns AUTH_REQUIRED only when it needs it)."""

    def auth_methods(self) -> list[Json]:
        return [{"id": self.AUTH_METHOD_ID, "name": "Token", "description": "Optional"}]


class AuthOptionalWithLogout(AuthOptional):
    """The same, and it advertises ``logout`` (which ends nothing it needs): after a logout a new
    session needs no authentication, as none ever did (authentication.mdx: "new sessions that
    require authentication will require the user to complete one of the advertised authentication
    flows again").  The suite once warned auth.logout.reauth on it.  Run it with
    ``--acp-auth-method=token`` (without, the logout test is INCONCLUSIVE)."""

    def agent_capabilities(self) -> Json:
        return {**super().agent_capabilities(), "auth": {"logout": {}}}

    def install_handlers(self, peer: Peer) -> None:
        super().install_handlers(peer)
        peer.handlers["logout"] = self._guarded("logout", self.handle_logout)


class NoisyStderr(MockAgent):
    """Logs twenty lines to stderr for every request it serves (stderr is for logs: transports.mdx)."""

    def install_handlers(self, peer: Peer) -> None:
        super().install_handlers(peer)
        for method, handler in list(peer.handlers.items()):
            peer.handlers[method] = _logged(method, handler)


def _logged(method: str, handler: Callable[[Request], Awaitable[Any]]) -> Callable[[Request], Awaitable[Any]]:
    async def answer(req: Request) -> Any:
        for i in range(20):
            print(f"[debug] {method} step {i}: {'x' * 60}", file=sys.stderr)
        return await handler(req)

    return answer


class WindsDownAfterCancel(MockAgent):
    """Once a turn is cancelled, takes half a second to wind down, streaming what it is doing and
    failing its open tool call, then answers ``cancelled`` (prompt-turn.mdx § Cancellation: updates
    after session/cancel are allowed before the response)."""

    steps = 5  # of 0.1 s each

    async def prompt_turn(self, turn: Turn) -> str:
        proposed = await super().prompt_turn(turn)
        if turn.cancelled:
            for n in range(self.steps):
                await anyio.sleep(0.1)
                await self.emit(turn, self.message_chunk("agent_message_chunk", f"stopping ({n})", None))
        return proposed


class WindsDownSlowly(WindsDownAfterCancel):
    """The same, streaming for eight seconds: past a short ``--acp-timeout`` (run it with
    ``--acp-timeout=2``: the suite's observation window and its deadline together stay under
    eight seconds), a turn still at work when the suite's wait ends.  The suite once FAILed
    ``cancelreq.must-answer`` on it (no answer within the deadline, though it kept streaming)."""

    steps = 80


class TinyPages(MockAgent):
    """``session/list`` answers one session per page, with an opaque cursor to the next
    (session-list.mdx § Pagination: the page size is the agent's to choose; a cursor it did not
    hand out is -32602)."""

    async def handle_list_sessions(self, req: Request) -> Any:
        params = self.params_of(req, optional=True)
        cursor = params.get("cursor")
        offset = 0
        if cursor is not None:
            try:
                offset = int(base64.urlsafe_b64decode(str(cursor).encode()).decode().removeprefix("page:"))
            except ValueError:
                raise HandlerError(ErrorCode.INVALID_PARAMS, f"session/list: invalid cursor {cursor!r}") from None
        first = await super().handle_list_sessions(
            replace(req, params={k: v for k, v in params.items() if k != "cursor"})
        )
        sessions = first["sessions"]
        page: Json = {"sessions": sessions[offset : offset + 1]}
        if offset + 1 < len(sessions):
            page["nextCursor"] = base64.urlsafe_b64encode(f"page:{offset + 1}".encode()).decode()
        return page


class RefusesToDeleteOpenSessions(MockAgent):
    """``session/delete`` of a session still open on this connection is an error (close it first):
    session-delete.mdx, "Behavior for deleting an active session is implementation-defined"."""

    async def handle_delete_session(self, req: Request) -> Any:
        session_id = self.params_of(req).get("sessionId")
        if isinstance(session_id, str) and session_id in self.sessions:
            raise HandlerError(ErrorCode.INTERNAL_ERROR, "session/delete: the session is open; close it first")
        return await super().handle_delete_session(req)


class EditsItsDraft(MockAgent):
    """Every tool turn first drafts the file in a tool call of its own (written through the
    client, reported without a diff), then the usual write reports an edit of that draft: its diff
    has the draft as ``oldText`` (the file is no longer new).  The suite once warned
    tool.diff.semantics ("diff of the new file has an oldText") on it."""

    draft = "draft: to be replaced\n"

    async def turn_tool(self, turn: Turn) -> str:
        if self.can_write_files() and not turn.cancelled:
            path = self.probe_path(turn.session)
            drafting = turn.session.next_tool_call_id()
            announce: Json = {"sessionUpdate": "tool_call", "toolCallId": drafting, "title": "Draft the notes"}
            announce |= {"kind": "edit", "status": "in_progress", "rawInput": {"path": path, "content": self.draft}}
            await self.emit(turn, announce)
            params = {"sessionId": turn.session_id, "path": path, "content": self.draft}
            response = await self.client_request(turn, "fs/write_text_file", params)
            failure = self._failure("fs/write_text_file", response, turn)
            status, text = ("failed", failure) if failure is not None else ("completed", "Drafted.")
            await self.emit(turn, self.tool_update(drafting, status, [self.text_content(text or "")]))
        return await super().turn_tool(turn)

    async def emit(self, turn: Turn, update: Json) -> None:
        content = update.get("content")
        if update.get("sessionUpdate") == "tool_call_update" and isinstance(content, list):
            path = self.probe_path(turn.session)
            edited = [
                {**c, "oldText": self.draft} if c.get("type") == "diff" and c.get("path") == path else c
                for c in content
            ]
            update = {**update, "content": edited}
        await super().emit(turn, update)


class ModeDependentModels(MockAgent):
    """Offers the model choice in the "ask" mode only (in "code" mode the agent picks its own):
    session-config-options.mdx, the complete state "allows Agents to reflect dependent changes".
    The suite once FAILed config.set.response-complete on its answer to a change of mode."""

    def config_options(self, session: Session) -> list[Json]:
        options = super().config_options(session)
        return options if session.mode_id == "ask" else [o for o in options if o["id"] != "model"]


class AsksThroughATool(MockAgent):
    """Asks its form question inside a tool call (as agents that model questions as a tool do)
    and keeps the client's answer, as it came, in the tool call's ``rawOutput``; an action it does
    not know is no choice (the schema: "preserve the raw payload when storing, replaying,
    proxying, or forwarding"; "MUST NOT treat it as a known elicitation action").  The suite once
    FAILed elicit.response.unknown-action on the marker in that raw output."""

    async def client_request(self, turn: Turn | None, method: str, params: Json, **kw: Any) -> Response | None:
        if method != "elicitation/create" or turn is None:
            return await super().client_request(turn, method, params, **kw)
        asking = turn.session.next_tool_call_id()
        announce: Json = {"sessionUpdate": "tool_call", "toolCallId": asking, "title": "Ask the user"}
        announce |= {"kind": "other", "status": "in_progress", "rawInput": {"message": params.get("message")}}
        await self.emit(turn, announce)
        response = await super().client_request(turn, method, params, **kw)
        raw = response.result if response is not None and not response.is_error else None
        await self.emit(turn, self.tool_update(asking, "completed", rawOutput={"answer": raw}))
        return response


class _UnusualPeer(_StringIdPeer, _MetaPeer):
    """String request ids and ``_meta`` on everything."""


class AllUnusual(
    Chatty,
    CommandsBeforeTheAnswer,
    CascadesCancellation,
    MetaEverywhere,
    OddSessionIds,
    EchoesThePrompt,
    NoisyStderr,
    TinyPages,
    RefusesToDeleteOpenSessions,
    EditsItsDraft,
    AsksThroughATool,
):
    """Every quirk above that the spec allows, at once: string request ids, frames written in
    pieces, ``_meta`` everywhere, a new session's commands before its answer, metadata and a thought
    and a plan around every turn, session ids that look like paths, the prompt echoed back, stderr
    full of logs, one session per list page, no deleting a session still open, a draft before every
    write, questions asked in a tool call, a cancelled turn's requests withdrawn at once."""

    def make_peer(self, transport: Transport) -> Peer:
        return _UnusualPeer(SplitSends(transport), validator=self.validator, transcript=AgentLog("mock-agent"))


AGENTS: dict[str, type[MockAgent]] = {
    "fast-turns": FastTurns,
    "two-tool-calls": TwoToolCalls,
    "announces-when-running": AnnouncesWhenRunning,
    "retitles-after-each-turn": RetitlesAfterEachTurn,
    "string-request-ids": StringRequestIds,
    "split-writes": SplitWrites,
    "meta-everywhere": MetaEverywhere,
    "chatty": Chatty,
    "catch-all-extensions": CatchAllExtensions,
    "allow-only-options": AllowOnlyOptions,
    "cascades-cancellation": CascadesCancellation,
    "commands-before-the-answer": CommandsBeforeTheAnswer,
    "refuses-everything": RefusesEverything,
    "slow-answers": SlowAnswers,
    "late-errors-to-malformed-lines": LateErrorsToMalformedLines,
    "all-unusual": AllUnusual,
    "asks-through-a-tool": AsksThroughATool,
    "mode-dependent-models": ModeDependentModels,
    "winds-down-slowly": WindsDownSlowly,
    "edits-its-draft": EditsItsDraft,
    "odd-session-ids": OddSessionIds,
    "echoes-the-prompt": EchoesThePrompt,
    "auth-optional": AuthOptional,
    "auth-optional-with-logout": AuthOptionalWithLogout,
    "noisy-stderr": NoisyStderr,
    "winds-down-after-cancel": WindsDownAfterCancel,
    "tiny-pages": TinyPages,
    "refuses-to-delete-open-sessions": RefusesToDeleteOpenSessions,
}


if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] not in AGENTS:
        print(f"usage: {sys.argv[0]} NAME [mock_agent options]; NAME one of: {', '.join(AGENTS)}", file=sys.stderr)
        sys.exit(2)
    run(sys.argv[2:], agent_cls=AGENTS[sys.argv[1]])
