"""The client side of ACP as the suite (and ``mock_client``) plays it.

``ClientEndpoint`` wraps a ``Peer`` playing the client role and answers
the agent's requests by policy:

* permission: allow once / always, reject, answer ``cancelled``, pick an
  option id, never answer, or *hold* the request until the test releases
  it (how races are forced deterministically instead of hoped for);
* any other agent request (``fs/*``, ``terminal/*``) can be held too
  (``hold_methods``), served only once the test releases it: while the suite
  holds a request of a turn, that turn provably cannot have ended by itself
  (``holding``), which is what makes a cancellation race judgeable;
* fs: served from a sandbox rooted at the session cwd; paths outside it
  (``..``, absolute elsewhere, symlinks pointing out) are refused with an
  error and nothing outside is read or written;
* terminal: virtual by default, with scripted output and exit status
  (the sandbox and the terminals are in :mod:`acp_conformance.endpoints.sandbox`).

It also judges the agent while serving: a call the client never
advertised (``fs/*`` without ``fs``, ``terminal/*`` without ``terminal``)
is recorded as a violation of its gating clause and refused.
"""

from __future__ import annotations

import fnmatch
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import anyio

from acp_conformance.checks.gating import advertised, elicitation_modes, ungranted
from acp_conformance.core import jsonrpc
from acp_conformance.core.events import Notification, Request, Response
from acp_conformance.endpoints.sandbox import MAX_READ_BYTES, Sandbox, VirtualTerminals
from acp_conformance.errors import PeerTimeout, RpcError
from acp_conformance.peer import NO_ANSWER, HandlerError, Peer

__all__ = [
    "ClientCapabilities",
    "ClientEndpoint",
    "HeldRequest",
    "MAX_READ_BYTES",
    "PermissionCall",
    "PermissionPolicy",
    "Sandbox",
    "Turn",
    "VirtualTerminals",
]

ErrorCode = jsonrpc.ErrorCode


@dataclass(frozen=True)
class ClientCapabilities:
    """What the mock client advertises in ``initialize``."""

    fs_read: bool = True
    fs_write: bool = True
    terminal: bool = True
    elicitation_form: bool = False
    elicitation_url: bool = False
    #: ``auth.terminal``: can run a terminal auth method (authentication.mdx § Terminal authentication).
    auth_terminal: bool = False
    extra: dict[str, Any] | None = None
    #: Leave the false flags out (``fs: {}``, no ``terminal``) instead of sending ``false``: the
    #: schema's defaults, which an agent must read as unsupported (cap.client.fs-defaults).
    flags_omitted: bool = False
    #: Capability objects (``fs``, ``terminal``) left out of ``clientCapabilities`` altogether (a
    #: scenario's own ``initialize``): an agent using one takes an absent capability for supported
    #: (cap.omitted-unsupported), the rule the mock agent applies the other way (``AgentSetup.withheld``).
    absent: frozenset[str] = frozenset()

    @classmethod
    def none(cls) -> ClientCapabilities:
        return cls(fs_read=False, fs_write=False, terminal=False)

    def to_wire(self) -> dict[str, Any]:
        fs = {"readTextFile": self.fs_read, "writeTextFile": self.fs_write}
        caps: dict[str, Any] = {"fs": fs, "terminal": self.terminal}
        if self.flags_omitted:
            caps = {"fs": {k: v for k, v in fs.items() if v}}
            if self.terminal:
                caps["terminal"] = True
        if self.auth_terminal:
            caps["auth"] = {"terminal": True}
        if self.elicitation_form or self.elicitation_url:
            caps["elicitation"] = {
                **({"form": {}} if self.elicitation_form else {}),
                **({"url": {}} if self.elicitation_url else {}),
            }
        if self.extra:
            caps.update(self.extra)
        return {k: v for k, v in caps.items() if k not in self.absent}


class PermissionPolicy:
    """How the endpoint answers ``session/request_permission``.

    One of ``allow_once``, ``allow_always``, ``reject_once``,
    ``reject_always``, ``reject`` (any reject option), ``allow`` (any allow
    option), ``cancelled``, ``never`` (no answer), ``hold`` (wait for the
    test to call ``ClientEndpoint.answer_permission``), or ``option:<id>``.
    """

    KINDS = (
        "allow_once",
        "allow_always",
        "reject_once",
        "reject_always",
        "allow",
        "reject",
        "cancelled",
        "never",
        "hold",
    )

    def __init__(self, spec: str = "allow_once") -> None:
        if spec not in self.KINDS and not spec.startswith("option:"):
            raise ValueError(f"unknown permission policy {spec!r}; use one of {', '.join(self.KINDS)} or option:<id>")
        self.spec = spec

    def choose(self, options: Sequence[Any]) -> dict[str, Any] | None:
        """The outcome for these options, or ``None`` for never/hold."""
        if self.spec in ("never", "hold"):
            return None
        if self.spec == "cancelled":
            return {"outcome": "cancelled"}
        valid = [o for o in options if isinstance(o, dict) and isinstance(o.get("optionId"), str)]
        if self.spec.startswith("option:"):
            return {"outcome": "selected", "optionId": self.spec[len("option:") :]}
        wanted = {
            "allow": ("allow_once", "allow_always"),
            "reject": ("reject_once", "reject_always"),
        }.get(self.spec, (self.spec,))
        for kind in wanted:
            for o in valid:
                if o.get("kind") == kind:
                    return {"outcome": "selected", "optionId": o["optionId"]}
        # Fall back within the same family (allow_once asked, only allow_always offered).
        family = "allow" if self.spec.startswith("allow") else "reject"
        for o in valid:
            if str(o.get("kind", "")).startswith(family):
                return {"outcome": "selected", "optionId": o["optionId"]}
        return {"outcome": "cancelled"}


@dataclass
class PermissionCall:
    """One permission request from the agent and what we did with it."""

    request: Request
    arrived_at_event: int
    answered: anyio.Event = field(default_factory=anyio.Event)
    outcome: dict[str, Any] | None = None
    _release: anyio.Event = field(default_factory=anyio.Event)

    @property
    def session_id(self) -> Any:
        return self.request.params.get("sessionId") if isinstance(self.request.params, dict) else None

    @property
    def tool_call_id(self) -> Any:
        p = self.request.params if isinstance(self.request.params, dict) else {}
        tc = p.get("toolCall")
        return tc.get("toolCallId") if isinstance(tc, dict) else None


@dataclass
class ElicitationCall:
    """One ``elicitation/create`` of the agent and what we answered (None: refused)."""

    request: Request
    arrived_at_event: int
    answer: dict[str, Any] | None = None


#: An elicitation action no agent knows (the schema's "other" variant, ``_`` for extensions), and
#: the value its content carries: an agent that shows it took the answer for an ``accept``.
UNKNOWN_ACTION = "_acp_conformance_unknown_action"
UNKNOWN_ACTION_MARKER = "acp-conformance-unknown-action-7d1e"


def form_content(requested: Any) -> dict[str, Any]:
    """An ``accept`` content for a form's ``requestedSchema``: each property's default, else its
    first enum value, else a value of its type (properties of unknown type are left out)."""
    props = requested.get("properties") if isinstance(requested, dict) else None
    out: dict[str, Any] = {}
    for name, prop in (props or {}).items():
        if not isinstance(prop, dict):
            continue
        if "default" in prop:
            out[name] = prop["default"]
        elif isinstance(prop.get("enum"), list) and prop["enum"]:
            out[name] = prop["enum"][0]
        elif isinstance(prop.get("oneOf"), list) and prop["oneOf"] and isinstance(prop["oneOf"][0], dict):
            out[name] = prop["oneOf"][0].get("const")
        else:
            typed = {"string": "acp-conformance", "number": 1.5, "integer": 1, "boolean": True, "array": []}
            if prop.get("type") in typed:
                out[name] = typed[prop["type"]]
    return out


@dataclass
class HeldRequest:
    """An agent request (``fs/*``, ``terminal/*``) the endpoint holds until the test releases it."""

    request: Request
    arrived_at_event: int
    released_at_event: int | None = None
    _release: anyio.Event = field(default_factory=anyio.Event)

    @property
    def session_id(self) -> Any:
        return self.request.params.get("sessionId") if isinstance(self.request.params, dict) else None

    @property
    def released(self) -> bool:
        return self._release.is_set()


@dataclass
class Turn:
    """One prompt turn as observed: the response and the updates before it."""

    session_id: str
    request_id: Any
    response: Response | None
    updates: list[Notification]
    start_event: int
    end_event: int
    #: Events of the turn the peer's bounded event log no longer holds (a flood: it keeps a
    #: head and a tail, docs/hostile-peers.md): when non-zero, ``updates`` is incomplete.
    dropped: int = 0

    @property
    def stop_reason(self) -> Any:
        if self.response is None or self.response.is_error or not isinstance(self.response.result, dict):
            return None
        return self.response.result.get("stopReason")


class ClientEndpoint:
    """A scriptable ACP client on top of a ``Peer`` in the client role."""

    def __init__(
        self,
        peer: Peer,
        *,
        capabilities: ClientCapabilities | None = None,
        sandbox: Sandbox | None = None,
        permission: PermissionPolicy | str = "allow_once",
        terminals: VirtualTerminals | None = None,
        client_info: dict[str, Any] | None = None,
    ) -> None:
        self.peer = peer
        self.capabilities = capabilities or ClientCapabilities()
        self.sandbox = sandbox
        self.permission = permission if isinstance(permission, PermissionPolicy) else PermissionPolicy(permission)
        self.terminals = terminals or VirtualTerminals()
        self.client_info = client_info or {"name": "acp-conformance", "version": _version()}
        self.init_result: dict[str, Any] | None = None
        self.sessions: dict[str, dict[str, Any]] = {}
        # A request the agent did not advertise (session/load without loadSession...) is one no
        # conforming client sends: the peer charges a silence after it as robustness.
        peer.ungranted = lambda method, params: ungranted(method, params, self.agent_capabilities, peer="agent")
        peer.holding = self.held_request
        self.permission_calls: list[PermissionCall] = []
        self.permission_arrived = anyio.Event()
        #: Sessions whose running turn we cancelled: permission requests arriving for them are
        #: answered ``cancelled``.  Per turn: an entry ends with the cancelled turn (its prompt
        #: answered, ``is_cancelled``) or when a new prompt starts on the session.
        self.cancelled_sessions: set[str] = set()
        self._cancelled_prompt: dict[str, Any] = {}
        self._running_prompt: dict[str, Any] = {}
        #: Methods (``fnmatch`` patterns such as ``fs/*``) whose requests are held until ``release``.
        self.hold_methods: set[str] = set()
        self.held: list[HeldRequest] = []
        self.held_arrived = anyio.Event()
        #: More things that can hold a turn open, asked by ``holding`` (e.g. a scripted model
        #: endpoint streaming a reply it has not finished): each returns a reason or None.
        self.hold_probes: list[Callable[[], str | None]] = []
        h = peer.handlers
        h["session/request_permission"] = self._on_permission
        h["fs/read_text_file"] = self._on_read
        h["fs/write_text_file"] = self._on_write
        h["terminal/create"] = self._on_term_create
        h["terminal/output"] = self._on_term_output
        h["terminal/wait_for_exit"] = self._on_term_wait
        h["terminal/kill"] = self._on_term_kill
        h["terminal/release"] = self._on_term_release
        h["elicitation/create"] = self._on_elicit
        #: How an advertised elicitation is answered: ``accept`` (content from the requested
        #: schema), ``decline``, ``cancel``, or ``unknown-action`` (an extension action the agent
        #: cannot know, carrying ``UNKNOWN_ACTION_MARKER`` in every field of its content).
        self.elicitation = "accept"
        self.elicitation_calls: list[ElicitationCall] = []

    # ------------------------------------------------------------ agent info
    @property
    def agent_capabilities(self) -> dict[str, Any]:
        caps = (self.init_result or {}).get("agentCapabilities")
        return caps if isinstance(caps, dict) else {}

    def agent_supports(self, path: str) -> bool:
        """Whether the agent advertised the dotted capability (``checks.gating.advertised``)."""
        return advertised(self.agent_capabilities, path)

    # ------------------------------------------------------------- requests
    async def initialize(
        self, protocol_version: Any = 1, *, timeout: float | None = None, **extra: Any
    ) -> dict[str, Any]:
        """``initialize`` with this client's capabilities and info (``timeout``: a process's first
        answer may take its start-up time)."""
        params = {
            "protocolVersion": protocol_version,
            "clientCapabilities": self.capabilities.to_wire(),
            "clientInfo": self.client_info,
            **extra,
        }
        result = await self.peer.request("initialize", params, validate=False, timeout=timeout)
        self.init_result = result if isinstance(result, dict) else {}
        return self.init_result

    async def new_session(self, cwd: str | None = None, mcp_servers: list[Any] | None = None) -> str:
        root = cwd or (str(self.sandbox.root) if self.sandbox else os.getcwd())
        result = await self.peer.request("session/new", {"cwd": root, "mcpServers": mcp_servers or []})
        if not isinstance(result, dict) or not isinstance(result.get("sessionId"), str):
            raise RpcError("session/new", None, f"result carries no string sessionId: {result!r}")
        sid: str = result["sessionId"]
        self.sessions[sid] = result
        return sid

    async def send_prompt(self, session_id: str, prompt: str | list[dict[str, Any]]) -> tuple[Any, int]:
        """Send ``session/prompt`` without waiting; returns ``(request id, event index)``."""
        blocks = [{"type": "text", "text": prompt}] if isinstance(prompt, str) else prompt
        start = len(self.peer.events)
        rid = await self.peer.send_request("session/prompt", {"sessionId": session_id, "prompt": blocks})
        self.note_prompt(session_id, rid)
        return rid, start

    # ------------------------------------------------------------- per turn
    def note_prompt(self, session_id: str, rid: Any) -> None:
        """A new turn starts on the session: a cancel of an earlier turn no longer applies."""
        self.cancelled_sessions.discard(session_id)
        self._cancelled_prompt.pop(session_id, None)
        self._running_prompt[session_id] = rid

    def mark_cancelled(self, session_id: str) -> None:
        """We sent ``session/cancel`` for the session's running turn (see ``is_cancelled``)."""
        self.cancelled_sessions.add(session_id)
        self._cancelled_prompt[session_id] = self._running_prompt.get(session_id)

    def is_cancelled(self, session_id: Any) -> bool:
        """Whether the session's current turn is one we cancelled.  Stale entries (the cancelled
        turn has been answered since) are dropped: every piece of per-turn state ends with its turn."""
        if session_id not in self.cancelled_sessions:
            return False
        rid = self._cancelled_prompt.get(session_id)
        if rid is not None and not self.peer.conn.is_outstanding(rid):
            self.cancelled_sessions.discard(session_id)
            self._cancelled_prompt.pop(session_id, None)
            return False
        return True

    def holding(self, session_id: Any) -> str | None:
        """What the suite holds that keeps the session's turn from ending by itself, or None.

        A request of the agent we have not answered (a permission request, or an ``fs/*`` /
        ``terminal/*`` request held with ``hold_methods``): an agent waiting for our answer
        cannot have finished its turn.  Or a probe's reason (a scripted model stream the
        suite controls, still open)."""
        held = self._held_request(session_id)
        if held:
            return held
        for probe in self.hold_probes:
            reason = probe()
            if reason:
                return reason
        return None

    def held_request(self) -> str:
        """A request of the agent's, in any session, that we hold unanswered ("" when none):
        ``Peer.holding``, by which a silence meanwhile is no proof that the agent never answers."""
        return self._held_request(None)

    def _held_request(self, session_id: Any) -> str:
        """The first request of the agent's (of ``session_id``, or of any session when None) that
        the suite holds unanswered, said as ``holding`` says it; "" when none."""
        for call in self.permission_calls:
            if call.outcome is None and session_id in (None, call.session_id):
                return f"its session/request_permission (id {call.request.id!r}) was unanswered, held by the suite"
        for held in self.held:
            if not held.released and session_id in (None, held.session_id):
                return f"its {held.request.method} (id {held.request.id!r}) was unanswered, held by the suite"
        return ""

    async def wait_held(self, timeout: float | None = None, index: int = 0) -> HeldRequest:
        """Wait for the ``index``-th held request of this connection."""
        limit = self.peer.timeout if timeout is None else timeout
        with anyio.move_on_after(limit):
            while len(self.held) <= index:
                await self.held_arrived.wait()
            return self.held[index]
        raise PeerTimeout(f"the agent sent no held request within {limit:g} s", self.peer.stderr_tail())

    def release(self, held: HeldRequest) -> None:
        """Serve a held request now (its handler answers it as it would have)."""
        if not held.released:
            held.released_at_event = len(self.peer.events)
            held._release.set()

    def release_all(self) -> None:
        for held in self.held:
            self.release(held)

    async def _hold(self, req: Request) -> None:
        """Hold ``req`` until the test releases it, if its method is held."""
        if not any(fnmatch.fnmatchcase(req.method, pattern) for pattern in self.hold_methods):
            return
        held = HeldRequest(req, len(self.peer.events))
        self.held.append(held)
        ev, self.held_arrived = self.held_arrived, anyio.Event()
        ev.set()
        await held._release.wait()

    async def finish_turn(self, session_id: str, rid: Any, start: int, timeout: float | None = None) -> Turn:
        resp = await self.peer.wait_response(rid, method="session/prompt", timeout=timeout)
        end = len(self.peer.events)
        # Up to the response itself: what came in the same read after it (output the agent wrote
        # right behind its answer) is not the turn's, whatever judges it later.
        for i in range(end - 1, start - 1, -1):
            if self.peer.events.get(i) is resp:
                end = i + 1
                break
        events = self.peer.events[start:end]
        dropped = (end - start) - len(events)  # slices of the bounded log yield the kept events only
        updates = [
            e
            for e in events
            if isinstance(e, Notification)
            and e.method == "session/update"
            and isinstance(e.params, dict)
            and e.params.get("sessionId") == session_id
        ]
        return Turn(session_id, rid, resp, updates, start, end, dropped)

    async def prompt(self, session_id: str, prompt: str | list[dict[str, Any]], timeout: float | None = None) -> Turn:
        rid, start = await self.send_prompt(session_id, prompt)
        return await self.finish_turn(session_id, rid, start, timeout)

    async def cancel(self, session_id: str, *, answer_pending: bool = True) -> None:
        """Send ``session/cancel``; a conforming client then answers every
        pending permission request of that session with ``cancelled``."""
        self.mark_cancelled(session_id)
        await self.peer.notify("session/cancel", {"sessionId": session_id})
        if answer_pending:
            await self._cancel_pending_permissions(session_id)

    async def send_close(self, session_id: str) -> Any:
        """Send ``session/close`` (its id is returned, not awaited): the agent cancels the session's
        work "as if session/cancel had been called" (session-setup.mdx), so a conforming client
        answers its pending permission requests with ``cancelled`` as it would after a cancel; an
        agent may wait for those answers before it answers the close."""
        self.mark_cancelled(session_id)
        rid = await self.peer.send_request("session/close", {"sessionId": session_id})
        await self._cancel_pending_permissions(session_id)
        return rid

    async def _cancel_pending_permissions(self, session_id: str) -> None:
        """Answer every unanswered permission request of the session ``cancelled``."""
        for call in self.permission_calls:
            if call.session_id == session_id and call.outcome is None:
                await self.answer_permission(call, {"outcome": "cancelled"})

    # ------------------------------------------------------------ permission
    async def wait_permission(self, timeout: float | None = None, index: int = 0) -> PermissionCall:
        """Wait for the ``index``-th permission request of this connection."""
        limit = self.peer.timeout if timeout is None else timeout
        with anyio.move_on_after(limit):
            while len(self.permission_calls) <= index:
                ev = self.permission_arrived
                await ev.wait()
            return self.permission_calls[index]
        raise PeerTimeout(f"the agent sent no session/request_permission within {limit:g} s", self.peer.stderr_tail())

    async def answer_permission(self, call: PermissionCall, outcome: dict[str, Any]) -> None:
        if call.outcome is not None:
            return
        call.outcome = outcome
        await self.peer.respond(call.request.id, {"outcome": outcome}, method="session/request_permission")
        call.answered.set()

    async def refuse_permission(self, call: PermissionCall, code: int, message: str) -> None:
        """Answer a pending permission request with an error instead of an outcome (once, like
        ``answer_permission``: a request already answered is left alone)."""
        if call.outcome is not None:
            return
        call.outcome = {"error": code}
        await self.peer.respond_error(call.request.id, code, message)
        call.answered.set()

    async def _on_permission(self, req: Request) -> Any:
        call = PermissionCall(req, len(self.peer.events))
        self.permission_calls.append(call)
        ev, self.permission_arrived = self.permission_arrived, anyio.Event()
        ev.set()
        if self.is_cancelled(call.session_id):
            # A conforming client answers requests arriving after its cancel with cancelled.
            await self.answer_permission(call, {"outcome": "cancelled"})
            return NO_ANSWER
        options = req.params.get("options", []) if isinstance(req.params, dict) else []
        outcome = self.permission.choose(options)
        if outcome is None:
            return NO_ANSWER  # never / hold: the test answers via answer_permission()
        await self.answer_permission(call, outcome)
        return NO_ANSWER

    # ------------------------------------------------------------ elicitation
    async def _on_elicit(self, req: Request) -> Any:
        call = ElicitationCall(req, len(self.peer.events))
        self.elicitation_calls.append(call)
        params = req.params if isinstance(req.params, dict) else {}
        mode = params.get("mode")
        if mode not in elicitation_modes(self.capabilities.to_wire()):
            # elicitation.mdx § URL completion: a mode the client has not advertised is -32602.
            # Whether the agent should have asked is elicit.mode.gated's (the gating tests).
            raise HandlerError(ErrorCode.INVALID_PARAMS, f"elicitation mode {mode!r} was not advertised")
        if self.elicitation == "unknown-action":
            requested = params.get("requestedSchema")
            props = requested.get("properties") if isinstance(requested, dict) else None
            content = {name: UNKNOWN_ACTION_MARKER for name in props} if isinstance(props, dict) else {}
            call.answer = {"action": UNKNOWN_ACTION, "content": content}
        elif self.elicitation == "accept" and mode == "form":
            call.answer = {"action": "accept", "content": form_content(params.get("requestedSchema"))}
        elif self.elicitation == "accept":
            call.answer = {"action": "accept"}  # consent to open the URL (a test client never opens it)
        else:
            call.answer = {"action": self.elicitation}
        return call.answer

    # -------------------------------------------------------------------- fs
    def _gate(self, req: Request, allowed: bool, clause: str, what: str) -> None:
        """One ungated call, one clause: the gate's own, or the rule of how it was withheld."""
        top = req.method.split("/", 1)[0]
        if not allowed and self.capabilities.flags_omitted:
            # Not advertised by leaving the flag out: the default (false) is the clause broken.
            clause, what = "cap.client.fs-defaults", f"{what} (omitted: false by default)"
        elif not allowed and top in self.capabilities.absent:
            clause, what = "cap.omitted-unsupported", f"{what} (clientCapabilities.{top} left out)"
        if not allowed:
            self.peer.flag(clause, f"agent called {req.method} although the client did not advertise {what}", about=req)
            raise HandlerError(
                ErrorCode.METHOD_NOT_FOUND, f"{req.method} is not supported by this client ({what} is false)"
            )

    def _params(self, req: Request) -> dict[str, Any]:
        if not isinstance(req.params, dict):
            raise HandlerError(ErrorCode.INVALID_PARAMS, "params must be an object")
        return req.params

    def _check_path(self, req: Request, path: Any, clause: str) -> None:
        if isinstance(path, str) and not os.path.isabs(path):
            self.peer.flag(clause, f"{req.method} path {path!r} is not absolute", about=req)

    async def _on_read(self, req: Request) -> Any:
        self._gate(req, self.capabilities.fs_read, "fs.read.gated", "fs.readTextFile")
        await self._hold(req)
        p = self._params(req)
        self._check_path(req, p.get("path"), "fs.read.shape")
        if self.sandbox is None:
            raise HandlerError(ErrorCode.INTERNAL_ERROR, "this client has no file sandbox")
        return {"content": self.sandbox.read(p.get("path"), p.get("line"), p.get("limit"))}

    async def _on_write(self, req: Request) -> Any:
        self._gate(req, self.capabilities.fs_write, "fs.write.gated", "fs.writeTextFile")
        await self._hold(req)
        p = self._params(req)
        self._check_path(req, p.get("path"), "fs.write.shape")
        if self.sandbox is None:
            raise HandlerError(ErrorCode.INTERNAL_ERROR, "this client has no file sandbox")
        self.sandbox.write(p.get("path"), p.get("content"))
        return {}

    # -------------------------------------------------------------- terminal
    async def _on_term_create(self, req: Request) -> Any:
        self._gate(req, self.capabilities.terminal, "term.gated", "terminal")
        await self._hold(req)
        p = self._params(req)
        cwd = p.get("cwd")
        if isinstance(cwd, str) and not os.path.isabs(cwd):
            self.peer.flag("term.create.shape", f"terminal/create cwd {cwd!r} is not absolute", about=req)
        return {"terminalId": self.terminals.create(p)}

    async def _on_term_output(self, req: Request) -> Any:
        self._gate(req, self.capabilities.terminal, "term.gated", "terminal")
        await self._hold(req)
        t = self.terminals.get(self._params(req).get("terminalId"))
        output, truncated = self.terminals.truncate(t.output, t.limit)
        result: dict[str, Any] = {"output": output, "truncated": truncated}
        if t.exit_code is not None or t.signal is not None:
            result["exitStatus"] = {"exitCode": t.exit_code, "signal": t.signal}
        return result

    async def _on_term_wait(self, req: Request) -> Any:
        self._gate(req, self.capabilities.terminal, "term.gated", "terminal")
        await self._hold(req)
        t = self.terminals.get(self._params(req).get("terminalId"))
        return {"exitCode": t.exit_code, "signal": t.signal}

    async def _on_term_kill(self, req: Request) -> Any:
        self._gate(req, self.capabilities.terminal, "term.gated", "terminal")
        await self._hold(req)
        self.terminals.get(self._params(req).get("terminalId"))
        return {}

    async def _on_term_release(self, req: Request) -> Any:
        self._gate(req, self.capabilities.terminal, "term.gated", "terminal")
        await self._hold(req)
        self.terminals.get(self._params(req).get("terminalId")).released = True
        return {}


def _version() -> str:
    from acp_conformance import __version__

    return __version__
