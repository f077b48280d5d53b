"""Our own code, fuzzed with the public strategies: it must survive whatever a peer sends.

* the sans-IO core (``Connection``): schema-derived frames, their mutations and
  byte damage, split at every offset, only ever become documented events
  (``Request`` / ``Notification`` / ``Response`` / ``Violation``), chunking
  never changes what is seen, valid frames raise no violation;
* the reference ``MockAgent`` (a ``Peer`` in the agent role) over an in-memory
  transport: after any frame it is alive, owes no answer it did not give, and
  still serves a valid ``session/new``; its ``serve`` never raises;
* the suite's ``ClientEndpoint`` (a ``Peer`` in the client role): whatever the
  agent side sends, it answers the agent's requests and keeps serving;
* the recording proxy's ``WireTap``: arbitrary bytes both ways, never an exception.

Every wait has a deadline (``anyio.fail_after``).  The defects these properties
found (lone surrogates, deep nesting in the proxy, integers beyond 64 bits, the
line ``null``) have a regression test each at the end.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from acp_conformance import strategies as acp
from acp_conformance.core import jsonrpc
from acp_conformance.core.connection import Connection, Role
from acp_conformance.core.events import Notification, Request, Response, Unjudged, Violation
from acp_conformance.core.framing import FrameDecoder, RawFrame
from acp_conformance.endpoints.client import ClientEndpoint, Sandbox
from acp_conformance.peer import Peer
from acp_conformance.schema.validator import SchemaValidator
from acp_conformance.transport import MemoryTransport, memory_pair
from mock_agent import MockAgent
from tests.conftest import SCHEMA_DIRS

_FOUND = next((d for d in SCHEMA_DIRS if (d / "schema.json").is_file()), None)
if _FOUND is None:  # pragma: no cover - environment problem
    pytest.skip("ACP schema not found (run `npm ci`)", allow_module_level=True)
SCHEMA_DIR: Path = _FOUND
DOC: dict[str, Any] = json.loads((SCHEMA_DIR / "schema.json").read_text("utf-8"))
V = SchemaValidator(DOC)

DEADLINE = 30.0  # a bound against hangs, generous: CI machines run these under heavy load
EVENTS = (Request, Notification, Response, Violation, Unjudged)

PROFILE = settings(
    max_examples=40,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
)


def anything(sender: str, huge: int = 64 * 1024) -> st.SearchStrategy[acp.Frame]:
    """Every kind of frame ``sender`` might write: valid, unusual, invalid, damaged."""
    parts = [
        acp.frames(sender=sender, schema=DOC, unusual=True, huge_bytes=huge),
        acp.invalid_frames(sender=sender, schema=DOC, huge_bytes=huge),
        acp.byte_damage(acp.frames(sender=sender, schema=DOC), huge_bytes=huge),
    ]
    return acp.evenly(*parts)


def feed(conn: Connection, chunks: list[bytes] | tuple[bytes, ...]) -> list[Any]:
    out: list[Any] = []
    for c in chunks:
        out += conn.receive_data(c)
    return out + conn.receive_eof()


# ------------------------------------------------------------------- the core
@PROFILE
@given(anything("agent"))
def test_core_turns_any_frame_into_documented_events_whatever_the_chunking(frame: acp.Frame) -> None:
    whole = feed(Connection(Role.CLIENT), [frame.data])
    assert all(isinstance(e, EVENTS) for e in whole)
    assert repr(feed(Connection(Role.CLIENT), frame.writes)) == repr(whole)
    if len(frame.data) <= 2048:  # every two-write split; longer frames get the drawn chunking above
        for first, rest in acp.every_split(frame.data):
            assert repr(feed(Connection(Role.CLIENT), [first, rest])) == repr(whole)


@PROFILE
@given(acp.frames(sender="client", kinds=["request", "notification"], schema=DOC, unusual=True))
def test_core_raises_no_violation_on_valid_frames_split_anywhere(frame: acp.Frame) -> None:
    dec = FrameDecoder()
    cut = len(frame.data) // 3
    items = dec.feed(frame.data[:cut]) + dec.feed(frame.data[cut:]) + dec.feed_eof()
    assert items == [RawFrame(frame.data.rstrip(b"\n"))]
    events = feed(Connection(Role.AGENT), [frame.data])
    if frame.message is not None and frame.message.get("id", 0) is not None:
        assert [e for e in events if isinstance(e, Violation)] == [], frame.describe()
    assert [e.message for e in events if not isinstance(e, Violation)] == [frame.message]


def test_core_handles_lines_of_more_than_one_mib() -> None:
    big = json.dumps({"jsonrpc": "2.0", "method": "_x", "params": {"blob": "\u05d0" * (3 * 1024 * 1024)}})
    data = big.encode() + b"\n"
    conn = Connection(Role.AGENT)
    events = feed(conn, [data[i : i + 65536] for i in range(0, len(data), 65536)])
    assert [type(e) for e in events] == [Notification]
    small = Connection(Role.AGENT, max_frame_bytes=1024 * 1024)
    events = feed(small, [data, b'{"jsonrpc":"2.0","method":"_y"}\n'])
    assert [type(e) for e in events] == [Violation, Notification]  # discarded, then the next line is fine


# ------------------------------------------------------------ the mock agent
@asynccontextmanager
async def mock_agent() -> AsyncIterator[tuple[MemoryTransport, Connection, list[Any]]]:
    """The reference agent in-process; yields (our end, a client-role core, the events seen so far)."""
    agent_end, client_end = memory_pair(max_buffer=4096)
    agent = MockAgent(validator=V)
    conn = Connection(Role.CLIENT)
    seen: list[Any] = []
    with anyio.fail_after(DEADLINE):
        async with anyio.create_task_group() as tg:
            tg.start_soon(agent.serve, agent_end)

            async def reader() -> None:
                while True:
                    data = await client_end.receive()
                    if not data:
                        seen.extend(conn.receive_eof())
                        return
                    seen.extend(conn.receive_data(data))

            tg.start_soon(reader)
            try:
                yield client_end, conn, seen
            finally:
                await client_end.close_output()  # EOF: the agent winds down and serve() returns


async def answer_to(conn: Connection, seen: list[Any], rid: Any) -> Response:
    key = jsonrpc.id_key(rid)
    while True:
        for e in seen:
            if isinstance(e, Response) and jsonrpc.id_key(e.id) == key:
                return e
        await anyio.sleep(0.001)  # polling an in-memory pipe under fail_after; nothing else to wait on


async def call(end: MemoryTransport, conn: Connection, seen: list[Any], method: str, params: Any) -> Response:
    # String ids of our own, so no fuzzed frame's id can be mistaken for ours.
    rid, data = conn.send_request(method, params, id=f"acp-own-{conn.next_request_id()}")
    await end.send(data)
    with anyio.fail_after(DEADLINE):
        return await answer_to(conn, seen, rid)


@settings(PROFILE, max_examples=30)
@given(anything("client", huge=1024 * 1024))
def test_mock_agent_survives_any_frame_and_keeps_serving(frame: acp.Frame) -> None:
    async def body() -> None:
        async with mock_agent() as (end, conn, seen):
            init = await call(end, conn, seen, "initialize", {"protocolVersion": 1})
            assert not init.is_error
            mark = len(seen)
            for chunk in frame.writes:
                await end.send(chunk)
            resp = await call(end, conn, seen, "session/new", {"cwd": "/tmp", "mcpServers": []})
            assert not resp.is_error and isinstance(resp.result, dict), resp
            assert all(isinstance(e, EVENTS) for e in seen)
            theirs = [e.message for e in seen[mark:] if isinstance(e, Response) and e.id != resp.id]
            answers = frame.answers(theirs)
            wrong = [p for p in frame.expect.check(answers) if p.clause == "jsonrpc.notification-no-response"]
            assert wrong == [], (wrong, frame.describe())

    anyio.run(body, backend="asyncio")


# ------------------------------------------------------------ the client side
@asynccontextmanager
async def client_endpoint(root: Path) -> AsyncIterator[tuple[MemoryTransport, Connection, list[Any], Peer]]:
    """Our ClientEndpoint in-process; yields (the agent's end, an agent-role core, events, the client peer)."""
    client_end, agent_end = memory_pair(max_buffer=4096)
    peer = Peer(client_end, Role.CLIENT, validator=V, timeout=DEADLINE)
    ClientEndpoint(peer, sandbox=Sandbox(root), permission="allow_once")
    conn = Connection(Role.AGENT)
    seen: list[Any] = []
    with anyio.fail_after(DEADLINE):
        async with peer, anyio.create_task_group() as tg:

            async def reader() -> None:
                while True:
                    data = await agent_end.receive()
                    if not data:
                        return
                    seen.extend(conn.receive_data(data))

            tg.start_soon(reader)
            try:
                yield agent_end, conn, seen, peer
            finally:
                await agent_end.close_output()
                tg.cancel_scope.cancel()


@settings(PROFILE, max_examples=30)
@given(frame=anything("agent"))
def test_client_endpoint_answers_and_survives_any_agent_frame(frame: acp.Frame, tmp_path_factory: Any) -> None:
    root = tmp_path_factory.mktemp("sandbox")
    (root / "notes.txt").write_text("hello\n")

    async def body() -> None:
        async with client_endpoint(root) as (end, conn, seen, peer):
            for chunk in frame.writes:
                await end.send(chunk)
            resp = await call(end, conn, seen, "fs/read_text_file", {"sessionId": "s", "path": str(root / "notes.txt")})
            assert resp.result == {"content": "hello\n"}, resp
            assert all(isinstance(e, EVENTS) for e in peer.events)
            if any(isinstance(e, Unjudged) for e in peer.events):
                # Nested deeper than our parser goes: valid JSON we cannot read, so recorded and
                # charged to no clause (the suite's own peers answer only what they decode).
                # (also a garbage line of thousands of "[": as deep as any nesting, before it is invalid).
                deep = frame.mutation == "deep-nesting" or frame.data.lstrip()[:1000] in (b"[" * 1000, b"{" * 1000)
                assert deep, frame.describe()
                assert not any(isinstance(e, Violation) for e in peer.events), frame.describe()
            elif frame.trackable_id and frame.kind == "request":
                # Each request is handled in its own task: the probe's answer may overtake the
                # fuzzed request's (a 2,000-level frame takes longer), so wait for it, bounded.
                try:
                    with anyio.fail_after(DEADLINE):
                        await answer_to(conn, seen, frame.id)
                except TimeoutError:
                    raise AssertionError(f"no answer to {frame.describe()} within {DEADLINE} s") from None

    anyio.run(body, backend="asyncio")


# ------------------------------------------------------------------ the proxy
@PROFILE
@given(st.lists(st.tuples(st.booleans(), anything("client") | anything("agent")), max_size=4))
def test_wiretap_judges_any_bytes_both_ways(exchanges: list[tuple[bool, acp.Frame]]) -> None:
    proxy = pytest.importorskip("acp_conformance.proxy")
    tap = proxy.WireTap(V)
    for from_client, frame in exchanges:
        for chunk in frame.writes:
            (tap.from_client if from_client else tap.from_agent)(chunk)
    tap.client_eof()
    tap.agent_eof()
    assert all(isinstance(v, Violation) for v in tap.transcript.violations)
    tap.results("agent")
    tap.results("client")


# ------------------------------------------- defects the fuzzing found, fixed
def test_lone_surrogates_can_be_echoed() -> None:
    """Found by fuzzing: orjson refuses lone surrogates, so echoing one in an error killed the mock agent."""
    conn = Connection(Role.AGENT)
    conn.receive_data(b'{"jsonrpc":"2.0","id":1,"method":"session/close","params":{"sessionId":"a\\ud800"}}\n')
    data = conn.send_error(1, -32002, "session not found", {"sessionId": "a\ud800"})
    assert jsonrpc.decode(data.rstrip(b"\n"))[0]["error"]["data"] == {"sessionId": "a\ud800"}


def test_wiretap_survives_deep_nesting() -> None:
    """Found by fuzzing: the proxy re-serialized the params it mirrored, which orjson stops at 255 levels."""
    proxy = pytest.importorskip("acp_conformance.proxy")
    deep = b"[" * 600 + b"]" * 600
    proxy.WireTap(V).from_client(b'{"jsonrpc":"2.0","id":1,"method":"_x","params":{"d":' + deep + b"}}\n")


@pytest.mark.parametrize("value", [-(2**63) - 1, 2**64, 10**30, 2**64 - 1, -(2**63)])
def test_big_integer_ids_keep_their_value(value: int) -> None:
    """Found by fuzzing: orjson decodes integers beyond 64 bits as floats, so an exact echo was misjudged."""
    decoded, problems = jsonrpc.decode(b'{"id": %d, "f": 1.5}' % value)
    assert decoded == {"id": value, "f": 1.5} and type(decoded["id"]) is int and not problems


def test_null_line_is_json_but_no_request() -> None:
    """Found by fuzzing: the line ``null`` is JSON, so a receiver owes -32600, not -32700."""
    assert jsonrpc.decode(b"null")[0] is None
    assert jsonrpc.is_json_null(b" null\r") and not jsonrpc.is_json_null(b"nul")


def test_nesting_beyond_our_parser_is_recorded_not_charged() -> None:
    """Found by fuzzing (CI, 4,859 nested arrays): valid JSON deeper than Python's parser goes was
    judged "not JSON", a false FAIL of the sender's stdout/stdin hygiene clause; RFC 8259 section 9
    makes depth a limit of the parser, so the line is an ``Unjudged`` event, and a strict receiver
    still answers what it could not parse with -32700."""
    from acp_conformance.checks import passive_results
    from acp_conformance.core.connection import AnsweringConnection
    deep = b"[" * 5000 + b"]" * 5000
    line = b'{"jsonrpc":"2.0","id":1,"method":"fs/read_text_file","params":{"_meta":{"d":' + deep + b"}}}\n"
    events = Connection(Role.CLIENT).receive_data(line)
    assert [type(e) for e in events] == [Unjudged] and "recorded, not judged" in events[0].reason

    answered: list[int] = []
    AnsweringConnection(Role.CLIENT, lambda code, _msg: answered.append(code)).receive_data(line)
    assert answered == [jsonrpc.ErrorCode.PARSE_ERROR]

    tap = pytest.importorskip("acp_conformance.proxy").WireTap(V)
    tap.from_agent(line)
    assert tap.transcript.violations == []
    assert {r.status.name for r in passive_results(tap.transcript, "agent")} <= {"PASS", "NOT_APPLICABLE"}
    assert any("recorded, not judged" in str(e.raw) for e in tap.transcript.entries if e.direction == "note")
