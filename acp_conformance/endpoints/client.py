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
* terminal: virtual by default, with scripted output and exit status.

It also judges the agent while serving: a call the client never
advertised (``fs/*`` without ``fs``, ``terminal/*`` without ``terminal``)
is recorded as a violation of its gating clause and refused.
"""

from __future__ import annotations

import errno
import fnmatch
import os
import stat
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio

from acp_conformance.checks.gating import advertised
from acp_conformance.core import jsonrpc
from acp_conformance.core.events import Notification, Request, Response
from acp_conformance.errors import PeerTimeout, RpcError
from acp_conformance.peer import NO_ANSWER, HandlerError, Peer

__all__ = [
    "ClientCapabilities",
    "ClientEndpoint",
    "HeldRequest",
    "PermissionCall",
    "PermissionPolicy",
    "Sandbox",
    "Turn",
    "VirtualTerminals",
]

ErrorCode = jsonrpc.ErrorCode
MAX_READ_BYTES = 16 * 1024 * 1024
_PATH_ERRNOS = frozenset({errno.ENAMETOOLONG, errno.ELOOP, errno.ENOTDIR, errno.EISDIR})


@dataclass(frozen=True)
class ClientCapabilities:
    """What the mock client advertises in ``initialize``."""

    fs_read: bool = True
    fs_write: bool = True
    terminal: bool = True
    elicitation_form: bool = False
    extra: dict[str, Any] | None = None

    @classmethod
    def none(cls) -> ClientCapabilities:
        return cls(fs_read=False, fs_write=False, terminal=False)

    def to_wire(self) -> dict[str, Any]:
        caps: dict[str, Any] = {
            "fs": {"readTextFile": self.fs_read, "writeTextFile": self.fs_write},
            "terminal": self.terminal,
        }
        if self.elicitation_form:
            caps["elicitation"] = {"form": {}}
        if self.extra:
            caps.update(self.extra)
        return caps


class Sandbox:
    """A directory the agent may read and write through ``fs/*``, and nothing else.

    The agent under test chooses the paths, and a local agent can also plant
    things in the sandbox directly (it is its session cwd), so:

    * the path is resolved (symlinks followed) and must stay under the root:
      ``..``, absolute paths elsewhere and symlinks pointing out are refused;
    * the resolved path is then opened one component at a time from the root
      with ``O_NOFOLLOW``: a component swapped for a symlink after the check is
      refused instead of followed (no check-then-use race);
    * only regular files are read or written: FIFOs, devices, sockets and
      directories are refused (a FIFO would block the suite forever), and so
      are files with more than one hard link (one may alias a file outside);
    * a file is truncated only after it was opened and checked, and reads are
      capped at ``MAX_READ_BYTES`` even if the file grows meanwhile;
    * every failure is a JSON-RPC error with a message, never an exception.
    """

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root).resolve()
        self.writes: list[tuple[str, str]] = []
        self.reads: list[str] = []

    def resolve(self, path: Any) -> Path:
        if not isinstance(path, str) or not path:
            raise HandlerError(ErrorCode.INVALID_PARAMS, "path must be a non-empty string")
        if not os.path.isabs(path):
            raise HandlerError(ErrorCode.INVALID_PARAMS, f"path {path!r} is not absolute")
        if "\x00" in path:
            raise HandlerError(ErrorCode.INVALID_PARAMS, "path contains a NUL byte")
        # resolve() follows symlinks, so a link inside pointing outside is caught too.
        try:
            real = Path(path).resolve()
        except RuntimeError:  # Python < 3.13 reports a symlink loop this way
            raise HandlerError(ErrorCode.INVALID_PARAMS, f"path {path!r} is a symlink loop") from None
        except OSError as exc:
            raise HandlerError(ErrorCode.INVALID_PARAMS, f"path {path!r} cannot be resolved: {exc.strerror}") from None
        if real != self.root and self.root not in real.parents:
            raise HandlerError(ErrorCode.INVALID_PARAMS, f"path {path!r} is outside the session sandbox {self.root}")
        return real

    # ------------------------------------------------------- race-free opening
    def _open_parent(self, real: Path, path: str, *, create: bool) -> int:
        """An fd of ``real``'s directory, walked from the root without following links."""
        parts = real.relative_to(self.root).parts
        fd = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            for part in parts[:-1]:
                try:
                    nxt = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
                except FileNotFoundError:
                    if not create:
                        raise
                    os.mkdir(part, 0o755, dir_fd=fd)
                    nxt = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
                os.close(fd)
                fd = nxt
        except OSError as exc:
            os.close(fd)
            if isinstance(exc, FileNotFoundError):
                raise
            if exc.errno in (errno.ELOOP, errno.ENOTDIR):  # a symlink or a file where a directory was checked
                raise HandlerError(
                    ErrorCode.INVALID_PARAMS, f"path {path!r} changed while being opened; refused"
                ) from None
            raise self._os_error(exc, "open", path) from None
        return fd

    @staticmethod
    def _os_error(exc: OSError, verb: str, path: str) -> HandlerError:
        """An OS error as a JSON-RPC error: bad path shapes are the agent's invalid params."""
        code = ErrorCode.INVALID_PARAMS if exc.errno in _PATH_ERRNOS else ErrorCode.INTERNAL_ERROR
        return HandlerError(code, f"cannot {verb} {path}: {exc.strerror}")

    @staticmethod
    def _check_regular(st: os.stat_result, path: str) -> None:
        if stat.S_ISDIR(st.st_mode):
            raise HandlerError(ErrorCode.INVALID_PARAMS, f"{path} is a directory")
        if not stat.S_ISREG(st.st_mode):
            raise HandlerError(
                ErrorCode.INVALID_PARAMS, f"{path} is not a regular file (FIFO, device, socket or symlink); refused"
            )
        if st.st_nlink > 1:
            raise HandlerError(
                ErrorCode.INVALID_PARAMS,
                f"{path} has {st.st_nlink} hard links (one may be outside the sandbox); refused",
            )

    def read(self, path: Any, line: Any = None, limit: Any = None) -> str:
        real = self.resolve(path)
        not_found = HandlerError(ErrorCode.RESOURCE_NOT_FOUND, f"file not found: {path}", {"uri": f"file://{path}"})
        if real == self.root:
            raise not_found  # a directory is no file (as before the hardening)
        try:
            parent = self._open_parent(real, path, create=False)
        except FileNotFoundError:
            raise not_found from None
        try:
            try:
                before = os.stat(real.name, dir_fd=parent, follow_symlinks=False)
            except FileNotFoundError:
                raise not_found from None
            if stat.S_ISDIR(before.st_mode):
                raise not_found
            self._check_regular(before, path)
            flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
            fd = os.open(real.name, flags, dir_fd=parent)
        except OSError as exc:
            raise self._os_error(exc, "read", path) from None
        finally:
            os.close(parent)
        try:
            st = os.fstat(fd)
            if (st.st_dev, st.st_ino) != (before.st_dev, before.st_ino):
                raise HandlerError(ErrorCode.INVALID_PARAMS, f"{path} changed while being opened; refused")
            self._check_regular(st, path)
            if st.st_size > MAX_READ_BYTES:
                raise HandlerError(ErrorCode.INVALID_PARAMS, f"file {path} is larger than {MAX_READ_BYTES} bytes")
            chunks: list[bytes] = []
            size = 0
            while size <= MAX_READ_BYTES:
                chunk = os.read(fd, min(1024 * 1024, MAX_READ_BYTES + 1 - size))
                if not chunk:
                    break
                chunks.append(chunk)
                size += len(chunk)
            if size > MAX_READ_BYTES:
                raise HandlerError(ErrorCode.INVALID_PARAMS, f"file {path} is larger than {MAX_READ_BYTES} bytes")
            data = b"".join(chunks)
        except OSError as exc:
            raise self._os_error(exc, "read", path) from None
        finally:
            os.close(fd)
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            raise HandlerError(ErrorCode.INVALID_PARAMS, f"file {path} is not UTF-8 text") from None
        self.reads.append(str(real))
        if line is None and limit is None:
            return text
        # Only "\n" ends a line: str.splitlines() would also split on \f, \x85, U+2028...
        lines = text.split("\n")
        lines = [line + "\n" for line in lines[:-1]] + ([lines[-1]] if lines[-1] else [])
        start = max(int(line) - 1, 0) if isinstance(line, int) else 0
        end = start + int(limit) if isinstance(limit, int) else len(lines)
        return "".join(lines[start:end])

    def write(self, path: Any, content: Any) -> None:
        if not isinstance(content, str):
            raise HandlerError(ErrorCode.INVALID_PARAMS, "content must be a string")
        real = self.resolve(path)
        if real == self.root:
            raise HandlerError(ErrorCode.INVALID_PARAMS, f"{path} is a directory")
        try:
            data = content.encode("utf-8")
        except UnicodeEncodeError:  # JSON may carry lone surrogates ("\ud800"): not text a file can hold
            raise HandlerError(ErrorCode.INVALID_PARAMS, "content is not valid Unicode (lone surrogate)") from None
        try:
            parent = self._open_parent(real, path, create=True)
        except OSError as exc:
            raise self._os_error(exc, "write", path) from None
        try:
            try:
                before: os.stat_result | None = os.stat(real.name, dir_fd=parent, follow_symlinks=False)
            except FileNotFoundError:
                before = None
            if before is not None:
                self._check_regular(before, path)
            # No O_TRUNC: truncate only once the opened file is known to be the one checked.
            flags = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
            fd = os.open(real.name, flags, 0o644, dir_fd=parent)
        except OSError as exc:
            raise self._os_error(exc, "write", path) from None
        finally:
            os.close(parent)
        try:
            st = os.fstat(fd)
            if before is not None and (st.st_dev, st.st_ino) != (before.st_dev, before.st_ino):
                raise HandlerError(ErrorCode.INVALID_PARAMS, f"{path} changed while being opened; refused")
            self._check_regular(st, path)
            os.ftruncate(fd, 0)
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
        except OSError as exc:
            raise self._os_error(exc, "write", path) from None
        finally:
            os.close(fd)
        self.writes.append((str(real), content))


@dataclass
class _Terminal:
    command: str
    args: list[str]
    output: str
    exit_code: int | None
    signal: str | None = None
    limit: int | None = None
    released: bool = False


class VirtualTerminals:
    """Terminals that run nothing: scripted output and exit status per command.

    ``script`` maps a command name to ``(output, exit_code)``; ``echo`` echoes
    its arguments (no expansion: ``$SECRET`` stays ``$SECRET``); ``env`` and
    ``printenv`` show the *sandbox's* environment - a fixed minimal one
    (``PATH``, ``HOME`` and ``PWD`` at the requested cwd, ``SHELL``, ``LANG``,
    ``TERM``) plus the ``env`` of the request - never the user's; anything
    else prints nothing and exits 0.  Nothing is ever executed.
    """

    BASE_ENV = (
        ("PATH", "/usr/local/bin:/usr/bin:/bin"),
        ("SHELL", "/bin/sh"),
        ("LANG", "C.UTF-8"),
        ("TERM", "dumb"),
    )

    def __init__(self, script: dict[str, tuple[str, int]] | None = None) -> None:
        self.script = dict(script or {})
        self.terminals: dict[str, _Terminal] = {}
        self._n = 0

    def create(self, params: dict[str, Any]) -> str:
        command = params.get("command")
        args = params.get("args") or []
        if not isinstance(command, str):
            raise HandlerError(ErrorCode.INVALID_PARAMS, "command must be a string")
        if command in self.script:
            output, code = self.script[command]
        elif command == "echo":
            output, code = " ".join(str(a) for a in args) + "\n", 0
        elif command in ("env", "printenv"):
            output, code = self._env_command(command, args, params)
        else:
            output, code = "", 0
        self._n += 1
        tid = f"term-{self._n}"
        limit = params.get("outputByteLimit")
        self.terminals[tid] = _Terminal(
            command, list(args), output, code, limit=limit if isinstance(limit, int) else None
        )
        return tid

    def _env_command(self, command: str, args: Any, params: dict[str, Any]) -> tuple[str, int]:
        cwd = params.get("cwd")
        cwd = cwd if isinstance(cwd, str) and os.path.isabs(cwd) else "/"
        env = dict(self.BASE_ENV)
        env.update(HOME=cwd, PWD=cwd)
        extra = params.get("env")
        for item in extra if isinstance(extra, list) else []:
            if isinstance(item, dict) and isinstance(item.get("name"), str) and isinstance(item.get("value"), str):
                env[item["name"]] = item["value"]
        names = [a for a in args if isinstance(a, str)] if isinstance(args, list) else []
        if command == "printenv" and names:
            found = [env[n] for n in names if n in env]
            return "".join(v + "\n" for v in found), 0 if len(found) == len(names) else 1
        return "".join(f"{k}={v}\n" for k, v in sorted(env.items())), 0

    def get(self, tid: Any) -> _Terminal:
        term = self.terminals.get(tid) if isinstance(tid, str) else None
        if term is None or term.released:
            raise HandlerError(ErrorCode.INVALID_PARAMS, f"unknown or released terminal {tid!r}")
        return term

    @staticmethod
    def truncate(output: str, limit: int | None) -> tuple[str, bool]:
        """Keep the tail within ``limit`` bytes, cut on a character boundary."""
        data = output.encode("utf-8")
        if limit is None or len(data) <= limit:
            return output, False
        tail = data[len(data) - limit :]
        # Drop UTF-8 continuation bytes at the cut so no character is split.
        i = 0
        while i < len(tail) and (tail[i] & 0xC0) == 0x80:
            i += 1
        return tail[i:].decode("utf-8"), True

    @property
    def unreleased(self) -> list[str]:
        return [tid for tid, t in self.terminals.items() if not t.released]


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

    # ------------------------------------------------------------ agent info
    @property
    def agent_capabilities(self) -> dict[str, Any]:
        caps = (self.init_result or {}).get("agentCapabilities")
        return caps if isinstance(caps, dict) else {}

    def agent_supports(self, path: str) -> bool:
        """Whether the agent advertised the dotted capability (``checks.gating.advertised``)."""
        return advertised(self.agent_capabilities, path)

    # ------------------------------------------------------------- requests
    async def initialize(self, protocol_version: Any = 1, **extra: Any) -> dict[str, Any]:
        params = {
            "protocolVersion": protocol_version,
            "clientCapabilities": self.capabilities.to_wire(),
            "clientInfo": self.client_info,
            **extra,
        }
        result = await self.peer.request("initialize", params, validate=False)
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
        for call in self.permission_calls:
            if call.session_id == session_id and call.outcome is None:
                return f"its session/request_permission (id {call.request.id!r}) was unanswered, held by the suite"
        for held in self.held:
            if held.session_id == session_id and not held.released:
                return f"its {held.request.method} (id {held.request.id!r}) was unanswered, held by the suite"
        for probe in self.hold_probes:
            reason = probe()
            if reason:
                return reason
        return None

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

    # -------------------------------------------------------------------- fs
    def _gate(self, req: Request, allowed: bool, clause: str, what: str) -> None:
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
