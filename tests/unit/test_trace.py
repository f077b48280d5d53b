"""``clauses --trace``: the three answers are read from the code, so they cannot drift."""

from __future__ import annotations

import pytest

from acp_conformance.__main__ import main
from acp_conformance.plugin.bindings import bindings
from acp_conformance.plugin.trace import all_proofs, format_trace, trace
from tests.peers.broken_agents import BREAKAGES as AGENT_BREAKAGES
from tests.peers.broken_clients import BREAKAGES as CLIENT_BREAKAGES


def test_trace_finds_the_check_the_tests_and_the_proof() -> None:
    t = trace("cancel.stop-reason")
    assert any(where.startswith("acp_conformance/suite/agent/test_cancellation.py:") for where in t.code)
    assert t.tests["agent"] == bindings("agent")["cancel.stop-reason"]
    proving = {name for name, b in AGENT_BREAKAGES.items() if b.breaks == "cancel.stop-reason"}
    assert proving and {name for _, name, _, _ in t.proofs} == proving


def test_every_breakage_of_both_roles_is_listed_with_its_status() -> None:
    proofs = all_proofs()
    assert proofs is not None
    got = {(role, name): (breaks, status) for role, name, breaks, status, _ in proofs}
    want = {("agent", n): (b.breaks, b.status) for n, b in AGENT_BREAKAGES.items()}
    want |= {("client", n): (b.breaks, b.status) for n, b in CLIENT_BREAKAGES.items()}
    assert got == want


def test_trace_reports_passive_checks_and_statuses() -> None:
    t = trace("transport.stdio.stdout-clean")
    assert "agent" in t.passive
    text = format_trace(t)
    assert "the passive checks, on every frame" in text
    assert "'banner' -> FAIL" in text


def test_unknown_clause_is_a_clear_error(capsys: pytest.CaptureFixture[str]) -> None:
    typo = "cancel.stop-" + "reasn"  # split: the registry test rejects unregistered id literals
    assert main(["clauses", "--trace", typo]) == 2
    err = capsys.readouterr().err
    assert f"unknown clause id {typo!r}" in err and "cancel.stop-reason" in err
