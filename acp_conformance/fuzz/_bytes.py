"""Byte damage: the ways one frame can be badly framed or arrive in pieces."""

from __future__ import annotations

import json
from collections.abc import Collection, Iterator, Mapping
from dataclasses import replace
from typing import Any

from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument
from hypothesis.strategies import DrawFn, SearchStrategy

from acp_conformance.core.connection import Role
from acp_conformance.fuzz._expect import (
    _ANY,
    _NOT_REQUEST,
    _NOTIFY,
    _OPTIONAL,
    _PARSE,
    INVALID_REQUEST,
    NO_ID,
    PARSE_ERROR,
    Expect,
    Frame,
)
from acp_conformance.fuzz._frames import _families, frames
from acp_conformance.fuzz._json import _reject_constant
from acp_conformance.fuzz._options import BYTE_DAMAGE, MIB


def chunkings(data: bytes, *, max_chunks: int = 16) -> SearchStrategy[tuple[bytes, ...]]:
    """Ways ``data`` may arrive: a partition into 1..``max_chunks`` non-empty pieces."""
    if not isinstance(data, (bytes, bytearray)):
        raise InvalidArgument(f"data must be bytes, not {type(data).__name__}")
    if not isinstance(max_chunks, int) or isinstance(max_chunks, bool) or max_chunks < 1:
        raise InvalidArgument(f"max_chunks must be a positive integer, not {max_chunks!r}")
    raw = bytes(data)
    if len(raw) <= 1:
        return st.just((raw,) if raw else ())
    cuts = st.lists(st.integers(1, len(raw) - 1), max_size=max_chunks - 1, unique=True).map(sorted)
    return cuts.map(lambda cs: tuple(raw[a:b] for a, b in zip([0, *cs], [*cs, len(raw)], strict=True)))


def every_split(data: bytes) -> Iterator[tuple[bytes, bytes]]:
    """Every split of ``data`` into two writes, at each offset (1 .. len-1)."""
    for i in range(1, len(data)):
        yield data[:i], data[i:]


_BANNERS = (
    b"Starting my-agent v1.2.3 ...",
    b"DEBUG [acp] ready",
    b"Content-Length: 52",
    b"\x1b[32m\xe2\x9c\x93\x1b[0m connected",
    b"Traceback (most recent call last):",
    b"undefined",
    b"NaN",
    b"{'jsonrpc': '2.0'}",
    b'{"jsonrpc":"2.0",',
    b"}{",
)
_INVALID_UTF8 = (b"\xff", b"\xfe\xff", b"\xc3", b"\xc0\xaf", b"\xed\xa0\x80", b"\xf8\x88\x80\x80\x80", b"\x80")


def byte_damage(
    base: SearchStrategy[Frame] | None = None,
    *,
    kinds: Collection[str] | None = None,
    sender: Role | str | None = None,
    schema: Mapping[str, Any] | None = None,
    huge_bytes: int = MIB,
    max_chunks: int = 16,
) -> SearchStrategy[Frame]:
    """Frames damaged at the byte level (see ``BYTE_DAMAGE``), from ``base``
    frames (default: valid requests ``sender`` may send)."""
    fams = _families(kinds, BYTE_DAMAGE, "kinds")
    if base is not None and not isinstance(base, SearchStrategy):
        raise InvalidArgument(f"base must be a strategy of Frame, not {base!r}")
    if not isinstance(huge_bytes, int) or isinstance(huge_bytes, bool) or huge_bytes < 1:
        raise InvalidArgument(f"huge_bytes must be a positive integer, not {huge_bytes!r}")
    if not isinstance(max_chunks, int) or isinstance(max_chunks, bool) or max_chunks < 1:
        raise InvalidArgument(f"max_chunks must be a positive integer, not {max_chunks!r}")
    if base is None:
        base = frames(sender=sender, kinds=("request",), schema=schema)
    b: SearchStrategy[Frame] = base

    @st.composite
    def damaged(draw: DrawFn) -> Frame:
        kind = draw(st.sampled_from(fams))
        return _damage(draw, draw(b), kind, huge_bytes, max_chunks)

    return damaged()


def _parse_expect(frame: Frame) -> Expect:
    """A frame still carrying its message, oddly framed: its own answer, or a parse error."""
    e = frame.expect
    if e.answer == "forbidden":
        return Expect(
            "optional", frozenset({PARSE_ERROR}), result_ok=False, null_id_ok=True, clause="jsonrpc.parse-error"
        )
    codes = None if e.codes is None else e.codes | {PARSE_ERROR}
    return replace(e, codes=codes, null_id_ok=True, missing_clause="jsonrpc.parse-error")


def _classify_bytes(data: bytes) -> Expect:
    """The expectation for a line from its bytes alone."""
    line = data.rstrip(b"\n")
    if not line.strip(b" \t\r"):
        return Expect(
            "optional",
            frozenset({PARSE_ERROR, INVALID_REQUEST}),
            result_ok=False,
            null_id_ok=True,
            clause="jsonrpc.parse-error",
            missing_clause="jsonrpc.parse-error",
        )
    try:
        value = json.loads(line.decode("utf-8"), parse_constant=_reject_constant)
    except (UnicodeDecodeError, ValueError, RecursionError):
        return _PARSE
    if isinstance(value, dict) and isinstance(value.get("method"), str):
        return _ANY if "id" in value else _NOTIFY
    if isinstance(value, list):
        return _OPTIONAL
    if isinstance(value, dict) and "id" in value and "method" not in value:
        return _OPTIONAL  # response-shaped: answering it would put an error into the sender's id space
    return _NOT_REQUEST


def _damage(draw: DrawFn, frame: Frame, kind: str, huge: int, max_chunks: int) -> Frame:
    data = frame.data if frame.data.endswith(b"\n") else frame.data + b"\n"
    body = data[:-1]
    if kind == "split":
        chunks = draw(chunkings(data, max_chunks=max_chunks))
        return replace(frame, chunks=chunks, mutation=frame.mutation or "split", detail=f"{len(chunks)} writes")
    if kind == "crlf":
        return replace(
            frame,
            data=body + b"\r\n",
            valid=False,
            mutation="crlf",
            detail="\\r\\n terminator",
            expect=_parse_expect(frame),
            chunks=(),
        )
    if kind == "bom":
        return replace(
            frame,
            data=b"\xef\xbb\xbf" + data,
            valid=False,
            mutation="bom",
            detail="UTF-8 BOM first",
            expect=_parse_expect(frame),
            chunks=(),
        )
    if kind in ("nul", "invalid-utf8", "truncated"):
        at = draw(st.integers(0, max(0, len(body) - 1)))
        if kind == "nul":
            new = body[:at] + b"\x00" + body[at:]
            detail = f"raw NUL at byte {at}"
        elif kind == "invalid-utf8":
            seq = draw(st.sampled_from(_INVALID_UTF8))
            new = body[:at] + seq + body[at:]
            detail = f"{seq!r} at byte {at}"
        else:
            new = body[:at]
            detail = f"cut at byte {at} of {len(body)}"
        line = new + b"\n"
        expect = _classify_bytes(line)
        if kind == "invalid-utf8" and expect.codes == frozenset({PARSE_ERROR}):
            # A lenient decoder (both TypeScript SDKs use a non-fatal TextDecoder) turns the bytes
            # into U+FFFD and may then see JSON that is no request (-32600), or even a request it can
            # serve: each is a receiver coping with input a conforming sender never writes.
            expect = replace(expect, codes=frozenset({PARSE_ERROR, INVALID_REQUEST}), result_ok=True)
        return replace(
            frame,
            data=line,
            message=None,
            valid=False,
            mutation=kind,
            detail=detail,
            id=NO_ID,
            expect=expect,
            chunks=(),
            kind="garbage",
            method=None,
        )
    if kind == "garbage":
        raw = draw(st.binary(min_size=1, max_size=200)).replace(b"\n", b" ")
        line = raw + b"\n"
    elif kind == "not-json-text":
        line = draw(st.sampled_from(_BANNERS)) + draw(st.sampled_from([b"\n", b"\r\n"]))
    elif kind == "blank":
        line = draw(st.sampled_from([b"\n", b"   \n", b"\r\n", b"\t\n"]))
    else:  # huge-line
        size = draw(st.integers(huge, 2 * huge))
        unit = draw(st.sampled_from([b"x", b"{", b"[", b'"', b"\xff", b"log line ", b"\\"]))
        line = (unit * (size // len(unit) + 1))[:size] + b"\n"
    detail = f"{len(line)} bytes" if kind == "huge-line" else ""
    return Frame(
        data=line,
        message=None,
        kind="garbage",
        sender=frame.sender,
        valid=False,
        mutation=kind,
        detail=detail,
        expect=_classify_bytes(line),
    )
