"""Broken agents: each one is the reference agent with exactly one clause broken.

``python tests/peers/broken_agents.py NAME [mock_agent options]`` runs one.
``BREAKAGES`` says, for each, which clause it breaks, the status the suite
must give that clause, and any *collateral* clauses that the same defect
necessarily breaks too (with the reason).  ``tests/e2e/test_broken_agents.py``
runs the whole agent suite against each and asserts that the FAIL and WARN
set is exactly ``{breaks} | also`` - so a check that cannot fail, or that
fires on the wrong clause, is caught.

Breakages live in this file and in ``broken_agents_*.py`` beside it (one
module per area); this file merges them.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from typing import Any

if __name__ == "__main__":  # run as a file: make the repository root importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from acp_conformance.core import jsonrpc
from acp_conformance.core.events import Event, Notification, Request, Response
from acp_conformance.peer import NO_ANSWER, HandlerError, Peer, RequestHandler
from acp_conformance.transport.base import Transport
from mock_agent import MockAgent, Session, Turn
from mock_agent.cli import run
from tests.peers._breakage import Breakage, Filtered, Json
from tests.peers._quirks import answer_extensions

_Filtered = Filtered


# ------------------------------------------------------------------ transport
class Banner(MockAgent):
    async def on_start(self) -> None:
        await self.peer.send_raw(b"Starting my-agent v1.2.3 ...\n")


class BadUtf8(_Filtered):
    def mangle(self, msg: dict[str, Any]) -> Any:
        if msg.get("method") == "session/update":
            # One extra notification whose bytes are not UTF-8, after a good one.
            return jsonrpc.dumps(msg) + b"\n" + b'{"jsonrpc":"2.0","method":"_log","params":{"t":"\xff\xfe"}}\n'
        return msg


class Batch(_Filtered):
    def mangle(self, msg: dict[str, Any]) -> Any:
        if msg.get("method") == "session/update":
            return jsonrpc.dumps([msg]) + b"\n"
        return msg


class PartialLineAtExit(MockAgent):
    async def on_eof(self) -> None:
        await super().on_eof()
        await self.peer.send_raw(b'{"jsonrpc":"2.0","method":"_bye","params":{}}')


class NeverExits(MockAgent):
    async def on_eof(self) -> None:
        import anyio

        await anyio.sleep_forever()  # ignores stdin EOF; the harness must kill it


# -------------------------------------------------------------------- jsonrpc
class WrongJsonrpcVersion(_Filtered):
    def mangle(self, msg: dict[str, Any]) -> Any:
        if msg.get("method") == "session/update":
            msg["jsonrpc"] = "1.0"
        return msg


class StringifiedIds(_Filtered):
    def mangle(self, msg: dict[str, Any]) -> Any:
        if "method" not in msg and isinstance(msg.get("id"), int):
            msg["id"] = str(msg["id"])
        return msg


class NumericIdsForStrings(_Filtered):
    def mangle(self, msg: dict[str, Any]) -> Any:
        if "method" not in msg and isinstance(msg.get("id"), str):
            msg["id"] = 424242
        return msg


class MisaddressesCancelledTurns(_Filtered):
    """Answers a cancelled turn (stopReason cancelled) under an id of its own making, and every
    other request correctly: each such answer is a response matching no request of ours (the echo
    clause's breach), and the cancelled turn is then without an answer under its id, which proves
    nothing about the cancel clauses (``Peer.why_unproven``: perhaps that was its answer)."""

    def mangle(self, msg: dict[str, Any]) -> Any:
        result = msg.get("result")
        if "method" not in msg and isinstance(result, dict) and result.get("stopReason") == "cancelled":
            msg["id"] = f"cancelled-{msg.get('id')}"
        return msg


def _refuse_before_every_handler(peer: Peer, refuse: Any) -> None:
    """Call ``refuse(req)`` (it raises the refusal, or returns) before every handler of ``peer``,
    and before the -32601 of a method it does not implement: a breakage about the request's id,
    whatever the method."""

    async def unknown(req: Request) -> Any:
        raise HandlerError(-32601, f"method not found: {req.method}")

    def guarded(handler: Any) -> Any:
        async def refusing(req: Request) -> Any:
            refuse(req)
            return await handler(req)

        return refusing

    for method, handler in list(peer.handlers.items()):
        peer.handlers[method] = guarded(handler)
    peer.default_handler = guarded(peer.default_handler or unknown)


class HangsOnRequestsTheSchemaRejects(MockAgent):
    """Never answers a request whose params the schema rejects (it answers every valid one, however
    wrong its content).  No conforming client sends one: a robustness WARN, not jsonrpc.every-
    request-answered, which the suite's deliberately broken requests must not be charged with."""

    def install_handlers(self, peer: Peer) -> None:
        super().install_handlers(peer)
        validator = peer.validator
        assert validator is not None, "this agent needs the schema"

        def guarded(handler: Any) -> Any:
            async def hanging(req: Request) -> Any:
                spec = validator.spec(req.method)
                params = req.params if req.has_params else {}
                if spec is not None and spec.request is not None and validator.validate(spec.request, params):
                    return NO_ANSWER
                return await handler(req)

            return hanging

        for method, handler in list(peer.handlers.items()):
            peer.handlers[method] = guarded(handler)


class RefusesStringIds(MockAgent):
    """Takes only integer request ids: a string id gets -32600, under that id (it read it),
    whatever the method (those it does not implement too)."""

    def install_handlers(self, peer: Peer) -> None:
        super().install_handlers(peer)
        _refuse_before_every_handler(peer, self._integer_ids_only)

    @staticmethod
    def _integer_ids_only(req: Request) -> None:
        if isinstance(req.id, str):
            raise HandlerError(-32600, "request ids must be integers")


class RefusesNegativeIds(_Filtered):
    """Reads request ids as unsigned integers, as zed's codex-acp 0.x does: a request under a
    negative id is not handled at all, and answered with an error without any id (-32700, the line
    in ``data``) as a line it cannot parse.  Strings and positive integers are served."""

    def install_handlers(self, peer: Peer) -> None:
        super().install_handlers(peer)
        _refuse_before_every_handler(peer, self._unsigned_ids_only)

    @staticmethod
    def _unsigned_ids_only(req: Request) -> None:
        if isinstance(req.id, int) and req.id < 0:
            raise HandlerError(-32700, "Parse error", {"line": jsonrpc.dumps(req.message).decode()})

    def mangle(self, msg: dict[str, Any]) -> Any:
        rid = msg.get("id")
        error = msg.get("error")
        if isinstance(rid, int) and rid < 0 and isinstance(error, dict) and error.get("code") == -32700:
            return {k: v for k, v in msg.items() if k != "id"}
        return msg


class DuplicateResponse(_Filtered):
    def mangle(self, msg: dict[str, Any]) -> Any:
        if "method" not in msg and isinstance(msg.get("result"), dict) and "sessionId" in msg["result"]:
            return jsonrpc.dumps(msg) + b"\n" + jsonrpc.dumps(msg) + b"\n"
        return msg


class InternalErrorForUnknownMethods(MockAgent):
    def install_handlers(self, peer: Peer) -> None:
        super().install_handlers(peer)

        async def anything(req: Request) -> Any:
            # Whatever the name (an extension's or one reserved for the protocol): not implemented,
            # said with the wrong code.
            raise HandlerError(-32603, f"cannot handle {req.method}")

        peer.default_handler = anything


class WrongCodeForUnknownExtensions(MockAgent):
    """Says it does not handle an extension request with -32603 (internal error) instead of -32601;
    other unknown methods get -32601."""

    def install_handlers(self, peer: Peer) -> None:
        super().install_handlers(peer)

        async def wrong_code(req: Request) -> Any:
            raise HandlerError(-32603, f"no extension {req.method} here")

        answer_extensions(peer, wrong_code)


class BadErrorObject(_Filtered):
    def mangle(self, msg: dict[str, Any]) -> Any:
        err = msg.get("error")
        if isinstance(err, dict) and err.get("message", "").startswith("method not found: _"):
            msg["error"] = {"code": -32601, "message": 42}
        return msg


class StringErrorCode(_Filtered):
    """The right code, as a string: ``"-32601"`` (the schema's ErrorCode is an integer)."""

    def mangle(self, msg: dict[str, Any]) -> Any:
        err = msg.get("error")
        if isinstance(err, dict) and err.get("message", "").startswith("method not found: _"):
            err["code"] = str(err["code"])
        return msg


class ResultAndError(_Filtered):
    def mangle(self, msg: dict[str, Any]) -> Any:
        err = msg.get("error")
        if isinstance(err, dict) and err.get("message", "").startswith("method not found: _"):
            msg["result"] = None
        return msg


class AnswersSessionCancel(MockAgent):
    def on_cancel(self, params: Json) -> None:
        super().on_cancel(params)
        self.peer.start_soon(self.peer.send_raw, b'{"jsonrpc":"2.0","id":null,"result":{}}\n')


class AnswersNotificationsWithoutId(MockAgent):
    """zed codex-acp 0.16.0 answers notifications (``$/cancel_request``, unknown ones) with an
    error that has no id; this one does so for every notification but ``session/cancel`` (whose
    answer is ``answers-session-cancel``'s clause), after handling it."""

    def _on_notification(self, note: Notification) -> None:
        super()._on_notification(note)
        if note.method == "session/cancel":
            return
        frame = b'{"jsonrpc":"2.0","error":{"code":-32601,"message":"Method not found","data":"%s"}}\n'
        self.peer.start_soon(self.peer.send_raw, frame % note.method.encode())


async def _no_answer(req: Request) -> Any:
    return NO_ANSWER


class IgnoresExtensionRequests(MockAgent):
    def install_handlers(self, peer: Peer) -> None:
        super().install_handlers(peer)
        answer_extensions(peer, _no_answer)


class WedgedByDuplicateAnswer(MockAgent):
    """Once the client answers one of its requests a second time, it answers nothing more: the
    turn it was running never ends and every later request goes unanswered (a client's mistake
    the agent must shrug off, scenario permission-duplicate-answer)."""

    def make_peer(self, transport: Transport) -> Peer:
        peer = super().make_peer(transport)
        self.wedged = False

        def watch(events: list[Event]) -> list[Event]:
            if any(isinstance(e, Response) and e.duplicate for e in events):
                self.wedged = True
            return events

        peer.inbound_filter = watch
        return peer

    def install_handlers(self, peer: Peer) -> None:
        super().install_handlers(peer)

        def unless_wedged(handler: RequestHandler) -> RequestHandler:
            async def wrapped(req: Request) -> Any:
                if self.wedged:
                    return NO_ANSWER
                result = await handler(req)
                return NO_ANSWER if self.wedged else result

            return wrapped

        for method, handler in list(peer.handlers.items()):
            peer.handlers[method] = unless_wedged(handler)


class AbandonsATurnForAnother(_Filtered):
    """With a turn running in one session, a prompt for another session makes it abandon the first:
    nothing more is written for that turn (no update, no request, never its answer).  Once it has
    answered a request that came after the abandoned prompt, the next message about the abandoned
    session (its ``session/cancel``, the answer to its permission request) makes it exit.

    Only the stateful machine runs turns in two sessions at once; it must judge the abandoned turn
    ``jsonrpc.every-request-answered`` on the read proof (the answer to that later request shows the
    prompt had been read before the agent closed its output), not leave it unproven."""

    def make_peer(self, transport: Transport) -> Peer:
        peer = super().make_peer(transport)
        #: sid -> id key of its abandoned prompt; the inbound index of the earliest abandoned prompt.
        self.abandoned: dict[str, tuple[str, Any]] = {}
        self.since: int | None = None
        self.prompt_index: dict[tuple[str, Any], int] = {}
        self.later: set[tuple[str, Any]] = set()  # requests read after an abandoned prompt
        self.answered_later = False
        self.permission_of: dict[tuple[str, Any], str] = {}  # our permission request id -> its session

        def watch(events: list[Event]) -> list[Event]:
            for e in events:
                if isinstance(e, Request):
                    if self.since is not None and e.index > self.since:
                        self.later.add(jsonrpc.id_key(e.id))
                    continue
                about = None
                if isinstance(e, Notification) and e.method == "session/cancel" and isinstance(e.params, dict):
                    about = e.params.get("sessionId")
                elif isinstance(e, Response):
                    about = self.permission_of.get(jsonrpc.id_key(e.id))
                if about in self.abandoned and self.answered_later:
                    import os

                    os._exit(4)
            return events

        peer.inbound_filter = watch
        return peer

    async def handle_prompt(self, req: Request) -> Any:
        key = jsonrpc.id_key(req.id)
        self.prompt_index[key] = req.index
        sid = req.params.get("sessionId") if isinstance(req.params, dict) else None
        for other in list(self._turns_by_request.values()):
            if other.session.id != sid and other.session.id not in self.abandoned:
                other_key = jsonrpc.id_key(other.request_id)
                self.abandoned[other.session.id] = other_key
                index = self.prompt_index.get(other_key, req.index)
                self.since = index if self.since is None else min(self.since, index)
        return await super().handle_prompt(req)

    def mangle(self, msg: dict[str, Any]) -> Any:
        params = msg.get("params")
        if "method" in msg:
            sid = params.get("sessionId") if isinstance(params, dict) else None
            if msg["method"] == "session/request_permission" and "id" in msg and isinstance(sid, str):
                self.permission_of[jsonrpc.id_key(msg["id"])] = sid
            return None if sid in self.abandoned else msg
        key = jsonrpc.id_key(msg.get("id"))
        if key in self.abandoned.values():
            return None
        if key in self.later:
            self.answered_later = True
        return msg


class QuitsOnAGrantedPermission(_Filtered):
    """Once it has answered a request read after a turn's prompt, the client's choice of an option
    for that turn's permission request makes it exit: the turn neither ends nor asks anything more.
    A permission answered ``cancelled`` (the client cancelling the turn) is honoured as usual.

    A test that answers the permission after such a request meets the exit and must judge the turn
    ``jsonrpc.every-request-answered`` on the read proof: the ``jsonrpc.bidirectional`` test does, and
    so does the stateful machine in ``_advance`` (tests/e2e/test_stateful_branches.py)."""

    def make_peer(self, transport: Transport) -> Peer:
        peer = super().make_peer(transport)
        self.read_at: dict[tuple[str, Any], int] = {}  # our inbound requests' positions
        self.answered_up_to = -1  # the latest position of a request we have answered

        def watch(events: list[Event]) -> list[Event]:
            for e in events:
                if isinstance(e, Request):
                    self.read_at[jsonrpc.id_key(e.id)] = e.index
            return events

        peer.inbound_filter = watch
        return peer

    def mangle(self, msg: dict[str, Any]) -> Any:
        if "method" not in msg:
            index = self.read_at.get(jsonrpc.id_key(msg.get("id")), -1)
            self.answered_up_to = max(self.answered_up_to, index)
        return msg

    async def request_permission(self, turn: Turn, tool_call_id: str) -> str:
        decision = await super().request_permission(turn, tool_call_id)
        prompt_at = self.read_at.get(jsonrpc.id_key(turn.request_id), -1)
        if decision not in ("cancelled", "none") and self.answered_up_to > prompt_at >= 0:
            import os

            os._exit(5)
        return decision


class ExitsOnUnknownNotification(MockAgent):
    def on_other_notification(self, note: Notification) -> None:
        if note.method.startswith("_"):
            import os

            os._exit(3)


# ----------------------------------------------------------------- initialize
class EchoesVersion(MockAgent):
    def negotiate_version(self, requested: Any) -> int:
        return requested if isinstance(requested, int) else 1


class EchoesVersionZero(MockAgent):
    def negotiate_version(self, requested: Any) -> int:
        return 0 if requested == 0 else 1


class ErrorOnUnsupportedVersion(MockAgent):
    async def handle_initialize(self, req: Request) -> Any:
        if isinstance(req.params, dict) and req.params.get("protocolVersion") == 999:
            raise HandlerError(-32602, "unsupported protocol version 999")
        return await super().handle_initialize(req)


class AnswersVersion2(MockAgent):
    def negotiate_version(self, requested: Any) -> int:
        return 2


class NoProtocolVersion(MockAgent):
    validate_outbound = False

    def initialize_result(self, params: Json) -> Json:
        result = super().initialize_result(params)
        del result["protocolVersion"]
        return result


class StringProtocolVersion(MockAgent):
    """Chooses version 1, as the string ``"1"`` (ProtocolVersion is a JSON integer)."""

    validate_outbound = False

    def negotiate_version(self, requested: Any) -> Any:
        return "1"


class CapabilitiesNotObject(MockAgent):
    validate_outbound = False

    def initialize_result(self, params: Json) -> Json:
        return {**super().initialize_result(params), "agentCapabilities": ["loadSession"]}


class NonBooleanCapability(MockAgent):
    validate_outbound = False

    def agent_capabilities(self) -> Json:
        caps = super().agent_capabilities()
        caps["promptCapabilities"] = {**caps["promptCapabilities"], "image": "yes"}
        return caps


class SessionCapabilityNotObject(MockAgent):
    validate_outbound = False

    def agent_capabilities(self) -> Json:
        caps = super().agent_capabilities()
        caps["sessionCapabilities"] = {**caps["sessionCapabilities"], "list": True}
        return caps


class AuthMethodWithoutName(MockAgent):
    validate_outbound = False

    def auth_methods(self) -> list[Json]:
        return [{"id": "login"}]


class BrokenBySecondInitialize(MockAgent):
    """Answers a second initialize, then refuses everything that follows."""

    async def handle_initialize(self, req: Request) -> Any:
        if self.initialized:
            self.wedged = True
        return await super().handle_initialize(req)

    async def handle_new_session(self, req: Request) -> Any:
        if getattr(self, "wedged", False):
            raise HandlerError(-32603, "internal error: connection state reset")
        return await super().handle_new_session(req)


class NoAgentInfo(MockAgent):
    def initialize_result(self, params: Json) -> Json:
        result = super().initialize_result(params)
        del result["agentInfo"]
        return result


class AgentInfoWithoutVersion(MockAgent):
    """Announces itself with a name only (``Implementation`` requires ``version`` too)."""

    validate_outbound = False

    def agent_info(self) -> Json:
        return {"name": "half-announced"}


# ------------------------------------------------------------ session, prompt
class ConstantSessionId(MockAgent):
    def new_session_id(self) -> str:
        return "the-only-session"

    def create_session(self, cwd: str, mcp_servers: list[Any], params: Json) -> Session:
        existing = self.sessions.get("the-only-session")
        if existing is not None:
            return existing
        return super().create_session(cwd, mcp_servers, params)


class InconsistentModes(MockAgent):
    def modes_state(self, session: Session) -> Json:
        return {**super().modes_state(session), "currentModeId": "turbo"}


class InvalidSessionNewResult(MockAgent):
    validate_outbound = False

    def new_session_result(self, session: Session) -> Json:
        return {**super().new_session_result(session), "configOptions": "fast"}


class InvalidStopReason(MockAgent):
    validate_outbound = False

    def prompt_result(self, turn: Turn, stop_reason: str) -> Json:
        return {"stopReason": "done"}


class NoStopReason(MockAgent):
    validate_outbound = False

    def prompt_result(self, turn: Turn, stop_reason: str) -> Json:
        return {}


class ErrorsOnTextPrompts(MockAgent):
    async def handle_prompt(self, req: Request) -> Any:
        raise HandlerError(-32603, "this agent cannot handle text")


class PromptMethodNotFound(MockAgent):
    async def handle_prompt(self, req: Request) -> Any:
        raise HandlerError(-32601, "method not found: session/prompt")


class UpdatesForAnotherSession(MockAgent):
    async def send_update(self, session_id: str, update: Json) -> None:
        await super().send_update(session_id + "-other", update)


class OutputAfterResponse(MockAgent):
    async def after_prompt_response(self, turn: Turn) -> None:
        await self.send_update(turn.session_id, self.message_chunk("agent_message_chunk", "one more thing", None))


class BadChunkContent(MockAgent):
    validate_outbound = False

    def message_chunk(self, kind: str, text: str, message_id: str | None) -> Json:
        update = super().message_chunk(kind, text, message_id)
        update["content"] = {"type": "txt", "text": text}
        return update


class UnknownUpdateKind(MockAgent):
    validate_outbound = False

    async def send_update(self, session_id: str, update: Json) -> None:
        if update.get("sessionUpdate") == "plan":
            update = {**update, "sessionUpdate": "strategy"}
        await super().send_update(session_id, update)


BREAKAGES: dict[str, Breakage[MockAgent]] = {
    "banner": Breakage(Banner, "transport.stdio.stdout-clean"),
    "bad-utf8": Breakage(BadUtf8, "transport.utf8"),
    # Its updates come in batch lines: the batch is flagged once, and its members are judged as the
    # updates they are (the replay and the tool calls are there), so no other clause moves.
    "batch": Breakage(Batch, "transport.stdio.one-message-per-line"),
    "partial-line-at-exit": Breakage(PartialLineAtExit, "transport.stdio.newline-delimited"),
    "never-exits": Breakage(NeverExits, "transport.stdio.exit-on-stdin-close", status="INFO"),
    "jsonrpc-1.0": Breakage(WrongJsonrpcVersion, "jsonrpc.version-field"),
    # "0" for our 0: flagged once on the echo clause and paired, so no request is left unanswered.
    "stringified-ids": Breakage(
        StringifiedIds,
        "jsonrpc.response-id-echo",
        also=frozenset({"jsonrpc.survives-invalid-input"}),
        why_also="the fuzzer's request with an id beyond 64 bits (which the spec forbids us to send) is "
        "answered under the id as a string, too: a robustness finding",
    ),
    # A number for each string id: that response matches no request of ours, flagged on the echo
    # clause; the string-id request it leaves without an answer under its own id is not also
    # charged as unanswered (it may be that one's answer: ``Peer.strays_since``), and whether it
    # took the string id is then left open (jsonrpc.id-types INCONCLUSIVE).
    "numeric-ids-for-strings": Breakage(
        NumericIdsForStrings,
        "jsonrpc.response-id-echo",
        also=frozenset({"jsonrpc.survives-invalid-input"}),
        why_also="the fuzzer's invalid requests under a string id (input the spec forbids us to send) are "
        "answered under a number too: a robustness finding",
    ),
    # A cancelled turn's answer under an id we never sent: the echo clause, once; the cancel clauses
    # that wait for that answer (cancel.*, cancelreq.must-answer) are INCONCLUSIVE, not FAILed or
    # WARNed for a silence the stray may have been the answer to (Peer.why_unproven).
    "misaddresses-cancelled-turns": Breakage(
        MisaddressesCancelledTurns,
        "jsonrpc.response-id-echo",
        quiet=frozenset(
            {
                "cancel.stop-asap",
                "cancel.stop-reason",
                "cancel.no-error",
                "cancel.updates-before-response",
                "cancelreq.must-answer",
                "perm.agent-cancel-race",
                "session.close.cancels-work",
            }
        ),
    ),
    # session/new under a string id refused where the same request under an integer id succeeds.
    "refuses-string-ids": Breakage(RefusesStringIds, "jsonrpc.id-types"),
    # Only the stateful machine runs two sessions' turns at once: its abandoned turn, then the exit.
    "abandons-a-turn-for-another": Breakage(
        AbandonsATurnForAnother,
        "jsonrpc.every-request-answered",
        fuzz="test_stateful_session_lifecycle",
        says="session/prompt was not answered (the peer closed its output",
    ),
    # The jsonrpc.bidirectional test answers the held permission after the agent has answered our
    # later session/new: the wait for the turn's answer meets the exit, on the read proof. The
    # stateful machine's own branch for it (``_advance``) is driven step by step in
    # tests/e2e/test_stateful_branches.py: its search reaches it only in some examples, and
    # which ones depends on timing (a CI run once missed it).
    "quits-on-a-granted-permission": Breakage(
        QuitsOnAGrantedPermission,
        "jsonrpc.every-request-answered",
        fuzz="test_requests_served_while_the_agent_waits_on_us",
        says="though it answered our request id",
        # That test's own clause: the agent serves our requests while it waits on us (run, not flagged).
        quiet=frozenset({"jsonrpc.bidirectional"}),
    ),
    # The suite's deliberately broken requests (missing required params) left unanswered: robustness only,
    # once: jsonrpc.invalid-params judges the code of an answer, and has none (INCONCLUSIVE).
    "hangs-on-requests-the-schema-rejects": Breakage(
        HangsOnRequestsTheSchemaRejects,
        "jsonrpc.survives-invalid-input",
        status="WARN",
        quiet=frozenset({"jsonrpc.every-request-answered", "jsonrpc.invalid-params"}),
    ),
    # A negative integer id answered with an error without any id, whatever the request (zed's
    # codex-acp): one defect, jsonrpc.id-types, judged by its scripted test; not also the echo
    # clause for the answer's missing id, nor jsonrpc.every-request-answered in the fuzz campaigns.
    "refuses-negative-ids": Breakage(
        RefusesNegativeIds,
        "jsonrpc.id-types",
        quiet=frozenset({"jsonrpc.response-id-echo", "jsonrpc.every-request-answered"}),
    ),
    "duplicate-response": Breakage(
        DuplicateResponse,
        "jsonrpc.no-duplicate-response",
        also=frozenset({"jsonrpc.survives-invalid-input"}),
        why_also="it answers the fuzz campaigns' malformed requests twice too (a robustness WARN: input the spec "
        "forbids us to send)",
    ),
    "internal-error-for-unknown-methods": Breakage(
        InternalErrorForUnknownMethods,
        "jsonrpc.unknown-method",
        status="WARN",
        also=frozenset({"ext.request.unknown"}),
        why_also="an unknown extension request is an unknown method: -32601 is both clauses' SHOULD (the "
        "fuzzer's made-up names without the leading underscore, reserved for the protocol, get the same wrong "
        "code: a SHOULD's finding stays on its clause, only a MUST's moves to jsonrpc.survives-invalid-input)",
    ),
    # (A result is a catch-all handler, which handles every name: tests/peers/conforming_agents.py
    # catch-all-extensions, neither clause judged.)
    "wrong-code-for-unknown-extensions": Breakage(
        WrongCodeForUnknownExtensions,
        "ext.request.unknown",
        status="WARN",
        also=frozenset({"jsonrpc.unknown-method"}),
        why_also="the suite's probe of an unknown method is an extension name (the only made-up name it may "
        "send), which gets the same wrong code",
    ),
    "bad-error-object": Breakage(BadErrorObject, "jsonrpc.error-object"),
    "string-error-code": Breakage(
        StringErrorCode,
        "error.codes",
        also=frozenset({"ext.request.unknown", "jsonrpc.unknown-method"}),
        why_also="the string '-32601' is not the integer -32601 an unknown _-request must get",
    ),
    "result-and-error": Breakage(ResultAndError, "jsonrpc.result-xor-error"),
    "answers-session-cancel": Breakage(
        AnswersSessionCancel,
        "cancel.is-notification",
        also=frozenset({"jsonrpc.response-id-echo", "jsonrpc.survives-invalid-input"}),
        why_also="the stray answer carries an id that matches no request we sent; it answers the fuzz campaigns' "
        "malformed session/cancel notifications too (a robustness WARN: input the spec forbids us to send)",
    ),
    "answers-notifications-without-id": Breakage(
        AnswersNotificationsWithoutId,
        "jsonrpc.notification-no-response",
        also=frozenset({"jsonrpc.survives-invalid-input"}),
        why_also="it answers the fuzz campaigns' malformed notifications too (a robustness WARN: input the spec "
        "forbids us to send)",
    ),
    "ignores-extension-requests": Breakage(
        IgnoresExtensionRequests,
        "ext.request.respond",
        # Its silence is charged once, to the narrower clause (Peer._unanswered).
        quiet=frozenset({"jsonrpc.every-request-answered"}),
    ),
    # The permission-duplicate-answer scenario's proof: what it does after our duplicate answer (a
    # frame no conforming client sends) is robustness, which its steps judge.
    "wedged-by-duplicate-answer": Breakage(WedgedByDuplicateAnswer, "jsonrpc.survives-invalid-input", status="WARN"),
    # Once it has exited, the requests that follow go unanswered, but nothing shows it had read them:
    # no jsonrpc.every-request-answered FAIL (Peer.wait_response).
    "exits-on-unknown-notification": Breakage(ExitsOnUnknownNotification, "ext.notification.ignore", status="WARN"),
    "echoes-version": Breakage(
        EchoesVersion,
        "init.version.latest-otherwise",
        also=frozenset({"init.version.v0"}),
        why_also="echoing every version also echoes the pre-release 0 (noted INFO on the informative clause); "
        "the FAIL is for echoing 999",
    ),
    # Answering 0 to 0 claims support of 0, which nothing shows false: noted, not a breach (it
    # FAILed latest-otherwise, which a min(requested, own) negotiation conforms to).
    "echoes-version-zero": Breakage(
        EchoesVersionZero, "init.version.v0", status="INFO", quiet=frozenset({"init.version.latest-otherwise"})
    ),
    "error-on-unsupported-version": Breakage(ErrorOnUnsupportedVersion, "init.version.latest-otherwise"),
    "answers-version-2": Breakage(AnswersVersion2, "init.version.same-if-supported"),
    "no-protocol-version": Breakage(NoProtocolVersion, "init.response.protocol-version"),
    "string-protocol-version": Breakage(StringProtocolVersion, "init.request.protocol-version-type"),
    "capabilities-not-object": Breakage(
        CapabilitiesNotObject,
        "init.response.capabilities",
        also=frozenset({"content.gated.agent-undeclared", "session.load.unsupported"}),
        why_also="with no capability object it advertises nothing, yet it takes the image prompt and the "
        "session/load it still implements",
    ),
    "non-boolean-capability": Breakage(NonBooleanCapability, "cap.agent.defaults"),
    "session-capability-not-object": Breakage(SessionCapabilityNotObject, "cap.object-presence"),
    "auth-method-without-name": Breakage(AuthMethodWithoutName, "auth.methods.advertised"),
    "no-agent-info": Breakage(NoAgentInfo, "init.response.agent-info", status="WARN"),
    "agent-info-without-version": Breakage(AgentInfoWithoutVersion, "init.implementation.shape"),
    "broken-by-second-initialize": Breakage(BrokenBySecondInitialize, "init.once", status="INFO"),
    "constant-session-id": Breakage(ConstantSessionId, "session.new.unique-id"),
    "inconsistent-modes": Breakage(
        InconsistentModes,
        "mode.state.shape",
        status="WARN",
        also=frozenset({"mode.dual-advertise"}),
        why_also="its currentModeId, listed nowhere, disagrees with the current value of its mode config option",
    ),
    "invalid-session-new-result": Breakage(
        InvalidSessionNewResult,
        "schema.valid",
        also=frozenset({"config.shape", "mode.dual-advertise"}),
        why_also="the invalid field is configOptions, whose shape config.shape names; with it no config option "
        "of category mode accompanies the modes (mode.dual-advertise, a WARN)",
    ),
    "invalid-stop-reason": Breakage(InvalidStopReason, "prompt.stop-reason.enum"),
    "no-stop-reason": Breakage(NoStopReason, "prompt.response.stop-reason"),
    "errors-on-text-prompts": Breakage(
        ErrorsOnTextPrompts,
        "content.text.baseline",
        also=frozenset({"prompt.response.stop-reason", "error.resource-not-found", "jsonrpc.invalid-params"}),
        why_also="an error instead of a result is also a turn that never ends with a stopReason; a prompt to an "
        "unknown session, or with a string prompt, gets the same -32603 where -32002 / -32602 are asked (WARNs); "
        "the _meta and idle-cancel checks see the same failure without _meta or cancel and leave it INCONCLUSIVE",
    ),
    "prompt-method-not-found": Breakage(
        PromptMethodNotFound,
        "cap.session-baseline",
        also=frozenset(
            {
                "prompt.response.stop-reason",
                "error.resource-not-found",
                "jsonrpc.invalid-params",
            }
        ),
        why_also="every prompt is refused: no turn ends with a stopReason, and prompts for an unknown session or "
        "with bad params get -32601 instead of -32002 / -32602 (the _meta and idle-cancel checks see the same "
        "refusal without _meta or cancel and leave it INCONCLUSIVE)",
    ),
    "updates-for-another-session": Breakage(
        UpdatesForAnotherSession,
        "prompt.updates.session-id",
        also=frozenset({"session.load.replay-session-id"}),
        why_also="every update names another session, the history replayed by session/load too (that clause "
        "is the replay's); the tool calls those updates report were reported all the same",
    ),
    "output-after-response": Breakage(
        OutputAfterResponse,
        "prompt.updates.before-response",
        status="WARN",
        also=frozenset({"cancel.updates-before-response", "cancel.after-response"}),
        why_also="the late chunk also follows the response of a cancelled turn (a MUST), and the output a "
        "crossing cancel is followed by is noted on the informative cancel.after-response (INFO)",
    ),
    "bad-chunk-content": Breakage(
        BadChunkContent,
        "update.chunk.shape",
        also=frozenset({"content.block.shapes"}),
        why_also="the chunk's content is a content block of an unknown type, which content.block.shapes names",
    ),
    "unknown-update-kind": Breakage(UnknownUpdateKind, "update.discriminator"),
}


for _path in sorted(Path(__file__).resolve().parent.glob("broken_agents_*.py")):
    _extra: dict[str, Breakage[MockAgent]] = importlib.import_module(f"tests.peers.{_path.stem}").BREAKAGES
    _clash = set(_extra) & set(BREAKAGES)
    if _clash:
        raise SystemExit(f"{_path.name}: breakage names already used: {sorted(_clash)}")
    BREAKAGES.update(_extra)


if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] not in BREAKAGES:
        print(f"usage: {sys.argv[0]} NAME [mock_agent options]; NAME one of: {', '.join(BREAKAGES)}", file=sys.stderr)
        sys.exit(2)
    run(sys.argv[2:], agent_cls=BREAKAGES[sys.argv[1]].peer)
