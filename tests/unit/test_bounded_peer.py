"""Bounded memory and backpressure in the Peer (docs/hostile-peers.md).

``EventLog`` keeps stable positions while dropping old bulk events; the
transcript keeps a head, a tail and what the passive checks need; inbound
requests get backpressure without ever blocking the answers a handler waits
for; an unterminated line is shown at a deadline.
"""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from acp_conformance.checks import passive_results
from acp_conformance.core.connection import Role
from acp_conformance.core.events import DROPPED, EventLog, Notification, Request, Response, Violation
from acp_conformance.errors import PeerTimeout
from acp_conformance.peer import Peer
from acp_conformance.transcript import FRAMES_HEAD, FRAMES_TAIL, Transcript
from acp_conformance.transport import memory_pair

SID = "s-1"


def chunk(n: int) -> Notification:
    params = {
        "sessionId": SID,
        "update": {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": str(n)}},
    }
    return Notification("session/update", params)


def tool_call(n: int) -> Notification:
    return Notification(
        "session/update", {"sessionId": SID, "update": {"sessionUpdate": "tool_call", "toolCallId": str(n)}}
    )


def test_event_log_keeps_positions_and_drops_old_bulk_events_only() -> None:
    log = EventLog(head=3, tail=5, structural=4)
    answer = Response(id=0, result={}, method="initialize")
    bad = Violation("schema.valid", "bad")
    log.append(answer)
    for n in range(2):
        log.append(chunk(n))
    log.append(bad)  # past the head: pinned
    for n in range(100):
        log.append(chunk(n))
    log.append(tool_call(1))
    assert len(log) == 105
    assert log.dropped == 100 - 5
    assert log[0] is answer and log[3] is bad and log[-1].params["update"]["toolCallId"] == "1"  # type: ignore[union-attr]
    assert log[10] is DROPPED and log.get(10) is None
    kept = list(log)
    assert len(kept) == 3 + 1 + 5 + 1 and log[0:105] == kept and log[99:] == kept[-6:]
    assert log.index(bad) == 3 and bad in log
    with pytest.raises(IndexError):
        log[105]
    for n in range(10):  # structural events have their own, larger window
        log.append(tool_call(n))
    assert (
        sum(1 for e in log if isinstance(e, Notification) and e.params["update"]["sessionUpdate"] == "tool_call") == 4
    )


def _frame(n: int, kind: str = "agent_message_chunk") -> tuple[bytes, dict[str, Any]]:
    msg = {
        "jsonrpc": "2.0",
        "method": "session/update",
        "params": {"sessionId": SID, "update": {"sessionUpdate": kind}},
    }
    return f'{{"n":{n}}}'.encode(), msg


def test_transcript_drops_frames_but_answers_the_passive_checks_the_same() -> None:
    """The first frame of each kind is pinned, so "was the clause exercised?" gets the same
    answer; frames with violations stay; dropped runs are counted in notes."""
    t = Transcript("agent")
    total = FRAMES_HEAD + 10 * FRAMES_TAIL
    for n in range(total):
        raw, msg = _frame(n, "plan" if n == FRAMES_HEAD + 7 else "agent_message_chunk")
        e = t.add("in", raw, msg)
        if n == FRAMES_HEAD + 11:
            t.violation(Violation("update.chunk.shape", "pinned"), e)
    kept = list(t.frames())
    assert t.frames_total == total and t.frames_dropped == total - len(kept)
    assert len(kept) <= FRAMES_HEAD + 2 * FRAMES_TAIL + 2
    assert [e.raw for e in kept[:FRAMES_HEAD]] == [_frame(n)[0] for n in range(FRAMES_HEAD)]
    assert kept[-1].raw == _frame(total - 1)[0]
    assert any(e.violations for e in kept) and any(
        e.method == "session/update" and e.message["params"]["update"]["sessionUpdate"] == "plan" for e in kept
    )
    notes = [str(e.raw) for e in t.entries if e.direction == "note"]
    assert notes and all("frame(s) dropped here" in n for n in notes)
    assert sum(int(n.split()[1]) for n in notes) == t.frames_dropped
    assert f"{t.frames_dropped} of {total} frame(s) dropped from the evidence" in t.dropped_summary
    statuses = {r.clause: r.status for r in passive_results(t, "agent")}
    assert statuses["update.plan.shape"] == "PASS" and statuses["update.chunk.shape"] == "FAIL"
    assert [e.t for e in t.entries] == sorted(e.t for e in t.entries)


@pytest.mark.anyio
async def test_backpressure_stops_reading_while_handlers_are_busy() -> None:
    """A peer firing requests whose handlers are slow fills its pipe: we hold at most
    ``max_inflight`` (plus one read's worth) handlers, and read on as they finish."""
    agent_end, client_end = memory_pair(max_buffer=4)
    release = anyio.Event()
    most = 0

    async def slow(req: Request) -> Any:
        nonlocal most
        most = max(most, client.__dict__["_busy"])
        await release.wait()
        return {"content": ""}

    with anyio.fail_after(20):
        async with Peer(client_end, Role.CLIENT, timeout=10, max_inflight=8) as client:
            client.handlers["fs/read_text_file"] = slow
            async with Peer(agent_end, Role.AGENT, timeout=10) as agent:
                rids = []
                with anyio.move_on_after(1):  # the pipe (4 writes) fills once we stop reading
                    for _ in range(200):
                        rids.append(await agent.send_request("fs/read_text_file", {"sessionId": SID, "path": "/x"}))
                assert 8 <= most <= 9 and len(rids) < 200, (most, len(rids))
                assert client.__dict__["_reading_paused"]
                release.set()
                for _ in range(200 - len(rids)):
                    rids.append(await agent.send_request("fs/read_text_file", {"sessionId": SID, "path": "/x"}))
                for rid in rids:
                    assert not (await agent.wait_response(rid, method="fs/read_text_file")).is_error
                assert most <= 9


@pytest.mark.anyio
async def test_handlers_waiting_on_the_peer_never_block_its_answers() -> None:
    """The deadlock to avoid: every slot taken by a handler that waits for the peer's answer
    (a permission request pending while the turn goes on) must not stop us reading that answer."""
    agent_end, client_end = memory_pair()

    async def prompt(req: Request) -> Any:
        outcome = await agent.request("session/request_permission", {"sessionId": SID}, validate=False)
        return {"stopReason": "cancelled" if outcome == {"outcome": {"outcome": "cancelled"}} else "end_turn"}

    async def permission(req: Request) -> Any:
        return {"outcome": {"outcome": "cancelled"}}

    with anyio.fail_after(20):
        async with (
            Peer(client_end, Role.CLIENT, timeout=10) as client,
            Peer(agent_end, Role.AGENT, timeout=10, max_inflight=2) as agent,
        ):
            agent.handlers["session/prompt"] = prompt
            client.handlers["session/request_permission"] = permission
            rids = [await client.send_request("session/prompt", {"sessionId": SID, "prompt": []}) for _ in range(10)]
            for rid in rids:
                resp = await client.wait_response(rid, method="session/prompt")
                assert resp.result == {"stopReason": "cancelled"}


@pytest.mark.anyio
async def test_answers_queue_for_a_peer_that_reads_late() -> None:
    """A peer writing all its requests before reading any answer: the answers wait in the
    outbox (not in the handlers' slots), so nothing deadlocks and every answer arrives in order."""
    agent_end, client_end = memory_pair(max_buffer=2)

    async def read(req: Request) -> Any:
        return {"content": "x" * 100}

    with anyio.fail_after(20):
        async with Peer(client_end, Role.CLIENT, timeout=10, max_inflight=4) as client:
            client.handlers["fs/read_text_file"] = read
            burst = b"".join(
                b'{"jsonrpc":"2.0","id":%d,"method":"fs/read_text_file","params":{}}\n' % n for n in range(2000)
            )
            await agent_end.send(burst)
            got = bytearray()
            while got.count(b"\n") < 2000:
                got += await agent_end.receive()
            ids = [int(line.split(b'"id":')[1].split(b",")[0]) for line in bytes(got).splitlines()]
            assert ids == list(range(2000))
            await client.drain()


@pytest.mark.anyio
async def test_a_deadline_shows_the_unterminated_line() -> None:
    agent_end, client_end = memory_pair()
    with anyio.fail_after(10):
        async with Peer(client_end, Role.CLIENT, timeout=0.2) as client:
            rid = await client.send_request("session/prompt", {"sessionId": SID, "prompt": []}, validate=False)
            await agent_end.send(b'{"jsonrpc":"2.0","id":0,"result":{"stopRea')
            with pytest.raises(PeerTimeout):
                await client.wait_response(rid, method="session/prompt")
            notes = [e.text() for e in client.transcript.entries if e.direction == "note"]
            shown = '{"jsonrpc":"2.0","id":0,"result":{"stopRea'
            assert f"the peer has written 42 bytes of a line without a terminating newline: {shown}" in notes
