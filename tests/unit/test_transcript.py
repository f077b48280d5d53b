"""Transcripts: the JSONL round trip, and that secrets never leave in renderings."""

from __future__ import annotations

import orjson
import pytest

from acp_conformance.core.events import Violation
from acp_conformance.transcript import Transcript, redactor

SECRET = "supersecretvalue123"


def sample() -> Transcript:
    t = Transcript("sample")
    t.add("out", b'{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1}}')
    bad = t.add("in", b'{"jsonrpc":"2.0","id":"0","result":{"protocolVersion":1}}', {"jsonrpc": "2.0", "id": "0"})
    t.violation(Violation("jsonrpc.response-id-echo", "response to id '0' (we sent 0)", raw=b"x", index=0), bad)
    t.violation(Violation("schema.valid", "second finding", "warning"), bad)
    t.add("stderr", "agent: starting up")
    t.add("in", "héllo not json ✓")
    t.violation(Violation("transport.stdio.newline-delimited", "blank line", "warning"))
    t.note("peer closed its output (EOF)")
    return t


def test_jsonl_round_trip_preserves_directions_text_and_violations() -> None:
    t = sample()
    data = t.to_jsonl()
    assert data.count(b"\n") == len(t.entries)
    back = Transcript.from_jsonl(data, "reloaded")
    assert [(e.direction, e.text(), e.t) for e in back.entries] == [(e.direction, e.text(), e.t) for e in t.entries]
    assert [[(v.clause_id, v.message, v.severity) for v in e.violations] for e in back.entries] == [
        [(v.clause_id, v.message, v.severity) for v in e.violations] for e in t.entries
    ]
    assert [(v.clause_id, v.severity) for v in back.violations] == [(v.clause_id, v.severity) for v in t.violations]
    # Frames are re-decoded so offline checks can query messages.
    assert [m.get("method") for m in back.messages("out")] == ["initialize"]
    assert [m.get("id") for m in back.messages("in")] == ["0"]
    assert back.stderr() == ["agent: starting up"]
    # A second round trip is a fixed point.
    assert back.to_jsonl() == data


def test_from_jsonl_reports_the_bad_line() -> None:
    with pytest.raises(ValueError, match="line 2"):
        Transcript.from_jsonl(b'{"t":0,"dir":"note","raw":"x"}\n{broken\n', "saved.jsonl")


def secret_transcript() -> Transcript:
    t = Transcript()
    frame = {"jsonrpc": "2.0", "id": 1, "method": "authenticate", "params": {"key": SECRET}}
    t.add("out", orjson.dumps(frame), frame)
    t.add("stderr", f"using API key {SECRET} for requests")
    e = t.add("in", f"Authorization: Bearer {SECRET}")
    t.violation(Violation("transport.stdio.stdout-clean", "line is not JSON: not an ACP message"), e)
    t.note(f"env: ACP_TEST_API_KEY={SECRET}")
    return t


def test_secrets_are_redacted_from_jsonl_and_excerpt(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ACP_TEST_API_KEY", SECRET)
    t = secret_transcript()
    t.violation(Violation("schema.valid", f"'{SECRET}' is not one of ['a']"), t.entries[0])
    jsonl = t.to_jsonl()
    assert SECRET.encode() not in jsonl
    assert jsonl.count(b"[REDACTED]") == 5  # four raw texts and one violation message
    excerpt = t.excerpt()
    assert "[REDACTED]" in excerpt
    for line in excerpt.splitlines():
        if not line.lstrip().startswith("^^"):
            assert SECRET not in line, line
    # The in-memory transcript itself is untouched (checks see real data).
    assert SECRET in t.entries[1].text()


def test_excerpt_redacts_violation_messages(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ACP_TEST_API_KEY", SECRET)
    t = Transcript()
    e = t.add("in", b'{"jsonrpc":"2.0","method":"x"}')
    t.violation(Violation("schema.valid", f"'{SECRET}' is not one of ['a']"), e)
    assert SECRET not in t.excerpt()


def test_excerpt_truncation_does_not_leak_a_secret_prefix(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ACP_TEST_API_KEY", SECRET)
    t = Transcript()
    t.add("stderr", "x" * 390 + SECRET + "y" * 100)
    assert SECRET[:8] not in t.excerpt(width=400)


def test_excerpt_selects_last_entries_plus_around() -> None:
    t = Transcript()
    first = t.add("out", "frame-0")
    for i in range(1, 50):
        t.add("in", f"frame-{i}")
    text = t.excerpt(last=3)
    assert [line.split()[-1] for line in text.splitlines()] == ["frame-47", "frame-48", "frame-49"]
    text = t.excerpt([first], last=2)
    assert [line.split()[-1] for line in text.splitlines()] == ["frame-0", "frame-48", "frame-49"]
    assert "->" in text.splitlines()[0] and "<-" in text.splitlines()[1]
    t.add("stderr", "z" * 1000)
    assert "... (1000 chars)" in t.excerpt(last=1, width=50)


def test_redactor_matches_secret_looking_names_only() -> None:
    redact = redactor(
        {
            "GITHUB_TOKEN": "ghp_abcdef123456",
            "DB_PASSWORD": "hunter2hunter2",
            "SHORT_KEY": "abc",  # too short to redact safely
            "HOME": "/home/someone",
            "MY_SECRET": "ghp_abcdef",  # prefix of another secret: the longer one wins
        }
    )
    out = redact("ghp_abcdef123456 hunter2hunter2 abc /home/someone ghp_abcdef")
    assert out == "[REDACTED] [REDACTED] abc /home/someone [REDACTED]"
    assert redactor({})("ghp_abcdef123456") == "ghp_abcdef123456"


def test_jsonl_records_are_plain_json() -> None:
    for line in sample().to_jsonl().splitlines():
        rec = orjson.loads(line)
        assert set(rec) <= {"t", "dir", "raw", "violations"}
        assert rec["dir"] in ("in", "out", "stderr", "note")
