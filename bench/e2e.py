"""Stacks over real stdio: round trips, update throughput, peak RSS; and agents' cold start.

One repetition runs every stack's driver once (in an order rotated per repetition) and
then times every agent's cold start ``cold_per_rep`` times (also rotated), so slow drifts
of this noisy machine hit all implementations alike.  Ratios are taken per repetition
(paired) and then summarized.
"""

from __future__ import annotations

import json
import os
import selectors
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass
from typing import Any

from bench.common import BenchError, progress, rotate, run_json, short_cmd, summarize
from bench.stacks import BASELINE, ColdAgent, Stack

INIT_LINE = (
    json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 0,
            "method": "initialize",
            "params": {
                "protocolVersion": 1,
                "clientCapabilities": {"fs": {"readTextFile": False, "writeTextFile": False}, "terminal": False},
                "clientInfo": {"name": "acp-bench", "version": "0"},
            },
        },
        separators=(",", ":"),
    ).encode()
    + b"\n"
)


@dataclass
class E2EConfig:
    round_trips: int
    warmup: int
    updates: int
    cold_per_rep: int
    driver_timeout: float = 180.0
    cold_timeout: float = 30.0


# ------------------------------------------------------------------ cold start
def task_cpu_ms(pid: int) -> float | None:
    """CPU time (ms, ns resolution) of all threads of ``pid`` so far, from ``/proc/<pid>/task/*/schedstat``."""
    total = 0
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return None
    for tid in tasks:
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as fh:
                total += int(fh.read().split()[0])
        except (OSError, ValueError, IndexError):
            continue
    return total / 1e6


def cold_start(argv: list[str], timeout: float) -> tuple[float, float | None]:
    """``(wall ms, agent CPU ms)`` from spawn to the initialize answer (see ``cold_start_ms``)."""
    box: list[float | None] = []
    wall = cold_start_ms(argv, timeout, cpu_out=box)
    return wall, (box[0] if box else None)


def cold_start_ms(argv: list[str], timeout: float, cpu_out: list[float | None] | None = None) -> float:
    """Spawn ``argv`` and time it until the first line of its answer to ``initialize``.

    The same bare harness for every agent (Popen + one write + one line read), so the
    number is the agent's own start-up plus one initialize round trip.
    """
    with tempfile.TemporaryDirectory(prefix="acp-bench-cold-") as cwd:
        t0 = time.perf_counter()
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            cwd=cwd,
            start_new_session=True,
        )
        try:
            assert proc.stdin is not None and proc.stdout is not None
            proc.stdin.write(INIT_LINE)
            proc.stdin.flush()
            fd = proc.stdout.fileno()
            buf = b""
            sel = selectors.DefaultSelector()
            sel.register(fd, selectors.EVENT_READ)
            deadline = t0 + timeout
            while b"\n" not in buf:
                left = deadline - time.perf_counter()
                if left <= 0 or not sel.select(left):
                    raise BenchError(f"no initialize answer within {timeout:g} s: {short_cmd(argv)}")
                chunk = os.read(fd, 65536)
                if not chunk:
                    raise BenchError(f"the agent exited before answering initialize: {short_cmd(argv)}")
                buf += chunk
            elapsed = (time.perf_counter() - t0) * 1e3
            if cpu_out is not None:
                # CPU the agent burnt to get there: scheduling delays of a busy machine excluded.
                cpu_out.append(task_cpu_ms(proc.pid))
            sel.close()
            line = buf.split(b"\n", 1)[0]
            try:
                answer = json.loads(line)
            except ValueError:
                raise BenchError(f"first line is not JSON: {line[:120]!r} ({short_cmd(argv)})") from None
            if not isinstance(answer, dict) or "result" not in answer:
                raise BenchError(f"initialize failed: {line[:200]!r} ({short_cmd(argv)})")
            proc.stdin.close()
            try:
                proc.wait(5.0)
            except subprocess.TimeoutExpired:
                pass
            return elapsed
        finally:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            proc.wait()


# ------------------------------------------------------------------ one repetition
def run_rep(
    rep: int,
    stacks: list[Stack],
    agents: list[ColdAgent],
    cfg: E2EConfig,
    raw: dict[str, Any],
    do_e2e: bool,
    do_cold: bool,
) -> None:
    if do_e2e:
        for stack in rotate([s for s in stacks if not s.skip], rep):
            argv = stack.argv(cfg.round_trips, cfg.warmup, cfg.updates)
            rec: dict[str, Any] = {"rep": rep}
            try:
                with tempfile.TemporaryDirectory(prefix="acp-bench-run-") as cwd:
                    res = run_json(argv, timeout=cfg.driver_timeout, cwd=cwd)
                if res.get("updates_received") != cfg.updates:
                    raise BenchError(f"received {res.get('updates_received')} of {cfg.updates} updates")
                rec.update(res)
                rec["rt_per_s"] = res["round_trips"] / res["rt_seconds"] if res["rt_seconds"] else None
                rec["updates_per_s"] = res["updates"] / res["upd_seconds"] if res["upd_seconds"] else None
                progress(
                    f"rep {rep + 1}: {stack.key:9s} {rec['rt_per_s'] or 0:10,.0f} rt/s "
                    f"{rec['updates_per_s'] or 0:12,.0f} updates/s  agent {_mib(res.get('agent_vmhwm_kib'))} MiB"
                )
            except BenchError as exc:
                rec["error"] = str(exc)
                progress(f"rep {rep + 1}: {stack.key} FAILED: {str(exc).splitlines()[0]}")
            raw.setdefault("e2e", {}).setdefault(stack.key, []).append(rec)
    if do_cold:
        for agent in rotate([a for a in agents if not a.skip], rep):
            for _ in range(cfg.cold_per_rep):
                rec = {"rep": rep}
                try:
                    rec["ms"], rec["cpu_ms"] = cold_start(agent.argv, cfg.cold_timeout)
                except (BenchError, OSError) as exc:
                    rec["error"] = str(exc)
                    progress(f"rep {rep + 1}: cold start {agent.key} FAILED: {str(exc).splitlines()[0]}")
                raw.setdefault("cold", {}).setdefault(agent.key, []).append(rec)
        line = "  ".join(
            f"{a.key} {_last_ms(raw, a.key)}" for a in agents if not a.skip and raw.get("cold", {}).get(a.key)
        )
        progress(f"rep {rep + 1}: cold start (ms) {line}")


def _cpu(rec: dict[str, Any], phase: str, side: str | None = None) -> float | None:
    """CPU µs per operation of a driver record (``phase`` rt or upd; both sides unless ``side``)."""
    sides = (side,) if side else ("agent", "client")
    values = [rec.get(f"{s}_cpu_{phase}_s") for s in sides]
    if any(v is None or v < 0 for v in values):
        return None
    count = rec.get("round_trips") if phase == "rt" else rec.get("updates")
    if not count:
        return None
    return sum(values) / count * 1e6  # type: ignore[arg-type]


def _last_ms(raw: dict[str, Any], key: str) -> str:
    recs = [r for r in raw["cold"][key] if "ms" in r]
    return f"{recs[-1]['ms']:.0f}" if recs else "err"


def _mib(kib: Any) -> str:
    return f"{kib / 1024:.1f}" if isinstance(kib, (int, float)) else "?"


# ------------------------------------------------------------------ summary
def summarize_e2e(raw: dict[str, Any], stacks: list[Stack], agents: list[ColdAgent]) -> dict[str, Any]:
    out: dict[str, Any] = {"stacks": {}, "cold": {}, "paired": {}}
    runs = raw.get("e2e", {})
    for stack in stacks:
        recs = [r for r in runs.get(stack.key, []) if "error" not in r]
        errors = [r["error"] for r in runs.get(stack.key, []) if "error" in r]
        out["stacks"][stack.key] = {
            "label": stack.label,
            "kind": stack.kind,
            "skip": stack.skip,
            "note": stack.note,
            "errors": errors,
            "rt_per_s": summarize((r["rt_per_s"] for r in recs), higher_is_better=True),
            "updates_per_s": summarize((r["updates_per_s"] for r in recs), higher_is_better=True),
            "agent_peak_rss_mib": summarize(
                (r["agent_vmhwm_kib"] / 1024 for r in recs if r.get("agent_vmhwm_kib")), higher_is_better=False
            ),
            "client_peak_rss_mib": summarize(
                (r["driver_vmhwm_kib"] / 1024 for r in recs if r.get("driver_vmhwm_kib")), higher_is_better=False
            ),
            "driver_init_ms": summarize((r["init_ms"] for r in recs), higher_is_better=False),
            # CPU time (user + system, both processes) per operation: barely moved by a busy
            # neighbour, unlike wall-clock rates.
            "cpu_us_per_rt": summarize((_cpu(r, "rt") for r in recs), higher_is_better=False),
            "cpu_us_per_update": summarize((_cpu(r, "upd") for r in recs), higher_is_better=False),
            "agent_cpu_us_per_update": summarize((_cpu(r, "upd", "agent") for r in recs), higher_is_better=False),
            "client_cpu_us_per_update": summarize((_cpu(r, "upd", "client") for r in recs), higher_is_better=False),
            "agent_cpu_us_per_rt": summarize((_cpu(r, "rt", "agent") for r in recs), higher_is_better=False),
            "client_cpu_us_per_rt": summarize((_cpu(r, "rt", "client") for r in recs), higher_is_better=False),
        }
    # Paired ratios: BASELINE's value over the other's, within the same repetition
    # (higher = our mock better).  RSS the other way round (lower is better).
    base = {r["rep"]: r for r in runs.get(BASELINE, []) if "error" not in r}
    for stack in stacks:
        recs = {r["rep"]: r for r in runs.get(stack.key, []) if "error" not in r}
        reps = sorted(set(base) & set(recs))
        pair: dict[str, Any] = {}
        for metric, better in (
            ("rt_per_s", "higher"),
            ("updates_per_s", "higher"),
            ("agent_vmhwm_kib", "lower"),
            ("cpu_rt", "lower"),
            ("cpu_upd", "lower"),
        ):
            ratios = []
            for rep in reps:
                if metric.startswith("cpu_"):
                    a, b = _cpu(base[rep], metric[4:]), _cpu(recs[rep], metric[4:])
                else:
                    a, b = base[rep].get(metric), recs[rep].get(metric)
                if a and b:
                    ratios.append(a / b if better == "higher" else b / a)
            pair[metric] = summarize(ratios, higher_is_better=True)
        out["paired"][stack.key] = pair
    # End-to-end cost of always-on validation: CPU time (both processes) on minus off, paired
    # per repetition (CPU time, not wall time: the machine's noise cancels far better).
    off = {r["rep"]: r for r in runs.get("mock-off", []) if "error" not in r}
    for phase, key in (("upd", "validation_cpu_us_per_update"), ("rt", "validation_cpu_us_per_round_trip")):
        diffs = []
        for rep in sorted(set(base) & set(off)):
            a, b = _cpu(base[rep], phase), _cpu(off[rep], phase)
            if a is not None and b is not None:
                diffs.append(a - b)
        out[key] = summarize(diffs, higher_is_better=False)

    cold = raw.get("cold", {})
    base_cold: dict[int, list[float]] = {}
    for r in cold.get(BASELINE, []):
        if "ms" in r:
            base_cold.setdefault(r["rep"], []).append(r["ms"])
    for agent in agents:
        recs = cold.get(agent.key, [])
        ok = [r for r in recs if "ms" in r]
        ratios = []
        by_rep: dict[int, list[float]] = {}
        for r in ok:
            by_rep.setdefault(r["rep"], []).append(r["ms"])
        for rep, values in by_rep.items():
            if rep in base_cold:
                ratios.append(min(values) / min(base_cold[rep]))
        out["cold"][agent.key] = {
            "label": agent.label,
            "skip": agent.skip,
            "note": agent.note,
            "errors": [r["error"] for r in recs if "error" in r],
            "ms": summarize((r["ms"] for r in ok), higher_is_better=False),
            "cpu_ms": summarize((r.get("cpu_ms") for r in ok), higher_is_better=False),
            "vs_mock_on": summarize(ratios, higher_is_better=True),
        }
    return out
