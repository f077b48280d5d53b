"""Where the sans-IO core meets I/O: one ACP endpoint over a transport.

``Peer`` pumps bytes from a transport into a ``Connection``, validates
every frame in both directions against the official schema, records the
transcript, dispatches the other side's requests to handlers (each in its
own task, so a handler that deliberately never answers blocks nothing),
and lets callers await responses and events with deadlines.  Every wait
has a deadline and names what it waited for; a peer that exits turns
every pending wait into ``PeerExited`` with its stderr tail.

Bounded against floods (docs/hostile-peers.md): ``events`` is an
``EventLog`` and the transcript keeps a head and a tail, so a peer writing
millions of valid frames costs bounded memory.  Inbound requests get
backpressure: at most ``max_inflight`` handlers run without waiting on the
peer, and their answers queue in an outbox of at most ``OUTBOX_BUDGET``
bytes; when both are full the reader stops reading, so the pipe pushes back
on the peer.  A handler that waits on the peer (for an answer or an event)
gives up its place at once, so the answers it waits for are always read.

It is role-agnostic: the suite's client side, the mock agent and the mock
client are all a ``Peer`` plus handlers.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import Callable, Coroutine, Iterable
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio
import anyio.abc
import anyio.lowlevel

from acp_conformance._tasks import LightTasks
from acp_conformance._util import single_exception
from acp_conformance.core import jsonrpc
from acp_conformance.core.connection import AnsweringConnection, Connection, Role, idless_error
from acp_conformance.core.events import (
    Event,
    EventLog,
    Notification,
    Request,
    Response,
    Severity,
    Unjudged,
    Violation,
    turn_output,
)
from acp_conformance.core.framing import DEFAULT_MAX_FRAME_BYTES, unterminated_note
from acp_conformance.deadlines import DeadlineMemory
from acp_conformance.errors import LocalProtocolError, PeerError, PeerExited, PeerTimeout, RpcError
from acp_conformance.handlers import NO_ANSWER, HandlerError, NotificationListener, RequestHandler
from acp_conformance.outbox import OUTBOX_BUDGET, Outbox
from acp_conformance.schema.rules import judge_frame
from acp_conformance.transcript import Entry, Transcript
from acp_conformance.transport.base import Transport

if TYPE_CHECKING:  # jsonschema_rs stays off the mocks' start-up path until a frame is validated
    from acp_conformance.schema.validator import SchemaValidator

__all__ = [
    "IDLESS",
    "IdAnswer",
    "MAX_INFLIGHT",
    "NO_ANSWER",
    "OUTBOX_BUDGET",
    "DeadlineMemory",
    "HandlerError",
    "Peer",
    "RequestHandler",
    "NOT_STRAY",
    "stray_id",
    "stray_words",
    "strays_in",
    "unread_answer",
]


#: Inbound requests handled at once (not counting handlers waiting on the peer); at this
#: many the reader stops reading.  Far above what any legitimate peer has in flight.
MAX_INFLIGHT = 256
#: Responses matching no request of ours remembered (``Peer.strays_since``): the newest.
STRAYS_KEPT = 64
#: The id ``strays_since`` gives an answer without any id (a stray's id is never null: a null-id
#: error is the legitimate answer to a line the peer could not read).
IDLESS = None


#: What ``stray_id`` gives an event that is no stray.
NOT_STRAY = object()


def stray_id(ev: Event) -> Any:
    """The id ``strays_since`` keeps for ``ev`` (``IDLESS``: an answer without any id), or
    ``NOT_STRAY``.  The one definition of a stray, for the peer and for the fuzz examples."""
    if isinstance(ev, Response):
        return ev.id if ev.stray and not ev.duplicate else NOT_STRAY
    if isinstance(ev, Violation) and ev.clause_id == "jsonrpc.response-id-echo" and idless_error(ev) is not None:
        # Not an answer to a notification nor to a line we malformed (those are other clauses'
        # violations, ``Connection._idless``): an answer that lost its id.
        return IDLESS
    return NOT_STRAY


def strays_in(events: Iterable[Event]) -> list[Any]:
    """The ids of the strays among ``events`` (``Peer.strays_since``'s, for a window of events)."""
    return [sid for ev in events if (sid := stray_id(ev)) is not NOT_STRAY]


def stray_words(sid: Any) -> str:
    """A stray of ``Peer.strays_since`` in a finding's words."""
    if sid is IDLESS:
        return "an error without any id, which answers no notification of ours,"
    return f"a response under id {sid!r}, which matches no request we sent,"


@dataclass(frozen=True)
class IdAnswer:
    """What came back to one request sent under a chosen id (``Peer.answer_under_id``)."""

    #: The answer under its id, if one came.
    response: Response | None = None
    #: "an error without any id" or "an error with id null" when one came instead: the peer's word
    #: on a request it could not read; ``raw`` is its start.
    unread: str = ""
    raw: str = ""
    #: Why nothing came ("" when something did), whether the peer closed its output meanwhile, and
    #: why that silence is not proven (``Peer.why_unproven``), or "".
    silence: str = ""
    exited: bool = False
    unproven: str = ""

    def refusal(self, baseline: Response) -> str:
        """Why this answer shows the id refused where ``baseline`` (the same request under a plain
        integer id) was served, or "" when it does not (answered alike, or not proven)."""
        if self.unread:
            return f"{self.unread}, {self.raw}"
        if self.response is None:
            return "" if self.unproven else f"no answer ({self.silence})"
        if self.response.is_error and not baseline.is_error:
            return f"an error {self.response.error!r} where the integer id got a result"
        return ""


def unread_answer(ev: Event) -> bool:
    """An error with id null, or without any id that the core did not attribute to a notification
    of ours (after a frame we wrote raw it cannot tell what else it answers)."""
    if isinstance(ev, Response):
        return ev.id is None and ev.is_error
    return (
        isinstance(ev, Violation)
        and ev.clause_id in ("jsonrpc.response-id-echo", "jsonrpc.survives-invalid-input")
        and idless_error(ev) is not None
    )


class _Slot:
    """A handler's place among the ``max_inflight``: given up once, when it first waits on the peer."""

    __slots__ = ("held", "peer")

    def __init__(self, peer: Peer) -> None:
        self.peer = peer
        self.held = True

    def release(self) -> None:
        if self.held:
            self.held = False
            self.peer._busy -= 1
            self.peer._slot_was_freed()


_SLOT: ContextVar[_Slot | None] = ContextVar("acp_conformance_handler_slot", default=None)


#: Our requests whose answer may wait on a turn's streamed output: a prompt's own turn, the replay
#: of ``session/load``, the wind-down of the turn that ``session/close`` cancels.
_TURN_BOUND = frozenset({"session/prompt", "session/load", "session/close"})


class Peer:
    """An ACP endpoint playing ``role`` over ``transport``."""

    def __init__(
        self,
        transport: Transport,
        role: Role,
        *,
        validator: SchemaValidator | None = None,
        transcript: Transcript | None = None,
        timeout: float = 30.0,
        max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
        stderr_tail: Callable[[], list[str]] | None = None,
        max_inflight: int = MAX_INFLIGHT,
        outbox_budget: int = OUTBOX_BUDGET,
        strict: bool = False,
    ) -> None:
        self.transport = transport
        self.role = role
        self.validator = validator
        self.transcript = transcript if transcript is not None else Transcript()
        self.timeout = timeout
        # A strict receiver (the reference agent and client) answers lines holding no message
        # (-32700 / -32600, null id); the suite's own peers only record them.
        self.conn = (
            AnsweringConnection(role, self.answer_malformed, max_frame_bytes=max_frame_bytes)
            if strict
            else Connection(role, max_frame_bytes=max_frame_bytes)
        )
        self.events = EventLog()
        self.handlers: dict[str, RequestHandler] = {}
        self.default_handler: RequestHandler | None = None
        self.listeners: list[NotificationListener] = []
        self.closed = anyio.Event()
        self._changed: anyio.Event | None = None  # made by the first waiter (_wait_changed)
        self._responses: dict[tuple[str, Any], Response] = {}
        #: The order our requests went out in (id key -> sequence number): what proves, at EOF,
        #: that the peer had read a request it never answered (``_answered_after``).
        self._sent_seq: dict[tuple[str, Any], int] = {}
        self._sent_count = 0
        #: Our requests no conforming peer would send, sent so on purpose: params the schema
        #: rejects (``validate=False``) or a capability the peer did not advertise (``ungranted``);
        #: id key -> why.  Silence after one is a robustness finding
        #: (``jsonrpc.survives-invalid-input``), not a request left unanswered.
        self._forbidden: dict[tuple[str, Any], str] = {}
        #: Our extension (``_``-prefixed) requests, by id key: a silence is ``ext.request.respond``'s.
        self._extension: set[tuple[str, Any]] = set()
        #: What in a request of ours (method, params) the peer did not advertise, or None: set by
        #: the endpoint that knows its capabilities (``checks.gating.ungranted``).  Such a request
        #: is as forbidden as one the schema rejects.
        self.ungranted: Callable[[str, Any], str | None] | None = None
        #: A request of the peer's that we hold unanswered on purpose, said in words ("" when
        #: none): set by the endpoint that holds (``ClientEndpoint.held_request``).  A peer that
        #: answers nothing while its own request waits on us breaks ``jsonrpc.bidirectional``, or
        #: never answers at all: only releasing tells the two apart (``why_unproven``).
        self.holding: Callable[[], str] | None = None
        #: Responses whose id matched no request of ours (``Response.stray``), and answers without
        #: any id that the core took for responses which lost theirs: how many requests we had sent
        #: when each came, and its id (``IDLESS`` for the latter; ``strays_since``).
        self._strays: deque[tuple[int, Any]] = deque(maxlen=STRAYS_KEPT)
        #: The waiters for each response (``_answer_or``), woken when it (or EOF) arrives, so a
        #: waiter is not woken by every frame of a long stream of updates.
        self._awaited: dict[tuple[str, Any], list[asyncio.Future[None]]] = {}
        self._stderr_tail = stderr_tail or (lambda: [])
        self._tg: anyio.abc.TaskGroup | None = None
        #: The loop we run in, looked up once (``__aenter__``): on Python 3.11 each lookup is a
        #: ``getpid`` system call, and a round trip's wait made two (``_tasks.py``).
        self._loop: asyncio.AbstractEventLoop | None = None
        #: The tasks answering the peer's requests, one each (``_tasks.py``: lighter than ``_tg``'s).
        self._serving = LightTasks(self._serving_failed)
        #: ``bytes -> bytes`` applied to every outgoing frame (``b""`` drops it):
        #: how test peers break the wire format on purpose.  ``None`` in normal use.
        self.wire_filter: Callable[[bytes], bytes] | None = None
        #: Where our frames queue when the peer does not read them (``outbox.py``); a handler's
        #: answer waits there within its byte budget (and keeps its place, so the reader stops too).
        self.outbox = Outbox(transport.send, outbox_budget)
        #: Held while a frame goes to the transport (test peers take it to write a frame in parts).
        self._send_lock = self.outbox.lock
        self.max_inflight = max_inflight
        self._busy = 0  # handlers holding a slot
        self._slot_freed: anyio.Event | None = None  # made by the reader when it must wait
        self._reading_paused = False
        self._watchers: list[Callable[[Event], None]] = []
        self._unterminated_noted = 0
        #: Shared across the connections of a run (the harness sets it): methods whose deadline
        #: passed; ``where`` names this connection in its messages (the test's node id).
        self.deadlines: DeadlineMemory | None = None
        #: Requests of a fuzz search (a campaign, the stateful machine), whose frames differ from run
        #: to run: their missed deadlines make no scripted test give up (``DeadlineMemory``).
        self.searching = False
        self.where = ""
        #: Why this connection may not be lent to another test (``harness.pool``): we sent what a
        #: fresh one would not get.  ``inbound_filter``: keeps an earlier lease's frames out.
        self.tainted = ""
        #: A frame no conforming peer sends that we sent on purpose (``send_raw(forbidden=...)``: a
        #: second response, one to an id never used): what the peer leaves unanswered after it is
        #: robustness, never a MUST finding (``_unanswered``).
        self.provoked = ""
        self.inbound_filter: Callable[[list[Event]], list[Event]] | None = None

    # --------------------------------------------------------------- lifecycle
    async def __aenter__(self) -> Peer:
        self._loop = asyncio.get_running_loop()
        self._tg = anyio.create_task_group()
        await self._tg.__aenter__()
        self._tg.start_soon(self._reader)
        self._tg.start_soon(self.outbox.run)
        return self

    async def __aexit__(self, *exc: Any) -> bool | None:
        assert self._tg is not None
        self._tg.cancel_scope.cancel()
        await self._serving.aclose()
        try:
            suppressed = await self._tg.__aexit__(*exc)
        except BaseExceptionGroup as group:
            # The body's own exception (a failed check, a skip) must reach the
            # caller as itself, not wrapped in a group by our reader task group.
            raise single_exception(group) from None
        if self._serving.error is not None:
            raise self._serving.error  # a handler's task failed: as a task group would raise it
        return suppressed

    def _serving_failed(self, exc: BaseException) -> None:
        if self._tg is not None:
            self._tg.cancel_scope.cancel()  # the body stops; ``__aexit__`` raises ``exc``

    def rebind(self, transcript: Transcript, seed: list[Event]) -> None:
        """Hand this open connection to its next user (``harness.pool``) as if just initialized:
        only the handshake's events (``seed``), nothing of the last user's; nothing outstanding."""
        self.transcript, self.events = transcript, EventLog.of(seed)
        self.handlers, self.default_handler, self.listeners, self._watchers = {}, None, [], []
        self._responses, self._sent_seq, self._sent_count, self._forbidden = {}, {}, 0, {}
        self._extension = set()
        self._strays.clear()
        self.wire_filter, self.tainted, self._unterminated_noted, self.searching = None, "", 0, False
        self.provoked = ""
        self.holding = None  # the next user's endpoint says what it holds (``harness.pool``)
        self.conn.begin_lease()

    def sent(self, key: tuple[str, Any]) -> bool:
        """Whether we sent a request under this id key since the last ``rebind``."""
        return key in self._sent_seq

    def answer_malformed(self, code: int, message: str) -> None:
        """Answer a line that held no message (what a strict receiver's connection reports)."""
        self.start_soon(self._send_malformed_error, code, message)

    async def _send_malformed_error(self, code: int, message: str) -> None:
        with contextlib.suppress(PeerExited):
            await self.respond_error(None, code, message)

    def start_soon(self, fn: Callable[..., Coroutine[Any, Any, Any]], *args: Any) -> None:
        """Run a background task for as long as the peer is open."""
        assert self._tg is not None, "use `async with Peer(...)`"
        self._tg.start_soon(fn, *args)

    def stderr_tail(self) -> list[str]:
        return self._stderr_tail()

    # ----------------------------------------------------------------- reading
    async def _reader(self) -> None:
        # Chunks handled in the loop pass that read them where the transport can (``pump_into``:
        # ``StdioTransport`` on a pipe); pulled otherwise.
        pump_into = getattr(self.transport, "pump_into", None)
        if pump_into is None or not await pump_into(self._received, self._until_slot_free):
            while data := await self.transport.receive():
                if not self._received(data):
                    await self._until_slot_free()
        self._dispatch(self.conn.receive_eof())
        self.transcript.note("peer closed its output (EOF)")
        self.closed.set()
        for waiters in self._awaited.values():
            for waiter in waiters:
                _wake(waiter)
        self._awaited.clear()
        self._notify()

    def _received(self, data: bytes) -> bool:
        """Handle a chunk of the peer's output; False when reading must wait for a free slot."""
        self._dispatch(self.conn.receive_data(data))
        return self._busy < self.max_inflight

    async def _until_slot_free(self) -> None:
        """Backpressure: the peer's pipe fills up and holds it back.  The handlers holding the
        slots are working or waiting for the peer to read our answers; none waits for a frame of
        the peer (those gave up their slot)."""
        while self._busy >= self.max_inflight:
            self._reading_paused = True
            self._slot_freed = self._slot_freed or anyio.Event()
            await self._slot_freed.wait()
        self._reading_paused = False

    def _notify(self) -> None:
        # The event exists only while someone waits: most frames (a stream of updates)
        # arrive with nobody waiting, and an anyio.Event per frame was measurable.
        changed, self._changed = self._changed, None
        if changed is not None:
            changed.set()

    async def _wait_changed(self) -> None:
        """Wait for the next ``_notify`` (callers re-check their condition after it)."""
        if self._changed is None:
            self._changed = anyio.Event()
        await self._changed.wait()

    def _slot_was_freed(self) -> None:
        """Wake the reader if it waits for a slot (its event exists only then, like ``_changed``)."""
        freed, self._slot_freed = self._slot_freed, None
        if freed is not None:
            freed.set()

    def _append(self, ev: Event) -> None:
        """Log an event and show it to the waits watching for one."""
        self.events.append(ev)
        if self._watchers:
            for watch in list(self._watchers):
                watch(ev)

    def _dispatch(self, events: list[Event]) -> None:
        # The core emits a frame's violations just before the frame's message
        # event (same ``index``); they are attached to that transcript entry.
        if self.inbound_filter is not None:
            events = self.inbound_filter(events)
        pending: list[Violation] = []
        for ev in events:
            self._append(ev)
            if isinstance(ev, Violation):
                pending.append(ev)
                if (sid := stray_id(ev)) is not NOT_STRAY:
                    self._strays.append((self._sent_count, sid))
                continue
            entry = self.transcript.add("in", ev.raw, ev.message)
            if pending:
                self._flush([v for v in pending if v.index != ev.index])
                for v in pending:
                    if v.index == ev.index:
                        self.transcript.violation(v, entry)
                pending = []
            if isinstance(ev, Unjudged):
                self.transcript.note(ev.reason)
                continue
            self.validate_inbound(ev, entry)
            if isinstance(ev, Request):
                self._busy += 1
                self._serving.start(self._serve, ev)
            elif isinstance(ev, Notification):
                for listener in list(self.listeners):
                    listener(ev)
            elif not ev.duplicate:  # the first answer is the answer; a second is only evidence
                if ev.stray:
                    self._strays.append((self._sent_count, ev.id))
                key = jsonrpc.id_key(ev.id)
                self._responses[key] = ev
                for waiter in self._awaited.pop(key, ()):
                    _wake(waiter)
        self._flush(pending)
        if events:
            self._notify()

    def _flush(self, violations: list[Violation]) -> None:
        """Record violations that belong to no decoded message."""
        entries: dict[int, Entry] = {}
        for v in violations:
            if v.index is None:
                # Framing-level (blank line, CRLF, oversize, EOF mid-line): a note.
                self.transcript.violation(v)
                continue
            entry = entries.get(v.index)
            if entry is None:
                entry = entries[v.index] = self.transcript.add("in", v.raw or b"")
            self.transcript.violation(v, entry)

    def validate_inbound(self, ev: Request | Notification | Response, entry: Entry) -> None:
        """Judge one received message against the schema (``schema.rules.judge_frame``) and
        record the findings on its transcript entry."""
        for v in judge_frame(self.validator, self.role, ev):
            self.transcript.violation(v, entry)
            self._append(v)

    def flag(
        self,
        clause: str,
        message: str,
        *,
        about: Request | Notification | Response | None = None,
        severity: Severity = "error",
    ) -> Violation:
        """Record a clause violation found by a handler, a wait or a check.

        ``about`` ties it to the inbound frame it concerns, so the transcript
        shows the evidence next to that frame.
        """
        v = Violation(
            clause,
            message,
            severity,
            about.raw[:200] if about is not None else None,
            about.index if about is not None else None,
        )
        entry = None
        if about is not None:
            entry = next((e for e in reversed(self.transcript.entries) if e.raw == about.raw), None)
        self.transcript.violation(v, entry)
        self._append(v)
        self._notify()
        return v

    # ----------------------------------------------------------------- writing
    async def _write(self, data: bytes, message: Any = None, *, raw: bool = False, queue: bool = False) -> None:
        """Put one frame on the wire, after every frame handed over before it.

        ``queue``: when others are ahead, return once the frame is in the outbox
        (within its byte budget) instead of once it is written: how a handler's
        answer leaves its slot free while a peer that does not read its input
        holds the pipe up (at most the one writer on the fast path blocks).
        """
        if self.wire_filter is not None and not raw:
            self.tainted = "frames damaged on purpose"
            # Deliberate damage (broken and hostile test peers): the transcript
            # records exactly what goes on the wire.
            data = self.wire_filter(data)
            if not data:
                return
            raw = True
        self.transcript.add("out", data.rstrip(b"\n") if not raw else data, message)
        if raw:
            self.transcript.note("(previous frame sent raw, deliberately)")
        await self.outbox.put(data, queue=queue)

    def _decoded(self, data: bytes) -> Any:
        """One of our frames as its transcript entry keeps it: decoded again from the bytes (not
        the caller's dict, which the caller may change after sending), unless the transcript
        keeps no messages of ours (``Transcript.keeps_sent``): a mock's log saves the parse."""
        return _loads(data) if self.transcript.keeps_sent else None

    def _stall(self) -> str:
        """Why we are not reading, when we are not (for timeout messages)."""
        if not self._reading_paused:
            return ""
        return (
            f" (we stopped reading the peer's output: {self._busy} of its requests are in flight and "
            f"{self.outbox.queued_bytes} bytes of our answers wait for it to read its input)"
        )

    def note_unterminated(self) -> None:
        """Put the line the peer began and has not ended into the transcript, as a note.

        At a deadline the decoder may hold half a frame: the "stream ended in the middle of
        a line" violation comes only at EOF, after the verdict, so without this the bytes
        would be shown nowhere.  Noted again only when more bytes came.
        """
        n, head = self.conn.unterminated()
        if n == 0 or n == self._unterminated_noted:
            return
        self._unterminated_noted = n
        self.transcript.note(unterminated_note(n, head))

    async def drain(self) -> None:
        """Return once every frame already handed to the writer is on the wire (answers are
        settled before their bytes are written or queued): before closing our output, so no
        answer is cut off by our own EOF."""
        await self.outbox.drain()

    def expect_raw_answer(self, rid: Any, method: str) -> None:
        """Treat ``rid`` as the id of a request we are about to write raw (``send_raw``): its
        answer is paired with ``method``, validated, and awaited by ``wait_response`` (an
        earlier answer under the same id, e.g. to our own setup request, no longer counts)."""
        self.conn.forget_outgoing(rid)
        self.conn.send_request(method, None, id=rid)  # registers the id; the bytes are not sent
        self._responses.pop(jsonrpc.id_key(rid), None)

    async def send_raw(self, data: bytes, *, forbidden: str = "") -> None:
        """Write bytes exactly as given: for deliberately malformed input.  ``forbidden``: what
        makes them a frame no conforming peer sends, when they are one (``provoked``)."""
        self.tainted = "raw bytes sent"
        if forbidden:
            self.provoked = forbidden
        self.conn.note_raw_sent()
        await self._write(data, None, raw=True)

    def _check_outbound(self, what: str, issues: list[Any], validate: bool) -> None:
        if validate and issues:
            i = issues[0]
            raise LocalProtocolError(f"refusing to send invalid {what}: {i.message} at {i.path or '/'}")

    async def send_request(self, method: str, params: Any = None, *, id: Any = None, validate: bool = True) -> Any:
        """Send a request without waiting; returns its id.  ``PeerGaveUp`` (nothing sent) when the
        peer already let this method's deadline pass twice in the run (``DeadlineMemory``)."""
        if self.deadlines is not None:
            self.deadlines.check(method, search=self.searching)
        issues: list[Any] = []
        if not validate:
            self.tainted = "a request sent unvalidated"
        if self.validator is not None:
            # Validated either way: a request the schema rejects, sent on purpose, must be known
            # for what it is when its answer does not come (``_unanswered``).
            spec = self.validator.spec(method)
            if spec is not None and spec.request is not None:
                issues = self.validator.validate(spec.request, params if params is not None else {})
                self._check_outbound(f"{method} params", issues, validate)
        rid, data = self.conn.send_request(method, params, id=id)
        key = jsonrpc.id_key(rid)
        self._responses.pop(key, None)  # an id reused later waits for its own answer
        self._forbidden.pop(key, None)
        if method.startswith("_"):
            self._extension.add(key)
        else:
            self._extension.discard(key)
        if issues:
            self._forbidden[key] = f"params the schema rejects: {issues[0].message} at {issues[0].path or '/'}"
        elif self.ungranted is not None and (gated := self.ungranted(method, params)):
            self._forbidden[key] = f"a request {gated}"
        self._sent_count += 1
        self._sent_seq[key] = self._sent_count
        await self._write(data, self._decoded(data))
        return rid

    async def notify(self, method: str, params: Any = None, *, validate: bool = True) -> None:
        if not validate:
            self.tainted = "a notification sent unvalidated"
        if self.validator is not None and validate:
            spec = self.validator.spec(method)
            if spec is not None and spec.notification is not None:
                self._check_outbound(
                    f"{method} params",
                    self.validator.validate(spec.notification, params if params is not None else {}),
                    validate,
                )
        data = self.conn.send_notification(method, params)
        await self._write(data, self._decoded(data))

    async def respond(
        self,
        request_id: Any,
        result: Any,
        *,
        method: str | None = None,
        validate: bool = True,
    ) -> None:
        if not validate:
            self.tainted = "an answer sent unvalidated"
        if self.validator is not None and validate and method is not None:
            self._check_outbound(
                f"{method} result",
                self.validator.check_result(method, result),
                validate,
            )
        data = self.conn.send_result(request_id, result)
        await self._write(data, self._decoded(data))

    async def respond_error(self, request_id: Any, code: int, message: str, data: Any = None) -> None:
        frame = self.conn.send_error(request_id, code, message, data)
        await self._write(frame, self._decoded(frame))

    # -------------------------------------------------------------- requesting
    async def call(
        self,
        method: str,
        params: Any = None,
        *,
        timeout: float | None = None,
        validate: bool = True,
        id: Any = None,
    ) -> Response:
        """Send a request and wait for its response event (result or error)."""
        rid = await self.send_request(method, params, validate=validate, id=id)
        return await self.wait_response(rid, method=method, timeout=timeout)

    async def wait_response(
        self, rid: Any, *, method: str = "request", timeout: float | None = None, flag: bool = True
    ) -> Response:
        """The response to our request ``rid``.  No answer by the deadline (or before the peer
        closed its output) is ``PeerTimeout`` / ``PeerExited`` and, unless ``flag`` is false (a
        caller that judges the silence itself), a violation of the clause ``_unanswered`` picks
        (``charged``), or none when ``why_unproven`` says the silence is not proven."""
        key = jsonrpc.id_key(rid)
        limit = self.timeout if timeout is None else timeout
        self._leave_slot()
        loop = self._loop or asyncio.get_running_loop()
        deadline = loop.time() + limit
        # The log's position half way through the wait: turn output after it is a turn still at work.
        halfway: int | None = None
        while True:
            resp = self._responses.get(key)
            if resp is not None:
                return resp
            if self.closed.is_set():
                msg = f"the peer closed its output before answering {method} (id {rid!r})"
                later = self._answered_after(key)
                unproven = self.why_unproven(rid)
                if unproven:
                    msg += f"; {unproven}"
                charged = ""
                if not unproven and flag:
                    charged = self._unanswered(key, f"{msg}, though it answered {later} sent after it")
                exited = PeerExited(msg, None, self.stderr_tail(), read_proven=later is not None, unproven=unproven)
                exited.charged = charged
                raise exited
            left = deadline - loop.time()
            if halfway is None and left <= limit / 2:
                halfway = len(self.events)
            if left <= 0:
                break
            await self._answer_or(key, left - limit / 2 if halfway is None else left)
        msg = f"no response to {method} (id {rid!r}) within {limit:g} s{self._stall()}"
        self.note_unterminated()
        working = self.turn_in_progress(method, halfway)
        if working:
            # A turn still streaming in the second half of the wait is at work, not silent: the spec
            # sets no time for a turn (nor for winding one down after session/cancel or a close), so
            # no clause is charged with it and no deadline is remembered against the peer.
            msg += f", though the peer kept streaming turn output ({working})"
            raise PeerTimeout(msg, self.stderr_tail(), unproven=f"{method} (id {rid!r}) is still being worked on")
        unproven = self.why_unproven(rid)
        if unproven:
            # The deadline was still spent without an answer under its id: remembered, so a peer
            # that does this to every request costs two deadlines, not one per test
            # (``DeadlineMemory``).
            msg += f"; {unproven}"
        silence = PeerTimeout(msg, self.stderr_tail(), unproven=unproven)
        if flag:
            silence.charged = self._missed(key, method, msg, limit, unanswered=not unproven)
        raise silence

    async def _answer_or(self, key: tuple[str, Any], seconds: float) -> None:
        """Wait until the answer under ``key`` (or EOF) arrives or ``seconds`` pass.

        A future of this waiter's own and a timer: a round trip's wait, without the cancel scope
        and event a deadline would cost on every request (``_tasks.py`` says why that counts).
        Its own, so that cancelling one waiter never wakes another waiting for the same id."""
        loop = self._loop or asyncio.get_running_loop()
        waiter: asyncio.Future[None] = loop.create_future()
        waiters = self._awaited.setdefault(key, [])
        waiters.append(waiter)
        timer = loop.call_later(seconds, _wake, waiter)
        try:
            await waiter
        finally:
            timer.cancel()
            if waiter in waiters:
                waiters.remove(waiter)
                if not waiters:
                    self._awaited.pop(key, None)

    def strays_since(self, rid: Any) -> list[Any]:
        """The ids of responses matching no request of ours that came after we sent ``rid``
        (``IDLESS`` for an error without any id that answers no notification of ours).

        The one rule for a request of ours left without an answer under its own id while such a
        response came: that response may be its answer under the wrong id, or with its id lost, a
        breach of ``jsonrpc.response-id-echo`` the connection has flagged on it; that the request
        went unanswered is then not proven (no ``jsonrpc.every-request-answered`` finding).
        Pairing the two is not proven either, so nothing else is taken from that response."""
        seq = self._sent_seq.get(jsonrpc.id_key(rid))
        if seq is None:
            return []
        return [sid for sent, sid in self._strays if sent >= seq]

    async def answer_under_id(
        self, method: str, params: Any, rid: Any, *, timeout: float | None = None, validate: bool = True
    ) -> IdAnswer:
        """Send ``method`` under the id ``rid`` and wait for its answer (``jsonrpc.id-types``).

        The caller sends it as the only request of ours in flight, so an error with id null, or
        without any id, that comes meanwhile answers it: the peer could not read the request
        under that id.  Such an error is judged by the caller, on ``jsonrpc.id-types`` (one
        defect, one clause), so the core's finding on an error without an id is set aside, and
        the request is no longer awaited (a late answer under its id would be no stray)."""
        key = jsonrpc.id_key(rid)
        mark = len(self.events)
        await self.send_request(method, params, id=rid, validate=validate)

        def answers(ev: Event) -> bool:
            return (isinstance(ev, Response) and jsonrpc.id_key(ev.id) == key) or unread_answer(ev)

        try:
            came = await self.wait_for(answers, timeout=timeout, what=f"an answer to {method} (id {rid!r})", start=mark)
        except PeerError as exc:
            return IdAnswer(silence=exc.message, exited=isinstance(exc, PeerExited), unproven=self.why_unproven(rid))
        if isinstance(came, Response) and came.id is not None:
            return IdAnswer(response=came)
        self.conn.allow_unpaired(rid)
        self.conn.forget_outgoing(rid)
        raw = bytes(came.raw or b"")[:200].decode("utf-8", "replace")
        if isinstance(came, Violation):
            self.transcript.set_aside(
                [came], f"an error without an id answering {method} under id {rid!r}: jsonrpc.id-types"
            )
            return IdAnswer(unread="an error without any id", raw=raw)
        return IdAnswer(unread="an error with id null", raw=raw)

    def turn_in_progress(self, method: str, since: int | None) -> str:
        """The turn output the peer streamed from the log's position ``since`` on (taken half way
        through a wait for our ``method`` request's answer; ``None`` when the wait ended sooner),
        when ``method`` is bound to a turn; else "".

        The one reading of "still at work" for a wait on such a request that ended without its
        answer (``wait_response``, the scenario engine's steps): the spec sets no time for a turn,
        nor for winding one down after ``session/cancel`` or a close, so a turn streaming in the
        second half of the wait is at work, not silent, and no clause is charged with it."""
        if since is None or method not in _TURN_BOUND:
            return ""
        return turn_output(self.events[since:])

    def why_unproven(self, rid: Any) -> str:
        """Why our request ``rid``, still without an answer under its id, is not proven unanswered
        (``jsonrpc.every-request-answered``), or "" when it is.  The one rule, for every judge of
        a missing answer (``wait_response``, the stateful machine, the fuzz campaigns):

        * the peer closed its output and answered nothing we sent after ``rid``: a peer that exits
          (a crash, a defect of its own, a deliberate quit) may never have read it;
        * a response under an id matching no request of ours came after ``rid`` was sent
          (``strays_since``): perhaps its answer under the wrong id, one breach, of the echo
          clause (flagged on that response), not also a request left unanswered;
        * we held a request of the peer's unanswered (``holding``): a peer that serves nothing
          while its own request waits on us answers once we do.  That is one defect,
          ``jsonrpc.bidirectional``'s, whose test releases the request to tell it from a request
          never answered; the silence is not also a request left unanswered."""
        key = jsonrpc.id_key(rid)
        if self.closed.is_set() and self._answered_after(key) is None:
            return "nothing shows it had read the request (it answered nothing we sent after it)"
        held = self.held_by_us()
        if held:
            return (
                f"meanwhile we held a request of the peer's ({held}): a peer that waits on it answers only "
                "once it is answered (jsonrpc.bidirectional's finding, judged by its own test), so no answer "
                "is not proven"
            )
        strays = self.strays_since(rid)
        if not strays:
            return ""
        return (
            f"{stray_words(strays[0])} came meanwhile: perhaps its answer under the wrong id or with its id "
            "lost (jsonrpc.response-id-echo), so no answer is not proven"
        )

    def held_by_us(self) -> str:
        """A request of the peer's we hold unanswered on purpose (``holding``), or ""."""
        return self.holding() if self.holding is not None else ""

    def _answered_after(self, key: tuple[str, Any]) -> str | None:
        """A request of ours sent after ``key`` that the peer answered (``"id N"``), or None.

        The one proof that a peer which closed its output had read our request ``key``: its
        input is ordered, so answering a later request means it read past this one."""
        seq = self._sent_seq.get(key)
        if seq is None:
            return None
        for other in self._responses:
            if self._sent_seq.get(other, -1) > seq:
                return f"our request id {other[1]!r}"
        return None

    def _missed(self, key: tuple[str, Any], method: str, message: str, limit: float, *, unanswered: bool = True) -> str:
        """Our ``method`` request ``key`` went unanswered for ``limit`` seconds: ``_unanswered``
        (unless ``unanswered`` is false: ``why_unproven``) and, for a full deadline (not a test's
        short observation window), one miss in the run's ``DeadlineMemory``: not for a forbidden
        request (``_forbidden``), whose silence says nothing of how the peer answers valid ones,
        nor while we held a request of the peer's (``holding``), a silence we provoked."""
        charged = self._unanswered(key, message) if unanswered else ""
        provoked = key in self._forbidden or bool(self.provoked) or bool(self.held_by_us())
        if self.deadlines is not None and limit >= self.timeout and not provoked:
            self.deadlines.missed(method, self.where or "an earlier test", search=self.searching)
        return charged

    def _unanswered(self, key: tuple[str, Any], message: str) -> str:
        """The one place a request of ours proven unanswered is charged, once, and to which clause
        (returned):

        * ``jsonrpc.survives-invalid-input`` for one no conforming peer would send (``_forbidden``:
          sent so on purpose), or any, once we have sent such a frame on this connection
          (``provoked``): a finding provoked by input the spec forbids us to send is a
          robustness finding, never a MUST's;
        * ``ext.request.respond`` for an extension (``_``-prefixed) request: extensibility.mdx's
          MUST for exactly these, narrower than JSON-RPC's rule for every request;
        * ``jsonrpc.every-request-answered`` for any other."""
        why = self._forbidden.get(key)
        if why is not None:
            clause = "jsonrpc.survives-invalid-input"
            message = (
                f"{message}: sent on purpose, {why}; no conforming peer sends such a request, so its "
                "silence is no jsonrpc.every-request-answered finding"
            )
        elif self.provoked:
            clause = "jsonrpc.survives-invalid-input"
            message = (
                f"{message}, after we had sent on purpose {self.provoked}, which no conforming peer sends: "
                "its silence then is robustness, no jsonrpc.every-request-answered finding"
            )
        elif key in self._extension:
            clause = "ext.request.respond"
            message = f"{message}: an extension (_-prefixed) request, which the receiver must answer as any other"
        else:
            clause = "jsonrpc.every-request-answered"
        self.flag(clause, message)
        return clause

    async def request(
        self,
        method: str,
        params: Any = None,
        *,
        timeout: float | None = None,
        validate: bool = True,
    ) -> Any:
        """Send a request and return its result; an error answer raises ``RpcError``."""
        resp = await self.call(method, params, timeout=timeout, validate=validate)
        if resp.is_error:
            err = resp.error if isinstance(resp.error, dict) else {}
            raise RpcError(method, err.get("code"), err.get("message"), err.get("data"))
        return resp.result

    # ---------------------------------------------------------------- waiting
    async def wait_for(
        self,
        predicate: Callable[[Event], bool],
        *,
        timeout: float | None = None,
        what: str = "event",
        start: int = 0,
        awaiting: str | None = None,
    ) -> Event:
        """First event from position ``start`` on satisfying ``predicate``.

        Events arriving during the wait are shown to ``predicate`` as they are logged
        (a watcher), so a flood that makes the log drop older events cannot hide
        the one awaited; of those already logged, the kept ones are searched.
        ``awaiting``: the method of our request whose progress (or answer) this waits
        for; a full deadline passing is remembered against it (``DeadlineMemory``).
        """
        limit = self.timeout if timeout is None else timeout
        self._leave_slot()
        for ev in self.events[start:]:
            if predicate(ev):
                return ev
        found: list[Event] = []
        failed: list[BaseException] = []

        def watch(ev: Event) -> None:
            if found or failed:
                return
            try:
                if predicate(ev):
                    found.append(ev)
            except Exception as exc:  # raised in the waiter, not in the reader
                failed.append(exc)

        self._watchers.append(watch)
        try:
            with anyio.move_on_after(limit):
                while True:
                    if failed:
                        raise failed[0]
                    if found:
                        return found[0]
                    if self.closed.is_set():
                        raise PeerExited(
                            f"the peer closed its output while we waited for {what}",
                            None,
                            self.stderr_tail(),
                        )
                    await self._wait_changed()
        finally:
            self._watchers.remove(watch)
        self.note_unterminated()
        if awaiting is not None and limit >= self.timeout:
            pending = [rid for rid, m in self.conn.pending_outgoing if m == awaiting]
            working = turn_output(self.events[start:])
            if pending and working:
                # Streaming turn output (for any session: a wrong sessionId is its own clause's) is
                # work in progress; what we waited for not coming proves no request unanswered.
                raise PeerTimeout(
                    f"no {what} within {limit:g} s, though the peer kept streaming turn output ({working}): "
                    f"{awaiting} (id {pending[0]!r}) is still being worked on, not judged unanswered",
                    self.stderr_tail(),
                )
            if pending:
                unproven = self.why_unproven(pending[0])
                why = f" within {limit:g} s{self._stall()}" + (f"; {unproven}" if unproven else "")
                silence = PeerTimeout(f"no {what}{why}", self.stderr_tail(), unproven=unproven)
                silence.charged = self._missed(
                    jsonrpc.id_key(pending[0]),
                    awaiting,
                    f"no {what}, and no response to {awaiting} (id {pending[0]!r}),{why}",
                    limit,
                    unanswered=not unproven,
                )
                raise silence
        raise PeerTimeout(f"no {what} within {limit:g} s{self._stall()}", self.stderr_tail())

    def _leave_slot(self) -> None:
        """A handler about to wait on the peer gives up its slot: the reader must read on."""
        slot = _SLOT.get()
        if slot is not None and slot.peer is self:
            slot.release()

    async def wait_closed(self, timeout: float) -> bool:
        with anyio.move_on_after(timeout):
            await self.closed.wait()
            return True
        return False

    async def quiet_for(self, seconds: float, predicate: Callable[[Event], bool], start: int = 0) -> Event | None:
        """Return the first matching event within ``seconds``, or None if none came."""
        try:
            return await self.wait_for(predicate, timeout=seconds, start=start)
        except PeerTimeout:
            return None
        except PeerExited:
            return None

    # ---------------------------------------------------------------- serving
    async def _serve(self, req: Request) -> None:
        """Answer one request of the peer, holding a slot (taken in ``_dispatch``) until the
        answer is queued or the handler first waits on the peer."""
        slot = _Slot(self)
        _SLOT.set(slot)
        try:
            await self._answer(req)
        except (PeerExited, LocalProtocolError):
            # The peer is gone, or the handler already answered; nothing left to tell it.
            pass
        finally:
            slot.release()

    async def _answer(self, req: Request) -> None:
        handler = self.handlers.get(req.method, self.default_handler)
        if handler is None:
            await self._queue_error(req.id, jsonrpc.ErrorCode.METHOD_NOT_FOUND, f"method not found: {req.method}")
            return
        try:
            result = await handler(req)
        except HandlerError as exc:
            await self._queue_error(req.id, exc.code, exc.message, exc.data)
            return
        except (PeerExited, LocalProtocolError):
            raise
        except Exception as exc:
            # A bug in our handler must not take the connection down: the
            # peer still gets its one answer, and the transcript says why.
            self.transcript.note(f"internal error in the {req.method} handler: {type(exc).__name__}: {exc}")
            await self._queue_error(req.id, jsonrpc.ErrorCode.INTERNAL_ERROR, f"internal error: {exc}")
            return
        if result is NO_ANSWER:
            return
        data = self.conn.send_result(req.id, result)
        await self._write(data, self._decoded(data), queue=True)

    async def _queue_error(self, request_id: Any, code: int, message: str, data: Any = None) -> None:
        frame = self.conn.send_error(request_id, code, message, data)
        await self._write(frame, self._decoded(frame), queue=True)

    # ------------------------------------------------------------------ state
    def violations(self) -> list[Violation]:
        return [e for e in self.events if isinstance(e, Violation)]

    def notifications(self, method: str | None = None) -> list[Notification]:
        return [e for e in self.events if isinstance(e, Notification) and (method is None or e.method == method)]

    def requests(self, method: str | None = None) -> list[Request]:
        return [e for e in self.events if isinstance(e, Request) and (method is None or e.method == method)]


def _wake(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


def _loads(data: bytes) -> Any:
    """Our own frame, decoded again for the transcript (exact for the few frames orjson cannot read back)."""
    return jsonrpc.decode(data.rstrip(b"\n"))[0]
