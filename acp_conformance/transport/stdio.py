"""Our own process's stdin/stdout as a transport (for the mocks).

On pipes we use the event loop's native pipe support (no thread hop per
read, which matters at 10,000+ frames per second); for anything else
(regular files, ttys) we fall back to worker threads.  stdout is sacred:
nothing but frames is ever written to it through this transport, and the
mocks log to stderr only.
"""

from __future__ import annotations

import asyncio
import os
import stat
import sys
from typing import BinaryIO

import anyio
import anyio.to_thread

from acp_conformance.errors import PeerExited

__all__ = ["StdioTransport"]

READ_CHUNK = 256 * 1024


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


class StdioTransport:
    """Transport over this process's stdin (receive) and stdout (send)."""

    def __init__(self, stdin: BinaryIO | None = None, stdout: BinaryIO | None = None) -> None:
        self._in = stdin or sys.stdin.buffer
        self._out = stdout or sys.stdout.buffer
        self._reader: asyncio.StreamReader | None = None
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
                    reader = asyncio.StreamReader(limit=READ_CHUNK)
                    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), self._in)
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
        if self._reader is not None:
            try:
                return await self._reader.read(READ_CHUNK)
            except (ConnectionError, OSError):
                return b""
        return await anyio.to_thread.run_sync(self._blocking_read, abandon_on_cancel=True)

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
