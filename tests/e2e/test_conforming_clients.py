"""A conforming client with every quirk the spec allows gets no finding from the client suite.

String request ids, ``_meta`` on everything it sends, frames written in pieces, answers to the
agent 0.15 s late, an extension notification before every prompt
(``tests/peers/conforming_clients.py all-unusual``): the suite must judge what a client does, not
what the reference client happens to do.  One that refuses every command it is asked to run
(``refuses-commands``): the terminal tests stop INCONCLUSIVE, saying why, and flag nothing.  One
that sends no ``clientCapabilities`` at all (``no-capabilities-object``): it advertises nothing, and
nothing is flagged.  One that exits on an elicitation's first completion (``ends-on-a-completion``):
the test of ignoring repeated completions is INCONCLUSIVE, naming its unmet precondition.
"""

from __future__ import annotations

import sys
from pathlib import Path

from tests.e2e._suite_run import ROOT, SuiteRun, run_suite

PY = sys.executable
CONFORMING = ROOT / "tests" / "peers" / "conforming_clients.py"
CAPS = "--caps fs,terminal,elicitation-form,auth-terminal"
ARGS = f"{{permission}} {CAPS} --add-dir /tmp --agent {{agent}} --prompt {{prompt}} --quiet"


def run_client(name: str, tmp_path: Path, *extra: str, caps: str = CAPS, timeout: float = 240) -> SuiteRun:
    """The client suite (mock-client profile) against ``conforming_clients.py NAME`` with ``caps``."""
    return run_suite(
        f"{PY} {CONFORMING} {name} {ARGS.replace(CAPS, caps)}",
        tmp_path,
        "--acp-client-profile=mock-client",
        f"--basetemp={tmp_path / 'bt'}",
        *extra,
        role="client",
        timeout=timeout,
    )


def assert_no_finding(run: SuiteRun) -> None:
    findings = run.with_status("FAIL", "WARN", "INFO")
    assert not findings, {c: run.messages(c) for c in findings}


def test_a_client_with_every_quirk_the_spec_allows_gets_no_finding(tmp_path: Path) -> None:
    run = run_client("all-unusual", tmp_path, "-n", "2", timeout=600)
    assert_no_finding(run)
    assert "ACP verdict: CONFORMANT" in run.stdout, run.stdout[-2000:]
    # Judged on the quirky client, not left unreached: its permission answers, ids and _meta.
    for clause in ("perm.response.shape", "jsonrpc.id-types", "ext.meta.everywhere", "session.list.cursor-end"):
        assert run.statuses()[clause] == "PASS", clause


def test_a_client_without_a_capabilities_object_advertises_nothing_and_gets_no_finding(tmp_path: Path) -> None:
    """``clientCapabilities`` is optional in the schema and omitted capabilities are unsupported
    (initialization.mdx): a client that leaves the object out advertises nothing, so no gated
    method is judged on it (NOT_APPLICABLE), and nothing is flagged for the omission."""
    # Serving elicitation it did not advertise would be elicit.mode.unadvertised-error's WARN.
    run = run_client("no-capabilities-object", tmp_path, "-n", "2", caps="--caps fs,terminal")
    assert_no_finding(run)
    assert "ACP verdict: CONFORMANT" in run.stdout, run.stdout[-2000:]
    assert run.statuses()["init.request.capabilities"] == "PASS"
    for clause in ("fs.read.response", "term.wait", "elicit.response.shape"):
        assert run.statuses()[clause] == "NOT_APPLICABLE", clause


def test_a_client_that_refuses_every_command_is_inconclusive_on_terminals_not_flagged(tmp_path: Path) -> None:
    """A client may refuse to run a command (its policy, its sandbox): an error to ``terminal/create``
    is an answer, and the terminal clauses, which need a command to run, are INCONCLUSIVE, saying so."""
    run = run_client("refuses-commands", tmp_path, "--acp-clause=term.*")
    assert_no_finding(run)
    for clause in ("term.wait", "term.create.immediate", "term.kill.keeps-id", "term.release.invalidates"):
        assert run.statuses()[clause] == "INCONCLUSIVE", clause
        assert all("running commands is not allowed" in m for m in run.messages(clause, "INCONCLUSIVE")), clause


def test_a_client_that_ends_on_its_first_completion_is_inconclusive_on_ignoring_repeats(tmp_path: Path) -> None:
    """``elicit.complete.ignore-unknown`` is judged on a second completion of a URL elicitation; a
    client that exits on the first (a known id, which the clause says nothing about) leaves the
    repeat unjudgeable: INCONCLUSIVE, naming why, never the MUST."""
    url = CAPS + ",elicitation-url"
    run = run_client("ends-on-a-completion", tmp_path, "-k", "test_a_completion_for_an_unknown_id_is_ignored", caps=url)
    assert run.statuses()["elicit.complete.ignore-unknown"] == "INCONCLUSIVE", run.stdout[-3000:]
    (message,) = run.messages("elicit.complete.ignore-unknown", "INCONCLUSIVE")
    assert "after the completion of its own URL elicitation the client no longer answered as before" in message
    assert "closed its output" in message, message
