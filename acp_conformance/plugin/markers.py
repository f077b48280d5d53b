"""The clause marker: ``@pytest.mark.acp_clause("cancel.stop-reason", ...)`` binds a test to clauses.

Named ``acp_clause`` so that installing the suite never claims a marker name another project
uses for its own purposes; ``clause`` (its old name) is still read, but only on tests of the
bundled suite. Every place that reads a test's clause ids asks :func:`marked_clauses`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["ALIAS", "MARKER", "is_clause_mark", "marked_clauses"]

MARKER = "acp_clause"
#: The old name, honoured inside the bundled suite only.
ALIAS = "clause"
_SUITE = Path(__file__).resolve().parent.parent / "suite"


def is_clause_mark(name: str | None) -> bool:
    """For the suite's own modules, read statically (``plugin.bindings``): both names count."""
    return name in (MARKER, ALIAS)


def marked_clauses(node: Any) -> list[str]:
    """The clause ids a pytest item (or node) is marked with."""
    names = (MARKER, ALIAS) if _in_suite(node) else (MARKER,)
    return [cid for name in names for mark in node.iter_markers(name) for cid in mark.args]


def _in_suite(node: Any) -> bool:
    path = getattr(node, "path", None)
    return isinstance(path, Path) and path.resolve().is_relative_to(_SUITE)
