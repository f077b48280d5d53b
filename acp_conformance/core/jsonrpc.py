"""Decoding and classifying one frame as a JSON-RPC 2.0 message.

``decode`` never raises on peer data: whatever arrives becomes a message
dict plus a list of violations, or violations alone.  orjson does the fast
path; the stdlib decoder is only consulted when orjson refuses, to tell
"invalid UTF-8" from "invalid JSON" and to accept lone-surrogate escapes,
which RFC 8259 permits even though orjson rejects them.
"""

from __future__ import annotations

import json
import re
from enum import IntEnum
from typing import Any

import orjson

from acp_conformance.core.events import Violation
from acp_conformance.core.ids import id_key  # the one id equality (core/ids.py), re-exported

__all__ = ["ErrorCode", "decode", "dumps", "id_key", "is_json_null", "is_valid_id", "classify"]

#: Placeholder for "this line is not protocol at all" (a banner, a log line);
#: the connection maps it to the sender's stdout/stdin hygiene clause.
NOT_PROTOCOL = "<not-protocol>"
#: Pseudo-clause of a line nested deeper than the suite's JSON parser goes: ``Connection``
#: turns it into an ``Unjudged`` event, never a finding.
BEYOND_LIMIT = "<beyond-parser-limit>"


class ErrorCode(IntEnum):
    """JSON-RPC and ACP error codes named by the schema's ``ErrorCode``."""

    PARSE_ERROR = -32700
    INVALID_REQUEST = -32600
    METHOD_NOT_FOUND = -32601
    INVALID_PARAMS = -32602
    INTERNAL_ERROR = -32603
    REQUEST_CANCELLED = -32800
    AUTH_REQUIRED = -32000
    RESOURCE_NOT_FOUND = -32002


def dumps(obj: Any) -> bytes:
    """Serialize compactly; orjson never emits raw newlines.

    orjson refuses three things a peer can legitimately make us echo: lone
    surrogates (RFC 8259 allows the escape ``\\ud800``), integers beyond 64
    bits and nesting deeper than 255 levels.  Those few frames go through the
    stdlib with ``ensure_ascii``, which escapes every non-ASCII character, so
    the bytes stay valid UTF-8 and the line still holds no raw newline.
    """
    try:
        return orjson.dumps(obj)
    except TypeError:
        return json.dumps(obj, ensure_ascii=True, separators=(",", ":"), allow_nan=False).encode("ascii")


#: 20 digits in a row (19 after a minus): possibly an integer beyond 64 bits, which orjson would turn into a float.
_LONG_DIGITS = re.compile(rb"-\d{19}|\d{20}")
#: Every byte to ``0`` (a digit) or `` `` (anything else): a run of 19 digits is then a plain
#: substring search, ~10x cheaper than the regex, which runs only when such a run exists.
_DIGIT_MAP = bytes(0x30 if 0x30 <= b <= 0x39 else 0x20 for b in range(256))
_DIGIT_RUN = b"0" * 19
_JSON_WS = b" \t\r\n"


def decode(data: bytes) -> tuple[Any, list[Violation]]:
    """Parse one frame's bytes. Returns ``(value, violations)``; value is
    ``None`` when nothing usable was decoded (see ``is_json_null`` for the
    one case where ``None`` is what the line holds)."""
    # orjson decodes integers beyond 64 bits as floats, which would misjudge an echoed id:
    # such frames (rare; a cheap scan finds them) take the exact stdlib path below.
    if _DIGIT_RUN not in data.translate(_DIGIT_MAP) or not _LONG_DIGITS.search(data):
        try:
            value = orjson.loads(data)
        except orjson.JSONDecodeError:
            pass
        else:
            if value is None:
                return None, [
                    Violation(NOT_PROTOCOL, "line is the JSON literal null, not a JSON-RPC object", raw=data[:200])
                ]
            return value, []
    problems: list[Violation] = []
    raw = data[:200]
    if data.startswith(b"\xef\xbb\xbf"):
        problems.append(
            Violation("transport.stdio.strict-framing", "frame starts with a UTF-8 byte order mark", "warning", raw)
        )
        data = data[3:]
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        problems.append(
            Violation(
                "transport.utf8",
                f"frame is not valid UTF-8 ({exc.reason} at byte {exc.start})",
                raw=raw,
            )
        )
        return None, problems
    try:
        value = json.loads(text, parse_constant=_reject_constant)
    except RecursionError:
        why = "the line nests deeper than this suite's JSON parser goes (RFC 8259 section 9 lets parsers limit depth)"
        problems.append(Violation(BEYOND_LIMIT, f"{why}: recorded, not judged", raw=raw))
        return None, problems
    except ValueError as exc:
        problems.append(Violation(NOT_PROTOCOL, f"line is not JSON ({exc}): not an ACP message", raw=raw))
        return None, problems
    if value is None:
        problems.append(Violation(NOT_PROTOCOL, "line is the JSON literal null, not a JSON-RPC object", raw=raw))
    return value, problems


def is_json_null(data: bytes) -> bool:
    """Whether the frame is the JSON literal ``null``: valid JSON but no request object.

    ``decode`` returns ``None`` for it, as for a line that is no JSON at all;
    a receiver owes -32600 (Invalid Request) here, not -32700 (Parse error).
    """
    return data.removeprefix(b"\xef\xbb\xbf").strip(_JSON_WS) == b"null"


def _reject_constant(name: str) -> Any:
    # The stdlib accepts NaN/Infinity; JSON (RFC 8259) does not.
    raise ValueError(f"{name} is not valid JSON")


def is_valid_id(value: Any) -> bool:
    """JSON-RPC ids are strings, integers (and, discouraged, null)."""
    return value is None or isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


def classify(msg: Any, raw: bytes = b"") -> tuple[str | None, list[Violation]]:
    """Name the kind of a decoded message.

    Returns one of ``"request"``, ``"notification"``, ``"response"`` or
    ``None`` (unusable), with the envelope violations found on the way.
    """
    problems: list[Violation] = []
    short = raw[:200]
    if isinstance(msg, list):
        problems.append(
            Violation(
                "transport.stdio.one-message-per-line",
                "JSON-RPC batch (array) received; ACP sends one object per line",
                raw=short,
            )
        )
        return None, problems
    if not isinstance(msg, dict):
        problems.append(
            Violation(
                NOT_PROTOCOL,
                f"line is a JSON {type(msg).__name__}, not a JSON-RPC object",
                raw=short,
            )
        )
        return None, problems
    if msg.get("jsonrpc") != "2.0":
        problems.append(
            Violation(
                "jsonrpc.version-field",
                f'"jsonrpc" is {msg.get("jsonrpc", "missing")!r}, expected "2.0"',
                raw=short,
            )
        )
    if "method" in msg:
        method = msg["method"]
        if not isinstance(method, str):
            problems.append(
                Violation(
                    "jsonrpc.request-shape",
                    f"method is {type(method).__name__}, not a string",
                    raw=short,
                )
            )
            return None, problems
        if "params" in msg and not isinstance(msg["params"], (dict, list)):
            problems.append(
                Violation(
                    "jsonrpc.request-shape",
                    f"params of {method} is {type(msg['params']).__name__}, not an object",
                    raw=short,
                )
            )
        if "result" in msg or "error" in msg:
            problems.append(
                Violation(
                    "jsonrpc.request-shape",
                    "message has both method and result/error",
                    raw=short,
                )
            )
        if "id" not in msg:
            return "notification", problems
        problems.extend(_check_id(msg["id"], short, request=True))
        return "request", problems
    has_result = "result" in msg
    has_error = "error" in msg
    if "id" not in msg:
        if has_result or has_error:
            # A response whose id is missing altogether (JSON-RPC 2.0 requires it, null when
            # the request's id could not be read); typically an answer to a notification.
            problems.append(
                Violation(
                    "jsonrpc.response-id-echo",
                    f"a response ({'error' if has_error else 'result'}) without an id; if it answers a "
                    "notification, notifications are never answered",
                    raw=short,
                )
            )
        else:
            problems.append(Violation("jsonrpc.request-shape", "object has neither method nor id", raw=short))
        return None, problems
    if has_result and has_error:
        problems.append(Violation("jsonrpc.result-xor-error", "response has both result and error", raw=short))
    elif not has_result and not has_error:
        problems.append(Violation("jsonrpc.result-xor-error", "response has neither result nor error", raw=short))
        return None, problems
    if has_error and not has_result:
        problems.extend(check_error_object(msg["error"], short))
    problems.extend(_check_id(msg["id"], short, request=False))
    return "response", problems


def answered_notification_clause(method: str | None) -> str:
    """The clause an answer to the notification ``method`` breaks: ``session/cancel`` has its own
    (cancel.is-notification names it), any other notification the JSON-RPC rule.  One defect, one
    clause, whoever judges it (the notification tests, the fuzz campaigns)."""
    return "cancel.is-notification" if method == "session/cancel" else "jsonrpc.notification-no-response"


#: The clause an error object's ``code`` is judged on (the schema's ErrorCode: an integer);
#: the object itself and its ``message`` are ``jsonrpc.error-object``'s.
ERROR_CODE_CLAUSE = "error.codes"


def check_error_object(err: Any, raw: bytes = b"") -> list[Violation]:
    """An error object has an integer ``code`` and a string ``message``."""
    if not isinstance(err, dict):
        return [Violation("jsonrpc.error-object", f"error is {type(err).__name__}, not an object", raw=raw)]
    out = []
    code = err.get("code")
    if "code" not in err:
        out.append(Violation(ERROR_CODE_CLAUSE, "error object has no code", raw=raw))
    elif not (isinstance(code, int) and not isinstance(code, bool)):
        out.append(Violation(ERROR_CODE_CLAUSE, f"error.code is {code!r}, not an integer", raw=raw))
    if not isinstance(err.get("message"), str):
        out.append(
            Violation(
                "jsonrpc.error-object",
                f"error.message is {err.get('message')!r}, not a string",
                raw=raw,
            )
        )
    return out


def _check_id(value: Any, raw: bytes, *, request: bool) -> list[Violation]:
    if isinstance(value, float):
        return [Violation("jsonrpc.id-not-null", f"id {value!r} is a fractional number", "warning", raw)]
    if not is_valid_id(value):
        return [Violation("jsonrpc.id-types", f"id {value!r} is neither a string nor an integer", raw=raw)]
    if value is None and request:
        return [Violation("jsonrpc.id-not-null", "request uses a null id", "warning", raw)]
    return []
