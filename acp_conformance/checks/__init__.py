"""Checks as plain functions over transcripts (no pytest, no I/O).

``passive_results`` turns a finished transcript into clause results: every
violation the core, the validator or the client endpoint recorded becomes
a FAIL (or WARN for SHOULD-grade findings) of its clause, and each passive
clause that the transcript actually exercised without a violation becomes
a PASS.  Because the input is only a transcript, the same function judges
a live test, a recorded session, or a saved file offline.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from acp_conformance.checks.passive import PASSIVE_CLAUSES, passive_results

__all__ = ["PASSIVE_CLAUSES", "passive_results"]


def __getattr__(name: str) -> Any:
    """The passive checks, imported when first asked for: the mock agent imports
    ``checks.gating`` only, and the passive checks would bring the clause catalog and the wire
    rules into its start-up (~10 ms)."""
    if name in __all__:
        from acp_conformance.checks import passive

        return getattr(passive, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
