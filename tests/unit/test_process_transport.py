"""The process transport against real subprocesses: echo, floods, stubborn peers, stragglers."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import AsyncExitStack, ExitStack, contextmanager
from pathlib import Path

import anyio
import pytest

from acp_conformance.errors import ConfigurationError, PeerExited
from acp_conformance.transport import ProcessTransport, process, spawn
from acp_conformance.transport.base import PIPE_READ_SIZE
from acp_conformance.transport.process import SPAWN_TAG_VAR, STDERR_LINE_CAP, descendants, parse_command

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
r, w = os.pipe()
if os.fork() == 0:
    os.close(r)
    if "setsid" in mode:
        os.setsid()
    with open(pidfile + ".tmp", "w") as f:
        f.write(str(os.getpid()))
    os.rename(pidfile + ".tmp", pidfile)
    os.close(w)  # EOF for the parent: the pidfile is there
    while True:
        time.sleep(60)
os.close(w)
os.read(r, 1)
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


async def test_output_reaches_the_reader_in_the_pass_that_read_it() -> None:
    """asyncio's subprocess transport defers each chunk of the child's output to the next loop
    pass, and reads 256 KiB at a time (three system calls more per small frame): the chunk is
    in the reader's buffer as soon as the pipe's read callback ran, and reads ask 64 KiB."""
    with anyio.fail_after(10):
        async with spawn([PY, "-c", ECHO]) as tr:
            sub = tr.process._process._transport  # type: ignore[attr-defined]
            stream = tr.process.stdout._stream  # type: ignore[union-attr]
            assert sub.get_pipe_transport(1).max_size == PIPE_READ_SIZE
            sub._pipe_data_received(1, b"now\n")
            assert bytes(stream._buffer) == b"now\n"  # not one pass later
            assert await tr.receive() == b"now\n"
            await tr.send(b"echoed\n")
            assert await read_line(tr) == b"echoed"


async def test_a_cancelled_send_writes_nothing() -> None:
    """``send`` writes to the asyncio stream under anyio's wrapper (no extra loop pass per frame);
    a caller whose scope is cancelled must still stop before the frame reaches the pipe."""
    with anyio.fail_after(10):
        async with spawn([PY, "-c", ECHO]) as tr:
            with anyio.CancelScope() as scope:
                scope.cancel()
                await tr.send(b'{"never":"sent"}\n')
            assert scope.cancelled_caught
            await tr.send(b'{"sent":true}\n')
            assert await read_line(tr) == b'{"sent":true}'


async def test_a_peer_that_closed_its_stdin_is_peer_exited() -> None:
    closes = "import os, sys; os.close(0); print('closed', flush=True); import time; time.sleep(30)"
    with anyio.fail_after(15):
        async with spawn([PY, "-c", closes], grace=0.5) as tr:
            assert await read_line(tr) == b"closed"
            with pytest.raises(PeerExited, match="broken pipe"):
                for _ in range(3):  # the pipe's loss may surface on the write after the failing one
                    await tr.send(b"{}\n")


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


async def test_orphaned_setsid_grandchild_does_not_survive(tmp_path: Path) -> None:
    pidfile = tmp_path / "grandchild.pid"
    with anyio.fail_after(10), ExitStack() as stack:
        async with spawn([PY, "-c", FORKER, str(pidfile), "setsid-early"], grace=0.5) as tr:
            assert await read_line(tr) == b"ready"
            gpid = int(pidfile.read_text())
            pidfd = stack.enter_context(watched(gpid))
            await tr.process.wait()  # the wrapper is gone; its daemonised child still holds our pipes
        assert await exits_within(pidfd, 1.5), f"grandchild {gpid} survived teardown"
        assert gpid in tr.stragglers_killed


# argv: pidfile flags.  The child forks a grandchild that sleeps forever, then
# (flag "early") exits at once.  The grandchild may call setsid ("setsid"), fork
# once more ("double", a daemon), call setpgid ("setpgid"), point its stdio at
# /dev/null ("closefds") and re-execute itself with an empty environment
# ("clearenv"): each flag removes one of the ways teardown recognises it.
ESCAPER = r"""
import os, sys, time
pidfile, flags = sys.argv[1], sys.argv[2].split(",")
SLEEPER = (
    "import os, sys, time\n"
    "open(sys.argv[1] + '.tmp', 'w').write(str(os.getpid()))\n"
    "os.rename(sys.argv[1] + '.tmp', sys.argv[1])\n"
    "os.close(int(sys.argv[2]))\n"  # EOF for the child: the pidfile is there
    "while True: time.sleep(60)\n"
)
r, w = os.pipe()
if os.fork() == 0:
    os.close(r)
    if "setsid" in flags:
        os.setsid()
    if "double" in flags and os.fork() != 0:
        os._exit(0)  # the classic daemon: the grandchild is no session leader
    if "setpgid" in flags:
        os.setpgid(0, 0)
    if "closefds" in flags:
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        os.closerange(3, w)
        os.closerange(w + 1, 1024)
    os.set_inheritable(w, True)
    env = {} if "clearenv" in flags else dict(os.environ)
    os.execve(sys.executable, [sys.executable, "-c", SLEEPER, pidfile, str(w)], env)
os.close(w)
os.read(r, 1)  # every writer gone: the intermediate (if any) exited, the sleeper is ready
sys.stdout.write("ready\n")
sys.stdout.flush()
if "early" in flags:
    os._exit(0)
sys.stdin.buffer.read()
"""


def environ_of(pid: int) -> list[bytes]:
    return Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")


@pytest.mark.parametrize(
    ("flags", "found_by"),
    [
        ("setpgid,closefds,clearenv,early", "its session"),
        ("setsid,closefds,early", "the spawn tag in its environment"),
        ("setsid,clearenv,early", "holding our pipes"),
        ("setsid,double,closefds,clearenv,early", "being an adopted orphan born during the spawn"),
    ],
)
async def test_escaped_orphan_is_found_and_killed(tmp_path: Path, flags: str, found_by: str) -> None:
    pidfile = tmp_path / "escaper.pid"
    # Another live spawn disables the adopted-orphan rule (it could be that spawn's
    # orphan): each other rule must then find the escaper on its own.
    lone = found_by.startswith("being an adopted orphan")
    with anyio.fail_after(15), ExitStack() as stack:
        async with AsyncExitStack() as others:
            bystander = None if lone else await others.enter_async_context(spawn([PY, "-c", ECHO], grace=0.5))
            async with spawn([PY, "-c", ESCAPER, str(pidfile), flags], grace=0.5) as tr:
                assert await read_line(tr) == b"ready"
                gpid = int(pidfile.read_text())
                pidfd = stack.enter_context(watched(gpid))
                await tr.process.wait()
                tagged = f"{SPAWN_TAG_VAR}={tr.tag}".encode() in environ_of(gpid)
                assert tagged == ("clearenv" not in flags)
                # We are a subreaper: the orphan was re-parented to us, not to init.
                assert f" {os.getpid()} " in Path(f"/proc/{gpid}/stat").read_text().rsplit(")", 1)[1]
            assert await exits_within(pidfd, 2.0), f"orphan {gpid} ({flags}) survived teardown: not found by {found_by}"
            assert gpid in tr.stragglers_killed
            # ... and reaped: no zombie left in our process table.
            assert not Path(f"/proc/{gpid}").exists()
            if bystander is not None:
                await bystander.send(b"still here\n")
                assert await read_line(bystander) == b"still here"
        assert bystander is None or bystander.returncode == 0


async def test_concurrent_spawns_never_kill_each_others_processes(tmp_path: Path) -> None:
    """B's teardown leaves A's child and A's grandchild alone; B's unattributable
    orphan is killed when the last spawn (A) ends, not while A still runs."""
    a_pid, b_pid = tmp_path / "a.pid", tmp_path / "b.pid"
    with anyio.fail_after(20), ExitStack() as stack:
        async with spawn([PY, "-c", ESCAPER, str(a_pid), "setpgid"], grace=0.5) as a:
            assert await read_line(a) == b"ready"
            a_grandchild = int(a_pid.read_text())
            async with spawn([PY, "-c", ESCAPER, str(b_pid), "setsid,double,closefds,clearenv,early"], grace=0.5) as b:
                assert await read_line(b) == b"ready"
                b_orphan = int(b_pid.read_text())
                b_fd = stack.enter_context(watched(b_orphan))
                await b.process.wait()
            # B is torn down while A lives: A's processes are untouched, and B's
            # orphan (no tag, no pipes, own session) cannot be told from A's yet.
            assert a.returncode is None and not gone_or_zombie(a.pid)
            assert not gone_or_zombie(a_grandchild)
            assert not gone_or_zombie(b_orphan)
            a_fd = stack.enter_context(watched(a_grandchild))
            await a.send(b"")  # still writable: A's child still reads its stdin
        assert a.returncode == 0, "A's child must exit on EOF, not by a signal from B's teardown"
        assert await exits_within(a_fd, 2.0), "A's grandchild (in its own group) survived A's teardown"
        assert await exits_within(b_fd, 2.0), "B's orphan survived the end of the last spawn"


async def test_processes_we_start_ourselves_outlive_the_spawns() -> None:
    """Children this process starts itself (in its session, or leading a new one, like a
    real terminal of the mock client) are never taken for a spawn's orphans."""
    sleep = [PY, "-c", "import time; time.sleep(30)"]
    with anyio.fail_after(15):
        async with spawn([PY, "-c", ECHO], grace=0.5) as tr:
            own_session = await anyio.open_process(sleep, start_new_session=True)
            same_session = subprocess.Popen(sleep)
    try:
        assert tr.returncode == 0 and tr.stragglers_killed == []
        assert own_session.returncode is None and not gone_or_zombie(own_session.pid)
        assert same_session.poll() is None
    finally:
        own_session.kill()
        await own_session.wait()
        same_session.kill()
        same_session.wait()


async def test_recycled_pid_of_a_remembered_descendant_is_not_killed() -> None:
    bystander = subprocess.Popen([PY, "-c", "import time; time.sleep(30)"])
    try:
        with anyio.fail_after(10):
            async with spawn([PY, "-c", ECHO], grace=0.5) as tr:
                info = Path(f"/proc/{bystander.pid}/stat").read_text().rsplit(")", 1)[1].split()
                # Pretend the spawn once had a descendant with this pid, but another process.
                tr._known_descendants[bystander.pid] = int(info[19]) + 1
        assert bystander.poll() is None, "a process that merely reuses a remembered pid was killed"
        assert bystander.pid not in tr.stragglers_killed
    finally:
        bystander.kill()
        bystander.wait()


async def test_group_and_session_of_a_recycled_pid_are_left_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    """Once the child is reaped its pid may be reused by an unrelated process that leads its
    own group and session: teardown must then neither killpg that id nor match its members."""
    with anyio.fail_after(10):
        async with spawn([PY, "-c", ECHO], grace=0.5) as tr:
            assert tr.start is not None
            others = [
                process.Proc(tr.pid, "S", 1, tr.pid, tr.pid, tr.start + 500),  # the pid's new owner
                process.Proc(999_999_998, "S", tr.pid, tr.pid, tr.pid, tr.start + 600),  # its child
            ]
            real_stat = process.stat
            monkeypatch.setattr(process, "stat", lambda pid: others[0] if pid == tr.pid else real_stat(pid))
            assert not tr._ids_are_ours()
            assert tr._belongs(others) == {}
            monkeypatch.setattr(process, "stat", real_stat)
            assert tr._ids_are_ours()
            assert set(tr._belongs(others[1:])) == {999_999_998}  # while the pid is ours, its group is ours


async def test_wait_gone_waits_for_the_processes_a_launcher_left_behind(tmp_path: Path) -> None:
    """A launcher that exits at once while the agent it started (another process group, the
    same session) runs on: ``wait_exit`` says exited, ``wait_gone`` does not; once that
    process dies, ``wait_gone`` returns at once (it waits on pidfds, no polling)."""
    pidfile = tmp_path / "agent.pid"
    with anyio.fail_after(15), ExitStack() as stack:
        async with spawn([PY, "-c", ESCAPER, str(pidfile), "setpgid,early"], grace=0.5) as tr:
            assert await read_line(tr) == b"ready"
            agent = int(pidfile.read_text())
            pidfd = stack.enter_context(watched(agent))
            assert await tr.wait_exit(5)
            assert not await tr.wait_gone(0.3)
            async with anyio.create_task_group() as tg:
                gone: list[bool] = []

                async def wait() -> None:
                    gone.append(await tr.wait_gone(10))

                tg.start_soon(wait)
                await anyio.wait_all_tasks_blocked()
                os.kill(agent, signal.SIGKILL)
            assert gone == [True]
        assert await exits_within(pidfd, 2.0)


async def test_wait_gone_of_a_peer_that_exits_alone_is_wait_exit() -> None:
    with anyio.fail_after(10):
        async with spawn([PY, "-c", ECHO], grace=0.5) as tr:
            assert not await tr.wait_gone(0.1)  # still running
            await tr.close_output()
            assert await tr.wait_gone(5)
            assert tr.returncode == 0


async def test_well_behaved_peer_teardown_is_fast_and_kills_nothing_else() -> None:
    with anyio.fail_after(10):
        async with spawn([PY, "-c", ECHO], grace=5.0) as tr:
            await tr.send(b"x\n")
            assert await read_line(tr) == b"x"
            assert f"{SPAWN_TAG_VAR}={tr.tag}".encode() in environ_of(tr.pid)
            started = time.monotonic()
        elapsed = time.monotonic() - started
    assert tr.returncode == 0 and tr.stragglers_killed == []
    assert elapsed < 1.0, f"teardown of a peer that exits on EOF took {elapsed:.2f} s"


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
