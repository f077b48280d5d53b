"""The agent side of ACP as the suite plays it (client certification).

``AgentEndpoint`` wraps a ``Peer`` in the agent role (running over the
relay the client under test launched, see ``control``).  It answers the
client's lifecycle requests by a chosen ``AgentSetup`` (capabilities,
version, session answers) and hands every ``session/prompt`` to the test
as a ``PromptTurn`` that the test scripts from the agent side: updates,
permission requests, fs and terminal calls, the final stop reason.

While serving it judges the client on the clauses only the agent side
can see (the order of the first requests, session parameters, prompt
content gating, permission answers ...) and records violations with
``peer.flag``, so they land in the transcript next to the offending frame
and are turned into clause results by ``checks.passive_results``.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import anyio

from acp_conformance import __version__
from acp_conformance.checks.gating import advertised, ungranted
from acp_conformance.checks.sessions import select_values
from acp_conformance.core import jsonrpc
from acp_conformance.core.events import Notification, Request, Response
from acp_conformance.endpoints.listing import SessionPager
from acp_conformance.endpoints.turn import ALLOW_ONCE, DEFAULT_OPTIONS, PermissionAnswer, PromptTurn
from acp_conformance.errors import PeerExited, PeerTimeout
from acp_conformance.peer import NO_ANSWER, HandlerError, Peer

__all__ = [
    "ALLOW_ONCE",
    "DEFAULT_OPTIONS",
    "AgentEndpoint",
    "AgentSetup",
    "CONTENT_GATES",
    "METHOD_GATES",
    "PermissionAnswer",
    "PromptTurn",
]

ErrorCode = jsonrpc.ErrorCode
T = TypeVar("T")

#: Ping request used as an ordering barrier (see ``AgentEndpoint.barrier``).
BARRIER_METHOD = "_acp_conformance/barrier"
SESSION_METHODS = (
    "session/new",
    "session/load",
    "session/resume",
    "session/list",
    "session/delete",
    "session/close",
    "session/prompt",
    "session/set_mode",
    "session/set_config_option",
)
#: The clause a client breaks by calling each capability-gated method the agent did not advertise
#: (the capability each needs: ``checks.gating.AGENT_GATED_METHODS``).
METHOD_GATES = {
    "session/load": "session.load.gated",
    "session/resume": "session.resume.gated",
    "session/list": "session.list.gated",
    "session/close": "session.close.gated",
    "session/delete": "session.delete.gated",
    "logout": "auth.logout.gated",
}
#: promptCapabilities flag needed by each gated content block type, and its clause.
CONTENT_GATES = {
    "image": ("image", "content.image.gated"),
    "audio": ("audio", "content.audio.gated"),
    "resource": ("embeddedContext", "content.resource.gated"),
}


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


@dataclass
class AgentSetup:
    """What the suite's agent advertises and how it answers the lifecycle."""

    protocol_version: Any = 1
    load_session: bool = False
    image: bool = False
    audio: bool = False
    embedded_context: bool = False
    mcp_http: bool = False
    mcp_sse: bool = False
    session_capabilities: dict[str, Any] = field(default_factory=dict)
    auth_methods: list[dict[str, Any]] = field(default_factory=list)
    agent_info: dict[str, Any] = field(
        default_factory=lambda: {
            "name": "acp-conformance-agent",
            "title": "ACP conformance (suite-driven agent)",
            "version": __version__,
        }
    )
    #: Put ``_meta`` on every object the agent sends (robustness).
    meta: bool = False
    modes: dict[str, Any] | None = None
    config_options: list[dict[str, Any]] | None = None
    #: Send ``agentCapabilities: {}``: every capability absent, which a client must read as unsupported
    #: (the flags above are then all false, which is what the handlers enforce).
    omit_capabilities: bool = False
    #: Leave the boolean flags out (``promptCapabilities: {}``, ``mcpCapabilities: {}``, no
    #: ``loadSession``): their schema default, false (cap.agent.defaults judges a client using them).
    flags_omitted: bool = False
    #: Declare every object-valued session and auth capability as ``null``: not supported
    #: (cap.object-presence judges a client using them).
    null_objects: bool = False
    #: Answer session requests with auth_required (-32000) until the client authenticates with one
    #: of ``auth_methods`` (authentication.mdx § Protocol-driven authentication).
    require_auth: bool = False
    #: What ``session/list`` pages through (``endpoints.listing``); None: an empty list.
    listing: SessionPager | None = None
    #: Slash commands announced (``available_commands_update``) right after each ``session/new`` answer.
    commands: list[dict[str, Any]] | None = None

    def gate_clause(self, clause: str, kind: str) -> str:
        """The clause a client breaks by using a capability of ``kind`` (``object`` / ``flag``) this
        setup did not give it: the gate's own, or the rule of how this setup withheld it (no
        capabilities at all, a null object, an omitted flag), one defect, one clause."""
        return self.withheld(clause, kind)[0]

    def withheld(self, clause: str, kind: str) -> tuple[str, str]:
        """``gate_clause``, and how this setup withheld the capability, for the finding's words."""
        if self.omit_capabilities:
            return "cap.omitted-unsupported", "absent (agentCapabilities left out)"
        if kind == "object" and self.null_objects:
            return "cap.object-presence", "null"
        if kind == "flag" and self.flags_omitted:
            return "cap.agent.defaults", "omitted (false)"
        return clause, "false" if kind == "flag" else "not advertised"

    def capabilities(self) -> dict[str, Any]:
        if self.omit_capabilities:
            return {"_meta": {"acp-conformance": {"probe": True}}} if self.meta else {}
        caps: dict[str, Any] = {
            "loadSession": self.load_session,
            "promptCapabilities": {
                "image": self.image,
                "audio": self.audio,
                "embeddedContext": self.embedded_context,
            },
            "mcpCapabilities": {"http": self.mcp_http, "sse": self.mcp_sse},
        }
        if self.session_capabilities:
            caps["sessionCapabilities"] = dict(self.session_capabilities)
        if self.flags_omitted:
            caps = {"promptCapabilities": {}, "mcpCapabilities": {}}
        if self.null_objects:
            names = ("list", "resume", "close", "delete", "additionalDirectories")
            caps["sessionCapabilities"] = dict.fromkeys(names)
            caps["auth"] = {"logout": None}
        if self.meta:
            caps["_meta"] = {"acp-conformance": {"probe": True}}
            caps["promptCapabilities"]["_meta"] = {"acp-conformance": 1}
        return caps

    def initialize_result(self, client_capabilities: dict[str, Any] | None = None) -> dict[str, Any]:
        # authentication.mdx: "An Agent may advertise a terminal method only when" the client's
        # auth.terminal capability is true.
        terminal = advertised(client_capabilities or {}, "auth.terminal")
        methods = [m for m in self.auth_methods if terminal or m.get("type") != "terminal"]
        result: dict[str, Any] = {
            "protocolVersion": self.protocol_version,
            "agentCapabilities": self.capabilities(),
            "agentInfo": dict(self.agent_info),
            "authMethods": methods,
        }
        if self.meta:
            result["_meta"] = {"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}
        return result


class AgentEndpoint:
    """A scriptable ACP agent on top of a ``Peer`` in the agent role."""

    def __init__(self, peer: Peer, setup: AgentSetup | None = None) -> None:
        self.peer = peer
        self.setup = setup or AgentSetup()
        self.init_request: Request | None = None
        self.client_capabilities: dict[str, Any] = {}
        # A request the client did not advertise (fs/* without fs, an elicitation mode it lacks) is
        # one no conforming agent sends: the peer charges a silence after it as robustness.
        peer.ungranted = lambda method, params: ungranted(method, params, self.client_capabilities, peer="client")
        self.sessions: dict[str, dict[str, Any]] = {}
        self.session_requests: list[Request] = []
        self.turns: list[PromptTurn] = []
        self.cancels: list[Notification | Request] = []
        self.permissions: list[PermissionAnswer] = []
        #: Ids of our requests we withdrew with ``$/cancel_request`` (``PromptTurn.withdraw``).
        self.cancel_requested_ids: set[Any] = set()
        #: ``authenticate`` requests received, in order (``setup.require_auth`` waits for a good one).
        self.authentications: list[Request] = []
        self.authenticated = False
        #: ``session/list`` requests received, in order.
        self.list_requests: list[Request] = []
        #: A test may script every turn: called (in its own task) for each session/prompt.
        self.turn_script: Callable[[PromptTurn], Awaitable[None]] | None = None
        #: Replay for session/load (the updates sent before answering it).
        self.load_replay: list[dict[str, Any]] = [
            {"sessionUpdate": "user_message_chunk", "content": {"type": "text", "text": "earlier prompt"}},
            {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "earlier answer"}},
        ]
        self._init_done_frames: int | None = None
        #: Clauses judged once per connection (init.first), whether they passed or not.
        self._judged: set[str] = set()
        self._changed = anyio.Event()
        self._n_sessions = 0
        h = peer.handlers
        h["initialize"] = self._on_initialize
        h["authenticate"] = self._on_authenticate
        h["session/new"] = self._on_new
        h["session/load"] = self._on_load
        for name in ("resume", "list", "close", "delete"):
            h[f"session/{name}"] = self._gated_session(name)
        h["session/prompt"] = self._on_prompt
        h["session/cancel"] = self._on_cancel_request
        h["session/set_mode"] = self._on_set_mode
        h["session/set_config_option"] = self._on_set_config
        h["logout"] = self._on_logout
        peer.default_handler = self._on_unknown
        peer.listeners.append(self._on_notification)

    # ------------------------------------------------------------ waiting
    def notify(self) -> None:
        self._changed.set()
        self._changed = anyio.Event()

    async def watch_closed(self) -> None:
        """Wake waiters when the client closes the connection (run as a task)."""
        await self.peer.closed.wait()
        self.notify()

    async def _wait(self, cond: Callable[[], T | None], what: str, timeout: float | None) -> T:
        limit = self.peer.timeout if timeout is None else timeout
        with anyio.move_on_after(limit):
            while True:
                value = cond()
                if value is not None:
                    return value
                if self.peer.closed.is_set():
                    raise PeerExited(f"the client closed the connection before {what}", None, self.peer.stderr_tail())
                await self._changed.wait()
        raise PeerTimeout(f"the client sent no {what} within {limit:g} s", self.peer.stderr_tail())

    async def wait_initialize(self, timeout: float | None = None) -> Request:
        return await self._wait(lambda: self.init_request, "initialize request", timeout)

    async def wait_session(self, timeout: float | None = None, index: int = 0) -> str:
        ids = list(self.sessions)
        return await self._wait(
            lambda: list(self.sessions)[index] if len(self.sessions) > index else None,
            "session/new request" if not ids else f"session request #{index + 1}",
            timeout,
        )

    async def next_turn(self, timeout: float | None = None, index: int | None = None) -> PromptTurn:
        """The ``index``-th prompt turn (default: the first not yet taken)."""
        want = index if index is not None else next((i for i, t in enumerate(self.turns) if not t.answered), None)
        if want is None:
            want = len(self.turns)
        return await self._wait(lambda: self.turns[want] if len(self.turns) > want else None, "session/prompt", timeout)

    async def wait_cancel(self, session_id: str, timeout: float | None = None) -> Notification | Request:
        def found() -> Notification | Request | None:
            for c in self.cancels:
                p = c.params if isinstance(c.params, dict) else {}
                if p.get("sessionId") == session_id:
                    return c
            return None

        return await self._wait(found, f"session/cancel for {session_id}", timeout)

    def cancelled(self, session_id: str) -> bool:
        return any(isinstance(c.params, dict) and c.params.get("sessionId") == session_id for c in self.cancels)

    async def barrier(self, timeout: float | None = None) -> bool:
        """Send an extension request and wait for its answer.

        Frames are read in order, so once the client answers, it has read
        everything sent before (permission requests, updates).  Any answer
        will do (a -32601 error is the expected one).  False if none came.
        """
        try:
            await self.peer.call(BARRIER_METHOD, {}, timeout=timeout)
        except (PeerTimeout, PeerExited):
            return False
        return True

    # ------------------------------------------------------------ judging
    def flag(self, clause: str, message: str, about: Request | Notification | Response | None = None) -> None:
        self.peer.flag(clause, message, about=about)

    def conformed(self, clause: str, seen: str) -> None:
        """A request judged on ``clause`` (one of ``checks.passive.CLIENT_TRAFFIC_CLAUSES``) that
        conforms: the clause's PASS says ``seen``.  Never a value the client chose that may be a
        path (a cwd): reports carry no path of the machine that made them."""
        self.peer.transcript.conformed(clause, seen)

    def _first_request_check(self, req: Request) -> None:
        if "init.first" in self._judged:
            return
        first = next((e for e in self.peer.events if isinstance(e, Request)), None)
        # A session request first is session.after-init's MUST breach (its handler judges it); any
        # other request before initialize misses only init.first's SHOULD.
        if first is None or first.method in SESSION_METHODS:
            return
        self._judged.add("init.first")
        if first.method == "initialize":
            self.conformed("init.first", "the client's first request was initialize")
        else:
            self.flag("init.first", f"the client's first request was {first.method}, not initialize", first)

    def _after_init_check(self, req: Request) -> None:
        if self._init_done_frames is None or req.index < self._init_done_frames:
            self.flag(
                "session.after-init",
                f"{req.method} was sent before the initialize response"
                + ("" if self.init_request else " (no initialize at all)"),
                req,
            )
        else:
            self.conformed("session.after-init", f"{req.method} came after the initialize response")

    def _known_session(self, req: Request, clause: str) -> str | None:
        p = req.params if isinstance(req.params, dict) else {}
        sid = p.get("sessionId")
        if sid not in self.sessions:
            self.flag(clause, f"{req.method} names session {sid!r}, which was not set up on this connection", req)
            return None
        self.conformed(clause, f"{req.method} named a session set up on this connection")
        return str(sid)

    def _check_cwd(self, req: Request, cwd: Any) -> None:
        if isinstance(cwd, str) and not os.path.isabs(cwd):
            self.flag("session.cwd.absolute", f"{req.method} cwd {cwd!r} is not an absolute path", req)
        self._check_dirs(req)

    def _check_dirs(self, req: Request) -> None:
        """additionalDirectories only when advertised, every entry absolute (session-setup.mdx §
        Additional Workspace Roots); judged wherever a session request carries a cwd."""
        params = req.params if isinstance(req.params, dict) else {}
        if "additionalDirectories" not in params:
            return
        if not advertised(self.setup.capabilities(), "sessionCapabilities.additionalDirectories"):
            clause = self.setup.gate_clause("session.additional-dirs.gated", "object")
            why = f"{req.method} carries additionalDirectories, which the agent did not advertise"
            self.flag(clause, why, req)
        dirs = params["additionalDirectories"]
        relative = (
            [d for d in dirs if not (isinstance(d, str) and os.path.isabs(d))] if isinstance(dirs, list) else [dirs]
        )
        if relative:
            self.flag(
                "session.additional-dirs.absolute", f"{req.method} additionalDirectories not absolute: {relative}", req
            )

    def _check_mcp(self, req: Request, servers: Any) -> None:
        if not isinstance(servers, list):
            return
        clause = self.setup.gate_clause("session.mcp.transport-gated", "flag")
        kinds = [s.get("type", "stdio") if isinstance(s, dict) else None for s in servers]
        offered = {"http": self.setup.mcp_http, "sse": self.setup.mcp_sse}
        withheld = [k for k, ok in offered.items() if not ok]
        for kind in kinds:
            if kind in withheld:
                self.flag(
                    clause,
                    f"{req.method} sent an MCP server of type {kind!r} although mcpCapabilities.{kind} is false",
                    req,
                )
        if withheld and clause == "session.mcp.transport-gated" and not set(kinds) & set(withheld):
            self.conformed(
                clause,
                f"{req.method} sent no MCP server over {' or '.join(withheld)} (not advertised); "
                f"server types {sorted(map(str, kinds))}",
            )

    async def judge_permission(self, answer: PermissionAnswer) -> None:
        resp = answer.response
        if resp is None:
            return
        offered = [o.get("optionId") for o in answer.options]
        if resp.is_error:
            if answer.unimplemented:
                self.flag(
                    "perm.client-baseline",
                    f"session/request_permission, the client's baseline method, answered {resp.error!r}: "
                    "not implemented",
                    resp,
                )
            # No sentence makes a client answer with an outcome rather than an error (cancellation.mdx
            # even recommends -32800 for a request the client cancels internally: the user closes the
            # IDE, switches project):
            # an error is judged only where a clause asks for the cancelled outcome
            # (perm.cancelled-on-cancel, perm.late-request-after-cancel), or by error.cancelled for a
            # request we withdrew.  perm.response.shape judges a result's shape.
            return
        self.conformed("perm.client-baseline", "session/request_permission answered with a result")
        kind = answer.kind
        if kind == "selected":
            if answer.option_id not in offered:
                self.flag(
                    "perm.response.valid-option",
                    f"selected optionId {answer.option_id!r} was not offered (offered: {offered})",
                    resp,
                )
            else:
                self.conformed("perm.response.valid-option", f"selected optionId {answer.option_id!r}, one offered")
        # ``cancelled`` outside a cancelled turn misuses the outcome ("The prompt turn was cancelled
        # before the user responded", the schema's description), but no keyword forbids it: not judged.
        # Any other shape is caught by schema validation (RequestPermissionResponse -> perm.response.shape).

    # ------------------------------------------------------------ handlers
    def _params(self, req: Request) -> dict[str, Any]:
        return req.params if isinstance(req.params, dict) else {}

    async def _on_initialize(self, req: Request) -> Any:
        self._first_request_check(req)
        if self.init_request is not None:
            # A second initialize on one connection: answer it, judge nothing new.
            return self.setup.initialize_result(self.client_capabilities)
        self.init_request = req
        p = self._params(req)
        caps = p.get("clientCapabilities")
        self.client_capabilities = caps if isinstance(caps, dict) else {}
        self.notify()
        # Frames received before the answer leaves could not have waited for it.
        self._init_done_frames = self.peer.conn.inbound_frames
        result = self.setup.initialize_result(self.client_capabilities)
        await self.peer.respond(req.id, result, method="initialize", validate=False)
        self.notify()
        return NO_ANSWER

    async def _on_authenticate(self, req: Request) -> Any:
        self._first_request_check(req)
        self.authentications.append(req)
        self.notify()
        method_id = self._params(req).get("methodId")
        offered = self.setup.initialize_result(self.client_capabilities)["authMethods"]
        ids = [m.get("id") for m in offered]
        if method_id not in ids:
            self.flag("auth.authenticate.advertised-id", f"authenticate names {method_id!r}, not one of {ids}", req)
            raise HandlerError(ErrorCode.INVALID_PARAMS, f"unknown auth method {method_id!r}")
        self.conformed("auth.authenticate.advertised-id", f"authenticate named {method_id!r}, one of {ids}")
        by_id = {m.get("id"): m for m in offered}
        if by_id[method_id].get("type") == "terminal":
            # authentication.mdx: the terminal process is not the ACP connection.
            self.flag("auth.authenticate.no-terminal", f"authenticate names the terminal method {method_id!r}", req)
            raise HandlerError(ErrorCode.INVALID_PARAMS, f"{method_id!r} is a terminal method: run it, do not send it")
        self.authenticated = True
        self.notify()
        return {}

    def _require_auth(self) -> None:
        if self.setup.require_auth and not self.authenticated:
            raise HandlerError(ErrorCode.AUTH_REQUIRED, "Authentication required")

    async def _on_logout(self, req: Request) -> Any:
        self._first_request_check(req)
        clause = self.setup.gate_clause(METHOD_GATES["logout"], "object")
        self.flag(clause, "logout sent although agentCapabilities.auth.logout was not advertised", req)
        raise HandlerError(ErrorCode.METHOD_NOT_FOUND, "logout is not supported")

    def new_session_id(self) -> str:
        self._n_sessions += 1
        return f"sess-{self._n_sessions}-{secrets.token_hex(4)}"

    async def _on_new(self, req: Request) -> Any:
        self._first_request_check(req)
        self._after_init_check(req)
        self._require_auth()
        p = self._params(req)
        cwd, servers = p.get("cwd"), p.get("mcpServers")
        if not isinstance(cwd, str) or not isinstance(servers, list):
            self.flag("session.new.params", f"session/new params need cwd (string) and mcpServers (array): {p!r}", req)
        else:
            self.conformed("session.new.params", "session/new carried cwd (a string) and mcpServers (an array)")
        self._check_cwd(req, cwd)
        self._check_mcp(req, servers)
        sid = self.new_session_id()
        self.sessions[sid] = {"cwd": cwd, "mcpServers": servers, "request": req}
        self.session_requests.append(req)
        result: dict[str, Any] = {"sessionId": sid}
        if self.setup.modes is not None:
            result["modes"] = self.setup.modes
        if self.setup.config_options is not None:
            result["configOptions"] = self.setup.config_options
        if self.setup.meta:
            result["_meta"] = {"acp-conformance": "session"}
        self.notify()
        if self.setup.commands is None:
            return result
        # The commands follow the answer (slash-commands.mdx: announced once the session exists).
        await self.peer.respond(req.id, result, method="session/new", validate=False)
        update = {"sessionUpdate": "available_commands_update", "availableCommands": self.setup.commands}
        await self.peer.notify("session/update", {"sessionId": sid, "update": update})
        return NO_ANSWER

    async def _on_load(self, req: Request) -> Any:
        self._first_request_check(req)
        self._after_init_check(req)
        p = self._params(req)
        if not self.setup.load_session:
            clause = self.setup.gate_clause(METHOD_GATES["session/load"], "flag")
            self.flag(clause, "session/load sent although the agent did not advertise loadSession", req)
            raise HandlerError(ErrorCode.METHOD_NOT_FOUND, "session/load is not supported")
        self._require_auth()
        missing = [k for k in ("sessionId", "cwd", "mcpServers") if k not in p]
        if missing:
            self.flag("session.load.params", f"session/load params lack {missing}", req)
        else:
            self.conformed("session.load.params", "session/load carried sessionId, cwd and mcpServers")
        self._check_cwd(req, p.get("cwd"))
        self._check_mcp(req, p.get("mcpServers"))
        sid = p.get("sessionId")
        if not isinstance(sid, str):
            raise HandlerError(ErrorCode.INVALID_PARAMS, "sessionId must be a string")
        for update in self.load_replay:
            await self.peer.notify("session/update", {"sessionId": sid, "update": update})
        self.sessions[sid] = {"cwd": p.get("cwd"), "mcpServers": p.get("mcpServers"), "request": req, "loaded": True}
        self.session_requests.append(req)
        self.notify()
        return {}

    def _gated_session(self, name: str) -> Callable[[Request], Awaitable[Any]]:
        clause = METHOD_GATES[f"session/{name}"]

        async def handler(req: Request) -> Any:
            self._first_request_check(req)
            self._after_init_check(req)
            if name not in self.setup.session_capabilities:
                why = f"{req.method} sent although sessionCapabilities.{name} was not advertised"
                self.flag(self.setup.gate_clause(clause, "object"), why, req)
                raise HandlerError(ErrorCode.METHOD_NOT_FOUND, f"{req.method} is not supported")
            self._require_auth()
            if name == "list":
                return self._on_list(req)
            if name == "resume":
                p = self._params(req)
                missing = [k for k in ("sessionId", "cwd") if k not in p]
                if missing:
                    self.flag("session.resume.params", f"session/resume params lack {missing}", req)
                else:
                    self.conformed("session.resume.params", "session/resume carried sessionId and cwd")
                self._check_cwd(req, p.get("cwd"))
                sid = p.get("sessionId")
                if isinstance(sid, str):
                    self.sessions[sid] = {"cwd": p.get("cwd"), "mcpServers": p.get("mcpServers"), "request": req}
                    self.session_requests.append(req)
                    self.notify()
            return {}

        return handler

    def _on_list(self, req: Request) -> Any:
        self.list_requests.append(req)
        self.notify()
        p = self._params(req)
        if "cwd" in p:
            self._check_cwd(req, p.get("cwd"))
        pager = self.setup.listing
        if pager is None:
            return {"sessions": []}
        page, problem = pager.page(p.get("cursor"))
        if problem is not None:
            self.flag(problem[0], problem[1], req)
            raise HandlerError(ErrorCode.INVALID_PARAMS, problem[1])
        if p.get("cursor") is not None:
            self.conformed("session.list.cursor-opaque", "session/list sent a nextCursor back byte for byte")
        return page

    async def _on_prompt(self, req: Request) -> Any:
        self._first_request_check(req)
        self._after_init_check(req)
        p = self._params(req)
        sid = self._known_session(req, "prompt.after-setup")
        if sid is None:
            raise HandlerError(ErrorCode.RESOURCE_NOT_FOUND, f"unknown session {p.get('sessionId')!r}")
        blocks = p.get("prompt")
        if not isinstance(blocks, list):
            self.flag("prompt.params", "session/prompt params lack a prompt array", req)
            blocks = []
        caps = self.setup.capabilities().get("promptCapabilities", {})
        for b in blocks:
            kind = b.get("type") if isinstance(b, dict) else None
            if kind in CONTENT_GATES:
                flag, clause = CONTENT_GATES[kind]
                if not caps.get(flag):
                    # One clause per use: the type's own (prompt.content-gated is the same sentence
                    # of prompt-turn.mdx § 1), or the rule of how this setup withheld it.
                    gate, how = self.setup.withheld(clause, "flag")
                    why = f"prompt carries a {kind} block although promptCapabilities.{flag} is {how}"
                    self.flag(gate, why, req)
        turn = PromptTurn(self, req)
        self.turns.append(turn)
        self.notify()
        if self.turn_script is not None:
            await self.turn_script(turn)
        return NO_ANSWER

    async def _on_cancel_request(self, req: Request) -> Any:
        self.flag("cancel.is-notification", "session/cancel was sent as a request (with an id)", req)
        self.cancels.append(req)
        self.notify()
        raise HandlerError(ErrorCode.INVALID_REQUEST, "session/cancel is a notification; it takes no id")

    async def _on_set_mode(self, req: Request) -> Any:
        self._after_init_check(req)
        p = self._params(req)
        modes = self.setup.modes or {}
        valid = [m.get("id") for m in modes.get("availableModes", []) if isinstance(m, dict)]
        if p.get("modeId") not in valid:
            self.flag("mode.set.valid", f"session/set_mode names {p.get('modeId')!r}, not one of {valid}", req)
            raise HandlerError(ErrorCode.INVALID_PARAMS, "unknown mode")
        self.conformed("mode.set.valid", f"session/set_mode named {p.get('modeId')!r}, one of {valid}")
        return {}

    async def _on_set_config(self, req: Request) -> Any:
        self._after_init_check(req)
        p = self._params(req)
        for opt in self.setup.config_options or []:
            if opt.get("id") == p.get("configId"):
                values = select_values(opt)
                if opt.get("type") == "select" and p.get("value") not in values:
                    self.flag("config.set.value", f"value {p.get('value')!r} is not one of {values}", req)
                    raise HandlerError(ErrorCode.INVALID_PARAMS, "invalid value")
                if opt.get("type") == "select":
                    self.conformed("config.set.value", f"value {p.get('value')!r}, one of {values}")
                return {"configOptions": self.setup.config_options}
        raise HandlerError(ErrorCode.INVALID_PARAMS, f"unknown config option {p.get('configId')!r}")

    async def _on_unknown(self, req: Request) -> Any:
        self._first_request_check(req)
        raise HandlerError(ErrorCode.METHOD_NOT_FOUND, f"method not found: {req.method}")

    def _on_notification(self, note: Notification) -> None:
        if note.method == "session/cancel":
            self.cancels.append(note)
        self.notify()

    # ---------------------------------------------------------- shutdown
    async def end_open_turns(self) -> None:
        for turn in self.turns:
            if not turn.answered and not self.peer.closed.is_set():
                await turn.end("cancelled" if self.cancelled(turn.session_id) else "end_turn")
