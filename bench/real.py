"""``--only real``: what a user waits for, the whole agent suite against each pinned real adapter.

One run per target and repetition, targets interleaved, each in a fresh temporary directory,
exactly as a user certifies an agent: ``python -m pytest --acp-agent=NAME -n 2 -q`` (the Node
adapters with ``--acp-timeout=30``, as ``scripts/certify-real-peers.sh`` runs them; their peer
profiles put a scripted model endpoint on 127.0.0.1, so no key and no network). Measured:

* wall time of the whole run;
* CPU time of the whole process tree (pytest, its workers, every agent process and what it
  started, the scripted model endpoint): ``RUSAGE_CHILDREN`` before and after, which counts
  every descendant that was waited for (an orphan re-parented to init is not: a lower bound);
* agent processes started (``-p bench.suite_probe`` appends a line per process) and the share
  of the workers' time spent waiting for their first output and tearing them down: the part
  connection reuse would remove;
* the verdict and the pytest counts, so a fast run that certified nothing is visible.

Not in the default run (one repetition of all four targets is ~12 minutes on 2 cores); the
Node adapters need ``./run setup --with-peers``. A target that is not installed is reported as
skipped with the reason.

Each target runs in both isolation modes (``--acp-isolation=process``, a process per test, and
``connection``, warm connections lent to one test at a time; see docs/isolation.md), interleaved,
and the per-clause statuses of the two are compared: the equivalence that mode promises, on real
adapters.
"""

from __future__ import annotations

import json
import os
import re
import resource
import shlex
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from acp_conformance.reporting import verdict_word_of
from bench.common import PY, REPO, BenchError, fmt, progress, rotate, run, summarize, table


@dataclass(frozen=True)
class Target:
    key: str
    label: str
    agent: str  # the --acp-agent value
    extra: tuple[str, ...] = ()
    #: A path that must exist for the target to run (the npm package), relative to the checkout.
    needs: str | None = None


TARGETS = (
    Target("reference", "reference agent (`python -m mock_agent`)", f"{shlex.quote(PY)} -m mock_agent"),
    Target(
        "claude-agent-acp",
        "claude-agent-acp",
        "claude-agent-acp",
        ("--acp-timeout=30",),
        "node_modules/@agentclientprotocol/claude-agent-acp",
    ),
    Target("codex-acp", "codex-acp", "codex-acp", ("--acp-timeout=30",), "node_modules/@agentclientprotocol/codex-acp"),
    Target("zed-codex-acp", "zed-codex-acp", "zed-codex-acp", ("--acp-timeout=30",), "node_modules/zed-codex-acp"),
)


def _version(target: Target) -> str | None:
    if target.needs is None:
        return None
    try:
        data = json.loads((REPO / target.needs / "package.json").read_text())
    except (OSError, ValueError):
        return None
    version = data.get("version")
    return version if isinstance(version, str) else None


def _env(probe_file: str) -> dict[str, str]:
    env = dict(os.environ)
    for key in ("PYTEST_XDIST_WORKER", "PYTEST_ADDOPTS", "PYTEST_CURRENT_TEST", "PYTEST_PLUGINS"):
        env.pop(key, None)
    env["ACP_BENCH_PROBE"] = probe_file
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)
    return env


def _children_cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


MODES = ("process", "connection")


def run_target(target: Target, timeout: float, select: tuple[str, ...] = (), mode: str = "process") -> dict[str, Any]:
    """One certification run of ``target`` in isolation ``mode`` (``select``: pytest arguments
    choosing a subset, for a smoke run); raises ``BenchError`` when it could not run at all."""
    with tempfile.NamedTemporaryFile(prefix="acp-bench-real-", suffix=".jsonl", delete=False) as fh:
        probe_file = fh.name
    try:
        with tempfile.TemporaryDirectory(prefix="acp-bench-real-") as cwd:
            report = Path(cwd) / "report.json"
            argv = [
                PY, "-m", "pytest", f"--acp-agent={target.agent}", "-n", "2", "-q", "-p", "no:cacheprovider",
                "-p", "bench.suite_probe", f"--acp-report-json={report}", f"--acp-isolation={mode}",
                *target.extra, *select,
            ]  # fmt: skip
            cpu0 = _children_cpu()
            done = run(argv, timeout=timeout, cwd=cwd, env=_env(probe_file))
            cpu = _children_cpu() - cpu0
            verdict: dict[str, Any] = {}
            statuses: dict[str, str] = {}
            try:
                data = json.loads(report.read_text())
                verdict = data.get("verdict") or {}
                statuses = {c["id"]: c["status"] for c in data.get("clauses") or []}
            except (OSError, ValueError, KeyError, TypeError):
                pass
        records = [json.loads(line) for line in Path(probe_file).read_text().splitlines() if line.strip()]
    finally:
        try:
            os.unlink(probe_file)
        except OSError:
            pass
    last = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else ""
    counts = {k: int(n) for n, k in re.findall(r"(\d+) (passed|failed|skipped|errors?)", last)}
    return {
        "seconds": done.seconds,
        "cpu_s": cpu,
        "returncode": done.returncode,
        "counts": counts,
        "verdict": (
            f"no report (exit {done.returncode})"
            if not verdict
            else verdict_word_of(verdict)
            if verdict.get("scope") == "full"
            else "partial run (decides nothing)"
        ),
        "statuses": statuses,
        "spawns": len(records),
        "waiting_s": sum(r["first_output_ms"] + r["teardown_ms"] for r in records) / 1e3,
        "tail": "\n".join((done.stdout + "\n" + done.stderr).strip().splitlines()[-3:]),
    }


def run_real(reps: int, budget_s: float, only: tuple[str, ...] = (), select: tuple[str, ...] = ()) -> dict[str, Any]:
    """Up to ``reps`` repetitions of every installed target within ``budget_s`` seconds (``select``:
    a subset of the suite, ``--quick``; its figures are not the suite's)."""
    started = time.perf_counter()
    targets = [t for t in TARGETS if not only or t.key in only]
    skipped: dict[str, str] = {}
    for t in targets:
        if t.needs is not None and not (REPO / t.needs).is_dir():
            skipped[t.key] = f"{t.needs} is not installed (./run setup --with-peers)"
    live = [t for t in targets if t.key not in skipped]
    runs: dict[str, list[dict[str, Any]]] = {f"{t.key}/{m}": [] for t in live for m in MODES}
    for rep in range(reps):
        if rep > 0 and time.perf_counter() - started > budget_s / 2:
            progress(f"real: stopping after {rep} repetition(s) (budget {budget_s:.0f} s)")
            break
        for t in rotate(live, rep):
            for mode in rotate(list(MODES), rep):
                left = max(60.0, budget_s - (time.perf_counter() - started))
                try:
                    rec = run_target(t, left, select, mode)
                except BenchError as exc:
                    rec = {"error": str(exc)}
                rec["rep"] = rep
                runs[f"{t.key}/{mode}"].append(rec)
                if "error" in rec:
                    progress(f"real rep {rep + 1}: {t.key} ({mode}) FAILED: {rec['error'].splitlines()[0]}")
                else:
                    progress(
                        f"real rep {rep + 1}: {t.key:17s} {mode:10s} {rec['seconds']:6.1f} s wall, "
                        f"{rec['cpu_s']:6.1f} s CPU, {rec['spawns']} agent processes, {rec['counts']}, "
                        f"verdict {rec['verdict']}"
                    )
    out: dict[str, Any] = {"skipped": skipped, "runs": runs, "targets": {}, "subset": list(select)}
    for t in live:
        entry: dict[str, Any] = {
            "label": t.label,
            "version": _version(t),
            "argv": f"pytest --acp-agent={t.agent if t.key != 'reference' else 'python -m mock_agent'} -n 2 "
            + " ".join(t.extra),
        }
        for mode in MODES:
            ok = [r for r in runs[f"{t.key}/{mode}"] if "error" not in r]
            entry[mode] = {
                "n": len(ok),
                "wall_s": summarize((r["seconds"] for r in ok), higher_is_better=False),
                "cpu_s": summarize((r["cpu_s"] for r in ok), higher_is_better=False),
                "spawns": ok[0]["spawns"] if ok else None,
                "waiting_s": summarize((r["waiting_s"] for r in ok), higher_is_better=False),
                "verdicts": sorted({str(r["verdict"]) for r in ok}),
                "counts": ok[0]["counts"] if ok else {},
            }
        entry["differences"] = _differences(runs[f"{t.key}/process"], runs[f"{t.key}/connection"])
        out["targets"][t.key] = entry
    return out


def _differences(process: list[dict[str, Any]], connection: list[dict[str, Any]]) -> list[str]:
    """Clauses whose status differs between the modes, repetition by repetition (a clause that
    also differs between two repetitions of the same mode is a race, and says so)."""
    out: list[str] = []
    pairs = [(a, b) for a, b in zip(process, connection, strict=False) if "error" not in a and "error" not in b]
    unstable = {
        cid
        for runs in (process, connection)
        for a in runs
        for b in runs
        if "error" not in a and "error" not in b
        for cid in a["statuses"].keys() | b["statuses"].keys()
        if a["statuses"].get(cid) != b["statuses"].get(cid)
    }
    for a, b in pairs:
        for cid in sorted(a["statuses"].keys() | b["statuses"].keys()):
            sa, sb = a["statuses"].get(cid), b["statuses"].get(cid)
            if sa != sb:
                race = " (differs between repetitions of one mode too: a race)" if cid in unstable else ""
                out.append(f"rep {a['rep'] + 1}: {cid}: {sa} with a process per test, {sb} with reuse{race}")
    return out


def real_md(s: dict[str, Any]) -> str:
    rows = []
    notes: list[str] = []
    for v in (s.get("targets") or {}).values():
        name = v["label"] + (f" {v['version']}" if v.get("version") else "")
        proc, conn = v.get("process") or {}, v.get("connection") or {}
        wall = (proc.get("wall_s") or {}).get("median")
        waiting = (proc.get("waiting_s") or {}).get("median")
        share = f"{waiting / (2 * wall):.0%}" if wall and waiting is not None else "-"
        reuse_wall = (conn.get("wall_s") or {}).get("median")
        ratio = f"{wall / reuse_wall:.2f}x" if wall and reuse_wall else "-"
        tests = ", ".join(f"{n} {k}" for k, n in (proc.get("counts") or {}).items()) or "-"
        differences = v.get("differences") or []
        rows.append(
            [
                name,
                fmt(wall, "s", 1),
                fmt(reuse_wall, "s", 1),
                ratio,
                fmt((proc.get("cpu_s") or {}).get("median"), "s", 1),
                fmt((conn.get("cpu_s") or {}).get("median"), "s", 1),
                f"{proc.get('spawns') or '-'} / {conn.get('spawns') or '-'}",
                share,
                " / ".join(proc.get("verdicts") or []) + "; " + " / ".join(conn.get("verdicts") or []),
                str(len(differences)) if proc.get("n") and conn.get("n") else "-",
                tests,
            ]
        )
        notes += [f"- {name}: {d}" for d in differences]
    for key, why in (s.get("skipped") or {}).items():
        rows.append([key, "-", "-", "-", "-", "-", "-", "-", f"skipped: {why}", "-", "-"])
    subset = s.get("subset")
    scope = f"A SUBSET of the agent suite (`{' '.join(subset)}`, --quick: not the figures to quote)" if subset else ""
    parts = [
        (scope + ". " if scope else "")
        + "The whole agent suite, `-n 2`, as a user certifies an agent (`--acp-timeout=30` for the Node "
        "adapters, which answer through the scripted model endpoint), each run in a fresh directory, "
        "targets and isolation modes interleaved; medians over the repetitions. CPU: the whole process "
        "tree. Agent start + teardown: with a process per test, the two workers' time spent waiting for "
        "each agent's first output and tearing it down, what reuse can remove. Clauses differing: "
        "per-clause statuses that are not the same in both modes (listed below the table).",
        table(
            [
                "target",
                "wall (process per test)",
                "wall (reuse)",
                "speed-up",
                "CPU (process)",
                "CPU (reuse)",
                "agent processes",
                "agent start + teardown",
                "verdict (process; reuse)",
                "clauses differing",
                "tests",
            ],
            rows,
        ),
    ]
    if notes:
        parts.append("\n".join(notes))
    errors = [
        f"- {key}, repetition {r.get('rep', 0) + 1}: {r['error'].splitlines()[0]}"
        for key, recs in (s.get("runs") or {}).items()
        for r in recs
        if "error" in r
    ]
    if errors:
        parts.append("\n".join(errors))
    return "\n\n".join(parts)
