"""``python -m acp_conformance clauses --trace ID``: where one clause is decided.

A maintainer changing a clause, or an implementer disputing a verdict, needs three answers: which
code judges it, which suite tests report it, and which broken peer proves that the check can
fail. All three are read, never recorded by hand, so the answer cannot drift from the code:

* the code: every literal occurrence of the id in the package's Python sources and in the
  scenario library (ids are written out literally, one name per clause, which the registry test
  enforces);
* the tests: the suite's ``clause`` markers (:mod:`acp_conformance.plugin.bindings`), plus the
  passive checks run on every frame;
* the proofs: the ``BREAKAGES`` tables of ``tests/peers/`` (they exist only in a source
  checkout; an installed wheel has none and says so).
"""

from __future__ import annotations

import importlib
import inspect
import re
import sys
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from acp_conformance.clauses import registry
from acp_conformance.plugin.bindings import bindings, passive_clauses

__all__ = ["Trace", "format_trace", "trace"]

_PACKAGE = Path(__file__).resolve().parent.parent
_CHECKOUT = _PACKAGE.parent


@dataclass
class Trace:
    """Everything :func:`trace` found for one clause."""

    clause_id: str
    #: ``path:line`` (relative to the package's parent) where the id is written, code and scenarios.
    code: list[str] = field(default_factory=list)
    #: role -> ``module::test`` names bound to the clause by marker.
    tests: dict[str, list[str]] = field(default_factory=dict)
    #: Roles whose passive checks judge the clause on every frame.
    passive: list[str] = field(default_factory=list)
    #: ``(role, breakage name, expected status, file)`` of each broken peer proving the check.
    proofs: list[tuple[str, str, str, str]] = field(default_factory=list)
    #: False outside a source checkout: the proofs could not be looked for.
    proofs_available: bool = True


def trace(clause_id: str) -> Trace:
    """Locate ``clause_id`` in the code, the suite and the broken peers."""
    clause = registry().get(clause_id)  # a ConfigurationError naming close ids for a typo
    out = Trace(clause.id)
    literal = re.compile(r"""["']""" + re.escape(clause.id) + r"""["']|\b""" + re.escape(clause.id) + r"\b")
    sources = sorted(_PACKAGE.rglob("*.py")) + sorted((_PACKAGE / "scenario" / "library").rglob("*.yaml"))
    for path in sources:
        if "__pycache__" in path.parts:
            continue
        for n, line in enumerate(path.read_text("utf-8").splitlines(), 1):
            if literal.search(line):
                out.code.append(f"{path.relative_to(_CHECKOUT).as_posix()}:{n}")
    for role in ("agent", "client"):
        if not clause.applies_to(role):
            continue
        bound = bindings(role).get(clause.id, [])
        if bound:
            out.tests[role] = list(bound)
        if clause.id in passive_clauses(role):
            out.passive.append(role)
    proofs = all_proofs()
    if proofs is None:
        out.proofs_available = False
        return out
    out.proofs = [
        (role, name, status, where) for role, name, breaks, status, where in proofs if breaks in (out.clause_id,)
    ]
    return out


@cache
def all_proofs() -> list[tuple[str, str, str, str, str]] | None:
    """``(role, name, clause, status, file)`` of every broken peer, or None outside a checkout.

    Imported rather than parsed: entries are built through helpers and positional statuses, and
    only the import sees what the proofs themselves run."""
    if not (_CHECKOUT / "tests" / "peers" / "__init__.py").is_file():
        return None
    if str(_CHECKOUT) not in sys.path:
        sys.path.insert(0, str(_CHECKOUT))
    out: list[tuple[str, str, str, str, str]] = []
    for role, module in (("agent", "tests.peers.broken_agents"), ("client", "tests.peers.broken_clients")):
        try:
            breakages = importlib.import_module(module).BREAKAGES
        except ImportError:
            return None
        for name, b in breakages.items():
            source = Path(inspect.getsourcefile(b.peer) or "?").resolve()
            where = source.relative_to(_CHECKOUT).as_posix() if source.is_relative_to(_CHECKOUT) else source.name
            out.append((role, name, b.breaks, b.status, where))
    return out


def format_trace(t: Trace) -> str:
    clause = registry().get(t.clause_id)
    lines = [f"{clause.id}  [{clause.role}, {clause.level}]", f"  {clause.text}"]
    if clause.reference:
        lines.append(f"  spec: {clause.reference}")
    if clause.untestable:
        lines.append("  untestable on the wire: no check is expected")
    lines.append("checked in:")
    lines += [f"  {where}" for where in t.code] or ["  (nowhere: no code names this clause)"]
    lines.append("reported by:")
    for role in t.passive:
        lines.append(f"  {role} suite: the passive checks, on every frame of every test")
    for role, names in t.tests.items():
        lines += [f"  {role} suite: {name}" for name in names]
    if not t.passive and not t.tests:
        lines.append("  (no test: a coverage gap, listed as such in every report)")
    lines.append("proven by (a broken peer the suite must flag):")
    if not t.proofs_available:
        lines.append("  (the broken peers live in the source checkout's tests/peers/: not installed)")
    elif not t.proofs:
        lines.append("  (no broken peer breaks this clause)")
    for role, name, status, where in t.proofs:
        lines.append(f"  {role} {name!r} -> {status}  ({where})")
    return "\n".join(lines)
