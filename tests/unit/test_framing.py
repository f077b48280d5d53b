"""Newline framing: chunking independence, hygiene warnings, the frame cap, EOF."""

from __future__ import annotations

import pytest

from acp_conformance.core.events import Violation
from acp_conformance.core.framing import (
    CLAUSE_LIMIT,
    CLAUSE_NEWLINE,
    CLAUSE_STRICT,
    DEFAULT_MAX_FRAME_BYTES,
    FrameDecoder,
    RawFrame,
    encode_frame,
)

KIB = 1024
MIB = 1024 * KIB

STREAM = (
    b'{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1}}\n'
    b'{"jsonrpc":"2.0","method":"session/update","params":{"text":"h\xc3\xa9llo \xf0\x9f\x98\x80"}}\n'
    b'{"jsonrpc":"2.0","id":"a","result":{}}\r\n'
    b"\n"
    b'{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"nope"}}\n'
)


def run(chunks: list[bytes], cap: int = DEFAULT_MAX_FRAME_BYTES) -> list[RawFrame | Violation]:
    dec = FrameDecoder(cap)
    out: list[RawFrame | Violation] = []
    for c in chunks:
        out += dec.feed(c)
    return out + dec.feed_eof()


def frames(items: list[RawFrame | Violation]) -> list[bytes]:
    return [i.data for i in items if isinstance(i, RawFrame)]


def violations(items: list[RawFrame | Violation]) -> list[Violation]:
    return [i for i in items if isinstance(i, Violation)]


def test_whole_stream_reference() -> None:
    out = run([STREAM])
    assert frames(out) == [line.rstrip(b"\r") for line in STREAM.split(b"\n") if line.strip()]
    # One CRLF warning, one blank-line warning, both SHOULD-grade on the newline clause.
    assert [(v.clause_id, v.severity) for v in violations(out)] == [(CLAUSE_STRICT, "warning")] * 2


def test_split_at_every_byte_offset_decodes_identically() -> None:
    expected = run([STREAM])
    for k in range(len(STREAM) + 1):
        assert run([STREAM[:k], STREAM[k:]]) == expected, f"split at offset {k}"


def test_split_at_every_pair_of_offsets_decodes_identically() -> None:
    expected = run([STREAM])
    n = len(STREAM)
    for i in range(0, n + 1, 7):
        for j in range(i, n + 1, 5):
            assert run([STREAM[:i], STREAM[i:j], STREAM[j:]]) == expected, (i, j)


def test_byte_by_byte_decodes_identically() -> None:
    assert run([STREAM[i : i + 1] for i in range(len(STREAM))]) == run([STREAM])


def test_many_frames_in_one_chunk_keep_order() -> None:
    lines = [b'{"jsonrpc":"2.0","method":"n","params":{"i":%d}}' % i for i in range(5000)]
    out = run([b"\n".join(lines) + b"\n"])
    assert frames(out) == lines
    assert violations(out) == []


def test_crlf_yields_frame_without_cr_and_a_warning() -> None:
    out = run([b'{"a":1}\r\n'])
    assert out[-1] == RawFrame(b'{"a":1}', crlf=True)
    (v,) = violations(out)
    assert v.clause_id == CLAUSE_STRICT and v.severity == "warning"
    assert "CRLF" in v.message


@pytest.mark.parametrize("blank", [b"\n", b"   \n", b"\r\n", b"\t\n"])
def test_blank_line_is_a_warning_and_not_a_frame(blank: bytes) -> None:
    out = run([b'{"a":1}\n' + blank + b'{"b":2}\n'])
    assert frames(out) == [b'{"a":1}', b'{"b":2}']
    (v,) = violations(out)
    assert (v.clause_id, v.severity) == (CLAUSE_STRICT, "warning")
    assert "blank line" in v.message


@pytest.mark.parametrize("chunk", [1, 7, 64, 10_000])
def test_overlong_line_is_one_violation_and_later_frames_survive(chunk: int) -> None:
    cap = 64
    data = b'{"ok":1}\n' + b"x" * 1000 + b'\n{"ok":2}\n{"ok":3}\n'
    out = run([data[i : i + chunk] for i in range(0, len(data), chunk)], cap)
    assert frames(out) == [b'{"ok":1}', b'{"ok":2}', b'{"ok":3}']
    (v,) = violations(out)
    # Over our cap is our limit (RFC 8259 § 9), not a breach of the peer's: transport.frame-limit (a MAY).
    assert v.clause_id == CLAUSE_LIMIT and v.severity == "error"
    assert f"frame cap of {cap} bytes" in v.message


def test_cap_boundary_is_inclusive() -> None:
    cap = 32
    at_cap = b"a" * cap
    over = b"b" * (cap + 1)
    for chunking in (1, 5, 1000):
        data = at_cap + b"\n" + over + b"\n" + at_cap + b"\n"
        out = run([data[i : i + chunking] for i in range(0, len(data), chunking)], cap)
        assert frames(out) == [at_cap, at_cap]
        assert len(violations(out)) == 1


def test_memory_stays_bounded_on_a_10_mib_line_without_newline() -> None:
    cap = 64 * KIB
    dec = FrameDecoder(cap)
    block = b"z" * (64 * KIB)
    for _ in range(10 * MIB // len(block)):
        assert dec.feed(block) == []
        assert dec.buffered <= cap
    # The same holds when the whole flood arrives in a single read.
    dec2 = FrameDecoder(cap)
    assert dec2.feed(b"z" * (10 * MIB)) == []
    assert dec2.buffered <= cap
    for d in (dec, dec2):
        out = d.feed(b'tail\n{"jsonrpc":"2.0","method":"after"}\n')
        assert frames(out) == [b'{"jsonrpc":"2.0","method":"after"}']
        (v,) = violations(out)
        assert "exceeds the frame cap" in v.message
        assert d.buffered == 0
        assert d.feed_eof() == []


def test_eof_in_the_middle_of_a_line_is_a_violation() -> None:
    dec = FrameDecoder()
    assert frames(dec.feed(b'{"a":1}\n{"jsonrpc":"2.0",')) == [b'{"a":1}']
    (v,) = dec.feed_eof()
    assert isinstance(v, Violation)
    assert v.clause_id == CLAUSE_NEWLINE and v.severity == "error"
    assert "ended in the middle of a line" in v.message
    assert v.raw == b'{"jsonrpc":"2.0",'
    assert dec.feed_eof() == []  # idempotent
    with pytest.raises(ValueError):
        dec.feed(b"more")


def test_eof_while_discarding_reports_the_overlong_line_once() -> None:
    dec = FrameDecoder(16)
    assert dec.feed(b"y" * 100) == []
    (v,) = dec.feed_eof()
    assert isinstance(v, Violation) and "exceeds the frame cap" in v.message


def test_clean_eof_reports_nothing() -> None:
    assert violations(run([b'{"a":1}\n'])) == []
    assert run([]) == []


def test_no_64_kib_limit_by_default() -> None:
    assert DEFAULT_MAX_FRAME_BYTES >= 64 * MIB
    payload = b'{"jsonrpc":"2.0","method":"big","params":{"s":"' + b"q" * (5 * MIB) + b'"}}'
    chunks = [payload[i : i + 65536] for i in range(0, len(payload), 65536)] + [b"\n"]
    assert run(chunks) == [RawFrame(payload)]


def test_decoder_rejects_a_nonpositive_cap() -> None:
    with pytest.raises(ValueError):
        FrameDecoder(0)


def test_encode_frame() -> None:
    assert encode_frame(b'{"a":1}') == b'{"a":1}\n'
    with pytest.raises(ValueError):
        encode_frame(b'{"a":\n1}')
