"""The transport interface: four calls, modelled on anyio's byte streams."""

from __future__ import annotations

from typing import Protocol

__all__ = ["Transport"]


class Transport(Protocol):
    """A bidirectional byte pipe to the peer.

    ``receive`` returns ``b""`` once the peer's output has ended; ``send``
    raises ``PeerExited`` when the peer no longer reads.  ``close_output``
    closes our direction only (stdin EOF for a process), ``aclose`` tears
    everything down and must be safe to call twice.
    """

    async def send(self, data: bytes) -> None: ...

    async def receive(self) -> bytes: ...

    async def close_output(self) -> None: ...

    async def aclose(self) -> None: ...
