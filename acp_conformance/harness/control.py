"""The control channel: how the suite plays the agent a client launches.

Client certification needs the *client under test* to start the agent
itself, yet every test wants to script the agent side in-process and see
every byte on the wire.  So the agent the client launches is a tiny relay
(``python -m acp_conformance.harness.relay --control ADDR --token T``) that connects back
to the test process over a local socket and forwards bytes both ways:

* relay -> suite: a hello (pid, argv, cwd), every chunk it reads on its
  stdin (the client's frames, untouched), stdin EOF, signals it receives;
* suite -> relay: bytes to write on its stdout (the "agent's" frames),
  bytes for its stderr, close stdout, exit with a status.

The socket address travels in the relay's command line, not in the
environment, so clients that scrub the environment of the agents they
start still work.  A Unix socket in a private (0700) temporary directory is
the default; TCP on 127.0.0.1 is the fallback.  Either way the relay must
present the per-server token first, and it exits as soon as the socket
closes, so a relay can never outlive its test.

Framing on the socket: one kind byte, a 4-byte big-endian length, the
payload.  ``RelayConnection`` implements the ``Transport`` interface, so a
``Peer`` in the agent role runs over it exactly as over a pipe: the
suite-side ``Peer`` sees the real wire.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import shlex
import shutil
import struct
import sys
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import orjson
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from acp_conformance._util import single_exception
from acp_conformance.errors import ConfigurationError, PeerExited, PeerTimeout

__all__ = [
    "HEADER",
    "ControlServer",
    "FrameReader",
    "Hello",
    "RelayConnection",
    "encode_frame",
    "open_control_server",
    "relay_command",
]

#: Frame kinds, relay -> suite.
HELLO, STDIN, STDIN_EOF, SIGNAL, STDOUT_BROKEN = b"H", b"I", b"Z", b"S", b"B"
#: Frame kinds, suite -> relay.
STDOUT, STDERR, CLOSE_STDOUT, EXIT = b"O", b"E", b"C", b"X"

HEADER = struct.Struct(">cI")
MAX_PAYLOAD = 64 * 1024 * 1024
READ_CHUNK = 256 * 1024
#: Unix socket paths are limited to 107 bytes on Linux.
_MAX_UNIX_PATH = 100


def encode_frame(kind: bytes, payload: bytes = b"") -> bytes:
    """One control frame: kind byte, big-endian length, payload."""
    if len(kind) != 1:
        raise ValueError(f"frame kind must be one byte, got {kind!r}")
    return HEADER.pack(kind, len(payload)) + payload


class FrameReader:
    """Sans-IO decoder for control frames: bytes in, ``(kind, payload)`` out."""

    def __init__(self) -> None:
        self._buf = bytearray()

    def feed(self, data: bytes) -> list[tuple[bytes, bytes]]:
        self._buf += data
        out: list[tuple[bytes, bytes]] = []
        while len(self._buf) >= HEADER.size:
            kind, size = HEADER.unpack_from(self._buf)
            if size > MAX_PAYLOAD:
                raise ValueError(f"control frame of {size} bytes exceeds the {MAX_PAYLOAD} byte limit")
            end = HEADER.size + size
            if len(self._buf) < end:
                break
            out.append((kind, bytes(self._buf[HEADER.size : end])))
            del self._buf[:end]
        return out


@dataclass(frozen=True)
class Hello:
    """What the relay says about itself when it connects."""

    pid: int
    ppid: int
    argv: list[str]
    cwd: str
    token: str = ""
    env_keys: list[str] = field(default_factory=list)

    @classmethod
    def from_payload(cls, payload: bytes) -> Hello:
        data = orjson.loads(payload)
        if not isinstance(data, dict):
            raise ValueError("hello payload is not an object")
        return cls(
            pid=int(data.get("pid", 0)),
            ppid=int(data.get("ppid", 0)),
            argv=[str(a) for a in data.get("argv", [])],
            cwd=str(data.get("cwd", "")),
            token=str(data.get("token", "")),
            env_keys=[str(k) for k in data.get("env_keys", [])],
        )


def relay_command(address: str, token: str, python: str | None = None) -> list[str]:
    """The argv of the relay agent that connects back to ``address``."""
    argv = [python or sys.executable, "-m", "acp_conformance.harness.relay", "--control", address]
    if token:
        argv += ["--token", token]
    return argv


class RelayConnection:
    """One connected relay: a ``Transport`` over the agent's real stdio.

    ``receive`` yields what the client wrote on the agent's stdin (``b""``
    at stdin EOF or when the relay is gone); ``send`` writes on the agent's
    stdout.  ``write_stderr``, ``close_output`` and ``exit`` steer the relay.
    """

    def __init__(self, stream: anyio.abc.ByteStream, hello: Hello, reader: FrameReader, early: list[Any]) -> None:
        self.stream = stream
        self.hello = hello
        self.pid = hello.pid
        self._reader = reader
        self._early = early
        tx, rx = anyio.create_memory_object_stream[bytes](1 << 16)
        self._inbox_tx: MemoryObjectSendStream[bytes] = tx
        self._inbox_rx: MemoryObjectReceiveStream[bytes] = rx
        self.stdin_eof = anyio.Event()
        #: Set once the socket is gone: the relay process has exited (or is exiting).
        self.gone = anyio.Event()
        self.signals: list[int] = []
        self.stdout_broken = False
        self.stdin_bytes = 0
        self._send_lock = anyio.Lock()
        self._closed = False
        self._stdout_closed = False

    # ------------------------------------------------------------- reading
    async def pump(self) -> None:
        """Read control frames until the socket closes (run as a task)."""
        try:
            for kind, payload in self._early:
                await self._handle(kind, payload)
            while True:
                try:
                    data = await self.stream.receive(READ_CHUNK)
                except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
                    break
                try:
                    frames = self._reader.feed(data)
                except ValueError:
                    break
                for kind, payload in frames:
                    await self._handle(kind, payload)
        finally:
            self.stdin_eof.set()
            self.gone.set()
            self._inbox_tx.close()

    async def _handle(self, kind: bytes, payload: bytes) -> None:
        if kind == STDIN:
            self.stdin_bytes += len(payload)
            try:
                await self._inbox_tx.send(payload)
            except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                pass
        elif kind == STDIN_EOF:
            self.stdin_eof.set()
            self._inbox_tx.close()
        elif kind == SIGNAL:
            try:
                self.signals.append(int(payload))
            except ValueError:
                pass
        elif kind == STDOUT_BROKEN:
            self.stdout_broken = True

    async def receive(self) -> bytes:
        try:
            return await self._inbox_rx.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError):
            return b""

    # ------------------------------------------------------------- writing
    async def _send_frame(self, kind: bytes, payload: bytes = b"") -> None:
        if self._closed or self.gone.is_set():
            raise PeerExited("the relay agent is gone (its control connection closed)")
        try:
            async with self._send_lock:
                await self.stream.send(encode_frame(kind, payload))
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            raise PeerExited("the relay agent is gone (its control connection closed)") from None

    async def send(self, data: bytes) -> None:
        """Write ``data`` on the agent's stdout (what the client reads)."""
        if self._stdout_closed:
            raise PeerExited("the agent's stdout is already closed")
        await self._send_frame(STDOUT, data)

    async def write_stderr(self, data: bytes) -> None:
        """Write ``data`` on the agent's stderr."""
        await self._send_frame(STDERR, data)

    async def close_output(self) -> None:
        """Close the agent's stdout (the client sees EOF)."""
        if self._stdout_closed or self.gone.is_set():
            return
        self._stdout_closed = True
        try:
            await self._send_frame(CLOSE_STDOUT)
        except PeerExited:
            pass

    async def exit(self, code: int = 0) -> None:
        """Make the relay process exit with ``code``."""
        try:
            await self._send_frame(EXIT, str(int(code)).encode())
        except PeerExited:
            pass

    async def wait_gone(self, timeout: float) -> bool:
        with anyio.move_on_after(timeout):
            await self.gone.wait()
            return True
        return False

    async def aclose(self) -> None:
        """Close the socket; the relay exits when it sees that."""
        if self._closed:
            return
        self._closed = True
        with anyio.CancelScope(shield=True):
            try:
                await self.stream.aclose()
            except (OSError, anyio.BrokenResourceError):
                pass


class _TransportStream(anyio.abc.ByteStream):
    """An accepted control connection on asyncio's transports, as an anyio byte stream.

    Why not anyio's own Unix listener: on asyncio its socket streams wait for readiness with a
    reader callback that sets a future, and when a wait is cancelled in the same loop turn the
    socket becomes readable (a relay dying while its test tears down: the usual case here), the
    queued callback sets the cancelled future and asyncio reports ``InvalidStateError`` from the
    loop, which the test runner raises beside the test's own outcome.  asyncio's transports wake
    their readers only if they are still waiting, so a cancelled read is just a cancelled read.
    """

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._reader = reader
        self._writer = writer

    async def receive(self, max_bytes: int = 65536) -> bytes:
        try:
            data = await self._reader.read(max_bytes)
        except OSError as exc:
            raise anyio.BrokenResourceError from exc
        if not data:
            raise anyio.EndOfStream
        return data

    async def send(self, item: bytes) -> None:
        if self._writer.is_closing():
            raise anyio.ClosedResourceError
        try:
            self._writer.write(item)
            await self._writer.drain()
        except OSError as exc:
            raise anyio.BrokenResourceError from exc

    async def send_eof(self) -> None:
        if not self._writer.is_closing() and self._writer.can_write_eof():
            self._writer.write_eof()

    async def aclose(self) -> None:
        self._writer.close()
        with contextlib.suppress(OSError):
            await self._writer.wait_closed()


class ControlServer:
    """A listening control socket; relays connect to it."""

    def __init__(
        self,
        accepted: MemoryObjectReceiveStream[_TransportStream],
        address: str,
        token: str,
        tg: anyio.abc.TaskGroup,
    ) -> None:
        self._accepted = accepted
        self.address = address
        self.token = token
        self._tg = tg
        self.connections: list[RelayConnection] = []
        self.rejected: list[str] = []
        #: How many relays ``accept`` has handed out without an index (its next one is this index).
        self._handed = 0
        self._changed = anyio.Event()
        self.handshake_timeout = 10.0
        self._accept_scope = anyio.CancelScope()

    def relay_argv(self, python: str | None = None) -> list[str]:
        return relay_command(self.address, self.token, python)

    def relay_command_line(self, python: str | None = None) -> str:
        return shlex.join(self.relay_argv(python))

    def _notify(self) -> None:
        self._changed.set()
        self._changed = anyio.Event()

    async def _accept_loop(self) -> None:
        with self._accept_scope:
            async for stream in self._accepted:
                self._tg.start_soon(self._handshake, stream)

    async def _handshake(self, stream: anyio.abc.ByteStream) -> None:
        reader = FrameReader()
        frames: list[tuple[bytes, bytes]] = []
        with anyio.move_on_after(self.handshake_timeout):
            while not frames:
                try:
                    data = await stream.receive(READ_CHUNK)
                    frames = reader.feed(data)
                except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError, OSError, ValueError):
                    break
        kind, payload = frames[0] if frames else (b"", b"")
        try:
            hello = Hello.from_payload(payload) if kind == HELLO else None
        except (ValueError, TypeError, orjson.JSONDecodeError):
            hello = None
        if hello is None or (self.token and not secrets.compare_digest(hello.token, self.token)):
            self.rejected.append("no hello" if hello is None else f"wrong token from pid {hello.pid}")
            await stream.aclose()
            self._notify()
            return
        conn = RelayConnection(stream, hello, reader, frames[1:])
        self.connections.append(conn)
        self._tg.start_soon(conn.pump)
        self._notify()

    async def accept(self, timeout: float, index: int | None = None) -> RelayConnection:
        """The ``index``-th relay to connect (default: the first that ``accept`` has not handed out
        yet).  Not "the next to connect after this call": a relay that starts fast (or a caller
        slowed by load) connects before the caller gets here, and would be waited for in vain."""
        want = self._handed if index is None else index
        with anyio.move_on_after(timeout):
            while len(self.connections) <= want:
                await self._changed.wait()
            if index is None:
                self._handed = want + 1
            return self.connections[want]
        raise PeerTimeout(f"no agent connected to the control socket within {timeout:g} s")

    async def wait_change(self) -> None:
        await self._changed.wait()


def _unix_dir() -> str | None:
    """A private directory with a short enough path for a Unix socket."""
    for base in (tempfile.gettempdir(), "/tmp"):
        if len(os.path.join(base, "acpctl-xxxxxxxx", "c.sock")) <= _MAX_UNIX_PATH and os.path.isdir(base):
            return tempfile.mkdtemp(prefix="acpctl-", dir=base)
    return None


def parse_address(address: str) -> tuple[str, str]:
    """``unix:/path`` or ``tcp:HOST:PORT`` -> (kind, rest); bad input is a ``ConfigurationError``."""
    kind, sep, rest = address.partition(":")
    if not sep or kind not in ("unix", "tcp") or not rest:
        raise ConfigurationError(f"control address {address!r} must be unix:/path/to/socket or tcp:127.0.0.1:PORT")
    if kind == "tcp":
        host, _, port = rest.rpartition(":")
        if not host or not port.isdigit():
            raise ConfigurationError(f"control address {address!r}: expected tcp:HOST:PORT")
    elif not os.path.isabs(rest):
        raise ConfigurationError(f"control address {address!r}: the socket path must be absolute")
    return kind, rest


@asynccontextmanager
async def open_control_server(
    kind: str = "unix", *, address: str | None = None, token: str | None = None
) -> AsyncIterator[ControlServer]:
    """Listen for relays; yields the server, closes everything on exit.

    ``kind`` is ``unix`` (default; falls back to TCP where no short private
    path exists) or ``tcp``.  ``address`` fixes the address (for editors
    configured once by hand); ``token`` fixes the token ("" = none).
    """
    tmpdir: str | None = None
    if address is not None:
        kind = parse_address(address)[0]
    if kind == "unix" and address is None:
        tmpdir = _unix_dir()
        if tmpdir is None:
            kind = "tcp"
    # asyncio calls this in its protocol callback: hand the connection to the task group.
    accepted_tx, accepted_rx = anyio.create_memory_object_stream[_TransportStream](64)

    streams: list[_TransportStream] = []  # every connection, closed at the end whatever became of it

    def connected(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        stream = _TransportStream(reader, writer)
        try:
            accepted_tx.send_nowait(stream)
        except (anyio.WouldBlock, anyio.ClosedResourceError, anyio.BrokenResourceError):
            writer.close()  # a flood of connections, or the server is closing
        else:
            streams.append(stream)

    server_: asyncio.Server
    if kind == "unix":
        if address is not None:
            path = parse_address(address)[1]
            if os.path.exists(path):
                os.unlink(path)  # a stale socket from an earlier run
        else:
            assert tmpdir is not None
            path = os.path.join(tmpdir, "c.sock")
        server_ = await asyncio.start_unix_server(connected, path, limit=READ_CHUNK)
        os.chmod(path, 0o600)
        where = f"unix:{path}"
    elif kind == "tcp":
        host, port = "127.0.0.1", 0
        if address is not None:
            host, _, p = parse_address(address)[1].rpartition(":")
            port = int(p)
        server_ = await asyncio.start_server(connected, host, port, limit=READ_CHUNK)
        bound = server_.sockets[0].getsockname()
        where = f"tcp:{bound[0]}:{bound[1]}"
    else:
        raise ConfigurationError(f"control channel kind must be unix or tcp, got {kind!r}")
    tok = secrets.token_hex(8) if token is None else token
    try:
        async with anyio.create_task_group() as tg:
            server = ControlServer(accepted_rx, where, tok, tg)
            tg.start_soon(server._accept_loop)
            try:
                yield server
            finally:
                server_.close()
                accepted_tx.close()
                server._accept_scope.cancel()
                with anyio.CancelScope(shield=True):
                    for conn in server.connections:
                        await conn.aclose()
                    for stream in streams:
                        await stream.aclose()
                    with anyio.move_on_after(2):
                        await server_.wait_closed()
                tg.cancel_scope.cancel()
    except BaseExceptionGroup as group:
        raise single_exception(group) from None
    finally:
        if tmpdir is not None:
            shutil.rmtree(tmpdir, ignore_errors=True)
        elif address is not None and kind == "unix":
            Path(parse_address(address)[1]).unlink(missing_ok=True)
