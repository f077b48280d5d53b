"""Rule 1 (h11's): one decision, one place.  These tests keep it that way.

* Whether two JSON-RPC ids are the same is ``core/ids.py``'s decision (``same_id`` / ``id_key``):
  no other module compares an ``id`` / ``requestId`` with ``==``;
* what a clause's level makes of a breach (FAIL / WARN / INFO) is ``results.py``'s decision, on
  the levels ``clauses`` defines: no other module compares a ``level`` with anything;
* the fuzz budget's variable names are the campaign's (``fuzz/_budget.py``); the plugin's copy,
  kept so ``pytest --help`` does not import Hypothesis, must name the same variables.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SOURCES = sorted(p for top in ("acp_conformance", "mock_agent", "mock_client") for p in (ROOT / top).rglob("*.py"))

#: Keys that hold a JSON-RPC request id (configuration option ids and the like are other ids).
ID_KEYS = ("id", "requestId")
ID_HOME = {"acp_conformance/core/ids.py"}
LEVEL_HOMES = {"acp_conformance/clauses/__init__.py", "acp_conformance/results.py"}


def _is_request_id(node: ast.expr) -> bool:
    if isinstance(node, ast.Attribute):
        return node.attr in ("id", "request_id")
    if isinstance(node, ast.Subscript):
        return isinstance(node.slice, ast.Constant) and node.slice.value in ID_KEYS
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get":
        first = node.args[0] if node.args else None
        return isinstance(first, ast.Constant) and first.value in ID_KEYS
    return False


#: Comparisons of ids that are no request ids: a session config option's own ``id``.
NOT_REQUEST_IDS = {
    ("acp_conformance/endpoints/agent.py", "opt.get('id') == p.get('configId')"),
    ("acp_conformance/suite/agent/test_modes_config.py", "o.get('id') == oid"),
}


def id_comparisons(source: str) -> list[str]:
    out = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Compare) or not any(isinstance(o, (ast.Eq, ast.NotEq)) for o in node.ops):
            continue
        sides = [node.left, *node.comparators]
        if any(isinstance(s, ast.Constant) and s.value is None for s in sides):
            continue  # "has no id" is no comparison of two ids
        if any(_is_request_id(s) for s in sides):
            out.append(f"{node.lineno}: {ast.unparse(node)}")
    return out


def level_comparisons(source: str) -> list[str]:
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            if any(
                (isinstance(s, ast.Attribute) and s.attr == "level") or (isinstance(s, ast.Name) and s.id == "level")
                for s in sides
            ):
                out.append(f"{node.lineno}: {ast.unparse(node)}")
    return out


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_only_core_ids_compares_request_ids(path: Path) -> None:
    rel = str(path.relative_to(ROOT))
    if rel in ID_HOME:
        return
    found = [f for f in id_comparisons(path.read_text("utf-8")) if (rel, f.split(": ", 1)[1]) not in NOT_REQUEST_IDS]
    assert not found, f"{rel} compares request ids itself (use core.ids.same_id / id_key): {found}"


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_only_results_turns_a_level_into_a_status(path: Path) -> None:
    rel = str(path.relative_to(ROOT))
    if rel in LEVEL_HOMES:
        return
    found = level_comparisons(path.read_text("utf-8"))
    assert not found, f"{rel} decides by a clause's level itself (use results.breach_status / adjust): {found}"


def test_the_scans_see_what_they_forbid() -> None:
    assert id_comparisons("ok = resp.id == 0\n") and id_comparisons('ok = msg["id"] != rid\n')
    assert not id_comparisons("ok = resp.id is None or same_id(resp.id, rid)\n")
    assert level_comparisons('warn = clause.level == "SHOULD"\n')
    assert not level_comparisons("status = breach_status(clause)\n")


def test_the_plugin_names_the_fuzz_variables_the_campaign_reads() -> None:
    from acp_conformance.fuzz import _budget
    from acp_conformance.plugin.options import FUZZ_ENV

    assert FUZZ_ENV == {
        "examples": _budget.ENV_EXAMPLES,
        "seconds": _budget.ENV_SECONDS,
        "shrink_seconds": _budget.ENV_SHRINK_SECONDS,
        "patience": _budget.ENV_PATIENCE,
        "seed": _budget.ENV_SEED,
    }
