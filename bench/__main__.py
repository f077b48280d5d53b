"""``python -m bench``: one command, Markdown tables on stdout, JSON on disk (see bench/README.md)."""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path
from typing import Any

from bench.common import BENCH, load_average, machine_info, progress

SECTIONS = ("plugin", "frames", "e2e", "cold", "suite", "profile", "real")
DEFAULT_SECTIONS = ("plugin", "frames", "e2e", "cold", "suite")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m bench",
        description=(
            "Benchmark the mock agent and our client against the official TypeScript and Python ACP SDKs "
            "(and raw-pipe / naive-Python floors); prints Markdown tables and writes JSON."
        ),
    )
    p.add_argument("--reps", type=int, default=None, help="repetitions (default 5; --quick: 2)")
    p.add_argument("--quick", action="store_true", help="a smoke run: fewer items and repetitions (< 90 s)")
    p.add_argument(
        "--json",
        metavar="PATH",
        default=str(BENCH / "results" / "latest.json"),
        help="where to write the JSON results (default: %(default)s)",
    )
    p.add_argument(
        "--only",
        metavar="SECTION",
        action="append",
        default=None,
        help=f"run only these sections (repeatable or comma-separated): {', '.join(SECTIONS)}; "
        f"default: {', '.join(DEFAULT_SECTIONS)} (profile and real are opt-in; real certifies the pinned "
        "real adapters with the whole agent suite, one repetition unless --reps is given, ~12 min each)",
    )
    p.add_argument(
        "--real-targets",
        metavar="KEYS",
        default="",
        help="with --only real: these targets only, comma-separated (reference, claude-agent-acp, codex-acp, "
        "zed-codex-acp; default all installed)",
    )
    p.add_argument("--round-trips", type=int, default=None, help="timed prompt round trips per run (default 1000)")
    p.add_argument("--updates", type=int, default=None, help="updates in the long turn (default 10000)")
    p.add_argument(
        "--suite-budget",
        type=float,
        default=None,
        help="stop adding suite repetitions after this many seconds (default 420: 5 repetitions of both suites)",
    )
    args = p.parse_args(argv)
    only: list[str] = []
    for item in args.only or []:
        only += [s.strip() for s in item.split(",") if s.strip()]
    bad = [s for s in only if s not in SECTIONS]
    if bad:
        p.error(f"unknown section(s) {', '.join(bad)}; choose from {', '.join(SECTIONS)}")
    args.sections = tuple(only) if only else DEFAULT_SECTIONS
    if args.reps is not None and args.reps < 1:
        p.error("--reps must be at least 1")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    quick = args.quick
    reps = args.reps or (2 if quick else 5)
    config: dict[str, Any] = {
        "reps": reps,
        "quick": quick,
        "sections": list(args.sections),
        "round_trips": args.round_trips or (300 if quick else 1000),
        "warmup": 50 if quick else 200,
        "updates": args.updates or (2000 if quick else 10_000),
        "cold_per_rep": 1 if quick else 2,
        "suite_reps": 1 if quick else reps,
        "suite_budget_s": args.suite_budget or (45.0 if quick else 420.0),
        "suite_select": ["-k", "initialization"] if quick else None,
        # The whole run stays under this (the e2e repetitions and the suite adapt to it).
        "deadline_s": 85.0 if quick else 570.0,
    }
    started = time.perf_counter()
    meta: dict[str, Any] = {
        "started": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "machine": machine_info(),
        "config": config,
        "command": " ".join(["python -m bench", *(sys.argv[1:] if argv is None else argv)]),
    }
    if reps < 5 and not quick:
        progress(f"note: {reps} repetition(s); the issue asks for median and best of at least 5")
    raw: dict[str, Any] = {}
    summary: dict[str, Any] = {}
    md: list[str] = ["# ACP benchmark" + (" (quick smoke run: not for quoting)" if quick else "")]

    from bench.stacks import cold_agents, discover_tools, e2e_stacks, new_workdir

    workdir = new_workdir()
    try:
        if "plugin" in args.sections:
            from bench.plugin_cost import run_plugin_cost

            progress("the plugin's cost in other projects' runs (no --acp-* option)")
            t0 = time.perf_counter()
            summary["plugin"] = run_plugin_cost(reps)
            meta.setdefault("section_s", {})["plugin"] = time.perf_counter() - t0
        if "frames" in args.sections:
            from bench.frames import run_frames

            progress("per-frame costs (in process)")
            t0 = time.perf_counter()
            summary["frames"] = run_frames(max(3, reps), quick)
            meta.setdefault("section_s", {})["frames"] = time.perf_counter() - t0
        if "e2e" in args.sections or "cold" in args.sections:
            from bench.e2e import E2EConfig, run_rep, summarize_e2e

            tools = discover_tools(workdir)
            stacks = e2e_stacks(tools)
            agents = cold_agents(tools)
            section_t0 = time.perf_counter()
            for s in stacks:
                if s.skip:
                    progress(f"skipping {s.key}: {s.skip}")
            cfg = E2EConfig(config["round_trips"], config["warmup"], config["updates"], config["cold_per_rep"])
            # Leave room for the suite when it runs too.
            share = 0.5 if "suite" in args.sections else 0.95
            e2e_deadline = started + config["deadline_s"] * share
            last = 0.0
            done = 0
            for rep in range(reps):
                if rep > 0 and time.perf_counter() + last > e2e_deadline:
                    progress(f"stopping after {rep} repetition(s): another would pass the time budget")
                    break
                rep_t0 = time.perf_counter()
                run_rep(rep, stacks, agents, cfg, raw, "e2e" in args.sections, "cold" in args.sections)
                last = time.perf_counter() - rep_t0
                done += 1
            config["reps_done"] = done
            summary["e2e"] = summarize_e2e(raw, stacks, agents)
            meta.setdefault("section_s", {})["e2e+cold"] = time.perf_counter() - section_t0
        if "suite" in args.sections:
            from bench.suite import run_suite

            cold_ms = None
            cold = (summary.get("e2e") or {}).get("cold", {}).get("mock-on")
            if cold and cold["ms"]["n"]:
                cold_ms = cold["ms"]["median"]
            else:
                from bench.common import PY, summarize
                from bench.e2e import cold_start_ms

                progress("suite: timing the reference agent's cold start for the estimate")
                samples = [cold_start_ms([PY, "-m", "mock_agent"], 30.0) for _ in range(3 if quick else 7)]
                cold_ms = summarize(samples, higher_is_better=False)["median"]
            left = started + config["deadline_s"] - time.perf_counter()
            budget = max(10.0, min(config["suite_budget_s"], left))
            t0 = time.perf_counter()
            summary["suite"] = run_suite(
                config["suite_reps"],
                budget,
                cold_ms,
                config["suite_select"],
                ("serial", "n2") if quick else ("serial", "n2", "collect", "client", "client-n2"),
            )
            meta.setdefault("section_s", {})["suite"] = time.perf_counter() - t0
        if "real" in args.sections:
            from bench.real import run_real

            t0 = time.perf_counter()
            summary["real"] = run_real(
                args.reps or 1,
                3600.0 * (args.reps or 1),
                only=tuple(k.strip() for k in args.real_targets.split(",") if k.strip()),
                select=("-k", "initialization") if quick else (),
            )
            meta.setdefault("section_s", {})["real"] = time.perf_counter() - t0
        if "profile" in args.sections:
            from bench.profiling import run_profiles

            summary["profile"] = run_profiles(Path(args.json).resolve().parent)
    except KeyboardInterrupt:
        progress("interrupted: reporting what was measured")
    finally:
        shutil.rmtree(workdir, ignore_errors=True)

    meta["loadavg_end"] = load_average()
    meta["elapsed_s"] = time.perf_counter() - started
    from bench.report import e2e_md, frames_md, machine_md, profile_md, suite_md, targets, targets_md

    ts = targets(summary, config)
    md.append("## Machine and run\n\n" + machine_md(meta))
    if ts:
        md.append("## Targets\n\n" + targets_md(ts))
    if summary.get("e2e"):
        md.append("## Stacks over real stdio\n\n" + e2e_md(summary["e2e"], config))
    if summary.get("plugin"):
        from bench.plugin_cost import plugin_md

        md.append("## The plugin in other projects' runs\n\n" + plugin_md(summary["plugin"]))
    if summary.get("frames"):
        md.append("## Per-frame costs\n\n" + frames_md(summary["frames"]))
    if summary.get("suite"):
        md.append("## The conformance suite itself\n\n" + suite_md(summary["suite"]))
    if summary.get("real"):
        from bench.real import real_md

        md.append("## Certifying real adapters\n\n" + real_md(summary["real"]))
    if summary.get("profile"):
        md.append("## Profiles (pyinstrument)\n\n" + profile_md(summary["profile"]))
    text = "\n\n".join(md) + "\n"
    sys.stdout.write(text)
    sys.stdout.flush()

    out = Path(args.json)
    out.parent.mkdir(parents=True, exist_ok=True)
    payload = {"meta": meta, "targets": ts, "summary": summary, "raw": raw, "markdown": text}
    out.write_text(json.dumps(payload, indent=1, default=str) + "\n")
    progress(f"wrote {out} ({meta['elapsed_s']:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
