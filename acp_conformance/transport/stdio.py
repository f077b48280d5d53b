"""Our own process's stdin/stdout as a transport (for the mocks).

On pipes we use the event loop's native pipe support (no thread hop per
read, which matters at 10,000+ frames per second); for anything else
(regular files, ttys) we fall back to worker threads.  stdout is sacred:
nothing but frames is ever written to it through this transport, and the
mocks log to stderr only.

A stdin pipe can also be *pumped* (``pump_into``): each chunk goes to the reader's sink in the
loop pass that read it, instead of waking a reader task one pass later.  That pass was a
third of the mock agent's per-request passes (bench/README.md); pulling with ``receive``
stays for everything else.
"""

from __future__ import annotations

import asyncio
import contextvars
import os
import stat
import sys
from collections import deque
from collections.abc import Awaitable, Callable
from typing import BinaryIO

import anyio
import anyio.to_thread

from acp_conformance.errors import PeerExited
from acp_conformance.transport.base import limit_pipe_reads

__all__ = ["StdioTransport"]

READ_CHUNK = 256 * 1024
#: Bytes read and not yet received (pull mode) past which the pipe is not read.
READ_BUFFER = 4 * READ_CHUNK

try:  # anyio asks sniffio which loop runs; outside a task only this variable can say
    from sniffio import current_async_library_cvar as _ASYNC_LIBRARY  # type: ignore[import-not-found,unused-ignore]
except ImportError:  # pragma: no cover - anyio without sniffio looks at the running loop itself
    _ASYNC_LIBRARY = None


def _is_pipe_or_socket(fd: int) -> bool:
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


class _WriteProtocol(asyncio.Protocol):
    """Flow control for the stdout pipe: wait when the loop says pause."""

    def __init__(self) -> None:
        self.can_write = asyncio.Event()
        self.can_write.set()
        self.gone = asyncio.Event()
        self.lost = False

    def pause_writing(self) -> None:
        self.can_write.clear()

    def resume_writing(self) -> None:
        self.can_write.set()

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = True
        self.can_write.set()
        self.gone.set()


class _ReadProtocol(asyncio.Protocol):
    """stdin's bytes: buffered for ``receive``, or handed to a pump's sink as they are read.

    Whatever the sink raises ends the pump (it is raised there); the sink returning False
    stops reading until the pump's ``ready`` returns (backpressure, as in pull mode).
    """

    def __init__(self) -> None:
        self.pipe: asyncio.ReadTransport | None = None
        self.chunks: deque[bytes] = deque()
        self.buffered = 0
        self.eof = False
        self.paused = False
        self.sink: Callable[[bytes], bool] | None = None
        self.context: contextvars.Context | None = None
        self.failure: BaseException | None = None
        self._waiter: asyncio.Future[None] | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.ReadTransport)
        self.pipe = transport

    def data_received(self, data: bytes) -> None:
        sink = self.sink
        if sink is None:
            self.chunks.append(data)
            self.buffered += len(data)
            if self.buffered > READ_BUFFER:
                self._pause()
            self._wake()
            return
        try:
            more = self.context.run(sink, data) if self.context is not None else sink(data)
        except BaseException as exc:  # handed to the pump, which raises it
            self.failure, self.sink = exc, None
            self._pause()
            self._wake()
            return
        if not more:
            self._pause()
            self._wake()

    def eof_received(self) -> bool | None:
        self.eof = True
        self._wake()
        return None

    def connection_lost(self, exc: Exception | None) -> None:
        self.eof = True
        self._wake()

    def _pause(self) -> None:
        if not self.paused and self.pipe is not None:
            self.paused = True
            self.pipe.pause_reading()

    def resume(self) -> None:
        if self.paused and self.pipe is not None and not self.eof:
            self.paused = False
            self.pipe.resume_reading()

    def _wake(self) -> None:
        waiter, self._waiter = self._waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def wait(self) -> None:
        """Until the next chunk, pause, failure or EOF."""
        self._waiter = asyncio.get_running_loop().create_future()
        await self._waiter


class StdioTransport:
    """Transport over this process's stdin (receive) and stdout (send)."""

    def __init__(self, stdin: BinaryIO | None = None, stdout: BinaryIO | None = None) -> None:
        self._in = stdin or sys.stdin.buffer
        self._out = stdout or sys.stdout.buffer
        self._reader: _ReadProtocol | None = None
        self._writer: asyncio.WriteTransport | None = None
        self._flow = _WriteProtocol()
        self._closed = False
        self._setup_done = False
        # Created here, bound to the running loop on first use (Python >= 3.10).
        self._setup_lock = asyncio.Lock()

    async def _ensure(self) -> None:
        """Attach stdin/stdout to the event loop, once, before any read or write.

        The lock matters: a mock may send (from ``on_start``) before its reader's first
        ``receive``, and both reach this point.  Setup awaits, so without the lock the
        second caller would see a half-done setup, fall back to a blocking thread read
        of stdin while the loop's pipe reader is being attached to the same fd (which
        also makes it non-blocking), and frames would be lost or EOF seen early.
        """
        if self._setup_done:
            return
        async with self._setup_lock:
            if self._setup_done:
                return
            try:
                loop = asyncio.get_running_loop()
                if _is_pipe_or_socket(self._in.fileno()):
                    reader = _ReadProtocol()
                    pipe, _ = await loop.connect_read_pipe(lambda: reader, self._in)
                    limit_pipe_reads(pipe)
                    self._reader = reader
                if _is_pipe_or_socket(self._out.fileno()):
                    transport, _ = await loop.connect_write_pipe(lambda: self._flow, self._out)
                    self._writer = transport
            finally:
                # Once only, even if it failed half-way: attaching an fd twice is worse
                # than the thread fallback for whatever was not attached.
                self._setup_done = True

    async def send(self, data: bytes) -> None:
        await self._ensure()
        if self._closed:
            raise PeerExited("stdout is closed")
        if self._writer is not None:
            if self._writer.is_closing() or self._flow.lost:
                raise PeerExited("the reader of our stdout went away")
            self._writer.write(data)
            if not self._flow.can_write.is_set():
                await self._flow.can_write.wait()
            return
        try:
            await anyio.to_thread.run_sync(self._blocking_write, data)
        except (BrokenPipeError, ValueError):
            raise PeerExited("the reader of our stdout went away") from None

    def _blocking_write(self, data: bytes) -> None:
        self._out.write(data)
        self._out.flush()

    async def receive(self) -> bytes:
        await self._ensure()
        reader = self._reader
        if reader is not None:
            while not reader.chunks and not reader.eof:
                await reader.wait()
            if not reader.chunks:
                return b""
            data = reader.chunks.popleft()
            reader.buffered -= len(data)
            if reader.buffered <= READ_BUFFER // 2:
                reader.resume()
            return data
        return await anyio.to_thread.run_sync(self._blocking_read, abandon_on_cancel=True)

    async def pump_into(self, sink: Callable[[bytes], bool], ready: Callable[[], Awaitable[None]]) -> bool:
        """Hand every chunk read to ``sink`` in the pass that read it, until EOF; True then.

        ``sink`` returns False to stop reading until ``ready()`` returns; what it raises is
        raised here.  It runs in a copy of the caller's context (so what it starts is started as
        from the caller's task), in which anyio can tell the loop without a current task.  A
        stdin that is not a pipe cannot be pumped: False at once, nothing read (pull it with
        ``receive``).
        """
        await self._ensure()
        reader = self._reader
        if reader is None:
            return False
        context = contextvars.copy_context()
        if _ASYNC_LIBRARY is not None:
            context.run(_ASYNC_LIBRARY.set, "asyncio")
        while reader.chunks:  # read before the pump began
            data = reader.chunks.popleft()
            reader.buffered -= len(data)
            if not context.run(sink, data):
                await ready()
        reader.context, reader.sink = context, sink
        try:
            while True:
                if reader.failure is not None:
                    raise reader.failure
                if reader.eof:
                    return True
                if reader.paused:
                    await ready()
                    reader.resume()
                    continue
                await reader.wait()
        finally:
            reader.sink = reader.context = None

    def _blocking_read(self) -> bytes:
        read1 = getattr(self._in, "read1", None)
        return read1(READ_CHUNK) if read1 is not None else self._in.read(READ_CHUNK)

    async def close_output(self) -> None:
        self._closed = True
        if self._writer is not None:
            self._writer.close()
            # close() flushes asynchronously: wait (bounded) so nothing buffered is lost at exit.
            with anyio.move_on_after(2.0):
                await self._flow.gone.wait()
        else:
            try:
                self._out.flush()
            except (BrokenPipeError, ValueError):
                pass

    async def aclose(self) -> None:
        await self.close_output()
