"""``MockClient``: the reference ACP v1 client, built to be subclassed into broken ones.

It launches an agent, initializes, opens one session in its working
directory and runs one prompt turn per ``--prompt`` (or per stdin line),
answering the agent's requests the way a conforming editor does:

* permission: by policy (``allow_once``, ``reject``, ``hold`` until the
  turn is cancelled, ...); on cancel, every pending request of the turn is
  answered ``cancelled``, and so is any request arriving after the cancel;
* fs: real files, confined to the session directory; ``line``/``limit``
  honoured; a missing file is error -32002;
* terminal: real processes (``mock_client.terminals``).

SIGINT during a turn cancels it (``session/cancel``); SIGINT outside a
turn ends the program.  Every message it sends is produced by one small
method, so a broken test client overrides exactly the method whose
behaviour it wants to get wrong.
"""

from __future__ import annotations

import base64
import logging
import mimetypes
import os
import signal
import sys
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import orjson

from acp_conformance.checks.sessions import select_choices
from acp_conformance.core import jsonrpc
from acp_conformance.core.events import Notification, Request
from acp_conformance.core.ids import same_id
from acp_conformance.endpoints.client import ClientCapabilities, ClientEndpoint, PermissionCall, Sandbox
from acp_conformance.errors import AcpError, PeerExited, RpcError
from acp_conformance.peer import HandlerError, Peer
from acp_conformance.transport.base import Transport
from acp_conformance.transport.process import ProcessTransport, spawn
from mock_client.strict import REQUIRED, ClientPeer, check_params
from mock_client.terminals import RealTerminals

if TYPE_CHECKING:
    from acp_conformance.schema.validator import SchemaValidator

__all__ = ["CLIENT_NAME", "SUPPORTED_VERSION", "ClientOptions", "MockClient"]

log = logging.getLogger("mock_client")

CLIENT_NAME = "acp-conformance-mock-client"
SUPPORTED_VERSION = 1
ErrorCode = jsonrpc.ErrorCode


@dataclass
class ClientOptions:
    agent: str
    prompts: list[str] = field(default_factory=list)
    stdin_prompts: bool = False
    permission: str = "allow_once"
    capabilities: ClientCapabilities = field(default_factory=ClientCapabilities)
    cwd: str = field(default_factory=os.getcwd)
    cancel_after_permission: bool = False
    timeout: float = 300.0
    report: str | None = None
    quiet: bool = False
    #: Additional workspace roots, offered only to an agent that advertises them.
    add_dirs: list[str] = field(default_factory=list)
    #: Authenticate when the agent answers auth_required (with its first agent method).
    authenticate: bool = False
    #: List the agent's sessions (every page) after initialize.
    list_sessions: bool = False
    #: Continue this session (session/load or session/resume) instead of opening a new one.
    continue_session: str | None = None
    #: Files attached to every prompt.
    attach: list[str] = field(default_factory=list)
    #: A mode (id or name) to switch to, and a config choice (OPTION=CHOICE, ids or names), before prompting.
    set_mode: str | None = None
    set_config: str | None = None


class MockClient:
    """A deterministic, conforming ACP v1 client; subclass it to break one thing."""

    def __init__(self, options: ClientOptions, validator: SchemaValidator | None = None) -> None:
        self.options = options
        self.validator = validator
        self.cwd = str(Path(options.cwd).resolve())
        self._peer: Peer | None = None
        self._endpoint: ClientEndpoint | None = None
        self.terminals: RealTerminals | None = None
        self.session_id: str | None = None
        self.current_turn: Any = None  # request id of the running session/prompt
        self.report: dict[str, Any] = {"turns": [], "permissions": [], "agent_stderr": [], "errors": []}
        self._main_scope: anyio.CancelScope | None = None

    # ---------------------------------------------------------------- parts
    @property
    def peer(self) -> Peer:
        assert self._peer is not None
        return self._peer

    @property
    def endpoint(self) -> ClientEndpoint:
        assert self._endpoint is not None
        return self._endpoint

    def make_peer(self, transport: Transport) -> Peer:
        return ClientPeer(transport, validator=self.validator, timeout=self.options.timeout)

    def make_endpoint(self, peer: Peer) -> ClientEndpoint:
        return ClientEndpoint(
            peer,
            capabilities=self.options.capabilities,
            sandbox=Sandbox(self.cwd),
            permission="hold" if self.options.cancel_after_permission else self.options.permission,
            client_info={"name": CLIENT_NAME, "title": "ACP conformance mock client", "version": _version()},
        )

    def install_handlers(self, peer: Peer) -> None:
        endpoint = self.endpoint
        original_permission = peer.handlers["session/request_permission"]

        async def on_permission(req: Request) -> Any:
            result = await self.handle_permission(req, original_permission)
            if self.options.cancel_after_permission and self.current_turn is not None and self.session_id:
                if not endpoint.is_cancelled(self.session_id):
                    peer.start_soon(self.cancel_turn)
            return result

        peer.handlers["session/request_permission"] = on_permission
        self._fs_read, self._fs_write = peer.handlers["fs/read_text_file"], peer.handlers["fs/write_text_file"]
        peer.handlers["fs/read_text_file"] = self.handle_read
        peer.handlers["fs/write_text_file"] = self.handle_write
        self.terminals = RealTerminals(peer.start_soon, self.cwd)
        for name in ("create", "output", "wait_for_exit", "kill", "release"):
            peer.handlers[f"terminal/{name}"] = self._terminal_handler(name)
        for method in REQUIRED:
            peer.handlers[method] = self._checked(peer.handlers[method])
        peer.listeners.append(self.on_notification)
        peer.listeners.append(self._on_cancel_request)

    def _on_cancel_request(self, note: Notification) -> None:
        """``$/cancel_request`` naming a permission request we still hold (its user has not
        answered): withdraw it.  Support is optional (cancellation.mdx); a client that acts on it
        answers the request once, here with -32800 (Request Cancelled)."""
        if note.method != "$/cancel_request" or not isinstance(note.params, dict) or self._endpoint is None:
            return
        rid = note.params.get("requestId")
        for call in self._endpoint.permission_calls:
            if call.outcome is None and same_id(call.request.id, rid):
                self.peer.start_soon(self.withdraw_permission, call)

    async def withdraw_permission(self, call: PermissionCall) -> None:
        """Answer a permission request the agent cancelled with ``$/cancel_request``."""
        await self.endpoint.refuse_permission(call, ErrorCode.REQUEST_CANCELLED, "request cancelled")

    def _checked(self, handler: Any) -> Any:
        async def checked(req: Request) -> Any:
            self.check_params(req)
            return await handler(req)

        return checked

    def check_params(self, req: Request) -> None:
        """-32602 for params that break the schema's required members (``mock_client.strict``)."""
        check_params(req)

    async def handle_permission(self, req: Request, default: Any) -> Any:
        """Answer ``session/request_permission`` (the endpoint applies the policy)."""
        return await default(req)

    async def handle_read(self, req: Request) -> Any:
        """``fs/read_text_file`` from the session directory (``ClientEndpoint``'s sandbox)."""
        return await self._fs_read(req)

    async def handle_write(self, req: Request) -> Any:
        """``fs/write_text_file`` into the session directory."""
        return await self._fs_write(req)

    def _terminal_handler(self, name: str) -> Any:
        async def handler(req: Request) -> Any:
            if not self.options.capabilities.terminal:
                self.peer.flag(
                    "term.gated", f"agent called {req.method} although terminal was not advertised", about=req
                )
                raise HandlerError(ErrorCode.METHOD_NOT_FOUND, f"{req.method} is not supported by this client")
            params = req.params if isinstance(req.params, dict) else {}
            return await self.terminal_call(name, params)

        return handler

    async def terminal_call(self, name: str, params: dict[str, Any]) -> Any:
        assert self.terminals is not None
        if name == "create":
            return await self.terminals.create(params)
        tid = params.get("terminalId")
        if name == "output":
            return await self.terminals.output(tid)
        if name == "wait_for_exit":
            return await self.terminals.wait_for_exit(tid)
        if name == "kill":
            return await self.terminals.kill(tid)
        return await self.terminals.release(tid)

    def on_notification(self, note: Notification) -> None:
        if note.method != "session/update" or not isinstance(note.params, dict):
            return
        update = note.params.get("update")
        if not isinstance(update, dict) or update.get("sessionUpdate") != "agent_message_chunk":
            return
        content = update.get("content")
        if isinstance(content, dict) and isinstance(content.get("text"), str) and not self.options.quiet:
            print(f"agent: {content['text']}", flush=True)

    # ------------------------------------------------------------- messages
    def initialize_params(self) -> dict[str, Any]:
        return {
            "protocolVersion": SUPPORTED_VERSION,
            "clientCapabilities": self.options.capabilities.to_wire(),
            "clientInfo": self.endpoint.client_info,
        }

    def session_params(self) -> dict[str, Any]:
        params: dict[str, Any] = {"cwd": self.cwd, "mcpServers": []}
        # session-setup.mdx § Additional Workspace Roots: only when advertised, absolute paths.
        if self.options.add_dirs and self.endpoint.agent_supports("sessionCapabilities.additionalDirectories"):
            params["additionalDirectories"] = [str(Path(d).resolve()) for d in self.options.add_dirs]
        return params

    def prompt_blocks(self, text: str) -> list[dict[str, Any]]:
        return [{"type": "text", "text": text}, *(self.attachment(path) for path in self.options.attach)]

    def attachment(self, path: str) -> dict[str, Any]:
        """content.mdx: an image block carries its bytes base64-encoded; it goes only to an agent
        whose promptCapabilities.image is true, else the file is linked."""
        file = Path(path).resolve()
        mime = mimetypes.guess_type(file.name)[0] or "application/octet-stream"
        if mime.startswith("image/") and self.endpoint.agent_supports("promptCapabilities.image"):
            return {"type": "image", "mimeType": mime, "data": base64.b64encode(file.read_bytes()).decode("ascii")}
        return {"type": "resource_link", "uri": file.as_uri(), "name": file.name, "mimeType": mime}

    def auth_method(self) -> str | None:
        """The first advertised method this client drives with ``authenticate``: an agent method, and
        one without a type is one (authentication.mdx); a terminal method never."""
        for method in (self.endpoint.init_result or {}).get("authMethods") or []:
            if isinstance(method, dict) and method.get("type", "agent") == "agent":
                return str(method.get("id"))
        return None

    def continue_params(self, session_id: str) -> dict[str, Any]:
        params = {"sessionId": session_id, **self.session_params()}
        return params

    def cancel_params(self, session_id: str) -> dict[str, Any]:
        return {"sessionId": session_id}

    # ----------------------------------------------------------------- flow
    async def initialize(self) -> bool:
        """``initialize``; False (and the connection is dropped) on a version we do not speak."""
        result = await self.peer.request("initialize", self.initialize_params())
        self.endpoint.init_result = result if isinstance(result, dict) else {}
        self.report["initialize"] = self.endpoint.init_result
        version = self.endpoint.init_result.get("protocolVersion")
        if version != SUPPORTED_VERSION:
            self.fail(
                f"the agent answered protocol version {version!r}; this client supports only "
                f"{SUPPORTED_VERSION}: disconnecting"
            )
            return False
        return True

    async def authenticated(self, method: str, params: dict[str, Any]) -> Any:
        """``method`` with ``params``; on auth_required (-32000), authenticate once and try again."""
        try:
            return await self.peer.request(method, params)
        except RpcError as exc:
            if exc.code != ErrorCode.AUTH_REQUIRED or not self.options.authenticate:
                raise
            method_id = self.auth_method()
            if method_id is None:
                self.fail("the agent requires authentication and offers no agent method this client can drive")
                raise
            await self.peer.request("authenticate", {"methodId": method_id})
            return await self.peer.request(method, params)

    async def list_sessions(self) -> list[dict[str, Any]]:
        """Every page of ``session/list`` for our cwd, following nextCursor exactly as sent."""
        if not self.endpoint.agent_supports("sessionCapabilities.list"):
            self.fail("--list-sessions: the agent does not advertise sessionCapabilities.list")
            return []
        listed: list[dict[str, Any]] = []
        params: dict[str, Any] = {"cwd": self.cwd}
        for _ in range(1000):  # a bound, not a limit any real listing meets
            result = await self.authenticated("session/list", params)
            page = result if isinstance(result, dict) else {}
            listed += [s for s in page.get("sessions") or [] if isinstance(s, dict)]
            cursor = page.get("nextCursor")
            if not isinstance(cursor, str):
                break  # no nextCursor: the last page (session-list.mdx)
            params = {"cwd": self.cwd, "cursor": cursor}
        if not self.options.quiet:
            for info in listed:
                print(f"session {info.get('sessionId')}: {info.get('title') or ''}", flush=True)
        self.report["sessions"] = listed
        return listed

    async def continue_session(self, session_id: str) -> str:
        """session/load where the agent can load, else session/resume (session-setup.mdx)."""
        if self.endpoint.agent_supports("loadSession"):
            await self.authenticated("session/load", self.continue_params(session_id))
        elif self.endpoint.agent_supports("sessionCapabilities.resume"):
            await self.authenticated("session/resume", self.continue_params(session_id))
        else:
            raise RpcError("session/load", None, "the agent can neither load nor resume sessions")
        self.endpoint.sessions[session_id] = {}
        self.session_id = session_id
        return session_id

    async def apply_choices(self, session_id: str) -> None:
        """The user's mode and config choices: what they pick by name goes on the wire by id
        (session-modes.mdx: a modeId of availableModes; a select option's value)."""
        session = self.endpoint.sessions.get(session_id) or {}
        if self.options.set_mode is not None:
            modes = (session.get("modes") or {}).get("availableModes") or []
            mode = next((m for m in modes if self.options.set_mode in (m.get("id"), m.get("name"))), None)
            if mode is None:
                self.fail(f"--set-mode: the session has no mode {self.options.set_mode!r}")
            else:
                await self.set_mode(session_id, mode)
        if self.options.set_config is not None:
            wanted, _, choice = self.options.set_config.partition("=")
            options = session.get("configOptions") or []
            option = next((o for o in options if wanted in (o.get("id"), o.get("name"))), None)
            values = select_choices(option) if option is not None else []
            value = next((v for v in values if choice in (v.get("value"), v.get("name"))), None)
            if option is None or value is None:
                self.fail(f"--set-config: the session has no option {wanted!r} with a choice {choice!r}")
            else:
                await self.set_config(session_id, option, value)

    async def set_mode(self, session_id: str, mode: dict[str, Any]) -> None:
        await self.peer.request("session/set_mode", {"sessionId": session_id, "modeId": mode.get("id")})

    async def set_config(self, session_id: str, option: dict[str, Any], value: dict[str, Any]) -> None:
        params = {"sessionId": session_id, "configId": option.get("id"), "value": value.get("value")}
        await self.peer.request("session/set_config_option", params)

    async def new_session(self) -> str:
        result = await self.authenticated("session/new", self.session_params())
        if not isinstance(result, dict) or not isinstance(result.get("sessionId"), str):
            raise RpcError("session/new", None, f"result carries no string sessionId: {result!r}")
        sid: str = result["sessionId"]
        self.endpoint.sessions[sid] = result
        self.session_id = sid
        return sid

    async def run_turn(self, session_id: str, text: str) -> dict[str, Any]:
        blocks = self.prompt_blocks(text)
        rid = await self.peer.send_request("session/prompt", {"sessionId": session_id, "prompt": blocks})
        self.endpoint.note_prompt(session_id, rid)
        self.current_turn = rid
        try:
            resp = await self.peer.wait_response(rid, method="session/prompt", timeout=self.options.timeout)
        finally:
            self.current_turn = None
            self.endpoint.cancelled_sessions.discard(session_id)
        record: dict[str, Any] = {"prompt": text}
        if resp.is_error:
            record["error"] = resp.error
            self.fail(f"the prompt failed: {resp.error!r}")
        else:
            record["stopReason"] = resp.result.get("stopReason") if isinstance(resp.result, dict) else None
            if not self.options.quiet:
                print(f"[turn ended: {record['stopReason']}]", flush=True)
        self.report["turns"].append(record)
        return record

    async def cancel_turn(self) -> None:
        """Cancel the running turn: ``session/cancel``, then answer every pending
        permission request of the session with ``cancelled``."""
        sid = self.session_id
        if sid is None or self.current_turn is None:
            return
        self.endpoint.mark_cancelled(sid)
        await self.send_cancel(sid)
        await self.answer_pending_permissions(sid)

    async def send_cancel(self, session_id: str) -> None:
        await self.peer.notify("session/cancel", self.cancel_params(session_id))

    async def answer_pending_permissions(self, session_id: str) -> None:
        for call in self.endpoint.permission_calls:
            if call.session_id == session_id and call.outcome is None:
                await self.endpoint.answer_permission(call, {"outcome": "cancelled"})

    def fail(self, message: str) -> None:
        self.report["errors"].append(message)
        log.error("%s", message)

    async def _sigint(self) -> None:
        with anyio.open_signal_receiver(signal.SIGINT) as signals:
            async for _ in signals:
                if self.current_turn is not None:
                    log.info("SIGINT: cancelling the running turn")
                    await self.cancel_turn()
                elif self._main_scope is not None:
                    self._main_scope.cancel()

    async def _stdin_lines(self) -> list[str] | None:
        line = await anyio.to_thread.run_sync(sys.stdin.readline, abandon_on_cancel=True)
        if not line:
            return None
        return [line.rstrip("\n")]

    async def session_flow(self) -> int:
        if not await self.initialize():
            return 1
        if self.options.list_sessions:
            await self.list_sessions()
        if self.options.continue_session is not None:
            sid = await self.continue_session(self.options.continue_session)
        else:
            sid = await self.new_session()
        await self.apply_choices(sid)
        for text in self.options.prompts:
            record = await self.run_turn(sid, text)
            if "error" in record:
                return 1
        if self.options.stdin_prompts:
            while (lines := await self._stdin_lines()) is not None:
                for text in lines:
                    if text.strip():
                        await self.run_turn(sid, text)
        return 0

    async def run(self) -> int:
        code = 130
        try:
            async with self.spawn_agent() as transport:
                self._peer = self.make_peer(transport)
                self._endpoint = self.make_endpoint(self._peer)
                self.install_handlers(self._peer)
                async with self._peer:
                    self._peer.start_soon(self._sigint)
                    with anyio.CancelScope() as scope:
                        self._main_scope = scope
                        code = await self.session_flow()
                    if self.terminals is not None:
                        await self.terminals.close_all()
                    await transport.close_output()
                    await transport.wait_exit(2.0)
        except PeerExited as exc:
            self.fail(f"the agent exited: {exc.message}")
            code = 1
        except AcpError as exc:
            self.fail(str(exc))
            code = 1
        finally:
            self.record_report()
        return code

    def spawn_agent(self) -> AbstractAsyncContextManager[ProcessTransport]:
        """Start the agent process (stderr drained line by line into the report)."""
        return spawn(self.options.agent, cwd=self.cwd, on_stderr=self.on_agent_stderr)

    def on_agent_stderr(self, line: str) -> None:
        self.report["agent_stderr"].append(line)
        if len(self.report["agent_stderr"]) > 200:
            del self.report["agent_stderr"][:100]

    def record_report(self) -> None:
        if self._endpoint is not None:
            self.report["permissions"] = [
                {
                    "options": [
                        o.get("optionId") for o in (c.request.params or {}).get("options", []) if isinstance(o, dict)
                    ],
                    "outcome": c.outcome,
                }
                for c in self._endpoint.permission_calls
            ]
        if self._peer is not None:
            self.report["agent_violations"] = [
                {"clause": v.clause_id, "message": v.message} for v in self._peer.violations()
            ]
        if self.options.report:
            Path(self.options.report).write_bytes(orjson.dumps(self.report, option=orjson.OPT_INDENT_2))


def _version() -> str:
    from acp_conformance import __version__

    return __version__
