"""Every client clause check is proven: it FAILs (or WARNs) against a client that breaks exactly that
clause, and the reference client is conformant, serially and under xdist.

Each case runs the client suite in a subprocess against one broken client
(tests/peers/broken_clients.py, driven by the bundled mock-client profile, or
by the same profile with prompts on stdin where a check needs a second
prompt) and compares the set of findings with what the breakage declares.  A
breakage naming a library ``scenario`` must also be caught by that file's test
(suite/client/test_scenarios.py) on its clause: the client suite runs
scenarios/client/*.yaml, and the files find what they claim to.

``ACP_PROOF=full`` (the default) runs the *whole* suite per broken client and
requires the FAIL/WARN set to equal ``{breaks} | also`` exactly.
``ACP_PROOF=targeted`` (what ``./run test`` uses, to keep CI fast on two
cores) runs only the tests bound to ``{breaks} | also`` (and ``quiet``, clauses
whose tests must run and flag nothing): the target must get its status and
nothing outside the declared set may be flagged.  It also
leaves out the fuzz campaigns unless the breakage is one only they find
(``fuzz-*``) or its clause is one only they judge; full mode runs everything.
The reference client always gets the whole suite, fuzzing included, serially
and under xdist.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from acp_conformance.plugin.bindings import bindings
from tests.e2e._suite_run import ROOT, SuiteRun, check_full_verdict, live_processes_matching, run_suite
from tests.peers.broken_clients import BREAKAGES

BROKEN = ROOT / "tests" / "peers" / "broken_clients.py"

PY = sys.executable
#: The capabilities the reference client runs with (URL elicitation apart: with both modes advertised
#: no mode is left to be unadvertised; test_reference_client_opens_no_elicited_url covers URL mode).
CAPS = "--caps fs,terminal,elicitation-form,auth-terminal"
ARGS = f"{{permission}} {CAPS} --add-dir /tmp --agent {{agent}} --prompt {{prompt}} --quiet"
REFERENCE = f"{PY} -m mock_client {ARGS}"
#: Without --prompt the mock client reads one prompt per stdin line (a second prompt is possible).
STDIN_ARGS = f"{{permission}} {CAPS} --add-dir /tmp --agent {{agent}} --quiet"

FUZZ_MODULES = ("test_fuzz::",)
#: Client clauses only a fuzz campaign judges.
FUZZ_ONLY = {c for c, tests in bindings("client").items() if all(t.startswith(FUZZ_MODULES) for t in tests)}


def needs_fuzzing(name: str, breaks: str) -> bool:
    """Targeted proofs run the fuzz campaigns only for the breakages only they can find (as for agents);
    a ``fuzz-*`` breakage names the one campaign that finds it (``Breakage.fuzz``)."""
    return name.startswith("fuzz-") or breaks in FUZZ_ONLY


#: Client clauses bound to a check that no broken client can violate alone, and why.
KNOWN_UNPROVEN = {
    "cancel.client-may": "MAY: a client that cannot cancel is NOT_APPLICABLE (no cancel action), never a FAIL",
    "ext.meta.no-assumptions": "needs a client that behaves differently on _meta values it did not define; "
    "the check is a PASS-only observation today",
    "cap.custom-meta": "unknown _meta keys in capabilities only matter if the client reads them",
    "transport.stdio.subprocess": "MAY; the harness itself only connects to a relay the client launched",
    "prompt.content-gated": "the same sentence as content.image/audio/resource.gated, which judge each gated "
    "block (one defect, one FAIL); a type the schema does not know is content.block.shapes'",
    "elicit.capability.explicit": "the client half is judged on a request the agent MUST NOT send (a mode the "
    "client did not advertise): its answer is robustness, elicit.mode.unadvertised-error's WARN; the agent half "
    "is proven by the broken agents",
}


def processes_under(path: Path) -> list[str]:
    """Live processes whose command line mentions ``path`` or whose working directory is below it."""
    root = str(path.resolve())
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
            cwd = os.readlink(entry / "cwd")
        except OSError:
            continue
        if state != "Z" and (root in cmd or cwd == root or cwd.startswith(root + "/")):
            out.append(f"{entry.name}: {cmd} (cwd {cwd})")
    return out


def stdin_profile(tmp: Path) -> Path:
    """The bundled mock-client profile with prompts on stdin (``prompt.via = "stdin"``)."""
    from acp_conformance.profiles import bundled_profiles

    text = bundled_profiles()["mock-client"].read_text("utf-8")
    assert '[prompt]\nvia = "argv"' in text, "the bundled mock-client profile changed: update stdin_profile()"
    path = tmp / "mock-client-stdin.toml"
    path.write_text(text.replace('[prompt]\nvia = "argv"', '[prompt]\nvia = "stdin"'), "utf-8")
    return path


def run_client_suite(
    client: str, tmp: Path, *extra: str, timeout: float = 600, profile: str = "mock-client"
) -> SuiteRun:
    """``pytest --acp-client=CLIENT --acp-client-profile=PROFILE`` in a fresh directory."""
    return run_suite(
        client,
        tmp,
        f"--acp-client-profile={profile}",
        f"--basetemp={tmp / 'bt'}",
        *extra,
        timeout=timeout,
        role="client",
    )


@pytest.mark.parametrize("name", sorted(BREAKAGES))
def test_broken_client_fails_exactly_its_clause(name: str, tmp_path: Path) -> None:
    b = BREAKAGES[name]
    declared = {b.breaks} | b.also
    # A PASS "breakage" is a peer the check must not flag (conforming, only unusual).
    flagged = declared if b.status != "PASS" else set(b.also)
    targeted = os.environ.get("ACP_PROOF", "full") == "targeted"
    select = [f"--acp-clause={cid}" for cid in sorted(declared | b.quiet)] if targeted else []
    if targeted and b.fuzz:
        # Only the campaign that finds it, bounded by its examples, not the clock (a loaded CI box
        # once ran too few in 6 s to meet the finding: INCONCLUSIVE), and 2 s to shrink: the finding
        # comes within the first examples of the default seed.  Full mode runs everything.
        select += ["-k", b.fuzz, "--acp-fuzz-seconds=600", "--acp-fuzz-shrink-seconds=2"]
    elif targeted and not needs_fuzzing(name, b.breaks):
        select += ["-k", "not test_fuzz"]
    elif not targeted:
        # Full mode: every campaign bounded by its examples, not the clock (the same on any machine).
        select += ["--acp-fuzz-seconds=600"]
    args, profile = (STDIN_ARGS, str(stdin_profile(tmp_path))) if b.prompts_on_stdin else (ARGS, "mock-client")
    run = run_client_suite(
        f"{PY} {BROKEN} {name} {args}",
        tmp_path,
        "--acp-timeout=3",
        "--acp-startup-timeout=10",
        *b.suite_args,
        *select,
        profile=profile,
    )
    findings = run.with_status("FAIL", "WARN", "INFO")
    assert run.statuses()[b.breaks] == b.status, run.stdout[-3000:]
    if b.says:
        said = run.messages(b.breaks, b.status)
        assert any(b.says in m for m in said), f"{name}: no {b.status} of {b.breaks} says {b.says!r}: {said}"
    if b.scenario:
        # The library file catches it too, on the clause it names (suite/client/test_scenarios.py).
        clause = next(c for c in run.report["clauses"] if c["id"] == b.breaks)
        mine = [t for t in clause["tests"] if t["nodeid"].endswith(f"test_scenario[{b.scenario}]")]
        assert any(t["status"] == b.status for t in mine), f"{b.scenario}: {mine}\n{run.stdout[-3000:]}"
    if targeted:
        assert findings <= flagged, f"{name}: undeclared findings {sorted(findings - flagged)}\n{run.stdout[-3000:]}"
        verdict = run.report["verdict"]
        assert verdict["scope"] == "selected" and verdict["conformant"] is None  # a partial run decides nothing
        # ... but says whether its selection passes, and exits 0 exactly then (a CI gate on one clause)
        assert verdict["selected_pass"] == (b.status != "FAIL" and not (b.also & run.with_status("FAIL")))
        assert (run.returncode == 0) == verdict["selected_pass"], run.stdout[-3000:]
    else:
        assert findings == flagged, (
            f"{name}: expected findings {sorted(flagged)}, got {sorted(findings)}\n{run.stdout[-3000:]}"
        )
        check_full_verdict(run, b.status == "FAIL" or bool(b.also & run.with_status("FAIL")))
    assert run.report["peer"]["role"] == "client"
    left = live_processes_matching(f"{BROKEN} {name} ", run)  # the space: not a longer name
    assert not left, f"the suite left client processes running: {left}"
    assert not processes_under(tmp_path), "the suite left processes running"


def test_reference_client_is_conformant_serially_and_under_xdist(tmp_path: Path) -> None:
    (tmp_path / "serial").mkdir()
    (tmp_path / "xdist").mkdir()
    serial = run_client_suite(REFERENCE, tmp_path / "serial")
    parallel = run_client_suite(REFERENCE, tmp_path / "xdist", "-n", "2")
    for run in (serial, parallel):
        assert run.report["verdict"]["conformant"], run.stdout[-3000:]
        assert run.returncode == 0
        assert "ACP verdict: CONFORMANT" in run.stdout
        assert not run.with_status("FAIL", "WARN", "INFO"), run.stdout[-3000:]
        assert run.report["peer"]["role"] == "client"
        assert run.report["peer"]["info"]["name"] == "acp-conformance-mock-client"
    assert serial.statuses() == parallel.statuses()
    passed = [c for c in serial.report["clauses"] if c["status"] == "PASS"]
    assert passed and all(c["tests"] for c in passed), "a PASS without any test behind it"
    assert not processes_under(tmp_path), "a client or relay agent outlived the run"


def test_reference_client_opens_no_elicited_url(tmp_path: Path) -> None:
    """The PASS half of elicit.url.safety (client): the reference client advertising URL elicitation
    answers accept and never fetches the page (the main reference run leaves URL mode out, so that a
    mode stays unadvertised for the unadvertised-mode checks)."""
    url_caps = ARGS.replace(CAPS, CAPS + ",elicitation-url")
    run = run_client_suite(f"{PY} -m mock_client {url_caps}", tmp_path, "--acp-clause=elicit.url.safety")
    assert run.statuses()["elicit.url.safety"] == "PASS", run.stdout[-3000:]
    assert run.returncode == 0


def test_reference_client_passes_the_scenario_library_with_prompts_on_stdin(tmp_path: Path) -> None:
    """Every file of scenarios/client/ is a PASS for the reference client once its profile can prompt twice
    (the bundled mock-client profile passes one prompt per run, which makes the duplicate-response file
    NOT_APPLICABLE in the run above)."""
    from acp_conformance.scenario.library_index import library_dir
    from acp_conformance.scenario.loader import load_scenario

    run = run_client_suite(
        f"{PY} -m mock_client {STDIN_ARGS}", tmp_path, "-k", "test_scenarios", profile=str(stdin_profile(tmp_path))
    )
    files = [load_scenario(p) for p in sorted((library_dir() / "client").glob("*.yaml"))]
    expected = {(s.scenario, cid) for s in files if "not-in-suite" not in s.tags for cid in s.clauses()}
    clauses = {c["id"]: c for c in run.report["clauses"]}
    got = {
        (name, cid): t["status"]
        for cid in {cid for _, cid in expected}
        for t in clauses[cid]["tests"]
        if "test_scenarios.py::test_scenario[" in t["nodeid"]
        and ((name := t["nodeid"].rsplit("[", 1)[-1].rstrip("]")), cid) in expected
    }
    assert expected and set(got) == expected, (sorted(got), run.stdout[-3000:])
    assert set(got.values()) == {"PASS"}, (got, run.stdout[-3000:])
    assert not run.with_status("FAIL", "WARN", "INFO"), run.stdout[-3000:]
    assert not processes_under(tmp_path), "a client or relay agent outlived the run"


def test_every_client_check_is_proven_by_a_broken_client() -> None:
    """Every clause a client test is bound to is broken by some broken client (or listed with the reason)."""
    from acp_conformance.clauses import registry

    proven = {b.breaks for b in BREAKAGES.values()} | {c for b in BREAKAGES.values() for c in b.also}
    # Clauses only a person can judge (manual mode) are not provable by a broken client.
    bound = {cid for cid in bindings("client") if not registry().get(cid).untestable}
    unproven = sorted(bound - proven)
    assert unproven == sorted(KNOWN_UNPROVEN), (
        f"newly unproven: {sorted(set(unproven) - set(KNOWN_UNPROVEN))}; "
        f"now proven (remove from KNOWN_UNPROVEN): {sorted(set(KNOWN_UNPROVEN) - set(unproven))}"
    )
    assert all(b.breaks in bound or b.breaks in _passive() for b in BREAKAGES.values())


def _passive() -> set[str]:
    from acp_conformance.plugin.bindings import passive_clauses

    return passive_clauses("client")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--acp-client=python -m mock_client --prompt hi"], "has no {agent} placeholder"),
        (["--acp-client=no-such-client-xyz --agent {agent}"], "not found on PATH"),
        (["--acp-client=/nonexistent/client {agent}"], "does not exist"),
        ([f"--acp-client={REFERENCE}", "--acp-client-profile=no-such-profile"], "not a bundled profile"),
        ([f"--acp-client={REFERENCE}", "--acp-client-env=NOEQUALS"], "KEY=VALUE"),
        ([f"--acp-client={REFERENCE}", "--acp-client-control=http://x"], "must be unix:"),
        ([f"--acp-client={REFERENCE}", f"--acp-agent={PY} -m mock_agent"], "not both"),
    ],
)
def test_bad_input_is_a_clear_usage_error(tmp_path: Path, args: list[str], message: str) -> None:
    env = dict(os.environ)
    env.pop("PYTEST_XDIST_WORKER", None)
    proc = subprocess.run(
        [PY, "-m", "pytest", "-p", "no:cacheprovider", "-q", *args],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    output = proc.stdout + proc.stderr
    assert proc.returncode == 4, output
    assert message in output
    assert "Traceback" not in output


def test_bad_profile_names_file_line_and_key(tmp_path: Path) -> None:
    profile = tmp_path / "p.toml"
    profile.write_text('[client]\nname = "x"\n\n[cancel]\nvia = "telepathy"\n')
    env = dict(os.environ)
    env.pop("PYTEST_XDIST_WORKER", None)
    proc = subprocess.run(
        [
            PY,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            "-q",
            f"--acp-client={REFERENCE}",
            f"--acp-client-profile={profile}",
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    output = proc.stdout + proc.stderr
    assert proc.returncode == 4, output
    assert f"{profile}:5: cancel.via" in output


def test_client_that_never_launches_the_agent_is_inconclusive_with_its_stderr(tmp_path: Path) -> None:
    """A client that dies before launching its agent (a missing config file, a missing key) broke
    no MUST: nothing was judged, the run says why, and it does not pass."""
    client = f"{PY} -c \"import sys; sys.stderr.write('cannot find config file\\n'); sys.exit(3)\" {{agent}}"
    run = run_client_suite(client, tmp_path, "--acp-startup-timeout=5")
    assert run.report["verdict"]["conformant"] is False and run.returncode != 0
    assert not run.with_status("FAIL", "WARN"), run.stdout[-3000:]
    clause = next(c for c in run.report["clauses"] if c["id"] == "init.first")
    assert clause["status"] == "INCONCLUSIVE"
    text = " ".join(t.get("evidence", "") + t["message"] for t in clause["tests"])
    assert "did not launch the agent ({agent} in its command line) before its process ended" in text
    assert "it exited with status 3 (client stderr: cannot find config file)" in text


def test_client_that_launches_but_never_initializes_is_inconclusive(tmp_path: Path) -> None:
    script = tmp_path / "lazy_client.py"
    script.write_text(
        "import subprocess, sys, time\n"
        "p = subprocess.Popen(sys.argv[1:], stdin=subprocess.PIPE, stdout=subprocess.PIPE)\n"
        "sys.stderr.write('client: waiting for nothing\\n'); sys.stderr.flush()\n"
        "time.sleep(600)\n"
    )
    run = run_client_suite(f"{PY} {script} {{agent_argv}}", tmp_path, "--acp-startup-timeout=2", "-n", "2")
    assert run.report["verdict"]["conformant"] is False and run.returncode != 0
    clause = next(c for c in run.report["clauses"] if c["id"] == "init.first")
    assert clause["status"] == "INCONCLUSIVE"
    text = " ".join(t.get("evidence", "") + t["message"] for t in clause["tests"])
    assert "sent no initialize" in text and "waiting for nothing" in text
    assert not live_processes_matching(str(script)), "the lazy client was left running"
    assert not processes_under(tmp_path), "its relay agent was left running"


def test_agent_initiated_mode_with_a_scripted_editor(tmp_path: Path) -> None:
    """agent-initiated mode: nothing is started; an "editor" (here: a loop launching the reference client
    with the relay command, as a person would start new threads) connects per test and sends one prompt."""
    import time

    sock = tmp_path / "c.sock"
    report = tmp_path / "report.json"
    env = dict(os.environ)
    env.pop("PYTEST_XDIST_WORKER", None)
    env.pop("PYTEST_ADDOPTS", None)
    suite = subprocess.Popen(
        [
            PY,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            "-q",
            "--acp-client=scripted-editor",
            "--acp-client-mode=agent-initiated",
            f"--acp-client-control=unix:{sock}",
            "--acp-human-timeout=30",
            f"--acp-report-json={report}",
            f"--basetemp={tmp_path / 'bt'}",
        ],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    relay = f"{PY} -m mock_agent.relay --control unix:{sock} --connect-timeout 2"
    deadline = time.monotonic() + 600
    try:
        while suite.poll() is None and time.monotonic() < deadline:
            if not sock.exists():
                time.sleep(0.05)  # polling for the next test's listener, like a person would
                continue
            subprocess.run(
                [
                    PY,
                    "-m",
                    "mock_client",
                    "--agent",
                    relay,
                    "--prompt",
                    "hello",
                    "--quiet",
                    "--caps",
                    "fs,terminal",
                    "--cwd",
                    str(tmp_path),
                ],
                cwd=tmp_path,
                capture_output=True,
                timeout=120,
            )
        out, _ = suite.communicate(timeout=60)
    finally:
        if suite.poll() is None:
            suite.kill()
            suite.wait()
    data = json.loads(report.read_text())
    statuses = {c["id"]: c["status"] for c in data["clauses"]}
    assert data["verdict"]["conformant"], out[-3000:]
    assert data["peer"]["role"] == "client" and data["peer"]["mode"] == "agent-initiated"
    # A person would be needed to cancel or to pick a permission answer: not applicable here.
    assert statuses["perm.cancelled-on-cancel"] == "NOT_APPLICABLE"
    assert statuses["perm.response.valid-option"] == "PASS"
    assert statuses["fs.write.create"] == "PASS" and statuses["term.release.kills"] == "PASS"
    assert not processes_under(tmp_path)
