"""A paged ``session/list`` the suite's agent serves, and what a client may do with its cursors.

Sans-IO: the endpoint asks ``SessionPager.page(cursor)`` for each ``session/list`` request and gets
either the page to answer with or the clause the request breaks.  The cursors are deliberately
awkward to carry (``+``, ``/``, ``=``, a percent-escape, spaces, one at the end, a non-ASCII letter), so a client
that decodes, trims, re-encodes or parses them sends back something we never issued
(``session.list.cursor-opaque``); a client that asks for another page after one without
``nextCursor`` breaks ``session.list.cursor-end``.  A request without a cursor starts a new
listing, which is always allowed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["CURSORS", "SessionPager"]

#: One per page after the first: what session-list.mdx calls an opaque token.
CURSORS = ("c2+/Qm==", "c3 %2F é/+ ")


@dataclass
class SessionPager:
    """Pages of the sessions ``sessions`` (``SessionInfo`` objects), ``page_size`` per page."""

    sessions: list[dict[str, Any]]
    page_size: int = 2
    #: Requests seen: the cursor each one carried (None for a fresh listing).
    seen: list[str | None] = field(default_factory=list)
    #: Set once a page without ``nextCursor`` went out (and reset by a new listing).
    ended: bool = False
    #: Requests that asked for a page after the last one (``session.list.cursor-end``'s breach).
    past_end: int = 0

    @classmethod
    def sample(cls, cwd: str, count: int = 5) -> SessionPager:
        """``count`` sessions in ``cwd`` (absolute), three pages of two."""
        sessions = [
            {
                "sessionId": f"listed-{i}",
                "cwd": cwd,
                "title": f"Earlier session {i}",
                "updatedAt": f"2026-11-0{i}T10:00:00Z",
            }
            for i in range(1, count + 1)
        ]
        return cls(sessions)

    @property
    def pages(self) -> int:
        return max(1, -(-len(self.sessions) // self.page_size))

    def page(self, cursor: Any) -> tuple[dict[str, Any], tuple[str, str] | None]:
        """The result for a request carrying ``cursor``, or the (clause, message) it breaks."""
        self.seen.append(cursor if isinstance(cursor, str) else None)
        if cursor is None:
            # A new listing (a refresh, the user's second look): its pages may be followed again,
            # whatever the last listing did.  The cursors are the same in every listing, so a
            # request carrying one asks for the newest listing's next page.
            index = 0
            self.ended = False
        elif self.ended:
            self.past_end += 1
            return {}, (
                "session.list.cursor-end",
                f"session/list asked for another page (cursor {cursor!r}) after a page without nextCursor",
            )
        elif cursor in CURSORS[: self.pages - 1]:
            index = CURSORS.index(cursor) + 1
        else:
            issued = list(CURSORS[: self.pages - 1])
            return {}, (
                "session.list.cursor-opaque",
                f"session/list sent cursor {cursor!r}, which is none we issued {issued}: a cursor goes back "
                "byte for byte",
            )
        start = index * self.page_size
        result: dict[str, Any] = {"sessions": self.sessions[start : start + self.page_size]}
        if index + 1 < self.pages:
            result["nextCursor"] = CURSORS[index]
        else:
            self.ended = True
        return result, None
