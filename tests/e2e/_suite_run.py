"""Helpers for end-to-end runs of the plugin in a subprocess, as a user runs it."""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from acp_conformance._proctree import environ_has

ROOT = Path(__file__).resolve().parents[2]
BROKEN = ROOT / "tests" / "peers" / "broken_agents.py"


@dataclass
class SuiteRun:
    returncode: int
    stdout: str
    report: dict[str, Any]
    #: In the environment of the run and of every process it started (``live_processes_matching``).
    tag: str = ""

    def statuses(self) -> dict[str, str]:
        return {c["id"]: c["status"] for c in self.report["clauses"]}

    def per_test(self) -> dict[tuple[str, str], str]:
        """Every (clause, test) result: what must not depend on ``--acp-isolation``."""
        return {(c["id"], t["nodeid"]): t["status"] for c in self.report["clauses"] for t in c["tests"]}

    def with_status(self, *wanted: str) -> set[str]:
        return {cid for cid, s in self.statuses().items() if s in wanted}

    def messages(self, cid: str, status: str | None = None) -> list[str]:
        """The per-test messages of one clause (those with ``status``, when given)."""
        clause = next(c for c in self.report["clauses"] if c["id"] == cid)
        return [t["message"] for t in clause["tests"] if status is None or t["status"] == status]


#: ``python -c WITH_US -m pytest ...``: the inner run gets SIGTERM from the kernel when the process
#: that started it dies (``PR_SET_PDEATHSIG`` survives exec), which a run with ``--acp-*`` options
#: takes as Ctrl-C: it tears its peer down and stops.  Without it, an outer run ended by a CI time
#: limit or a SIGKILL left its inner runs, and their peers, running for minutes.
WITH_US = (
    "import os, signal, sys; from acp_conformance._proctree import die_with_parent; "
    "die_with_parent(signal.SIGTERM); os.execv(sys.executable, [sys.executable, *sys.argv[1:]])"
)


def run_suite(agent: str, tmp: Path, *extra: str, timeout: float = 240, role: str = "agent") -> SuiteRun:
    """``pytest --acp-agent=AGENT`` (``role="client"``: ``--acp-client``) in a fresh directory,
    the way a user runs it."""
    tmp.mkdir(parents=True, exist_ok=True)
    report = tmp / "report.json"
    env = dict(os.environ)
    env.pop("PYTEST_XDIST_WORKER", None)
    env.pop("PYTEST_ADDOPTS", None)
    tag = f"{RUN_TAG}={secrets.token_hex(8)}"
    env[RUN_TAG] = tag.partition("=")[2]
    proc = subprocess.run(
        [sys.executable, "-c", WITH_US, "-m", "pytest", "-p", "no:cacheprovider", "-q", f"--acp-{role}={agent}",
         f"--acp-report-json={report}", *extra],
        cwd=tmp,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if not report.is_file():
        pytest.fail(f"no report written (exit {proc.returncode}):\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}")
    return SuiteRun(proc.returncode, proc.stdout, json.loads(report.read_text()), tag)


#: The suite's fuzz campaigns (node ids as the report writes them): searches, not scripts.
CAMPAIGNS = ("test_fuzz.py::", "test_stateful.py::")


def isolation_differences(process: SuiteRun, connection: SuiteRun) -> list[str]:
    """Where a run with ``--acp-isolation=connection`` judged otherwise than one with a process per
    test: per clause, and per test for a FAIL wherever both runs judged the clause in that test
    (empty when they agree).  Per test, only a FAIL must match: a SHOULD the stateful machine
    happens to provoke in one run and not the other (``output-after-response``, in a module that
    has a process of its own in both modes) moves no clause status, which is compared exactly.

    Two things are no disagreement. A shape check one run made and the other did not: a race a
    test provokes (cancel right after allowing a write) decides which frames exist to be judged.
    And an INCONCLUSIVE that says why against a PASS: a race the suite could not prove the order of
    is INCONCLUSIVE in whichever run lost it, in either mode (run to run, too).  A FAIL is never
    excused at the clause: where one mode proves a breach, the other must too.  Per test it is
    excused in a fuzz campaign only (``CAMPAIGNS``): those have a process of their own in both
    modes, and their search is bounded in time while it shrinks, so which frames a campaign meets
    differs from run to run in either mode (a full proof saw ``test_fuzz_odd_ids`` meet a valid
    frame with U+202E in one run and not the other); each FAIL it reports was replayed."""
    out = []
    ta, tb = process.per_test(), connection.per_test()
    raced: set[str] = set()
    for cid, node in sorted(ta.keys() & tb.keys()):
        sa, sb = ta[cid, node], tb[cid, node]
        if sa == sb:
            continue
        why = process if sa == "INCONCLUSIVE" else connection
        if {sa, sb} == {"INCONCLUSIVE", "PASS"} and all(m.strip() for m in why.messages(cid, "INCONCLUSIVE")):
            raced.add(cid)
            continue
        if "FAIL" in (sa, sb) and not node.startswith(CAMPAIGNS):
            out.append(f"{cid} in {node}: {sa} with a process per test, {sb} with reuse")
    a, b = process.statuses(), connection.statuses()
    for cid in sorted(a.keys() | b.keys()):
        pa, pb = a.get(cid), b.get(cid)
        if pa != pb and not (cid in raced and "INCONCLUSIVE" in (pa, pb)):
            out.insert(0, f"{cid}: {pa} with a process per test, {pb} with reuse")
    return out


def check_full_verdict(run: SuiteRun, fails: bool) -> None:
    """A full proof's verdict: NOT CONFORMANT exactly when a MUST fails (``fails``); otherwise
    CONFORMANT, or INCONCLUSIVE when the breakage left MUSTs unjudged (a peer that dies cuts tests
    short); the exit status follows the verdict."""
    v = run.report["verdict"]
    if fails:
        assert v["conformant"] is False and v["failed_mandatory"], v
    else:
        assert not v["failed_mandatory"], v
        assert v["conformant"] == (not v["not_tested_mandatory"] and not v["inconclusive_mandatory"]), v
    assert (run.returncode == 0) == bool(v["conformant"]), run.stdout[-3000:]


#: Names a suite run in its environment, inherited by every peer it starts: a test that checks for
#: processes left behind by its run must not count those of another test running the same peer
#: concurrently (the ci-gate and certification tests start ``echoes-version`` too).
RUN_TAG = "ACP_TEST_SUITE_RUN"


def live_processes_matching(needle: str, run: SuiteRun | None = None) -> list[str]:
    """Live processes whose command line contains ``needle`` (and, given ``run``, that it started)."""
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        # A suite run's own command line names its peer too (another proof running concurrently).
        if needle in cmd and state != "Z" and " -m pytest " not in cmd:
            if run is not None and not environ_has(int(entry.name), run.tag.encode()):
                continue
            out.append(f"{entry.name}: {cmd}")
    return out
