"""``--only profile``: where our stack spends its time (pyinstrument, from PyPI).

Runs our stack (validation on) twice under the statistical profiler, both sides at once:
a round-trip workload (many ``ping`` prompts) and a streaming workload (one long
``bench:updates`` turn).  Text reports go to ``bench/results/profile-*.txt``; the
top of each is printed.  Not part of the default run: profiling distorts the timings.
"""

from __future__ import annotations

import importlib.util
import tempfile
from pathlib import Path
from typing import Any

from bench.common import PEERS, PY, BenchError, progress, run_json

WORKLOADS = {
    # name: (round trips, warm-up, updates)
    "round-trips": (3000, 100, 100),
    "updates": (0, 10, 30000),
}


def available() -> str | None:
    if importlib.util.find_spec("pyinstrument") is None:
        return "pyinstrument is not installed (pip install pyinstrument)"
    return None


def _profiled(out: Path, script: Path, *args: str) -> list[str]:
    return [PY, "-m", "pyinstrument", "--renderer", "text", "--outfile", str(out), str(script), *args]


def run_profiles(results_dir: Path, head_lines: int = 45) -> dict[str, Any]:
    why = available()
    if why:
        return {"skipped": why}
    results_dir.mkdir(parents=True, exist_ok=True)
    out: dict[str, Any] = {}
    for name, (rts, warm, updates) in WORKLOADS.items():
        agent_out = results_dir / f"profile-{name}-agent.txt"
        client_out = results_dir / f"profile-{name}-client.txt"
        agent = _profiled(agent_out, PEERS / "mock_bench_agent.py")
        argv = _profiled(client_out, PEERS / "ours_client.py", str(rts), str(warm), str(updates), *agent)
        progress(f"profile: {name} ({rts} round trips, {updates} updates), both sides under pyinstrument")
        try:
            with tempfile.TemporaryDirectory(prefix="acp-bench-prof-") as cwd:
                res = run_json(argv, timeout=300, cwd=cwd)
        except BenchError as exc:
            out[name] = {"error": str(exc)}
            continue
        out[name] = {"result": res, "agent_report": str(agent_out), "client_report": str(client_out)}
        for side, path in (("agent", agent_out), ("client", client_out)):
            try:
                text = path.read_text()
            except OSError:
                continue
            lines = text.splitlines()
            out[name][f"{side}_head"] = "\n".join(lines[:head_lines])
    return out
