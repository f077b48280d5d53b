"""The paged session/list the suite's agent serves: cursors must come back byte for byte, and no
page is asked for after the last one."""

from __future__ import annotations

from acp_conformance.endpoints.listing import CURSORS, SessionPager


def test_pages_follow_the_cursors_and_end_without_one() -> None:
    pager = SessionPager.sample("/work/project")
    first, problem = pager.page(None)
    assert problem is None and [s["sessionId"] for s in first["sessions"]] == ["listed-1", "listed-2"]
    second, _ = pager.page(first["nextCursor"])
    third, _ = pager.page(second["nextCursor"])
    assert [s["sessionId"] for s in third["sessions"]] == ["listed-5"] and "nextCursor" not in third
    assert pager.ended and pager.seen == [None, CURSORS[0], CURSORS[1]]
    # Another page after the end is not allowed.
    assert pager.page(CURSORS[1])[1] == (
        "session.list.cursor-end",
        f"session/list asked for another page (cursor {CURSORS[1]!r}) after a page without nextCursor",
    )
    # A new listing (no cursor) always is, and its pages may be followed to its end again: a client
    # that lists twice (a refresh) breaks nothing (it was flagged as paging past the end).
    again, problem = pager.page(None)
    assert problem is None and not pager.ended
    assert pager.page(again["nextCursor"])[1] is None and pager.page(CURSORS[1])[1] is None and pager.ended
    assert pager.page(CURSORS[1])[1] is not None and pager.past_end == 2


def test_a_cursor_changed_in_any_way_is_one_we_never_issued() -> None:
    for edited in (CURSORS[0].replace("+", " "), CURSORS[1].replace("%2F", "/"), CURSORS[1].strip(), "c3"):
        pager = SessionPager.sample("/work/project")
        pager.page(None)
        result, problem = pager.page(edited)
        assert result == {} and problem is not None and problem[0] == "session.list.cursor-opaque", edited


def test_the_cursors_hold_what_careless_code_changes() -> None:
    text = "".join(CURSORS)
    assert all(c in text for c in "+/= é") and "%2F" in text
