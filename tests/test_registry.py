"""Meta-tests: the registry, the markers and the proofs agree.

* every ``clause`` marker in the bundled suites names a registered clause;
* every registered clause is bound to a check (a marked test or a passive
  check), or carries the reason it is not observable on the wire, or is
  listed in ``tests/coverage_pending.toml`` with the reason it has no check
  yet - and that list has no stale entries;
* every agent clause with a check is proven by a broken agent
  (``tests/peers/broken_agents*.py``), every client clause by a broken client
  (``tests/peers/broken_clients*.py``); the ones without are listed here, exactly;
* every string in the code that looks like a clause id names a registered clause (a typo in
  a literal id would otherwise record results under a clause nobody reads), and so does every
  ``clause:`` / ``clauses:`` of the scenario library.
"""

from __future__ import annotations

import ast
import re
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml

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


@pytest.mark.parametrize("role", ["agent", "client"])
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


def test_client_clause_checks_are_proven_by_broken_clients() -> None:
    from tests.peers.broken_clients import BREAKAGES

    proven = {b.breaks for b in BREAKAGES.values()}
    bound = set(bindings("client"))
    reg = registry()
    unproven = sorted(cid for cid in bound if cid not in proven and reg.get(cid).role in ("client", "both"))
    assert unproven == sorted(KNOWN_UNPROVEN_CLIENT), (
        f"client clauses bound to a check but with no broken client: {unproven}; "
        f"newly unproven: {sorted(set(unproven) - KNOWN_UNPROVEN_CLIENT)}; "
        f"now proven (remove from KNOWN_UNPROVEN_CLIENT): {sorted(KNOWN_UNPROVEN_CLIENT - set(unproven))}"
    )


@pytest.mark.parametrize("role", ["agent", "client"])
def test_every_breakage_expects_the_status_its_clause_level_gives(role: str) -> None:
    """A broken peer's declared status is the one its clause's level gives a breach (FAIL for a MUST,
    WARN for a SHOULD, INFO for a MAY), or PASS for a conforming peer: a level changed in the
    registry must change the declarations with it, here, not in a proof run minutes later."""
    from acp_conformance.results import breach_status

    if role == "agent":
        from tests.peers.broken_agents import BREAKAGES as breakages
    else:
        from tests.peers.broken_clients import BREAKAGES as breakages  # type: ignore[assignment]
    reg = registry()
    wrong = {
        name: (b.breaks, reg.get(b.breaks).level, b.status, breach_status(reg.get(b.breaks)).value)
        for name, b in breakages.items()
        if b.status != "PASS" and b.status != breach_status(reg.get(b.breaks)).value
    }
    assert not wrong, f"(clause, level, declared, what the level gives): {wrong}"


#: Client clauses with a check but no broken client yet (each is a task).
KNOWN_UNPROVEN_CLIENT: set[str] = {
    # judged by a person in the manual mode only (an automated broken client cannot show them)
    "cancel.client-marks-tools",
    "content.markdown",
    # MAYs the check can only note as done
    "cancel.client-may",
    "transport.stdio.subprocess",
    # checks that can fail, with no broken client yet
    "cap.custom-meta",
    "ext.meta.no-assumptions",
    "ext.request.unknown",
    # the same sentence as content.*.gated, which judge each gated block (one defect, one FAIL)
    "prompt.content-gated",
    # the client half shows only in an answer to a request the agent MUST NOT send: robustness,
    # elicit.mode.unadvertised-error's WARN (the agent half is proven by the broken agents)
    "elicit.capability.explicit",
}

#: Dotted lowercase strings that look like clause ids and are not: capability paths and JSON paths.
NOT_CLAUSE_IDS = {"auth.logout", "auth.terminal", "error.code", "error.message", "jsonrpc.id"}
_ID_SHAPE = re.compile(r"^[a-z][a-z0-9]*(-[a-z0-9]+)*(\.[a-z0-9]+(-[a-z0-9]+)*)+$")
_FILE_NAME = re.compile(r"\.(json|jsonl|toml|ya?ml|md|mdx|py|txt|js|sh|sock|html|svg|log)$")


def _ids_in(source: str) -> list[tuple[str, int]]:
    """The string constants of ``source`` shaped like clause ids of a registered area."""
    areas = {c.id.split(".")[0] for c in registry()}
    return [
        (node.value, node.lineno)
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and _ID_SHAPE.match(node.value)
        and node.value.split(".")[0] in areas
        and not _FILE_NAME.search(node.value)
    ]


def _literal_ids() -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for top in ("acp_conformance", "mock_agent", "mock_client", "tests"):
        for path in sorted((ROOT / top).rglob("*.py")):
            for text, line in _ids_in(path.read_text("utf-8")):
                found.setdefault(text, []).append(f"{path.relative_to(ROOT)}:{line}")
    return found


def test_the_literal_scan_sees_a_misspelt_id() -> None:
    typo = "jsonrpc." + "parse-eror"  # built here, so the scan of this file does not see it
    source = f'acp.check("{typo}", ok, "x", "y")\nopen("schema.json")\ncaps = "fs.readTextFile"\n'
    assert _ids_in(source) == [(typo, 1)]


def test_every_clause_id_literal_is_registered() -> None:
    reg = registry()
    literals = _literal_ids()
    unknown = {cid: where[:3] for cid, where in literals.items() if cid not in reg and cid not in NOT_CLAUSE_IDS}
    assert not unknown, f"strings shaped like clause ids that name no registered clause: {unknown}"
    assert len([cid for cid in literals if cid in reg]) > 200  # the scan sees the code's ids


def _scenario_clauses(node: Any, where: str, out: list[tuple[str, str]]) -> None:
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "clause" and isinstance(value, str):
                out.append((value, where))
            elif key == "clauses" and isinstance(value, list):
                out.extend((v, where) for v in value if isinstance(v, str))
            else:
                _scenario_clauses(value, where, out)
    elif isinstance(node, list):
        for item in node:
            _scenario_clauses(item, where, out)


def test_every_scenario_clause_is_registered() -> None:
    reg = registry()
    named: list[tuple[str, str]] = []
    library = ROOT / "acp_conformance" / "scenario" / "library"
    for path in sorted(library.rglob("*.yaml")):
        _scenario_clauses(yaml.safe_load(path.read_text("utf-8")), str(path.relative_to(ROOT)), named)
    assert len(named) > 30
    unknown = sorted({(cid, where) for cid, where in named if cid not in reg})
    assert not unknown, f"scenario files name unregistered clauses: {unknown}"
