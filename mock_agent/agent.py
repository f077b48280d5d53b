"""``MockAgent``: the reference agent, built to be subclassed into broken ones.

The agent is a ``Peer`` in the agent role plus handlers.  Everything it
sends is produced by one small method (a *builder* that returns a dict, or
a *step* that sends something), so a broken test agent overrides exactly
the method whose behaviour it wants to get wrong::

    class WrongVersionAgent(MockAgent):
        def negotiate_version(self, requested: Any) -> int:
            return 2

    class BannerAgent(MockAgent):
        async def on_start(self) -> None:
            await self.peer.send_raw(b"Welcome to my agent!\\n")

    class NoCancelAgent(MockAgent):
        def stop_reason(self, turn: Turn, proposed: str) -> str:
            return "end_turn" if proposed == "cancelled" else proposed

Outbound requests and notifications are validated against the schema when
a validator is given (``LocalProtocolError`` on a bad one); results are
self-checked too.  A subclass that means to send invalid frames sets
``validate_outbound = False`` (or uses ``self.peer.send_raw``).
"""

from __future__ import annotations

import functools
import logging
import os
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import anyio

from acp_conformance import __version__ as PACKAGE_VERSION
from acp_conformance.checks.gating import elicitation_modes
from acp_conformance.core import jsonrpc
from acp_conformance.core.connection import Role
from acp_conformance.core.events import Notification, Request, Response, Violation
from acp_conformance.errors import LocalProtocolError, PeerExited, PeerTimeout
from acp_conformance.peer import NO_ANSWER, HandlerError, Peer
from acp_conformance.prompts import dictated_steps
from acp_conformance.transcript import Direction, Entry, Transcript
from acp_conformance.transport.base import Transport

if TYPE_CHECKING:
    from acp_conformance.schema.validator import SchemaValidator

__all__ = [
    "CLIENT_REQUEST_TIMEOUT",
    "PROBE_CONTENT",
    "PROBE_FILE",
    "AgentPeer",
    "ClientCaps",
    "MockAgent",
    "Session",
    "Turn",
]

log = logging.getLogger("mock_agent")

ErrorCode = jsonrpc.ErrorCode
Json = dict[str, Any]

AGENT_NAME = "acp-conformance-mock-agent"
PROTOCOL_VERSION = 1
#: Name of the file the tool turn writes inside the session cwd.
PROBE_FILE = "acp-probe.txt"
PROBE_CONTENT = "hello from the mock agent\n"
#: Deadline for an ordinary client request (fs, terminal) made during a turn.
CLIENT_REQUEST_TIMEOUT = 30.0

CANCELLED = "cancelled"
END_TURN = "end_turn"
_BLOCK_TYPES = ("text", "image", "audio", "resource", "resource_link")


@functools.lru_cache(maxsize=1)
def _iso_second(second: int) -> str:
    return datetime.fromtimestamp(second, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


# --------------------------------------------------------------------------- peer
class AgentLog(Transcript):
    """Transcript that reports every client violation on stderr and keeps only recent frames.

    A mock agent may live for a whole suite or benchmark run; its transcript
    must not grow without bound (it keeps the last ``keep``..``2*keep`` entries).
    """

    # Nothing reads these entries but the violation log's context (the frame a violation is
    # about is always among the newest): 100 is plenty, and 2,000-4,000 whole frames cost
    # ~3 MiB of RSS in a 10,000-update stream (bench/README.md).
    def __init__(self, label: str = "", keep: int = 100, *, keeps_sent: bool = False) -> None:
        super().__init__(label)
        self.keep = keep
        #: Whether what the agent sent is kept decoded (``MockAgent.log_keeps_sent``); if not,
        #: each written frame stays bytes.
        self.keeps_sent = keeps_sent

    def add(self, direction: Direction, raw: bytes | str, message: Any = None) -> Entry:
        # Not the base class's bookkeeping: its head / tail / first-of-each-kind policy bounds a
        # transcript that is evidence, and this one keeps the newest 100 entries only (part of
        # the round-trip savings in bench/README.md, item 11).
        entry = Entry(self._now(), direction, raw, message)
        entries = self.entries
        entries.append(entry)
        if len(entries) > 2 * self.keep:
            del entries[: len(entries) - self.keep]
        return entry

    def violation(self, v: Violation, entry: Entry | None = None) -> None:
        super().violation(v, entry)
        log.warning("client violation [%s] %s", v.clause_id, v.message)


class AgentPeer(Peer):
    """``Peer`` in the agent role that answers unparseable lines as JSON-RPC asks (``AnsweringConnection``)."""

    def __init__(
        self,
        transport: Transport,
        *,
        validator: SchemaValidator | None = None,
        transcript: Transcript | None = None,
        timeout: float = CLIENT_REQUEST_TIMEOUT,
    ) -> None:
        super().__init__(
            transport,
            Role.AGENT,
            validator=validator,
            transcript=transcript if transcript is not None else AgentLog("mock-agent"),
            timeout=timeout,
            strict=True,
        )


# -------------------------------------------------------------------------- state
@dataclass(frozen=True)
class ClientCaps:
    """The client capabilities that matter to the agent (omitted = false)."""

    read_text_file: bool = False
    write_text_file: bool = False
    terminal: bool = False
    raw: Json = field(default_factory=dict)

    @classmethod
    def from_wire(cls, caps: Any) -> ClientCaps:
        if not isinstance(caps, dict):
            return cls()
        fs = caps.get("fs")
        fs = fs if isinstance(fs, dict) else {}
        return cls(
            read_text_file=fs.get("readTextFile") is True,
            write_text_file=fs.get("writeTextFile") is True,
            terminal=caps.get("terminal") is True,
            raw=caps,
        )


class History:
    """The updates of a conversation, for ``session/load`` replay, kept as JSON bytes.

    A dict per update costs ~4x its JSON in memory, and a long benchmark or suite
    turn sends 10,000 of them: as bytes, a 10,000-update history is ~2.5 MiB, not
    ~10.  Iterating yields fresh dicts (a replay cannot alter what was recorded).
    """

    __slots__ = ("_frames",)

    def __init__(self) -> None:
        self._frames: list[bytes] = []

    def append(self, update: Json) -> None:
        # A copy: orjson's bytes keep their 4 KiB working buffer (measured with
        # tracemalloc), which would make the history 4x *bigger* than the dicts.
        self._frames.append(bytes(memoryview(jsonrpc.dumps(update))))

    def clear(self) -> None:
        self._frames.clear()

    def __len__(self) -> int:
        return len(self._frames)

    def __iter__(self) -> Iterator[Json]:
        for data in list(self._frames):
            value: Json = jsonrpc.decode(data)[0]
            yield value


@dataclass
class Session:
    """One conversation, kept in memory for the life of the process."""

    id: str
    cwd: str
    mcp_servers: list[Any]
    mode_id: str = "ask"
    config: dict[str, str] = field(default_factory=lambda: {"model": "fast"})
    #: Every conversation update in order, for replay.
    history: History = field(default_factory=History)
    title: str | None = None
    updated_at: str = ""
    turn: Turn | None = None
    allow_always: bool = False
    tool_seq: int = 0
    message_seq: int = 0
    #: Inbound frame index of a ``session/cancel`` that found no turn running.  A prompt received
    #: before it whose handler had not started yet is still cancelled by it (see ``handle_prompt``).
    idle_cancel_at: int | None = None

    def next_tool_call_id(self) -> str:
        self.tool_seq += 1
        return f"call_{self.tool_seq:03d}"

    def next_message_id(self, kind: str) -> str:
        self.message_seq += 1
        return f"{self.id}-{kind}-{self.message_seq}"


@dataclass
class Turn:
    """One running prompt turn."""

    session: Session
    request_id: Any
    prompt: list[Json]
    text: str
    #: Terminals created by this turn and not yet released.
    terminals: list[str] = field(default_factory=list)
    #: Pending client waits: (cancel scope, grace) shortened when the turn is cancelled.
    waits: list[tuple[anyio.CancelScope, float]] = field(default_factory=list)
    reason: str = ""
    # The two events are made when first asked for: most turns are neither cancelled nor
    # awaited, and two events a prompt were a measurable share of a round trip (bench/README.md).
    _cancel_event: anyio.Event | None = field(default=None, repr=False)
    _done: anyio.Event | None = field(default=None, repr=False)
    _finished: bool = field(default=False, repr=False)

    @property
    def session_id(self) -> str:
        return self.session.id

    @property
    def cancel_event(self) -> anyio.Event:
        """Set once the turn is cancelled (``cancel``)."""
        if self._cancel_event is None:
            self._cancel_event = anyio.Event()
        return self._cancel_event

    @cancel_event.setter
    def cancel_event(self, event: anyio.Event) -> None:
        self._cancel_event = event

    @property
    def done(self) -> anyio.Event:
        """Set once the turn's response is sent (``finish``)."""
        if self._done is None:
            self._done = anyio.Event()
            if self._finished:
                self._done.set()
        return self._done

    def finish(self) -> None:
        self._finished = True
        if self._done is not None:
            self._done.set()

    @property
    def cancelled(self) -> bool:
        return self._cancel_event is not None and self._cancel_event.is_set()

    def cancel(self, reason: str) -> None:
        if self.cancelled:
            return
        self.reason = reason
        self.cancel_event.set()
        now = anyio.current_time()
        for scope, grace in self.waits:
            # session/cancel: the client answers our pending permission requests (it MUST), so
            # they get a grace period.  $/cancel_request cancels the request itself: its nested
            # requests are withdrawn at once (cancellation.mdx: "MAY cancel ... all nested activities").
            scope.deadline = min(scope.deadline, now + (0.0 if reason == "$/cancel_request" else grace))


# -------------------------------------------------------------------------- agent
#: The prompt keywords that pick a turn's script (the mock agent's whole interface to a test):
#: (keyword, script, what the turn does), first match wins; any other prompt is the default turn.
#: ``python -m mock_agent --help`` lists them from here.
PROMPT_KEYWORDS: tuple[tuple[str, str, str], ...] = (
    ("acp:refuse", "refuse", "one message chunk, then stopReason refusal"),
    ("acp:max-tokens", "max_tokens", "one message chunk, then stopReason max_tokens"),
    ("acp:max-turn-requests", "max_turn_requests", "one message chunk, then stopReason max_turn_requests"),
    ("acp:long", "long", "ticks, then waits for session/cancel (ends cancelled; end_turn after 60 s)"),
    ("acp:tool", "tool", "a tool call, a permission request, then fs / terminal use as allowed"),
    ("acp:plan", "plan", "a plan of the steps after the prompt's last colon (';'-separated), updated as each runs"),
    ("acp:elicit-url", "elicit_url", "a URL elicitation/create (elicitation.url advertised), completed once accepted"),
    ("acp:elicit", "elicit", "a form elicitation/create if the client advertises elicitation.form, else text"),
    ("use a tool", "tool", "the same as acp:tool"),
)


class MockAgent:
    """A deterministic, conforming ACP v1 agent; subclass it to break one thing.

    Overridable surface, by area (each is one small method):

    * lifecycle: ``make_peer``, ``install_handlers``, ``on_start``, ``on_eof``;
    * initialize: ``negotiate_version``, ``agent_capabilities``, ``agent_info``,
      ``auth_methods``, ``initialize_result``;
    * sessions: ``new_session_id``, ``create_session``, ``modes_state``,
      ``config_options``, ``new_session_result``, ``replay_history``,
      ``load_session_result``, ``resume_session_result``, ``session_info``,
      ``list_sessions_result``, ``close_session``;
    * modes/config: ``mode_update``, ``config_option_update``;
    * prompt turn: ``choose_scenario``, ``prompt_turn`` and the scenario steps
      ``turn_default``, ``turn_tool``, ``turn_long``, ``turn_refuse``,
      ``turn_max_tokens``, ``turn_max_turn_requests``; building blocks
      ``thought_text``, ``plan_entries``, ``reply_chunks``, ``tool_call``,
      ``permission_options``, ``request_permission``, ``run_tool``,
      ``write_probe``, ``read_probe``, ``run_terminal``, ``release_terminal``;
      the end: ``stop_reason``, ``prompt_result``, ``after_prompt_response``;
    * sending: ``send_update`` (every ``session/update``), ``emit`` (record +
      send), ``message_chunk``, ``client_request`` (every agent->client
      request, with deadline and cancel grace);
    * gating: ``can_read_files``, ``can_write_files``, ``can_use_terminal``;
    * notifications: ``on_cancel``, ``on_cancel_request``, ``on_other_notification``.
    """

    #: Validate everything we send (requests/notifications by the Peer, results here).
    validate_outbound: bool = True
    #: How long a permission request may stay unanswered (no cancel) before the tool fails.
    permission_timeout: float = 60.0
    #: After a cancel, how long we still wait for an answer to a pending request.
    cancel_grace: float = 5.0
    #: How long ``acp:long`` waits for a cancel before ending the turn itself.
    long_turn_seconds: float = 60.0
    #: Number of "tick N" chunks a long turn streams before it waits.
    long_turn_ticks: int = 3
    #: How long stdin EOF / session/close wait for running turns to wind down.
    shutdown_grace: float = 7.0

    #: The method id ``--require-auth`` advertises (type ``agent``: handled by ``authenticate``).
    AUTH_METHOD_ID = "token"
    #: Requests refused with -32000 until ``authenticate`` succeeded, when authentication is required.
    AUTH_GATED = frozenset({"session/new", "session/load", "session/resume", "session/list"})

    def __init__(
        self,
        *,
        name: str = AGENT_NAME,
        validator: SchemaValidator | None = None,
        version: str = PACKAGE_VERSION,
        require_auth: bool = False,
    ) -> None:
        self.name = name
        self.version = version
        self.validator = validator
        #: ``--require-auth``: advertise one auth method and ``auth.logout``, and refuse the
        #: ``AUTH_GATED`` requests with -32000 (auth_required) until ``authenticate`` succeeded.
        #: Exists so the suite's authenticate/logout checks have a conforming agent to pass on.
        self.require_auth = require_auth
        self.authenticated = False
        self.client_caps = ClientCaps()
        #: URL elicitations sent on this connection (their ids are numbered from it).
        self.elicitation_count = 0
        self.client_info: Any = None
        self.initialized = False
        self.sessions: dict[str, Session] = {}
        self._session_seq = 0
        self._turns_by_request: dict[tuple[str, Any], Turn] = {}
        self._notification_index = -1
        self._peer: Peer | None = None
        self._warned_uninitialized = False

    # ---------------------------------------------------------------- lifecycle
    @property
    def peer(self) -> Peer:
        """The connection (available once ``serve`` has started)."""
        if self._peer is None:
            raise RuntimeError("MockAgent.peer is only available while serve() runs")
        return self._peer

    #: Whether the agent's log keeps what it sent decoded (``AgentLog``): the reference agent reads
    #: none of it; a scenario agent's passive checks judge the client's answers against it.
    log_keeps_sent = False

    def make_peer(self, transport: Transport) -> Peer:
        log = AgentLog("mock-agent", keeps_sent=self.log_keeps_sent)
        return AgentPeer(transport, validator=self.validator, transcript=log)

    def install_handlers(self, peer: Peer) -> None:
        handlers: dict[str, Callable[[Request], Awaitable[Any]]] = {
            "initialize": self.handle_initialize,
            "authenticate": self.handle_authenticate,
            "session/new": self.handle_new_session,
            "session/load": self.handle_load_session,
            "session/resume": self.handle_resume_session,
            "session/list": self.handle_list_sessions,
            "session/close": self.handle_close_session,
            "session/delete": self.handle_delete_session,
            "session/set_mode": self.handle_set_mode,
            "session/set_config_option": self.handle_set_config_option,
            "session/prompt": self.handle_prompt,
        }
        if self.require_auth:
            handlers["logout"] = self.handle_logout
        for method, fn in handlers.items():
            peer.handlers[method] = self._guarded(method, fn)
        peer.listeners.append(self._on_notification)

    async def serve(self, transport: Transport) -> None:
        """Serve one connection until the client closes its output (EOF)."""
        peer = self.make_peer(transport)
        self._peer = peer
        self.install_handlers(peer)
        try:
            async with peer:
                await self.on_start()
                await peer.closed.wait()
                log.info("stdin closed; shutting down")
                await self.on_eof()
        finally:
            try:
                await transport.close_output()
            except Exception:  # the other side may be long gone
                pass

    async def on_start(self) -> None:
        """Called once the connection is up, before anything is read.  No-op."""

    async def on_eof(self) -> None:
        """The client closed our stdin: cancel running turns, let them finish briefly."""
        turns = [s.turn for s in self.sessions.values() if s.turn is not None]
        for turn in turns:
            turn.cancel("stdin closed")
        with anyio.move_on_after(self.shutdown_grace):
            for turn in turns:
                await turn.done.wait()

    # ------------------------------------------------------------------ helpers
    def _guarded(self, method: str, fn: Callable[[Request], Awaitable[Any]]) -> Callable[[Request], Awaitable[Any]]:
        """Turn unexpected exceptions into -32603 and self-check results."""

        async def handler(req: Request) -> Any:
            if method != "initialize" and not self.initialized and not self._warned_uninitialized:
                self._warned_uninitialized = True
                log.warning("%s received before initialize; serving it with default capabilities", method)
            if self.require_auth and not self.authenticated and method in self.AUTH_GATED:
                raise HandlerError(ErrorCode.AUTH_REQUIRED, f"{method}: authentication required")
            try:
                result = await fn(req)
            except HandlerError:
                raise
            except PeerExited:
                return NO_ANSWER
            except Exception as exc:
                log.exception("internal error while handling %s", method)
                raise HandlerError(ErrorCode.INTERNAL_ERROR, _short(f"internal error: {exc!r}")) from None
            if result is NO_ANSWER:
                return result
            self.check_result(method, result)
            return result

        return handler

    def check_result(self, method: str, result: Any) -> None:
        """Refuse (with -32603) to send a result the schema rejects."""
        if not self.validate_outbound or self.validator is None:
            return
        issues = self.validator.check_result(method, result)
        if issues:
            i = issues[0]
            log.error("refusing to send an invalid %s result: %s at %s", method, i.message, i.path or "/")
            raise HandlerError(
                ErrorCode.INTERNAL_ERROR,
                _short(f"the agent produced an invalid {method} result: {i.message}"),
            )

    @staticmethod
    def params_of(req: Request, *, optional: bool = False) -> Json:
        """The params object, or -32602."""
        params = req.params
        if not req.has_params and optional:
            # Omitted params may default; an explicit ``"params": null`` is no object: -32602.
            return {}
        if not isinstance(params, dict):
            raise HandlerError(ErrorCode.INVALID_PARAMS, f"{req.method} params must be an object")
        return params

    @staticmethod
    def _string(params: Json, key: str, method: str) -> str:
        value = params.get(key)
        if not isinstance(value, str):
            what = "missing" if key not in params else f"a {type(value).__name__}"
            raise HandlerError(ErrorCode.INVALID_PARAMS, f"{method}: {key} must be a string ({what})")
        return value

    def _absolute_cwd(self, params: Json, method: str) -> str:
        cwd = self._string(params, "cwd", method)
        if not os.path.isabs(cwd):
            raise HandlerError(ErrorCode.INVALID_PARAMS, _short(f"{method}: cwd must be an absolute path, got {cwd!r}"))
        return cwd

    def _mcp_servers(self, params: Json, method: str, *, required: bool = True) -> list[Any]:
        if "mcpServers" not in params and not required:
            return []
        servers = params.get("mcpServers")
        if servers is None and "mcpServers" in params:
            return []  # x-deserialize-default-on-null
        if not isinstance(servers, list):
            raise HandlerError(ErrorCode.INVALID_PARAMS, f"{method}: mcpServers must be an array")
        caps = self.agent_capabilities().get("mcpCapabilities", {})
        for i, server in enumerate(servers):
            if not isinstance(server, dict):
                raise HandlerError(ErrorCode.INVALID_PARAMS, f"{method}: mcpServers[{i}] must be an object")
            kind = server.get("type", "stdio")
            if kind in ("http", "sse"):
                if not caps.get(kind):
                    raise HandlerError(
                        ErrorCode.INVALID_PARAMS,
                        f"{method}: mcpServers[{i}] uses the {kind} transport, which this agent does not "
                        f"support (mcpCapabilities.{kind} is false)",
                    )
            elif kind != "stdio":
                raise HandlerError(
                    ErrorCode.INVALID_PARAMS, _short(f"{method}: mcpServers[{i}] has unknown type {kind!r}")
                )
            for key in ("name", "command") if kind == "stdio" else ("name", "url"):
                if not isinstance(server.get(key), str):
                    raise HandlerError(ErrorCode.INVALID_PARAMS, f"{method}: mcpServers[{i}].{key} must be a string")
            for key in ("args", "env", "headers"):
                if server.get(key) is not None and not isinstance(server.get(key), list):
                    raise HandlerError(ErrorCode.INVALID_PARAMS, f"{method}: mcpServers[{i}].{key} must be an array")
        return servers

    def unknown_session(self, session_id: Any, code: int = ErrorCode.RESOURCE_NOT_FOUND) -> HandlerError:
        return HandlerError(code, _short(f"session not found: {session_id!r}"), {"sessionId": session_id})

    def find_session(self, params: Json, method: str, code: int = ErrorCode.RESOURCE_NOT_FOUND) -> Session:
        session_id = self._string(params, "sessionId", method)
        session = self.sessions.get(session_id)
        if session is None:
            raise self.unknown_session(session_id, code)
        return session

    @staticmethod
    def now() -> str:
        """The current second as ``updatedAt`` wants it; formatted once per second, since every
        prompt asks twice (strftime was a visible share of a round trip's CPU)."""
        return _iso_second(int(time.time()))

    # ----------------------------------------------------------------- gating
    def can_read_files(self) -> bool:
        return self.client_caps.read_text_file

    def can_write_files(self) -> bool:
        return self.client_caps.write_text_file

    def can_use_terminal(self) -> bool:
        return self.client_caps.terminal

    # ------------------------------------------------------------- initialize
    async def handle_initialize(self, req: Request) -> Any:
        params = self.params_of(req)
        requested = params.get("protocolVersion")
        if not (isinstance(requested, int) and not isinstance(requested, bool) and 0 <= requested <= 65535):
            raise HandlerError(
                ErrorCode.INVALID_PARAMS,
                _short(f"initialize: protocolVersion must be an integer 0..65535, got {requested!r}"),
            )
        self.client_caps = ClientCaps.from_wire(params.get("clientCapabilities"))
        self.client_info = params.get("clientInfo")
        self.initialized = True
        return self.initialize_result(params)

    def negotiate_version(self, requested: Any) -> int:
        """Echo the client's version if we support it, else our latest (only v1 here)."""
        return PROTOCOL_VERSION

    def agent_capabilities(self) -> Json:
        caps: Json = {
            "loadSession": True,
            "promptCapabilities": {"image": True, "audio": True, "embeddedContext": True},
            "mcpCapabilities": {"http": False, "sse": False},
            "sessionCapabilities": {"list": {}, "close": {}, "resume": {}, "delete": {}},
        }
        if self.require_auth:
            caps["auth"] = {"logout": {}}
        return caps

    def agent_info(self) -> Json:
        return {"name": self.name, "title": "ACP conformance mock agent", "version": self.version}

    def auth_methods(self) -> list[Json]:
        if not self.require_auth:
            return []
        return [{"id": self.AUTH_METHOD_ID, "name": "Token", "description": "Accepts anyone (a test double)"}]

    def initialize_result(self, params: Json) -> Json:
        return {
            "protocolVersion": self.negotiate_version(params.get("protocolVersion")),
            "agentCapabilities": self.agent_capabilities(),
            "agentInfo": self.agent_info(),
            "authMethods": self.auth_methods(),
        }

    async def handle_authenticate(self, req: Request) -> Any:
        params = self.params_of(req)
        method_id = self._string(params, "methodId", "authenticate")
        known = {m.get("id") for m in self.auth_methods()}
        if method_id not in known:
            raise HandlerError(
                ErrorCode.INVALID_PARAMS,
                _short(f"authenticate: unknown methodId {method_id!r} (advertised: {sorted(map(str, known))})"),
            )
        self.authenticated = True
        return {}

    async def handle_logout(self, req: Request) -> Any:
        """``logout`` (advertised with ``--require-auth`` only): the gated requests need
        ``authenticate`` again."""
        self.params_of(req, optional=True)
        self.authenticated = False
        return {}

    # ---------------------------------------------------------------- sessions
    def new_session_id(self) -> str:
        self._session_seq += 1
        return f"sess_{self._session_seq:03d}_{os.urandom(4).hex()}"

    def create_session(self, cwd: str, mcp_servers: list[Any], params: Json) -> Session:
        session = Session(id=self.new_session_id(), cwd=cwd, mcp_servers=mcp_servers, updated_at=self.now())
        self.sessions[session.id] = session
        return session

    MODES: tuple[tuple[str, str, str], ...] = (
        ("ask", "Ask", "Request permission before making any changes"),
        ("code", "Code", "Write and modify code with full tool access"),
    )
    MODELS: tuple[tuple[str, str, str], ...] = (
        ("fast", "Fast", "The quick (simulated) model"),
        ("smart", "Smart", "The thorough (simulated) model"),
    )

    def modes_state(self, session: Session) -> Json:
        return {
            "currentModeId": session.mode_id,
            "availableModes": [{"id": i, "name": n, "description": d} for i, n, d in self.MODES],
        }

    def config_options(self, session: Session) -> list[Json]:
        """The complete option list with current values (kept in sync with the mode)."""
        return [
            {
                "id": "model",
                "name": "Model",
                "description": "Which simulated model answers",
                "category": "model",
                "type": "select",
                "currentValue": session.config["model"],
                "options": [{"value": v, "name": n, "description": d} for v, n, d in self.MODELS],
            },
            {
                "id": "mode",
                "name": "Session Mode",
                "description": "Controls how the agent requests permission",
                "category": "mode",
                "type": "select",
                "currentValue": session.mode_id,
                "options": [{"value": v, "name": n, "description": d} for v, n, d in self.MODES],
            },
        ]

    def new_session_result(self, session: Session) -> Json:
        return {
            "sessionId": session.id,
            "modes": self.modes_state(session),
            "configOptions": self.config_options(session),
        }

    async def handle_new_session(self, req: Request) -> Any:
        params = self.params_of(req)
        cwd = self._absolute_cwd(params, "session/new")
        if "mcpServers" not in params:
            raise HandlerError(ErrorCode.INVALID_PARAMS, "session/new: mcpServers is required (may be empty)")
        servers = self._mcp_servers(params, "session/new")
        session = self.create_session(cwd, servers, params)
        log.info("session %s created in %s", session.id, cwd)
        return self.new_session_result(session)

    async def replay_history(self, session: Session) -> None:
        """Re-send the whole conversation, in order, as ``session/update``."""
        for update in list(session.history):
            await self.send_update(session.id, update)

    def load_session_result(self, session: Session) -> Json:
        return {"modes": self.modes_state(session), "configOptions": self.config_options(session)}

    async def handle_load_session(self, req: Request) -> Any:
        params = self.params_of(req)
        session_id = self._string(params, "sessionId", "session/load")
        cwd = self._absolute_cwd(params, "session/load")
        if "mcpServers" not in params:
            raise HandlerError(ErrorCode.INVALID_PARAMS, "session/load: mcpServers is required (may be empty)")
        servers = self._mcp_servers(params, "session/load")
        session = self.sessions.get(session_id)
        if session is None:
            raise self.unknown_session(session_id)
        session.cwd, session.mcp_servers = cwd, servers
        await self.replay_history(session)
        return self.load_session_result(session)

    def resume_session_result(self, session: Session) -> Json:
        return {"modes": self.modes_state(session), "configOptions": self.config_options(session)}

    async def handle_resume_session(self, req: Request) -> Any:
        params = self.params_of(req)
        session_id = self._string(params, "sessionId", "session/resume")
        cwd = self._absolute_cwd(params, "session/resume")
        servers = self._mcp_servers(params, "session/resume", required=False)
        session = self.sessions.get(session_id)
        if session is None:
            raise self.unknown_session(session_id)
        session.cwd, session.mcp_servers = cwd, servers
        return self.resume_session_result(session)

    def session_info(self, session: Session) -> Json:
        info: Json = {"sessionId": session.id, "cwd": session.cwd, "updatedAt": session.updated_at}
        if session.title is not None:
            info["title"] = session.title
        return info

    def list_sessions_result(self, sessions: list[Session]) -> Json:
        return {"sessions": [self.session_info(s) for s in sessions]}

    async def handle_list_sessions(self, req: Request) -> Any:
        params = self.params_of(req, optional=True)
        cwd = params.get("cwd")
        if cwd is not None and (not isinstance(cwd, str) or not os.path.isabs(cwd)):
            raise HandlerError(
                ErrorCode.INVALID_PARAMS, _short(f"session/list: cwd must be an absolute path, got {cwd!r}")
            )
        cursor = params.get("cursor")
        if cursor is not None:
            # We never hand out cursors (one page), so no cursor can be valid.
            raise HandlerError(ErrorCode.INVALID_PARAMS, _short(f"session/list: invalid cursor {cursor!r}"))
        sessions = [s for s in self.sessions.values() if cwd is None or s.cwd == cwd]
        return self.list_sessions_result(sessions)

    async def close_session(self, session: Session, reason: str) -> None:
        """Cancel the running turn (it answers ``cancelled``), then forget the session."""
        turn = session.turn
        if turn is not None:
            turn.cancel(reason)
            with anyio.move_on_after(self.shutdown_grace):
                await turn.done.wait()
        self.sessions.pop(session.id, None)

    async def handle_close_session(self, req: Request) -> Any:
        session = self.find_session(self.params_of(req), "session/close")
        await self.close_session(session, "session/close")
        return {}

    async def handle_delete_session(self, req: Request) -> Any:
        params = self.params_of(req)
        session_id = self._string(params, "sessionId", "session/delete")
        session = self.sessions.get(session_id)
        if session is not None:
            await self.close_session(session, "session/delete")
        return {}

    # ------------------------------------------------------------ modes/config
    def mode_update(self, session: Session) -> Json:
        return {"sessionUpdate": "current_mode_update", "currentModeId": session.mode_id}

    def config_option_update(self, session: Session) -> Json:
        return {"sessionUpdate": "config_option_update", "configOptions": self.config_options(session)}

    async def handle_set_mode(self, req: Request) -> Any:
        params = self.params_of(req)
        session = self.find_session(params, "session/set_mode", ErrorCode.INVALID_PARAMS)
        mode_id = self._string(params, "modeId", "session/set_mode")
        if mode_id not in {m[0] for m in self.MODES}:
            raise HandlerError(ErrorCode.INVALID_PARAMS, _short(f"session/set_mode: unknown modeId {mode_id!r}"))
        session.mode_id = mode_id
        await self.send_update(session.id, self.mode_update(session))
        await self.send_update(session.id, self.config_option_update(session))
        return {}

    async def handle_set_config_option(self, req: Request) -> Any:
        params = self.params_of(req)
        session = self.find_session(params, "session/set_config_option", ErrorCode.INVALID_PARAMS)
        config_id = self._string(params, "configId", "session/set_config_option")
        options = {o["id"]: o for o in self.config_options(session)}
        option = options.get(config_id)
        if option is None:
            raise HandlerError(
                ErrorCode.INVALID_PARAMS, _short(f"session/set_config_option: unknown configId {config_id!r}")
            )
        value = params.get("value")
        allowed = [o["value"] for o in option["options"]]
        if not isinstance(value, str) or value not in allowed:
            raise HandlerError(
                ErrorCode.INVALID_PARAMS,
                _short(f"session/set_config_option: {value!r} is not a value of {config_id!r} {allowed}"),
            )
        if config_id == "mode":
            session.mode_id = value
            await self.send_update(session.id, self.mode_update(session))
        else:
            session.config[config_id] = value
        return {"configOptions": self.config_options(session)}

    # -------------------------------------------------------------- sending
    async def send_update(self, session_id: str, update: Json) -> None:
        """Send one ``session/update`` notification (every update goes through here)."""
        await self.peer.notify(
            "session/update", {"sessionId": session_id, "update": update}, validate=self.validate_outbound
        )

    async def emit(self, turn: Turn, update: Json) -> None:
        """Send a conversation update and record it for ``session/load`` replay."""
        await self.send_update(turn.session_id, update)
        turn.session.history.append(update)

    def message_chunk(self, kind: str, text: str, message_id: str | None) -> Json:
        """A ``user_message_chunk`` / ``agent_message_chunk`` / ``agent_thought_chunk`` update."""
        update: Json = {"sessionUpdate": kind, "content": {"type": "text", "text": text}}
        if message_id is not None:
            update["messageId"] = message_id
        return update

    async def client_request(
        self,
        turn: Turn | None,
        method: str,
        params: Json,
        *,
        timeout: float = CLIENT_REQUEST_TIMEOUT,
        cancel_grace: float | None = None,
    ) -> Response | None:
        """Send an agent->client request and wait for its response.

        Returns ``None`` when no answer came in time: after ``timeout``, or
        ``cancel_grace`` seconds after the turn was cancelled.  An abandoned
        request is withdrawn with ``$/cancel_request``.
        """
        rid = await self.peer.send_request(method, params, validate=self.validate_outbound)
        grace = self.cancel_grace if cancel_grace is None else cancel_grace
        response: Response | None = None
        with anyio.CancelScope(deadline=anyio.current_time() + timeout) as scope:
            if turn is not None:
                if turn.cancelled:
                    scope.deadline = min(scope.deadline, anyio.current_time() + grace)
                turn.waits.append((scope, grace))
            try:
                response = await self.peer.wait_response(rid, method=method, timeout=timeout + 1.0)
            except PeerTimeout:
                response = None
            finally:
                if turn is not None:
                    turn.waits.remove((scope, grace))
        if response is None:
            why = "the turn was cancelled" if turn is not None and turn.cancelled else f"{timeout:g} s passed"
            log.info("no answer to %s (id %r): %s; withdrawing it", method, rid, why)
            try:
                await self.peer.notify("$/cancel_request", {"requestId": rid}, validate=self.validate_outbound)
            except LocalProtocolError:
                pass
        return response

    # ----------------------------------------------------------- notifications
    def _on_notification(self, note: Notification) -> None:
        params = note.params if isinstance(note.params, dict) else {}
        self._notification_index = note.index
        if note.method == "session/cancel":
            self.on_cancel(params)
        elif note.method == "$/cancel_request":
            self.on_cancel_request(params)
        else:
            self.on_other_notification(note)

    def on_cancel(self, params: Json) -> None:
        """``session/cancel``: cancel the session's running turn; ignore anything else."""
        session_id = params.get("sessionId")
        session = self.sessions.get(session_id) if isinstance(session_id, str) else None
        if session is not None and session.turn is not None:
            session.turn.cancel("session/cancel")
        elif session is not None:
            # No turn yet, but a session/prompt read just before this cancel may not have reached
            # its handler (handlers start as tasks): that prompt must still end ``cancelled``.
            session.idle_cancel_at = self._notification_index

    def on_cancel_request(self, params: Json) -> None:
        """``$/cancel_request`` for a pending ``session/prompt``: cancel that turn."""
        rid = params.get("requestId")
        if not jsonrpc.is_valid_id(rid) or "requestId" not in params:
            return
        turn = self._turns_by_request.get(jsonrpc.id_key(rid))
        if turn is not None:
            turn.cancel("$/cancel_request")

    def on_other_notification(self, note: Notification) -> None:
        log.debug("ignoring notification %s", note.method)

    # -------------------------------------------------------------- prompt
    def _check_prompt(self, prompt: Any) -> list[Json]:
        if not isinstance(prompt, list):
            raise HandlerError(ErrorCode.INVALID_PARAMS, "session/prompt: prompt must be an array of content blocks")
        for i, block in enumerate(prompt):
            where = f"session/prompt: prompt[{i}]"
            if not isinstance(block, dict):
                raise HandlerError(ErrorCode.INVALID_PARAMS, f"{where} must be an object")
            kind = block.get("type")
            if kind not in _BLOCK_TYPES:
                raise HandlerError(ErrorCode.INVALID_PARAMS, _short(f"{where} has unknown type {kind!r}"))
            required = {
                "text": ("text",),
                "image": ("data", "mimeType"),
                "audio": ("data", "mimeType"),
                "resource_link": ("uri", "name"),
                "resource": (),
            }[kind]
            for key in required:
                if not isinstance(block.get(key), str):
                    raise HandlerError(ErrorCode.INVALID_PARAMS, f"{where} ({kind}) needs a string {key}")
            if kind == "resource":
                res = block.get("resource")
                ok = (
                    isinstance(res, dict)
                    and isinstance(res.get("uri"), str)
                    and (isinstance(res.get("text"), str) or isinstance(res.get("blob"), str))
                )
                if not ok:
                    raise HandlerError(
                        ErrorCode.INVALID_PARAMS, f"{where} (resource) needs resource {{uri, text | blob}}"
                    )
        return prompt

    @staticmethod
    def _clean_block(block: Json) -> Json:
        """The block reduced to its schema fields (what we record and replay)."""
        keep = {
            "text": ("text",),
            "image": ("data", "mimeType", "uri"),
            "audio": ("data", "mimeType"),
            "resource_link": ("uri", "name", "mimeType", "title", "description", "size"),
            "resource": (),
        }[block["type"]]
        out: Json = {"type": block["type"]}
        for key in keep:
            value = block.get(key)
            if key == "size":
                if isinstance(value, int) and not isinstance(value, bool):
                    out[key] = value
            elif isinstance(value, str):
                out[key] = value
        if block["type"] == "resource":
            res = block["resource"]
            clean = {k: res[k] for k in ("uri", "mimeType", "text", "blob") if isinstance(res.get(k), str)}
            if "text" in clean:
                clean.pop("blob", None)
            out["resource"] = clean
        return out

    def record_user_message(self, session: Session, prompt: list[Json]) -> None:
        """Remember the user's prompt for replay (it is not echoed during the turn)."""
        message_id = session.next_message_id("user")
        for block in prompt:
            update: Json = {
                "sessionUpdate": "user_message_chunk",
                "content": self._clean_block(block),
                "messageId": message_id,
            }
            session.history.append(update)

    async def handle_prompt(self, req: Request) -> Any:
        params = self.params_of(req)
        session = self.find_session(params, "session/prompt")
        prompt = self._check_prompt(params.get("prompt"))
        if session.turn is not None:
            raise HandlerError(
                ErrorCode.INVALID_PARAMS,
                _short(f"session {session.id} already has a prompt turn in progress"),
            )
        text = "\n".join(b["text"] for b in prompt if b.get("type") == "text")
        turn = Turn(session=session, request_id=req.id, prompt=prompt, text=text)
        session.turn = turn
        if session.idle_cancel_at is not None and session.idle_cancel_at > req.index:
            turn.cancel("session/cancel")  # the cancel was read after this prompt, before its handler ran
        session.idle_cancel_at = None
        key = jsonrpc.id_key(req.id)
        self._turns_by_request[key] = turn
        session.updated_at = self.now()
        if session.title is None and text.strip():
            session.title = _short(text.strip().splitlines()[0], 60)
        result: Json | None = None
        error: HandlerError | None = None
        try:
            self.record_user_message(session, prompt)
            try:
                proposed = await self.prompt_turn(turn)
            except PeerExited:
                turn.cancel("the client went away")
                proposed = CANCELLED
            result = self.prompt_result(turn, self.stop_reason(turn, proposed))
        except HandlerError as exc:
            error = exc
        except Exception as exc:
            log.exception("internal error in the prompt turn")
            error = HandlerError(ErrorCode.INTERNAL_ERROR, _short(f"internal error: {exc!r}"))
        finally:
            session.turn = None
            self._turns_by_request.pop(key, None)
            session.updated_at = self.now()
        try:
            if error is None:
                try:
                    self.check_result("session/prompt", result)
                except HandlerError as exc:
                    error = exc
            if error is not None:
                await self.peer.respond_error(req.id, error.code, error.message, error.data)
            else:
                await self.peer.respond(req.id, result, method="session/prompt", validate=False)
            await self.after_prompt_response(turn)
        except PeerExited:
            pass
        finally:
            turn.finish()
        return NO_ANSWER

    def choose_scenario(self, turn: Turn) -> str:
        """Pick the turn's script from its text (see the package docstring)."""
        text = turn.text.lower()
        for keyword, scenario, _ in PROMPT_KEYWORDS:
            if keyword in text:
                return scenario
        return "default"

    async def prompt_turn(self, turn: Turn) -> str:
        """Run the turn's script; returns the proposed stop reason."""
        scenarios: dict[str, Callable[[Turn], Awaitable[str]]] = {
            "default": self.turn_default,
            "tool": self.turn_tool,
            "long": self.turn_long,
            "refuse": self.turn_refuse,
            "max_tokens": self.turn_max_tokens,
            "max_turn_requests": self.turn_max_turn_requests,
            "elicit": self.turn_elicit,
            "elicit_url": self.turn_elicit_url,
            "plan": self.turn_plan,
        }
        return await scenarios[self.choose_scenario(turn)](turn)

    def stop_reason(self, turn: Turn, proposed: str) -> str:
        """A cancelled turn always ends ``cancelled``; otherwise the script decides."""
        return CANCELLED if turn.cancelled else proposed

    def prompt_result(self, turn: Turn, stop_reason: str) -> Json:
        return {"stopReason": stop_reason}

    async def after_prompt_response(self, turn: Turn) -> None:
        """Runs right after the ``session/prompt`` response was sent.  No-op (nothing may follow)."""

    # -------------------------------------------------------- default turn
    def thought_text(self, turn: Turn) -> str:
        return f"Thinking about a prompt of {len(turn.prompt)} block(s)."

    def plan_entries(self, turn: Turn) -> list[Json]:
        return [
            {"content": "Read the prompt", "priority": "high", "status": "completed"},
            {"content": "Write the reply", "priority": "medium", "status": "in_progress"},
        ]

    @staticmethod
    def describe_block(block: Json) -> str | None:
        kind = block.get("type")
        if kind == "image":
            return f"[received an image ({block.get('mimeType')})]"
        if kind == "audio":
            return f"[received audio ({block.get('mimeType')})]"
        if kind == "resource":
            res = block.get("resource", {})
            form = "text" if isinstance(res.get("text"), str) else "blob"
            return f"[received the embedded resource {res.get('uri')} ({form})]"
        if kind == "resource_link":
            return f"[received a link to {block.get('name')} at {block.get('uri')}]"
        return None

    def reply_chunks(self, turn: Turn) -> list[str]:
        """The reply, as two or more chunks."""
        chunks = ["You said: ", turn.text if turn.text else "(no text)"]
        for block in turn.prompt:
            note = self.describe_block(block)
            if note is not None:
                chunks.append(" " + note)
        return chunks

    async def turn_default(self, turn: Turn) -> str:
        session = turn.session
        thought_id = session.next_message_id("thought")
        await self.emit(turn, self.message_chunk("agent_thought_chunk", self.thought_text(turn), thought_id))
        if turn.cancelled:
            return CANCELLED
        await self.emit(turn, {"sessionUpdate": "plan", "entries": self.plan_entries(turn)})
        message_id = session.next_message_id("agent")
        for chunk in self.reply_chunks(turn):
            if turn.cancelled:
                return CANCELLED
            await self.emit(turn, self.message_chunk("agent_message_chunk", chunk, message_id))
        return END_TURN

    async def _say(self, turn: Turn, text: str) -> None:
        await self.emit(turn, self.message_chunk("agent_message_chunk", text, turn.session.next_message_id("agent")))

    # ------------------------------------------------------------------ plan
    def plan_update(self, entries: list[Json]) -> Json:
        """A plan update: the complete list, every entry with its current status (agent-plan.mdx)."""
        return {"sessionUpdate": "plan", "entries": [dict(e) for e in entries]}

    async def turn_plan(self, turn: Turn) -> str:
        steps = dictated_steps(turn.text)
        entries: list[Json] = [{"content": step, "priority": "medium", "status": "pending"} for step in steps]
        await self.emit(turn, self.plan_update(entries))
        for entry in entries:
            for status in ("in_progress", "completed"):
                if turn.cancelled:
                    return CANCELLED
                entry["status"] = status
                await self.emit(turn, self.plan_update(entries))
        await self._say(turn, f"Done: {len(entries)} step(s).")
        return END_TURN

    # ----------------------------------------------------------- elicitation
    #: The one field the ``acp:elicit`` form asks for: an enum, nothing secret (elicitation.mdx § Form mode).
    ELICIT_CHOICES = ("hello", "howdy")

    def can_elicit_form(self) -> bool:
        """Form mode only when explicitly advertised as a non-null object (elicitation.mdx § Checking support)."""
        return "form" in elicitation_modes(self.client_caps.raw)

    def elicitation_params(self, turn: Turn) -> Json:
        return {
            "sessionId": turn.session_id,
            "mode": "form",
            "message": "Which greeting should I use?",
            "requestedSchema": {
                "type": "object",
                "properties": {"greeting": {"type": "string", "title": "Greeting", "enum": list(self.ELICIT_CHOICES)}},
                "required": ["greeting"],
            },
        }

    def elicited_choice(self, response: Response | None) -> str | None:
        """The greeting an ``accept`` chose, or None: a decline, a cancel, an error, an unknown
        action or no answer is a failed elicitation, and its content is ignored (MUST NOT assume
        it succeeded)."""
        if response is None or response.is_error or not isinstance(response.result, dict):
            return None
        if response.result.get("action") != "accept":
            return None
        content = response.result.get("content")
        choice = content.get("greeting") if isinstance(content, dict) else None
        return choice if choice in self.ELICIT_CHOICES else None

    def can_elicit_url(self) -> bool:
        return "url" in elicitation_modes(self.client_caps.raw)

    def new_elicitation_id(self) -> str:
        """Unique among this connection's URL elicitations (elicitation.mdx § URL completion)."""
        self.elicitation_count += 1
        return f"acp-mock-elicitation-{self.elicitation_count}"

    def url_elicitation_params(self, turn: Turn, elicitation_id: str) -> Json:
        return {
            "sessionId": turn.session_id,
            "mode": "url",
            "elicitationId": elicitation_id,
            "url": f"https://127.0.0.1/acp-mock/connect?elicitationId={elicitation_id}",
            "message": "Please open this page to connect the (pretend) service.",
        }

    def completion_params(self, elicitation_id: str) -> Json:
        return {"elicitationId": elicitation_id}

    async def turn_elicit_url(self, turn: Turn) -> str:
        if not self.can_elicit_url():
            await self._say(turn, "I would have asked you to open a page; there is no URL support, so I will not.")
            return END_TURN
        elicitation_id = self.new_elicitation_id()
        params = self.url_elicitation_params(turn, elicitation_id)
        response = await self.client_request(turn, "elicitation/create", params)
        accepted = (
            response is not None
            and not response.is_error
            and isinstance(response.result, dict)
            and response.result.get("action") == "accept"
        )
        if accepted:
            # The (pretend) out-of-band interaction is over: tell the same client, with the same id.
            await self.peer.notify("elicitation/complete", self.completion_params(elicitation_id))
        await self._say(turn, "Connected." if accepted else "Not connected; carrying on without it.")
        return END_TURN

    async def turn_elicit(self, turn: Turn) -> str:
        if not self.can_elicit_form():
            await self._say(turn, "I would have asked you to pick a greeting; I will use hello.")
            return END_TURN
        response = await self.client_request(turn, "elicitation/create", self.elicitation_params(turn))
        if turn.cancelled:
            return CANCELLED
        choice = self.elicited_choice(response)
        await self._say(turn, f"You chose {choice}." if choice else "No greeting was chosen; I will not use one.")
        return END_TURN

    async def turn_refuse(self, turn: Turn) -> str:
        await self._say(turn, "I can't help with that.")
        return "refusal"

    async def turn_max_tokens(self, turn: Turn) -> str:
        await self._say(turn, "This reply is cut short because")
        return "max_tokens"

    async def turn_max_turn_requests(self, turn: Turn) -> str:
        await self._say(turn, "I made too many model requests in this turn.")
        return "max_turn_requests"

    # ----------------------------------------------------------- long turn
    async def turn_long(self, turn: Turn) -> str:
        message_id = turn.session.next_message_id("agent")
        for n in range(1, self.long_turn_ticks + 1):
            if turn.cancelled:
                return CANCELLED
            await self.emit(turn, self.message_chunk("agent_message_chunk", f"tick {n}", message_id))
        with anyio.move_on_after(self.long_turn_seconds):
            await turn.cancel_event.wait()
        if turn.cancelled:
            return CANCELLED
        await self.emit(turn, self.message_chunk("agent_message_chunk", "tick done", message_id))
        return END_TURN

    # ----------------------------------------------------------- tool turn
    def probe_path(self, session: Session) -> str:
        return os.path.join(session.cwd, PROBE_FILE)

    def tool_call(self, turn: Turn, tool_call_id: str) -> Json:
        path = self.probe_path(turn.session)
        return {
            "sessionUpdate": "tool_call",
            "toolCallId": tool_call_id,
            "title": f"Write {PROBE_FILE}",
            "kind": "edit",
            "status": "pending",
            "locations": [{"path": path, "line": 1}],
            "rawInput": {"path": path, "content": PROBE_CONTENT},
        }

    def tool_update(self, tool_call_id: str, status: str, content: list[Json] | None = None, **extra: Any) -> Json:
        update: Json = {"sessionUpdate": "tool_call_update", "toolCallId": tool_call_id, "status": status}
        if content is not None:
            update["content"] = content
        update.update(extra)
        return update

    @staticmethod
    def text_content(text: str) -> Json:
        return {"type": "content", "content": {"type": "text", "text": text}}

    def permission_options(self) -> list[Json]:
        return [
            {"optionId": "allow-once", "name": "Allow once", "kind": "allow_once"},
            {"optionId": "allow-always", "name": "Always allow", "kind": "allow_always"},
            {"optionId": "reject-once", "name": "Reject", "kind": "reject_once"},
            {"optionId": "reject-always", "name": "Always reject", "kind": "reject_always"},
        ]

    def permission_request(self, turn: Turn, tool_call_id: str) -> Json:
        path = self.probe_path(turn.session)
        return {
            "sessionId": turn.session_id,
            "toolCall": {
                "toolCallId": tool_call_id,
                "title": f"Write {PROBE_FILE}",
                "kind": "edit",
                "status": "pending",
                "locations": [{"path": path, "line": 1}],
            },
            "options": self.permission_options(),
        }

    async def request_permission(self, turn: Turn, tool_call_id: str) -> str:
        """Ask the client; returns the chosen option kind, ``"cancelled"`` or ``"none"``."""
        options = {o["optionId"]: o["kind"] for o in self.permission_options()}
        response = await self.client_request(
            turn,
            "session/request_permission",
            self.permission_request(turn, tool_call_id),
            timeout=self.permission_timeout,
        )
        if response is None:
            return CANCELLED if turn.cancelled else "none"
        if response.is_error:
            log.info("session/request_permission failed: %r", response.error)
            return CANCELLED if turn.cancelled else "none"
        outcome = response.result.get("outcome") if isinstance(response.result, dict) else None
        if not isinstance(outcome, dict):
            log.warning("malformed permission response %r; treating it as a rejection", response.result)
            return "none"
        if outcome.get("outcome") == "cancelled":
            return CANCELLED
        if outcome.get("outcome") == "selected":
            kind = options.get(outcome.get("optionId"))
            if kind is None:
                log.warning(
                    "the client selected unknown option %r; treating it as a rejection",
                    outcome.get("optionId"),
                )
                return "none"
            return str(kind)
        log.warning("unknown permission outcome %r; treating it as a rejection", outcome)
        return "none"

    async def turn_tool(self, turn: Turn) -> str:
        session = turn.session
        tool_call_id = session.next_tool_call_id()
        await self.emit(turn, self.tool_call(turn, tool_call_id))
        if turn.cancelled:
            return CANCELLED
        if session.allow_always:
            decision = "allow_always"
        else:
            decision = await self.request_permission(turn, tool_call_id)
        if decision == CANCELLED or turn.cancelled:
            return CANCELLED
        if decision not in ("allow_once", "allow_always"):
            await self.emit(
                turn,
                self.tool_update(
                    tool_call_id, "failed", [self.text_content("Permission denied; nothing was changed.")]
                ),
            )
            await self._say(turn, "OK, I did not touch anything.")
            return END_TURN
        if decision == "allow_always":
            session.allow_always = True
        await self.emit(turn, self.tool_update(tool_call_id, "in_progress"))
        return await self.run_tool(turn, tool_call_id)

    async def run_tool(self, turn: Turn, tool_call_id: str) -> str:
        """Do the allowed tool's work with the client's fs and terminal, then report."""
        content: list[Json] = []
        raw: Json = {}
        failure: str | None = None
        if self.can_write_files():
            failure = await self.write_probe(turn)
            if failure is None:
                path = self.probe_path(turn.session)
                content.append({"type": "diff", "path": path, "oldText": None, "newText": PROBE_CONTENT})
                raw["written"] = path
        if failure is None and not turn.cancelled and self.can_read_files():
            text, read_failure = await self.read_probe(turn)
            if read_failure is None:
                content.append(self.text_content(f"Read back: {text!r}"))
                raw["read"] = text
            elif "written" in raw:
                failure = read_failure  # we just wrote it: not being able to read it back is a failure
            else:
                content.append(self.text_content(f"Could not read {PROBE_FILE}: {read_failure}"))
        if failure is None and not turn.cancelled and self.can_use_terminal():
            output, failure = await self.run_terminal(turn)
            if failure is None:
                content.append(self.text_content(f"Terminal output: {output!r}"))
                raw["terminal"] = output
        if turn.cancelled:
            return CANCELLED
        if failure is not None:
            await self.emit(turn, self.tool_update(tool_call_id, "failed", [self.text_content(failure)]))
            await self._say(turn, "The tool failed.")
            return END_TURN
        if not content:
            content.append(self.text_content("Nothing to do: the client offers no file system or terminal."))
        await self.emit(turn, self.tool_update(tool_call_id, "completed", content, rawOutput=raw))
        await self._say(turn, "Done.")
        return END_TURN

    @staticmethod
    def _failure(method: str, response: Response | None, turn: Turn) -> str | None:
        if response is None:
            return f"{method}: cancelled" if turn.cancelled else f"{method}: no answer in time"
        if response.is_error:
            err = response.error if isinstance(response.error, dict) else {}
            return _short(f"{method} failed: {err.get('message', response.error)!r} ({err.get('code')})")
        if not isinstance(response.result, dict):
            return f"{method}: the result is not an object"
        return None

    async def write_probe(self, turn: Turn) -> str | None:
        """``fs/write_text_file`` of the probe file; returns a failure text or None."""
        params = {
            "sessionId": turn.session_id,
            "path": self.probe_path(turn.session),
            "content": PROBE_CONTENT,
        }
        response = await self.client_request(turn, "fs/write_text_file", params)
        return self._failure("fs/write_text_file", response, turn)

    async def read_probe(self, turn: Turn) -> tuple[str, str | None]:
        """``fs/read_text_file`` of the probe file's first line."""
        params = {"sessionId": turn.session_id, "path": self.probe_path(turn.session), "line": 1, "limit": 1}
        response = await self.client_request(turn, "fs/read_text_file", params)
        failure = self._failure("fs/read_text_file", response, turn)
        if failure is not None or response is None:
            return "", failure
        content = response.result.get("content")
        if not isinstance(content, str):
            return "", "fs/read_text_file: the result has no string content"
        return content, None

    async def run_terminal(self, turn: Turn) -> tuple[str, str | None]:
        """create + wait_for_exit + output + release of ``echo hello``."""
        sid = turn.session_id
        create = await self.client_request(
            turn,
            "terminal/create",
            {
                "sessionId": sid,
                "command": "echo",
                "args": ["hello"],
                "cwd": turn.session.cwd,
                "outputByteLimit": 1_048_576,
            },
        )
        failure = self._failure("terminal/create", create, turn)
        if failure is not None or create is None:
            return "", failure
        terminal_id = create.result.get("terminalId")
        if not isinstance(terminal_id, str):
            return "", "terminal/create: the result has no string terminalId"
        turn.terminals.append(terminal_id)
        try:
            ref = {"sessionId": sid, "terminalId": terminal_id}
            # On cancel, stop waiting at once: releasing the terminal kills the command.
            waited = await self.client_request(turn, "terminal/wait_for_exit", ref, cancel_grace=0.0)
            failure = self._failure("terminal/wait_for_exit", waited, turn)
            if failure is not None:
                return "", failure
            output = await self.client_request(turn, "terminal/output", ref)
            failure = self._failure("terminal/output", output, turn)
            if failure is not None or output is None:
                return "", failure
            text = output.result.get("output")
            if not isinstance(text, str):
                return "", "terminal/output: the result has no string output"
            return text, None
        finally:
            with anyio.CancelScope(shield=True), anyio.move_on_after(self.cancel_grace + 1.0):
                await self.release_terminal(turn, terminal_id)

    async def release_terminal(self, turn: Turn, terminal_id: str) -> None:
        """``terminal/release``: every terminal we create is released, whatever happened."""
        if terminal_id in turn.terminals:
            turn.terminals.remove(terminal_id)
        try:
            await self.client_request(
                turn, "terminal/release", {"sessionId": turn.session_id, "terminalId": terminal_id}
            )
        except PeerExited:
            pass


def _short(text: str, limit: int = 180) -> str:
    """One line, bounded: JSON-RPC error messages should be a short sentence."""
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."
