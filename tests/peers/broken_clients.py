"""Broken clients: each one is the reference client with exactly one clause broken.

``python tests/peers/broken_clients.py NAME [mock_client options]`` runs one
(it takes the same options as ``python -m mock_client``).  ``BREAKAGES``
says, for each, which clause it breaks, the status the suite must give that
clause, and any *collateral* clauses the same defect necessarily breaks too
(with the reason).  ``tests/e2e/test_broken_clients.py`` runs the whole
client suite against each and asserts that the FAIL and WARN set is exactly
``{breaks} | also``, so a check that cannot fail, or that fires on the wrong
clause, is caught.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import orjson

if __name__ == "__main__":  # run as a file: make the repository root importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from acp_conformance.core import jsonrpc
from acp_conformance.core.events import Event, Notification, Request, Response
from acp_conformance.peer import NO_ANSWER, HandlerError, Peer
from acp_conformance.transport.base import Transport
from acp_conformance.transport.process import ProcessTransport
from mock_client import MockClient
from mock_client.cli import main
from mock_client.strict import ClientPeer, _StrictConnection
from tests.peers._breakage import Breakage

Json = dict[str, Any]


class Filtered(MockClient):
    """Base for clients that damage their frames on the wire: override ``mangle``
    (return a message to send, bytes to send verbatim, or None to drop)."""

    def mangle(self, msg: Json) -> Any:
        return msg

    def make_peer(self, transport: Transport) -> Peer:
        peer = super().make_peer(transport)

        def wire(data: bytes) -> bytes:
            out = self.mangle(orjson.loads(data))
            if out is None:
                return b""
            if isinstance(out, bytes):
                return out
            return orjson.dumps(out) + b"\n"

        peer.wire_filter = wire
        return peer


def _is_ext_request(msg: Json) -> bool:
    """Our answer to one of the suite's extension requests (-32601, message names the method)."""
    err = msg.get("error")
    return "method" not in msg and isinstance(err, dict) and "method not found: _" in str(err.get("message"))


# ------------------------------------------------------------------ transport
class KeepaliveText(MockClient):
    async def new_session(self) -> str:
        await self.peer.send_raw(b"keepalive\n")
        return await super().new_session()


class BadUtf8(MockClient):
    async def new_session(self) -> str:
        await self.peer.send_raw(b'{"jsonrpc":"2.0","method":"_log","params":{"t":"\xff\xfe"}}\n')
        return await super().new_session()


class Batch(MockClient):
    async def new_session(self) -> str:
        await self.peer.send_raw(b'[{"jsonrpc":"2.0","method":"_log","params":{}}]\n')
        return await super().new_session()


class PartialLineAtExit(MockClient):
    async def run_turn(self, session_id: str, text: str) -> dict[str, Any]:
        record = await super().run_turn(session_id, text)
        await self.peer.send_raw(b'{"jsonrpc":"2.0","method":"_bye","params":{}}')
        return record


class WrongJsonrpcVersion(Filtered):
    def mangle(self, msg: Json) -> Any:
        if msg.get("method") == "session/new":
            msg["jsonrpc"] = "1.0"
        return msg


class InvalidContentBlock(MockClient):
    def prompt_blocks(self, text: str) -> list[Json]:
        return [{"type": "text", "text": text, "annotations": {"priority": "high"}}]


# -------------------------------------------------------------------- jsonrpc
class StringifiedResponseIds(Filtered):
    def mangle(self, msg: Json) -> Any:
        if "method" not in msg and isinstance(msg.get("id"), int):
            msg["id"] = str(msg["id"])
        return msg


class ResultAndError(Filtered):
    def mangle(self, msg: Json) -> Any:
        result = msg.get("result")
        if "method" not in msg and isinstance(result, dict) and "outcome" in result:
            msg["error"] = {"code": -32603, "message": "also an error"}
        return msg


class BadErrorObject(Filtered):
    def mangle(self, msg: Json) -> Any:
        if _is_ext_request(msg):
            msg["error"] = {"code": -32601, "message": 42}
        return msg


class ResultForUnknownRequests(MockClient):
    def install_handlers(self, peer: Peer) -> None:
        super().install_handlers(peer)

        async def anything(req: Request) -> Any:
            return {}

        peer.default_handler = anything


class IgnoresExtensionRequests(MockClient):
    def install_handlers(self, peer: Peer) -> None:
        super().install_handlers(peer)

        async def ignore(req: Request) -> Any:
            if req.method.startswith("_"):
                return NO_ANSWER
            raise HandlerError(-32601, f"method not found: {req.method}")

        peer.default_handler = ignore


class IgnoresStringIds(Filtered):
    def mangle(self, msg: Json) -> Any:
        if "method" not in msg and isinstance(msg.get("id"), str):
            return None  # every answer to a string-id request is lost
        return msg


class DuplicatePermissionAnswer(Filtered):
    def mangle(self, msg: Json) -> Any:
        result = msg.get("result")
        if "method" not in msg and isinstance(result, dict) and "outcome" in result:
            return orjson.dumps(msg) + b"\n" + orjson.dumps(msg) + b"\n"
        return msg


class NeverAnswersPermission(MockClient):
    async def handle_permission(self, req: Request, default: Any) -> Any:
        return NO_ANSWER


class ConfusedByDuplicatePromptResponse(MockClient):
    """A second response to a finished session/prompt upsets its turn bookkeeping: from then on it
    believes no turn is running and leaves the agent's permission requests unanswered."""

    async def handle_permission(self, req: Request, default: Any) -> Any:
        if any(isinstance(e, Response) and e.duplicate and e.method == "session/prompt" for e in self.peer.events):
            return NO_ANSWER
        return await default(req)


# ----------------------------------------------------------------------- init
class ExtensionRequestFirst(MockClient):
    async def initialize(self) -> bool:
        await self.peer.call("_acme/hello", {})
        return await super().initialize()


class VersionZero(MockClient):
    def initialize_params(self) -> Json:
        return {**super().initialize_params(), "protocolVersion": 0}


class StringVersion(MockClient):
    def initialize_params(self) -> Json:
        return {**super().initialize_params(), "protocolVersion": "1"}


class ClaimsFsButRefuses(MockClient):
    async def handle_read(self, req: Request) -> Any:
        raise HandlerError(-32601, "fs/read_text_file is not implemented")

    async def handle_write(self, req: Request) -> Any:
        raise HandlerError(-32601, "fs/write_text_file is not implemented")


class NoClientInfo(MockClient):
    def initialize_params(self) -> Json:
        params = super().initialize_params()
        del params["clientInfo"]
        return params


class ClientInfoWithoutVersion(MockClient):
    def initialize_params(self) -> Json:
        params = super().initialize_params()
        params["clientInfo"] = {"name": "broken-client"}
        return params


class StringFsFlag(MockClient):
    def initialize_params(self) -> Json:
        params = super().initialize_params()
        params["clientCapabilities"]["fs"]["readTextFile"] = "yes"
        return params


class LoadsWhenCapabilityOmitted(MockClient):
    """Reads an absent loadSession as "supported" and reloads the session it remembers."""

    async def initialize(self) -> bool:
        ok = await super().initialize()
        caps = self.endpoint.init_result.get("agentCapabilities")
        if ok and isinstance(caps, dict) and "loadSession" not in caps:
            await self.peer.call("session/load", {"sessionId": "sess-remembered", "cwd": self.cwd, "mcpServers": []})
        return ok


class GivesUpWithoutPromptCapabilities(MockClient):
    """Refuses to work with an agent that declares no promptCapabilities (absent means all false)."""

    async def initialize(self) -> bool:
        ok = await super().initialize()
        caps = self.endpoint.init_result.get("agentCapabilities")
        if ok and isinstance(caps, dict) and "promptCapabilities" not in caps:
            self.fail("the agent declares no promptCapabilities: giving up")
            return False
        return ok


class IgnoresVersion(MockClient):
    async def initialize(self) -> bool:
        await super().initialize()
        self.report["errors"].clear()
        return True


# -------------------------------------------------------------------- session
class PipelinedSessionNew(MockClient):
    async def initialize(self) -> bool:
        init_id = await self.peer.send_request("initialize", self.initialize_params())
        new_id = await self.peer.send_request("session/new", self.session_params())
        init = await self.peer.wait_response(init_id, method="initialize")
        self.endpoint.init_result = init.result if isinstance(init.result, dict) else {}
        new = await self.peer.wait_response(new_id, method="session/new")
        self._pipelined = new.result["sessionId"] if isinstance(new.result, dict) else ""
        if self.endpoint.init_result.get("protocolVersion") != 1:
            self.fail("the agent answered another protocol version: disconnecting")
            return False
        return True

    async def new_session(self) -> str:
        self.session_id = self._pipelined
        self.endpoint.sessions[self._pipelined] = {}
        return self._pipelined


class NoMcpServers(MockClient):
    def session_params(self) -> Json:
        return {"cwd": self.cwd}


class RelativeCwd(MockClient):
    def session_params(self) -> Json:
        return {"cwd": ".", "mcpServers": []}


class HttpMcpServer(MockClient):
    def session_params(self) -> Json:
        server = {"type": "http", "name": "docs", "url": "http://127.0.0.1:9/mcp", "headers": []}
        return {"cwd": self.cwd, "mcpServers": [server]}


class RelativeMcpCommand(MockClient):
    def session_params(self) -> Json:
        server = {"name": "files", "command": "mcp-files", "args": [], "env": []}
        return {"cwd": self.cwd, "mcpServers": [server]}


class LoadsUnadvertisedSession(MockClient):
    async def new_session(self) -> str:
        await self.peer.call("session/load", {"sessionId": "sess-from-yesterday", "cwd": self.cwd, "mcpServers": []})
        return await super().new_session()


class CallsUnadvertised(MockClient):
    """Sends one session method the agent did not advertise, right after session/new."""

    method = ""

    def unadvertised_params(self, session_id: str) -> Json:
        return {"sessionId": session_id}

    async def new_session(self) -> str:
        sid = await super().new_session()
        await self.peer.call(self.method, self.unadvertised_params(sid))
        return sid


class ListsUnadvertised(CallsUnadvertised):
    method = "session/list"

    def unadvertised_params(self, session_id: str) -> Json:
        return {}


class ResumesUnadvertised(CallsUnadvertised):
    method = "session/resume"

    def unadvertised_params(self, session_id: str) -> Json:
        return {"sessionId": session_id, "cwd": self.cwd, "mcpServers": []}


class ClosesUnadvertised(CallsUnadvertised):
    method = "session/close"


class DeletesUnadvertised(CallsUnadvertised):
    method = "session/delete"


class LogsOutUnadvertised(CallsUnadvertised):
    method = "logout"

    def unadvertised_params(self, session_id: str) -> Json:
        return {}


class PromptsUnknownSession(MockClient):
    async def run_turn(self, session_id: str, text: str) -> dict[str, Any]:
        return await super().run_turn("sess-made-up", text)


class PromptNotArray(Filtered):
    def mangle(self, msg: Json) -> Any:
        if msg.get("method") == "session/prompt":
            msg["params"]["prompt"] = msg["params"]["prompt"][0]
        return msg


class ImageWithoutCapability(MockClient):
    def prompt_blocks(self, text: str) -> list[Json]:
        return [*super().prompt_blocks(text), {"type": "image", "mimeType": "image/png", "data": "iVBORw0KGgo="}]


class AudioWithoutCapability(MockClient):
    def prompt_blocks(self, text: str) -> list[Json]:
        return [*super().prompt_blocks(text), {"type": "audio", "mimeType": "audio/wav", "data": "UklGRg=="}]


class ResourceWithoutCapability(MockClient):
    def prompt_blocks(self, text: str) -> list[Json]:
        resource = {"type": "resource", "resource": {"uri": "file:///tmp/notes.txt", "text": "notes"}}
        return [*super().prompt_blocks(text), resource]


# ------------------------------------------------------------------------ fs
class WrongReadContent(MockClient):
    async def handle_read(self, req: Request) -> Any:
        result = await super().handle_read(req)
        p = req.params if isinstance(req.params, dict) else {}
        if "line" not in p and "limit" not in p:
            result["content"] = result["content"].replace("\n", "\r\n")
        return result


class IgnoresLineLimit(MockClient):
    async def handle_read(self, req: Request) -> Any:
        p = dict(req.params) if isinstance(req.params, dict) else {}
        p.pop("line", None)
        p.pop("limit", None)
        return await super().handle_read(Request(req.id, req.method, p, req.raw, req.index))


class EmptyReadForMissing(MockClient):
    async def handle_read(self, req: Request) -> Any:
        p = req.params if isinstance(req.params, dict) else {}
        if isinstance(p.get("path"), str) and not os.path.exists(p["path"]):
            return {"content": ""}
        return await super().handle_read(req)


class MissingFileInternalError(MockClient):
    """A missing file is an error, but -32603 (internal) instead of -32002 (resource not found)."""

    async def handle_read(self, req: Request) -> Any:
        p = req.params if isinstance(req.params, dict) else {}
        if isinstance(p.get("path"), str) and not os.path.exists(p["path"]):
            raise HandlerError(-32603, f"ENOENT: {p['path']}")
        return await super().handle_read(req)


class WriteNotPerformed(MockClient):
    async def handle_write(self, req: Request) -> Any:
        return {}


class WriteReturnsString(MockClient):
    async def handle_write(self, req: Request) -> Any:
        await super().handle_write(req)
        return "ok"


class WriteReturnsNull(MockClient):
    """Answers fs/write_text_file with null, as the docs' example shows (the schema wants {})."""

    async def handle_write(self, req: Request) -> Any:
        await super().handle_write(req)
        return None


# ---------------------------------------------------------------- permission
class PermissionError32601(MockClient):
    async def handle_permission(self, req: Request, default: Any) -> Any:
        raise HandlerError(-32601, "Method not found: session/request_permission")


class CancelledWithoutCancel(MockClient):
    async def handle_permission(self, req: Request, default: Any) -> Any:
        if self.endpoint.is_cancelled(self.session_id) or self.options.permission == "hold":
            return await default(req)
        return {"outcome": {"outcome": "cancelled"}}


class HardcodedOptionId(MockClient):
    """Answers with the conventional ids whatever was offered."""

    async def handle_permission(self, req: Request, default: Any) -> Any:
        if self.endpoint.is_cancelled(self.session_id) or self.options.permission == "hold":
            return await default(req)
        option = "reject-once" if self.options.permission.startswith("reject") else "allow-once"
        return {"outcome": {"outcome": "selected", "optionId": option}}


class IgnoresPermissionPolicy(MockClient):
    async def handle_permission(self, req: Request, default: Any) -> Any:
        if self.endpoint.is_cancelled(self.session_id) or self.options.permission == "hold":
            return await default(req)
        options = req.params.get("options", []) if isinstance(req.params, dict) else []
        allow = next(o for o in options if str(o.get("kind", "")).startswith("allow"))
        return {"outcome": {"outcome": "selected", "optionId": allow["optionId"]}}


class PendingNotCancelled(MockClient):
    async def answer_pending_permissions(self, session_id: str) -> None:
        for call in self.endpoint.permission_calls:
            if call.session_id == session_id and call.outcome is None:
                options = call.request.params.get("options", []) if isinstance(call.request.params, dict) else []
                reject = next(o for o in options if str(o.get("kind", "")).startswith("reject"))
                await self.endpoint.answer_permission(call, {"outcome": "selected", "optionId": reject["optionId"]})


class LateRequestNotCancelled(MockClient):
    async def handle_permission(self, req: Request, default: Any) -> Any:
        if self.endpoint.is_cancelled(self.session_id):
            options = req.params.get("options", []) if isinstance(req.params, dict) else []
            allow = next(o for o in options if str(o.get("kind", "")).startswith("allow"))
            return {"outcome": {"outcome": "selected", "optionId": allow["optionId"]}}
        return await default(req)


class CancelAsRequest(MockClient):
    async def send_cancel(self, session_id: str) -> None:
        await self.peer.send_request("session/cancel", self.cancel_params(session_id), validate=False)


# ---------------------------------------------------------------- robustness
class CrashesOnUnknownUpdate(MockClient):
    def on_notification(self, note: Notification) -> None:
        update = note.params.get("update") if isinstance(note.params, dict) else None
        if isinstance(update, dict) and update.get("sessionUpdate") not in (
            "agent_message_chunk", "agent_thought_chunk", "user_message_chunk", "tool_call", "tool_call_update",
            "plan", "available_commands_update", "current_mode_update", "config_option_update",
            "session_info_update", "usage_update",
        ):
            os._exit(70)  # an unhandled "unknown variant" error takes the client down
        super().on_notification(note)


class AnswersNotifications(MockClient):
    def on_notification(self, note: Notification) -> None:
        if note.method.startswith("_"):
            self.peer.start_soon(
                self.peer.send_raw, b'{"jsonrpc":"2.0","id":null,"error":{"code":-32601,"message":"unknown"}}\n'
            )
        super().on_notification(note)


class CustomNotificationWithoutUnderscore(MockClient):
    """Sends a custom notification whose method does not start with ``_`` (extensibility.mdx: custom
    methods are prefixed with ``_``); the client report once said CONFORMANT beside that FAIL."""

    async def new_session(self) -> str:
        # Before session/new: the agent reads frames in order, so every test with a session sees it.
        await self.peer.notify("acme/status", {"state": "ready"}, validate=False)
        return await super().new_session()


class ExitsOnUnknownNotification(MockClient):
    def on_notification(self, note: Notification) -> None:
        if note.method.startswith("_acp_conformance/unknown_notification"):
            os._exit(71)
        super().on_notification(note)


class ConfusesIdSpaces(MockClient):
    async def handle_permission(self, req: Request, default: Any) -> Any:
        tool_call = req.params.get("toolCall", {}) if isinstance(req.params, dict) else {}
        if req.id == self.current_turn and tool_call.get("toolCallId") == "shared-id":
            # "That id is my session/prompt": treats the agent's request as the turn's end.
            raise HandlerError(-32600, f"id {req.id!r} is already in use")
        return await default(req)


class RejectsMeta(MockClient):
    async def handle_read(self, req: Request) -> Any:
        if isinstance(req.params, dict) and "_meta" in req.params:
            raise HandlerError(-32602, "unexpected field: _meta")
        return await super().handle_read(req)


class StderrNotDrained(MockClient):
    """Pipes the agent's stderr and never reads it: a chatty agent blocks."""

    def spawn_agent(self) -> AbstractAsyncContextManager[ProcessTransport]:
        return _spawn_without_stderr_drain(self.options.agent, self.cwd)


@asynccontextmanager
async def _spawn_without_stderr_drain(command: str, cwd: str) -> AsyncIterator[ProcessTransport]:
    import shlex

    process = await anyio.open_process(
        shlex.split(command), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=cwd,
        start_new_session=True,
    )
    transport = ProcessTransport(process, shlex.split(command), 50)
    try:
        yield transport
    finally:
        with anyio.CancelScope(shield=True):
            await transport.terminate(1.0)
            await process.aclose()


# ------------------------------------------------------- found only by fuzzing
# Each is the reference client with one defect no scripted test provokes; the client fuzz campaigns
# (acp_conformance/suite/client/test_fuzz.py) must find it within their default budget and seed.
class FuzzCrashesOnUnknownMethod(MockClient):
    """Exits on a request for a method it does not know that is not an extension (``_``) method."""

    def install_handlers(self, peer: Peer) -> None:
        super().install_handlers(peer)

        async def crash(req: Request) -> Any:
            if not req.method.startswith("_"):
                os._exit(72)  # an unhandled "unknown variant" error takes the client down
            raise HandlerError(-32601, f"method not found: {req.method}")

        peer.default_handler = crash


class FuzzResultForInvalidParams(MockClient):
    """Serves requests whose params miss a required member (a missing ``options`` reads as no option:
    the permission is answered ``cancelled``) instead of refusing them with -32602."""

    def check_params(self, req: Request) -> None:
        pass


class _WedgedAfterGarbage(_StrictConnection):
    """Answers the first line that is not JSON, then reads nothing more."""

    wedged = False

    def receive_frame(self, data: bytes) -> list[Event]:
        if self.wedged:
            return []
        if jsonrpc.decode(data)[0] is None and not jsonrpc.is_json_null(data):
            self.wedged = True
        return super().receive_frame(data)


class FuzzWedgedAfterGarbage(MockClient):
    def make_peer(self, transport: Transport) -> Peer:
        peer = super().make_peer(transport)
        assert isinstance(peer, ClientPeer)
        peer.conn = _WedgedAfterGarbage(peer.answer_malformed)
        return peer


class FuzzSilentOnParseErrors(MockClient):
    """Says nothing about a line that is not JSON (JSON-RPC wants -32700 with a null id)."""

    def make_peer(self, transport: Transport) -> Peer:
        peer = super().make_peer(transport)
        assert isinstance(peer, ClientPeer)
        answer = peer.answer_malformed

        def only_invalid_requests(code: int, message: str) -> None:
            if code != jsonrpc.ErrorCode.PARSE_ERROR:
                answer(code, message)

        peer.conn = _StrictConnection(only_invalid_requests)
        return peer


class FuzzParseErrorForInvalidRequests(MockClient):
    """Calls every malformed line a parse error, JSON or not (-32700 where -32600 is due)."""

    def make_peer(self, transport: Transport) -> Peer:
        peer = super().make_peer(transport)
        assert isinstance(peer, ClientPeer)
        answer = peer.answer_malformed
        peer.conn = _StrictConnection(lambda code, message: answer(jsonrpc.ErrorCode.PARSE_ERROR, "Parse error"))
        return peer


# ------------------------------------------------------------------ terminal
class NoTerminalExitCode(MockClient):
    async def terminal_call(self, name: str, params: dict[str, Any]) -> Any:
        result = await super().terminal_call(name, params)
        if name == "wait_for_exit":
            return {"exitCode": None, "signal": None}
        return result


class NegativeExitCode(MockClient):
    async def terminal_call(self, name: str, params: dict[str, Any]) -> Any:
        result = await super().terminal_call(name, params)
        if name == "wait_for_exit" and isinstance(result.get("exitCode"), int):
            return {"exitCode": -result["exitCode"] or -1, "signal": None}
        return result


class ExitStatusWhileRunning(MockClient):
    async def terminal_call(self, name: str, params: dict[str, Any]) -> Any:
        result = await super().terminal_call(name, params)
        if name == "output" and "exitStatus" not in result:
            result["exitStatus"] = {"exitCode": 0, "signal": None}
        return result


class CreateWaitsForExit(MockClient):
    async def terminal_call(self, name: str, params: dict[str, Any]) -> Any:
        result = await super().terminal_call(name, params)
        if name == "create":
            assert self.terminals is not None
            await self.terminals.wait_for_exit(result["terminalId"])
        return result


class KillReleases(MockClient):
    async def terminal_call(self, name: str, params: dict[str, Any]) -> Any:
        if name == "kill":
            return await super().terminal_call("release", params)
        return await super().terminal_call(name, params)


class ReleaseLeavesRunning(MockClient):
    async def terminal_call(self, name: str, params: dict[str, Any]) -> Any:
        if name == "release":
            assert self.terminals is not None
            self.terminals.get(params.get("terminalId")).released = True
            return {}
        return await super().terminal_call(name, params)


class ReleasedIdStillWorks(MockClient):
    async def terminal_call(self, name: str, params: dict[str, Any]) -> Any:
        if name == "release":
            assert self.terminals is not None
            self.terminals.get(params.get("terminalId"))
            return {}  # "released", but the id keeps working
        return await super().terminal_call(name, params)


class KeepsTheHead(MockClient):
    async def terminal_call(self, name: str, params: dict[str, Any]) -> Any:
        if name == "create":
            self._limits = getattr(self, "_limits", {})
            limit = params.get("outputByteLimit")
            params = {**params}
            params.pop("outputByteLimit", None)
            result = await super().terminal_call(name, params)
            self._limits[result["terminalId"]] = limit
            return result
        result = await super().terminal_call(name, params)
        limit = getattr(self, "_limits", {}).get(params.get("terminalId"))
        if name == "output" and isinstance(limit, int):
            data = result["output"].encode()
            if len(data) > limit:
                result["output"] = data[:limit].decode("utf-8", "ignore")
                result["truncated"] = True
        return result


class SplitsCharacters(MockClient):
    async def terminal_call(self, name: str, params: dict[str, Any]) -> Any:
        if name == "create":
            self._limits = getattr(self, "_limits", {})
            limit = params.get("outputByteLimit")
            params = {**params}
            params.pop("outputByteLimit", None)
            result = await super().terminal_call(name, params)
            self._limits[result["terminalId"]] = limit
            return result
        result = await super().terminal_call(name, params)
        limit = getattr(self, "_limits", {}).get(params.get("terminalId"))
        if name == "output" and isinstance(limit, int):
            data = result["output"].encode()
            if len(data) > limit:
                result["output"] = data[-limit:].decode("utf-8", "replace")  # cuts inside a character
                result["truncated"] = True
        return result


#: Why a client that uses a capability the agent did not advertise also breaks cap.omitted-unsupported.
WHY_OMITTED = (
    "with agentCapabilities left out entirely it is also use of an absent capability (cap.omitted-unsupported)"
)

BREAKAGES: dict[str, Breakage[MockClient]] = {
    # transport
    "keepalive-text": Breakage(KeepaliveText, "transport.stdio.stdin-clean"),
    "bad-utf8": Breakage(BadUtf8, "transport.utf8"),
    "batch": Breakage(Batch, "transport.stdio.one-message-per-line"),
    "partial-line-at-exit": Breakage(PartialLineAtExit, "transport.stdio.newline-delimited"),
    "wrong-jsonrpc-version": Breakage(WrongJsonrpcVersion, "jsonrpc.version-field"),
    "invalid-content-block": Breakage(InvalidContentBlock, "schema.valid"),
    # jsonrpc
    "stringified-response-ids": Breakage(
        StringifiedResponseIds,
        "jsonrpc.response-id-echo",
        also=frozenset({"jsonrpc.every-request-answered", "jsonrpc.id-types", "term.create.immediate"}),
        why_also="integer-id requests (a terminal/create too) are left unanswered while string ids work",
    ),
    "result-and-error": Breakage(ResultAndError, "jsonrpc.result-xor-error"),
    "bad-error-object": Breakage(BadErrorObject, "jsonrpc.error-object"),
    "result-for-unknown-requests": Breakage(
        ResultForUnknownRequests,
        "jsonrpc.unknown-method",
        also=frozenset({"ext.request.unknown"}),
        why_also="an unknown extension request is an unknown method: -32601 is the SHOULD and the MUST",
    ),
    "ignores-extension-requests": Breakage(
        IgnoresExtensionRequests,
        "ext.request.respond",
        also=frozenset({"jsonrpc.every-request-answered"}),
        why_also="the unanswered requests are waited for in vain",
    ),
    "ignores-string-ids": Breakage(
        IgnoresStringIds,
        "jsonrpc.id-types",
        also=frozenset({"jsonrpc.every-request-answered"}),
        why_also="the request with a string id is never answered",
    ),
    "duplicate-permission-answer": Breakage(DuplicatePermissionAnswer, "jsonrpc.no-duplicate-response"),
    "never-answers-permission": Breakage(NeverAnswersPermission, "jsonrpc.every-request-answered"),
    "confused-by-duplicate-prompt-response": Breakage(
        ConfusedByDuplicatePromptResponse, "jsonrpc.every-request-answered",
        scenario="client-duplicate-and-stray-responses", prompts_on_stdin=True,
    ),
    # init
    "extension-request-first": Breakage(ExtensionRequestFirst, "init.first"),
    "version-zero": Breakage(VersionZero, "init.request.protocol-version"),
    "string-version": Breakage(
        StringVersion, "init.request.protocol-version-type", also=frozenset({"schema.valid"}),
        why_also="ProtocolVersion is an integer in the schema",
    ),
    "claims-fs-but-refuses": Breakage(ClaimsFsButRefuses, "init.request.capabilities"),
    "no-client-info": Breakage(NoClientInfo, "init.request.client-info", status="WARN"),
    "client-info-without-version": Breakage(
        ClientInfoWithoutVersion, "init.implementation.shape", also=frozenset({"schema.valid"}),
        why_also="Implementation.version is required by the schema",
    ),
    "string-fs-flag": Breakage(
        StringFsFlag, "cap.client.fs-defaults", also=frozenset({"schema.valid"}),
        why_also="the schema types the flag as a boolean",
    ),
    "loads-when-capability-omitted": Breakage(
        LoadsWhenCapabilityOmitted, "cap.omitted-unsupported", also=frozenset({"session.load.gated"}),
        why_also="the session/load it sends is one the agent did not advertise",
    ),
    "gives-up-without-prompt-capabilities": Breakage(
        GivesUpWithoutPromptCapabilities, "cap.all-combinations", status="WARN"
    ),
    "ignores-version": Breakage(IgnoresVersion, "init.version.client-disconnect", status="WARN"),
    # session
    "pipelined-session-new": Breakage(
        PipelinedSessionNew, "session.after-init", status="FAIL",
        also=frozenset({"init.version.client-disconnect"}),
        why_also="a session/new sent before the initialize answer cannot depend on the version in it (a WARN)",
    ),
    "no-mcp-servers": Breakage(
        NoMcpServers, "session.new.params", also=frozenset({"schema.valid"}),
        why_also="mcpServers is required by the schema",
    ),
    "relative-cwd": Breakage(RelativeCwd, "session.cwd.absolute"),
    "http-mcp-server": Breakage(HttpMcpServer, "session.mcp.transport-gated"),
    "relative-mcp-command": Breakage(RelativeMcpCommand, "session.mcp.shapes"),
    "loads-unadvertised-session": Breakage(
        LoadsUnadvertisedSession, "session.load.gated", also=frozenset({"cap.omitted-unsupported"}),
        why_also=WHY_OMITTED, scenario="client-load-gated",
    ),
    "lists-unadvertised": Breakage(
        ListsUnadvertised, "session.list.gated", also=frozenset({"cap.omitted-unsupported"}),
        why_also=WHY_OMITTED,
    ),
    "resumes-unadvertised": Breakage(
        ResumesUnadvertised, "session.resume.gated", also=frozenset({"cap.omitted-unsupported"}),
        why_also=WHY_OMITTED,
    ),
    "closes-unadvertised": Breakage(
        ClosesUnadvertised, "session.close.gated", also=frozenset({"cap.omitted-unsupported"}),
        why_also=WHY_OMITTED,
    ),
    "deletes-unadvertised": Breakage(
        DeletesUnadvertised, "session.delete.gated", also=frozenset({"cap.omitted-unsupported"}),
        why_also=WHY_OMITTED,
    ),
    "logs-out-unadvertised": Breakage(
        LogsOutUnadvertised, "auth.logout.gated", also=frozenset({"cap.omitted-unsupported"}),
        why_also=WHY_OMITTED,
    ),
    "prompts-unknown-session": Breakage(PromptsUnknownSession, "prompt.after-setup"),
    "prompt-not-array": Breakage(
        PromptNotArray, "prompt.params", also=frozenset({"schema.valid"}),
        why_also="prompt is an array in the schema",
    ),
    "image-without-capability": Breakage(
        ImageWithoutCapability, "content.image.gated",
        also=frozenset({"prompt.content-gated", "cap.omitted-unsupported"}),
        why_also="an image block is content the agent did not allow; " + WHY_OMITTED,
    ),
    "audio-without-capability": Breakage(
        AudioWithoutCapability, "content.audio.gated",
        also=frozenset({"prompt.content-gated", "cap.omitted-unsupported"}),
        why_also="an audio block is content the agent did not allow; " + WHY_OMITTED,
    ),
    "resource-without-capability": Breakage(
        ResourceWithoutCapability, "content.resource.gated",
        also=frozenset({"prompt.content-gated", "cap.omitted-unsupported"}),
        why_also="an embedded resource is content the agent did not allow; " + WHY_OMITTED,
    ),
    # fs
    "wrong-read-content": Breakage(WrongReadContent, "fs.read.response"),
    "ignores-line-limit": Breakage(IgnoresLineLimit, "fs.read.line-limit"),
    "empty-read-for-missing": Breakage(EmptyReadForMissing, "fs.read.missing", status="WARN"),
    "missing-file-internal-error": Breakage(
        MissingFileInternalError, "error.resource-not-found", status="WARN"
    ),
    "write-not-performed": Breakage(WriteNotPerformed, "fs.write.create"),
    "write-returns-string": Breakage(WriteReturnsString, "fs.write.response"),
    "write-returns-null": Breakage(WriteReturnsNull, "schema.null-result", status="WARN"),
    # permission
    "permission-error": Breakage(
        PermissionError32601, "perm.response.shape",
        also=frozenset({"perm.auto", "perm.late-request-after-cancel"}),
        why_also="an error is neither the policy's option nor the cancelled outcome",
    ),
    "cancelled-without-cancel": Breakage(
        CancelledWithoutCancel, "perm.response.shape", also=frozenset({"perm.auto"}),
        why_also="cancelled is not the option of the configured policy",
    ),
    "hardcoded-option-id": Breakage(HardcodedOptionId, "perm.response.valid-option"),
    "ignores-permission-policy": Breakage(IgnoresPermissionPolicy, "perm.auto", status="INFO"),
    "pending-not-cancelled": Breakage(
        PendingNotCancelled, "perm.cancelled-on-cancel", scenario="client-cancel-pending-permission"
    ),
    "late-request-not-cancelled": Breakage(
        LateRequestNotCancelled, "perm.late-request-after-cancel", status="WARN",
        scenario="client-permission-after-cancel",
    ),
    "cancel-as-request": Breakage(
        CancelAsRequest, "cancel.is-notification", also=frozenset({"schema.valid"}),
        why_also="session/cancel is a notification in the schema",
    ),
    # robustness
    "crashes-on-unknown-update": Breakage(CrashesOnUnknownUpdate, "jsonrpc.every-request-answered"),
    "answers-notifications": Breakage(
        AnswersNotifications, "jsonrpc.notification-no-response",
    ),
    "custom-notification-without-underscore": Breakage(
        CustomNotificationWithoutUnderscore, "ext.method.underscore"
    ),
    "exits-on-unknown-notification": Breakage(
        ExitsOnUnknownNotification, "ext.notification.ignore", status="WARN",
        also=frozenset({"jsonrpc.every-request-answered"}),
        why_also="once it has exited, the request that follows is never answered",
    ),
    "confuses-id-spaces": Breakage(ConfusesIdSpaces, "jsonrpc.id-spaces-independent"),
    "rejects-meta": Breakage(RejectsMeta, "ext.meta.everywhere"),
    "stderr-not-drained": Breakage(StderrNotDrained, "transport.stdio.stderr-logs", status="INFO"),
    # terminal
    "no-terminal-exit-code": Breakage(NoTerminalExitCode, "term.wait"),
    "negative-exit-code": Breakage(
        NegativeExitCode, "term.exit-status.shape", also=frozenset({"schema.valid"}),
        why_also="the schema gives exitCode a minimum of 0",
    ),
    "exit-status-while-running": Breakage(ExitStatusWhileRunning, "term.output.shape"),
    "create-waits-for-exit": Breakage(CreateWaitsForExit, "term.create.immediate"),
    "kill-releases": Breakage(KillReleases, "term.kill.keeps-id"),
    "release-leaves-running": Breakage(ReleaseLeavesRunning, "term.release.kills"),
    "released-id-still-works": Breakage(
        ReleasedIdStillWorks, "term.release.invalidates", also=frozenset({"term.release.kills"}),
        why_also="a terminal that is not really released is not killed either",
    ),
    "keeps-the-head": Breakage(KeepsTheHead, "term.output.truncate-head"),
    "splits-characters": Breakage(SplitsCharacters, "term.output.char-boundary"),
    # found only by fuzzing
    # A request for a method that is neither ACP's nor _-prefixed, and garbage, are frames a conforming
    # agent never sends: the client dying or wedging on them is a robustness finding.
    "fuzz-crashes-on-unknown-method": Breakage(
        FuzzCrashesOnUnknownMethod,
        "jsonrpc.survives-invalid-input",
        status="WARN",
        fuzz="test_fuzz_client_methods_and_notifications",
    ),
    "fuzz-result-for-invalid-params": Breakage(
        FuzzResultForInvalidParams, "jsonrpc.invalid-params", status="WARN", fuzz="test_fuzz_client_invalid_params"
    ),
    "fuzz-wedged-after-garbage": Breakage(
        FuzzWedgedAfterGarbage,
        "jsonrpc.survives-invalid-input",
        status="WARN",
        fuzz="test_fuzz_client_unparseable_lines",
    ),
    "fuzz-silent-on-parse-errors": Breakage(
        FuzzSilentOnParseErrors, "jsonrpc.parse-error", status="WARN", fuzz="test_fuzz_client_unparseable_lines"
    ),
    "fuzz-parse-error-for-invalid-requests": Breakage(
        FuzzParseErrorForInvalidRequests, "jsonrpc.invalid-request", status="WARN",
        fuzz="test_fuzz_client_invalid_requests",
    ),
}


if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] not in BREAKAGES:
        print(f"usage: {sys.argv[0]} NAME [mock_client options]; NAME one of: {', '.join(BREAKAGES)}",
              file=sys.stderr)
        sys.exit(2)
    sys.exit(main(sys.argv[2:], client_cls=BREAKAGES[sys.argv[1]].peer))
