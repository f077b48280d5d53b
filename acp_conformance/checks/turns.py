"""Checks over the frames of prompt turns: tool calls, permission, side effects.

Plain functions over the inbound event sequence of one connection
(``Peer.events``: requests, notifications and responses the agent sent,
in arrival order).  Positions are indexes into that sequence, so a test
can say "after the permission answer" or "within this turn" with the
event counts it noted while driving the agent.  No pytest, no I/O: the
same functions judge a live run or a recorded one.

Each check returns the list of problems it found (empty: the clause held
on what was observed).  Whether a clause was *exercised* at all is a
separate question the ``*_of`` / ``tool_activity`` helpers answer, so a
caller never mistakes "nothing happened" for "it held".

What the checks rely on is the schema and the v1 docs, not any one
agent: tool kinds, titles and the number or order of updates are free;
update kinds outside a turn's output (``available_commands_update``,
``usage_update``, ...) may arrive at any time.
"""

from __future__ import annotations

import json
import ntpath
import posixpath
from collections.abc import Callable, Container, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from acp_conformance.core.events import Event, Notification, Request, Response
from acp_conformance.core.ids import same_id
from acp_conformance.core.vocabulary import TURN_OUTPUT

__all__ = [
    "FINISHED",
    "SIDE_EFFECT_METHODS",
    "STOP_REASONS",
    "TOOL_ACTIVITY_METHODS",
    "TURN_OUTPUT",
    "ToolMention",
    "diff_path_problems",
    "diff_semantics_problems",
    "duplicate_option_ids",
    "embedded_after_release",
    "first_tool_kind",
    "is_absolute_path",
    "late_turn_output",
    "location_problems",
    "missing_in_progress",
    "option_kind",
    "permission_requests",
    "position_of",
    "reached_finished",
    "responses_to",
    "reused_tool_call_ids",
    "side_effects",
    "status_regressions",
    "terminal_embeds",
    "tool_activity",
    "tool_mentions",
    "unannounced_tool_work",
    "unattributed_side_effects",
    "unknown_tool_call_updates",
    "updates",
]

#: The five StopReason values of the pinned schema.
STOP_REASONS = frozenset({"end_turn", "max_tokens", "max_turn_requests", "refusal", "cancelled"})
#: Tool call statuses after which a tool call does not run again (tool-calls.mdx § Status).
FINISHED = frozenset({"completed", "failed"})
#: Client methods whose call changes the user's environment: what a tool that must not run must not do.
SIDE_EFFECT_METHODS = frozenset({"fs/write_text_file", "terminal/create"})
#: Client methods an agent calls only on behalf of a tool.
TOOL_ACTIVITY_METHODS = frozenset(
    {
        "fs/read_text_file",
        "fs/write_text_file",
        "terminal/create",
        "terminal/output",
        "terminal/wait_for_exit",
        "terminal/kill",
        "terminal/release",
    }
)
PERMISSION = "session/request_permission"


def is_absolute_path(path: Any) -> bool:
    """An absolute file-system path (POSIX, or a Windows drive / UNC path); a URI is not a path."""
    if not isinstance(path, str) or not path:
        return False
    if posixpath.isabs(path):
        return True
    drive, rest = ntpath.splitdrive(path)
    return bool(drive) and rest[:1] in ("\\", "/")


def position_of(events: Sequence[Event], event: Event) -> int:
    """Index of ``event`` (by identity) in ``events``; -1 when absent."""
    for i in range(len(events) - 1, -1, -1):
        if events[i] is event:
            return i
    return -1


def _window(events: Sequence[Event], start: int, end: int | None) -> Iterable[tuple[int, Event]]:
    stop = len(events) if end is None else min(end, len(events))
    for i in range(max(start, 0), stop):
        yield i, events[i]


def updates(
    events: Sequence[Event], session_id: str, start: int = 0, end: int | None = None
) -> list[tuple[int, dict[str, Any]]]:
    """``(position, update object)`` of every ``session/update`` for ``session_id`` in the window."""
    out = []
    for i, e in _window(events, start, end):
        if isinstance(e, Notification) and e.method == "session/update" and isinstance(e.params, dict):
            update = e.params.get("update")
            if e.params.get("sessionId") == session_id and isinstance(update, dict):
                out.append((i, update))
    return out


def permission_requests(
    events: Sequence[Event], session_id: str | None = None, start: int = 0, end: int | None = None
) -> list[tuple[int, Request]]:
    """``session/request_permission`` requests (of ``session_id``, when given) in the window."""
    out = []
    for i, e in _window(events, start, end):
        if isinstance(e, Request) and e.method == PERMISSION:
            sid = e.params.get("sessionId") if isinstance(e.params, dict) else None
            if session_id is None or sid == session_id:
                out.append((i, e))
    return out


def responses_to(events: Sequence[Event], request_id: Any, method: str) -> list[tuple[int, Response]]:
    """Every response to our request ``request_id`` of ``method`` (more than one is a duplicate)."""
    return [
        (i, e)
        for i, e in enumerate(events)
        if isinstance(e, Response) and e.method == method and same_id(e.id, request_id)
    ]


def late_turn_output(
    events: Sequence[Event], session_id: str, after: int, end: int | None = None
) -> list[dict[str, Any]]:
    """Turn output (message/thought chunks, tool calls, plans) for the session after position ``after``."""
    return [u for _, u in updates(events, session_id, after + 1, end) if u.get("sessionUpdate") in TURN_OUTPUT]


# ------------------------------------------------------------------ tool calls
@dataclass(frozen=True)
class ToolMention:
    """One place a tool call appears: its announcement, an update, or a permission request about it."""

    position: int
    source: str  # "tool_call" | "tool_call_update" | "permission"
    tool_call_id: Any
    fields: Mapping[str, Any]


def sessions_given(events: Sequence[Event]) -> set[str]:
    """The session ids the agent's results name (``session/new``'s and any other result carrying a
    ``sessionId``; a ``session/load`` names its session in our request, not in its answer, so a
    test that loads passes that id itself)."""
    out = set()
    for e in events:
        if isinstance(e, Response) and isinstance(e.result, dict):
            sid = e.result.get("sessionId")
            if isinstance(sid, str):
                out.add(sid)
    return out


def tool_mentions(
    events: Sequence[Event],
    session_id: str,
    start: int = 0,
    end: int | None = None,
    *,
    misaddressed: Container[Any] | None = None,
) -> list[ToolMention]:
    """Every tool call mention for the session, in order.

    ``misaddressed``: the sessions the agent gave us (``sessions_given``); updates naming any
    other session count as this one's too.  For judging whether tool calls were *reported*
    (``tool.report``, ``prompt.tool-in-progress``): an update under a session id that does not
    exist breaks ``prompt.updates.session-id``, once; the tool call it reports was reported.  (A
    pooled connection's earlier tests' sessions never reach a test's events.)"""
    out: list[ToolMention] = []
    for i, e in _window(events, start, end):
        if isinstance(e, Notification) and e.method == "session/update" and isinstance(e.params, dict):
            update = e.params.get("update")
            kind = update.get("sessionUpdate") if isinstance(update, dict) else None
            named = e.params.get("sessionId")
            ours = named == session_id or (
                misaddressed is not None and (not isinstance(named, str) or named not in misaddressed)
            )
            if ours and kind in ("tool_call", "tool_call_update"):
                assert isinstance(update, dict)
                out.append(ToolMention(i, str(kind), update.get("toolCallId"), update))
        elif isinstance(e, Request) and e.method == PERMISSION and isinstance(e.params, dict):
            tool = e.params.get("toolCall")
            if e.params.get("sessionId") == session_id and isinstance(tool, dict):
                out.append(ToolMention(i, "permission", tool.get("toolCallId"), tool))
    return out


def side_effects(events: Sequence[Event], start: int = 0, end: int | None = None) -> list[tuple[int, Request]]:
    """Requests that change the client's environment (file writes, started commands) in the window."""
    window = _window(events, start, end)
    return [(i, e) for i, e in window if isinstance(e, Request) and e.method in SIDE_EFFECT_METHODS]


def tool_activity(events: Sequence[Event], session_id: str, start: int = 0, end: int | None = None) -> bool:
    """Did the agent use a tool in the window (announce, update, ask permission, or call fs/terminal)?"""
    if tool_mentions(events, session_id, start, end):
        return True
    return any(isinstance(e, Request) and e.method in TOOL_ACTIVITY_METHODS for _, e in _window(events, start, end))


def first_tool_kind(mentions: Sequence[ToolMention], tool_call_id: Any) -> str:
    """The kind the tool call was given (``other`` when never stated, as the schema defaults)."""
    for m in mentions:
        if m.tool_call_id == tool_call_id and isinstance(m.fields.get("kind"), str):
            return str(m.fields["kind"])
    return "other"


def tool_operation(mentions: Sequence[ToolMention], tool_call_id: Any) -> tuple[str, str, str] | None:
    """What the tool call does, comparable across turns: its kind and, first found of, its
    ``rawInput``, the paths of its ``locations``, its ``title``; None when it states none of them.

    "Allow this operation only this time" (``allow_once``) is about an operation, not a kind: two
    ``execute`` calls (``cat`` and ``rm``) are different operations, the same input twice is one."""
    fields: dict[str, Any] = {}
    for m in mentions:
        if m.tool_call_id == tool_call_id:
            fields.update({k: v for k, v in m.fields.items() if v is not None})
    kind = str(fields.get("kind", "other"))
    raw = fields.get("rawInput")
    if raw not in (None, {}, [], ""):
        return kind, "rawInput", json.dumps(raw, sort_keys=True, default=str)
    locations = fields.get("locations")
    paths = sorted(str(loc.get("path")) for loc in locations or () if isinstance(loc, dict) and loc.get("path"))
    if paths:
        return kind, "locations", json.dumps(paths)
    title = fields.get("title")
    if isinstance(title, str) and title:
        return kind, "title", title
    return None


def reused_tool_call_ids(mentions: Sequence[ToolMention]) -> list[str]:
    """``tool_call`` announcements whose toolCallId an earlier announcement of the session already used."""
    seen: set[Any] = set()
    out = []
    for m in mentions:
        if m.source != "tool_call" or not isinstance(m.tool_call_id, str):
            continue
        if m.tool_call_id in seen:
            out.append(f"toolCallId {m.tool_call_id!r} announced again by a second tool_call")
        seen.add(m.tool_call_id)
    return out


def unknown_tool_call_updates(mentions: Sequence[ToolMention]) -> list[str]:
    """``tool_call_update``s for a toolCallId never introduced before (by a ``tool_call`` or a
    permission request carrying it, which clients display as the tool call)."""
    known: set[Any] = set()
    out = []
    for m in mentions:
        if m.source == "tool_call_update" and m.tool_call_id not in known:
            out.append(f"tool_call_update for toolCallId {m.tool_call_id!r}, which was never introduced")
        known.add(m.tool_call_id)
    return out


def _status_trail(mentions: Sequence[ToolMention]) -> dict[Any, list[tuple[int, str]]]:
    trail: dict[Any, list[tuple[int, str]]] = {}
    for m in mentions:
        status = m.fields.get("status")
        if m.source == "tool_call" and status is None:
            status = "pending"  # a tool_call without status is pending (schema default)
        if m.source != "permission" and isinstance(status, str):
            trail.setdefault(m.tool_call_id, []).append((m.position, status))
    return trail


def status_regressions(mentions: Sequence[ToolMention]) -> list[str]:
    """Tool calls that went back to pending / in_progress after completed or failed.

    A second ``tool_call`` announcing the same id starts over: that is a reused id
    (``reused_tool_call_ids``), not a status going back.
    """
    out = []
    final: dict[Any, str] = {}
    flagged: set[Any] = set()
    for m in mentions:
        if m.source == "permission":
            continue
        status = m.fields.get("status")
        if m.source == "tool_call":
            final.pop(m.tool_call_id, None)
            if status is None:
                status = "pending"
        if not isinstance(status, str):
            continue
        done = final.get(m.tool_call_id)
        if done is not None and status in ("pending", "in_progress") and m.tool_call_id not in flagged:
            out.append(f"tool call {m.tool_call_id!r} went from {done} back to {status}")
            flagged.add(m.tool_call_id)
        if status in FINISHED:
            final[m.tool_call_id] = status
    return out


def reached_finished(mentions: Sequence[ToolMention]) -> bool:
    """Did any tool call reach completed or failed (so a regression could have been seen)?"""
    return any(s in FINISHED for trail in _status_trail(mentions).values() for _, s in trail)


def _items(fields: Mapping[str, Any], key: str) -> list[dict[str, Any]]:
    value = fields.get(key)
    return [x for x in value if isinstance(x, dict)] if isinstance(value, list) else []


def location_problems(mentions: Sequence[ToolMention]) -> tuple[int, list[str], list[str]]:
    """``(locations seen, relative paths, zero line numbers)`` over every mention's ``locations``.

    Line 0 is schema-valid (``minimum: 0``) but meaningless: lines count from 1.
    """
    seen, relative, zero = 0, [], []
    for m in mentions:
        for loc in _items(m.fields, "locations"):
            seen += 1
            path = loc.get("path")
            if isinstance(path, str) and not is_absolute_path(path):
                relative.append(f"tool call {m.tool_call_id!r} location path {path!r} is not absolute")
            line = loc.get("line")
            if isinstance(line, int) and not isinstance(line, bool) and line == 0:
                zero.append(f"tool call {m.tool_call_id!r} location {path!r} has line 0 (lines count from 1)")
    return seen, relative, zero


def diff_path_problems(mentions: Sequence[ToolMention]) -> tuple[int, list[str]]:
    """``(diffs seen, diffs whose path is not absolute)`` over every mention's content."""
    seen, out = 0, []
    for m in mentions:
        for item in _items(m.fields, "content"):
            if item.get("type") != "diff":
                continue
            seen += 1
            path = item.get("path")
            if isinstance(path, str) and not is_absolute_path(path):
                out.append(f"tool call {m.tool_call_id!r} diff path {path!r} is not absolute")
    return seen, out


def diff_semantics_problems(
    events: Sequence[Event], mentions: Sequence[ToolMention], existed: Callable[[str], bool]
) -> tuple[int, list[str]]:
    """``(diffs judged, problems)`` for the diffs whose file the suite knows.

    tool-calls.mdx: ``oldText`` is "null for new files".  A file is new to a tool call's diff when
    it did not exist before the session (``existed(path)`` false) and nothing the suite can see
    touched it before that tool call began: no ``fs/write_text_file`` of it and no earlier tool
    call naming it (a diff, a location, a path in its input: an agent's own tools write without
    asking the client, and an edit after such a write has an old text).  Even then an ``oldText``
    that is a content the file had (a write or an earlier diff's ``newText``) is not judged: the
    tool call may report its last edit only.  A diff whose file the tool call wrote through
    ``fs/write_text_file`` (between its first mention and the diff) carries the complete new text:
    ``newText`` equals the content of the last such write; a write by an earlier tool call is not
    this one's change (it may have edited the file with its own tools since).  Diffs of other
    files are not judged (only the agent knows their contents).
    """
    judged, out = 0, []
    writes: list[tuple[int, str, Any]] = []
    for i, e in enumerate(events):
        if isinstance(e, Request) and e.method == "fs/write_text_file" and isinstance(e.params, dict):
            path = e.params.get("path")
            if isinstance(path, str):
                writes.append((i, path, e.params.get("content")))
    ordered = sorted(mentions, key=lambda m: m.position)
    newer: list[tuple[str, Any]] = []  # (path, newText) of the diffs read so far
    for m in ordered:
        if m.source == "permission":
            continue
        began = next(o.position for o in ordered if o.tool_call_id == m.tool_call_id)
        for item in _items(m.fields, "content"):
            path = item.get("path")
            if item.get("type") != "diff" or not isinstance(path, str) or not is_absolute_path(path):
                continue
            written = [content for pos, p, content in writes if p == path and pos < m.position]
            had = {c for c in written if isinstance(c, str)} | {t for p, t in newer if p == path and isinstance(t, str)}
            own = [content for pos, p, content in writes if p == path and began <= pos < m.position]
            touched = any(p == path and pos < began for pos, p, _ in writes) or any(
                o.position < began and o.tool_call_id != m.tool_call_id and _names(o.fields, path) for o in ordered
            )
            new_file = not existed(path) and not touched
            complete = bool(own) and isinstance(own[-1], str)
            judged += new_file or complete
            old = item.get("oldText")
            if new_file and old is not None and not (isinstance(old, str) and old in had):
                out.append(f"tool call {m.tool_call_id!r} diff of the new file {path!r} has an oldText")
            if complete:
                if item.get("newText") != own[-1]:
                    out.append(
                        f"tool call {m.tool_call_id!r} diff of {path!r}: newText is not the complete text the "
                        "agent wrote with fs/write_text_file"
                    )
            newer.append((path, item.get("newText")))
    return judged, out


def _names(value: Any, path: str) -> bool:
    """Some string in ``value`` (a tool call's fields: diffs, locations, raw input) holds ``path``."""
    if isinstance(value, str):
        return path in value
    if isinstance(value, Mapping):
        return any(_names(v, path) for v in value.values())
    if isinstance(value, list):
        return any(_names(v, path) for v in value)
    return False


def terminal_embeds(mentions: Sequence[ToolMention]) -> list[tuple[int, Any]]:
    """``(position, terminalId)`` of every terminal embedded in tool call content."""
    return [
        (m.position, item.get("terminalId"))
        for m in mentions
        if m.source != "permission"
        for item in _items(m.fields, "content")
        if item.get("type") == "terminal"
    ]


def embedded_after_release(events: Sequence[Event], mentions: Sequence[ToolMention]) -> list[str]:
    """Terminals embedded in tool call content only after the agent had released them."""
    released: dict[Any, int] = {}
    for i, e in enumerate(events):
        if isinstance(e, Request) and e.method == "terminal/release" and isinstance(e.params, dict):
            released.setdefault(e.params.get("terminalId"), i)
    out = []
    for position, terminal_id in terminal_embeds(mentions):
        at = released.get(terminal_id)
        if at is not None and at < position:
            out.append(f"terminal {terminal_id!r} embedded in a tool call after terminal/release")
    return out


def missing_in_progress(mentions: Sequence[ToolMention], granted: Iterable[Any]) -> list[str]:
    """Tool calls we allowed that were never reported in_progress although they ran to
    completion or stayed pending (a tool that failed at once is not counted)."""
    trail = _status_trail(mentions)
    out = []
    for tool_call_id in granted:
        statuses = [s for _, s in trail.get(tool_call_id, [])]
        if "in_progress" in statuses:
            continue
        final = statuses[-1] if statuses else None
        if final == "failed":
            continue
        out.append(
            f"tool call {tool_call_id!r} was allowed but never reported in_progress (last status {final or 'none'})"
        )
    return out


def unannounced_tool_work(
    events: Sequence[Event], mentions: Sequence[ToolMention], turns: Sequence[tuple[int, int]]
) -> list[str]:
    """Tool work the agent did not announce with a ``tool_call``: permission asked for a tool
    call never announced, or a turn that called fs/terminal methods without any tool_call."""
    announced = {m.tool_call_id for m in mentions if m.source == "tool_call"}
    out = [
        f"permission asked for toolCallId {m.tool_call_id!r}, which no tool_call update announced"
        for m in mentions
        if m.source == "permission" and m.tool_call_id not in announced
    ]
    for start, end in turns:
        window = _window(events, start, end)
        calls = [e.method for _, e in window if isinstance(e, Request) and e.method in TOOL_ACTIVITY_METHODS]
        if calls and not any(m.source == "tool_call" and start <= m.position < end for m in mentions):
            out.append(f"the turn called {', '.join(sorted(set(calls)))} but announced no tool_call")
    return out


def unattributed_side_effects(
    events: Sequence[Event], mentions: Sequence[ToolMention], refused: Iterable[Any], since: int
) -> list[tuple[int, Request]]:
    """Side-effect requests from position ``since`` on that only a refused tool call can have made.

    A write or command is attributed to another tool call whenever one is
    live at that moment: introduced, not refused, and not yet completed or
    failed.  Only when every tool call the agent has mentioned is refused
    or finished can the side effect be pinned on a refused one.
    """
    refused = set(refused)
    out = []
    for position, request in side_effects(events, since):
        live = False
        state: dict[Any, str] = {}
        for m in mentions:
            if m.position >= position:
                break
            status = m.fields.get("status")
            state.setdefault(m.tool_call_id, "pending")
            if m.source != "permission" and isinstance(status, str):
                state[m.tool_call_id] = status
        for tool_call_id, status in state.items():
            if tool_call_id not in refused and status not in FINISHED:
                live = True
                break
        if not live:
            out.append((position, request))
    return out


# ------------------------------------------------------------------ permission
def duplicate_option_ids(params: Any) -> list[str]:
    """optionIds offered twice in one permission request."""
    options = params.get("options") if isinstance(params, dict) else None
    if not isinstance(options, list):
        return []
    seen: set[Any] = set()
    out = []
    for option in options:
        oid = option.get("optionId") if isinstance(option, dict) else None
        if not isinstance(oid, str):
            continue
        if oid in seen:
            out.append(f"optionId {oid!r} offered twice")
        seen.add(oid)
    return out


def option_kind(params: Any, option_id: Any) -> str | None:
    """The kind of the offered option ``option_id`` (None when not offered)."""
    options = params.get("options") if isinstance(params, dict) else None
    for option in options if isinstance(options, list) else []:
        if isinstance(option, dict) and option.get("optionId") == option_id:
            kind = option.get("kind")
            return kind if isinstance(kind, str) else None
    return None
