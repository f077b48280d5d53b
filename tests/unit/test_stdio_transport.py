"""StdioTransport: the mocks' own stdin/stdout, over real pipes."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import BinaryIO, cast

import anyio
import pytest

from acp_conformance.transport.base import PIPE_READ_SIZE
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


async def test_pump_hands_each_chunk_over_in_the_pass_that_read_it(
    pipes: tuple[StdioTransport, BinaryIO, BinaryIO],
) -> None:
    """The sink runs inside the pipe's read callback (no task is current), in order, up to EOF;
    a chunk read before the pump began comes first."""
    transport, feed, _ = pipes
    feed.write(b"early\n")
    assert await transport.receive() == b"early\n"  # attaches the pipe, pull mode
    feed.write(b"before\n")
    reader = transport._reader
    assert reader is not None
    with anyio.fail_after(5):
        while not reader.chunks:  # read (into the buffer) before the pump begins
            await anyio.sleep(0)
    got: list[tuple[bytes, bool]] = []
    done = anyio.Event()

    def sink(data: bytes) -> bool:
        got.append((data, asyncio.current_task() is None))
        if data.endswith(b"last\n"):
            done.set()
        return True

    async def never() -> None:
        raise AssertionError("not paused")

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(transport.pump_into, sink, never)
            await anyio.wait_all_tasks_blocked()
            feed.write(b"last\n")
            await done.wait()
            feed.close()  # EOF: the pump returns
    assert [d for d, _ in got] == [b"before\n", b"last\n"]
    assert got[1][1], "the chunk read while pumping was handled outside any task"


async def test_pump_stops_reading_until_ready_and_raises_what_the_sink_raised(
    pipes: tuple[StdioTransport, BinaryIO, BinaryIO],
) -> None:
    transport, feed, _ = pipes
    got: list[bytes] = []
    readies = 0
    go_on = anyio.Event()

    def sink(data: bytes) -> bool:
        got.append(data)
        if data == b"boom\n":
            raise ValueError("the sink failed")
        return data != b"full\n"

    async def ready() -> None:
        nonlocal readies
        readies += 1
        await go_on.wait()

    with anyio.fail_after(5), pytest.raises(ExceptionGroup) as failed:
        async with anyio.create_task_group() as tg:
            tg.start_soon(transport.pump_into, sink, ready)
            await anyio.wait_all_tasks_blocked()
            feed.write(b"full\n")
            await anyio.wait_all_tasks_blocked()
            feed.write(b"held\n")  # not read while the sink is full
            await anyio.wait_all_tasks_blocked()
            assert (got, readies) == ([b"full\n"], 1)
            go_on.set()
            await anyio.wait_all_tasks_blocked()
            assert got == [b"full\n", b"held\n"]
            feed.write(b"boom\n")
    assert failed.group_contains(ValueError, match="the sink failed")
    assert got[-1] == b"boom\n"


async def test_stdin_is_read_at_most_a_pipe_at_a_time(pipes: tuple[StdioTransport, BinaryIO, BinaryIO]) -> None:
    """asyncio asks 256 KiB per read, past glibc's mmap threshold: three system calls more for
    every small frame (``transport.base.PIPE_READ_SIZE``)."""
    transport, feed, _ = pipes
    feed.write(b"x\n")
    with anyio.fail_after(5):
        assert await transport.receive() == b"x\n"
    reader = transport._reader
    assert reader is not None and reader.pipe is not None
    assert getattr(reader.pipe, "max_size", None) == PIPE_READ_SIZE


async def test_a_stdin_that_is_no_pipe_is_not_pumped_and_is_pulled_whole(tmp_path: Path) -> None:
    """A file for stdin (``mock-agent < frames.jsonl``): ``pump_into`` declines at once, reading
    nothing, and the Peer pulls it with ``receive``."""
    frames = tmp_path / "frames.jsonl"
    frames.write_bytes(b"one\ntwo\n")
    with frames.open("rb") as stdin, (tmp_path / "out").open("wb") as stdout:
        transport = StdioTransport(stdin=stdin, stdout=stdout)

        def sink(data: bytes) -> bool:
            raise AssertionError("a file is not pumped")

        async def ready() -> None:
            raise AssertionError("not paused")

        with anyio.fail_after(5):
            assert await transport.pump_into(sink, ready) is False
            assert await transport.receive() == b"one\ntwo\n"
            assert await transport.receive() == b""
