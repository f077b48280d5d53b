"""Running the whole agent suite against one hostile agent, and what to check after.

``run_hostile`` runs ``pytest --acp-agent=...`` in a subprocess exactly as
``tests/e2e/_suite_run.run_suite`` does (it calls it), and adds what the
hostile-peer tests need:

* wall-clock time of the run;
* the suite process's peak RSS (the ``_rss_probe`` plugin, RUSAGE_SELF of the
  inner pytest and of each of its xdist workers: the agents are not counted);
* a scan of the process table, after the run, for anything the agent started:
  every hostile agent gets a unique ``HOSTILE_RUN_TAG`` in its environment
  (inherited by its children), and the daemons that clear their environment
  carry ``hostile-sleeper-<tag>`` on their command line.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from tests.e2e._suite_run import ROOT, SuiteRun, run_suite

PY = sys.executable
HOSTILE = ROOT / "tests" / "peers" / "hostile_agents.py"
HOSTILE_CLIENTS = ROOT / "tests" / "peers" / "hostile_clients.py"
REFERENCE = f"{PY} -m mock_agent"


@dataclass
class HostileRun:
    name: str
    suite: SuiteRun
    seconds: float
    peak_rss_mib: float
    strays: list[str]
    tag: str
    state: Path
    files: dict[str, str] = field(default_factory=dict)

    @property
    def report(self) -> dict[str, Any]:
        return self.suite.report

    def statuses(self) -> dict[str, str]:
        return self.suite.statuses()

    def with_status(self, *wanted: str) -> set[str]:
        return self.suite.with_status(*wanted)

    def clause(self, cid: str) -> dict[str, Any]:
        return next(c for c in self.report["clauses"] if c["id"] == cid)

    def messages(self, cid: str, status: str | None = None) -> list[str]:
        return [t["message"] for t in self.clause(cid)["tests"] if status is None or t["status"] == status]

    def evidence(self, cid: str) -> str:
        return "\n".join(t.get("evidence", "") for t in self.clause(cid)["tests"])

    def test_outcomes(self) -> dict[str, set[str]]:
        """nodeid -> the statuses its clause results had (from the report)."""
        out: dict[str, set[str]] = {}
        for c in self.report["clauses"]:
            for t in c["tests"]:
                out.setdefault(t["nodeid"], set()).add(t["status"])
        return out

    def records(self, name: str) -> list[Any]:
        """What the agent logged with ``hostile_agents.record(name, ...)`` during the run."""
        path = self.state / f"{name}.jsonl"
        return [orjson.loads(line) for line in path.read_bytes().splitlines()] if path.is_file() else []

    def summary(self) -> str:
        findings = {cid: s for cid, s in sorted(self.statuses().items()) if s in ("FAIL", "WARN", "INCONCLUSIVE")}
        return (
            f"{self.name}: {self.seconds:.1f} s, peak RSS {self.peak_rss_mib:.0f} MiB, findings {findings}, "
            f"strays {self.strays}\n{self.suite.stdout[-3000:]}"
        )


@contextlib.contextmanager
def environ(**values: str) -> Iterator[None]:
    """Set environment variables for the duration (``run_suite`` copies ``os.environ``)."""
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def run_hostile(
    name: str,
    tmp: Path,
    *extra: str,
    agent_env: dict[str, str] | None = None,
    suite_env: dict[str, str] | None = None,
    timeout: float = 150,
    command: str | None = None,
    role: str = "agent",
) -> HostileRun:
    """The agent suite against ``hostile_agents.py NAME`` (or ``command``), in ``tmp``.

    ``role="client"``: the client suite against ``command`` (a hostile client, driven by the
    mock-client profile); ``agent_env`` then goes to the client (``--acp-client-env``), and on
    to the relay agent it launches.
    """
    tag = uuid.uuid4().hex
    state, probe = tmp / "state", tmp / "probe"
    state.mkdir(parents=True)
    probe.mkdir()
    env = {"HOSTILE_RUN_TAG": tag, "HOSTILE_STATE_DIR": str(state), **(agent_env or {})}
    args = ["-p", "tests.hostile._rss_probe", *(f"--acp-{role}-env={k}={v}" for k, v in env.items())]
    if role == "client":
        args += ["--acp-client-profile=mock-client", f"--basetemp={tmp / 'bt'}"]
    args += extra
    pythonpath = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    started = time.monotonic()
    with environ(PYTHONPATH=pythonpath, ACP_HOSTILE_PROBE_DIR=str(probe), **(suite_env or {})):
        try:
            suite = run_suite(command or f"{PY} {HOSTILE} {name}", tmp, *args, timeout=timeout, role=role)
        except subprocess.TimeoutExpired:
            left = stray_processes(tag)
            for line in left:
                with contextlib.suppress(OSError):
                    os.kill(int(line.split(":", 1)[0]), signal.SIGKILL)
            raise AssertionError(
                f"the suite run against {name} did not finish within {timeout:g} s (killed it; "
                f"agent processes it left: {left})"
            ) from None
    seconds = time.monotonic() - started
    peaks = [int(p.read_text()) for p in probe.glob("rss.*")]
    assert peaks, f"the RSS probe did not report (was the plugin loaded?)\n{suite.stdout[-2000:]}"
    files = {p.name: p.read_text("utf-8", "replace") for p in tmp.glob("report.*")}
    return HostileRun(name, suite, seconds, max(peaks) / 1024, stray_processes(tag), tag, state, files)


def stray_processes(tag: str) -> list[str]:
    """Live processes (not zombies) carrying ``tag`` in their environment or command line."""
    needle_env = f"HOSTILE_RUN_TAG={tag}".encode()
    needle_cmd = f"hostile-sleeper-{tag}".encode()
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            stat = (entry / "stat").read_text()
            if stat[stat.rindex(")") + 2] in "ZX":
                continue
            cmdline = (entry / "cmdline").read_bytes()
            environ_ = (entry / "environ").read_bytes()
        except (OSError, ValueError):
            continue
        if needle_env in environ_.split(b"\0") or needle_cmd in cmdline:
            shown = cmdline.replace(b"\0", b" ").decode(errors="replace")
            out.append(f"{entry.name}: {shown}")
    return out


def dump(run: HostileRun) -> str:
    """The JSON report as text (for "does it appear anywhere" checks)."""
    return orjson.dumps(run.report).decode()
