"""The CI gate (action.yml, the GitLab snippet): the script they run, run locally as CI would."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
GATE = ROOT / "scripts" / "ci-gate.sh"
PY = sys.executable
BROKEN = f"{PY} {ROOT / 'tests' / 'peers' / 'broken_agents.py'} echoes-version"


def _gate(tmp: Path, **env: str) -> subprocess.CompletedProcess[str]:
    full = {k: v for k, v in os.environ.items() if not k.startswith(("ACP_", "PYTEST_XDIST"))}
    full.update(PYTHON=PY, ACP_REPORT_DIR=str(tmp / "out"), GITHUB_STEP_SUMMARY=str(tmp / "summary.md"), **env)
    return subprocess.run([str(GATE)], cwd=tmp, env=full, capture_output=True, text=True, timeout=300)


def test_the_action_runs_the_gate_script_with_its_inputs() -> None:
    action = yaml.safe_load((ROOT / "action.yml").read_text())
    assert set(action["inputs"]) == {"agent", "client", "baseline", "report-dir", "python-version", "args"}
    run = next(step for step in action["runs"]["steps"] if "ci-gate.sh" in step.get("run", ""))
    assert {"ACP_AGENT", "ACP_CLIENT", "ACP_BASELINE", "ACP_REPORT_DIR", "ACP_ARGS"} <= set(run["env"])
    upload = next(step for step in action["runs"]["steps"] if "upload-artifact" in step.get("uses", ""))
    assert upload["if"] == "always()"


def test_gate_writes_reports_and_summary_and_exits_with_the_verdict(tmp_path: Path) -> None:
    select = "--acp-clause=init.version.latest-otherwise"
    ok = _gate(tmp_path, ACP_AGENT=f"{PY} -m mock_agent", ACP_ARGS=select)
    assert ok.returncode == 0, ok.stdout[-3000:] + ok.stderr[-2000:]
    assert "SELECTED CLAUSES: all PASS" in (tmp_path / "summary.md").read_text()
    assert {p.name for p in (tmp_path / "out").iterdir()} >= {"report.json", "report.md", "junit.xml"}
    bad = _gate(tmp_path, ACP_AGENT=BROKEN, ACP_ARGS=select)
    assert bad.returncode == 1
    baseline = tmp_path / "known.yaml"
    baseline.write_text("agent:\n  init.version.latest-otherwise: answers 0 with 0\n")
    known = _gate(tmp_path, ACP_AGENT=BROKEN, ACP_ARGS=select, ACP_BASELINE=str(baseline))
    assert known.returncode == 0, known.stdout[-3000:]
    assert "1 expected FAIL" in (tmp_path / "summary.md").read_text()


def test_gate_without_a_target_says_what_to_set(tmp_path: Path) -> None:
    proc = _gate(tmp_path)
    assert proc.returncode == 2 and "set agent (ACP_AGENT) or client (ACP_CLIENT)" in proc.stderr
