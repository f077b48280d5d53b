"""The sans-IO JSON-RPC connection, symmetric in role.

``Connection(Role.CLIENT)`` is the client side of a conversation with an
agent, ``Connection(Role.AGENT)`` the agent side.  Bytes go in through
``receive_data``/``receive_eof`` and come out as events; messages go out
through ``send_*`` and come back as bytes to write.  Request ids are
tracked in both directions, independently (ACP id spaces are per sender):
our outstanding requests, and the peer's requests we still owe an answer.

Peer mistakes become ``Violation`` events.  Our own mistakes (answering an
id we were never asked, sending a malformed envelope) raise
``LocalProtocolError`` because they are bugs in the caller, not evidence
about the peer.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import orjson

from acp_conformance.core import jsonrpc
from acp_conformance.core.events import (
    Event,
    Notification,
    Request,
    Response,
    Unjudged,
    Violation,
)
from acp_conformance.core.framing import DEFAULT_MAX_FRAME_BYTES, FrameDecoder, RawFrame
from acp_conformance.core.ids import answerable, other_spelling
from acp_conformance.errors import LocalProtocolError

#: How much of an answer without an id its violation keeps (others keep 200 bytes): enough to read
#: it back whole as what it is, an error answering a line of ours (zed's carry the line in ``data``).
IDLESS_RAW = 65536

__all__ = ["AnsweringConnection", "Connection", "Role", "idless_error"]


def idless_error(ev: object) -> dict[str, Any] | None:
    """The error in ``ev`` when it is an answer without an ``id`` member at all, else None.

    The core logs such an answer as a violation (``Connection._idless``), not as a ``Response``:
    nothing pairs it with a request.  Its readers decide what it answered: a fuzz example takes it
    for the peer's word on a line it could not or would not read, a scripted test for its one
    request in flight, and ``Peer.strays_since`` for a possible answer whose id got lost."""
    if not isinstance(ev, Violation) or not ev.raw:
        return None
    try:
        msg = orjson.loads(ev.raw)
    except orjson.JSONDecodeError:
        return None
    if isinstance(msg, dict) and "error" in msg and not msg.keys() & {"id", "method", "result"}:
        return msg
    return None


class Role(enum.Enum):
    """Which side of ACP an endpoint plays."""

    AGENT = "agent"
    CLIENT = "client"

    @property
    def other(self) -> Role:
        return Role.CLIENT if self is Role.AGENT else Role.AGENT


class Connection:
    """JSON-RPC 2.0 state for one ACP byte stream, seen from ``our_role``."""

    #: Judge the members of a batch line as messages (see ``receive_frame``).  A strict receiver
    #: (``AnsweringConnection``) refuses the line instead, as the mocks do.
    unpack_batches = True

    def __init__(
        self,
        our_role: Role,
        *,
        max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
        first_id: int = 0,
    ) -> None:
        self.our_role = our_role
        self.their_role = our_role.other
        self._decoder = FrameDecoder(max_frame_bytes)
        self._next_id = first_id
        # id_key -> (id, method) for requests we sent and the peer has not answered.
        self._outgoing: dict[tuple[str, Any], tuple[Any, str]] = {}
        # id_key -> method for requests already answered (to spot duplicates).
        self._answered: dict[tuple[str, Any], str] = {}
        # id_key -> (id, method) for the peer's requests we still owe an answer.
        self._incoming: dict[tuple[str, Any], tuple[Any, str]] = {}
        # id_keys of raw frames we wrote ourselves (malformed on purpose): answers under them are
        # neither paired with a method nor flagged, however many come.
        self._unpaired: set[tuple[str, Any]] = set()
        #: Methods of the notifications we sent, and whether we ever wrote a raw frame: what an
        #: answer without an id can have answered (see ``_idless``).
        self._notified: set[str] = set()
        self._raw_sent = False
        self.inbound_frames = 0
        self.eof = False

    # ------------------------------------------------------------------ inbound
    def receive_data(self, data: bytes) -> list[Event]:
        """Feed bytes read from the peer; return the events they complete."""
        return self._process(self._decoder.feed(data))

    def receive_eof(self) -> list[Event]:
        """The peer closed its output; report any half-written frame."""
        self.eof = True
        return self._process(self._decoder.feed_eof())

    def _process(self, items: list[RawFrame | Violation]) -> list[Event]:
        out: list[Event] = []
        for item in items:
            if isinstance(item, Violation):
                out.append(item)
            else:
                out.extend(self.receive_frame(item.data))
        return out

    def receive_frame(self, data: bytes) -> list[Event]:
        """Handle one complete frame (without its newline)."""
        index = self.inbound_frames
        self.inbound_frames += 1
        msg, problems = jsonrpc.decode(data)
        if not problems and type(msg) is dict:  # almost every frame: no list to build and extend
            return self._message(msg, data, index)
        out: list[Event] = [
            Unjudged(data, v.message, index) if v.clause_id == jsonrpc.BEYOND_LIMIT else self._hygiene(_at(v, index))
            for v in problems
        ]
        if msg is None:
            return out
        if self.unpack_batches and isinstance(msg, list) and msg and all(isinstance(m, dict) for m in msg):
            # A batch: ACP frames one message per line, and that is the one thing wrong with it.
            # The clause is broken once (the batch's violation); its members are judged as the
            # messages they are, so the update-based and answer-based checks see the replay, the
            # tool calls and the answers it carries instead of charging their absence to other
            # clauses.  Each member's evidence is its own bytes, re-encoded (the line is in the
            # batch's violation).
            _, problems = jsonrpc.classify(msg, data)
            out.extend(self._hygiene(_at(v, index)) for v in problems)
            for member in msg:
                out.extend(self._message(member, jsonrpc.dumps(member), index))
            return out
        out.extend(self._message(msg, data, index))
        return out

    def _message(self, msg: Any, data: bytes, index: int) -> list[Event]:
        """The events of one decoded value: its envelope violations, then its message."""
        kind, problems = jsonrpc.classify(msg, data)
        if kind == "notification" and not problems:  # the stream of a turn: its updates
            return [_notification(msg, data, index)]
        out: list[Event] = []
        if problems:
            if kind is None and isinstance(msg, dict) and "id" not in msg and ("result" in msg or "error" in msg):
                problems = [
                    self._idless(msg, v, data) if v.clause_id == "jsonrpc.response-id-echo" else v for v in problems
                ]
            out.extend(self._hygiene(_at(v, index)) for v in problems)
        if kind == "request":
            out.extend(self._on_request(msg, data, index))
        elif kind == "notification":
            out.append(_notification(msg, data, index))
        elif kind == "response":
            out.extend(self._on_response(msg, data, index))
        return out

    def _idless(self, msg: dict[str, Any], v: Violation, data: bytes) -> Violation:
        """An answer with no ``id`` member: which rule it breaks.

        The violation keeps the frame whole up to ``IDLESS_RAW`` bytes (not clipped like others'):
        a fuzz example reads it as the answer to its frame (``fuzz.campaign._idless_error``).

        It answers one of our notifications (``jsonrpc.answered_notification_clause``) when it names
        one (its error data or message holds the method of a notification we sent), or when
        nothing else of ours can be answered without an id: we never wrote a malformed frame (an
        unreadable id may be answered with a null one) and every request of ours has been answered
        under its own id.  Otherwise it is a response that dropped its id (``response-id-echo``).
        """
        err = msg.get("error")
        text = ""
        if isinstance(err, dict):
            text = f"{err.get('message')!s} {jsonrpc.dumps(err.get('data')).decode('utf-8', 'replace')}"
        named = sorted(m for m in self._notified if m in text)
        if named:
            why = f"it names our notification {named[0]}"
        elif self._notified and not self._raw_sent and not self._outgoing:
            why = "we wrote no malformed frame and no request of ours is unanswered, so it answers a notification"
        elif self._raw_sent and "error" in msg:
            # An error for a frame we malformed on purpose (which the spec forbids a peer to send):
            # JSON-RPC wants its id null, but how a receiver copes with such input is robustness.
            return Violation(
                "jsonrpc.survives-invalid-input",
                "an error without an id (JSON-RPC wants id null), after a malformed frame of ours",
                v.severity,
                data[:IDLESS_RAW],
                v.index,
            )
        else:
            return replace(v, raw=data[:IDLESS_RAW])
        kind = "an error" if "error" in msg else "a result"
        return Violation(
            jsonrpc.answered_notification_clause(named[0] if named else None),
            f"{kind} without an id answering a notification ({why}): notifications are never answered",
            v.severity,
            data[:IDLESS_RAW],
            v.index,
        )

    def begin_lease(self) -> None:
        """The connection passes to a new user (a pooled connection's next test): the notifications
        an earlier user sent no longer explain an answer without an id (``_idless``)."""
        self._notified.clear()

    def note_raw_sent(self) -> None:
        """We wrote bytes ourselves (a malformed frame on purpose): an answer without an id may be to them."""
        self._raw_sent = True

    def _hygiene(self, v: Violation) -> Violation:
        """Non-protocol output breaks the sender's stream-hygiene clause."""
        if v.clause_id != jsonrpc.NOT_PROTOCOL:
            return v
        clause = "transport.stdio.stdout-clean" if self.their_role is Role.AGENT else "transport.stdio.stdin-clean"
        return Violation(clause, v.message, v.severity, v.raw, v.index)

    def _on_request(self, msg: dict[str, Any], data: bytes, index: int) -> list[Event]:
        out: list[Event] = []
        rid = msg["id"]
        method = msg["method"]
        key = jsonrpc.id_key(rid)
        if key in self._incoming:
            out.append(
                Violation(
                    "jsonrpc.request-shape",
                    f"request id {rid!r} reused while the earlier {self._incoming[key][1]} "
                    "with that id is still unanswered",
                    raw=data[:200],
                    index=index,
                )
            )
        else:
            self._incoming[key] = (rid, method)
        out.append(
            Request(
                id=rid,
                method=method,
                params=msg.get("params"),
                raw=data,
                index=index,
                has_params="params" in msg,
                message=msg,
            )
        )
        return out

    def _on_response(self, msg: dict[str, Any], data: bytes, index: int) -> list[Event]:
        out: list[Event] = []
        rid = msg["id"]
        key = jsonrpc.id_key(rid)
        is_error = "error" in msg and "result" not in msg
        method: str | None = None
        duplicate = stray = False
        if key in self._outgoing:
            method = self._outgoing.pop(key)[1]
            self._answered[key] = method
        elif key in self._unpaired:
            pass  # an answer to a frame we wrote raw: whoever sent it judges it
        elif (near := _near_key(rid, self._outgoing)) is not None:
            # "0" for our 0 (or 5 for our "5"): the classic echo bug.  It is one breach, of the
            # echo clause, and this is the answer to that request: paired, so the request is not
            # also charged as unanswered (and waited for until its deadline).  The event carries
            # the id of the request it answers; the peer's spelling stays in ``message``/``raw``.
            sent, method = self._outgoing.pop(near)
            self._answered[near] = method
            out.append(
                Violation(
                    "jsonrpc.response-id-echo",
                    f"response to id {rid!r} answers our request {sent!r} ({method}): the id must keep its JSON type",
                    raw=data[:200],
                    index=index,
                )
            )
            rid = sent
        elif key in self._answered:
            method = self._answered[key]
            duplicate = True
            out.append(
                Violation(
                    "jsonrpc.no-duplicate-response",
                    f"second response to request id {rid!r} ({method}), which was already answered",
                    raw=data[:200],
                    index=index,
                )
            )
        elif not (rid is None and is_error):
            # A null id is legitimate on errors for frames the peer could not parse.
            stray = True
            out.append(
                Violation(
                    "jsonrpc.response-id-echo",
                    f"response to id {rid!r}, which matches no request we sent" + _near_miss(rid, self._answered),
                    raw=data[:200],
                    index=index,
                )
            )
        out.append(
            Response(
                id=rid,
                result=msg.get("result"),
                error=msg.get("error"),
                is_error=is_error,
                method=method,
                duplicate=duplicate,
                raw=data,
                index=index,
                message=msg,
                stray=stray,
            )
        )
        return out

    # ----------------------------------------------------------------- outbound
    def next_request_id(self) -> int:
        """The next free integer id: ids a caller chose itself (``send_request(id=...)``,
        e.g. the fuzzer registering a raw frame's id) are skipped while outstanding."""
        while True:
            rid = self._next_id
            self._next_id += 1
            if jsonrpc.id_key(rid) not in self._outgoing:
                return rid

    def send_request(self, method: str, params: Any = None, *, id: Any = None) -> tuple[Any, bytes]:
        """Serialize a request; returns ``(id, bytes)``. ``params=None`` omits params."""
        if not isinstance(method, str):
            raise LocalProtocolError("method must be a string")
        rid = self.next_request_id() if id is None else id
        if not jsonrpc.is_valid_id(rid):
            raise LocalProtocolError(f"invalid request id {rid!r}")
        key = jsonrpc.id_key(rid)
        if key in self._outgoing:
            raise LocalProtocolError(f"request id {rid!r} is already outstanding")
        self._answered.pop(key, None)
        self._outgoing[key] = (rid, method)
        msg: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
        if params is not None:
            msg["params"] = params
        return rid, jsonrpc.dumps(msg) + b"\n"

    def send_notification(self, method: str, params: Any = None) -> bytes:
        self._notified.add(method)
        msg: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            msg["params"] = params
        return jsonrpc.dumps(msg) + b"\n"

    def send_result(self, id: Any, result: Any) -> bytes:
        self._settle(id)
        return jsonrpc.dumps({"jsonrpc": "2.0", "id": id, "result": result}) + b"\n"

    def send_error(self, id: Any, code: int, message: str, data: Any = None) -> bytes:
        if id is not None:
            self._settle(id)
        err: dict[str, Any] = {"code": int(code), "message": message}
        if data is not None:
            err["data"] = data
        return jsonrpc.dumps({"jsonrpc": "2.0", "id": id, "error": err}) + b"\n"

    def _settle(self, id: Any) -> None:
        key = jsonrpc.id_key(id)
        if key not in self._incoming:
            raise LocalProtocolError(f"no outstanding request with id {id!r} to answer")
        del self._incoming[key]

    def allow_unpaired(self, id: Any) -> None:
        """Accept answers under ``id`` without pairing or flagging them, until ``forget_unpaired``.

        For frames written raw (a fuzzer's malformed request, an id reused on purpose): the
        core cannot know what they asked, so judging their answers is the sender's business.
        """
        key = jsonrpc.id_key(id)
        self._answered.pop(key, None)
        self._unpaired.add(key)

    def forget_unpaired(self, id: Any) -> None:
        self._unpaired.discard(jsonrpc.id_key(id))

    def forget_outgoing(self, id: Any) -> None:
        """Stop expecting an answer (e.g. the request's deadline passed)."""
        self._outgoing.pop(jsonrpc.id_key(id), None)

    def forget_incoming(self, id: Any) -> None:
        """Owe no answer under this id any more (e.g. the request was refused as invalid with a null id)."""
        self._incoming.pop(jsonrpc.id_key(id), None)

    # -------------------------------------------------------------------- state
    @property
    def pending_outgoing(self) -> list[tuple[Any, str]]:
        """Our requests the peer has not answered yet, as ``(id, method)``."""
        return list(self._outgoing.values())

    @property
    def pending_incoming(self) -> list[tuple[Any, str]]:
        """The peer's requests we have not answered yet, as ``(id, method)``."""
        return list(self._incoming.values())

    def unterminated(self, limit: int = 200) -> tuple[int, bytes]:
        """``(length, first bytes)`` of the line the peer began and has not ended yet ((0, b"") when none):
        what a peer that hangs mid-line wrote, to show at a deadline (the EOF violation comes too late)."""
        discarding = self._decoder.discarding
        if discarding:
            return discarding, b""
        return self._decoder.buffered, self._decoder.pending(limit)

    def is_outstanding(self, id: Any) -> bool:
        return jsonrpc.id_key(id) in self._outgoing


def _notification(msg: dict[str, Any], data: bytes, index: int) -> Notification:
    return Notification(
        method=msg["method"],
        params=msg.get("params"),
        raw=data,
        index=index,
        has_params="params" in msg,
        message=msg,
    )


def _at(v: Violation, index: int) -> Violation:
    if v.index is not None:
        return v
    return Violation(v.clause_id, v.message, v.severity, v.raw, index)


def _near_key(rid: Any, table: dict[tuple[str, Any], Any]) -> tuple[str, Any] | None:
    """The key in ``table`` of the id that ``rid`` spells with the wrong JSON type (``ids.other_spelling``)."""
    alt = other_spelling(rid)
    if alt is None:
        return None
    k = jsonrpc.id_key(alt)
    return k if k in table else None


def _near_miss(rid: Any, answered: dict[tuple[str, Any], Any]) -> str:
    """Explain the classic bug of echoing ``"1"`` for ``1`` for an answer paired with nothing: the
    request it misspells was answered already (one still outstanding is paired, ``_on_response``)."""
    k = _near_key(rid, answered)
    return "" if k is None else f" (we sent {k[1]!r}: the id must keep its JSON type)"


class AnsweringConnection(Connection):
    """A ``Connection`` for a strict receiver: lines that hold no message get an answer.

    JSON-RPC 2.0 wants a line that is not JSON answered with -32700, and JSON that is no
    request object (or a request whose id is no JSON-RPC id) with -32600, both under a null id.
    The plain ``Connection`` records such lines as violations and produces no event (the suite
    judges, it does not answer); the reference agent and client answer, through ``on_malformed``
    (code, message).  A request with an unusable id is dropped here: nothing serves it.
    A batch line is refused whole with -32600, its members unserved (``unpack_batches``).
    """

    unpack_batches = False

    def __init__(
        self,
        our_role: Role,
        on_malformed: Callable[[int, str], None],
        *,
        max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
    ) -> None:
        super().__init__(our_role, max_frame_bytes=max_frame_bytes)
        self._on_malformed = on_malformed

    def receive_frame(self, data: bytes) -> list[Event]:
        events = super().receive_frame(data)
        bad = [e for e in events if isinstance(e, Request) and not answerable(e.id)]
        if bad:
            for e in bad:
                self.forget_incoming(e.id)
            self._on_malformed(
                jsonrpc.ErrorCode.INVALID_REQUEST, "Invalid request: the id must be a string, a number or null"
            )
            return [e for e in events if not any(e is b for b in bad)]
        if not any(isinstance(e, (Request, Notification, Response)) for e in events):
            value, _ = jsonrpc.decode(data)
            if value is None and not jsonrpc.is_json_null(data):
                self._on_malformed(jsonrpc.ErrorCode.PARSE_ERROR, "Parse error: the line is not valid UTF-8 JSON")
            else:
                self._on_malformed(
                    jsonrpc.ErrorCode.INVALID_REQUEST,
                    "Invalid request: expected one JSON-RPC 2.0 request or notification object",
                )
        return events
