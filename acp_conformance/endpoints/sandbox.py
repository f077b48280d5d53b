"""What the suite's client serves the agent from: a file sandbox and terminals that run nothing.

Split from :mod:`acp_conformance.endpoints.client` because they hold the security rules (an agent
under test chooses every path and command) and have no protocol in them: ``ClientEndpoint`` maps
``fs/*`` and ``terminal/*`` requests onto these and turns their errors into JSON-RPC errors.
"""

from __future__ import annotations

import errno
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from acp_conformance.core import jsonrpc
from acp_conformance.peer import HandlerError

__all__ = ["MAX_READ_BYTES", "Sandbox", "VirtualTerminals"]

ErrorCode = jsonrpc.ErrorCode
MAX_READ_BYTES = 16 * 1024 * 1024
_PATH_ERRNOS = frozenset({errno.ENAMETOOLONG, errno.ELOOP, errno.ENOTDIR, errno.EISDIR})


class Sandbox:
    """A directory the agent may read and write through ``fs/*``, and nothing else.

    The agent under test chooses the paths, and a local agent can also plant
    things in the sandbox directly (it is its session cwd), so:

    * the path is resolved (symlinks followed) and must stay under the root:
      ``..``, absolute paths elsewhere and symlinks pointing out are refused;
    * the resolved path is then opened one component at a time from the root
      with ``O_NOFOLLOW``: a component swapped for a symlink after the check is
      refused instead of followed (no check-then-use race);
    * only regular files are read or written: FIFOs, devices, sockets and
      directories are refused (a FIFO would block the suite forever), and so
      are files with more than one hard link (one may alias a file outside);
    * a file is truncated only after it was opened and checked, and reads are
      capped at ``MAX_READ_BYTES`` even if the file grows meanwhile;
    * every failure is a JSON-RPC error with a message, never an exception.
    """

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root).resolve()
        self.writes: list[tuple[str, str]] = []
        self.reads: list[str] = []

    def resolve(self, path: Any) -> Path:
        if not isinstance(path, str) or not path:
            raise HandlerError(ErrorCode.INVALID_PARAMS, "path must be a non-empty string")
        if not os.path.isabs(path):
            raise HandlerError(ErrorCode.INVALID_PARAMS, f"path {path!r} is not absolute")
        if "\x00" in path:
            raise HandlerError(ErrorCode.INVALID_PARAMS, "path contains a NUL byte")
        # resolve() follows symlinks, so a link inside pointing outside is caught too.
        try:
            real = Path(path).resolve()
        except RuntimeError:  # Python < 3.13 reports a symlink loop this way
            raise HandlerError(ErrorCode.INVALID_PARAMS, f"path {path!r} is a symlink loop") from None
        except OSError as exc:
            raise HandlerError(ErrorCode.INVALID_PARAMS, f"path {path!r} cannot be resolved: {exc.strerror}") from None
        if real != self.root and self.root not in real.parents:
            raise HandlerError(ErrorCode.INVALID_PARAMS, f"path {path!r} is outside the session sandbox {self.root}")
        return real

    # ------------------------------------------------------- race-free opening
    def _open_parent(self, real: Path, path: str, *, create: bool) -> int:
        """An fd of ``real``'s directory, walked from the root without following links."""
        parts = real.relative_to(self.root).parts
        fd = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            for part in parts[:-1]:
                try:
                    nxt = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
                except FileNotFoundError:
                    if not create:
                        raise
                    os.mkdir(part, 0o755, dir_fd=fd)
                    nxt = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
                os.close(fd)
                fd = nxt
        except OSError as exc:
            os.close(fd)
            if isinstance(exc, FileNotFoundError):
                raise
            if exc.errno in (errno.ELOOP, errno.ENOTDIR):  # a symlink or a file where a directory was checked
                raise HandlerError(
                    ErrorCode.INVALID_PARAMS, f"path {path!r} changed while being opened; refused"
                ) from None
            raise self._os_error(exc, "open", path) from None
        return fd

    @staticmethod
    def _os_error(exc: OSError, verb: str, path: str) -> HandlerError:
        """An OS error as a JSON-RPC error: bad path shapes are the agent's invalid params."""
        code = ErrorCode.INVALID_PARAMS if exc.errno in _PATH_ERRNOS else ErrorCode.INTERNAL_ERROR
        return HandlerError(code, f"cannot {verb} {path}: {exc.strerror}")

    @staticmethod
    def _check_regular(st: os.stat_result, path: str) -> None:
        if stat.S_ISDIR(st.st_mode):
            raise HandlerError(ErrorCode.INVALID_PARAMS, f"{path} is a directory")
        if not stat.S_ISREG(st.st_mode):
            raise HandlerError(
                ErrorCode.INVALID_PARAMS, f"{path} is not a regular file (FIFO, device, socket or symlink); refused"
            )
        if st.st_nlink > 1:
            raise HandlerError(
                ErrorCode.INVALID_PARAMS,
                f"{path} has {st.st_nlink} hard links (one may be outside the sandbox); refused",
            )

    def read(self, path: Any, line: Any = None, limit: Any = None) -> str:
        real = self.resolve(path)
        not_found = HandlerError(ErrorCode.RESOURCE_NOT_FOUND, f"file not found: {path}", {"uri": f"file://{path}"})
        if real == self.root:
            raise not_found  # a directory is no file (as before the hardening)
        try:
            parent = self._open_parent(real, path, create=False)
        except FileNotFoundError:
            raise not_found from None
        try:
            try:
                before = os.stat(real.name, dir_fd=parent, follow_symlinks=False)
            except FileNotFoundError:
                raise not_found from None
            if stat.S_ISDIR(before.st_mode):
                raise not_found
            self._check_regular(before, path)
            flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
            fd = os.open(real.name, flags, dir_fd=parent)
        except OSError as exc:
            raise self._os_error(exc, "read", path) from None
        finally:
            os.close(parent)
        try:
            st = os.fstat(fd)
            if (st.st_dev, st.st_ino) != (before.st_dev, before.st_ino):
                raise HandlerError(ErrorCode.INVALID_PARAMS, f"{path} changed while being opened; refused")
            self._check_regular(st, path)
            if st.st_size > MAX_READ_BYTES:
                raise HandlerError(ErrorCode.INVALID_PARAMS, f"file {path} is larger than {MAX_READ_BYTES} bytes")
            chunks: list[bytes] = []
            size = 0
            while size <= MAX_READ_BYTES:
                chunk = os.read(fd, min(1024 * 1024, MAX_READ_BYTES + 1 - size))
                if not chunk:
                    break
                chunks.append(chunk)
                size += len(chunk)
            if size > MAX_READ_BYTES:
                raise HandlerError(ErrorCode.INVALID_PARAMS, f"file {path} is larger than {MAX_READ_BYTES} bytes")
            data = b"".join(chunks)
        except OSError as exc:
            raise self._os_error(exc, "read", path) from None
        finally:
            os.close(fd)
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            raise HandlerError(ErrorCode.INVALID_PARAMS, f"file {path} is not UTF-8 text") from None
        self.reads.append(str(real))
        if line is None and limit is None:
            return text
        # Only "\n" ends a line: str.splitlines() would also split on \f, \x85, U+2028...
        lines = text.split("\n")
        lines = [line + "\n" for line in lines[:-1]] + ([lines[-1]] if lines[-1] else [])
        start = max(int(line) - 1, 0) if isinstance(line, int) else 0
        end = start + int(limit) if isinstance(limit, int) else len(lines)
        return "".join(lines[start:end])

    def write(self, path: Any, content: Any) -> None:
        if not isinstance(content, str):
            raise HandlerError(ErrorCode.INVALID_PARAMS, "content must be a string")
        real = self.resolve(path)
        if real == self.root:
            raise HandlerError(ErrorCode.INVALID_PARAMS, f"{path} is a directory")
        try:
            data = content.encode("utf-8")
        except UnicodeEncodeError:  # JSON may carry lone surrogates ("\ud800"): not text a file can hold
            raise HandlerError(ErrorCode.INVALID_PARAMS, "content is not valid Unicode (lone surrogate)") from None
        try:
            parent = self._open_parent(real, path, create=True)
        except OSError as exc:
            raise self._os_error(exc, "write", path) from None
        try:
            try:
                before: os.stat_result | None = os.stat(real.name, dir_fd=parent, follow_symlinks=False)
            except FileNotFoundError:
                before = None
            if before is not None:
                self._check_regular(before, path)
            # No O_TRUNC: truncate only once the opened file is known to be the one checked.
            flags = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
            fd = os.open(real.name, flags, 0o644, dir_fd=parent)
        except OSError as exc:
            raise self._os_error(exc, "write", path) from None
        finally:
            os.close(parent)
        try:
            st = os.fstat(fd)
            if before is not None and (st.st_dev, st.st_ino) != (before.st_dev, before.st_ino):
                raise HandlerError(ErrorCode.INVALID_PARAMS, f"{path} changed while being opened; refused")
            self._check_regular(st, path)
            os.ftruncate(fd, 0)
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
        except OSError as exc:
            raise self._os_error(exc, "write", path) from None
        finally:
            os.close(fd)
        self.writes.append((str(real), content))


@dataclass
class _Terminal:
    command: str
    args: list[str]
    output: str
    exit_code: int | None
    signal: str | None = None
    limit: int | None = None
    released: bool = False


class VirtualTerminals:
    """Terminals that run nothing: scripted output and exit status per command.

    ``script`` maps a command name to ``(output, exit_code)``; ``echo`` echoes
    its arguments (no expansion: ``$SECRET`` stays ``$SECRET``); ``env`` and
    ``printenv`` show the *sandbox's* environment - a fixed minimal one
    (``PATH``, ``HOME`` and ``PWD`` at the requested cwd, ``SHELL``, ``LANG``,
    ``TERM``) plus the ``env`` of the request - never the user's; anything
    else prints nothing and exits 0.  Nothing is ever executed.
    """

    BASE_ENV = (
        ("PATH", "/usr/local/bin:/usr/bin:/bin"),
        ("SHELL", "/bin/sh"),
        ("LANG", "C.UTF-8"),
        ("TERM", "dumb"),
    )

    def __init__(self, script: dict[str, tuple[str, int]] | None = None) -> None:
        self.script = dict(script or {})
        self.terminals: dict[str, _Terminal] = {}
        self._n = 0

    def create(self, params: dict[str, Any]) -> str:
        command = params.get("command")
        args = params.get("args") or []
        if not isinstance(command, str):
            raise HandlerError(ErrorCode.INVALID_PARAMS, "command must be a string")
        if command in self.script:
            output, code = self.script[command]
        elif command == "echo":
            output, code = " ".join(str(a) for a in args) + "\n", 0
        elif command in ("env", "printenv"):
            output, code = self._env_command(command, args, params)
        else:
            output, code = "", 0
        self._n += 1
        tid = f"term-{self._n}"
        limit = params.get("outputByteLimit")
        self.terminals[tid] = _Terminal(
            command, list(args), output, code, limit=limit if isinstance(limit, int) else None
        )
        return tid

    def _env_command(self, command: str, args: Any, params: dict[str, Any]) -> tuple[str, int]:
        cwd = params.get("cwd")
        cwd = cwd if isinstance(cwd, str) and os.path.isabs(cwd) else "/"
        env = dict(self.BASE_ENV)
        env.update(HOME=cwd, PWD=cwd)
        extra = params.get("env")
        for item in extra if isinstance(extra, list) else []:
            if isinstance(item, dict) and isinstance(item.get("name"), str) and isinstance(item.get("value"), str):
                env[item["name"]] = item["value"]
        names = [a for a in args if isinstance(a, str)] if isinstance(args, list) else []
        if command == "printenv" and names:
            found = [env[n] for n in names if n in env]
            return "".join(v + "\n" for v in found), 0 if len(found) == len(names) else 1
        return "".join(f"{k}={v}\n" for k, v in sorted(env.items())), 0

    def get(self, tid: Any) -> _Terminal:
        term = self.terminals.get(tid) if isinstance(tid, str) else None
        if term is None or term.released:
            raise HandlerError(ErrorCode.INVALID_PARAMS, f"unknown or released terminal {tid!r}")
        return term

    @staticmethod
    def truncate(output: str, limit: int | None) -> tuple[str, bool]:
        """Keep the tail within ``limit`` bytes, cut on a character boundary."""
        data = output.encode("utf-8")
        if limit is None or len(data) <= limit:
            return output, False
        tail = data[len(data) - limit :]
        # Drop UTF-8 continuation bytes at the cut so no character is split.
        i = 0
        while i < len(tail) and (tail[i] & 0xC0) == 0x80:
            i += 1
        return tail[i:].decode("utf-8"), True

    @property
    def unreleased(self) -> list[str]:
        return [tid for tid, t in self.terminals.items() if not t.released]
