"""Checks as plain functions over transcripts (no pytest, no I/O).

``passive_results`` turns a finished transcript into clause results: every
violation the core, the validator or the client endpoint recorded becomes
a FAIL (or WARN for SHOULD-grade findings) of its clause, and each passive
clause that the transcript actually exercised without a violation becomes
a PASS.  Because the input is only a transcript, the same function judges
a live test, a recorded session, or a saved file offline.
"""

from __future__ import annotations

from acp_conformance.checks.passive import PASSIVE_CLAUSES, passive_results

__all__ = ["PASSIVE_CLAUSES", "passive_results"]
