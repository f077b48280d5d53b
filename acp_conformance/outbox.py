"""The write side of a ``Peer``: frames go out in order, and a peer that does not read holds
up at most one writer.

The common case is a fast path: nothing queued ahead, so the frame goes straight to the
transport under the send lock (an asyncio lock: a free one is taken without yielding to the
event loop, the largest single cost of a streamed update, and without anyio's owner
bookkeeping, whose ``current_task`` is a ``getpid`` system call on Python 3.11 each time it is
taken and each time it is released; the fast path yields on its own every
``YIELD_EVERY`` frames instead, so a turn that only streams still lets a ``session/cancel`` be
read).  When a write is in progress (the peer's input pipe is full, say), later frames queue in
a byte-bounded outbox that one writer task drains in batches.  A handler's answer may return
once it is queued (``put(queue=True)``), which is how it frees its slot while the peer does not
read (see ``peer.py``); everything else returns once its bytes are on the wire.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Awaitable, Callable

import anyio
import anyio.lowlevel

from acp_conformance.errors import PeerExited

__all__ = ["OUTBOX_BUDGET", "YIELD_EVERY", "Outbox"]

#: Bytes of answers queued for a peer that does not read them; past this, writers wait.
OUTBOX_BUDGET = 4 * 1024 * 1024
#: At most this many bytes go to the transport in one write.
WRITE_BATCH = 256 * 1024
#: Frames written on the fast path between explicit yields to the event loop.
YIELD_EVERY = 16


class Outbox:
    """Ordered writes to ``send`` with a bounded queue; ``run`` is the writer task."""

    def __init__(self, send: Callable[[bytes], Awaitable[None]], budget: int = OUTBOX_BUDGET) -> None:
        self._send = send
        self.budget = budget
        #: Held while bytes go to the transport; a frame written under it is never interleaved.
        self.lock = asyncio.Lock()
        self._fast_writes = 0
        self._frames: deque[bytes] = deque()
        #: Bytes queued and not yet written.
        self.queued_bytes = 0
        self._queued = 0  # frames ever queued
        self._written = 0  # queued frames on the wire (or given up)
        self._written_ok = 0  # queued frames actually written
        self._error: PeerExited | None = None
        self._changed = anyio.Event()
        self._wakeup = anyio.Event()

    async def put(self, data: bytes, *, queue: bool = False) -> None:
        """Write ``data`` after every frame handed over before it; with ``queue``, return once it
        is in the outbox (within its budget) when others are ahead.  ``PeerExited`` when the
        transport is gone."""
        if not self._frames and not self.lock.locked():
            # The fast path: if the pipe is full this blocks one writer (holding the lock);
            # everyone after it goes through the outbox.  The lock is free (just checked): its
            # acquire returns at once, without a pass of the event loop.
            await self.lock.acquire()
            try:
                await self._send(data)
            finally:
                self.lock.release()
            self._fast_writes += 1
            if self._fast_writes % YIELD_EVERY == 0:
                await anyio.lowlevel.checkpoint()
            return
        if self._error is not None:
            raise self._error
        while self._frames and self.queued_bytes + len(data) > self.budget:
            await self._changed.wait()
            if self._error is not None:
                raise self._error
        self._frames.append(data)
        self.queued_bytes += len(data)
        self._queued += 1
        seq = self._queued
        self._wakeup = _wake(self._wakeup)
        if not queue:
            await self._flushed(seq)

    async def _flushed(self, seq: int) -> None:
        """Wait until the ``seq``-th queued frame is on the wire; ``PeerExited`` if it never will be."""
        while self._written < seq:
            await self._changed.wait()
        if self._error is not None and self._written_ok < seq:
            raise self._error

    async def run(self) -> None:
        """The writer task: write the outbox in order, in batches, under the send lock."""
        while True:
            while not self._frames:
                await self._wakeup.wait()
            async with self.lock:
                batch: list[bytes] = []
                size = 0
                while self._frames and (not batch or size + len(self._frames[0]) <= WRITE_BATCH):
                    frame = self._frames.popleft()
                    batch.append(frame)
                    size += len(frame)
                if self._error is None:
                    try:
                        await self._send(b"".join(batch))
                        self._written_ok += len(batch)
                    except PeerExited as exc:
                        self._error = exc
                self.queued_bytes -= size
                self._written += len(batch)
                self._changed = _wake(self._changed)

    async def drain(self) -> None:
        """Return once every frame already handed over is on the wire.

        The writer holds the send lock until its batch is out: waiting for the queue, then
        taking the lock once, waits for them.  Used before closing our output, so no answer
        is cut off by our own EOF.
        """
        while self._written < self._queued:
            await self._changed.wait()
        async with self.lock:
            pass


def _wake(event: anyio.Event) -> anyio.Event:
    """Set a one-shot ``event`` and return the fresh one that replaces it."""
    event.set()
    return anyio.Event()
