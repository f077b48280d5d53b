"""A peer process spoken to over its stdin/stdout, with stderr captured.

Why the care: peers under test are often wrappers (npx, uvx, node shims
around native binaries) whose grandchildren hold the pipes open after the
child dies, ignore stdin EOF, or flood stderr.  So the child gets its own
process group; stderr is drained concurrently into a bounded ring so a
flood can never stall the peer's stdout; and teardown escalates: close
stdin, wait, SIGTERM the group, wait, SIGKILL the group plus every
descendant found in /proc (catching those that called setsid).
"""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
from collections import deque
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import anyio.abc

from acp_conformance._util import single_exception
from acp_conformance.errors import ConfigurationError, PeerExited

__all__ = ["ProcessTransport", "descendants", "parse_command", "spawn"]

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


def descendants(pid: int) -> list[int]:
    """All live descendants of ``pid`` (Linux /proc walk; empty elsewhere)."""
    children: dict[int, list[int]] = {}
    proc = Path("/proc")
    if not proc.is_dir():
        return []
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # Field 4 (ppid) follows the parenthesised command name, which may contain spaces.
        try:
            ppid = int(stat[stat.rindex(")") + 2 :].split()[1])
        except (ValueError, IndexError):
            continue
        children.setdefault(ppid, []).append(int(entry.name))
    out: list[int] = []
    stack = [pid]
    while stack:
        for child in children.get(stack.pop(), []):
            out.append(child)
            stack.append(child)
    return out


class ProcessTransport:
    """Transport over a child process's stdin/stdout."""

    def __init__(self, process: anyio.abc.Process, argv: list[str], stderr_lines: int) -> None:
        self.process = process
        self.argv = argv
        self.pid = process.pid
        self.stderr_tail: deque[str] = deque(maxlen=stderr_lines)
        self.stderr_total = 0
        self.on_stderr: Callable[[str], None] | None = None
        self._stdout = process.stdout
        self._stdin = process.stdin
        self._stdin_closed = False
        self._known_descendants: set[int] = set()

    @property
    def returncode(self) -> int | None:
        return self.process.returncode

    async def send(self, data: bytes) -> None:
        if self._stdin is None or self._stdin_closed:
            raise PeerExited(
                "we already closed the peer's stdin",
                self.returncode,
                list(self.stderr_tail),
            )
        try:
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
        try:
            while True:
                chunk = await stream.receive(READ_CHUNK)
                pending += chunk
                *lines, pending = pending.split(b"\n")
                if len(pending) > STDERR_LINE_CAP:  # a flood without newlines
                    lines.append(pending)
                    pending = b""
                for line in lines:
                    self._stderr_line(line)
        except (
            anyio.EndOfStream,
            anyio.ClosedResourceError,
            anyio.BrokenResourceError,
        ):
            pass
        if pending:
            self._stderr_line(pending)

    def _stderr_line(self, line: bytes) -> None:
        text = line[:STDERR_LINE_CAP].decode("utf-8", "replace").rstrip("\r")
        self.stderr_total += 1
        self.stderr_tail.append(text)
        if self.on_stderr is not None:
            self.on_stderr(text)

    def snapshot_descendants(self) -> None:
        """Remember the peer's descendants while the tree is still linked."""
        self._known_descendants.update(descendants(self.pid))

    async def terminate(self, grace: float) -> int | None:
        """Close stdin, wait, SIGTERM the group, wait, SIGKILL everything."""
        self.snapshot_descendants()
        await self.close_output()
        if await self.wait_exit(grace):
            self._kill_stragglers()
            return self.returncode
        self.snapshot_descendants()
        self._signal_all(signal.SIGTERM)
        if not await self.wait_exit(grace):
            self.snapshot_descendants()
            self._signal_all(signal.SIGKILL)
            await self.wait_exit(grace)
        self._kill_stragglers()
        return self.returncode

    async def wait_exit(self, timeout: float) -> bool:
        """True if the process exited within ``timeout`` seconds."""
        with anyio.move_on_after(timeout):
            await self.process.wait()
            return True
        return False

    def _signal_all(self, sig: signal.Signals) -> None:
        try:
            os.killpg(self.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass
        for pid in self._known_descendants:
            try:
                os.kill(pid, sig)
            except (ProcessLookupError, PermissionError):
                pass
        if self.returncode is None:
            try:
                os.kill(self.pid, sig)
            except (ProcessLookupError, PermissionError):
                pass

    def _kill_stragglers(self) -> None:
        # The child is gone, but grandchildren in its group or that escaped it
        # (setsid) may live on holding our pipes: they die too.
        try:
            os.killpg(self.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        for pid in self._known_descendants:
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass

    async def aclose(self) -> None:
        await self.terminate(1.0)


@asynccontextmanager
async def spawn(
    command: str | list[str],
    *,
    env: Mapping[str, str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
    stderr_lines: int = 500,
    grace: float = 2.0,
    on_stderr: Callable[[str], None] | None = None,
) -> AsyncIterator[ProcessTransport]:
    """Start ``command`` and yield its transport; tear it down on exit, always."""
    argv = parse_command(command)
    full_env = dict(os.environ)
    if env:
        full_env.update(env)
    if cwd is not None and not Path(cwd).is_dir():
        raise ConfigurationError(f"working directory {cwd} does not exist")
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
    transport = ProcessTransport(process, argv, stderr_lines)
    transport.on_stderr = on_stderr
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(transport.drain_stderr)
            try:
                yield transport
            finally:
                with anyio.CancelScope(shield=True):
                    await transport.terminate(grace)
                tg.cancel_scope.cancel()
    except BaseExceptionGroup as group:
        raise single_exception(group) from None
    finally:
        with anyio.CancelScope(shield=True), anyio.move_on_after(grace):
            await process.aclose()
