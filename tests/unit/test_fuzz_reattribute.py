"""What the fuzz campaigns charge to the robustness clause when a peer answers a frame we were not
allowed to send: only what that frame provoked.  A defect the connection showed on valid traffic
before any example (a result missing a required member) stays its own clause's, once."""

from __future__ import annotations

from types import SimpleNamespace

from acp_conformance.core import jsonrpc
from acp_conformance.core.events import Response, Violation
from acp_conformance.fuzz._expect import Frame, Problem
from acp_conformance.fuzz.campaign import ODD_PROBE_IDS, Live, _reattribute, _unanswered, odd_id_kind
from acp_conformance.transcript import Transcript

MISSING_NAME = "session/new result: 'name' is a required property at /configOptions/0"


def _live(baseline: frozenset[tuple[str, str]]) -> tuple[Live, Transcript]:
    transcript = Transcript()
    conn = SimpleNamespace(transcript=transcript, peer=SimpleNamespace(events=[]))
    return Live(conn, baseline=baseline), transcript


def _answer_with(message: str) -> tuple[list[object], Violation]:
    answer = Response(id=7, result={}, method="session/new", index=3)
    v = Violation("schema.valid", message, "error", b"{}", 3)
    return [v, answer], v


def _frame() -> Frame:
    return Frame(data=b"{}\n", message={}, kind="request", method="session/new", id=7, valid=False)


def test_a_violation_only_the_forbidden_frame_provoked_becomes_a_robustness_finding() -> None:
    live, transcript = _live(frozenset())
    window, v = _answer_with("session/new result: 'cwd' echoed as an array")
    transcript.violation(v)
    _reattribute(live, _frame(), window, "that is not a valid ACP message (deep-nesting)")
    assert [x.clause_id for x in transcript.violations] == ["jsonrpc.survives-invalid-input"]
    assert transcript.violations[0].message.startswith("[schema.valid] session/new result")


def test_a_violation_already_shown_on_valid_traffic_stays_its_own_clause() -> None:
    live, transcript = _live(frozenset({("schema.valid", MISSING_NAME)}))
    window, v = _answer_with(MISSING_NAME)
    transcript.violation(v)
    _reattribute(live, _frame(), window, "that is not a valid ACP message (deep-nesting)")
    assert [x.clause_id for x in transcript.violations] == ["schema.valid"]


def test_a_defect_shown_before_any_example_stays_its_own_clause_on_a_probes_answer() -> None:
    """The probes behind an example are valid requests: their answers showing a defect the
    connection already showed on valid traffic (an id echoed as a string) keep its clause; a new
    kind of finding on them may be the frame's doing, and moves as before."""
    probe = Response(id=8, result={}, method="_acp_conformance/fuzz_probe", index=4)
    why = "that is not a valid ACP message (deep-nesting)"
    shown = frozenset({("jsonrpc.response-id-echo", "response to id '0' answers our request 0 (initialize)")})
    for baseline, probes, moved in (
        (shown, {jsonrpc.id_key(8)}, False),  # the same defect, on our probe's answer
        (frozenset(), {jsonrpc.id_key(8)}, True),  # never shown before: maybe provoked
        (shown, set(), True),  # not a probe: the frame's own answer
    ):
        live, transcript = _live(baseline)
        v = Violation("jsonrpc.response-id-echo", "response to id '8' answers our request 8", "error", b"{}", 4)
        transcript.violation(v)
        _reattribute(live, _frame(), [v, probe], why, probes)
        want = "jsonrpc.survives-invalid-input" if moved else "jsonrpc.response-id-echo"
        assert [x.clause_id for x in transcript.violations] == [want], (baseline, probes)


def test_no_answer_with_a_stray_in_the_window_is_the_echo_clause_once() -> None:
    """A frame (or a probe behind it) without an answer under its id, while a response under an id
    matching nothing we sent came in the example's window: perhaps its answer under the wrong id, so
    the echo clause's breach, not also a request left unanswered (``Peer.why_unproven``'s rule)."""
    missing = Problem("jsonrpc.every-request-answered", "the agent stopped answering after the frame")
    assert _unanswered(missing, [Response(id=7, result={}, method="session/new")]) is missing
    stray = Response(id=424242, result={}, stray=True)
    p = _unanswered(missing, [stray])
    assert p.clause == "jsonrpc.response-id-echo"
    assert "424242" in p.message and p.message.startswith(missing.message)
    # The clause a silence breaks may be another (a parse error owed): it too gives way to the echo.
    parse = Problem("jsonrpc.parse-error", "no answer")
    assert _unanswered(parse, []) is parse
    assert _unanswered(parse, [stray]).clause == "jsonrpc.response-id-echo"
    # An error without any id that the core took for an answer which lost its id counts the same.
    idless = Violation(
        "jsonrpc.response-id-echo",
        "a response (error) without an id",
        raw=b'{"jsonrpc":"2.0","error":{"code":-32700,"message":"Parse error"}}',
    )
    p = _unanswered(missing, [idless])
    assert p.clause == "jsonrpc.response-id-echo" and "without any id" in p.message
    # Not one the core gave another clause (an answer to a malformed frame of ours, to a notification).
    robustness = Violation("jsonrpc.survives-invalid-input", "an error without an id", raw=idless.raw)
    assert _unanswered(missing, [robustness]) is missing


def test_odd_id_kinds_are_the_ones_a_peer_may_refuse_wholesale() -> None:
    """``jsonrpc.id-types`` refusals are recognised by kind: strings and negative integers (the
    schema's RequestId is any int64); positive integers are the baseline, not an odd kind."""
    assert odd_id_kind("") == odd_id_kind("7") == "string"
    assert odd_id_kind(-1) == odd_id_kind(-(2**63)) == "negative"
    assert odd_id_kind(0) is odd_id_kind(2**53 - 1) is odd_id_kind(None) is odd_id_kind(True) is None
    assert odd_id_kind(-(2**63) - 1) is None  # past int64: not an id the schema allows
    assert {odd_id_kind(i) for i in ODD_PROBE_IDS.values()} == set(ODD_PROBE_IDS)
