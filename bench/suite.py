"""Wall time of the full agent and client suites against the reference peers, serial and with ``-n 2``.

Each repetition runs, in a rotated order and each in a fresh temporary directory:

* ``serial``: ``python -m pytest --acp-agent="python -m mock_agent" -q -p no:cacheprovider``;
* ``n2``: the same with ``-n 2`` (pytest-xdist, two workers);
* ``collect``: the same with ``--collect-only`` (pytest start-up, plugin, schema, collection:
  the fixed cost every pytest process, including each xdist worker, pays once);
* ``client`` / ``client-n2``: the client suite against the reference client,
  ``python -m pytest --acp-client="python -m mock_client {permission} --caps fs,terminal --agent
  {agent} --prompt {prompt}" --acp-client-profile=mock-client``, serial and with ``-n 2``.

The timed runs are what a user types; the first serial run also carries
``-p bench.suite_probe`` (µs per agent spawn), which counts the agent processes the suite
starts and measures, inside the suite, how long each took to answer and to be torn down.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import tempfile
import time
from typing import Any

from bench.common import PY, REPO, BenchError, progress, rotate, run, summarize

#: variant -> (the role certified, extra pytest arguments)
VARIANTS: dict[str, tuple[str, list[str]]] = {
    "serial": ("agent", []),
    "n2": ("agent", ["-n", "2"]),
    "collect": ("agent", ["--collect-only"]),
    "client": ("client", []),
    "client-n2": ("client", ["-n", "2"]),
}


def suite_argv(extra: list[str], role: str = "agent") -> list[str]:
    if role == "client":
        words = "{permission} --caps fs,terminal --agent {agent} --prompt {prompt}"
        client = f"{shlex.quote(PY)} -m mock_client {words}"
        peer = [f"--acp-client={client}", "--acp-client-profile=mock-client"]
    else:
        peer = [f"--acp-agent={shlex.quote(PY)} -m mock_agent"]
    return [PY, "-m", "pytest", *peer, "-q", "-p", "no:cacheprovider", *extra]


def _env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ)
    for key in ("PYTEST_XDIST_WORKER", "PYTEST_ADDOPTS", "PYTEST_CURRENT_TEST", "PYTEST_PLUGINS"):
        env.pop(key, None)
    env.update(extra or {})
    return env


def _counts(text: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for n, what in re.findall(
        r"(\d+) (passed|failed|errors?|skipped|xfailed|xpassed|warnings?|tests? collected)", text
    ):
        key = {
            "error": "errors",
            "warning": "warnings",
            "test collected": "collected",
            "tests collected": "collected",
        }.get(what, what)
        out[key] = out.get(key, 0) + int(n)
    return out


def run_one(
    variant: str, timeout: float, extra_env: dict[str, str] | None = None, extra: list[str] | None = None
) -> dict[str, Any]:
    role, args = VARIANTS[variant]
    # --quick's subset selects agent tests; the client variants always run their whole suite.
    argv = suite_argv([*args, *(extra or [])] if role == "agent" else args, role)
    with tempfile.TemporaryDirectory(prefix="acp-bench-suite-") as cwd:
        done = run(argv, timeout=timeout, cwd=cwd, env=_env(extra_env))
    text = done.stdout + "\n" + done.stderr
    verdict = re.search(r"ACP verdict: ([A-Z_ -]+)", text)
    return {
        "variant": variant,
        "seconds": done.seconds,
        "returncode": done.returncode,
        "counts": _counts(done.stdout.strip().splitlines()[-1] if done.stdout.strip() else ""),
        "verdict": verdict.group(1).strip() if verdict else None,
        "tail": "\n".join(text.strip().splitlines()[-3:]),
    }


def _probed_run(timeout: float, select: list[str] | None, probe: dict[str, Any]) -> dict[str, Any]:
    """The serial run of the first repetition, with ``-p bench.suite_probe``: fills ``probe``.

    The probe wraps ``spawn`` and appends one short line to a file per agent process, a few
    µs per spawn against ~100 ms for the spawn itself, so this run stays a timed run.
    """
    with tempfile.NamedTemporaryFile(prefix="acp-bench-probe-", suffix=".jsonl", delete=False) as fh:
        probe_file = fh.name
    try:
        pythonpath = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)
        rec = run_one(
            "serial",
            timeout,
            extra_env={"ACP_BENCH_PROBE": probe_file, "PYTHONPATH": pythonpath},
            extra=["-p", "bench.suite_probe", *(select or [])],
        )
        rec["probed"] = True
        probe.clear()
        try:
            records = [json.loads(line) for line in open(probe_file) if line.strip()]
        except (OSError, ValueError) as exc:
            probe["error"] = f"cannot read the probe's records: {exc}"
            return rec
        probe.update(
            {
                "seconds": rec["seconds"],
                "returncode": rec["returncode"],
                "spawns": len(records),
                "sum_first_output_s": sum(r["first_output_ms"] for r in records) / 1e3,
                "sum_teardown_s": sum(r["teardown_ms"] for r in records) / 1e3,
                "sum_life_s": sum(r["life_ms"] for r in records) / 1e3,
                "first_output_ms": summarize((r["first_output_ms"] for r in records), higher_is_better=False),
                "teardown_ms": summarize((r["teardown_ms"] for r in records), higher_is_better=False),
            }
        )
        if not records:
            probe["error"] = "the probe saw no agent process (did the harness stop using transport.spawn?)"
        progress(
            f"suite probe: {len(records)} agent processes; first output {probe['sum_first_output_s']:.2f} s, "
            f"teardown {probe['sum_teardown_s']:.2f} s of {rec['seconds']:.2f} s"
        )
        return rec
    finally:
        try:
            os.unlink(probe_file)
        except OSError:
            pass


def run_suite(
    reps: int,
    budget_s: float,
    cold_start_ms: float | None,
    select: list[str] | None = None,
    variants: tuple[str, ...] = tuple(VARIANTS),
) -> dict[str, Any]:
    """Up to ``reps`` timed repetitions of ``variants`` within ``budget_s`` seconds.

    The first serial run carries the probe (``_probed_run``).

    ``select``: extra pytest arguments choosing a subset (``--quick``); None runs the full suite.
    Every pytest run is killed when it would pass the budget (with a floor of 30 s).
    """
    started = time.perf_counter()
    deadline = started + budget_s

    def timeout() -> float:
        return max(30.0, deadline - time.perf_counter())

    probe: dict[str, Any] = {}
    runs: dict[str, list[dict[str, Any]]] = {k: [] for k in variants}
    done_reps = 0
    last_rep = 0.0
    for rep in range(reps):
        if rep > 0 and time.perf_counter() + last_rep > deadline:
            progress(f"suite: stopping after {rep} repetition(s): another would pass the {budget_s:.0f} s budget")
            break
        rep_started = time.perf_counter()
        for variant in rotate(list(variants), rep):
            probed = variant == "serial" and not probe.get("spawns")  # until one probed run succeeds
            try:
                if probed:
                    rec = _probed_run(timeout(), select, probe)
                else:
                    rec = run_one(variant, timeout(), extra=select)
            except BenchError as exc:
                rec = {"variant": variant, "error": str(exc)}
            rec["rep"] = rep
            runs[variant].append(rec)
            if "error" in rec:
                progress(f"suite rep {rep + 1}: {variant} FAILED: {rec['error'].splitlines()[0]}")
            else:
                progress(
                    f"suite rep {rep + 1}: {variant:7s} {rec['seconds']:.2f} s  {rec['counts']}  "
                    f"exit {rec['returncode']}"
                )
        done_reps += 1
        last_rep = time.perf_counter() - rep_started

    summary: dict[str, Any] = {
        "reps": done_reps,
        "subset": select,
        "runs": runs,
        "probe": probe,
    }
    for variant in VARIANTS:
        recs = runs.get(variant, [])
        # A run that did not get to run the tests (usage error, crash) has no wall time worth a median.
        ok = [r for r in recs if "error" not in r and r.get("returncode") in (0, 1) and r.get("counts")]
        summary[variant] = summarize((r["seconds"] for r in ok), higher_is_better=False)
        summary[variant]["all_exit_0"] = bool(ok) and all(r["returncode"] == 0 for r in ok)
        summary[variant]["counts"] = ok[-1]["counts"] if ok else {}
        summary[variant]["verdict"] = ok[-1]["verdict"] if ok else None
    spawns = probe.get("spawns")
    serial = summary["serial"].get("median")
    n2 = summary["n2"].get("median")
    summary["cold_start_ms_used"] = cold_start_ms
    if spawns and cold_start_ms and serial:
        summary["estimated_start_share_serial"] = spawns * cold_start_ms / 1e3 / serial
    if spawns and cold_start_ms and n2:
        # Two workers run side by side: the share of the two workers' combined time.
        summary["estimated_start_share_n2"] = spawns * cold_start_ms / 1e3 / (2 * n2)
    if probe.get("spawns") and probe.get("seconds"):
        summary["measured_process_share_serial"] = (probe["sum_first_output_s"] + probe["sum_teardown_s"]) / probe[
            "seconds"
        ]
    return summary
