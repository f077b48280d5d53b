"""Real terminals for the reference client: ``terminal/*`` runs actual commands.

Output (stdout and stderr merged) is kept up to ``outputByteLimit`` bytes,
cut from the front on a UTF-8 character boundary; ``terminal/create``
answers as soon as the process has started; ``kill`` stops the process
group but keeps the id valid; ``release`` kills if needed and invalidates
the id.
"""

from __future__ import annotations

import os
import signal
import subprocess
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.abc

from acp_conformance.core import jsonrpc
from acp_conformance.peer import HandlerError

__all__ = ["RealTerminals", "Terminal", "tail_on_char_boundary"]

ErrorCode = jsonrpc.ErrorCode
DEFAULT_LIMIT = 1024 * 1024


def tail_on_char_boundary(data: bytes, limit: int) -> tuple[bytes, bool]:
    """The last ``limit`` bytes of ``data`` (fewer if the cut would split a
    UTF-8 character), and whether anything was cut."""
    if len(data) <= limit:
        return data, False
    tail = data[len(data) - limit :] if limit > 0 else b""
    i = 0
    while i < len(tail) and (tail[i] & 0xC0) == 0x80:
        i += 1
    return tail[i:], True


@dataclass
class Terminal:
    id: str
    process: anyio.abc.Process
    limit: int
    output: bytearray = field(default_factory=bytearray)
    truncated: bool = False
    released: bool = False
    exited: anyio.Event = field(default_factory=anyio.Event)
    reader_done: anyio.Event = field(default_factory=anyio.Event)

    def append(self, chunk: bytes) -> None:
        self.output += chunk
        if len(self.output) > self.limit:
            kept, _ = tail_on_char_boundary(bytes(self.output), self.limit)
            self.output = bytearray(kept)
            self.truncated = True

    def exit_status(self) -> dict[str, Any] | None:
        code = self.process.returncode
        if code is None:
            return None
        if code < 0:
            try:
                name = signal.Signals(-code).name
            except ValueError:
                name = f"SIG{-code}"
            return {"exitCode": None, "signal": name}
        return {"exitCode": code, "signal": None}


class RealTerminals:
    """Terminals backed by processes, each in its own process group."""

    def __init__(self, start_soon: Any, default_cwd: str) -> None:
        self._start_soon = start_soon
        self.default_cwd = default_cwd
        self.terminals: dict[str, Terminal] = {}
        self._n = 0

    def get(self, tid: Any) -> Terminal:
        term = self.terminals.get(tid) if isinstance(tid, str) else None
        if term is None or term.released:
            raise HandlerError(ErrorCode.INVALID_PARAMS, f"unknown or released terminal {tid!r}")
        return term

    async def create(self, params: dict[str, Any]) -> dict[str, Any]:
        command = params.get("command")
        args = params.get("args") or []
        if not isinstance(command, str) or not isinstance(args, list):
            raise HandlerError(ErrorCode.INVALID_PARAMS, "command must be a string and args a list")
        cwd = params.get("cwd") or self.default_cwd
        env = dict(os.environ)
        for item in params.get("env") or []:
            if isinstance(item, dict) and isinstance(item.get("name"), str):
                env[item["name"]] = str(item.get("value", ""))
        limit = params.get("outputByteLimit")
        limit = limit if isinstance(limit, int) and limit >= 0 else DEFAULT_LIMIT
        try:
            process = await anyio.open_process(
                [command, *[str(a) for a in args]],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                cwd=cwd,
                env=env,
                start_new_session=True,
            )
        except OSError as exc:
            raise HandlerError(ErrorCode.INTERNAL_ERROR, f"cannot start {command!r}: {exc.strerror or exc}") from None
        self._n += 1
        tid = f"term-{self._n}"
        term = Terminal(tid, process, limit)
        self.terminals[tid] = term
        self._start_soon(self._pump, term)
        self._start_soon(self._wait, term)
        return {"terminalId": tid}

    async def _pump(self, term: Terminal) -> None:
        stream = term.process.stdout
        if stream is not None:
            try:
                while True:
                    term.append(await stream.receive(65536))
            except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
                pass
        term.reader_done.set()

    async def _wait(self, term: Terminal) -> None:
        await term.process.wait()
        term.exited.set()

    async def output(self, tid: Any) -> dict[str, Any]:
        term = self.get(tid)
        if term.exited.is_set():
            with anyio.move_on_after(1.0):  # output a grandchild still holds open is not waited for
                await term.reader_done.wait()
        result: dict[str, Any] = {
            "output": bytes(term.output).decode("utf-8", "replace"),
            "truncated": term.truncated,
        }
        status = term.exit_status() if term.exited.is_set() else None
        if status is not None:
            result["exitStatus"] = status
        return result

    async def wait_for_exit(self, tid: Any) -> dict[str, Any]:
        term = self.get(tid)
        await term.exited.wait()
        with anyio.move_on_after(1.0):
            await term.reader_done.wait()
        status = term.exit_status()
        assert status is not None
        return status

    def _kill(self, term: Terminal) -> None:
        if term.process.returncode is None:
            try:
                os.killpg(term.process.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass

    async def kill(self, tid: Any) -> dict[str, Any]:
        term = self.get(tid)
        self._kill(term)
        with anyio.move_on_after(5):
            await term.exited.wait()
        return {}

    async def release(self, tid: Any) -> dict[str, Any]:
        term = self.get(tid)
        self._kill(term)
        term.released = True
        return {}

    async def close_all(self) -> None:
        for term in self.terminals.values():
            self._kill(term)
            term.released = True
