"""Immutable events produced by the sans-IO core.

A peer's byte stream becomes a sequence of these.  ``Violation`` is an
event, not an exception: a broken frame is evidence to record, and the run
goes on so that later clauses can still be judged.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Literal, overload

from acp_conformance.core.vocabulary import TURN_OUTPUT

__all__ = [
    "BULK_UPDATES",
    "DROPPED",
    "EVENTS_HEAD",
    "EVENTS_STRUCTURAL",
    "EVENTS_TAIL",
    "Event",
    "EventLog",
    "Notification",
    "Request",
    "Response",
    "Severity",
    "Unjudged",
    "Violation",
    "turn_output",
]

Severity = Literal["error", "warning"]


@dataclass(frozen=True, slots=True)
class Violation:
    """The peer broke ``clause_id``; ``severity`` 'warning' marks SHOULD-grade findings.

    ``index`` is the position of the offending inbound frame in the
    connection's inbound sequence (``None`` when not tied to one frame).
    """

    clause_id: str
    message: str
    severity: Severity = "error"
    raw: bytes | None = None
    index: int | None = None


@dataclass(frozen=True, slots=True)
class Request:
    """A request (has ``id`` and ``method``) received from the peer."""

    id: Any
    method: str
    params: Any
    raw: bytes = b""
    index: int = -1
    has_params: bool = True
    message: Any = None


@dataclass(frozen=True, slots=True)
class Notification:
    """A notification (``method`` without ``id``) received from the peer."""

    method: str
    params: Any
    raw: bytes = b""
    index: int = -1
    has_params: bool = True
    message: Any = None


@dataclass(frozen=True, slots=True)
class Response:
    """A response (result or error) received from the peer.

    ``method`` is the method of our request it answers, or ``None`` when the
    id matched no outstanding request of ours (that case also yields a
    ``Violation``).  ``duplicate`` marks a second answer to the same id.
    ``id`` is the id of the request it answers: the peer's own, except when it
    spelled ours with the wrong JSON type (``"0"`` for ``0``), which is flagged
    and paired (``Connection._on_response``); ``message`` keeps its spelling.
    ``stray``: its id is not null and matches no request we ever sent (nor a frame we
    wrote raw), the ``jsonrpc.response-id-echo`` violation beside it says so.  While
    such a response is about, a request of ours left without an answer under its own
    id may have been answered under the wrong one (``Peer.strays_since``).
    """

    id: Any
    result: Any = None
    error: Any = None
    is_error: bool = False
    method: str | None = None
    duplicate: bool = False
    raw: bytes = b""
    index: int = -1
    message: Any = None
    stray: bool = False

    @property
    def code(self) -> Any:
        """The error's ``code`` member, or None for a result or an error object without one: the
        one reading of "which error was this" (its type is the peer's, judged elsewhere)."""
        return self.error.get("code") if self.is_error and isinstance(self.error, dict) else None


@dataclass(frozen=True, slots=True)
class Unjudged:
    """A line the suite could not decode for a limit of its own, not for a fault of the peer.

    RFC 8259 section 9 lets a JSON parser limit nesting depth; a line nested deeper than
    ours goes is valid JSON all the same.  Judging it as "not JSON" would charge the peer
    with the suite's limit (a false FAIL of the stdout/stdin hygiene clause), so the line is
    recorded with ``reason`` and judged on no clause.
    """

    raw: bytes
    reason: str
    index: int = -1
    message: Any = None


Event = Request | Notification | Response | Violation | Unjudged


# ------------------------------------------------------------------ the log
#: Events a log always keeps from the start of a connection (the handshake, the first turns).
EVENTS_HEAD = 1000
#: Bulk events (message chunks, usage and command updates, extension notifications, stray
#: answers) kept at the end: older ones past the head are dropped and counted.
EVENTS_TAIL = 2000
#: Structural events (requests, tool-call / plan / mode updates) kept past the head: far more,
#: since per-turn checks pair them up (a tool call with its updates and its permission request).
EVENTS_STRUCTURAL = 5000

#: Session update kinds no check needs one by one (they are judged as they arrive, and the
#: transcript pins the first of each kind): the volume of a long or flooding turn.
BULK_UPDATES = frozenset(
    {"agent_message_chunk", "agent_thought_chunk", "user_message_chunk", "usage_update", "available_commands_update"}
)

#: What ``EventLog[i]`` returns for a dropped position: a notification no check asks for, so
#: position-based scans (``for i in range(start, end)``) step over it.
DROPPED = Notification(method="$/acp_conformance/dropped", params=None, has_params=False)


def _retention(ev: Event) -> str:
    """``pinned`` (never dropped), ``structural`` or ``bulk``: how long the log keeps ``ev``."""
    if isinstance(ev, Notification):  # first: a turn's stream is made of them
        if ev.method == "session/update" and isinstance(ev.params, dict):
            update = ev.params.get("update")
            kind = update.get("sessionUpdate") if isinstance(update, dict) else None
            return "bulk" if kind in BULK_UPDATES else "structural"
        return "bulk"
    if isinstance(ev, Response):
        # Answers to our own requests: as many as we sent, and waits look them up.
        return "pinned" if ev.method is not None else "bulk"
    if isinstance(ev, Request):
        return "structural"
    return "pinned"  # violations, and lines the suite could not judge (``Unjudged``)


class EventLog(Sequence[Event]):
    """The events of one connection, by position, in bounded memory.

    Positions are absolute and stable: ``len(log)`` counts every event ever
    appended, so callers keep noting ``len(peer.events)`` before a turn and
    slicing from there.  A peer that floods would otherwise make the suite keep
    every frame it ever sent (about 1.7 KB per notification, without bound), so
    past the first ``head`` events the log keeps the last ``tail`` *bulk*
    events and the last ``structural`` structural ones (see ``_retention``),
    plus every violation and every answer to our requests; the others are
    dropped and counted in ``dropped``.  Normal turns stay far below these
    windows, so the per-turn checks see every event of them.

    Indexing a dropped position returns ``DROPPED`` (a notification no check
    looks for); iteration and slices yield the kept events only.
    """

    def __init__(
        self, *, head: int = EVENTS_HEAD, tail: int = EVENTS_TAIL, structural: int = EVENTS_STRUCTURAL
    ) -> None:
        self.head = head
        self.tail = tail
        self.structural = structural
        self._kept: dict[int, Event] = {}
        self._n = 0
        self._bulk: deque[int] = deque()
        self._struct: deque[int] = deque()
        self.dropped = 0

    @classmethod
    def of(cls, events: Iterable[Event]) -> EventLog:
        """A log holding ``events`` (a pooled connection's handshake, ``Peer.rebind``)."""
        log = cls()
        for ev in events:
            log.append(ev)
        return log

    def append(self, ev: Event) -> None:
        i = self._n
        self._n += 1
        self._kept[i] = ev
        if i < self.head:
            return
        kind = _retention(ev)
        if kind == "pinned":
            return
        queue, limit = (self._bulk, self.tail) if kind == "bulk" else (self._struct, self.structural)
        queue.append(i)
        if len(queue) > limit:
            del self._kept[queue.popleft()]
            self.dropped += 1

    def clear(self) -> None:
        """Forget everything (a judge that nothing waits on keeps nothing)."""
        self._kept.clear()
        self._bulk.clear()
        self._struct.clear()
        self._n = 0
        self.dropped = 0

    def get(self, i: int) -> Event | None:
        """The event at position ``i``, or None when it was dropped (or is out of range)."""
        return self._kept.get(i)

    def __len__(self) -> int:
        return self._n

    def __iter__(self) -> Iterator[Event]:
        return iter(list(self._kept.values()))

    def __reversed__(self) -> Iterator[Event]:
        return iter(list(reversed(self._kept.values())))

    @overload
    def __getitem__(self, i: int) -> Event: ...

    @overload
    def __getitem__(self, i: slice) -> list[Event]: ...

    def __getitem__(self, i: int | slice) -> Event | list[Event]:
        if isinstance(i, slice):
            lo, hi, step = i.indices(self._n)
            if step != 1:
                raise ValueError("EventLog slices take no step")
            if hi - lo > len(self._kept):
                return [e for k, e in self._kept.items() if lo <= k < hi]
            kept = self._kept
            return [e for k in range(lo, hi) if (e := kept.get(k)) is not None]
        if i < 0:
            i += self._n
        if not 0 <= i < self._n:
            raise IndexError("event position out of range")
        return self._kept.get(i, DROPPED)

    def index(self, value: Any, start: int = 0, stop: int | None = None) -> int:
        hi = self._n if stop is None else stop
        for k, e in self._kept.items():
            if start <= k < hi and (e is value or e == value):
                return k
        raise ValueError(f"{value!r} is not in the event log (or was dropped)")

    def __contains__(self, value: object) -> bool:
        return any(e is value or e == value for e in self._kept.values())


def turn_output(events: Iterable[Event]) -> str:
    """The turn output among ``events`` ("3 agent_message_chunk for session 's2'"), or "" for
    none: what a timeout message says the peer was still doing."""
    kinds: dict[tuple[str, str], int] = {}
    events = list(events)
    # Lines whose members came as messages (a judging connection unpacks a batch): counted below.
    unpacked = {ev.index for ev in events if isinstance(ev, Notification)}
    for ev in events:
        if (
            isinstance(ev, Violation)
            and ev.clause_id == "transport.stdio.one-message-per-line"
            and b'"session/update"' in (ev.raw or b"")
            and ev.index not in unpacked
        ):
            # Updates it sent in a form a strict receiver does not take as messages (a batch the
            # connection refused whole): still work we saw.
            key = ("session/update in a batch line", "?")
            kinds[key] = kinds.get(key, 0) + 1
            continue
        if not (isinstance(ev, Notification) and ev.method == "session/update" and isinstance(ev.params, dict)):
            continue
        update = ev.params.get("update")
        kind = update.get("sessionUpdate") if isinstance(update, dict) else None
        if isinstance(kind, str) and kind in TURN_OUTPUT:
            key = (kind, str(ev.params.get("sessionId")))
            kinds[key] = kinds.get(key, 0) + 1
    return ", ".join(f"{n} {kind} for session {sid!r}" for (kind, sid), n in list(kinds.items())[:3])
