"""Decoding and classifying single frames as JSON-RPC 2.0, and the clauses charged."""

from __future__ import annotations

from typing import Any

import pytest

from acp_conformance.core import jsonrpc
from acp_conformance.core.connection import AnsweringConnection, Connection, Role
from acp_conformance.core.events import Event, Notification, Request, Response, Violation, turn_output

STDOUT_CLEAN = "transport.stdio.stdout-clean"
STDIN_CLEAN = "transport.stdio.stdin-clean"


def feed(frame: bytes, our_role: Role = Role.CLIENT, outstanding: int = 0) -> list[Event]:
    """Events for one frame received by a connection that has ``outstanding`` requests out."""
    conn = Connection(our_role)
    for _ in range(outstanding):
        conn.send_request("session/new", {})
    return conn.receive_data(frame + b"\n")


def clauses(events: list[Event]) -> list[tuple[str, str]]:
    return [(e.clause_id, e.severity) for e in events if isinstance(e, Violation)]


def messages(events: list[Event]) -> list[Event]:
    return [e for e in events if not isinstance(e, Violation)]


# --------------------------------------------------------------- classification
@pytest.mark.parametrize(
    ("msg", "kind"),
    [
        ({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {}}, "request"),
        ({"jsonrpc": "2.0", "id": "x", "method": "m"}, "request"),
        ({"jsonrpc": "2.0", "method": "session/update", "params": {}}, "notification"),
        ({"jsonrpc": "2.0", "id": 0, "result": None}, "response"),
        ({"jsonrpc": "2.0", "id": 0, "error": {"code": -32601, "message": "x"}}, "response"),
        ({"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "parse error"}}, "response"),
    ],
)
def test_classify_valid_messages(msg: dict[str, Any], kind: str) -> None:
    assert jsonrpc.classify(msg) == (kind, [])


def test_connection_events_for_each_kind() -> None:
    conn = Connection(Role.CLIENT)
    rid, _ = conn.send_request("session/prompt", {"sessionId": "s"})
    rid2, _ = conn.send_request("session/new", {})
    out = conn.receive_data(
        b'{"jsonrpc":"2.0","id":"srv-1","method":"fs/read_text_file","params":{"path":"/a"}}\n'
        b'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s"}}\n'
        b'{"jsonrpc":"2.0","id":%d,"result":{"stopReason":"end_turn"}}\n'
        b'{"jsonrpc":"2.0","id":%d,"error":{"code":-32603,"message":"boom","data":[1]}}\n' % (rid, rid2)
    )
    req, note, ok, err = out
    assert isinstance(req, Request) and (req.id, req.method, req.params) == (
        "srv-1",
        "fs/read_text_file",
        {"path": "/a"},
    )
    assert isinstance(note, Notification) and note.method == "session/update" and note.has_params
    assert isinstance(ok, Response) and not ok.is_error and ok.method == "session/prompt"
    assert ok.result == {"stopReason": "end_turn"}
    assert isinstance(err, Response) and err.is_error and err.method == "session/new"
    assert err.error == {"code": -32603, "message": "boom", "data": [1]}
    assert [e.index for e in out] == [0, 1, 2, 3]  # type: ignore[union-attr]


# --------------------------------------------------------------------- encoding
def test_invalid_utf8_is_transport_utf8() -> None:
    out = feed(b'{"jsonrpc":"2.0","method":"x","params":{"s":"\xff\xfe"}}')
    assert clauses(out) == [("transport.utf8", "error")]
    assert messages(out) == []
    v = out[0]
    assert isinstance(v, Violation) and "not valid UTF-8" in v.message and v.index == 0


def test_bom_is_a_warning_and_the_message_still_decodes() -> None:
    out = feed(b'\xef\xbb\xbf{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"s"}}', Role.AGENT)
    assert clauses(out) == [("transport.stdio.strict-framing", "warning")]
    (note,) = messages(out)
    assert isinstance(note, Notification) and note.method == "session/cancel"


def test_lone_surrogate_escapes_are_accepted() -> None:
    # RFC 8259 allows them; orjson refuses them, the stdlib fallback accepts.
    out = feed(b'{"jsonrpc":"2.0","method":"x","params":{"s":"\\ud800 and \\udfff"}}')
    assert clauses(out) == []
    (note,) = messages(out)
    assert isinstance(note, Notification) and note.params == {"s": "\ud800 and \udfff"}


# -------------------------------------------------------------- stream hygiene
@pytest.mark.parametrize("line", [b"Starting agent v1.2...", b"{not json", b'{"jsonrpc":"2.0",', b"[1,"])
@pytest.mark.parametrize(("our_role", "clause"), [(Role.CLIENT, STDOUT_CLEAN), (Role.AGENT, STDIN_CLEAN)])
def test_non_json_lines_break_the_senders_hygiene_clause(line: bytes, our_role: Role, clause: str) -> None:
    out = feed(line, our_role)
    assert clauses(out) == [(clause, "error")]
    assert messages(out) == []


def test_absurd_nesting_is_recorded_unjudged_not_a_crash() -> None:
    """Nesting is a parser's limit (RFC 8259 section 9), not the sender's fault: no finding."""
    out = feed(b"[" * 100_000 + b"]" * 100_000)
    assert clauses(out) == [] and [type(e).__name__ for e in out] == ["Unjudged"]


@pytest.mark.parametrize(
    ("line", "our_role", "clause"),
    [(b"42", Role.CLIENT, STDOUT_CLEAN), (b'"server ready"', Role.AGENT, STDIN_CLEAN)],
)
def test_non_object_json_breaks_the_senders_hygiene_clause(line: bytes, our_role: Role, clause: str) -> None:
    assert clauses(feed(line, our_role)) == [(clause, "error")]


def test_null_line_is_not_silently_ignored() -> None:
    out = feed(b"null")
    assert clauses(out) == [(STDOUT_CLEAN, "error")]


@pytest.mark.parametrize("const", [b"NaN", b"Infinity", b"-Infinity"])
def test_non_json_constants_are_rejected(const: bytes) -> None:
    out = feed(b'{"jsonrpc":"2.0","method":"session/update","params":{"x":' + const + b"}}")
    assert any(sev == "error" for _, sev in clauses(out)), out


# ----------------------------------------------------------------- envelope
@pytest.mark.parametrize(
    "frame", [b"[]", b'[{"jsonrpc":"2.0","method":"a"},[]]', b'[{"jsonrpc":"2.0","method":"a"},1]']
)
def test_batch_array_is_one_message_per_line(frame: bytes) -> None:
    out = feed(frame)
    assert clauses(out) == [("transport.stdio.one-message-per-line", "error")]
    assert messages(out) == []


def test_a_batch_breaks_its_clause_once_and_its_members_are_judged_as_messages() -> None:
    """An agent that sends its updates and answers in batch lines breaks one clause, once: the
    replay, tool calls and answers inside are what they are, not absent (they would otherwise
    fail session.load.replay-all, tool.report and jsonrpc.every-request-answered too)."""
    conn = Connection(Role.CLIENT)
    rid, _ = conn.send_request("session/load", {"sessionId": "s"})
    out = conn.receive_data(
        b'[{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s"}},'
        b'{"jsonrpc":"1.0","id":%d,"result":null}]\n'
        b'{"jsonrpc":"2.0","method":"after"}\n' % rid
    )
    assert clauses(out) == [("transport.stdio.one-message-per-line", "error"), ("jsonrpc.version-field", "error")]
    note, answer, after = messages(out)
    assert isinstance(note, Notification) and note.method == "session/update" and note.params == {"sessionId": "s"}
    assert isinstance(answer, Response) and answer.id == rid and answer.method == "session/load"
    assert not conn.pending_outgoing
    # Members carry their own bytes and the line's index; the next line is the next index.
    assert note.raw == b'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s"}}'
    assert (note.index, answer.index, after.index) == (0, 0, 1)
    assert [v.index for v in out if isinstance(v, Violation)] == [0, 0]


def test_a_strict_receiver_refuses_a_batch_whole() -> None:
    refused: list[tuple[int, str]] = []
    conn = AnsweringConnection(Role.AGENT, lambda code, message: refused.append((code, message)))
    out = conn.receive_data(b'[{"jsonrpc":"2.0","id":1,"method":"session/new","params":{}}]\n')
    assert clauses(out) == [("transport.stdio.one-message-per-line", "error")]
    assert messages(out) == [] and not conn.pending_incoming
    assert [code for code, _ in refused] == [jsonrpc.ErrorCode.INVALID_REQUEST]


@pytest.mark.parametrize(
    "frame",
    [
        b'{"id":0,"result":{}}',
        b'{"jsonrpc":"1.0","id":0,"result":{}}',
        b'{"jsonrpc":2.0,"id":0,"result":{}}',
        b'{"jsonrpc":null,"id":0,"result":{}}',
    ],
)
def test_missing_or_wrong_version_field(frame: bytes) -> None:
    out = feed(frame, outstanding=1)
    assert clauses(out) == [("jsonrpc.version-field", "error")]
    # The message is still usable: the response correlates.
    (resp,) = messages(out)
    assert isinstance(resp, Response) and resp.method == "session/new"


def test_result_and_error_together() -> None:
    out = feed(b'{"jsonrpc":"2.0","id":0,"result":{},"error":{"code":1,"message":"m"}}', outstanding=1)
    assert clauses(out) == [("jsonrpc.result-xor-error", "error")]


def test_neither_result_nor_error() -> None:
    out = feed(b'{"jsonrpc":"2.0","id":0}', outstanding=1)
    assert clauses(out) == [("jsonrpc.result-xor-error", "error")]
    assert messages(out) == []


def test_a_response_without_any_id_is_named_as_such() -> None:
    """Seen from zed codex-acp 0.16.0: an error answering our $/cancel_request notification."""
    out = feed(b'{"jsonrpc":"2.0","error":{"code":-32601,"message":"Method not found"}}', outstanding=1)
    assert clauses(out) == [("jsonrpc.response-id-echo", "error")]
    assert messages(out) == []
    out = feed(b'{"jsonrpc":"2.0","params":{}}', outstanding=1)
    assert clauses(out) == [("jsonrpc.request-shape", "error")]


@pytest.mark.parametrize(
    ("error", "fragment", "clause"),
    [
        (b'"boom"', "not an object", "jsonrpc.error-object"),
        (b"null", "not an object", "jsonrpc.error-object"),
        # The code is error.codes' (the schema's ErrorCode), the object and message error-object's.
        (b'{"code":"-32601","message":"m"}', "error.code", "error.codes"),
        (b'{"code":true,"message":"m"}', "error.code", "error.codes"),
        (b'{"code":-32601.5,"message":"m"}', "error.code", "error.codes"),
        (b'{"message":"m"}', "no code", "error.codes"),
        (b'{"code":-32601}', "error.message", "jsonrpc.error-object"),
        (b'{"code":-32601,"message":7}', "error.message", "jsonrpc.error-object"),
    ],
)
def test_bad_error_object(error: bytes, fragment: str, clause: str) -> None:
    out = feed(b'{"jsonrpc":"2.0","id":0,"error":' + error + b"}", outstanding=1)
    assert clauses(out) == [(clause, "error")]
    v = out[0]
    assert isinstance(v, Violation) and fragment in v.message
    (resp,) = messages(out)
    assert isinstance(resp, Response) and resp.is_error


@pytest.mark.parametrize(
    "frame",
    [b'{"jsonrpc":"2.0","id":1.5,"method":"m"}', b'{"jsonrpc":"2.0","id":2.5,"result":{}}'],
)
def test_fractional_id_is_a_warning(frame: bytes) -> None:
    out = feed(frame)
    assert ("jsonrpc.id-not-null", "warning") in clauses(out)
    assert all(sev == "warning" for c, sev in clauses(out) if c.startswith("jsonrpc.id"))


def test_null_request_id_is_a_warning_and_other_id_types_are_errors() -> None:
    assert clauses(feed(b'{"jsonrpc":"2.0","id":null,"method":"m"}')) == [("jsonrpc.id-not-null", "warning")]
    for rid in (b"true", b"{}", b"[1]"):
        out = feed(b'{"jsonrpc":"2.0","id":' + rid + b',"method":"m"}')
        assert clauses(out) == [("jsonrpc.id-types", "error")], rid


def test_request_shape_problems() -> None:
    out = feed(b'{"jsonrpc":"2.0","id":1,"method":42}')
    assert clauses(out) == [("jsonrpc.request-shape", "error")]
    assert messages(out) == []
    out = feed(b'{"jsonrpc":"2.0","id":1,"method":"m","params":"x"}')
    assert clauses(out) == [("jsonrpc.request-shape", "error")]
    out = feed(b'{"jsonrpc":"2.0","result":{}}')
    assert clauses(out) == [("jsonrpc.response-id-echo", "error")]  # a response, missing its id


# ------------------------------------------------------------------- helpers
def test_id_key_keeps_json_types_apart() -> None:
    keys = {jsonrpc.id_key(v) for v in (1, "1", True, None, "null", 0, False)}
    assert len(keys) == 7
    # One JSON number type (RFC 8259): 1 and 1.0 are the same value, large integers compare exactly.
    assert jsonrpc.id_key(1) == jsonrpc.id_key(1.0)
    assert jsonrpc.id_key(2**53 + 1) != jsonrpc.id_key(2**53)
    # Invalid ids a fuzzer sends still have a key.
    assert jsonrpc.id_key([]) == jsonrpc.id_key([]) != jsonrpc.id_key({})


def test_a_rounded_echo_is_recognised_but_is_never_the_same_id() -> None:
    from acp_conformance.core.ids import rounded_echo, same_id

    # 2**63 as JavaScript reads and writes it back: 9223372036854775808 -> 9223372036854776000.
    assert rounded_echo(9223372036854776000, 2**63) and not same_id(9223372036854776000, 2**63)
    assert rounded_echo(2**53, 2**53 + 1)
    assert not rounded_echo(7, 7)  # the same id is no mangled echo
    assert not rounded_echo(2**53 + 2, 2**53)  # a different double
    assert not rounded_echo("9223372036854775808", 2**63)  # a string is another JSON type
    assert not rounded_echo(True, 1) and not rounded_echo(10**400, 10**400 + 1)  # no bool; no overflow


@pytest.mark.parametrize(
    ("value", "other"),
    [
        (0, "0"),
        (-7, "-7"),
        ("42", 42),
        ("-3", -3),
        ("01", None),
        ("+1", None),
        ("-0", None),
        (True, None),
        ("x", None),
        (1.5, None),
        (None, None),
        ("12345678901234567890", None),
    ],
)
def test_the_other_spelling_of_an_id_is_the_canonical_one_only(value: Any, other: Any) -> None:
    from acp_conformance.core.ids import other_spelling, same_id

    got = other_spelling(value)
    assert got == other and type(got) is type(other)
    if other is not None:
        assert not same_id(value, got)


def test_dumps_never_emits_a_raw_newline() -> None:
    data = jsonrpc.dumps({"jsonrpc": "2.0", "method": "m", "params": {"text": "a\nb\r\n\u2028"}})
    assert b"\n" not in data and b"\r" not in data


def test_the_turn_output_of_a_batch_is_counted_once_whoever_reads_it() -> None:
    """What a deadline message says the peer was still doing: a strict receiver sees a batch of
    updates as one line it refused, a judging connection as the updates; never both."""
    line = (
        b'[{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s",'
        b'"update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"hi"}}}}]\n'
    )
    judged = Connection(Role.CLIENT).receive_data(line)
    strict = AnsweringConnection(Role.CLIENT, lambda code, message: None).receive_data(line)
    assert turn_output(judged) == "1 agent_message_chunk for session 's'"
    assert turn_output(strict) == "1 session/update in a batch line for session '?'"
