"""Markdown tables and the target verdicts from the summarized results."""

from __future__ import annotations

from typing import Any

from bench.common import fmt, fmt_ratio, table
from bench.stacks import BASELINE

FULL_UPDATES = 10_000


def _cpu_cell(v: float | None) -> str:
    return "below the 10 ms tick" if v == 0 else fmt(v)


def _m(s: dict[str, Any] | None, key: str = "median") -> float | None:
    return None if not s else s.get(key)


# ------------------------------------------------------------------ targets
def targets(summary: dict[str, Any], config: dict[str, Any]) -> list[dict[str, Any]]:
    """Each target with its measured median/best and a status: met, MISSED, borderline, n/a."""
    out: list[dict[str, Any]] = []
    e2e = summary.get("e2e") or {}
    paired = e2e.get("paired", {})
    stacks = e2e.get("stacks", {})

    def ratio_target(name: str, other: str, metric: str, cpu_metric: str, threshold: float) -> None:
        s = paired.get(other, {}).get(metric)
        t = _judge(name, f">= {threshold:g}x", _m(s), _m(s, "best"), threshold, higher=True, unit="x")
        cpu = _m(paired.get(other, {}).get(cpu_metric))
        t["cpu_basis"] = cpu
        t["cpu_text"] = "-" if cpu is None else f"{cpu:.2f}x"
        _cpu_rescue(t, cpu is not None and cpu >= threshold)
        out.append(t)

    if e2e:
        ups, rts = "updates/s, mocks (validation on) vs", "prompt round trips/s, mocks (validation on) vs"
        # Issue 18's targets: the mocks trail no SDK (updates 2x both, round trips 1.0x both, 1.5x
        # the stretch goal, reported on rows of its own).
        ratio_target(f"{ups} TypeScript SDK", "ts-sdk", "updates_per_s", "cpu_upd", 2.0)
        ratio_target(f"{ups} Python SDK", "py-sdk", "updates_per_s", "cpu_upd", 2.0)
        ratio_target(f"{rts} TypeScript SDK", "ts-sdk", "rt_per_s", "cpu_rt", 1.0)
        ratio_target(f"{rts} Python SDK", "py-sdk", "rt_per_s", "cpu_rt", 1.0)
        ratio_target(f"{rts} TypeScript SDK (stretch)", "ts-sdk", "rt_per_s", "cpu_rt", 1.5)
        ratio_target(f"{rts} Python SDK (stretch)", "py-sdk", "rt_per_s", "cpu_rt", 1.5)
    cold = (summary.get("e2e") or {}).get("cold", {}).get(BASELINE)
    if cold:
        s = cold["ms"]
        t = _judge(
            "mock agent cold start to initialize response",
            "< 120 ms",
            _m(s),
            _m(s, "best"),
            120,
            higher=False,
            unit="ms",
        )
        cpu = _m(cold.get("cpu_ms"))
        t["cpu_basis"] = cpu
        t["cpu_text"] = "-" if cpu is None else f"{cpu:.0f} ms CPU"
        _cpu_rescue(t, cpu is not None and cpu < 120)
        out.append(t)
    rss = stacks.get(BASELINE, {}).get("agent_peak_rss_mib")
    if rss:
        t = _judge(
            f"mock agent peak RSS during a {config.get('updates', 0):,}-update stream",
            "< 40 MiB",
            _m(rss),
            _m(rss, "best"),
            40,
            higher=False,
            unit="MiB",
        )
        if config.get("updates") != FULL_UPDATES:
            t["status"] = f"n/a ({config.get('updates')} updates, not {FULL_UPDATES:,})"
        out.append(t)
    frames = summary.get("frames")
    if frames and frames.get("validation_worst_median_us") is not None:
        worst = frames["validation_worst_median_us"]
        best = max(
            f["ops_us"]["VALIDATION: SchemaValidator.validate (jsonschema-rs)"]["best"]
            for f in frames["frames"].values()
        )
        out.append(
            _judge(
                "always-on validation per frame (worst of the typical frames)",
                "< 10 µs",
                worst,
                best,
                10,
                higher=False,
                unit="µs",
            )
        )
    return out


def _cpu_rescue(t: dict[str, Any], cpu_ok: bool) -> None:
    """A wall-clock miss that the CPU-time basis meets is a busy machine, not a miss."""
    if cpu_ok and t["status"] != "met":
        t["status"] = "met in CPU time (wall clock missed: see the load average)"


def _judge(
    name: str,
    threshold_text: str,
    median: float | None,
    best: float | None,
    threshold: float,
    *,
    higher: bool,
    unit: str,
) -> dict[str, Any]:
    def ok(v: float | None) -> bool | None:
        if v is None:
            return None
        return v >= threshold if higher else v < threshold

    m_ok, b_ok = ok(median), ok(best)
    if m_ok is None:
        status = "not measured"
    elif m_ok:
        status = "met"
    elif b_ok:
        status = "borderline (best meets it, median does not)"
    else:
        status = "MISSED"
    return {"target": name, "threshold": threshold_text, "median": median, "best": best, "unit": unit, "status": status}


# ------------------------------------------------------------------ markdown
def machine_md(meta: dict[str, Any]) -> str:
    m = meta["machine"]
    c = meta["config"]
    lines = [
        f"- machine: {m.get('cpu_model')}, {m.get('nproc')} CPUs, {m.get('mem_gib')} GiB, Linux {m.get('kernel')}",
        f"- Python {m.get('python')} ({m.get('python_executable')}), Node {m.get('node')}, {m.get('gcc') or 'no gcc'}",
        f"- peers: TypeScript SDK @agentclientprotocol/sdk {m.get('ts_sdk')}, "
        f"Python SDK agent-client-protocol {m.get('py_sdk')}; ours: jsonschema-rs {m.get('jsonschema_rs')}, "
        f"orjson {m.get('orjson')}, anyio {m.get('anyio')} (python-jsonschema {m.get('jsonschema')})",
        f"- load average (1/5/15 min) at start {m.get('loadavg_start')}, at end {meta.get('loadavg_end')}; "
        f"commit {m.get('commit')} (plus any uncommitted changes); {meta.get('started')}",
        f"- run: {c.get('reps_done', c['reps'])} repetitions, implementations interleaved (order rotated per "
        f"repetition); {c['round_trips']:,} timed round trips, {c['updates']:,} updates in one turn, "
        f"{c['cold_per_rep']} cold start(s) per agent per repetition; {meta.get('elapsed_s', 0):.0f} s in all"
        + (
            " (" + ", ".join(f"{k} {v:.0f} s" for k, v in meta["section_s"].items()) + ")"
            if meta.get("section_s")
            else ""
        ),
    ]
    loads = [x for x in (m.get("loadavg_start"), meta.get("loadavg_end")) if x]
    busy = max((x[0] for x in loads), default=0.0)
    if m.get("nproc") and busy > m["nproc"]:
        lines.append(
            f"- **the machine was busy** (1-minute load up to {busy:.1f} on {m['nproc']} CPUs, other processes): "
            "absolute rates and times are depressed and noisy; the paired ratios and the CPU-time columns are "
            "the numbers to read"
        )
    return "\n".join(lines)


def e2e_md(e2e: dict[str, Any], config: dict[str, Any]) -> str:
    stacks = e2e["stacks"]
    paired = e2e["paired"]
    parts = []
    rows = []
    for key, s in stacks.items():
        if s["skip"]:
            rows.append([f"{s['label']}", "skipped", "", "", "skipped", "", ""])
            continue
        rt, up = s["rt_per_s"], s["updates_per_s"]
        p = paired.get(key, {})
        err = f" ({len(s['errors'])} failed)" if s["errors"] else ""
        rows.append(
            [
                f"{'**' if key == BASELINE else ''}{s['label']}{'**' if key == BASELINE else ''}{err}",
                fmt(_m(rt)),
                fmt(_m(rt, "best")),
                "1.00x" if key == BASELINE else fmt_ratio(_m(p.get("rt_per_s"))),
                fmt(_m(up)),
                fmt(_m(up, "best")),
                "1.00x" if key == BASELINE else fmt_ratio(_m(p.get("updates_per_s"))),
            ]
        )
    parts.append(
        f"Prompt round trips (a prompt answered `end_turn` at once) and `session/update` frames in one turn of "
        f"{config['updates']:,} `agent_message_chunk` updates, each stack talking to itself over real stdio. "
        "**mock (on) x** = how many times the validating mocks beat that row, taken per repetition (paired) and "
        "then the median: above 1.00x our mocks are faster."
    )
    parts.append(
        table(
            ["stack", "round trips/s (median)", "best", "mock (on) x", "updates/s (median)", "best", "mock (on) x"],
            rows,
        )
    )
    rows = []
    for key, s in stacks.items():
        if s["skip"]:
            continue
        p = paired.get(key, {})
        rows.append(
            [
                f"{'**' if key == BASELINE else ''}{s['label']}{'**' if key == BASELINE else ''}",
                _cpu_cell(_m(s["cpu_us_per_rt"])),
                f"{fmt(_m(s['agent_cpu_us_per_rt']))} + {fmt(_m(s['client_cpu_us_per_rt']))}",
                "1.00x" if key == BASELINE else fmt_ratio(_m(p.get("cpu_rt"))),
                _cpu_cell(_m(s["cpu_us_per_update"])),
                f"{fmt(_m(s['agent_cpu_us_per_update']))} + {fmt(_m(s['client_cpu_us_per_update']))}",
                "1.00x" if key == BASELINE else fmt_ratio(_m(p.get("cpu_upd"))),
            ]
        )
    parts.append(
        "CPU time (user + system, all threads, both processes, from `/proc/<pid>/stat`, 10 ms ticks) per round "
        "trip and per streamed update, in µs: what each stack *costs*, which a busy neighbour moves far less than "
        "the rates above. **mock (on) x** > 1: our stack uses less CPU."
    )
    parts.append(
        table(
            [
                "stack",
                "CPU µs / round trip",
                "agent + client",
                "mock (on) x",
                "CPU µs / update",
                "agent + client",
                "mock (on) x",
            ],
            rows,
        )
    )
    v_up = e2e.get("validation_cpu_us_per_update") or {}
    v_rt = e2e.get("validation_cpu_us_per_round_trip") or {}
    if v_up.get("n"):
        parts.append(
            f"Cost of always-on validation end to end, CPU on minus off (paired): {fmt(_m(v_up), 'µs')} per streamed "
            f"update (the agent checks it outbound, the client inbound) and {fmt(_m(v_rt), 'µs')} per round trip "
            "(request out and in, result out and in). With 10 ms CPU ticks the resolution is ~1 µs per update "
            "and ~5 µs per round trip: read the size, not the digits."
        )
    rows = []
    for key, s in stacks.items():
        if s["skip"]:
            continue
        rows.append(
            [
                s["label"],
                fmt(_m(s["agent_peak_rss_mib"]), digits=1),
                fmt(_m(s["agent_peak_rss_mib"], "best"), digits=1),
                "1.00x" if key == BASELINE else fmt_ratio(_m(paired.get(key, {}).get("agent_vmhwm_kib"))),
                fmt(_m(s["client_peak_rss_mib"]), digits=1),
                fmt(_m(s["client_peak_rss_mib"], "best"), digits=1),
            ]
        )
    parts.append(
        "Peak RSS (`VmHWM` from `/proc`) of the agent process, read at the end of the long turn while it still runs, "
        "and of the client driver at its end (MiB). **mock (on) x** > 1: our agent uses less."
    )
    parts.append(
        table(["stack", "agent peak RSS (median)", "best", "mock (on) x", "client peak RSS (median)", "best"], rows)
    )
    rows = []
    for key, c in e2e["cold"].items():
        if c["skip"]:
            rows.append([c["label"], "skipped", "", "", ""])
            continue
        err = f" ({len(c['errors'])} failed)" if c["errors"] else ""
        rows.append(
            [
                f"{'**' if key == BASELINE else ''}{c['label']}{'**' if key == BASELINE else ''}{err}",
                fmt(_m(c["ms"]), digits=1),
                fmt(_m(c["ms"], "best"), digits=1),
                "1.00x" if key == BASELINE else fmt_ratio(_m(c["vs_mock_on"])),
                fmt(_m(c.get("cpu_ms")), digits=1),
            ]
        )
    parts.append(
        "Cold start: spawn -> first line of the `initialize` response, the same bare harness for every agent "
        "(Popen, one write, one read), ms. **mock (on) x** > 1: our agent is up sooner "
        "(paired, best of each repetition). **CPU** = CPU time the agent process (all threads, "
        "`/proc/<pid>/task/*/schedstat`) had used when it answered: its start-up cost without the machine's "
        "scheduling delays."
    )
    parts.append(table(["agent", "cold start (median)", "best", "mock (on) x", "CPU ms (median)"], rows))
    notes = [f"- {s['label']}: {s['note']}" for s in stacks.values() if s.get("note")]
    notes += [f"- {c['label']}: {c['note']}" for c in e2e["cold"].values() if c.get("note")]
    notes += [f"- {s['label']}: skipped: {s['skip']}" for s in stacks.values() if s.get("skip")]
    errors = [f"- {s['label']}: {e.splitlines()[0]}" for s in stacks.values() for e in s["errors"][:1]]
    if notes:
        parts.append("Notes:\n" + "\n".join(notes))
    if errors:
        parts.append("Failures:\n" + "\n".join(errors))
    return "\n\n".join(parts)


FRAME_OPS_ORDER = [
    "framing (1 frame per read)",
    "framing (100 frames per read)",
    "decode + classify",
    "core inbound (Connection.receive_data)",
    "serialize (orjson, as Connection.send_*)",
    "VALIDATION: SchemaValidator.validate (jsonschema-rs)",
    "python-jsonschema Draft 2020-12 is_valid (reference)",
    "stdlib json loads + dumps (reference)",
    "orjson loads + dumps (reference)",
    "Peer inbound, validation on",
    "Peer inbound, validation off",
    "Peer outbound notify, validation on",
    "Peer outbound notify, validation off",
]


def frames_md(frames: dict[str, Any]) -> str:
    kinds = list(frames["frames"])
    headers = ["operation (µs per frame, median / best)"] + [f"{k} ({frames['frames'][k]['bytes']} B)" for k in kinds]
    rows = []
    for op in FRAME_OPS_ORDER:
        cells = []
        for k in kinds:
            s = frames["frames"][k]["ops_us"].get(op)
            cells.append("-" if s is None else f"{fmt(s['median'])} / {fmt(s['best'])}")
        label = op.replace("VALIDATION: ", "**validation**: ")
        rows.append([label, *cells])
    text = (
        "Typical frames: `update` = `session/update` `agent_message_chunk`; `prompt` = `session/prompt` request "
        "with one text block; `tool_call` = `session/update` `tool_call` with a location and raw input. "
        "`Peer` rows are the whole per-frame path of the endpoint the mocks and the suite use "
        "(inbound: framing, decode, event, transcript, validation, dispatch; outbound: validation, "
        "serialization, transcript, send lock, a transport that discards)."
    )
    return text + "\n\n" + table(headers, rows)


def suite_md(s: dict[str, Any]) -> str:
    rows = []
    names = {
        "serial": '`pytest --acp-agent="python -m mock_agent"` (serial)',
        "n2": "same, `-n 2`",
        "collect": "same, `--collect-only` (start-up + collection only)",
        "client": '`pytest --acp-client="python -m mock_client ..." --acp-client-profile=mock-client` (serial)',
        "client-n2": "same client suite, `-n 2`",
    }
    for key, label in names.items():
        v = s.get(key) or {}
        if not v.get("n") and not any(r for r in (s.get("runs") or {}).get(key, [])):
            continue  # not run (--quick)
        counts = v.get("counts") or {}
        what = ", ".join(f"{n} {k}" for k, n in counts.items()) or "-"
        exit_text = "-" if key == "collect" else ("0" if v.get("all_exit_0") else "non-zero")
        rows.append([label, fmt(_m(v), "s", 2), fmt(_m(v, "best"), "s", 2), what, exit_text])
    subset = s.get("subset")
    scope = (
        f"A SUBSET of the agent suite (`{' '.join(subset)}`, --quick; a partial run is never conformant, so "
        "its exit status is non-zero)"
        if subset
        else "The full agent suite"
    )
    parts = [
        f"{scope} against the reference agent (and, in the `client` rows, the full client suite against the "
        f"reference client), {s.get('reps')} repetition(s), variants interleaved, "
        "each run in a fresh temporary directory.",
        table(["run", "wall (median)", "best", "tests", "exit"], rows),
    ]
    probe = s.get("probe") or {}
    lines = []
    if probe.get("spawns"):
        lines.append(
            f"- agent processes started by one run: {probe['spawns']} (counted by the probe in the first serial run)"
        )
    if s.get("estimated_start_share_serial") is not None:
        lines.append(
            f"- process start share, **estimate** = {probe.get('spawns')} spawns x "
            f"{fmt(s['cold_start_ms_used'], 'ms', 1)} "
            f"(median cold start of `python -m mock_agent`) / wall: serial {s['estimated_start_share_serial']:.0%}"
            + (
                f", `-n 2` {s['estimated_start_share_n2']:.0%} (of the two workers' combined time)"
                if s.get("estimated_start_share_n2") is not None
                else ""
            )
        )
    if s.get("measured_process_share_serial") is not None:
        lines.append(
            f"- measured inside the suite (first serial run, {fmt(probe['seconds'], 's', 2)}): waiting for "
            f"agents' first output {fmt(probe['sum_first_output_s'], 's', 2)} + tearing them down "
            f"{fmt(probe['sum_teardown_s'], 's', 2)} "
            f"= {s['measured_process_share_serial']:.0%} of the wall time"
        )
    if probe.get("error"):
        lines.append(f"- the probe run failed: {probe['error'].splitlines()[0]}")
    for key in names:
        for r in (s.get("runs") or {}).get(key, []):
            if "error" in r:
                lines.append(f"- {key}, repetition {r.get('rep', 0) + 1}: {r['error'].splitlines()[0]}")
            elif r.get("returncode") not in (0, 1) or not r.get("counts"):
                tail = " / ".join(line.strip() for line in (r.get("tail") or "").splitlines() if line.strip())
                lines.append(f"- {key}, repetition {r.get('rep', 0) + 1}: exit {r.get('returncode')}: {tail[:300]}")
    parts.append("\n".join(lines))
    return "\n\n".join(parts)


def targets_md(ts: list[dict[str, Any]]) -> str:
    rows = []

    def show(v: float | None, unit: str) -> str:
        if v is None:
            return "-"
        return f"{v:.2f}x" if unit == "x" else fmt(v, unit, 1 if unit != "µs" else 2)

    for t in ts:
        unit = t["unit"]

        status = t["status"]
        if status == "MISSED":
            status = "**MISSED** (see bench/README.md)"
        median, best = show(t["median"], unit), show(t["best"], unit)
        rows.append([t["target"], t["threshold"], median, best, t.get("cpu_text", "-"), status])
    return (
        "Wall-clock medians and bests of paired per-repetition values; **CPU basis** = the same comparison in CPU "
        "time consumed (median; ratios: the other stack's CPU per operation over ours, both processes; cold start: "
        "the agent's CPU until it answered), which a busy machine distorts far less.\n\n"
        + table(["target", "threshold", "median", "best", "CPU basis", "status"], rows)
    )


def profile_md(p: dict[str, Any]) -> str:
    if p.get("skipped"):
        return f"Skipped: {p['skipped']}"
    parts = []
    for name, r in p.items():
        if "error" in r:
            parts.append(f"{name}: FAILED {r['error'].splitlines()[0]}")
            continue
        for side in ("agent", "client"):
            head = r.get(f"{side}_head")
            if head:
                parts.append(f"{name}, {side} side (full report: {r[f'{side}_report']}):\n\n```\n{head}\n```")
    return "\n\n".join(parts)
