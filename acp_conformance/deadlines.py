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
    method, not one per test.  ``initialize`` is the handshake's business (harness liveness).

    Misses met by a fuzz campaign (``search=True``) are kept apart: which frames a campaign sends
    depends on its search, whose shrinking is bounded in time, so they differ from run to run.
    They spare the campaigns that come later, but a scripted test gives up only on misses of
    scripted tests: otherwise what a search happened to meet would cut later tests short, and
    the same peer would get INCONCLUSIVE (and clauses those tests exercise, NOT_APPLICABLE) in one
    run and PASS in the next (a full proof saw it, ``numeric-ids-for-strings``)."""

    def __init__(self, limit: int = 2) -> None:
        self.limit = limit
        self.misses: dict[str, list[str]] = {}
        self.searched: dict[str, list[str]] = {}

    def missed(self, method: str, where: str, *, search: bool = False) -> None:
        """One more test in which ``method``'s deadline passed (a test counts once, however many
        of its requests of that method went unanswered: it may probe several on purpose)."""
        if method == "initialize":
            return
        seen = (self.searched if search else self.misses).setdefault(method, [])
        if where not in seen:
            seen.append(where)

    def _seen(self, method: str, search: bool) -> list[str]:
        seen = self.misses.get(method, [])
        if search:
            seen = seen + [w for w in self.searched.get(method, []) if w not in seen]
        return seen

    def given_up(self, method: str, *, search: bool = False) -> bool:
        """Whether ``method`` is no longer asked; a search (``search``) counts its own kind's
        misses too."""
        return len(self._seen(method, search)) >= self.limit

    def check(self, method: str, *, search: bool = False) -> None:
        seen = self._seen(method, search)
        if len(seen) >= self.limit:
            raise PeerGaveUp(
                f"{method} not sent: the peer already let its deadline pass {len(seen)} times in this run "
                f"({'; '.join(seen[: self.limit])}), so this test ends here instead of waiting once more"
            )
