"""A minimal HTTP/1.1 server on 127.0.0.1 for the scripted model APIs.

Standard library plus anyio, no web framework: keep-alive, request bodies
by ``Content-Length`` or chunked, JSON answers with ``Content-Length`` and
server-sent events with chunked transfer encoding.  Every request is
recorded (method, path, headers with credentials masked, the JSON body)
together with what answered it.  A request that names another host (a
proxy request: ``CONNECT host:443`` or an absolute URL) is recorded as an
*egress attempt* and refused: point ``HTTP(S)_PROXY`` here and a client
that honours it cannot leave 127.0.0.1 unnoticed.

While a streamed answer is being written, the connection is watched for
EOF, so a slow stream learns at once that the client went away (a
cancelled turn) instead of writing into a dead socket.
"""

from __future__ import annotations

import gzip
import time
import zlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, urlsplit

import anyio
import anyio.abc
import orjson

__all__ = [
    "HttpRequest",
    "RecordedRequest",
    "Responder",
    "StubServer",
]

MAX_HEADER_BYTES = 64 * 1024
MAX_BODY_BYTES = 64 * 1024 * 1024
#: How long an idle keep-alive connection may wait for its next request.
IDLE_TIMEOUT = 120.0
#: Header values recorded as "[redacted]".
SECRET_HEADERS = frozenset(
    {"authorization", "proxy-authorization", "x-api-key", "api-key", "cookie", "set-cookie", "chatgpt-account-id"}
)

REASONS = {
    100: "Continue",
    200: "OK",
    400: "Bad Request",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not Found",
    405: "Method Not Allowed",
    413: "Payload Too Large",
    429: "Too Many Requests",
    500: "Internal Server Error",
    503: "Service Unavailable",
    529: "Overloaded",
}


class _BadRequest(Exception):
    pass


@dataclass
class HttpRequest:
    method: str
    target: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: bytes
    client: str

    def json(self) -> Any:
        """The body as JSON (decompressed when ``Content-Encoding`` says gzip/deflate), or None."""
        data = self.body
        enc = self.headers.get("content-encoding", "").lower()
        try:
            if enc == "gzip":
                data = gzip.decompress(data)
            elif enc == "deflate":
                data = zlib.decompress(data)
            return orjson.loads(data) if data else None
        except (OSError, ValueError, zlib.error):
            return None


@dataclass
class RecordedRequest:
    """One request as the stub saw it, and how it was answered."""

    t: float
    method: str
    target: str
    headers: dict[str, str]
    body: Any
    client: str
    status: int | None = None
    rule: str = ""
    answer: str = ""
    egress: bool = False
    notes: list[str] = field(default_factory=list)
    #: The provider's view of the request (set by the API), for the summary line.
    about: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "t": round(self.t, 3),
            "method": self.method,
            "target": self.target,
            "headers": self.headers,
            "body": self.body,
            "client": self.client,
            "status": self.status,
            "rule": self.rule,
            "answer": self.answer,
            "egress": self.egress,
            "notes": self.notes,
        }

    def line(self) -> str:
        head = f"+{self.t:7.2f}s {self.method} {self.target}"
        if self.egress:
            return f"{head} -> {self.status} EGRESS ATTEMPT (refused: only 127.0.0.1 is allowed)"
        about = f" [{self.about}]" if self.about else ""
        extra = f" ({'; '.join(self.notes)})" if self.notes else ""
        return f"{head}{about} -> {self.status} {self.rule}: {self.answer}{extra}"


def _masked(headers: dict[str, str]) -> dict[str, str]:
    return {k: ("[redacted]" if k in SECRET_HEADERS else v) for k, v in headers.items()}


class _Conn:
    """One client connection: buffered reading that never loses bytes to the EOF watcher."""

    def __init__(self, stream: anyio.abc.ByteStream) -> None:
        self.stream = stream
        self.buf = bytearray()
        self.eof = False
        self.gone = anyio.Event()

    async def _fill(self) -> bool:
        try:
            data = await self.stream.receive()
        except (anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
            self.eof = True
            self.gone.set()
            return False
        self.buf += data
        return True

    async def read_until(self, delim: bytes, limit: int) -> bytes | None:
        while True:
            i = self.buf.find(delim)
            if i >= 0:
                out = bytes(self.buf[:i])
                del self.buf[: i + len(delim)]
                return out
            if len(self.buf) > limit:
                raise _BadRequest("header section too large")
            if self.eof or not await self._fill():
                return None

    async def read_exactly(self, n: int) -> bytes:
        while len(self.buf) < n:
            if self.eof or not await self._fill():
                raise _BadRequest("connection closed inside the body")
        out = bytes(self.buf[:n])
        del self.buf[:n]
        return out

    async def watch(self) -> None:
        """Read (keeping the bytes) until EOF: sets ``gone`` when the client leaves."""
        while not self.eof and await self._fill():
            pass

    async def send(self, data: bytes) -> bool:
        if self.gone.is_set():
            return False
        try:
            await self.stream.send(data)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
            self.gone.set()
            return False
        return True


class Responder:
    """How an API answers one request: a JSON body, or a stream of SSE events."""

    def __init__(self, conn: _Conn, record: RecordedRequest, tg: anyio.abc.TaskGroup) -> None:
        self._conn = conn
        self.record = record
        self._tg = tg
        self._streaming = False
        self._watching = False
        self.done = False
        self.keep_alive = True

    @property
    def client_gone(self) -> anyio.Event:
        """Set when the client closed the connection (e.g. it cancelled the turn)."""
        return self._conn.gone

    async def json(self, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
        data = orjson.dumps(body)
        head = {"content-type": "application/json", "content-length": str(len(data)), **(headers or {})}
        await self._conn.send(self._head(status, head) + data)
        self.record.status = status
        self.done = True

    async def start_stream(self, headers: dict[str, str] | None = None) -> None:
        head = {
            "content-type": "text/event-stream; charset=utf-8",
            "cache-control": "no-cache",
            "transfer-encoding": "chunked",
            **(headers or {}),
        }
        self._streaming = True
        self.record.status = 200
        await self._conn.send(self._head(200, head))
        self.watch_client()

    def watch_client(self) -> None:
        """Start watching the connection for EOF (sets ``client_gone``); streams do it themselves."""
        if not self._watching:
            self._watching = True
            self._tg.start_soon(self._conn.watch)

    async def event(self, name: str | None, data: Any) -> bool:
        """Send one SSE event; False once the client is gone."""
        payload = orjson.dumps(data) if not isinstance(data, bytes | str) else data
        if isinstance(payload, str):
            payload = payload.encode()
        text = (f"event: {name}\n".encode() if name else b"") + b"data: " + payload + b"\n\n"
        return await self._conn.send(b"%x\r\n%s\r\n" % (len(text), text))

    async def end_stream(self) -> None:
        await self._conn.send(b"0\r\n\r\n")
        self.done = True

    def _head(self, status: int, headers: dict[str, str]) -> bytes:
        if not self.keep_alive:
            headers = {**headers, "connection": "close"}
        lines = [f"HTTP/1.1 {status} {REASONS.get(status, 'Status')}"]
        lines += [f"{k}: {v}" for k, v in headers.items()]
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


Handler = Callable[[HttpRequest, Responder], Awaitable[None]]


class StubServer:
    """``async with StubServer(handler) as s:`` serves on ``s.url`` until exit."""

    def __init__(self, handler: Handler, *, host: str = "127.0.0.1", port: int = 0) -> None:
        self.handler = handler
        self.host = host
        #: The port asked for (0: any free one); when it is taken, any free one is used instead.
        self.preferred_port = port
        self.port = 0
        self.requests: list[RecordedRequest] = []
        self._t0 = time.monotonic()
        self._tg: anyio.abc.TaskGroup | None = None
        self._listener: anyio.abc.Listener[Any] | None = None
        #: Called with every finished record (e.g. to append it to a JSONL file).
        self.on_record: Callable[[RecordedRequest], None] | None = None
        self._arrived = anyio.Event()

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    async def next_request(self) -> None:
        """Return when the next request arrives (waiters set their own deadline)."""
        await self._arrived.wait()

    @property
    def egress(self) -> list[RecordedRequest]:
        return [r for r in self.requests if r.egress]

    async def __aenter__(self) -> StubServer:
        try:
            listener = await anyio.create_tcp_listener(local_host=self.host, local_port=self.preferred_port)
        except OSError:
            if not self.preferred_port:
                raise
            listener = await anyio.create_tcp_listener(local_host=self.host, local_port=0)
        self._listener = listener
        self.port = int(listener.extra(anyio.abc.SocketAttribute.local_port))
        self._t0 = time.monotonic()
        self._tg = anyio.create_task_group()
        await self._tg.__aenter__()
        self._tg.start_soon(self._serve, listener)
        return self

    async def __aexit__(self, *exc: Any) -> None:
        assert self._tg is not None
        self._tg.cancel_scope.cancel()
        try:
            await self._tg.__aexit__(None, None, None)
        finally:
            if self._listener is not None:
                with anyio.CancelScope(shield=True):
                    await self._listener.aclose()

    async def _serve(self, listener: anyio.abc.Listener[Any]) -> None:
        await listener.serve(self._connection)

    async def _connection(self, stream: anyio.abc.SocketStream) -> None:
        try:
            remote = stream.extra(anyio.abc.SocketAttribute.remote_address)
            client = f"{remote[0]}:{remote[1]}" if isinstance(remote, tuple) else str(remote)
        except Exception:
            client = "?"
        conn = _Conn(stream)
        async with stream:
            while True:
                with anyio.move_on_after(IDLE_TIMEOUT):
                    try:
                        head = await conn.read_until(b"\r\n\r\n", MAX_HEADER_BYTES)
                    except _BadRequest:
                        return
                if head is None:
                    return
                try:
                    keep = await self._one(conn, head, client)
                except _BadRequest:
                    return
                if not keep or conn.eof:
                    return

    async def _one(self, conn: _Conn, head: bytes, client: str) -> bool:
        try:
            text = head.decode("latin-1")
            request_line, *header_lines = text.split("\r\n")
            method, target, version = request_line.split(" ", 2)
        except ValueError:
            raise _BadRequest("malformed request line") from None
        headers: dict[str, str] = {}
        for line in header_lines:
            name, sep, value = line.partition(":")
            if sep:
                key = name.strip().lower()
                headers[key] = f"{headers[key]}, {value.strip()}" if key in headers else value.strip()
        if headers.get("expect", "").lower() == "100-continue":
            await conn.send(b"HTTP/1.1 100 Continue\r\n\r\n")
        body = await self._body(conn, headers)
        keep = version == "HTTP/1.1" and headers.get("connection", "").lower() != "close"
        record = RecordedRequest(time.monotonic() - self._t0, method, target, _masked(headers), None, client)
        self.requests.append(record)
        self._arrived.set()
        self._arrived = anyio.Event()
        parts = urlsplit(target)
        request = HttpRequest(method, target, parts.path, parse_qs(parts.query), headers, body, client)
        record.body = request.json()
        if record.body is None and body:
            record.body = body[:2000].decode("utf-8", "replace")
        try:
            async with anyio.create_task_group() as tg:
                responder = Responder(conn, record, tg)
                responder.keep_alive = keep
                if method == "CONNECT" or parts.scheme or parts.netloc:
                    record.egress = True
                    record.rule = "egress"
                    responder.keep_alive = keep = False
                    await responder.json(403, {"error": "the model stub refuses requests to other hosts"})
                else:
                    try:
                        await self.handler(request, responder)
                    except Exception as exc:  # a bug in a stub API must not hang the client
                        record.notes.append(f"stub error {type(exc).__name__}: {exc}")
                        if not responder.done and not responder._streaming:
                            await responder.json(500, {"error": {"type": "api_error", "message": "model stub error"}})
                        keep = False
                if responder._streaming and not responder.done:
                    keep = False
                tg.cancel_scope.cancel()  # the EOF watcher, if a stream started one
        finally:
            # Also when the stub shuts down mid-answer: the record is evidence either way.
            if self.on_record is not None:
                self.on_record(record)
        return keep and responder.keep_alive

    async def _body(self, conn: _Conn, headers: dict[str, str]) -> bytes:
        if "chunked" in headers.get("transfer-encoding", "").lower():
            out = bytearray()
            while True:
                size_line = await conn.read_until(b"\r\n", 1024)
                if size_line is None:
                    raise _BadRequest("connection closed inside a chunked body")
                try:
                    size = int(size_line.split(b";")[0].strip(), 16)
                except ValueError:
                    raise _BadRequest("bad chunk size") from None
                if size == 0:
                    while True:  # trailers
                        trailer = await conn.read_until(b"\r\n", MAX_HEADER_BYTES)
                        if not trailer:
                            return bytes(out)
                out += await conn.read_exactly(size)
                await conn.read_exactly(2)
                if len(out) > MAX_BODY_BYTES:
                    raise _BadRequest("body too large")
        length = headers.get("content-length")
        if length is None:
            return b""
        try:
            n = int(length)
        except ValueError:
            raise _BadRequest("bad content-length") from None
        if n < 0 or n > MAX_BODY_BYTES:
            raise _BadRequest("body too large")
        return await conn.read_exactly(n)
