"""Properties of the sans-IO core: total on garbage, chunking-invariant, framing exact."""

from __future__ import annotations

from typing import Any

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from acp_conformance.core.connection import Connection, Role
from acp_conformance.core.events import Notification, Request, Response, Violation
from acp_conformance.core.framing import FrameDecoder, RawFrame, encode_frame

PROFILE = settings(max_examples=200, deadline=None, derandomize=True, database=None)

#: Pieces of JSON-RPC envelopes and of broken streams, so that random
#: concatenations reach the classifier and the id bookkeeping, not just the
#: "not JSON" path.
TOKENS = [
    b"{",
    b"}",
    b"[",
    b"]",
    b":",
    b",",
    b'"jsonrpc"',
    b'"2.0"',
    b'"id"',
    b'"method"',
    b'"params"',
    b'"result"',
    b'"error"',
    b'"code"',
    b'"message"',
    b'"session/update"',
    b"0",
    b"1",
    b"-1",
    b"1.5",
    b"1e400",
    b'"1"',
    b'"x"',
    b"null",
    b"true",
    b"NaN",
    b'"\\ud800"',
    b"\n",
    b"\r\n",
    b" ",
    b"\xff",
    b"\xef\xbb\xbf",
    b"\xc3",
]

token_soup = st.lists(st.sampled_from(TOKENS) | st.binary(max_size=8), max_size=80).map(b"".join)


def split(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({min(c, len(data)) for c in cuts})
    return [data[a:b] for a, b in zip([0, *points], [*points, len(data)], strict=True)]


def connection_with_requests_out(n: int = 3) -> Connection:
    conn = Connection(Role.CLIENT)
    for _ in range(n):
        conn.send_request("session/prompt", {})
    conn.send_request("session/new", {}, id="1")
    return conn


def run_connection(chunks: list[bytes]) -> list[Any]:
    conn = connection_with_requests_out()
    out: list[Any] = []
    for c in chunks:
        out += conn.receive_data(c)
    out += conn.receive_eof()
    return out


json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20)
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=6,
)
params = st.dictionaries(st.text(max_size=6), json_values, max_size=3)
request_ids = st.integers(min_value=0, max_value=2**53) | st.text(min_size=1, max_size=12)

#: Wrong-typed members that may override a well-formed envelope.
mutations = st.fixed_dictionaries(
    {},
    optional={
        "jsonrpc": st.sampled_from(["1.0", 2.0, None]),
        "id": st.sampled_from(["0", "1", "x", None, 1.5, True, [], {}]),
        "method": st.sampled_from([5, None, "session/update"]),
        "params": json_values,
        "result": json_values,
        "error": json_values | st.fixed_dictionaries({"code": json_scalars, "message": json_scalars}),
    },
)


@st.composite
def envelopes(draw: st.DrawFn) -> Any:
    """Near-miss JSON-RPC messages: a well-formed skeleton, sometimes damaged."""
    kind = draw(st.sampled_from(["request", "notification", "result", "error", "other"]))
    if kind == "other":
        return draw(json_values)
    msg: dict[str, Any] = {"jsonrpc": "2.0"}
    if kind != "notification":
        msg["id"] = draw(st.integers(-1, 4) | st.sampled_from(["0", "1", "x"]))
    if kind in ("request", "notification"):
        msg["method"] = draw(st.sampled_from(["session/update", "fs/read_text_file", "_x"]))
        msg["params"] = draw(params)
    elif kind == "result":
        msg["result"] = draw(json_values)
    else:
        msg["error"] = {"code": draw(st.integers(-32800, -32000)), "message": draw(st.text(max_size=5))}
    if draw(st.booleans()):
        msg.update(draw(mutations))
        for key in draw(st.lists(st.sampled_from(sorted(msg)), max_size=2)):
            msg.pop(key, None)
    return msg


@st.composite
def broken_frame(draw: st.DrawFn) -> bytes:
    raw = orjson.dumps(draw(envelopes()))
    action = draw(st.sampled_from(["keep", "keep", "keep", "cut", "insert"]))
    at = draw(st.integers(0, len(raw)))
    if action == "cut":
        raw = raw[:at]
    elif action == "insert":
        raw = raw[:at] + draw(st.binary(min_size=1, max_size=4)) + raw[at:]
    return raw + draw(st.sampled_from([b"\n", b"\n", b"\r\n", b"\n\n", b""]))


envelope_stream = st.lists(broken_frame(), max_size=8).map(b"".join)
streams = st.one_of(st.binary(max_size=400), token_soup, envelope_stream, envelope_stream)


@PROFILE
@given(data=streams, cuts=st.lists(st.integers(min_value=0, max_value=400), max_size=12))
def test_arbitrary_bytes_in_arbitrary_chunks_only_produce_events(data: bytes, cuts: list[int]) -> None:
    events = run_connection(split(data, cuts))
    assert all(isinstance(e, Request | Notification | Response | Violation) for e in events)
    indexes = [e.index for e in events if e.index is not None]
    assert indexes == sorted(indexes)
    # Chunking never changes what is observed (repr: NaN params compare unequal to themselves).
    assert repr(events) == repr(run_connection([data]))


@st.composite
def conversations(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Valid messages from the peer: its requests (unique ids), notifications, and answers to ours."""
    ids = draw(st.lists(request_ids, unique_by=lambda v: (type(v), v), max_size=5))
    methods = st.sampled_from(["fs/read_text_file", "_x/y"])
    msgs: list[dict[str, Any]] = [
        {"jsonrpc": "2.0", "id": rid, "method": draw(methods), "params": draw(params)} for rid in ids
    ]
    msgs += [
        {"jsonrpc": "2.0", "method": "session/update", "params": draw(params)} for _ in range(draw(st.integers(0, 3)))
    ]
    for rid in draw(st.permutations([0, 1, 2, "1"])):
        if draw(st.booleans()):
            msgs.append({"jsonrpc": "2.0", "id": rid, "result": draw(json_values)})
        else:
            err = {"code": draw(st.integers(-32800, -32000)), "message": draw(st.text(max_size=10))}
            msgs.append({"jsonrpc": "2.0", "id": rid, "error": err})
    return draw(st.permutations(msgs))


@PROFILE
@given(msgs=conversations(), cuts=st.lists(st.integers(min_value=0, max_value=4000), max_size=20))
def test_valid_frames_survive_any_chunking(msgs: list[dict[str, Any]], cuts: list[int]) -> None:
    stream = b"".join(encode_frame(orjson.dumps(m)) for m in msgs)
    conn = connection_with_requests_out()
    events: list[Any] = []
    for chunk in split(stream, cuts):
        events += conn.receive_data(chunk)
    events += conn.receive_eof()
    assert [e for e in events if isinstance(e, Violation)] == []
    assert [e.message for e in events] == msgs
    assert all(e.method is not None for e in events if isinstance(e, Response))
    assert conn.pending_outgoing == []
    assert len(conn.pending_incoming) == sum(1 for m in msgs if "method" in m and "id" in m)


def reference_frames(data: bytes, cap: int) -> list[tuple[Any, ...]]:
    """The framing rules, stated naively over the whole stream."""
    *lines, tail = data.split(b"\n")
    out: list[tuple[Any, ...]] = []
    for line in lines:
        if len(line) > cap:
            out.append(("oversize",))
            continue
        crlf = line.endswith(b"\r")
        body = line[:-1] if crlf else line
        if not body.strip():
            out.append(("blank",))
            continue
        if crlf:
            out.append(("crlf",))
        out.append(("frame", body, crlf))
    if tail:
        out.append(("oversize",) if len(tail) > cap else ("eof",))
    return out


def observed(item: RawFrame | Violation) -> tuple[Any, ...]:
    if isinstance(item, RawFrame):
        return ("frame", item.data, item.crlf)
    for fragment, kind in (("exceeds", "oversize"), ("blank", "blank"), ("CRLF", "crlf"), ("middle of a line", "eof")):
        if fragment in item.message:
            return (kind,)
    raise AssertionError(item)


line_soup = st.lists(
    st.sampled_from([b"\n", b"\r", b"\r\n", b" ", b"a", b"{}", b"x" * 9]) | st.binary(max_size=12), max_size=60
).map(b"".join)


@PROFILE
@given(data=line_soup, cap=st.integers(min_value=1, max_value=40), cuts=st.lists(st.integers(0, 800), max_size=15))
def test_decoder_matches_the_reference_rules_under_any_chunking(data: bytes, cap: int, cuts: list[int]) -> None:
    dec = FrameDecoder(cap)
    out: list[RawFrame | Violation] = []
    for chunk in split(data, cuts):
        out += dec.feed(chunk)
        assert dec.buffered <= cap
    out += dec.feed_eof()
    assert [observed(i) for i in out] == reference_frames(data, cap)


@PROFILE
@given(
    payloads=st.lists(
        st.binary(min_size=1, max_size=50).filter(lambda b: b"\n" not in b and not b.endswith(b"\r") and b.strip()),
        max_size=20,
    ),
    cuts=st.lists(st.integers(0, 1200), max_size=15),
)
def test_framing_round_trip(payloads: list[bytes], cuts: list[int]) -> None:
    stream = b"".join(encode_frame(p) for p in payloads)
    dec = FrameDecoder()
    out: list[RawFrame | Violation] = []
    for chunk in split(stream, cuts):
        out += dec.feed(chunk)
    out += dec.feed_eof()
    assert out == [RawFrame(p) for p in payloads]
