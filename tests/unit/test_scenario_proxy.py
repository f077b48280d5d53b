"""The wire tap behind the recording proxy and the offline checker: both directions, judged from outside."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import orjson

from acp_conformance.proxy import WireTap, judge_transcript, proxy_verdict
from acp_conformance.results import Status
from acp_conformance.schema.validator import SchemaValidator
from acp_conformance.transcript import Transcript

INIT = b'{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}}}\n'
INIT_OK = b'{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":1,"agentCapabilities":{},"authMethods":[]}}\n'


def failed(tap: WireTap, side: str) -> set[str]:
    return {r.clause for r in tap.results(side) if r.status is Status.FAIL}  # type: ignore[arg-type]


def test_a_clean_exchange_passes_both_ways(schema_validator: SchemaValidator) -> None:
    tap = WireTap(schema_validator)
    tap.from_client(INIT)
    tap.from_agent(INIT_OK[:20])  # bytes arrive in arbitrary chunks
    tap.from_agent(INIT_OK[20:])
    assert failed(tap, "agent") == set() and failed(tap, "client") == set()
    assert "schema.valid" in {r.clause for r in tap.results("agent") if r.status is Status.PASS}
    assert [e.direction for e in tap.transcript.entries] == ["out", "in"]


def test_each_side_is_blamed_for_its_own_frames(schema_validator: SchemaValidator) -> None:
    seen: list[tuple[str, str]] = []
    tap = WireTap(schema_validator, on_violation=lambda side, v: seen.append((side, v.clause_id)))
    tap.from_agent(b"Starting my-agent v1.2.3 ...\n")  # a banner on stdout
    tap.from_client(b'{"jsonrpc":"1.0","method":"session/cancel","params":{"sessionId":"s"}}\n')
    tap.from_client(INIT)
    tap.from_agent(b'{"jsonrpc":"2.0","id":"0","result":{}}\n')  # the id's type changed
    assert ("agent", "transport.stdio.stdout-clean") in seen
    assert ("client", "jsonrpc.version-field") in seen
    assert ("agent", "jsonrpc.response-id-echo") in seen
    assert {"transport.stdio.stdout-clean", "jsonrpc.response-id-echo"} <= failed(tap, "agent")
    assert "jsonrpc.version-field" in failed(tap, "client")
    assert "jsonrpc.version-field" not in failed(tap, "agent")


def test_responses_pair_with_requests_across_directions(schema_validator: SchemaValidator) -> None:
    tap = WireTap(schema_validator)
    tap.from_client(INIT)
    tap.from_agent(INIT_OK)
    perm = (
        b'{"jsonrpc":"2.0","id":5,"method":"session/request_permission","params":{"sessionId":"s",'
        b'"toolCall":{"toolCallId":"t"},"options":[{"optionId":"a","name":"A","kind":"allow_once"}]}}\n'
    )
    tap.from_agent(perm)
    tap.from_client(b'{"jsonrpc":"2.0","id":5,"result":{"outcome":{"outcome":"selected","optionId":"a"}}}\n')
    tap.from_client(b'{"jsonrpc":"2.0","id":5,"result":{"outcome":{"outcome":"cancelled"}}}\n')
    assert failed(tap, "client") == {"jsonrpc.no-duplicate-response"}
    assert failed(tap, "agent") == set()


def test_a_saved_transcript_is_rejudged_from_its_raw_frames(schema_validator: SchemaValidator) -> None:
    t = Transcript()
    t.add("out", INIT.rstrip(b"\n"))
    t.add("in", b'{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":"1.0.0"}}')  # no violations recorded
    again = judge_transcript(Transcript.from_jsonl(t.to_jsonl()), validator=schema_validator)
    assert failed(again, "agent")  # the string protocolVersion, found again though the file recorded nothing
    verdict = proxy_verdict(again, "agent-cmd")
    assert verdict["agent"]["failed"] and verdict["client"]["failed"] == []


def test_the_offline_check_command(tmp_path: Path, schema_validator: SchemaValidator) -> None:
    t = Transcript()
    t.add("out", INIT.rstrip(b"\n"))
    t.add("in", b"hello from my agent")
    path = tmp_path / "trace.jsonl"
    path.write_bytes(t.to_jsonl())
    proc = subprocess.run(
        [sys.executable, "-m", "acp_conformance.scenario", "check", str(path), "--role", "both"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "agent  FAIL  transport.stdio.stdout-clean" in proc.stdout
    assert "client: " in proc.stdout


def test_the_top_level_check_validates_every_frame_of_a_foreign_trace(tmp_path: Path) -> None:
    """``python -m acp_conformance check`` is the same judge: a trace from another tool that
    records no violation, with a result the schema forbids, FAILs; it used to re-report the
    file's (absent) violations and PASS the framing and schema clauses unread."""
    t = Transcript()
    t.add("out", INIT.rstrip(b"\n"))
    t.add("in", b'{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":"1.0.0"}}')
    path = tmp_path / "foreign.jsonl"
    path.write_bytes(t.to_jsonl())
    proc = subprocess.run(
        [sys.executable, "-m", "acp_conformance", "check", str(path)], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "agent  FAIL " in proc.stdout


def test_a_violation_the_file_claims_is_not_believed(schema_validator: SchemaValidator) -> None:
    """Only what the re-judging finds counts: a FAIL written into the file beside a frame that
    is fine is dropped (it is kept only where the saved frame is lossy and cannot be re-read)."""
    answer = b'{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":1}}'
    forged = [{"clause": "jsonrpc.version-field", "message": "forged"}]
    saved = Transcript.from_jsonl(
        orjson.dumps({"t": 0, "dir": "out", "raw": INIT.rstrip(b"\n").decode()})
        + b"\n"
        + orjson.dumps({"t": 1, "dir": "in", "raw": answer.decode(), "violations": forged})
        + b"\n"
    )
    again = judge_transcript(saved, validator=schema_validator)
    assert "jsonrpc.version-field" not in failed(again, "agent")
    garbled = '{"jsonrpc":"2.0","method":"_x/note","params":{"text":"caf\ufffd"}}'  # was not UTF-8 on the wire
    lossy = Transcript.from_jsonl(
        orjson.dumps(
            {
                "t": 0,
                "dir": "in",
                "raw": garbled,
                "violations": [{"clause": "transport.stdio.stdout-clean", "message": "not UTF-8"}],
            }
        )
        + b"\n"
    )
    clean = Transcript.from_jsonl(lossy.to_jsonl().replace("\ufffd".encode(), b"e"))
    assert "transport.stdio.stdout-clean" not in failed(judge_transcript(clean, validator=schema_validator), "agent")
    kept = judge_transcript(lossy, validator=schema_validator)
    assert "transport.stdio.stdout-clean" in failed(kept, "agent")
