"""The process transport against real subprocesses: echo, floods, stubborn peers, stragglers."""

from __future__ import annotations

import os
import signal
import sys
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import anyio
import pytest

from acp_conformance.errors import ConfigurationError, PeerExited
from acp_conformance.transport import ProcessTransport, spawn
from acp_conformance.transport.process import STDERR_LINE_CAP, descendants, parse_command

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="process-group teardown is tested on Linux"),
]

PY = sys.executable

ECHO = r"""
import sys
for line in sys.stdin.buffer:
    sys.stdout.buffer.write(line)
    sys.stdout.buffer.flush()
"""

STUBBORN = r"""
import signal, sys, time
if sys.argv[1] == "ignore-term":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
sys.stdout.write("ready\n")
sys.stdout.flush()
while True:
    time.sleep(60)
"""

# argv: pidfile mode. Forks a grandchild that keeps stdin/stdout/stderr open and
# sleeps forever; mode "setsid" makes it leave the process group, "early" makes
# the child exit right away (orphaning the grandchild) instead of waiting for EOF.
FORKER = r"""
import os, sys, time
pidfile, mode = sys.argv[1], sys.argv[2]
if os.fork() == 0:
    if "setsid" in mode:
        os.setsid()
    with open(pidfile + ".tmp", "w") as f:
        f.write(str(os.getpid()))
    os.rename(pidfile + ".tmp", pidfile)
    while True:
        time.sleep(60)
while not os.path.exists(pidfile):
    time.sleep(0.005)
sys.stdout.write("ready\n")
sys.stdout.flush()
if "early" in mode:
    os._exit(0)
sys.stdin.buffer.read()
"""


async def read_line(tr: ProcessTransport) -> bytes:
    buf = b""
    while b"\n" not in buf:
        chunk = await tr.receive()
        if not chunk:
            raise AssertionError(f"EOF before a full line; got {buf[:200]!r}; stderr {list(tr.stderr_tail)[-5:]}")
        buf += chunk
    line, _, rest = buf.partition(b"\n")
    assert rest == b"", "test peers answer one line at a time"
    return line


async def read_exactly(tr: ProcessTransport, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = await tr.receive()
        assert chunk, "EOF too early"
        buf += chunk
    return bytes(buf)


@contextmanager
def watched(pid: int) -> Iterator[int]:
    """A pidfd for ``pid`` (readable once it has exited); kills it afterwards if it escaped."""
    fd = os.pidfd_open(pid)
    try:
        yield fd
    finally:
        try:
            signal.pidfd_send_signal(fd, signal.SIGKILL)
        except ProcessLookupError:
            pass
        os.close(fd)


async def exits_within(pidfd: int, seconds: float) -> bool:
    with anyio.move_on_after(seconds):
        await anyio.wait_readable(pidfd)
        return True
    return False


def gone_or_zombie(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return True
    return stat[stat.rindex(")") + 2] in "ZX"


# -------------------------------------------------------------------- traffic
async def test_echo_round_trip_and_clean_exit() -> None:
    with anyio.fail_after(10):
        async with spawn([PY, "-c", ECHO]) as tr:
            assert tr.pid > 0 and tr.returncode is None
            for frame in (b'{"jsonrpc":"2.0","id":0,"method":"initialize"}', "é✓".encode() * 10):
                await tr.send(frame + b"\n")
                assert await read_line(tr) == frame
            big = b"x" * (3 * 1024 * 1024) + b"\n"
            await tr.send(big)
            assert await read_exactly(tr, len(big)) == big
            await tr.close_output()
            assert await tr.receive() == b""
            assert await tr.process.wait() == 0
            with pytest.raises(PeerExited):
                await tr.send(b"{}\n")
        assert tr.returncode == 0


@pytest.mark.parametrize("newlines", [True, False], ids=["lines", "no-newline"])
async def test_stderr_flood_does_not_stall_stdout(newlines: bool) -> None:
    size = 20 * 1024 * 1024
    unit = b"e" * 99 + b"\n" if newlines else b"e" * 100
    flood = f"""
import sys
sys.stderr.buffer.write({unit!r} * {size // 100})
sys.stderr.buffer.flush()
sys.stdout.buffer.write(b"after-flood\\n")
sys.stdout.buffer.flush()
for line in sys.stdin.buffer:
    sys.stdout.buffer.write(line)
    sys.stdout.buffer.flush()
"""
    seen = 0

    def count(_line: str) -> None:
        nonlocal seen
        seen += 1

    with anyio.fail_after(10):
        async with spawn([PY, "-c", flood], stderr_lines=50, on_stderr=count) as tr:
            # Without concurrent draining the child blocks on its 64 KiB stderr pipe forever.
            assert await read_line(tr) == b"after-flood"
            await tr.send(b'{"ping":1}\n')
            assert await read_line(tr) == b'{"ping":1}'
            assert 0 < len(tr.stderr_tail) <= 50
            assert all(len(line) <= STDERR_LINE_CAP for line in tr.stderr_tail)
            assert tr.stderr_total == seen > 0
            if newlines:
                assert tr.stderr_tail[-1] == "e" * 99


# ------------------------------------------------------------------- teardown
@pytest.mark.parametrize(("mode", "code"), [("ignore-term", -signal.SIGKILL), ("honor-term", -signal.SIGTERM)])
async def test_peer_ignoring_stdin_eof_is_stopped_within_the_grace_periods(mode: str, code: int) -> None:
    grace = 0.3
    with anyio.fail_after(10):
        async with spawn([PY, "-c", STUBBORN, mode], grace=grace) as tr:
            assert await read_line(tr) == b"ready"
            pid = tr.pid
            started = time.monotonic()
        elapsed = time.monotonic() - started
    assert tr.returncode == code
    # close stdin + wait(grace) [+ SIGTERM + wait(grace)] + SIGKILL; generous slack for slow CI.
    stages = 2 if code == -signal.SIGKILL else 1
    assert grace * stages * 0.9 <= elapsed < grace * (stages + 1) + 2.0
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


async def test_peer_exiting_on_stdin_eof_is_not_signalled() -> None:
    with anyio.fail_after(10):
        async with spawn([PY, "-c", ECHO], grace=5.0) as tr:
            await tr.send(b"x\n")
            assert await read_line(tr) == b"x"
            started = time.monotonic()
        assert time.monotonic() - started < 4.0
    assert tr.returncode == 0


@pytest.mark.parametrize("mode", ["same-group", "setsid"])
async def test_grandchild_holding_the_pipes_does_not_survive(tmp_path: Path, mode: str) -> None:
    pidfile = tmp_path / "grandchild.pid"
    with anyio.fail_after(10), ExitStack() as stack:
        async with spawn([PY, "-c", FORKER, str(pidfile), mode], grace=0.5) as tr:
            assert await read_line(tr) == b"ready"
            gpid = int(pidfile.read_text())
            assert gpid in descendants(tr.pid)
            pidfd = stack.enter_context(watched(gpid))
            assert not gone_or_zombie(gpid)
            # Leave the context with the grandchild alive and holding stdout/stderr.
        assert await exits_within(pidfd, 3.0), f"grandchild {gpid} ({mode}) survived teardown"
        assert gone_or_zombie(gpid)
        assert gone_or_zombie(tr.pid)


@pytest.mark.xfail(
    strict=True,
    reason="BUG: ProcessTransport only snapshots descendants at terminate(); a grandchild that called "
    "setsid() after its parent (the spawned child) already exited is invisible to both killpg and the "
    "/proc walk and survives teardown, holding the pipes",
)
async def test_orphaned_setsid_grandchild_does_not_survive(tmp_path: Path) -> None:
    pidfile = tmp_path / "grandchild.pid"
    with anyio.fail_after(10), ExitStack() as stack:
        async with spawn([PY, "-c", FORKER, str(pidfile), "setsid-early"], grace=0.5) as tr:
            assert await read_line(tr) == b"ready"
            gpid = int(pidfile.read_text())
            pidfd = stack.enter_context(watched(gpid))
            await tr.process.wait()  # the wrapper is gone; its daemonised child still holds our pipes
        assert await exits_within(pidfd, 1.5), f"grandchild {gpid} survived teardown"


# ---------------------------------------------------------------- bad commands
async def test_missing_command_is_a_configuration_error(tmp_path: Path) -> None:
    with anyio.fail_after(10):
        with pytest.raises(ConfigurationError, match=r"'acp-agent-does-not-exist-42' not found"):
            async with spawn("acp-agent-does-not-exist-42 --stdio"):
                pass
        with pytest.raises(ConfigurationError, match="not found"):
            async with spawn([str(tmp_path / "nope")]):
                pass
        script = tmp_path / "agent.sh"
        script.write_text("#!/bin/sh\n")
        script.chmod(0o644)
        with pytest.raises(ConfigurationError, match="not executable"):
            async with spawn([str(script)]):
                pass
        with pytest.raises(ConfigurationError, match="does not exist"):
            async with spawn([PY, "-c", ECHO], cwd=tmp_path / "missing"):
                pass


async def test_bad_command_strings_are_configuration_errors() -> None:
    with anyio.fail_after(10):
        with pytest.raises(ConfigurationError, match="cannot parse"):
            async with spawn('agent --name "unterminated'):
                pass
        with pytest.raises(ConfigurationError, match="empty"):
            async with spawn("   "):
                pass


def test_parse_command() -> None:
    assert parse_command("npx -y '@scope/agent' --flag=\"a b\"") == ["npx", "-y", "@scope/agent", "--flag=a b"]
    assert parse_command(["a b", "c"]) == ["a b", "c"]
    with pytest.raises(ConfigurationError):
        parse_command([])
