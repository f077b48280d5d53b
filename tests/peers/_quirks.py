"""What the conforming peers with quirks share (``conforming_agents.py``, ``conforming_clients.py``)."""

from __future__ import annotations

from typing import Any

import anyio

from acp_conformance.transport.base import Transport


class SplitSends:
    """A transport whose every write goes out in three pieces, 2 ms apart: a reader sees partial
    lines, which newline-delimited framing allows (transports.mdx: messages are delimited by
    newlines, not by writes)."""

    def __init__(self, inner: Transport) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def send(self, data: bytes) -> None:
        a, b = len(data) // 3, 2 * len(data) // 3
        for piece in (data[:a], data[a:b], data[b:]):
            if piece:
                await self._inner.send(piece)
                await anyio.sleep(0.002)
