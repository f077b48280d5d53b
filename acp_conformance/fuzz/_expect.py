"""What a conforming receiver owes for a frame: ``Problem``, ``Expect``, ``Frame``.

The clause ids and error codes answers are judged on, and the ``Expect``
values the frame builders (``_valid``), the mutations and the byte damage
share, live here, so those modules need not import each other for them.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

import orjson

from acp_conformance.core import jsonrpc
from acp_conformance.core.connection import Role
from acp_conformance.core.ids import same_id

Answer = Literal["required", "forbidden", "optional"]

# Clause ids (acp_conformance/clauses/registry.toml) a receiver's answer is judged on.

PARSE_ERROR = int(jsonrpc.ErrorCode.PARSE_ERROR)
INVALID_REQUEST = int(jsonrpc.ErrorCode.INVALID_REQUEST)
METHOD_NOT_FOUND = int(jsonrpc.ErrorCode.METHOD_NOT_FOUND)
INVALID_PARAMS = int(jsonrpc.ErrorCode.INVALID_PARAMS)

#: Methods every receiver of that role implements (so -32601 is never right for them).
BASELINE = frozenset({"initialize", "session/new", "session/prompt", "session/request_permission"})

#: The message of a silence, before anything says how long it was waited for.
NO_ANSWER = "no answer"


@dataclass(frozen=True, slots=True)
class Problem:
    """A receiver's answer (or silence) broke ``clause``."""

    clause: str
    message: str
    #: A silence read off the answers to the requests sent behind the frame, its own answer not
    #: waited for: JSON-RPC lets a peer answer in any order, so it is not yet proven
    #: (``FrameFuzzer.confirm``).
    unawaited: bool = False


@dataclass(frozen=True, slots=True)
class Expect:
    """What a conforming receiver does with a frame.

    ``answer``: ``required`` (the frame must be answered), ``forbidden`` (a
    notification: nothing may come back) or ``optional``.  An error answer
    must carry one of ``codes`` (``None``: any code); a result is acceptable
    when ``result_ok``.  ``null_id_ok``: an error with a null id is an
    acceptable answer (the receiver could not be expected to read the id).
    A wrong answer breaks ``clause``, a missing one ``missing_clause``, an
    error that drops a readable id ``id_clause``.
    """

    answer: Answer
    codes: frozenset[int] | None = None
    result_ok: bool = True
    null_id_ok: bool = False
    clause: str = "jsonrpc.every-request-answered"
    missing_clause: str = "jsonrpc.every-request-answered"
    id_clause: str = "jsonrpc.response-id-echo"

    def check(self, answers: Sequence[Mapping[str, Any]]) -> list[Problem]:
        """Judge the responses the receiver sent for the frame (see ``Frame.answers``)."""
        if self.answer == "forbidden":
            if answers:
                return [Problem(self.clause, f"a notification was answered: {_short(answers[0])}")]
            return []
        if not answers:
            if self.answer == "required":
                return [Problem(self.missing_clause, NO_ANSWER)]
            return []
        out: list[Problem] = []
        for a in answers:
            if "error" in a and "result" not in a:
                err = a.get("error")
                code = err.get("code") if isinstance(err, dict) else None
                if a.get("id") is None and not self.null_id_ok:
                    out.append(
                        Problem(
                            self.id_clause,
                            f"error {code!r} ({_msg(err)}) {'with a null id' if 'id' in a else 'without an id'}: "
                            "the id was readable",
                        )
                    )
                elif self.codes is not None and code not in self.codes:
                    want = ", ".join(str(c) for c in sorted(self.codes))
                    out.append(Problem(self.clause, f"error {code!r} ({_msg(err)}), expected {want}"))
            elif "result" in a and not self.result_ok:
                want = ", ".join(str(c) for c in sorted(self.codes or ()))
                out.append(Problem(self.clause, f"a result {_short(a.get('result'))}, expected error {want}"))
        return out


def _msg(err: Any) -> str:
    m = err.get("message") if isinstance(err, dict) else None
    return _clip(m if isinstance(m, str) else repr(m), 80)


def _clip(s: str, n: int) -> str:
    return s if len(s) <= n else s[: n - 3] + "..."


def _short(value: Any, n: int = 120) -> str:
    try:
        s = orjson.dumps(value).decode()
    except (TypeError, orjson.JSONEncodeError):
        s = repr(value)
    return _clip(s, n)


#: ``Frame.id`` of a frame whose id the receiver cannot read (not JSON, or no id).
class _NoId:
    __slots__ = ()

    def __repr__(self) -> str:
        return "NO_ID"


NO_ID: Any = _NoId()


@dataclass(frozen=True)
class Frame:
    """One thing to write to a receiver, and what it owes in return.

    ``data`` is the exact bytes (normally newline-terminated); ``chunks`` how
    to write them (one write by default).  ``message`` is the JSON value
    carried, when there is one Python can hold (``None`` for non-JSON bytes,
    and for nesting too deep to decode).  ``id`` is the request id the
    receiver can read (``NO_ID`` when it cannot).  ``valid``: a conforming
    sender could have sent it (envelope and schema both valid).
    ``mutation`` names what was done to a valid frame (``""``: nothing),
    ``detail`` where and how.
    """

    data: bytes
    message: Any
    kind: str
    method: str | None = None
    id: Any = NO_ID
    sender: Role | None = None
    valid: bool = True
    mutation: str = ""
    detail: str = ""
    expect: Expect = field(default_factory=lambda: Expect("optional"))
    #: The ``$defs`` entry the payload (params, result or error) was drawn from ("" if none).
    definition: str = ""
    chunks: tuple[bytes, ...] = ()

    @property
    def writes(self) -> tuple[bytes, ...]:
        """The writes that deliver ``data``."""
        return self.chunks or (self.data,)

    def __post_init__(self) -> None:
        if self.expect.clause == "jsonrpc.notification-no-response" and self.kind == "notification":
            # An answer to session/cancel is judged on the clause that names it.
            clause = jsonrpc.answered_notification_clause(self.method)
            object.__setattr__(self, "expect", replace(self.expect, clause=clause))

    @property
    def has_id(self) -> bool:
        return self.id is not NO_ID

    @property
    def trackable_id(self) -> bool:
        """The id is a non-null string or integer (what JSON-RPC correlates by)."""
        return self.has_id and self.id is not None and jsonrpc.is_valid_id(self.id)

    def answers(self, responses: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
        """Of the receiver's responses, those that answer this frame: its id, or an error with a null id."""
        out = []
        for r in responses:
            rid = r.get("id")
            if rid is None:
                # An error with a null id answers what could not be read; a null-id result can only
                # (wrongly) answer a frame without a usable id, or a request whose id was null.
                if "error" in r or not self.has_id or self.id is None:
                    out.append(r)
            elif self.has_id and same_id(rid, self.id):
                out.append(r)
        return out

    def describe(self, limit: int = 300) -> str:
        """One line for reports: the mutation and the bytes (clipped)."""
        what = self.mutation or f"valid {self.kind}"
        if self.detail:
            what += f" ({_clip(self.detail, 160)})"
        body = self.data.decode("utf-8", "backslashreplace")
        if len(body) > limit:
            body = body[:limit] + f"... ({len(self.data)} bytes)"
        split = f" in {len(self.chunks)} writes" if len(self.chunks) > 1 else ""
        return f"{what}{split}: {body!r}"


def _invalid_params_expect(method: str, implemented: Collection[str] | None, not_object: bool = False) -> Expect:
    codes = {INVALID_PARAMS}
    if not _implemented(method, implemented):
        codes.add(METHOD_NOT_FOUND)
    if not_object:
        codes.add(INVALID_REQUEST)
    return Expect("required", frozenset(codes), result_ok=False, clause="jsonrpc.invalid-params")


def _implemented(method: str, implemented: Collection[str] | None) -> bool:
    return method in (implemented if implemented is not None else BASELINE)


_PARSE = Expect(
    "required",
    frozenset({PARSE_ERROR}),
    result_ok=False,
    null_id_ok=True,
    clause="jsonrpc.parse-error",
    missing_clause="jsonrpc.parse-error",
)
_NOT_REQUEST = Expect(
    "required",
    frozenset({INVALID_REQUEST}),
    result_ok=False,
    null_id_ok=True,
    clause="jsonrpc.invalid-request",
    missing_clause="jsonrpc.invalid-request",
)
_NOTIFY = Expect("forbidden", clause="jsonrpc.notification-no-response")
#: A broken notification: silence, or -32600 with a null id; a result (or another error) answers a notification.
_BAD_NOTIFY = Expect(
    "optional",
    frozenset({INVALID_REQUEST}),
    result_ok=False,
    null_id_ok=True,
    clause="jsonrpc.notification-no-response",
)
#: A notification the receiver may fail to parse (too deep, lone surrogates): silence, or -32700.
_NOTIFY_OR_PARSE = Expect(
    "optional", frozenset({PARSE_ERROR}), result_ok=False, null_id_ok=True, clause="jsonrpc.notification-no-response"
)
_ANY = Expect("required", null_id_ok=True)
#: A request the receiver may be unable to parse (too deep, lone surrogates, odd framing): it owes the
#: answer, or -32700 with a null id; silence is judged as a missing parse error.
_ANY_OR_PARSE = Expect("required", null_id_ok=True, missing_clause="jsonrpc.parse-error")
_OPTIONAL = Expect("optional", null_id_ok=True)
