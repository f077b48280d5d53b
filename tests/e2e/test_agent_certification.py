"""`pytest --acp-agent=...` end to end, the way a user runs it: from another
directory, serially and under xdist, with good and bad input."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tests.e2e._suite_run import ROOT, isolation_differences, live_processes_matching, run_suite

PY = sys.executable
REFERENCE = f"{PY} -m mock_agent"
ECHO_AGENT = ROOT / ".peers" / "python-sdk-0.12.1" / "examples" / "echo_agent.py"


def _pytest(tmp: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    full_env = dict(os.environ)
    full_env.pop("PYTEST_XDIST_WORKER", None)
    full_env.update(env or {})
    return subprocess.run(
        [PY, "-m", "pytest", "-p", "no:cacheprovider", "-q", *args],
        cwd=tmp,
        env=full_env,
        capture_output=True,
        text=True,
        timeout=180,
    )


def test_reference_agent_is_conformant_serially_and_under_xdist(tmp_path: Path) -> None:
    (tmp_path / "serial").mkdir()
    (tmp_path / "xdist").mkdir()
    serial = run_suite(REFERENCE, tmp_path / "serial", "--acp-isolation=process")
    parallel = run_suite(REFERENCE, tmp_path / "xdist", "--acp-isolation=process", "-n", "2")
    # Connection reuse must not change a single result either, clause by clause and test by test.
    pooled = run_suite(REFERENCE, tmp_path / "pooled", "--acp-isolation=connection")
    pooled_parallel = run_suite(REFERENCE, tmp_path / "pooled-xdist", "--acp-isolation=connection", "-n", "2")
    assert not isolation_differences(serial, pooled)
    assert not isolation_differences(parallel, pooled_parallel)
    # What the pools did is in the terminal summary (it was captured as a test's teardown output
    # and shown to nobody): one line for the only process, one per xdist worker.
    assert re.search(r"^acp-conformance: \d+ agent connections? lent, \d+ processes started", pooled.stdout, re.M)
    workers = re.findall(r"^\[gw\d\] acp-conformance: \d+ agent connections? lent", pooled_parallel.stdout, re.M)
    assert len(workers) == 2, pooled_parallel.stdout[-3000:]
    assert "acp-conformance:" not in serial.stdout  # process mode has no pool
    for run in (serial, parallel):
        assert run.report["verdict"]["conformant"], run.stdout[-3000:]
        assert run.returncode == 0
        assert "ACP verdict: CONFORMANT" in run.stdout
        assert not run.with_status("FAIL", "WARN")
    # xdist must not change a single per-clause result.
    assert serial.statuses() == parallel.statuses()
    report = serial.report
    assert report["peer"]["role"] == "agent"
    assert report["peer"]["info"]["name"] == "acp-conformance-mock-agent"
    assert report["schema"]["sha256"] and report["schema"]["version"]
    assert (tmp_path / "serial" / "report.md").read_text().count("CONFORMANT") >= 1
    passed = [c for c in report["clauses"] if c["status"] == "PASS"]
    assert passed and all(c["tests"] for c in passed), "a PASS without any test behind it"


AUTH_CLAUSES = (
    "auth.methods.advertised",
    "auth.authenticate.success",
    "auth.logout.success",
    "auth.logout.reauth",
    "error.auth-required",
    "session.new.unique-id",
)


def test_reference_agent_requiring_auth_passes_the_auth_checks(tmp_path: Path) -> None:
    """``python -m mock_agent --require-auth`` is what the authenticate/logout checks pass on
    (their breakages in tests/peers/broken_agents_sessions.py are this agent broken once)."""
    select = [f"--acp-clause={c}" for c in AUTH_CLAUSES]
    run = run_suite(f"{REFERENCE} --require-auth", tmp_path, "--acp-auth-method=token", *select)
    statuses = run.statuses()
    assert {c: statuses[c] for c in AUTH_CLAUSES} == dict.fromkeys(AUTH_CLAUSES, "PASS"), run.stdout[-3000:]
    assert not run.with_status("FAIL", "WARN")


def test_an_agent_wanting_authentication_is_inconclusive_without_an_auth_method(tmp_path: Path) -> None:
    """An agent answering session/new with -32000 (auth_required) before authentication does what
    authentication.mdx describes: without --acp-auth-method the tests that need a session are
    INCONCLUSIVE and say how to authenticate; none FAILs session.new.unique-id (50 tests did),
    and a fuzz campaign does not end the loop the synchronous tests share (it did)."""
    run = run_suite(
        f"{REFERENCE} --require-auth",
        tmp_path,
        "-k",
        "cancel_twice or test_fs_and_terminal_calls or fuzz_odd_ids or stateful",
    )
    assert not run.with_status("FAIL", "WARN"), {c: run.messages(c) for c in run.with_status("FAIL", "WARN")}
    assert run.returncode == 0, run.stdout[-3000:]
    said = " ".join(m for c in ("session.new.unique-id", "jsonrpc.id-types") for m in run.messages(c))
    assert "agent requires authentication; pass --acp-auth-method ID (advertised: token)" in said, said


def test_reference_agent_with_dictated_plans_sends_full_plans(tmp_path: Path) -> None:
    """plan.full-list is judged only with --acp-dictated-plans (the suite must know the plan); the
    reference agent plans exactly the dictated steps and PASSes it (partial-plan-updates FAILs it),
    and without the option the clause says why it was not judged."""
    (tmp_path / "with").mkdir()
    (tmp_path / "without").mkdir()
    run = run_suite(REFERENCE, tmp_path / "with", "--acp-dictated-plans", "--acp-clause=plan.full-list")
    assert run.statuses()["plan.full-list"] == "PASS", run.stdout[-3000:]
    run = run_suite(REFERENCE, tmp_path / "without", "--acp-clause=plan.full-list")
    clause = next(c for c in run.report["clauses"] if c["id"] == "plan.full-list")
    assert clause["status"] == "NOT_APPLICABLE" and "--acp-dictated-plans" in clause["tests"][0]["message"]


def test_junitxml_carries_clause_ids(tmp_path: Path) -> None:
    proc = _pytest(tmp_path, f"--acp-agent={REFERENCE}", "--acp-clause=jsonrpc.unknown-method", "--junitxml=j.xml")
    tree = ET.parse(tmp_path / "j.xml")
    props = [p.get("value") for p in tree.iter("property") if p.get("name") == "acp_clause"]
    assert "jsonrpc.unknown-method=PASS" in props, props
    # A partial run gets a verdict on its selection, and passes when the selection does.
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert "ACP verdict: SELECTED CLAUSES: all PASS (1 of 1 selected clauses judged" in proc.stdout
    assert "CONFORMANT" not in proc.stdout


def test_partial_runs_by_prefix_area_and_level_and_collect_only(tmp_path: Path) -> None:
    proc = _pytest(tmp_path, f"--acp-agent={REFERENCE}", "--acp-clause=jsonrpc.*", "--acp-level=SHOULD", "--co")
    # --collect-only runs nothing: pytest's own exit status, no verdict.
    assert proc.returncode == 0 and "ACP verdict" not in proc.stdout, proc.stdout[-3000:]
    assert "deselected" in proc.stdout and "test_fuzz.py::" in proc.stdout  # the jsonrpc SHOULDs' tests only
    assert "test_cancellation.py::" not in proc.stdout
    report = tmp_path / "r.json"
    proc = _pytest(tmp_path, f"--acp-agent={REFERENCE}", "--acp-area=session-modes", f"--acp-report-json={report}")
    data = json.loads(report.read_text())
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert data["verdict"]["scope"] == "selected" and data["verdict"]["selected_pass"]
    assert data["verdict"]["judged"] and all(cid.startswith("mode.") for cid in data["verdict"]["judged"])
    assert "--acp-area session-modes" in data["verdict"]["selection"]
    assert "SELECTED CLAUSES: all PASS" in report.with_suffix(".md").read_text()
    # Tests that send their own initialize (to versions 0 and 999 here) still identify the peer.
    proc = _pytest(
        tmp_path,
        f"--acp-agent={REFERENCE}",
        "--acp-clause=init.version.latest-otherwise",
        f"--acp-report-json={report}",
    )
    assert json.loads(report.read_text())["peer"]["info"]["name"] == "acp-conformance-mock-agent"
    assert "- Peer: acp-conformance-mock-agent" in report.with_suffix(".md").read_text()


@pytest.mark.parametrize(
    ("args", "env", "message"),
    [
        (["--acp-agent=/nonexistent/agent --acp"], {}, "does not exist"),
        (["--acp-agent=no-such-agent-binary-xyz"], {}, "not found on PATH"),
        (["--acp-agent=python 'unterminated"], {}, "cannot parse"),
        ([f"--acp-agent={REFERENCE}", "--acp-clause=no.such.clause"], {}, "unknown clause id 'no.such.clause'"),
        ([f"--acp-agent={REFERENCE}", "--acp-clause=jsonrpc.unknown-metod"], {}, "Did you mean jsonrpc.unknown-method"),
        ([f"--acp-agent={REFERENCE}", "--acp-agent-env=NOEQUALS"], {}, "KEY=VALUE"),
        ([f"--acp-agent={REFERENCE}", "--acp-timeout=0"], {}, "must be positive"),
        ([f"--acp-agent={REFERENCE}", "--acp-schema=/nonexistent/schema.json"], {}, "does not exist"),
    ],
)
def test_bad_input_is_a_clear_usage_error(tmp_path: Path, args: list[str], env: dict[str, str], message: str) -> None:
    proc = _pytest(tmp_path, *args, env=env)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 4, output
    assert message in output
    assert "Traceback" not in output


def test_agent_that_exits_at_once_is_inconclusive_with_its_stderr(tmp_path: Path) -> None:
    agent = f"{PY} -c \"import sys; sys.stderr.write('fatal: no config file found\\n'); sys.exit(3)\""
    start = time.monotonic()
    run = run_suite(agent, tmp_path, "--acp-startup-timeout=5")
    assert time.monotonic() - start < 120
    # It may never have read initialize: nothing FAILs, nothing PASSes, the verdict says INCONCLUSIVE
    # (never CONFORMANT) and every message shows why, with the agent's own words.
    assert not run.report["verdict"]["conformant"] and run.returncode != 0
    assert "ACP verdict: INCONCLUSIVE (0 mandatory FAIL" in run.stdout, run.stdout[-3000:]
    statuses = run.statuses()
    assert "FAIL" not in statuses.values() and "PASS" not in statuses.values()
    clause = next(c for c in run.report["clauses"] if c["id"] == "init.response.protocol-version")
    assert clause["status"] == "INCONCLUSIVE"
    evidence = " ".join(t.get("evidence", "") + t["message"] for t in clause["tests"])
    assert "fatal: no config file found" in evidence


def test_agent_that_never_answers_initialize_does_not_hang(tmp_path: Path) -> None:
    agent = f"{PY} -c \"import sys, time; sys.stderr.write('warming up\\n'); sys.stderr.flush(); time.sleep(600)\""
    start = time.monotonic()
    run = run_suite(agent, tmp_path, "--acp-startup-timeout=1", "--acp-timeout=1", "-n", "2")
    assert time.monotonic() - start < 120
    assert run.statuses()["jsonrpc.every-request-answered"] == "FAIL"
    assert "within 1 s" in run.stdout
    assert not live_processes_matching("time.sleep(600)")


def test_banner_on_stdout_is_a_clear_fail_with_the_line(tmp_path: Path) -> None:
    banner = ROOT / "tests" / "peers" / "broken_agents.py"
    # Any one test shows it: the banner comes before the first frame of every connection.
    run = run_suite(f"{PY} {banner} banner", tmp_path, "-k", "test_initialize_v1")
    clause = next(c for c in run.report["clauses"] if c["id"] == "transport.stdio.stdout-clean")
    assert clause["status"] == "FAIL"
    assert any("Starting my-agent" in t.get("evidence", "") for t in clause["tests"])


@pytest.mark.skipif(
    not ECHO_AGENT.is_file(), reason="Python SDK examples not fetched (./run setup --with-peers does it)"
)
def test_python_sdk_echo_agent_gets_an_honest_verdict(tmp_path: Path) -> None:
    pytest.importorskip("acp", reason="agent-client-protocol not installed")
    # Every scripted test (the fuzz campaigns restart this agent per failing example, at 0.9 s of
    # imports each: its full report is reports/python-sdk-echo-agent.json, made by hand).
    run = run_suite(f"{PY} {ECHO_AGENT}", tmp_path, "-n", "2", "-k", "not test_fuzz and not test_stateful")
    # agent-client-protocol 0.12.1's echo agent echoes any protocolVersion it is sent (999 too).
    assert run.statuses()["init.version.latest-otherwise"] == "FAIL"
    assert run.report["verdict"]["selected_pass"] is False and run.returncode != 0
    # Honest also means the suite never broke on a peer it did not write.
    errors = [t["message"] for c in run.report["clauses"] for t in c["tests"] if t["message"].startswith("suite error")]
    assert not errors, errors[:3]


def test_expected_failures_baseline_gates_on_new_and_stale_entries(tmp_path: Path) -> None:
    broken = f"{PY} {ROOT / 'tests' / 'peers' / 'broken_agents.py'} echoes-version"
    select = "--acp-clause=init.version.latest-otherwise"
    baseline = tmp_path / "baseline.yaml"
    junit = tmp_path / "clauses.xml"
    first = _pytest(
        tmp_path, f"--acp-agent={broken}", select, f"--acp-write-baseline={baseline}", f"--acp-report-junit={junit}"
    )
    assert first.returncode == 1, first.stdout[-3000:]
    # One JUnit case per clause, agreeing with the exit status: the FAIL is a <failure> with the clause text.
    suite = ET.parse(junit).getroot().find("testsuite")
    assert suite is not None and suite.get("failures") == "1"
    case = next(c for c in suite.iter("testcase") if c.get("name") == "init.version.latest-otherwise")
    failure = case.find("failure")
    assert case.get("classname") == "acp.agent.initialization" and failure is not None
    assert "observed protocolVersion 999" in (failure.get("message") or "")
    assert all(c.find("skipped") is not None for c in suite.iter("testcase") if c.get("name") == "cancel.stop-reason")
    assert "init.version.latest-otherwise: observed protocolVersion 999" in baseline.read_text()
    # Every FAIL listed: the gate passes, the failures show as expected (xfail), exit 0.
    gated = _pytest(
        tmp_path, f"--acp-agent={broken}", select, f"--acp-baseline={baseline}", f"--acp-report-junit={junit}"
    )
    assert gated.returncode == 0, gated.stdout[-3000:]
    assert ET.parse(junit).getroot().find("testsuite").get("failures") == "0"  # type: ignore[union-attr]
    assert (
        "1 expected FAIL (init.version.latest-otherwise); 0 new FAIL; 0 stale entries: the gate passes" in gated.stdout
    )
    assert "xfailed" in gated.stdout
    # A listed clause that passes now is stale: the gate fails, so the list cannot hide a regression.
    stale = _pytest(tmp_path, f"--acp-agent={REFERENCE}", select, f"--acp-baseline={baseline}")
    assert stale.returncode == 1 and "1 stale entry (init.version.latest-otherwise: now PASS)" in stale.stdout
    # A FAIL the list does not name is new: the gate fails.
    baseline.write_text("agent:\n  tool.id.unique: known\n")
    new = _pytest(tmp_path, f"--acp-agent={broken}", select, f"--acp-baseline={baseline}")
    assert new.returncode == 1 and "1 new FAIL (init.version.latest-otherwise)" in new.stdout
    # A bad file is a usage error naming the problem, never a traceback.
    baseline.write_text("agent:\n  cancel.stop-reasn: typo\n")
    bad = _pytest(tmp_path, f"--acp-agent={REFERENCE}", select, f"--acp-baseline={baseline}")
    assert (
        bad.returncode == 4 and "unknown clause id 'cancel.stop-reasn'" in bad.stderr and "Traceback" not in bad.stderr
    )


def test_a_finding_shows_the_test_not_the_harness(tmp_path: Path) -> None:
    """The failure output of a FAIL points at the suite's test and the clause, with the harness
    frames hidden, and the short summary line carries the clause message."""
    broken = f"{PY} {ROOT / 'tests' / 'peers' / 'broken_agents.py'} ends-cancelled-turns-with-end-turn"
    proc = _pytest(tmp_path, f"--acp-agent={broken}", "--acp-clause=cancel.stop-reason", "-x", env={"COLUMNS": "300"})
    assert proc.returncode == 1
    assert "acp_conformance/harness/agent.py" not in proc.stdout and "def _connected" not in proc.stdout
    assert "test_cancellation.py:" in proc.stdout
    summary = next(line for line in proc.stdout.splitlines() if line.startswith("FAILED "))
    assert "ConformanceFailure: [cancel.stop-reason]" in summary, summary
