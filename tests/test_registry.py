"""Meta-tests: the registry, the markers and the proofs agree.

* every ``clause`` marker in the bundled suites names a registered clause;
* every registered clause is bound to a check (a marked test or a passive
  check), or carries the reason it is not observable on the wire, or is
  listed in ``tests/coverage_pending.toml`` with the reason it has no check
  yet - and that list has no stale entries;
* every agent clause with a check is proven by a broken agent
  (``tests/peers/broken_agents*.py``); the ones without are listed here.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from acp_conformance.clauses import LEVELS, registry
from acp_conformance.plugin.bindings import bindings, passive_clauses

ROOT = Path(__file__).resolve().parent.parent
PENDING_FILE = ROOT / "tests" / "coverage_pending.toml"


def pending() -> dict[str, str]:
    data = tomllib.loads(PENDING_FILE.read_text("utf-8"))
    return {cid: reason for reason_block in data["pending"] for cid in reason_block["clauses"]
            for reason in [reason_block["reason"]]}


def test_registry_is_well_formed() -> None:
    reg = registry()
    assert len(reg) > 250
    for c in reg:
        assert c.level in LEVELS and c.role in ("agent", "client", "both"), c.id
        assert c.text and c.reference, c.id


@pytest.mark.parametrize("role", ["agent"])
def test_every_marker_names_a_registered_clause(role: str) -> None:
    reg = registry()
    unknown = {cid: tests for cid, tests in bindings(role).items() if cid not in reg}
    assert not unknown, f"markers name unknown clause ids: {unknown}"


def test_every_clause_is_checked_untestable_or_pending() -> None:
    reg = registry()
    checked = set(bindings("agent")) | passive_clauses("agent")
    try:
        checked |= set(bindings("client")) | passive_clauses("client")
    except ModuleNotFoundError:
        pass
    waiting = pending()
    missing = [c.id for c in reg if c.id not in checked and not c.untestable and c.id not in waiting]
    stale = [cid for cid in waiting if cid in checked or cid not in reg or reg.get(cid).untestable]
    assert not missing, f"clauses with no check, no untestable reason and not pending: {missing}"
    assert not stale, f"remove from {PENDING_FILE.name} (now checked, unknown or untestable): {stale}"


def test_agent_clause_checks_are_proven_by_broken_agents() -> None:
    from tests.peers.broken_agents import BREAKAGES

    proven = {b.breaks for b in BREAKAGES.values()}
    bound = set(bindings("agent"))
    reg = registry()
    unproven = sorted(cid for cid in bound if cid not in proven and reg.get(cid).role in ("agent", "both"))
    # The list is the honest state of the proofs; shrinking it is progress, growing it is a regression.
    assert unproven == sorted(KNOWN_UNPROVEN), (
        f"agent clauses bound to a check but with no broken agent: {unproven}; "
        f"newly unproven: {sorted(set(unproven) - KNOWN_UNPROVEN)}; "
        f"now proven (remove from KNOWN_UNPROVEN): {sorted(KNOWN_UNPROVEN - set(unproven))}"
    )


#: Agent clauses with a check but no broken agent yet (each is a task).  The auth checks are
#: proven against ``python -m mock_agent --require-auth`` broken one way at a time.
KNOWN_UNPROVEN: set[str] = set()
