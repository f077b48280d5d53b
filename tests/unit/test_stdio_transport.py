"""StdioTransport: the mocks' own stdin/stdout, over real pipes."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import ExitStack
from typing import BinaryIO, cast

import anyio
import pytest

from acp_conformance.transport.stdio import StdioTransport

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # the transport uses asyncio's pipe support


@pytest.fixture
def pipes() -> Iterator[tuple[StdioTransport, BinaryIO, BinaryIO]]:
    """(transport, the writer of its stdin, the reader of its stdout)."""
    with ExitStack() as stack:
        in_r, in_w = os.pipe()
        out_r, out_w = os.pipe()
        files = [
            cast(BinaryIO, os.fdopen(fd, mode, buffering=0))
            for fd, mode in ((in_r, "rb"), (in_w, "wb"), (out_r, "rb"), (out_w, "wb"))
        ]
        for f in files:
            stack.callback(f.close)
        stdin, feed, drain, stdout = files
        yield StdioTransport(stdin=stdin, stdout=stdout), feed, drain


async def test_send_and_receive_over_pipes(pipes: tuple[StdioTransport, BinaryIO, BinaryIO]) -> None:
    transport, feed, drain = pipes
    with anyio.fail_after(5):
        feed.write(b"ping\n")
        assert await transport.receive() == b"ping\n"
        await transport.send(b"pong\n")
        assert drain.read(5) == b"pong\n"


async def test_first_send_and_first_receive_at_once_lose_nothing(
    pipes: tuple[StdioTransport, BinaryIO, BinaryIO],
) -> None:
    """A mock whose ``on_start`` sends before its reader's first ``receive``: both run the
    one-time setup at once.  The receive must wait for the setup and read through the
    loop's pipe reader, not see a half-done setup and fall back to a thread read of the
    same (by then non-blocking) fd, which lost frames or reported EOF."""
    transport, feed, drain = pipes
    got: list[bytes] = []

    async def first_receive() -> None:
        got.append(await transport.receive())

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(transport.send, b"hello\n")  # starts the setup and awaits inside it
            tg.start_soon(first_receive)  # arrives while the setup is under way
            await anyio.wait_all_tasks_blocked()
            feed.write(b"initialize\n")
        assert got == [b"initialize\n"]
        assert drain.read(6) == b"hello\n"
        feed.write(b"next\n")
        assert await transport.receive() == b"next\n"
