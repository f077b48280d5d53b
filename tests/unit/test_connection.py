"""Request/response correlation in both directions, and our own mistakes."""

from __future__ import annotations

import orjson
import pytest

from acp_conformance.core.connection import Connection, Role
from acp_conformance.core.events import Event, Request, Response, Violation
from acp_conformance.errors import LocalProtocolError


def result_frame(rid: object, result: object = None) -> bytes:
    return orjson.dumps({"jsonrpc": "2.0", "id": rid, "result": result if result is not None else {}}) + b"\n"


def only(events: list[Event], kind: type) -> list:  # type: ignore[type-arg]
    return [e for e in events if isinstance(e, kind)]


def test_id_zero_correlates() -> None:
    conn = Connection(Role.CLIENT)
    rid, data = conn.send_request("initialize", {"protocolVersion": 1})
    assert rid == 0
    assert orjson.loads(data) == {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": 1}}
    assert data.endswith(b"\n") and data.count(b"\n") == 1
    (resp,) = conn.receive_data(result_frame(0, {"protocolVersion": 1}))
    assert isinstance(resp, Response)
    assert resp.method == "initialize" and resp.id == 0 and not resp.duplicate
    assert conn.pending_outgoing == []


def test_ids_increase_and_params_none_is_omitted() -> None:
    conn = Connection(Role.CLIENT, first_id=5)
    rids = [conn.send_request("m")[0] for _ in range(3)]
    assert rids == [5, 6, 7]
    _, data = conn.send_request("m")
    assert "params" not in orjson.loads(data)


def test_string_ids_correlate() -> None:
    conn = Connection(Role.CLIENT)
    rid, _ = conn.send_request("session/new", {}, id="req-é✓")
    assert rid == "req-é✓"
    (resp,) = conn.receive_data(result_frame("req-é✓"))
    assert isinstance(resp, Response) and resp.method == "session/new"


@pytest.mark.parametrize(("sent", "echoed", "shown"), [(1, "1", "our request 1 "), ("7", 7, "our request '7' ")])
def test_an_id_echoed_with_the_wrong_json_type_breaks_the_echo_clause_once(
    sent: object, echoed: object, shown: str
) -> None:
    """The answer is flagged on ``jsonrpc.response-id-echo`` and paired with the request it answers:
    the request is not also left unanswered (``jsonrpc.every-request-answered``)."""
    conn = Connection(Role.CLIENT)
    conn.send_request("session/prompt", {}, id=sent)
    out = conn.receive_data(result_frame(echoed))
    (v,) = only(out, Violation)
    assert v.clause_id == "jsonrpc.response-id-echo" and v.severity == "error"
    assert shown in v.message and "JSON type" in v.message
    (resp,) = only(out, Response)
    assert resp.method == "session/prompt" and resp.id == sent and resp.message["id"] == echoed
    assert conn.pending_outgoing == [] and not conn.is_outstanding(sent)
    # A second such answer is a second answer to that request.
    again = conn.receive_data(result_frame(echoed))
    assert [x.clause_id for x in only(again, Violation)] == ["jsonrpc.response-id-echo"]
    assert "we sent" in only(again, Violation)[0].message


@pytest.mark.parametrize(("sent", "echoed"), [(1, "01"), (1, "+1"), (1, True), (0, "-0"), ("x", 0)])
def test_an_id_that_is_no_spelling_of_ours_answers_nothing(sent: object, echoed: object) -> None:
    conn = Connection(Role.CLIENT)
    conn.send_request("session/prompt", {}, id=sent)
    out = conn.receive_data(result_frame(echoed))
    (resp,) = only(out, Response)
    assert resp.method is None and conn.pending_outgoing == [(sent, "session/prompt")]
    assert resp.stray  # what Peer.strays_since reads: it may be that request's answer, not provably
    assert [v.clause_id for v in only(out, Violation)] in (
        ["jsonrpc.response-id-echo"],
        ["jsonrpc.id-types", "jsonrpc.response-id-echo"],
    )


def test_only_a_response_matching_nothing_we_sent_is_a_stray() -> None:
    """A null-id error (a line the peer could not read) and the answer to a frame we wrote raw
    are answers to something; an answer to a request of ours is not a stray either."""
    conn = Connection(Role.CLIENT)
    rid, _ = conn.send_request("session/new", {})
    conn.allow_unpaired("raw-1")
    null_error = orjson.dumps({"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "parse"}}) + b"\n"
    got = [
        only(conn.receive_data(frame), Response)[0] for frame in (result_frame(rid), result_frame("raw-1"), null_error)
    ]
    assert [r.stray for r in got] == [False, False, False]
    (stray,) = only(conn.receive_data(result_frame(424242)), Response)
    assert stray.stray and stray.method is None


def test_duplicate_response_is_flagged() -> None:
    conn = Connection(Role.CLIENT)
    rid, _ = conn.send_request("session/prompt", {})
    assert only(conn.receive_data(result_frame(rid)), Violation) == []
    out = conn.receive_data(
        orjson.dumps({"jsonrpc": "2.0", "id": rid, "error": {"code": -32603, "message": "late"}}) + b"\n"
    )
    (v,) = only(out, Violation)
    assert v.clause_id == "jsonrpc.no-duplicate-response"
    (resp,) = only(out, Response)
    assert resp.duplicate and resp.method == "session/prompt" and resp.is_error


def test_unknown_id_is_flagged() -> None:
    conn = Connection(Role.CLIENT)
    conn.send_request("initialize", {})
    out = conn.receive_data(result_frame(99))
    (v,) = only(out, Violation)
    assert v.clause_id == "jsonrpc.response-id-echo" and "99" in v.message
    assert v.index == 0 and v.raw is not None and b'"id":99' in v.raw


def test_null_id_error_is_not_flagged_but_null_id_result_is() -> None:
    conn = Connection(Role.CLIENT)
    conn.send_request("initialize", {})
    out = conn.receive_data(b'{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}\n')
    assert only(out, Violation) == []
    (resp,) = only(out, Response)
    assert resp.is_error and resp.method is None
    out = conn.receive_data(b'{"jsonrpc":"2.0","id":null,"result":{}}\n')
    assert [v.clause_id for v in only(out, Violation)] == ["jsonrpc.response-id-echo"]


def test_pending_bookkeeping_both_directions() -> None:
    conn = Connection(Role.CLIENT)
    a, _ = conn.send_request("session/new", {})
    b, _ = conn.send_request("session/prompt", {})
    assert sorted(conn.pending_outgoing) == [(a, "session/new"), (b, "session/prompt")]
    # Id spaces are per sender: the agent may use id 0 too.
    out = conn.receive_data(
        b'{"jsonrpc":"2.0","id":0,"method":"session/request_permission","params":{}}\n'
        b'{"jsonrpc":"2.0","id":"t","method":"fs/read_text_file","params":{}}\n'
    )
    assert only(out, Violation) == []
    assert conn.pending_incoming == [(0, "session/request_permission"), ("t", "fs/read_text_file")]
    assert len(conn.pending_outgoing) == 2
    conn.receive_data(result_frame(a))
    assert conn.pending_outgoing == [(b, "session/prompt")]
    data = conn.send_result(0, {"outcome": {"outcome": "cancelled"}})
    assert orjson.loads(data)["id"] == 0
    assert conn.pending_incoming == [("t", "fs/read_text_file")]
    conn.send_error("t", -32002, "not found", {"uri": "file:///a"})
    assert conn.pending_incoming == []
    conn.forget_outgoing(b)
    assert conn.pending_outgoing == [] and not conn.is_outstanding(b)


def test_answering_unknown_or_answered_ids_raises() -> None:
    conn = Connection(Role.AGENT)
    with pytest.raises(LocalProtocolError):
        conn.send_result(1, {})
    conn.receive_data(b'{"jsonrpc":"2.0","id":1,"method":"session/new","params":{}}\n')
    with pytest.raises(LocalProtocolError):
        conn.send_result("1", {})  # wrong JSON type
    conn.send_result(1, {"sessionId": "s"})
    with pytest.raises(LocalProtocolError):
        conn.send_error(1, -32603, "twice")
    # A null-id error (for an unparseable frame) answers no request and is allowed.
    assert orjson.loads(conn.send_error(None, -32700, "Parse error"))["id"] is None


def test_our_own_malformed_requests_raise() -> None:
    conn = Connection(Role.CLIENT)
    conn.send_request("a", id="x")
    with pytest.raises(LocalProtocolError):
        conn.send_request("b", id="x")
    for bad in (True, 1.5, {"a": 1}):
        with pytest.raises(LocalProtocolError):
            conn.send_request("b", id=bad)
    with pytest.raises(LocalProtocolError):
        conn.send_request(42)  # type: ignore[arg-type]


def test_peer_reusing_an_outstanding_request_id_is_flagged() -> None:
    conn = Connection(Role.CLIENT)
    first = conn.receive_data(b'{"jsonrpc":"2.0","id":3,"method":"fs/read_text_file","params":{}}\n')
    assert only(first, Violation) == []
    out = conn.receive_data(b'{"jsonrpc":"2.0","id":3,"method":"terminal/create","params":{}}\n')
    (v,) = only(out, Violation)
    assert v.clause_id == "jsonrpc.request-shape" and "reused" in v.message and "fs/read_text_file" in v.message
    (req,) = only(out, Request)
    assert req.method == "terminal/create"
    # Once answered, the id may be used again.
    conn.send_result(3, {"content": ""})
    assert only(conn.receive_data(b'{"jsonrpc":"2.0","id":3,"method":"terminal/kill","params":{}}\n'), Violation) == []


def test_reusing_an_answered_id_for_a_new_request_of_ours() -> None:
    conn = Connection(Role.CLIENT)
    conn.send_request("a", id=1)
    conn.receive_data(result_frame(1))
    conn.send_request("b", id=1)
    (resp,) = conn.receive_data(result_frame(1))
    assert isinstance(resp, Response) and resp.method == "b" and not resp.duplicate


def test_eof_mid_frame_and_frame_indexes() -> None:
    conn = Connection(Role.CLIENT)
    out = conn.receive_data(b'{"jsonrpc":"2.0","method":"a"}\n\n{"jsonrpc":"2.0","method":"b"}\n{"jsonr')
    assert [getattr(e, "method", None) for e in out if not isinstance(e, Violation)] == ["a", "b"]
    assert conn.inbound_frames == 2
    (v,) = conn.receive_eof()
    assert isinstance(v, Violation) and v.clause_id == "transport.stdio.newline-delimited"
    assert conn.eof


@pytest.mark.parametrize("rid", ["²", "9" * 5000], ids=["superscript-two", "5000-digits"])
def test_odd_digit_string_ids_do_not_crash(rid: str) -> None:
    conn = Connection(Role.CLIENT)
    conn.send_request("initialize", {})
    out = conn.receive_data(result_frame(rid))
    assert [v.clause_id for v in only(out, Violation)] == ["jsonrpc.response-id-echo"]


def test_generated_ids_skip_ids_the_caller_chose_itself() -> None:
    """The fuzzer registers a raw frame's id (say 1) before its own probe asks for a fresh one."""
    conn = Connection(Role.CLIENT)
    first, _ = conn.send_request("a")
    conn.send_request("raw", id=first + 1)
    probe, _ = conn.send_request("probe")
    assert probe == first + 2


def test_answers_to_raw_frames_are_neither_paired_nor_flagged() -> None:
    """A fuzzer's raw frame reusing an answered id, answered twice: the core stays out of it."""
    conn = Connection(Role.CLIENT)
    rid, _ = conn.send_request("session/new")
    assert not [
        e for e in conn.receive_data(b'{"jsonrpc":"2.0","id":%d,"result":{}}\n' % rid) if isinstance(e, Violation)
    ]
    conn.allow_unpaired(rid)
    again = b'{"jsonrpc":"2.0","id":%d,"error":{"code":-32600,"message":"bad"}}\n' % rid
    assert not [e for e in conn.receive_data(again + again) if isinstance(e, Violation)]
    conn.forget_unpaired(rid)  # from now on an answer under that id answers nothing we sent
    assert [e.clause_id for e in conn.receive_data(again) if isinstance(e, Violation)] == ["jsonrpc.response-id-echo"]
