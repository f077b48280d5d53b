"""How many deadlines a peer may let pass before the suite stops asking (``DeadlineMemory``).

A policy of the run, not of one connection: its own module, kept apart from the I/O class that
consults it; ``acp_conformance.peer`` re-exports it.
"""

from __future__ import annotations

from acp_conformance.errors import PeerGaveUp

__all__ = ["DeadlineMemory"]


class DeadlineMemory:
    """Which methods the peer under test let the deadline pass for, across the tests of a run.

    Once a method's deadline has passed in ``limit`` different tests, later requests
    of that method are not sent at all: ``PeerGaveUp`` ends the test that needs it at once
    (INCONCLUSIVE, naming where it was missed), so a hanging peer costs two deadlines per
    method, not one per test.  ``initialize`` is the handshake's business (harness liveness)."""

    def __init__(self, limit: int = 2) -> None:
        self.limit = limit
        self.misses: dict[str, list[str]] = {}

    def missed(self, method: str, where: str) -> None:
        """One more test in which ``method``'s deadline passed (a test counts once, however many
        of its requests of that method went unanswered: it may probe several on purpose)."""
        if method == "initialize":
            return
        seen = self.misses.setdefault(method, [])
        if where not in seen:
            seen.append(where)

    def given_up(self, method: str) -> bool:
        return len(self.misses.get(method, [])) >= self.limit

    def check(self, method: str) -> None:
        seen = self.misses.get(method, [])
        if len(seen) >= self.limit:
            raise PeerGaveUp(
                f"{method} not sent: the peer already let its deadline pass {len(seen)} times in this run "
                f"({'; '.join(seen[: self.limit])}), so this test ends here instead of waiting once more"
            )
