"""Which clauses the bundled suite checks (read from its markers, statically).

Computed by importing the suite modules and reading their ``acp_clause``
marks, so the answer does not depend on test selection or on which xdist
worker ran what: a clause deselected with ``-k`` is NOT_TESTED, while a
clause this suite version has no check for is a coverage gap.

Importing every suite module costs most of a pytest start (Hypothesis, the fuzz strategies,
pydantic's scenario models), and every run needs the answer: the controller for the coverage
gaps, a ``--acp-clause`` run to know which modules it can skip.  So the answer is cached on disk
(``acp_conformance._cache``: keyed by every source file, a stale answer cannot be read).
"""

from __future__ import annotations

import importlib
import pkgutil
from functools import cache
from pathlib import Path
from typing import Any

from acp_conformance._cache import cached
from acp_conformance.checks.passive import CLIENT_TRAFFIC_CLAUSES, PASSIVE_CLAUSES
from acp_conformance.plugin.markers import is_clause_mark

__all__ = ["bindings", "checked_clauses", "module_clauses", "passive_clauses", "suite_dir"]


def suite_dir(role: str) -> Path:
    return Path(__file__).resolve().parent.parent / "suite" / role


@cache
def bindings(role: str) -> dict[str, list[str]]:
    """clause id -> test function names bound to it, for the ``role`` suite."""
    return cached("bindings", role, lambda: _imported_bindings(role), load=_checked_bindings)


def _checked_bindings(data: Any) -> dict[str, list[str]]:
    if not isinstance(data, dict):
        raise ValueError("not a table")
    return {str(k): [str(t) for t in v] for k, v in data.items()}


def module_clauses(role: str) -> dict[str, set[str]]:
    """suite module file name (``test_fuzz.py``) -> the clauses its tests are bound to."""
    out: dict[str, set[str]] = {}
    for cid, tests in bindings(role).items():
        for test in tests:
            out.setdefault(test.split("::", 1)[0] + ".py", set()).add(cid)
    return out


def _imported_bindings(role: str) -> dict[str, list[str]]:
    package = f"acp_conformance.suite.{role}"
    pkg = importlib.import_module(package)
    out: dict[str, list[str]] = {}
    for info in pkgutil.iter_modules(pkg.__path__):
        if not info.name.startswith("test_"):
            continue
        module = importlib.import_module(f"{package}.{info.name}")
        for name, obj in vars(module).items():
            if not name.startswith("test_") or not callable(obj):
                continue
            for cid in _marked_clauses(obj):
                names = out.setdefault(cid, [])
                if f"{info.name}::{name}" not in names:
                    names.append(f"{info.name}::{name}")
    return out


def _marked_clauses(test: object) -> list[str]:
    """The clause ids of a test's own marks and of its ``pytest.param(..., marks=...)`` values.

    A parametrized test (one scenario file per param, say) binds each param
    to the clauses that param checks; those count as checked too.
    """
    out: list[str] = []
    for mark in getattr(test, "pytestmark", []):
        if is_clause_mark(mark.name):
            out.extend(mark.args)
        elif mark.name == "parametrize" and len(mark.args) > 1:
            for value in mark.args[1]:
                for sub in getattr(value, "marks", ()):
                    if is_clause_mark(getattr(sub, "name", None)):
                        out.extend(sub.args)
    return out


def passive_clauses(role: str) -> set[str]:
    """The clauses judged wherever their traffic occurs, not by one test: a test bound to one that
    saw none of that traffic leaves it not exercised, never passed."""
    traffic = CLIENT_TRAFFIC_CLAUSES if role == "client" else frozenset()
    return {cid for cid, (roles, _) in PASSIVE_CLAUSES.items() if role in roles} | traffic


def checked_clauses(role: str) -> set[str]:
    return set(bindings(role)) | passive_clauses(role)
