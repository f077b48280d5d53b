"""What every benchmark peer agrees on (Python peers import this; the Node and C ones mirror it).

A *driver* is started as ``DRIVER [--no-validate] ROUND_TRIPS WARMUP UPDATES AGENT_ARGV...``.
It spawns the agent, times spawn -> ``initialize`` response, opens a session, runs ``WARMUP``
untimed prompt round trips (prompt text ``ping``: the agent ends the turn at once) and one
untimed ``bench:updates 100`` turn; then the timed ``bench:updates UPDATES`` turn (the clock
stops when the response *and* every update have been handled), after which it reads the
agent's ``VmHWM``/``VmRSS`` from ``/proc`` (the peak of a fresh session's long stream); then
``ROUND_TRIPS`` timed round trips.  Around each timed phase it reads the CPU time of both
processes.  Finally it closes the agent's stdin, waits for it to exit and prints one JSON
object (``RESULT_KEYS``) as the last line of its stdout.

An *agent* answers a prompt containing ``bench:updates N`` with N ``agent_message_chunk``
updates (text ``chunk_text(i)``, one ``messageId``), then ``end_turn``; any other prompt ends
the turn at once with ``end_turn``.
"""

from __future__ import annotations

import json
import os
import re
import sys
from typing import Any

RESULT_KEYS = (
    "init_ms",
    "round_trips",
    "rt_seconds",
    "updates",
    "updates_received",
    "upd_seconds",
    "agent_pid",
    "agent_vmhwm_kib",
    "agent_vmrss_kib",
    "driver_vmhwm_kib",
    # CPU seconds (user + system, all threads, from /proc/<pid>/stat) spent in each timed phase:
    "agent_cpu_rt_s",
    "client_cpu_rt_s",
    "agent_cpu_upd_s",
    "client_cpu_upd_s",
)

PING = "ping"
WARM_UPDATES = 100
_UPDATES_RE = re.compile(r"bench:updates (\d+)")


def updates_wanted(text: str) -> int:
    """N for a ``bench:updates N`` prompt, else 0."""
    m = _UPDATES_RE.search(text)
    return int(m.group(1)) if m else 0


def updates_prompt(n: int) -> str:
    return f"bench:updates {n}"


def chunk_text(i: int) -> str:
    """The text of the i-th streamed chunk: the same bytes in every stack."""
    return f"chunk {i:05d} of the streamed reply "


def proc_status_kib(pid: int | None = None) -> dict[str, int]:
    """``VmHWM``/``VmRSS`` (KiB) of a live process, from ``/proc/<pid>/status``."""
    path = f"/proc/{pid if pid is not None else 'self'}/status"
    out: dict[str, int] = {}
    try:
        with open(path) as fh:
            for line in fh:
                if line.startswith(("VmHWM:", "VmRSS:")):
                    key, value = line.split(":", 1)
                    out[key] = int(value.split()[0])
    except OSError:
        pass
    return out


_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def cpu_seconds(pid: int | None = None) -> float | None:
    """User + system CPU time of a process (all its threads), from ``/proc/<pid>/stat``."""
    try:
        with open(f"/proc/{pid if pid is not None else 'self'}/stat") as fh:
            stat = fh.read()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / _TICK


class CpuClock:
    """CPU seconds of the agent and of this driver over one phase."""

    def __init__(self, agent_pid: int) -> None:
        self.agent_pid = agent_pid
        self.agent0 = cpu_seconds(agent_pid)
        self.self0 = cpu_seconds()

    def stop(self) -> tuple[float | None, float | None]:
        a, s = cpu_seconds(self.agent_pid), cpu_seconds()
        return (
            None if a is None or self.agent0 is None else a - self.agent0,
            None if s is None or self.self0 is None else s - self.self0,
        )


def parse_argv(argv: list[str]) -> tuple[bool, int, int, int, list[str]]:
    """``[--no-validate] ROUND_TRIPS WARMUP UPDATES AGENT_ARGV...``."""
    validate = True
    if argv and argv[0] == "--no-validate":
        validate, argv = False, argv[1:]
    if len(argv) < 4:
        sys.exit("usage: DRIVER [--no-validate] ROUND_TRIPS WARMUP UPDATES AGENT_ARGV...")
    return validate, int(argv[0]), int(argv[1]), int(argv[2]), argv[3:]


def emit_result(**values: Any) -> None:
    values["driver_vmhwm_kib"] = proc_status_kib().get("VmHWM")
    missing = [k for k in RESULT_KEYS if k not in values]
    if missing:
        raise SystemExit(f"driver bug: result lacks {missing}")
    sys.stdout.write(json.dumps(values) + "\n")
    sys.stdout.flush()


def init_params() -> dict[str, Any]:
    return {
        "protocolVersion": 1,
        "clientCapabilities": {"fs": {"readTextFile": False, "writeTextFile": False}, "terminal": False},
        "clientInfo": {"name": "acp-bench", "version": "0"},
    }


def session_cwd() -> str:
    return os.path.realpath(os.environ.get("BENCH_SESSION_CWD") or os.getcwd())
