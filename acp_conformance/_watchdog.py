"""The watchdog: kills what a process spawned once that process is gone, however it went.

Why it exists: a spawn's teardown (``transport.process``) kills the peer's whole tree, but
only if the spawning process lives to run it.  A pytest worker killed with SIGKILL (an OOM
killer, a cancelled CI job, ``kill -9``) runs nothing, and agents that ignore stdin EOF (zed
codex-acp does) then live on forever, reparented to init, holding ports, files and CPU.

So each spawning process starts one watchdog (``python -I -S`` on this file, standard library
only: about 15 ms, once per process) in a session of its own, ignoring SIGINT, SIGTERM and
SIGHUP (a Ctrl-C to the terminal's process group must not kill it before it did its job).  Its
argument is the *owner prefix*: every spawn tag (``ACP_CONFORMANCE_SPAWN``, in the environment
of each spawn and so of everything it starts) the owner hands out begins with it.  It reads a
pipe only the owner holds:

* ``+ PID START``: a spawn started, led by PID (born at START, in clock ticks);
* ``- PID``: the owner tore that spawn down itself.

End of file on the pipe means the owner is gone (exited, or killed with any signal: the kernel
closes its descriptors either way).  The spawn leaders then get two seconds to exit by themselves
(their stdin reached EOF too, and a conforming peer exits on it); after that the watchdog kills,
with SIGKILL, every process whose environment carries a tag with the owner prefix (a spawn the
owner never got to register included), everything in the process group or session of a spawn
still registered (born no earlier than its leader: a pid is not reused while a group or session
holds it), and all their descendants; it looks again until nothing is left (bounded), and exits.
After a normal exit the owner's teardown has left nothing, and the watchdog exits at once.

Not covered: a descendant that cleared its environment and left its spawn's group and session
before the owner died (the owner's own teardown catches most of those while it lives; see
``transport.process``).
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import sys
import time

if __name__ == "__main__":  # run as a file with -I -S: find the package next to this file
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from acp_conformance._proctree import (
    PROC,
    SPAWN_TAG_VAR,
    Proc,
    children_map,
    pidfd,
    processes,
    signal_if_same,
    stat,
    walk,
)

__all__ = ["Spawn", "main", "sweep"]

#: Passes over /proc before giving up on a tree that keeps forking.
MAX_PASSES = 50
#: How long one pass waits for what it killed to exit (pidfds), at most.
PASS_WAIT = 1.0
#: How long the spawn leaders get to exit by themselves once their owner is gone.
GRACE = 2.0


class Spawn:
    """One registered spawn leader: pid and start time."""

    __slots__ = ("pid", "start")

    def __init__(self, pid: int, start: int) -> None:
        self.pid = pid
        self.start = start


def _tagged(pid: int, prefix: bytes) -> bool:
    try:
        env = (PROC / str(pid) / "environ").read_bytes()
    except OSError:
        return False
    return any(entry.startswith(prefix) for entry in env.split(b"\0"))


def _victims(spawns: list[Spawn], owner: str, me: int) -> list[Proc]:
    procs = processes()
    by_pid = {p.pid: p for p in procs}
    prefix = f"{SPAWN_TAG_VAR}={owner}".encode()
    found: dict[int, Proc] = {}
    for p in procs:
        if p.pid in (me, 1) or p.state == "Z":
            continue
        if (owner and _tagged(p.pid, prefix)) or any(
            s.pid in (p.pgrp, p.session) and p.start >= s.start for s in spawns
        ):
            found[p.pid] = p
    for pid in walk(children_map(procs), list(found)):
        p = by_pid[pid]
        if pid != me and p.state != "Z":
            found[pid] = p
    return list(found.values())


def _wait_exit(fds: list[int], timeout: float) -> None:
    """Until every pidfd in ``fds`` is readable (its process exited), at most ``timeout`` s."""
    deadline = time.monotonic() + timeout
    pending = list(fds)
    while pending:
        left = deadline - time.monotonic()
        if left <= 0:
            return
        ready, _, _ = select.select(pending, [], [], left)
        pending = [fd for fd in pending if fd not in ready]


def _leaders_exit(spawns: list[Spawn], grace: float) -> None:
    """Give the spawn leaders ``grace`` s to exit by themselves: their stdin reached EOF with the
    owner, and a conforming peer exits then (a relay reports the EOF first: killing it at once
    would hide from the suite what its client did)."""
    fds = []
    for s in spawns:
        now = stat(s.pid)
        if now is None or now.start != s.start or now.state == "Z":
            continue
        fd = pidfd(now)
        if fd is not None:
            fds.append(fd)
    try:
        _wait_exit(fds, grace)
    finally:
        for fd in fds:
            os.close(fd)


def sweep(spawns: list[Spawn], owner: str, grace: float = 0.0) -> int:
    """Kill every process of ``spawns`` and every one tagged with ``owner`` (after ``grace`` s for
    the spawn leaders to exit by themselves); return how many were signalled."""
    if grace > 0:
        with contextlib.suppress(OSError):  # no pidfds: no grace, straight to the kill
            _leaders_exit(spawns, grace)
    me = os.getpid()
    killed = 0
    for _ in range(MAX_PASSES):
        victims = _victims(spawns, owner, me)
        if not victims:
            break
        fds = []
        for p in victims:
            fd = signal_if_same(p, signal.SIGKILL, keep_fd=True)
            killed += 1
            if fd is not None:
                fds.append(fd)
        try:
            _wait_exit(fds, PASS_WAIT)  # a pidfd turns readable once its process exited
        finally:
            for fd in fds:
                os.close(fd)
    return killed


def main(argv: list[str]) -> int:
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGPIPE):
        signal.signal(sig, signal.SIG_IGN)
    owner = argv[0] if argv else ""
    live: dict[int, Spawn] = {}
    for line in sys.stdin.buffer:
        parts = line.split()
        try:
            if parts[:1] == [b"+"] and len(parts) == 3 and int(parts[1]) > 1:
                live[int(parts[1])] = Spawn(int(parts[1]), int(parts[2]))
            elif parts[:1] == [b"-"] and len(parts) == 2:
                live.pop(int(parts[1]), None)
        except ValueError:
            continue  # a garbled line names nothing; the owner never writes one
    sweep(list(live.values()), owner, GRACE)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
