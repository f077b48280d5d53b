"""checks.turns: the turn-level checks over an inbound event sequence, on hand-built events."""

from __future__ import annotations

from typing import Any

import pytest

from acp_conformance.checks import turns
from acp_conformance.core.events import Event, Notification, Request, Response, Violation

SID = "sess-1"
_ids = iter(range(1000, 100000))


def update(kind: str, sid: str = SID, **fields: Any) -> Notification:
    return Notification("session/update", {"sessionId": sid, "update": {"sessionUpdate": kind, **fields}})


def call(tid: str, status: str | None = "pending", **fields: Any) -> Notification:
    extra = {"status": status} if status is not None else {}
    return update("tool_call", toolCallId=tid, title=f"tool {tid}", **extra, **fields)


def upd(tid: str, status: str | None = None, **fields: Any) -> Notification:
    extra = {"status": status} if status is not None else {}
    return update("tool_call_update", toolCallId=tid, **extra, **fields)


def ask(tid: str, sid: str = SID, options: list[dict[str, Any]] | None = None, **tool: Any) -> Request:
    opts = options or [
        {"optionId": "yes", "name": "Yes", "kind": "allow_once"},
        {"optionId": "no", "name": "No", "kind": "reject_once"},
    ]
    params = {"sessionId": sid, "toolCall": {"toolCallId": tid, **tool}, "options": opts}
    return Request(next(_ids), "session/request_permission", params)


def req(method: str, **params: Any) -> Request:
    return Request(next(_ids), method, {"sessionId": SID, **params})


def mentions(events: list[Event]) -> list[turns.ToolMention]:
    return turns.tool_mentions(events, SID)


# ------------------------------------------------------------------ basics
@pytest.mark.parametrize(
    ("path", "absolute"),
    [
        ("/home/u/p/a.py", True),
        ("/", True),
        ("C:\\Users\\u\\a.py", True),
        ("C:/Users/u/a.py", True),
        ("\\\\server\\share\\a.py", True),
        ("a.py", False),
        ("./a.py", False),
        ("../a.py", False),
        ("C:a.py", False),
        ("file:///home/u/a.py", False),
        ("", False),
        (None, False),
        (42, False),
    ],
)
def test_is_absolute_path(path: Any, absolute: bool) -> None:
    assert turns.is_absolute_path(path) is absolute


def test_updates_filter_session_and_window() -> None:
    events: list[Event] = [
        update("agent_message_chunk", content={"type": "text", "text": "a"}),
        update("agent_message_chunk", sid="other", content={"type": "text", "text": "b"}),
        Notification("session/update", {"sessionId": SID, "update": "not an object"}),
        Notification("_vendor/log", {"sessionId": SID}),
        update("plan", entries=[]),
    ]
    assert [p for p, _ in turns.updates(events, SID)] == [0, 4]
    assert [p for p, _ in turns.updates(events, SID, start=1)] == [4]
    assert [p for p, _ in turns.updates(events, SID, end=4)] == [0]


def test_late_turn_output_ignores_kinds_that_may_come_any_time() -> None:
    events: list[Event] = [
        update("agent_message_chunk", content={"type": "text", "text": "hi"}),
        Response(1, {"stopReason": "end_turn"}, method="session/prompt"),
        update("available_commands_update", availableCommands=[]),
        update("usage_update", used=1, size=2),
        update("session_info_update", title="t"),
        update("agent_thought_chunk", content={"type": "text", "text": "late"}),
        update("tool_call_update", sid="other", toolCallId="x"),
    ]
    late = turns.late_turn_output(events, SID, after=1)
    assert [u["sessionUpdate"] for u in late] == ["agent_thought_chunk"]
    assert turns.late_turn_output(events, SID, after=1, end=5) == []


def test_responses_to_matches_id_type_and_method() -> None:
    events: list[Event] = [
        Response(2, {}, method="session/new"),
        Response(2, {"stopReason": "end_turn"}, method="session/prompt"),
        Response("2", {"stopReason": "end_turn"}, method="session/prompt"),
        Response(2, {"stopReason": "end_turn"}, method="session/prompt", duplicate=True),
    ]
    assert [p for p, _ in turns.responses_to(events, 2, "session/prompt")] == [1, 3]


def test_position_of_is_by_identity() -> None:
    a, b = update("plan", entries=[]), update("plan", entries=[])
    assert a == b
    assert turns.position_of([a, b], b) == 1
    assert turns.position_of([a], b) == -1


def test_tool_activity() -> None:
    assert not turns.tool_activity([update("agent_message_chunk", content={"type": "text", "text": "x"})], SID)
    assert turns.tool_activity([call("c1")], SID)
    assert turns.tool_activity([ask("c1")], SID)
    assert turns.tool_activity([req("fs/read_text_file", path="/a")], SID)
    assert not turns.tool_activity([call("c1", sid="other")], SID)
    assert not turns.tool_activity([ask("c1", sid="other")], SID)
    assert not turns.tool_activity([req("fs/read_text_file", path="/a")], SID, start=1)


# -------------------------------------------------------------- tool calls
def test_tool_mentions_sources_in_order() -> None:
    events: list[Event] = [call("c1"), ask("c1", kind="edit"), upd("c1", "in_progress"), call("x", sid="other")]
    ms = mentions(events)
    assert [(m.position, m.source, m.tool_call_id) for m in ms] == [
        (0, "tool_call", "c1"),
        (1, "permission", "c1"),
        (2, "tool_call_update", "c1"),
    ]
    assert turns.first_tool_kind(ms, "c1") == "edit"
    assert turns.first_tool_kind(ms, "nope") == "other"


def test_reused_tool_call_ids() -> None:
    ok: list[Event] = [call("c1"), upd("c1", "completed"), call("c2"), ask("c2")]
    assert turns.reused_tool_call_ids(mentions(ok)) == []
    bad: list[Event] = [call("c1"), upd("c1", "completed"), call("c1")]
    assert turns.reused_tool_call_ids(mentions(bad)) == ["toolCallId 'c1' announced again by a second tool_call"]


def test_unknown_tool_call_updates() -> None:
    assert turns.unknown_tool_call_updates(mentions([call("c1"), upd("c1", "completed")])) == []
    # A permission request carrying the tool call introduces it (clients display it from there).
    assert turns.unknown_tool_call_updates(mentions([ask("c1", title="Write"), upd("c1", "in_progress")])) == []
    problems = turns.unknown_tool_call_updates(mentions([upd("c9", "in_progress"), call("c9")]))
    assert len(problems) == 1 and "'c9'" in problems[0]


@pytest.mark.parametrize(
    ("statuses", "regressed"),
    [
        (["pending", "in_progress", "completed"], False),
        (["pending", "failed"], False),
        (["pending", "completed", "failed"], False),  # not "back to running"
        (["pending", "completed", "in_progress"], True),
        (["in_progress", "failed", "pending"], True),
        ([None, "completed", None], False),  # updates without status change nothing
    ],
)
def test_status_regressions(statuses: list[str | None], regressed: bool) -> None:
    events: list[Event] = [call("c1", statuses[0]), *(upd("c1", s) for s in statuses[1:])]
    assert bool(turns.status_regressions(mentions(events))) is regressed


def test_a_reannounced_tool_call_starts_over() -> None:
    # Reusing the id is tool.id.unique's finding, not a status going back.
    events: list[Event] = [call("c1"), upd("c1", "completed"), call("c1", "pending"), upd("c1", "in_progress")]
    assert turns.status_regressions(mentions(events)) == []
    assert len(turns.reused_tool_call_ids(mentions(events))) == 1


def test_status_regressions_are_per_tool_call() -> None:
    events: list[Event] = [call("a", "completed"), call("b"), upd("b", "in_progress"), upd("b", "completed")]
    assert turns.status_regressions(mentions(events)) == []
    assert turns.reached_finished(mentions(events))
    assert not turns.reached_finished(mentions([call("a"), upd("a", "in_progress")]))


def test_a_tool_call_without_status_is_pending() -> None:
    events: list[Event] = [call("c1", None), upd("c1", "completed")]
    ms = mentions(events)
    assert turns.missing_in_progress(ms, ["c1"]) == [
        "tool call 'c1' was allowed but never reported in_progress (last status completed)"
    ]


def test_location_problems() -> None:
    events: list[Event] = [
        call("c1", locations=[{"path": "/abs/a.py", "line": 3}, {"path": "rel/b.py"}]),
        upd("c1", locations=[{"path": "/abs/c.py", "line": 0}, "junk", {"path": 7}]),
        ask("c1", locations=[{"path": "d.py", "line": None}]),
    ]
    seen, relative, zero = turns.location_problems(mentions(events))
    assert seen == 5
    assert len(relative) == 2 and "'rel/b.py'" in relative[0] and "'d.py'" in relative[1]
    assert len(zero) == 1 and "'/abs/c.py'" in zero[0]
    assert turns.location_problems(mentions([call("c1")])) == (0, [], [])


def test_diff_path_problems() -> None:
    diff = {"type": "diff", "path": "/abs/a.txt", "oldText": None, "newText": "x"}
    text = {"type": "content", "content": {"type": "text", "text": "ok"}}
    events: list[Event] = [
        call("c1", content=[diff, text]),
        upd("c1", "completed", content=[{**diff, "path": "a.txt"}]),
    ]
    seen, problems = turns.diff_path_problems(mentions(events))
    assert seen == 2
    assert problems == ["tool call 'c1' diff path 'a.txt' is not absolute"]


def test_terminal_embedded_after_release() -> None:
    term = [{"type": "terminal", "terminalId": "t1"}]
    good: list[Event] = [
        call("c1"),
        req("terminal/create", command="ls"),
        upd("c1", content=term),
        req("terminal/release", terminalId="t1"),
    ]
    assert turns.terminal_embeds(mentions(good)) == [(2, "t1")]
    assert turns.embedded_after_release(good, mentions(good)) == []
    bad: list[Event] = [call("c1"), req("terminal/release", terminalId="t1"), upd("c1", content=term)]
    assert turns.embedded_after_release(bad, mentions(bad)) == [
        "terminal 't1' embedded in a tool call after terminal/release"
    ]
    # Another terminal's release does not count.
    other: list[Event] = [call("c1"), req("terminal/release", terminalId="t2"), upd("c1", content=term)]
    assert turns.embedded_after_release(other, mentions(other)) == []


def test_missing_in_progress() -> None:
    events: list[Event] = [
        *(call("ran", "pending"), upd("ran", "in_progress"), upd("ran", "completed")),
        *(call("skipped", "pending"), upd("skipped", "completed")),
        *(call("failed", "pending"), upd("failed", "failed")),
        call("stuck", "pending"),
        *(call("born-running", "in_progress"), upd("born-running", "completed")),
    ]
    problems = turns.missing_in_progress(mentions(events), ["ran", "skipped", "failed", "stuck", "born-running"])
    assert [p.split("'")[1] for p in problems] == ["skipped", "stuck"]


def test_unannounced_tool_work() -> None:
    announced: list[Event] = [call("c1"), ask("c1"), req("fs/write_text_file", path="/a", content="")]
    assert turns.unannounced_tool_work(announced, mentions(announced), [(0, 3)]) == []
    silent: list[Event] = [ask("c1"), req("fs/write_text_file", path="/a", content=""), upd("c1", "completed")]
    problems = turns.unannounced_tool_work(silent, mentions(silent), [(0, 3)])
    assert len(problems) == 2
    assert "no tool_call update announced" in problems[0]
    assert "fs/write_text_file" in problems[1]
    # A tool_call in another turn does not cover this one's work.
    two: list[Event] = [call("c1"), upd("c1", "completed"), req("terminal/create", command="ls")]
    assert len(turns.unannounced_tool_work(two, mentions(two), [(0, 2), (2, 3)])) == 1


def test_side_effects() -> None:
    events: list[Event] = [
        req("fs/read_text_file", path="/a"),
        req("fs/write_text_file", path="/a", content=""),
        req("terminal/output", terminalId="t"),
        req("terminal/create", command="ls"),
    ]
    assert [p for p, _ in turns.side_effects(events)] == [1, 3]
    assert [p for p, _ in turns.side_effects(events, 2)] == [3]


def test_unattributed_side_effects_pin_only_what_no_live_tool_can_explain() -> None:
    write = req("fs/write_text_file", path="/a", content="x")
    # Refused, then a write while nothing else is live: the refused tool ran.
    ran: list[Event] = [call("c1"), ask("c1"), upd("c1", "in_progress"), write]
    assert [r for _, r in turns.unattributed_side_effects(ran, mentions(ran), {"c1"}, 1)] == [write]
    # Refused and failed, but another tool call is running: not attributable.
    other: list[Event] = [call("c1"), ask("c1"), upd("c1", "failed"), call("c2", "in_progress"), write]
    assert turns.unattributed_side_effects(other, mentions(other), {"c1"}, 1) == []
    # ...unless that one has finished already.
    done: list[Event] = [call("c2", "completed"), call("c1"), ask("c1"), upd("c1", "failed"), write]
    assert len(turns.unattributed_side_effects(done, mentions(done), {"c1"}, 2)) == 1
    # Side effects before ``since`` are not counted.
    early: list[Event] = [call("c1"), write, ask("c1")]
    assert turns.unattributed_side_effects(early, mentions(early), {"c1"}, 2) == []
    # A tool call mentioned only after the write cannot explain it.
    later: list[Event] = [call("c1"), ask("c1"), write, call("c2")]
    assert len(turns.unattributed_side_effects(later, mentions(later), {"c1"}, 1)) == 1


def test_duplicate_option_ids_and_option_kind() -> None:
    options = [
        {"optionId": "a", "name": "A", "kind": "allow_once"},
        {"optionId": "b", "name": "B", "kind": "reject_once"},
        {"optionId": "a", "name": "A again", "kind": "allow_always"},
        {"name": "no id"},
    ]
    params = ask("c1", options=options).params
    assert turns.duplicate_option_ids(params) == ["optionId 'a' offered twice"]
    assert turns.duplicate_option_ids(ask("c1").params) == []
    assert turns.duplicate_option_ids({"options": "nope"}) == []
    assert turns.duplicate_option_ids(None) == []
    assert turns.option_kind(ask("c1").params, "no") == "reject_once"
    assert turns.option_kind(ask("c1").params, "maybe") is None


def test_violations_and_responses_are_not_mentions() -> None:
    events: list[Event] = [
        Violation("schema.valid", "bad"),
        Response(1, {"outcome": {"outcome": "cancelled"}}, method="session/request_permission"),
        call("c1"),
    ]
    assert [m.position for m in mentions(events)] == [2]
    mine, theirs = ask("c1"), ask("c2", sid="other")
    assert turns.permission_requests([*events, mine, theirs], SID) == [(3, mine)]
    assert turns.permission_requests([*events, mine, theirs]) == [(3, mine), (4, theirs)]
    assert turns.permission_requests([*events, mine, theirs], start=4) == [(4, theirs)]


def test_a_tool_call_reported_under_a_session_that_does_not_exist_was_reported() -> None:
    """Misaddressed updates break prompt.updates.session-id, once: for whether the tool call was
    announced and ran (tool.report, prompt.tool-in-progress) they count; under another session
    the agent gave us, they do not."""
    given = Response(id=1, result={"sessionId": SID}, method="session/new")
    other = Response(id=2, result={"sessionId": "sess-2"}, method="session/new")
    events: list[Event] = [
        given,
        other,
        ask("c1"),
        update("tool_call", sid="sess-1-other", toolCallId="c1", title="t", status="pending"),
        update("tool_call_update", sid="sess-1-other", toolCallId="c1", status="in_progress"),
        update("tool_call", sid="sess-2", toolCallId="c2", title="t", status="in_progress"),
        ask("c2"),
    ]
    known = turns.sessions_given(events)
    assert known == {SID, "sess-2"}
    strict = turns.tool_mentions(events, SID)
    reported = turns.tool_mentions(events, SID, misaddressed=known)
    assert [m.tool_call_id for m in strict] == ["c1", "c2"]  # the two permission requests only
    assert len(turns.unannounced_tool_work(events, strict, [])) == 2
    assert turns.unannounced_tool_work(events, reported, []) == [
        "permission asked for toolCallId 'c2', which no tool_call update announced"
    ]
    assert turns.missing_in_progress(strict, ["c1"]) and not turns.missing_in_progress(reported, ["c1"])


def _mention(tcid: str, **fields: Any) -> turns.ToolMention:
    return turns.ToolMention(0, "tool_call", tcid, {"toolCallId": tcid, **fields})


def test_an_operation_is_its_input_not_its_kind() -> None:
    """allow_once allows "this operation only this time": two execute calls with other commands are
    two operations; the same input again is the same one (the locations or title when no input)."""
    echo = _mention("a", kind="execute", rawInput={"command": "echo hi > f"}, title="Run echo")
    cat = _mention("b", kind="execute", rawInput={"command": "cat f"}, title="Run echo")
    again = _mention("c", kind="execute", rawInput={"command": "echo hi > f"}, title="Run it again")
    op = turns.tool_operation([echo], "a")
    assert op is not None and op != turns.tool_operation([cat], "b") and op == turns.tool_operation([again], "c")
    edit1 = _mention("d", kind="edit", locations=[{"path": "/w/f.txt"}])
    edit2 = _mention("e", kind="edit", locations=[{"path": "/w/f.txt", "line": 3}], title="Edit f.txt")
    assert turns.tool_operation([edit1], "d") == turns.tool_operation([edit2], "e")
    assert turns.tool_operation([edit1], "d") != turns.tool_operation(
        [_mention("f", kind="read", locations=[{"path": "/w/f.txt"}])], "f"
    )
    assert turns.tool_operation([_mention("g", kind="other")], "g") is None


# ------------------------------------------------------------------ tool.diff.semantics
NEW = "/sandbox/notes.txt"


def _diff(old: str | None, new: str) -> list[dict[str, Any]]:
    return [{"type": "diff", "path": NEW, "oldText": old, "newText": new}]


def _diff_problems(events: list[Event]) -> tuple[int, list[str]]:
    return turns.diff_semantics_problems(events, mentions(events), lambda path: False)


def test_a_new_file_s_diff_has_no_old_text() -> None:
    write = req("fs/write_text_file", path=NEW, content="hello\n")
    good = [call("t1"), write, upd("t1", "completed", content=_diff(None, "hello\n"))]
    assert _diff_problems(good) == (1, [])
    bad = [call("t1"), write, upd("t1", "completed", content=_diff("", "hello\n"))]
    judged, problems = _diff_problems(bad)
    assert judged == 1 and len(problems) == 1 and "new file" in problems[0]


def test_an_edit_after_an_earlier_tool_call_created_the_file_has_an_old_text() -> None:
    # The file was created by an earlier tool call that reported no diff: through the client
    # (fs/write_text_file) or through the agent's own tools (only its input names the file).
    for creation in (
        [call("t1"), req("fs/write_text_file", path=NEW, content="draft\n"), upd("t1", "completed")],
        [call("t1", rawInput={"command": f"echo draft > {NEW}"}), upd("t1", "completed")],
    ):
        edit = [call("t2"), upd("t2", "completed", content=_diff("draft\n", "final\n"))]
        assert _diff_problems([*creation, *edit])[1] == []


def test_an_old_text_the_file_had_is_not_judged_in_the_tool_call_that_created_it() -> None:
    # One tool call drafts and then edits the new file, and reports its last edit only.
    events = [
        call("t1"),
        req("fs/write_text_file", path=NEW, content="draft\n"),
        req("fs/write_text_file", path=NEW, content="final\n"),
        upd("t1", "completed", content=_diff("draft\n", "final\n")),
    ]
    assert _diff_problems(events) == (1, [])


def test_a_diff_s_new_text_is_what_was_written() -> None:
    events = [call("t1"), req("fs/write_text_file", path=NEW, content="a\nb\n")]
    events.append(upd("t1", "completed", content=_diff(None, "a\n")))
    assert "complete text" in _diff_problems(events)[1][0]
