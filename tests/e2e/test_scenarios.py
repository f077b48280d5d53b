"""Scenarios end to end, as users run them: real processes, the command lines, the documented examples.

* the agent library is green against the reference agent (``python -m acp_conformance.scenario run``);
* it gives the expected verdicts against broken agents (tests/peers/broken_agents*.py);
* the client library, played by ``python -m mock_agent --scenario``, is green against a conforming
  client and fails a client that breaks the clause;
* a session recorded through the proxy converts into a scenario that replays (also with acpx, when
  the pinned npm peers are installed);
* every runnable example in docs/scenarios.md runs.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import SCHEMA_DIRS
from tests.e2e._suite_run import BROKEN, ROOT

PY = sys.executable
LIBRARY = ROOT / "scenarios"
AGENT_FILES = sorted((LIBRARY / "agent").glob("*.yaml"))
DOCS = ROOT / "docs" / "scenarios.md"
ACPX = ROOT / "node_modules" / ".bin" / "acpx"

pytestmark = pytest.mark.slow


def schema_dir() -> Path:
    found = next((d for d in SCHEMA_DIRS if (d / "schema.json").is_file()), None)
    if found is None:
        pytest.skip("the ACP schema is not installed (npm ci)")
    return found


def env(tmp: Path) -> dict[str, str]:
    e = dict(os.environ)
    e.pop("PYTEST_ADDOPTS", None)
    e.pop("PYTEST_XDIST_WORKER", None)
    e["ACP_CONFORMANCE_SCHEMA"] = str(schema_dir())
    e["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), e.get("PYTHONPATH", "")]))
    # `python` in the documented commands is this interpreter.
    bindir = tmp / ".bin"
    bindir.mkdir(exist_ok=True)
    link = bindir / "python"
    if not link.exists():
        # A wrapper, not a symlink: a venv's python found through a symlink in another
        # directory does not see the venv's pyvenv.cfg, so it would run without its packages.
        link.write_text(f'#!/bin/sh\nexec "{PY}" "$@"\n', "utf-8")
        link.chmod(0o755)
    e["PATH"] = f"{bindir}{os.pathsep}{e.get('PATH', '')}"
    e["HOME"] = str(tmp / ".home")
    return e


def run(args: list[str], tmp: Path, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, cwd=tmp, env=env(tmp), capture_output=True, text=True, timeout=timeout)


def scenario_cli(*args: str) -> list[str]:
    return [PY, "-m", "acp_conformance.scenario", *args]


def verdict_of(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text("utf-8"))
    return data


def statuses(verdict: dict[str, Any]) -> dict[str, str]:
    """Clause -> the scenario's status (its own expectations, not the transcript checks)."""
    own = {c for e in verdict["expectations"] for c in e["clauses"]}
    out: dict[str, str] = {}
    for c in verdict["clauses"]:
        if c["clause"] in own or c["status"] != "PASS":
            rank = ["PASS", "NOT_APPLICABLE", "INCONCLUSIVE", "INFO", "WARN", "FAIL"]
            prev = out.get(c["clause"])
            if prev is None or rank.index(c["status"]) > rank.index(prev):
                out[c["clause"]] = c["status"]
    return out


# ------------------------------------------------------------------ the agent library
@pytest.mark.parametrize("path", AGENT_FILES, ids=lambda p: p.stem)
def test_agent_library_is_green_against_the_reference_agent(path: Path, tmp_path: Path) -> None:
    verdict = tmp_path / "verdict.json"
    proc = run(scenario_cli("run", str(path), "--agent", f"{PY} -m mock_agent", "--verdict", str(verdict)), tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    v = verdict_of(verdict)
    assert v["verdict"] == "pass" and v["end"] == "completed", proc.stdout
    assert {c["status"] for c in v["clauses"]} <= {"PASS", "NOT_APPLICABLE"}, proc.stdout


#: (scenario, broken agent, what the scenario must say about the clauses it judges)
BROKEN_CASES: list[tuple[str, str, dict[str, str | None]]] = [
    # Nothing holds the long turn open (no model stream of ours): an end other than cancelled, or
    # an error, may have been decided before the cancel arrived. Output after the answer is
    # provable once the turn answered "cancelled" (it had read the cancel); after any other end it
    # is not judged (the cancel may have crossed the answer).
    (
        "cancel-long-turn",
        "ends-cancelled-turns-with-end-turn",
        {"cancel.stop-reason": "INCONCLUSIVE", "cancel.updates-before-response": "INCONCLUSIVE"},
    ),
    ("cancel-long-turn", "error-on-cancel", {"cancel.no-error": "INCONCLUSIVE"}),
    ("cancel-long-turn", "late-update-after-cancel", {"cancel.updates-before-response": "FAIL"}),
    ("cancel-long-turn", "ignores-cancel", {"cancel.stop-asap": "WARN", "cancel.stop-reason": "INCONCLUSIVE"}),
    # The write we hold keeps the turn open: the same defects are then provable.
    ("cancel-held-client-request", "ends-cancelled-turns-with-end-turn", {"cancel.stop-reason": "FAIL"}),
    ("cancel-held-client-request", "error-on-cancel", {"cancel.no-error": "FAIL"}),
    ("cancel-held-client-request", "late-update-after-cancel", {"cancel.updates-before-response": "FAIL"}),
    ("permission-cancel-then-answer", "forgets-cancel-on-cancelled-permission", {"perm.agent-cancel-race": "FAIL"}),
    ("permission-cancel-then-answer", "ends-cancelled-turns-with-end-turn", {"perm.agent-cancel-race": "FAIL"}),
    ("cancel-mid-permission", "forgets-cancel-on-cancelled-permission", {"perm.agent-cancel-race": "FAIL"}),
    ("capability-gating", "writes-without-capability", {"cap.omitted-unsupported": "FAIL", "fs.write.gated": None}),
    ("capability-gating", "reads-without-capability", {"cap.omitted-unsupported": "FAIL", "fs.read.gated": None}),
    ("capability-gating", "terminal-without-capability", {"cap.omitted-unsupported": "FAIL", "term.gated": None}),
    ("capability-gating", "reads-when-fs-omitted", {"cap.omitted-unsupported": "FAIL", "fs.read.gated": None}),
    ("tool-call-lifecycle", "reused-tool-call-id", {"tool.id.unique": "WARN"}),
    ("tool-call-lifecycle", "status-after-completed", {"tool.status.terminal-final": "WARN"}),
    ("tool-call-lifecycle", "no-in-progress", {"prompt.tool-in-progress": "WARN"}),
    ("load-replay-history", "replay-wrong-session-id", {"session.load.replay-session-id": "FAIL"}),
    ("load-replay-history", "late-replay", {"session.load.replay-before-response": "FAIL"}),
    ("load-replay-history", "replay-without-prompts", {"session.load.replay-all": "FAIL"}),
    ("load-then-prompt", "loaded-session-unusable", {"session.load.continue": "WARN"}),
    ("load-unknown-session", "loads-unknown-sessions", {"error.resource-not-found": "INFO"}),
    ("stdout-hygiene", "banner", {"transport.stdio.stdout-clean": "FAIL"}),
    ("malformed-input", "fuzz-silent-on-parse-errors", {"jsonrpc.parse-error": "WARN"}),
    ("malformed-input", "fuzz-parse-error-for-invalid-requests", {"jsonrpc.invalid-request": "WARN"}),
    ("malformed-input", "fuzz-wedged-after-garbage", {"jsonrpc.survives-invalid-input": "WARN"}),
    ("stdout-hygiene", "prompt-to-unknown-session-succeeds", {"prompt.unknown-session": "INFO"}),
]


@pytest.mark.parametrize(("name", "breakage", "expected"), BROKEN_CASES, ids=lambda x: x if isinstance(x, str) else "")
def test_library_verdicts_against_broken_agents(
    name: str, breakage: str, expected: dict[str, str | None], tmp_path: Path
) -> None:
    verdict = tmp_path / "verdict.json"
    proc = run(
        scenario_cli(
            "run",
            str(LIBRARY / "agent" / f"{name}.yaml"),
            "--agent",
            f"{PY} {BROKEN} {breakage}",
            "--verdict",
            str(verdict),
            "--timeout",
            "3",
        ),
        tmp_path,
    )
    v = verdict_of(verdict)
    got = statuses(v)
    for clause, status in expected.items():
        assert got.get(clause) == status, f"{clause}: expected {status}, got {got.get(clause)}\n{proc.stdout}"
    # 1 when a MUST failed; otherwise 0, or 3 when a later precondition could not be met.
    assert proc.returncode == 1 if "FAIL" in expected.values() else proc.returncode in (0, 3), proc.stdout
    # The finding names the clause, the file and line, and carries the transcript around it.
    findings = ("FAIL", "WARN", "INFO", "INCONCLUSIVE")
    bad = [e for e in v["expectations"] if e["status"] in findings and set(e["clauses"]) & set(expected)]
    assert bad and re.search(rf"{name}\.yaml:\d+ steps\[", bad[0]["message"]), v["expectations"]
    if bad[0]["status"] == "FAIL":
        assert "expected" in bad[0]["message"] and "observed" in bad[0]["message"]
        assert bad[0]["evidence"]


# ------------------------------------------------------------------ the client library
HANDSHAKE = """
  - call:
      request: initialize
      params: {protocolVersion: 1, clientCapabilities: {}, clientInfo: {name: driver, version: "1"}}
      precondition: handshake
  - call:
      request: session/new
      params: {cwd: "{{sandbox}}", mcpServers: []}
      result: {sessionId: $capture(session)}
      precondition: a session
  - send: {request: session/prompt, params: {sessionId: "{{session}}", prompt: [{type: text, text: go}]}, as: turn}
"""

#: Scripted clients standing for a user who cancels: conforming ones, and ones breaking the clause.
DRIVERS = {
    # cancels when the tool call shows; a late permission request is answered by the endpoint
    # (cancelled, as a conforming client does) or, broken, with "allow"
    "cancels-on-tool-call": "scenario: driver\nplays: client\nanswers: {session/request_permission: POLICY}\nsteps:"
    + HANDSHAKE
    + """  - expect: {notification: session/update, params: {update: {sessionUpdate: tool_call}}, before: turn,
      precondition: a tool call}
  - send: {notification: session/cancel, params: {sessionId: "{{session}}"}}
  - expect: {response: turn, clause: cancel.stop-reason}
""",
    # cancels while the permission request is pending, then answers it cancelled (conforming)
    "cancels-pending-permission": "scenario: driver\nplays: client\nanswers: {session/request_permission: hold}\nsteps:"
    + HANDSHAKE
    + """  - expect: {request: session/request_permission, before: turn, as: permission, precondition: asked}
  - send: {notification: session/cancel, params: {sessionId: "{{session}}"}}
  - answer: {request: permission, result: {outcome: {outcome: cancelled}}}
  - expect: {response: turn, clause: cancel.stop-reason}
""",
    # cancels while the permission request is pending and never answers it (broken)
    "forgets-pending-permission": "scenario: driver\nplays: client\nanswers: {session/request_permission: hold}\nsteps:"
    + HANDSHAKE
    + """  - expect: {request: session/request_permission, before: turn, as: permission, precondition: asked}
  - send: {notification: session/cancel, params: {sessionId: "{{session}}"}}
  - expect: {response: turn, within: 8s, clause: cancel.stop-reason}
""",
}


@pytest.mark.parametrize(
    ("name", "driver", "status"),
    [
        ("permission-after-cancel", "cancels-on-tool-call:auto", "PASS"),
        ("permission-after-cancel", "cancels-on-tool-call:allow_once", "WARN"),  # a SHOULD
        ("cancel-pending-permission", "cancels-pending-permission", "PASS"),
        ("cancel-pending-permission", "forgets-pending-permission", "FAIL"),
    ],
)
def test_client_library_played_by_the_mock_agent(name: str, driver: str, status: str, tmp_path: Path) -> None:
    key, _, policy = driver.partition(":")
    script = tmp_path / "driver.yaml"
    script.write_text(DRIVERS[key].replace("POLICY", policy or "auto"), "utf-8")
    agent_verdict = tmp_path / "agent-verdict.json"
    scenario = LIBRARY / "client" / f"{name}.yaml"
    agent = f"{PY} -m mock_agent --scenario {scenario} --verdict {agent_verdict} --timeout 3"
    proc = run(scenario_cli("run", str(script), "--agent", agent, "--timeout", "10"), tmp_path)
    v = verdict_of(agent_verdict)
    [clause] = load_clauses(scenario)
    assert statuses(v).get(clause) == status, f"{v['expectations']}\n{proc.stdout}\n{proc.stderr}"
    assert v["verdict"] == ("fail" if status == "FAIL" else "pass"), v


def mock_client_supports(flag: str) -> bool:
    proc = subprocess.run([PY, "-m", "mock_client", "--help"], capture_output=True, text=True, timeout=60)
    return proc.returncode == 0 and flag in proc.stdout


@pytest.mark.parametrize(
    ("name", "client_args"),
    [
        ("cancel-pending-permission", ["--prompt", "please edit notes.txt", "--cancel-after-permission"]),
        ("duplicate-and-stray-responses", ["--prompt", "hello", "--prompt", "again"]),
        ("load-gated", ["--prompt", "hello"]),
    ],
)
def test_client_library_is_green_against_the_reference_client(
    name: str, client_args: list[str], tmp_path: Path
) -> None:
    if not mock_client_supports("--cancel-after-permission"):
        pytest.skip("python -m mock_client is not available with the options these cases use")
    agent_verdict = tmp_path / "agent-verdict.json"
    scenario = LIBRARY / "client" / f"{name}.yaml"
    agent = f"{PY} -m mock_agent --scenario {scenario} --verdict {agent_verdict} --timeout 5"
    proc = run([PY, "-m", "mock_client", "--agent", agent, "--cwd", str(tmp_path), *client_args], tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    v = verdict_of(agent_verdict)
    assert v["verdict"] == "pass" and v["end"] == "completed", v
    assert {c["status"] for c in v["clauses"]} <= {"PASS", "NOT_APPLICABLE"}, v["clauses"]


def load_clauses(path: Path) -> list[str]:
    from acp_conformance.scenario.loader import load_scenario

    return load_scenario(path).clauses()


def test_a_bad_scenario_is_rejected_before_anything_runs(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("scenario: bad\nplays: agent\nsteps:\n  - sleep: 2\n", "utf-8")
    proc = run([PY, "-m", "mock_agent", "--scenario", str(bad)], tmp_path)
    assert proc.returncode == 2
    assert "bad.yaml:4: steps[0]: there is no sleep step" in proc.stderr
    proc = run(scenario_cli("run", str(bad), "--agent", "no-such-agent-command"), tmp_path)
    assert proc.returncode == 2 and "bad.yaml:4" in proc.stderr
    proc = run([PY, "-m", "mock_client", "--agent", "no-such-agent-command", "--scenario", str(bad)], tmp_path)
    assert proc.returncode == 2 and "bad.yaml:4" in proc.stderr and "Traceback" not in proc.stderr


def test_the_mock_client_plays_a_scenario_through_the_proxy(tmp_path: Path) -> None:
    """``python -m mock_client --scenario`` (the same engine and verdict as ``scenario run``), with the
    agent behind ``python -m acp_conformance proxy``."""
    verdict, recorded = tmp_path / "verdict.json", tmp_path / "recorded.jsonl"
    agent = f"{PY} -m acp_conformance proxy --quiet --transcript {recorded} -- {PY} -m mock_agent"
    library = LIBRARY / "agent" / "tool-call-lifecycle.yaml"
    args = ["--agent", agent, "--scenario", str(library), "--verdict", str(verdict), "--seed", "7"]
    proc = run([PY, "-m", "mock_client", *args], tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    v = verdict_of(verdict)
    assert v["verdict"] == "pass" and v["seed"] == 7, proc.stdout
    assert recorded.is_file() and recorded.read_text("utf-8").count("\n") > 5


SDK_AGENT = ROOT / ".peers" / "python-sdk-0.12.1" / "examples" / "agent.py"


@pytest.mark.skipif(not SDK_AGENT.exists(), reason="the Python SDK examples are not fetched (./run setup --with-peers)")
def test_a_turn_that_ended_before_the_cancel_is_inconclusive_not_a_failure(tmp_path: Path) -> None:
    """The SDK's example agent answers every prompt at once (end_turn): its turn is over before our
    cancel goes out, so cancel-long-turn cannot judge cancel.stop-reason (it once said FAIL)."""
    verdict = tmp_path / "verdict.json"
    library = LIBRARY / "agent" / "cancel-long-turn.yaml"
    args = scenario_cli("run", str(library), "--agent", f"{PY} {SDK_AGENT}", "--verdict", str(verdict))
    for _ in range(3):  # it is a race: it must never come out FAIL
        proc = run(args, tmp_path)
        assert proc.returncode == 3, proc.stdout + proc.stderr
        assert verdict_of(verdict)["end"] == "inconclusive", proc.stdout


# ------------------------------------------------------------------ record -> convert -> replay
def test_proxy_recording_converts_into_a_scenario_that_replays(tmp_path: Path) -> None:
    recorded = tmp_path / "recorded.jsonl"
    proxy_verdict = tmp_path / "proxy.json"
    proxy = (
        f"{PY} -m acp_conformance.scenario proxy --transcript {recorded} --verdict {proxy_verdict} "
        f"-- {PY} -m mock_agent"
    )
    library = LIBRARY / "agent" / "permission-cancel-then-answer.yaml"
    proc = run(scenario_cli("run", str(library), "--agent", proxy), tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    pv = verdict_of(proxy_verdict)
    assert pv["agent"]["failed"] == [] and pv["client"]["failed"] == []
    converted = tmp_path / "regression.yaml"
    proc = run(scenario_cli("convert", str(recorded), "-o", str(converted)), tmp_path)
    assert proc.returncode == 0, proc.stderr
    for _ in range(2):
        proc = run(scenario_cli("run", str(converted), "--agent", f"{PY} -m mock_agent"), tmp_path)
        assert proc.returncode == 0, proc.stdout + proc.stderr
    proc = run(scenario_cli("check", str(recorded), "--role", "both"), tmp_path)
    assert proc.returncode == 0, proc.stdout


def test_the_proxy_reports_violations_live_and_stays_transparent(tmp_path: Path) -> None:
    recorded = tmp_path / "recorded.jsonl"
    proxy = f"{PY} -m acp_conformance.scenario proxy --transcript {recorded} -- {PY} {BROKEN} banner"
    proc = run(scenario_cli("run", str(LIBRARY / "agent" / "malformed-input.yaml"), "--agent", proxy), tmp_path)
    # The client behind the proxy sees exactly what the agent wrote: the banner fails it there too.
    assert proc.returncode == 1, proc.stdout
    assert "transport.stdio.stdout-clean" in proc.stdout
    lines = [json.loads(line) for line in recorded.read_text("utf-8").splitlines()]
    assert any(r["dir"] == "in" and r["raw"].startswith("Starting my-agent") for r in lines)
    assert any(v["clause"] == "transport.stdio.stdout-clean" for r in lines for v in r.get("violations", []))


@pytest.mark.skipif(not ACPX.exists(), reason="acpx is not installed (scripts/install-peers.sh)")
def test_a_real_client_session_through_the_proxy_replays(tmp_path: Path) -> None:
    recorded = tmp_path / "acpx.jsonl"
    work = tmp_path / "work"
    work.mkdir()
    proxy = f"{PY} -m acp_conformance.scenario proxy --transcript {recorded} -- {PY} -m mock_agent"
    proc = subprocess.run(
        [str(ACPX), "--approve-all", "--format", "json", "--agent", proxy, "exec", "acp:tool please write the file"],
        cwd=work,
        env=env(tmp_path),
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert recorded.is_file()
    converted = tmp_path / "acpx.yaml"
    assert run(scenario_cli("convert", str(recorded), "-o", str(converted)), tmp_path).returncode == 0
    text = converted.read_text("utf-8")
    assert "name: acpx" in text and "session/request_permission" in text
    proc = run(scenario_cli("run", str(converted), "--agent", f"{PY} -m mock_agent"), tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr


# ------------------------------------------------------------------ the documented examples
def doc_examples() -> list[tuple[str, str, str]]:
    """``(kind, name, body)`` in document order: ``file`` blocks to write, ``example`` blocks to run."""
    text = DOCS.read_text("utf-8")
    out = []
    for m in re.finditer(r"<!-- (example|file: ([^ ]+)) -->\n```[a-z]*\n(.*?)```", text, re.S):
        kind = "file" if m.group(1).startswith("file") else "example"
        out.append((kind, m.group(2) or "", m.group(3)))
    return out


def test_the_documented_examples_run(tmp_path: Path) -> None:
    examples = doc_examples()
    assert len([e for e in examples if e[0] == "example"]) >= 4
    (tmp_path / "scenarios").symlink_to(LIBRARY, target_is_directory=True)
    for kind, name, body in examples:
        if kind == "file":
            (tmp_path / name).write_text(body, "utf-8")
            continue
        proc = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", body],
            cwd=tmp_path,
            env=env(tmp_path),
            capture_output=True,
            text=True,
            timeout=600,
        )
        output = f"--- stdout\n{proc.stdout}\n--- stderr\n{proc.stderr}"
        assert proc.returncode == 0, f"docs example failed:\n{body}\n{output}"


def test_a_peer_that_dies_is_reported_with_how_it_ended_and_what_it_said(tmp_path: Path) -> None:
    """A step that meets a closed output says what the process said last on stderr (and how it
    ended, when it had exited by then), so a reader tells a crash (a missing key, a bad flag)
    from a clean close without a rerun."""
    scenario = tmp_path / "dies.yaml"
    scenario.write_text(
        "scenario: dies\nplays: client\nsteps:\n"
        "  - call: {request: initialize, params: {protocolVersion: 1}, clause: init.version.agree}\n",
        "utf-8",
    )
    dying = tmp_path / "dying_agent.py"
    dying.write_text("import sys\nsys.stdin.readline()\nprint('boom: no API key set', file=sys.stderr)\nsys.exit(3)\n")
    verdict = tmp_path / "verdict.json"
    run(scenario_cli("run", str(scenario), "--agent", f"{PY} {dying}", "--verdict", str(verdict)), tmp_path)
    failed = [e["message"] for e in verdict_of(verdict)["expectations"] if e["status"] != "PASS"]
    assert failed and "the agent closed its output first" in failed[0], failed
    assert "(agent stderr: boom: no API key set)" in failed[0], failed
