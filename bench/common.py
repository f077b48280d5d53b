"""Shared helpers of the benchmark: paths, bounded subprocesses, statistics, Markdown tables."""

from __future__ import annotations

import json
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
BENCH = REPO / "bench"
PEERS = BENCH / "peers"
#: The interpreter running the benchmark: every Python peer uses it directly (never a
#: ``python`` shim on PATH, which may be a shell script costing tens of ms per start).
PY = sys.executable
SDK_DIR = REPO / "node_modules" / "@agentclientprotocol" / "sdk"


class BenchError(Exception):
    """A benchmark step failed; the message says what and shows the stderr tail."""


# ----------------------------------------------------------------- processes
@dataclass
class Finished:
    argv: list[str]
    returncode: int
    stdout: str
    stderr: str
    seconds: float


def run(
    argv: Sequence[str],
    *,
    timeout: float,
    cwd: str | os.PathLike[str] | None = None,
    env: dict[str, str] | None = None,
    stdin: int | None = subprocess.DEVNULL,
) -> Finished:
    """Run ``argv`` in its own process group; on timeout kill the whole group and raise."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        list(argv),
        cwd=cwd,
        env=env,
        stdin=stdin,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        kill_group(proc)
        out, err = proc.communicate()
        raise BenchError(f"timed out after {timeout:g} s: {short_cmd(argv)}\n{tail(err)}") from None
    except BaseException:
        kill_group(proc)
        raise
    finally:
        # Whatever the command left behind in its group (a grandchild) goes too.
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    return Finished(list(argv), proc.returncode, out, err, time.perf_counter() - t0)


def kill_group(proc: subprocess.Popen[Any]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.kill()
    except ProcessLookupError:
        pass


def run_json(argv: Sequence[str], *, timeout: float, cwd: str | os.PathLike[str] | None = None) -> dict[str, Any]:
    """Run a driver and parse the JSON object on the last line of its stdout."""
    done = run(argv, timeout=timeout, cwd=cwd)
    lines = [line for line in done.stdout.splitlines() if line.strip()]
    if done.returncode != 0 or not lines:
        raise BenchError(f"exit {done.returncode}: {short_cmd(argv)}\n{tail(done.stderr or done.stdout)}")
    try:
        value = json.loads(lines[-1])
    except ValueError:
        raise BenchError(f"no JSON result from {short_cmd(argv)}: {lines[-1][:200]!r}\n{tail(done.stderr)}") from None
    if not isinstance(value, dict):
        raise BenchError(f"unexpected result from {short_cmd(argv)}: {value!r}")
    value["_wall_seconds"] = done.seconds
    return value


def short_cmd(argv: Sequence[str]) -> str:
    text = " ".join(str(a).replace(str(REPO) + "/", "") for a in argv)
    return text if len(text) < 200 else text[:197] + "..."


def tail(text: str, lines: int = 12) -> str:
    return "\n".join("    " + line for line in (text or "").strip().splitlines()[-lines:])


# ----------------------------------------------------------------- statistics
def summarize(values: Iterable[float | None], *, higher_is_better: bool) -> dict[str, Any]:
    vals = [float(v) for v in values if v is not None]
    if not vals:
        return {"n": 0, "median": None, "best": None, "worst": None, "values": []}
    return {
        "n": len(vals),
        "median": statistics.median(vals),
        "best": max(vals) if higher_is_better else min(vals),
        "worst": min(vals) if higher_is_better else max(vals),
        "values": vals,
    }


def rotate(items: Sequence[Any], k: int) -> list[Any]:
    """``items`` started at position ``k``: each repetition runs the implementations in a new order."""
    if not items:
        return []
    k %= len(items)
    return list(items[k:]) + list(items[:k])


# ----------------------------------------------------------------- formatting
def fmt(value: float | None, unit: str = "", digits: int | None = None) -> str:
    if value is None:
        return "-"
    if digits is None:
        a = abs(value)
        digits = 0 if a >= 99.5 else 1 if a >= 9.95 else 2 if a >= 0.995 else 3
    text = f"{value:,.{digits}f}"
    return f"{text} {unit}".strip()


def fmt_ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}x"


def table(headers: Sequence[str], rows: Iterable[Sequence[str]], align: str | None = None) -> str:
    """A Markdown table; ``align`` is one of l/r per column (default: first left, rest right)."""
    rows = [list(map(str, r)) for r in rows]
    align = align or ("l" + "r" * (len(headers) - 1))
    sep = ["---:" if a == "r" else "---" for a in align]
    out = ["| " + " | ".join(headers) + " |", "| " + " | ".join(sep) + " |"]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(out)


# ----------------------------------------------------------------- machine
def _first_line(argv: list[str]) -> str | None:
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=20, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    text = (done.stdout or done.stderr).strip()
    return text.splitlines()[0] if text else None


def _dist_version(name: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(name)
    except PackageNotFoundError:
        return None


def machine_info() -> dict[str, Any]:
    cpu = None
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem_gib = None
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                mem_gib = round(int(line.split()[1]) / 1024 / 1024, 1)
    except OSError:
        pass
    sdk_version = None
    try:
        sdk_version = json.loads((SDK_DIR / "package.json").read_text())["version"]
    except (OSError, ValueError, KeyError):
        pass
    commit = None
    head = REPO / ".git" / "HEAD"
    try:  # read, never run git: the benchmark changes no repository state
        ref = head.read_text().strip()
        if ref.startswith("ref: "):
            commit = (REPO / ".git" / ref[5:]).read_text().strip()[:12]
        else:
            commit = ref[:12]
    except OSError:
        pass
    node = shutil.which("node")
    return {
        "nproc": os.cpu_count(),
        "cpu_model": cpu,
        "mem_gib": mem_gib,
        "kernel": platform.release(),
        "python": platform.python_version(),
        "python_executable": PY,
        "node": _first_line([node, "--version"]) if node else None,
        "gcc": _first_line(["gcc", "--version"]) if shutil.which("gcc") else None,
        "ts_sdk": sdk_version,
        "py_sdk": _dist_version("agent-client-protocol"),
        "jsonschema_rs": _dist_version("jsonschema-rs") or _dist_version("jsonschema_rs"),
        "jsonschema": _dist_version("jsonschema"),
        "orjson": _dist_version("orjson"),
        "anyio": _dist_version("anyio"),
        "commit": commit,
        "loadavg_start": load_average(),
    }


def load_average() -> list[float] | None:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


def progress(msg: str) -> None:
    print(f"[bench] {msg}", file=sys.stderr, flush=True)


def timed(fn: Callable[[], Any]) -> tuple[Any, float]:
    t0 = time.perf_counter()
    value = fn()
    return value, time.perf_counter() - t0
