"""A peer process spoken to over its stdin/stdout, with stderr captured.

Why the care: peers under test are often wrappers (npx, uvx, node shims
around native binaries) whose grandchildren hold the pipes open after the
child dies, ignore stdin EOF, or flood stderr.  So the child gets its own
process group and session; stderr is drained concurrently into a bounded
ring so a flood can never stall the peer's stdout; and teardown escalates:
close stdin, wait, SIGTERM, wait, SIGKILL.

What teardown kills (Linux), beyond the child itself: every process that
belongs to this spawn, found in /proc by any of

* its process group or session (the child leads both: ``setsid`` at spawn),
  as long as the child's pid was not recycled by an unrelated process;
* a descendant remembered while the tree was still linked (pid *and* start
  time, so a recycled pid is never mistaken for it);
* the spawn's tag, an ``ACP_CONFORMANCE_SPAWN`` value only this child got in
  its environment (inherited by everything it starts, unless it clears it);
* holding one of this spawn's pipes (how a daemonised grandchild keeps our
  stdout open after the child exited);
* the descendants of all of those.

The calling process is made a *child subreaper* at the first spawn
(``prctl(PR_SET_CHILD_SUBREAPER)``), so orphans of the peer's tree are
re-parented to us rather than to init: they stay in our process tree, and we
can reap them once killed (nothing else would).  An adopted orphan that
matches none of the above (a classic double-forked daemon: other session,
stdio on /dev/null, environment cleared) is recognised by being our child
while sitting in a session that is neither ours nor its own - no process we
start ourselves looks like that - and by being born while spawns were
running; it is killed once no spawn is live any more, so two concurrent
spawns never kill each other's processes.  Another live spawn's direct child
is never signalled, nor is any process this process started itself.  Every
kill is followed by a bounded wait for the process to actually exit.

Not caught: a process that forks once, leads its own new session, closes the
pipes and clears its environment, all before teardown looks (it is
indistinguishable from a process we started with ``start_new_session``).
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import os
import secrets
import select
import shlex
import signal
import subprocess
import sys
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import anyio.abc
import anyio.lowlevel

from acp_conformance._proctree import (
    SPAWN_TAG_VAR,
    Proc,
    become_subreaper,
    children_map,
    descendants,
    environ_has,
    holds_any,
    pidfd,
    pipe_inodes_of,
    processes,
    signal_if_same,
    stat,
    walk,
)
from acp_conformance._util import single_exception
from acp_conformance.errors import ConfigurationError, PeerExited
from acp_conformance.redaction import redactor, register_secrets
from acp_conformance.transport.base import limit_pipe_reads


async def any_readable(fds: list[int]) -> None:
    """Return once any of ``fds`` is readable (a pidfd is, once its process exited)."""
    async with anyio.create_task_group() as tg:

        async def watch(fd: int) -> None:
            await anyio.wait_readable(fd)
            tg.cancel_scope.cancel()

        for fd in fds:
            tg.start_soon(watch, fd)


__all__ = ["SPAWN_TAG_VAR", "ProcessTransport", "descendants", "parse_command", "spawn"]

READ_CHUNK = 256 * 1024
STDERR_LINE_CAP = 4096


def parse_command(command: str | list[str]) -> list[str]:
    """Split a shell-style command line; explain what is wrong if it cannot."""
    if isinstance(command, list):
        argv = list(command)
    else:
        try:
            argv = shlex.split(command)
        except ValueError as exc:
            raise ConfigurationError(f"cannot parse command {command!r}: {exc}") from None
    if not argv:
        raise ConfigurationError("the peer command is empty")
    return argv


def _deliver_output_at_once(process: anyio.abc.Process) -> None:
    """Hand the child's output to its stream reader in the loop pass that read it.

    asyncio's subprocess transport defers every chunk read from the child's pipes to the next
    pass of the event loop (``call_soon``), in case its protocol is not connected yet: a whole
    extra pass per received frame, a quarter of a prompt round trip's (bench/README.md).  Once
    connected (no calls pending) the protocol only appends to the reader's buffer, which is safe
    to do at once; before that, and for the pipes' end, asyncio's own path.  Without the private
    attributes (another backend or Python), nothing changes.
    """
    sub = getattr(getattr(process, "_process", None), "_transport", None)
    protocol = getattr(sub, "_protocol", None)
    get_pipe = getattr(sub, "get_pipe_transport", None)
    if get_pipe is not None:
        for fd in (1, 2):
            limit_pipe_reads(get_pipe(fd))
    if sub is None or protocol is None or not hasattr(sub, "_pending_calls") or not hasattr(sub, "_call"):
        return

    def pipe_data_received(fd: int, data: bytes) -> None:
        if sub._pending_calls is None:
            protocol.pipe_data_received(fd, data)
        else:
            sub._call(protocol.pipe_data_received, fd, data)

    sub._pipe_data_received = pipe_data_received


# -------------------------------------------------------- spawn bookkeeping
class _Registry:
    """What this process knows about its live spawns (shared by all of them)."""

    def __init__(self) -> None:
        self.live: dict[int, ProcessTransport] = {}
        #: Start time of the earliest child of the current busy period (spawns live).
        self.busy_start: int | None = None
        self.subreaper = False
        #: The watchdog (``acp_conformance._watchdog``): kills our spawns' trees if we die.
        self.watchdog: subprocess.Popen[bytes] | None = None
        #: The prefix of every spawn tag we hand out while this watchdog runs: it kills whatever
        #: carries one, registered or not (a spawn whose bookkeeping we never got to finish).
        self.owner = ""
        self._watchdog_for = 0  # the pid that started it (a forked child must start its own)

    def enable_subreaper(self) -> None:
        if not self.subreaper:
            self.subreaper = True
            become_subreaper()  # if it fails (no prctl), orphans go to init instead

    def add(self, transport: ProcessTransport) -> None:
        if not self.live:
            self.busy_start = transport.start
        elif transport.start is not None and self.busy_start is not None:
            self.busy_start = min(self.busy_start, transport.start)
        self.live[transport.pid] = transport
        if transport.start is not None:
            self._tell(f"+ {transport.pid} {transport.start}\n")

    def remove(self, transport: ProcessTransport) -> None:
        if self.live.pop(transport.pid, None) is not None and transport.start is not None:
            self._tell(f"- {transport.pid}\n")
        if not self.live:
            self.busy_start = None

    def new_tag(self) -> str:
        """A spawn tag: the watchdog's owner prefix (started now if need be) and a random part."""
        self._ensure_watchdog()
        return f"{self.owner}{secrets.token_hex(8)}"

    def _tell(self, line: str) -> None:
        """Keep the watchdog's list of live spawn leaders current (best effort: while we live,
        teardown does not depend on it)."""
        dog = self.watchdog
        if dog is None or dog.stdin is None or self._watchdog_for != os.getpid():
            return
        try:
            dog.stdin.write(line.encode())
            dog.stdin.flush()
        except OSError:  # it died: the next spawn starts another
            self.watchdog, self.owner = None, ""

    def _ensure_watchdog(self) -> None:
        dog = self.watchdog
        if not sys.platform.startswith("linux") or (
            dog is not None and dog.poll() is None and self._watchdog_for == os.getpid()
        ):
            return
        owner = secrets.token_hex(6) + "."
        try:
            # Its own session: a Ctrl-C to the terminal's group does not reach it; the pipe
            # to it is close-on-exec, so only we hold it, and its EOF means we are gone.
            dog = subprocess.Popen(
                [sys.executable, "-I", "-S", str(Path(__file__).resolve().parents[1] / "_watchdog.py"), owner],
                stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
            )
        except OSError:
            self.watchdog, self.owner = None, ""
            return
        self.watchdog, self.owner, self._watchdog_for = dog, owner, os.getpid()
        for t in list(self.live.values()):  # spawns that outlived the previous watchdog
            if t.start is not None:
                self._tell(f"+ {t.pid} {t.start}\n")
        atexit.register(self._stop_watchdog, dog)

    @staticmethod
    def _stop_watchdog(dog: subprocess.Popen[bytes]) -> None:
        """At a normal exit: EOF (it sweeps whatever spawn is still registered), then reap it."""
        with contextlib.suppress(OSError):
            if dog.stdin is not None:
                dog.stdin.close()
        with contextlib.suppress(subprocess.TimeoutExpired):
            dog.wait(timeout=5)


_registry = _Registry()


class ProcessTransport:
    """Transport over a child process's stdin/stdout."""

    def __init__(self, process: anyio.abc.Process, argv: list[str], stderr_lines: int, tag: str = "") -> None:
        self.process = process
        self.argv = argv
        self.pid = process.pid
        self.tag = tag
        self.stderr_tail: deque[str] = deque(maxlen=stderr_lines)
        self.stderr_total = 0
        self.on_stderr: Callable[[str], None] | None = None
        # stderr is redacted as it arrives: its lines reach error messages, the
        # transcript and reports, and agents do log their keys.
        self._redact = redactor()
        self._stdout = process.stdout
        self._stdin = process.stdin
        _deliver_output_at_once(process)
        # The asyncio writer under anyio's wrapper, when it has one (see ``send``).
        writer = getattr(process.stdin, "_stream", None)
        self._writer: asyncio.StreamWriter | None = writer if isinstance(writer, asyncio.StreamWriter) else None
        self._stdin_closed = False
        #: Still running when teardown's wait after stdin EOF ended (``terminate``).
        self.outlived_eof = False
        # pid -> start time of every descendant seen while the tree was linked.
        self._known_descendants: dict[int, int] = {}
        info = stat(self.pid)
        self.start = info.start if info is not None else None
        self._pipes = pipe_inodes_of(self.pid)
        #: Processes teardown killed besides the child (pids), for diagnostics and tests.
        self.stragglers_killed: list[int] = []

    @property
    def returncode(self) -> int | None:
        return self.process.returncode

    @property
    def output_closed(self) -> bool:
        """Whether we closed the agent's stdin (``close_output``): it has seen, or will see, EOF."""
        return self._stdin_closed

    async def send(self, data: bytes) -> None:
        if self._stdin is None or self._stdin_closed:
            raise PeerExited(
                "we already closed the peer's stdin",
                self.returncode,
                list(self.stderr_tail),
            )
        try:
            if self._writer is not None:
                # anyio's send minus its trailing cancel-shielded checkpoint, a whole extra pass
                # of the event loop per frame (a fifth of a prompt round trip's; bench/README.md).
                # What a checkpoint is for, letting other tasks run, the outbox does every 16
                # frames; a cancelled caller still stops before writing, and a full pipe still waits.
                await anyio.lowlevel.checkpoint_if_cancelled()
                self._writer.write(data)
                await self._writer.drain()
            else:
                await self._stdin.send(data)
        except (
            anyio.BrokenResourceError,
            anyio.ClosedResourceError,
            BrokenPipeError,
            ConnectionResetError,
        ):
            raise PeerExited(
                "the peer stopped reading its stdin (broken pipe)",
                self.returncode,
                list(self.stderr_tail),
            ) from None

    def has_unread(self) -> bool:
        """Whether the agent wrote output (or closed it) that we have not read yet; ``True`` when
        we cannot tell.  Never waits: asyncio's read buffer, then the pipe, polled."""
        stream = getattr(self._stdout, "_stream", None)
        if stream is None or getattr(stream, "_buffer", None) or getattr(stream, "_eof", False):
            return True
        pipe_transport = getattr(stream, "_transport", None)
        pipe = pipe_transport.get_extra_info("pipe") if pipe_transport is not None else None
        if pipe is None:
            return True
        try:
            ready, _, _ = select.select([pipe.fileno()], [], [], 0)
        except (OSError, ValueError):
            return True
        return bool(ready)

    async def receive(self) -> bytes:
        if self._stdout is None:
            return b""
        try:
            return await self._stdout.receive(READ_CHUNK)
        except (
            anyio.EndOfStream,
            anyio.ClosedResourceError,
            anyio.BrokenResourceError,
        ):
            return b""

    async def close_output(self) -> None:
        if self._stdin is not None and not self._stdin_closed:
            self._stdin_closed = True
            try:
                await self._stdin.aclose()
            except (OSError, anyio.BrokenResourceError):
                pass

    async def drain_stderr(self) -> None:
        stream = self.process.stderr
        if stream is None:
            return
        pending = b""
        skipping = False  # inside an over-long line whose head was already shown
        try:
            while True:
                chunk = await stream.receive(READ_CHUNK)
                pending += chunk
                *lines, pending = pending.split(b"\n")
                if lines and skipping:
                    lines, skipping = lines[1:], False  # the tail of that line: dropped, not a line of its own
                if len(pending) > 2 * STDERR_LINE_CAP:  # a flood without newlines
                    # Keep twice the cap before showing the head, so a secret that straddles the
                    # cut is still whole when it is redacted; the rest of the line is dropped.
                    if not skipping:
                        lines.append(pending)
                    pending, skipping = b"", True
                for line in lines:
                    self._stderr_line(line)
        except (
            anyio.EndOfStream,
            anyio.ClosedResourceError,
            anyio.BrokenResourceError,
        ):
            pass
        if pending and not skipping:
            self._stderr_line(pending)

    def _stderr_line(self, line: bytes) -> None:
        # Redact, then cut: a cut through a secret must not leave its prefix readable.
        text = self._redact(line.decode("utf-8", "replace").rstrip("\r"))[:STDERR_LINE_CAP]
        self.stderr_total += 1
        self.stderr_tail.append(text)
        if self.on_stderr is not None:
            self.on_stderr(text)

    def snapshot_descendants(self) -> None:
        """Remember the peer's descendants while the tree is still linked."""
        procs = processes()
        by_pid = {p.pid: p for p in procs}
        for pid in walk(children_map(procs), [self.pid]):
            self._known_descendants[pid] = by_pid[pid].start

    async def terminate(self, grace: float, eof_grace: float | None = None) -> int | None:
        """Close stdin, wait, SIGTERM the group, wait, SIGKILL everything.

        ``eof_grace`` (default ``grace``) bounds the first wait: a caller that has seen this
        command ignore stdin EOF before shortens it, the later stages keep ``grace``.  Sets
        ``outlived_eof`` when the process was still running when that wait ended."""
        self.snapshot_descendants()
        await self.close_output()
        exited = await self.wait_exit(grace if eof_grace is None else eof_grace)
        self.outlived_eof = not exited
        if not exited:
            self.snapshot_descendants()
            self._signal_all(signal.SIGTERM)
            if not await self.wait_exit(grace):
                self.snapshot_descendants()
                self._signal_all(signal.SIGKILL)
                await self.wait_exit(grace)
        await self._kill_stragglers(grace)
        return self.returncode

    async def wait_exit(self, timeout: float) -> bool:
        """True if the process exited within ``timeout`` seconds."""
        with anyio.move_on_after(timeout):
            await self.process.wait()
            return True
        return False

    async def wait_gone(self, timeout: float) -> bool:
        """True if the child *and every process of this spawn* exited within ``timeout``.

        ``wait_exit`` watches the direct child only, so a launcher that exits at once
        looks like a peer that exited, while the agent it started (in another process
        group, ignoring EOF) runs on until teardown kills it.  This waits for what
        teardown would otherwise have to kill (the same rules, see the module
        docstring): each round watches the pidfds of the processes left and looks
        again once one of them exits (a process may have forked meanwhile).  Without
        pidfds (not Linux) it is ``wait_exit``.
        """
        with anyio.move_on_after(timeout):
            await self.process.wait()
            while True:
                left = [p for p in self._belongs(processes()).values() if p.state != "Z"]
                if not left:
                    return True
                with contextlib.ExitStack() as stack:
                    fds = []
                    for p in left:
                        try:
                            fd = pidfd(p)
                        except OSError:  # no pidfds here (old kernel): the direct child it is
                            return True
                        if fd is not None:
                            stack.callback(os.close, fd)
                            fds.append(fd)
                    if fds:  # else: all gone since the scan; look again
                        await any_readable(fds)
        return False

    # ------------------------------------------------------------ the hunt
    def _ids_are_ours(self) -> bool:
        """Whether the child's pid - hence its group and session ids - can still only mean
        this spawn: the child (or its zombie) holds it, or nobody does.  Once the pid was
        recycled by another process, group and session no longer identify anything of ours."""
        info = stat(self.pid)
        return info is None or info.start == self.start

    def _killpg(self, sig: signal.Signals) -> None:
        if self._ids_are_ours():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.pid, sig)

    def _belongs(self, procs: list[Proc]) -> dict[int, Proc]:
        """Every process of this spawn (see the module docstring), the child excluded."""
        me = os.getpid()
        spared = {me, self.pid} | {pid for pid in _registry.live if pid != self.pid}
        tag = f"{SPAWN_TAG_VAR}={self.tag}".encode() if self.tag else None
        ours = self._ids_are_ours()
        found: dict[int, Proc] = {}
        for p in procs:
            if p.pid in spared:
                continue
            if (
                (ours and (p.session == self.pid or p.pgrp == self.pid))
                or self._known_descendants.get(p.pid) == p.start
                or (tag is not None and p.state != "Z" and environ_has(p.pid, tag))
                or (self._pipes and p.state != "Z" and holds_any(p.pid, self._pipes))
            ):
                found[p.pid] = p
        by_pid = {p.pid: p for p in procs}
        roots = list(found) + ([self.pid] if ours and self.pid in by_pid else [])
        for pid in walk(children_map(procs), roots):
            if pid not in spared:
                found[pid] = by_pid[pid]
        if not _registry.live.keys() - {self.pid} and _registry.busy_start is not None:
            # The end of a busy period: a child of ours in a session that is neither
            # ours nor its own was not started by us (our children inherit our
            # session or lead a new one): it was adopted, from a spawn's tree.
            our_session = os.getsid(0)
            for p in procs:
                if (
                    p.ppid == me
                    and p.pid not in spared
                    and p.state != "Z"
                    and p.session not in (our_session, p.pid)
                    and p.start >= _registry.busy_start
                ):
                    found.setdefault(p.pid, p)
        return found

    def _signal_all(self, sig: signal.Signals) -> None:
        self._killpg(sig)
        for p in self._belongs(processes()).values():
            if p.state != "Z":
                signal_if_same(p, sig)
        if self.returncode is None and self._ids_are_ours():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(self.pid, sig)

    async def _kill_stragglers(self, grace: float) -> None:
        # The child is gone, but processes of its tree - in its group, in other
        # groups, in other sessions, orphaned - may live on holding our pipes.
        self._killpg(signal.SIGKILL)
        me = os.getpid()
        victims = self._belongs(processes())
        if not victims:
            return
        with contextlib.ExitStack() as stack:
            watched: list[tuple[Proc, int | None]] = []
            for p in victims.values():
                fd = None if p.state == "Z" else signal_if_same(p, signal.SIGKILL, keep_fd=True)
                if fd is not None:
                    stack.callback(os.close, fd)
                    self.stragglers_killed.append(p.pid)
                watched.append((p, fd))
            # SIGKILL takes effect at once unless the machine is loaded or the process sits
            # in an uninterruptible wait: not less than 2 s, so what we killed is also reaped.
            with anyio.move_on_after(max(grace, 2.0)):
                for _p, fd in watched:
                    if fd is not None:
                        await anyio.wait_readable(fd)  # a pidfd is readable once the process exited
            for p, _fd in watched:
                now = stat(p.pid)
                if now is not None and now.start == p.start and now.ppid == me:
                    # Adopted (we are a subreaper): nobody else will reap it.
                    with contextlib.suppress(ChildProcessError, OSError):
                        os.waitpid(p.pid, os.WNOHANG)

    async def aclose(self) -> None:
        await self.terminate(1.0)


@contextlib.contextmanager
def _registered(transport: ProcessTransport) -> Iterator[None]:
    _registry.add(transport)
    try:
        yield
    finally:
        _registry.remove(transport)


@asynccontextmanager
async def spawn(
    command: str | list[str],
    *,
    env: Mapping[str, str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
    stderr_lines: int = 500,
    grace: float = 2.0,
    on_stderr: Callable[[str], None] | None = None,
    eof_grace: float | None = None,
) -> AsyncIterator[ProcessTransport]:
    """Start ``command`` and yield its transport; tear it down on exit, always (``grace`` per
    teardown stage; ``eof_grace``, when given, for the first one, see ``terminate``).

    The child's environment is ours plus ``env`` plus ``ACP_CONFORMANCE_SPAWN``
    (a random tag that lets teardown find its descendants).  Secret-looking
    values of ``env`` are registered for redaction (``transcript.register_secrets``):
    they are not in our own environment, where redaction looks by default.
    """
    argv = parse_command(command)
    full_env = dict(os.environ)
    if env:
        full_env.update(env)
        register_secrets(env)
    tag = _registry.new_tag()
    full_env[SPAWN_TAG_VAR] = tag
    if cwd is not None and not Path(cwd).is_dir():
        raise ConfigurationError(f"working directory {cwd} does not exist")
    _registry.enable_subreaper()
    try:
        process = await anyio.open_process(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=cwd,
            env=full_env,
            start_new_session=True,
        )
    except FileNotFoundError:
        raise ConfigurationError(
            f"cannot start peer: {argv[0]!r} not found (command: {shlex.join(argv)}); check the command and PATH"
        ) from None
    except PermissionError:
        raise ConfigurationError(f"cannot start peer: {argv[0]!r} is not executable") from None
    transport = ProcessTransport(process, argv, stderr_lines, tag)
    transport.on_stderr = on_stderr
    try:
        with _registered(transport):
            async with anyio.create_task_group() as tg:
                tg.start_soon(transport.drain_stderr)
                try:
                    yield transport
                finally:
                    with anyio.CancelScope(shield=True):
                        await transport.terminate(grace, eof_grace)
                    tg.cancel_scope.cancel()
    except BaseExceptionGroup as group:
        raise single_exception(group) from None
    finally:
        with anyio.CancelScope(shield=True), anyio.move_on_after(grace):
            await process.aclose()
