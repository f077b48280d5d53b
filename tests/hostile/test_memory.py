"""Memory and time of the suite's own process under floods, measured in-process.

The end-to-end runs (test_hostile_agents.py) show the suite *survives* the
floods; these measure, with tracemalloc, what it *keeps*, against the real
hostile agents through the real harness, so a bound that does not hold is
pinned to the component that breaks it.
"""

from __future__ import annotations

import sys
import time
import tracemalloc
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from acp_conformance.checks import PASSIVE_CLAUSES, passive_results
from acp_conformance.checks.passive import MAX_EXAMPLES_PER_CLAUSE
from acp_conformance.core.connection import Role
from acp_conformance.core.events import Violation
from acp_conformance.core.framing import CLAUSE_LIMIT, DEFAULT_MAX_FRAME_BYTES, FrameDecoder, RawFrame
from acp_conformance.harness import AgentConfig, AgentHarness
from acp_conformance.peer import Peer
from acp_conformance.schema.validator import SchemaValidator
from acp_conformance.transcript import STDERR_HEAD, STDERR_TAIL, Transcript
from acp_conformance.transport import memory_pair
from tests.hostile._run import HOSTILE

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the hostile agents need Linux")

PY = sys.executable
MIB = 1024 * 1024
#: What one connection may keep, whatever the peer sends (the design target).
BOUND = 16 * MIB


@pytest.fixture
def traced() -> Iterator[None]:
    tracemalloc.start()
    try:
        yield
    finally:
        tracemalloc.stop()


def harness(name: str, validator: SchemaValidator, tmp: Path, **env: str) -> AgentHarness:
    config = AgentConfig(command=f"{PY} {HOSTILE} {name}", env=env, timeout=120, startup_timeout=30)
    return AgentHarness(config, validator, tmp)


def test_a_100_mib_line_costs_at_most_the_frame_cap() -> None:
    decoder = FrameDecoder()
    chunk = b"x" * (256 * 1024)
    most = 0
    out: list[RawFrame | Violation] = []
    for _ in range(400):  # 100 MiB without a newline
        out += decoder.feed(chunk)
        most = max(most, decoder.buffered)
    out += decoder.feed(b'"}\n{"jsonrpc":"2.0","method":"_after"}\n')
    assert most <= DEFAULT_MAX_FRAME_BYTES
    assert decoder.buffered == 0
    (violation, frame) = out
    assert isinstance(violation, Violation) and isinstance(frame, RawFrame)
    assert violation.clause_id == CLAUSE_LIMIT  # our cap, not a breach of the peer (RFC 8259 § 9)
    assert "line of at least 104857602 bytes exceeds the frame cap of 67108864 bytes" in violation.message
    assert frame.data == b'{"jsonrpc":"2.0","method":"_after"}'  # the next frame is intact


@pytest.mark.anyio
async def test_notification_flood_costs_bounded_memory(
    schema_validator: SchemaValidator, tmp_path: Path, traced: None
) -> None:
    acp = harness("stdout-flood", schema_validator, tmp_path, HOSTILE_FLOOD_FRAMES="20000")
    with anyio.fail_after(300):
        async with acp.connect() as conn:
            sid = await conn.client.new_session()
            before = tracemalloc.get_traced_memory()[0]
            turn = await conn.client.prompt(sid, "flood me")
            kept = tracemalloc.get_traced_memory()[0] - before
            assert turn.stop_reason == "end_turn"
            assert len(conn.peer.events) > 20_000
    assert kept < BOUND, f"20,000 notifications left {kept / MIB:.0f} MiB behind"


@pytest.mark.anyio
async def test_stderr_flood_costs_bounded_memory(
    schema_validator: SchemaValidator, tmp_path: Path, traced: None
) -> None:
    acp = harness("stderr-flood", schema_validator, tmp_path, HOSTILE_STDERR_MIB="12")
    before = tracemalloc.get_traced_memory()[0]
    with anyio.fail_after(300):
        async with acp.connect() as conn:
            await conn.transport.close_output()  # the agent finishes its flood, then exits
            assert await conn.transport.wait_exit(120)
    kept = tracemalloc.get_traced_memory()[0] - before
    lines = len(acp.connections[0].transcript.stderr())
    transcript = acp.connections[0].transcript
    assert conn.transport.stderr_total > 100_000  # the flood did arrive (~126,000 lines)
    assert kept < BOUND, f"{lines} stderr lines kept, {kept / MIB:.0f} MiB"
    assert lines <= STDERR_HEAD + 2 * STDERR_TAIL
    assert transcript.stderr_total == conn.transport.stderr_total
    assert transcript.stderr_dropped == transcript.stderr_total - lines
    assert f"{transcript.stderr_dropped} stderr line(s) of the peer dropped here" in transcript.excerpt(last=10**6)


def test_transcript_keeps_the_head_and_tail_of_stderr_in_order_and_counts_the_rest() -> None:
    t = Transcript("agent")
    t.add("in", b'{"jsonrpc":"2.0","method":"_first"}', {"jsonrpc": "2.0", "method": "_first"})
    marked = None
    total = STDERR_HEAD + 10 * STDERR_TAIL
    for n in range(total):
        e = t.add("stderr", f"line {n}")
        if n == STDERR_HEAD + 5:
            marked = e
            t.violation(Violation("transport.stdio.stdout-clean", "pinned"), e)  # never dropped
    t.add("in", b'{"jsonrpc":"2.0","method":"_last"}', {"jsonrpc": "2.0", "method": "_last"})
    kept = t.stderr()
    assert kept[:STDERR_HEAD] == [f"line {n}" for n in range(STDERR_HEAD)]
    assert kept[-STDERR_TAIL:] == [f"line {n}" for n in range(total - STDERR_TAIL, total)]
    assert marked is not None and marked in t.entries
    assert len(kept) <= STDERR_HEAD + 2 * STDERR_TAIL + 1
    assert t.stderr_total == total and t.stderr_dropped == total - len(kept)
    assert [e.method for e in t.frames()] == ["_first", "_last"]
    notes = [e.text() for e in t.entries if e.direction == "note"]
    assert notes == [
        f"... {t.stderr_dropped} stderr line(s) of the peer dropped here (a flood: the first {STDERR_HEAD} "
        f"and the last {STDERR_TAIL} are kept) ..."
    ]
    assert [e.t for e in t.entries] == sorted(e.t for e in t.entries)


@pytest.mark.anyio
async def test_request_flood_costs_bounded_memory(
    schema_validator: SchemaValidator, tmp_path: Path, traced: None
) -> None:
    # ~10 KB per request in flight: 4,000 peak near 40 MiB, 2.5x the bound (3,000 measured 29 MiB).
    acp = harness("request-flood", schema_validator, tmp_path, HOSTILE_FLOOD_REQUESTS="4000")
    with anyio.fail_after(300):
        async with acp.connect() as conn:
            sid = await conn.client.new_session()
            before = tracemalloc.get_traced_memory()[0]
            tracemalloc.reset_peak()
            turn = await conn.client.prompt(sid, "flood me with requests")
            peak = tracemalloc.get_traced_memory()[1] - before
            assert turn.stop_reason == "end_turn"
    assert peak < BOUND, f"4,000 requests in flight peaked at {peak / MIB:.0f} MiB"


@pytest.mark.anyio
async def test_judging_a_binary_flood_takes_linear_time() -> None:
    """Judging was O(violations x entries), with a 40-line excerpt per violation: 20,000 bad
    lines took minutes.  Now one pass, and a bounded number of results per clause."""
    agent_end, client_end = memory_pair(max_buffer=100_000)
    lines = 3000
    with anyio.fail_after(120):
        async with Peer(client_end, Role.CLIENT, timeout=5) as client:
            await agent_end.send(b"\xff\xfe binary \x00\x01\n" * lines)
            await agent_end.send(b'{"jsonrpc":"2.0","method":"_done"}\n')
            await client.wait_for(lambda e: getattr(e, "method", None) == "_done", timeout=60)
            started = time.process_time()  # CPU time: a loaded CI machine does not inflate it
            results = passive_results(client.transcript, "agent")
            took = time.process_time() - started
    utf8 = [r for r in results if r.clause == "transport.utf8"]
    assert utf8 and all(r.status == "FAIL" for r in utf8)
    assert len(results) <= len(PASSIVE_CLAUSES) * (MAX_EXAMPLES_PER_CLAUSE + 1)
    assert took < 1.0, f"judging {lines} bad lines took {took:.1f} s of CPU"


def test_many_distinct_violations_are_listed_up_to_a_bound_and_counted() -> None:
    t = Transcript("agent")
    for n in range(MAX_EXAMPLES_PER_CLAUSE + 7):
        entry = t.add("in", f"garbage {n}".encode())
        t.violation(Violation("transport.stdio.stdout-clean", f"line {n} is not JSON"), entry)
        t.violation(Violation("transport.stdio.stdout-clean", f"line {n} is not JSON"), entry)  # a repeat
    results = [r for r in passive_results(t, "agent") if r.clause == "transport.stdio.stdout-clean"]
    assert [r.message for r in results[:MAX_EXAMPLES_PER_CLAUSE]] == [
        f"line {n} is not JSON" for n in range(MAX_EXAMPLES_PER_CLAUSE)
    ]
    assert "garbage 3" in results[3].evidence  # each with the excerpt around its own entry
    assert len(results) == MAX_EXAMPLES_PER_CLAUSE + 1
    assert results[-1].message.startswith("14 more violation(s) of this clause not listed")
    assert {r.status for r in results} == {"FAIL"}
