"""In-process transport pair: the ConnectionPair of h11, over anyio streams.

Lets tests wire a mock agent to a mock client without processes, and lets
other projects run our mocks in-process.
"""

from __future__ import annotations

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from acp_conformance.errors import PeerExited

__all__ = ["MemoryTransport", "memory_pair"]


class MemoryTransport:
    """One end of an in-memory byte pipe."""

    def __init__(self, tx: MemoryObjectSendStream[bytes], rx: MemoryObjectReceiveStream[bytes]) -> None:
        self._tx = tx
        self._rx = rx

    async def send(self, data: bytes) -> None:
        try:
            await self._tx.send(data)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            raise PeerExited("the other end of the in-memory pipe is closed") from None

    async def receive(self) -> bytes:
        try:
            return await self._rx.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError):
            return b""

    async def close_output(self) -> None:
        await self._tx.aclose()

    async def aclose(self) -> None:
        await self._tx.aclose()
        await self._rx.aclose()


def memory_pair(max_buffer: int = 1024) -> tuple[MemoryTransport, MemoryTransport]:
    """Two connected transports: what one sends, the other receives."""
    a_tx, b_rx = anyio.create_memory_object_stream[bytes](max_buffer)
    b_tx, a_rx = anyio.create_memory_object_stream[bytes](max_buffer)
    return MemoryTransport(a_tx, a_rx), MemoryTransport(b_tx, b_rx)
