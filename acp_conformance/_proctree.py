"""The process tree of a spawn, read from /proc: who is still alive, and signalling them safely.

Kept apart from the transport because it is all about identity, not bytes: a pid alone names
nothing for long (it is recycled), so every process here is a ``Proc`` (pid *and* start time),
and nothing is signalled until /proc confirms it is still the same process (through a pidfd
where the kernel has them, so a pid recycled between the check and the signal is never hit).
Linux only; elsewhere every scan comes back empty and teardown falls back to the process group.
Standard library only: the watchdog (``acp_conformance._watchdog``) runs it with ``python -I -S``.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "SPAWN_TAG_VAR",
    "Proc",
    "become_subreaper",
    "children_map",
    "descendants",
    "die_with_parent",
    "environ_has",
    "holds_any",
    "pidfd",
    "pipe_inodes_of",
    "prctl",
    "processes",
    "signal_if_same",
    "stat",
    "walk",
]

PROC = Path("/proc")
#: Environment variable carrying a spawn's tag: a random value only that spawn's tree inherits,
#: how teardown and the watchdog recognise its processes wherever they moved.
SPAWN_TAG_VAR = "ACP_CONFORMANCE_SPAWN"


@dataclass(frozen=True, slots=True)
class Proc:
    """The fields of /proc/PID/stat that teardown needs."""

    pid: int
    state: str
    ppid: int
    pgrp: int
    session: int
    start: int  # clock ticks after boot: with the pid, identifies one process


def stat(pid: int) -> Proc | None:
    # A string path and bytes, not pathlib and text: every teardown scans the whole of /proc
    # twice (1.55 -> 1.0 ms a scan of 70 processes).
    try:
        with open(f"{PROC}/{pid}/stat", "rb") as fh:
            data = fh.read()
        # The command name is parenthesised and may contain anything, ")" included.
        fields = data[data.rindex(b")") + 2 :].split()
        return Proc(pid, fields[0].decode("ascii"), int(fields[1]), int(fields[2]), int(fields[3]), int(fields[19]))
    except (OSError, ValueError, IndexError):
        return None


def processes() -> list[Proc]:
    try:
        names = os.listdir(PROC)
    except OSError:
        return []
    out = []
    for name in names:
        if name.isdigit():
            info = stat(int(name))
            if info is not None:
                out.append(info)
    return out


def children_map(procs: list[Proc]) -> dict[int, list[int]]:
    children: dict[int, list[int]] = {}
    for p in procs:
        children.setdefault(p.ppid, []).append(p.pid)
    return children


def walk(children: dict[int, list[int]], roots: list[int]) -> list[int]:
    out: list[int] = []
    seen = set(roots)
    stack = list(roots)
    while stack:
        for child in children.get(stack.pop(), []):
            if child not in seen:
                seen.add(child)
                out.append(child)
                stack.append(child)
    return out


def descendants(pid: int) -> list[int]:
    """All live descendants of ``pid`` (Linux /proc walk; empty elsewhere)."""
    return walk(children_map(processes()), [pid])


def environ_has(pid: int, needle: bytes) -> bool:
    try:
        with open(f"{PROC}/{pid}/environ", "rb") as fh:
            return needle in fh.read().split(b"\0")
    except OSError:
        return False


def pipe_inodes_of(pid: int) -> set[str]:
    out = set()
    for fd in (0, 1, 2):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("pipe:"):
            out.add(target)
    return out


def holds_any(pid: int, pipes: set[str]) -> bool:
    try:
        entries = list(os.scandir(f"/proc/{pid}/fd"))
    except OSError:
        return False
    for entry in entries:
        try:
            if os.readlink(entry.path) in pipes:
                return True
        except OSError:
            continue
    return False


def signal_if_same(p: Proc, sig: signal.Signals, *, keep_fd: bool = False) -> int | None:
    """Signal ``p`` if it is still the same process.

    With ``keep_fd``, returns an open pidfd of the signalled process (the
    caller closes it), or None when it was not signalled or pidfds are
    unavailable.  The pidfd is opened before the identity check, so a pid
    recycled in between is never signalled.
    """
    try:
        fd: int | None = os.pidfd_open(p.pid)
    except (AttributeError, OSError):
        fd = None
    signalled = False
    try:
        now = stat(p.pid)
        if now is not None and now.start == p.start:
            if fd is not None:
                signal.pidfd_send_signal(fd, sig)
            else:
                os.kill(p.pid, sig)
            signalled = True
    except OSError:  # ProcessLookupError, PermissionError included
        pass
    if fd is not None and not (keep_fd and signalled):
        os.close(fd)
        fd = None
    return fd


def pidfd(p: Proc) -> int | None:
    """An open pidfd of ``p``, or None if it is gone or its pid now names another process
    (the caller closes the fd).  OSError if pidfds are not available."""
    try:
        fd = os.pidfd_open(p.pid)
    except ProcessLookupError:
        return None
    except AttributeError:
        raise OSError("no pidfd_open") from None
    now = stat(p.pid)
    if now is None or now.start != p.start:
        os.close(fd)
        return None
    return fd


_PR_SET_PDEATHSIG = 1
_PR_SET_CHILD_SUBREAPER = 36


def prctl(option: int, arg: int) -> bool:
    """``prctl(2)`` on this process (Linux); whether it took effect.  Safe between fork and exec
    (``ctypes`` is imported at module load, not here)."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        return int(ctypes.CDLL(None, use_errno=True).prctl(option, arg, 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False


def become_subreaper() -> bool:
    """Orphans of our descendants are re-parented to us, not to init (``PR_SET_CHILD_SUBREAPER``)."""
    return prctl(_PR_SET_CHILD_SUBREAPER, 1)


def die_with_parent(sig: signal.Signals = signal.SIGKILL) -> bool:
    """Have the kernel send ``sig`` to this process when its parent dies (Linux
    ``PR_SET_PDEATHSIG``); returns whether it is in force.

    For processes whose parent owns their lifetime (an xdist worker of a pytest controller, the
    client ``acp_drive_agent`` starts): when the parent is killed with SIGKILL they go at once,
    and their watchdogs clean up what they had started.  If the parent is already gone
    (``getppid`` changed meanwhile), this process signals itself: the kernel would not.
    """
    parent = os.getppid()
    if not prctl(_PR_SET_PDEATHSIG, int(sig)):
        return False
    if os.getppid() != parent:
        os.kill(os.getpid(), sig)
    return True
