"""The transport interface: four calls, modelled on anyio's byte streams."""

from __future__ import annotations

from typing import Protocol

__all__ = ["PIPE_READ_SIZE", "Transport", "limit_pipe_reads"]

#: The most one read of a pipe asks for: a Linux pipe holds 64 KiB, so asking more gains nothing,
#: and asyncio's 256 KiB costs three system calls more per read.  A buffer that large is past
#: glibc's mmap threshold: mapped before the read, shrunk to the few bytes read (``mremap``),
#: unmapped when freed, and the smaller chunk freed never raises the threshold, so every read
#: of a small frame paid it (bench/README.md).
PIPE_READ_SIZE = 64 * 1024


def limit_pipe_reads(pipe: object) -> None:
    """Make an asyncio read-pipe transport read at most ``PIPE_READ_SIZE`` at a time (its
    ``max_size``; anything without one is left as it is)."""
    if pipe is not None and isinstance(getattr(pipe, "max_size", None), int):
        pipe.max_size = PIPE_READ_SIZE  # type: ignore[attr-defined]


class Transport(Protocol):
    """A bidirectional byte pipe to the peer.

    ``receive`` returns ``b""`` once the peer's output has ended; ``send``
    raises ``PeerExited`` when the peer no longer reads.  ``close_output``
    closes our direction only (stdin EOF for a process), ``aclose`` tears
    everything down and must be safe to call twice.

    A transport may also offer ``pump_into(sink, ready)`` (``StdioTransport``): it then hands
    each chunk to ``sink`` as it is read, instead of being pulled with ``receive``, and returns
    True at EOF; False (at once, nothing read) when it cannot, and ``receive`` is used.
    """

    async def send(self, data: bytes) -> None: ...

    async def receive(self) -> bytes: ...

    async def close_output(self) -> None: ...

    async def aclose(self) -> None: ...
