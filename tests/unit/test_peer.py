"""Peer over an in-memory pair: calls, handlers, deadlines, EOF, validation both ways."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import orjson
import pytest

from acp_conformance.core.connection import Role
from acp_conformance.core.events import Event, Notification, Request, Response, Violation
from acp_conformance.endpoints.client import ClientEndpoint
from acp_conformance.errors import LocalProtocolError, PeerExited, PeerTimeout, RpcError
from acp_conformance.peer import IDLESS, NO_ANSWER, DeadlineMemory, HandlerError, Peer
from acp_conformance.schema.validator import SchemaValidator
from acp_conformance.transport import MemoryTransport, memory_pair

pytestmark = pytest.mark.anyio

SID = "sess-1"
NEW_SESSION = {"cwd": "/tmp/project", "mcpServers": []}
BAD_CHUNK = {"sessionId": SID, "update": {"sessionUpdate": "agent_message_chunk", "content": {"type": "txt"}}}


@asynccontextmanager
async def connected(
    validator: SchemaValidator | None = None,
    timeout: float = 5,
) -> AsyncIterator[tuple[Peer, Peer, MemoryTransport]]:
    """(client peer, agent peer, the agent's raw transport)."""
    agent_end, client_end = memory_pair()
    async with (
        Peer(client_end, Role.CLIENT, validator=validator, timeout=timeout) as client,
        Peer(agent_end, Role.AGENT, validator=validator, timeout=5) as agent,
    ):
        yield client, agent, agent_end


def is_notification(ev: Event) -> bool:
    return isinstance(ev, Notification)


async def test_request_response_round_trip(schema_validator: SchemaValidator) -> None:
    seen: list[Request] = []

    async def new_session(req: Request) -> Any:
        seen.append(req)
        return {"sessionId": SID}

    with anyio.fail_after(10):
        async with connected(schema_validator) as (client, agent, _):
            agent.handlers["session/new"] = new_session
            assert await client.request("session/new", NEW_SESSION) == {"sessionId": SID}
            assert await client.request("session/new", NEW_SESSION) == {"sessionId": SID}
            assert [r.id for r in seen] == [0, 1] and seen[0].params == NEW_SESSION
            assert client.violations() == [] and agent.violations() == []
            assert client.conn.pending_outgoing == [] and agent.conn.pending_incoming == []
            assert [e.direction for e in client.transcript.frames()] == ["out", "in", "out", "in"]
            assert [e.direction for e in agent.transcript.frames()] == ["in", "out", "in", "out"]
            assert [m["method"] for m in agent.transcript.messages("in")] == ["session/new"] * 2


async def test_handler_error_becomes_a_jsonrpc_error() -> None:
    async def read(req: Request) -> Any:
        raise HandlerError(-32002, "Resource not found", {"uri": "file:///nope"})

    with anyio.fail_after(10):
        async with connected() as (client, agent, _):
            agent.handlers["fs/read_text_file"] = read
            params = {"sessionId": SID, "path": "/nope"}
            resp = await client.call("fs/read_text_file", params)
            assert resp.is_error and resp.method == "fs/read_text_file"
            assert resp.error == {"code": -32002, "message": "Resource not found", "data": {"uri": "file:///nope"}}
            with pytest.raises(RpcError) as info:
                await client.request("fs/read_text_file", params)
            assert (info.value.code, info.value.error_message, info.value.data) == (
                -32002,
                "Resource not found",
                {"uri": "file:///nope"},
            )
            assert agent.conn.pending_incoming == []


@pytest.mark.parametrize("method", ["session/set_mode", "_vendor/custom"])
async def test_unhandled_method_is_method_not_found(method: str) -> None:
    with anyio.fail_after(10):
        async with connected() as (client, _agent, _):
            resp = await client.call(method, {"sessionId": SID, "modeId": "ask"})
            assert resp.is_error and resp.error["code"] == -32601
            assert method in resp.error["message"]


async def test_no_answer_leaves_the_request_pending() -> None:
    returned = anyio.Event()

    async def hold(req: Request) -> Any:
        returned.set()
        return NO_ANSWER

    async def pong(req: Request) -> Any:
        return {"pong": True}

    with anyio.fail_after(10):
        async with connected() as (client, agent, _):
            agent.handlers["_held"] = hold
            agent.handlers["_ping"] = pong
            rid = await client.send_request("_held", {})
            await returned.wait()
            # The stream is ordered: once the later ping is answered, an answer to
            # the held request would already have arrived.
            assert await client.request("_ping", {}) == {"pong": True}
            assert agent.conn.pending_incoming == [(rid, "_held")]
            assert client.conn.pending_outgoing == [(rid, "_held")]
            assert not [e for e in client.events if isinstance(e, Response) and e.id == rid]
            # The test may still answer it by hand.
            await agent.respond(rid, {"late": True})
            assert (await client.wait_response(rid, method="_held")).result == {"late": True}


async def test_wait_response_deadline_is_a_peer_timeout_and_a_violation() -> None:
    async def hold(req: Request) -> Any:
        return NO_ANSWER

    with anyio.fail_after(10):
        async with connected() as (client, agent, _):
            agent.handlers["session/prompt"] = hold
            rid = await client.send_request("session/prompt", {"sessionId": SID, "prompt": []})
            with pytest.raises(PeerTimeout) as info:
                await client.wait_response(rid, method="session/prompt", timeout=0.2)
            assert "session/prompt" in str(info.value) and "0.2" in str(info.value)
            assert [v.clause_id for v in client.violations()] == ["jsonrpc.every-request-answered"]
            assert info.value.charged == "jsonrpc.every-request-answered"


async def test_a_silence_to_an_extension_request_is_charged_once_to_ext_request_respond() -> None:
    """extensibility.mdx's MUST for _-prefixed requests is the narrower clause: the silence is its
    finding, not also jsonrpc.every-request-answered's; the error says which clause it went to."""

    async def hold(req: Request) -> Any:
        return NO_ANSWER

    with anyio.fail_after(10):
        async with connected() as (client, agent, _):
            agent.handlers["_held"] = hold
            rid = await client.send_request("_held", {})
            with pytest.raises(PeerTimeout) as info:
                await client.wait_response(rid, method="_held", timeout=0.2)
            assert [v.clause_id for v in client.violations()] == ["ext.request.respond"]
            assert info.value.charged == "ext.request.respond"


async def test_a_silence_while_we_hold_the_peers_request_is_unproven_and_charged_to_no_clause() -> None:
    """An agent that serves nothing while its own request waits on us answers once we answer it:
    one defect, jsonrpc.bidirectional's (judged by its test, which releases).  A silence meanwhile
    is not also a request left unanswered, nor a deadline the run remembers against the method;
    once nothing is held, a silence is charged as before."""
    answered = anyio.Event()

    async def serial(req: Request) -> Any:
        await answered.wait()  # nothing served while the permission request waits on the client
        return {"sessionId": SID}

    with anyio.fail_after(10):
        async with connected(timeout=0.2) as (client, agent, _):
            endpoint = ClientEndpoint(client, permission="hold")
            client.deadlines = DeadlineMemory()
            agent.handlers["session/new"] = serial
            perm = {
                "sessionId": SID,
                "toolCall": {"toolCallId": "t1"},
                "options": [{"optionId": "ok", "name": "Allow", "kind": "allow_once"}],
            }

            async def ask() -> None:
                await agent.request("session/request_permission", perm)
                answered.set()

            agent.start_soon(ask)
            await endpoint.wait_permission()
            rid = await client.send_request("session/new", NEW_SESSION)
            with pytest.raises(PeerTimeout) as info:
                await client.wait_response(rid, method="session/new")
            assert "session/request_permission (id 0)" in info.value.unproven
            assert "jsonrpc.bidirectional" in str(info.value)
            assert info.value.charged == "" and client.violations() == []
            assert not client.deadlines.misses  # a silence we provoked cuts no later test short
            with pytest.raises(PeerTimeout) as waited:
                await client.wait_for(lambda e: False, what="nothing", awaiting="session/new")
            assert waited.value.unproven and client.violations() == []
            # Released: the answer comes, late but not missing.
            await endpoint.answer_permission(endpoint.permission_calls[0], {"outcome": "cancelled"})
            assert (await client.wait_response(rid, method="session/new", timeout=5)).result == {"sessionId": SID}
            # Nothing held now: a silence is a request left unanswered again.
            agent.handlers["session/new"] = lambda req: anyio.sleep_forever()
            late = await client.send_request("session/new", NEW_SESSION)
            with pytest.raises(PeerTimeout) as info:
                await client.wait_response(late, method="session/new")
            assert info.value.charged == "jsonrpc.every-request-answered" and not info.value.unproven


async def test_an_answer_under_an_id_we_never_sent_leaves_the_missing_answer_unproven() -> None:
    """One breach, of the echo clause: a request without an answer under its id, while a response
    under an id matching nothing we sent came, is not also charged as unanswered."""

    async def misaddressed(req: Request) -> Any:
        await agent.send_raw(orjson.dumps({"jsonrpc": "2.0", "id": 424242, "result": {"sessionId": SID}}) + b"\n")
        return NO_ANSWER

    with anyio.fail_after(10):
        async with connected() as (client, agent, _):
            agent.handlers["session/new"] = misaddressed
            earlier = await client.send_request("session/new", NEW_SESSION)
            with pytest.raises(PeerTimeout):
                await client.wait_response(earlier, method="session/new", timeout=0.2)
            rid = await client.send_request("session/new", NEW_SESSION)
            with pytest.raises(PeerTimeout) as info:
                await client.wait_response(rid, method="session/new", timeout=0.2)
            assert "424242" in str(info.value) and "not proven" in str(info.value)
            assert "424242" in info.value.unproven
            assert client.strays_since(rid) == [424242]
            assert [v.clause_id for v in client.violations()] == ["jsonrpc.response-id-echo"] * 2
            # A later request with no stray after it is judged unanswered as usual.
            agent.handlers["session/new"] = lambda req: anyio.sleep_forever()
            late = await client.send_request("session/new", NEW_SESSION)
            with pytest.raises(PeerTimeout):
                await client.wait_response(late, method="session/new", timeout=0.2)
            assert client.strays_since(late) == []
            assert client.violations()[-1].clause_id == "jsonrpc.every-request-answered"


async def test_peer_eof_while_waiting_is_peer_exited_and_no_finding_by_itself() -> None:
    """A peer that closes its output may never have read our request (it crashed, quit, or
    exited on a defect of its own as our request crossed): the wait ends, nothing is charged."""
    with anyio.fail_after(10):
        async with connected() as (client, agent, agent_end):
            agent.handlers["session/prompt"] = lambda req: anyio.sleep_forever()
            rid = await client.send_request("session/prompt", {"sessionId": SID, "prompt": []})
            await agent.wait_for(lambda e: isinstance(e, Request))
            await agent_end.close_output()
            with pytest.raises(PeerExited) as info:
                await client.wait_response(rid, method="session/prompt")
            assert "session/prompt" in str(info.value) and "nothing shows it had read" in str(info.value)
            assert client.violations() == []


async def test_peer_eof_after_answering_a_later_request_is_a_finding() -> None:
    """Its input is ordered: answering a request we sent later proves it read the earlier one."""
    with anyio.fail_after(10):
        async with connected() as (client, agent, agent_end):
            agent.handlers["session/prompt"] = lambda req: anyio.sleep_forever()

            async def new_session(req: Request) -> Any:
                return {"sessionId": SID}

            agent.handlers["session/new"] = new_session
            held = await client.send_request("session/prompt", {"sessionId": SID, "prompt": []})
            assert await client.request("session/new", NEW_SESSION) == {"sessionId": SID}
            await agent_end.close_output()
            with pytest.raises(PeerExited):
                await client.wait_response(held, method="session/prompt")
            [v] = client.violations()
            assert v.clause_id == "jsonrpc.every-request-answered"
            assert "though it answered our request id 1 sent after it" in v.message


async def test_peer_eof_after_a_stray_leaves_the_missing_answer_unproven() -> None:
    """The stray rule holds on the EOF path too: a peer that answered a later request, sent a
    response under an id we never used and closed its output is charged once (the echo clause),
    not also with the earlier request left unanswered."""
    with anyio.fail_after(10):
        async with connected() as (client, agent, agent_end):

            async def held_then_misaddressed(req: Request) -> Any:
                await agent.send_raw(orjson.dumps({"jsonrpc": "2.0", "id": 424242, "result": {}}) + b"\n")
                return NO_ANSWER

            async def new_session(req: Request) -> Any:
                return {"sessionId": SID}

            agent.handlers["session/prompt"] = held_then_misaddressed
            agent.handlers["session/new"] = new_session
            held = await client.send_request("session/prompt", {"sessionId": SID, "prompt": []})
            assert await client.request("session/new", NEW_SESSION) == {"sessionId": SID}
            await agent_end.close_output()
            with pytest.raises(PeerExited) as info:
                await client.wait_response(held, method="session/prompt")
            assert info.value.read_proven and "424242" in info.value.unproven
            assert [v.clause_id for v in client.violations()] == ["jsonrpc.response-id-echo"]


async def test_an_error_without_an_id_leaves_a_missing_answer_unproven() -> None:
    """An error without any id, while a request of ours is in flight, may be that request's answer
    with its id lost (the echo clause's breach, flagged on it): no answer under the request's id
    is then not proven, as with a response under a wrong id (``Peer.strays_since``).  The same
    error answering one of our notifications is that clause's, and proves nothing about requests."""
    with anyio.fail_after(10):
        async with connected() as (client, agent, _):

            async def lost_its_id(req: Request) -> Any:
                await agent.send_raw(b'{"jsonrpc":"2.0","error":{"code":-32700,"message":"Parse error"}}\n')
                return NO_ANSWER

            agent.handlers["session/new"] = lost_its_id
            rid = await client.send_request("session/new", NEW_SESSION)
            with pytest.raises(PeerTimeout) as info:
                await client.wait_response(rid, method="session/new", timeout=0.2)
            assert "an error without any id" in info.value.unproven
            assert client.strays_since(rid) == [IDLESS]
            # Charged once, on the echo clause; not also as a request left unanswered.
            assert [v.clause_id for v in client.violations()] == ["jsonrpc.response-id-echo"]


async def test_peer_eof_while_waiting_for_an_event() -> None:
    with anyio.fail_after(10):
        async with connected() as (client, _agent, agent_end):
            await agent_end.close_output()
            with pytest.raises(PeerExited, match="session/update"):
                await client.wait_for(is_notification, what="a session/update")
            assert client.closed.is_set()
            assert client.transcript.entries[-1].text() == "peer closed its output (EOF)"


async def test_wait_for_deadline_names_what_it_waited_for() -> None:
    with anyio.fail_after(10):
        async with connected() as (client, _agent, _):
            with pytest.raises(PeerTimeout, match=r"no a plan update within 0\.05 s"):
                await client.wait_for(is_notification, what="a plan update", timeout=0.05)
            assert await client.quiet_for(0.05, is_notification) is None


async def test_inbound_invalid_session_update_is_recorded_with_its_frame(schema_validator: SchemaValidator) -> None:
    with anyio.fail_after(10):
        async with connected(schema_validator) as (client, agent, _):
            with pytest.raises(LocalProtocolError, match="session/update params"):
                await agent.notify("session/update", BAD_CHUNK)
            await agent.notify("session/update", BAD_CHUNK, validate=False)
            note = await client.wait_for(is_notification)
            assert isinstance(note, Notification) and note.params == BAD_CHUNK
            (v,) = client.violations()
            assert v.clause_id == "update.chunk.shape"
            assert "/update/content" in v.message and "'text'" in v.message
            assert v.raw == note.raw and v.index == note.index
            (entry,) = [e for e in client.transcript.frames("in")]
            assert entry.violations == [v] and entry.message == note.message
            assert client.transcript.violations == [v]


async def test_inbound_method_misuse_is_flagged(schema_validator: SchemaValidator) -> None:
    with anyio.fail_after(10):
        async with connected(schema_validator) as (client, agent, _):
            # An agent does not receive session/update; a bare "vendor" method lacks the "_" prefix.
            await client.notify(
                "session/update", {"sessionId": SID, "update": {"sessionUpdate": "plan"}}, validate=False
            )
            await client.notify("vendor/thing", {})
            await client.notify("_vendor/thing", {})
            await agent.wait_for(lambda e: isinstance(e, Notification) and e.method == "_vendor/thing")
            assert [v.clause_id for v in agent.violations()] == ["schema.valid", "ext.method.underscore"]
            assert "handled by the client" in agent.violations()[0].message


async def test_outbound_invalid_params_are_refused_unless_validate_false(schema_validator: SchemaValidator) -> None:
    bad = {"sessionId": SID, "prompt": [{"type": "txt", "text": "x"}]}
    with anyio.fail_after(10):
        async with connected(schema_validator) as (client, agent, _):
            with pytest.raises(LocalProtocolError, match=r"session/prompt params: .*'txt'"):
                await client.send_request("session/prompt", bad)
            assert client.conn.pending_outgoing == [] and list(client.transcript.frames()) == []
            resp = await client.call("session/prompt", bad, validate=False)
            assert resp.is_error and resp.error["code"] == -32601  # no handler on the agent
            (req,) = agent.requests("session/prompt")
            assert req.params == bad
            # The agent side judged the frame we deliberately sent broken.
            assert [v.clause_id for v in agent.violations()] == ["schema.valid"]


async def test_raw_sends_are_recorded_and_judged() -> None:
    with anyio.fail_after(10):
        async with connected() as (client, agent, _):
            await client.send_raw(b"not json\n")
            await client.send_raw(b'{"jsonrpc":"2.0","method":"_after"}\n')
            await agent.wait_for(is_notification)
            assert [v.clause_id for v in agent.violations()] == ["transport.stdio.stdin-clean"]
            assert any(e.text() == "(previous frame sent raw, deliberately)" for e in client.transcript.entries)


async def test_responses_with_violations_are_attached_to_their_entry() -> None:
    with anyio.fail_after(10):
        async with connected() as (client, _agent, agent_end):
            rid = await client.send_request("_x", {})
            await agent_end.send(b'{"jsonrpc":"2.0","id":"%d","result":{}}\n' % rid)
            await client.wait_for(lambda e: isinstance(e, Violation))
            (entry,) = client.transcript.frames("in")
            assert [v.clause_id for v in entry.violations] == ["jsonrpc.response-id-echo"]


async def test_reused_request_id_waits_for_its_own_response() -> None:
    served = 0

    async def count(req: Request) -> Any:
        nonlocal served
        served += 1
        return {"n": served}

    with anyio.fail_after(10):
        async with connected() as (client, agent, _):
            agent.handlers["_count"] = count
            assert (await client.call("_count", {}, id=7)).result == {"n": 1}
            assert (await client.call("_count", {}, id=7)).result == {"n": 2}


async def test_drain_waits_for_frames_already_handed_to_the_writer() -> None:
    """``drain`` returns once queued frames are on the wire (what a runner does before its own EOF)."""
    with anyio.fail_after(10):
        async with connected() as (client, agent, _):
            async with anyio.create_task_group() as tg:
                for n in range(20):
                    tg.start_soon(agent.notify, "_x/n", {"n": n})
                await anyio.sleep(0)  # the writers have started and queue on the lock
                await agent.drain()
            await client.wait_for(lambda e: isinstance(e, Notification) and e.params == {"n": 19})
            assert len(client.notifications("_x/n")) == 20


async def _wait_on_a_prompt(stream: bool) -> tuple[Peer, BaseException]:
    """The agent takes our prompt and never answers it; ``stream``: meanwhile it streams turn
    output naming another session.  Returns our side and what waiting for our session's first
    update (the prompt awaited) raised."""
    async with connected(timeout=0.5) as (client, agent, _):
        held = anyio.Event()

        async def prompt(req: Request) -> Any:
            chunk = {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "hi"}}
            if stream:
                await agent.notify("session/update", {"sessionId": "sess-other", "update": chunk}, validate=False)
            held.set()
            await anyio.sleep_forever()

        agent.handlers["session/prompt"] = prompt
        await client.send_request("session/prompt", {"sessionId": SID, "prompt": []}, validate=False)
        with pytest.raises(PeerTimeout) as info:
            await client.wait_for(
                lambda e: isinstance(e, Notification) and e.params.get("sessionId") == SID,
                timeout=client.timeout,
                what="the first update",
                awaiting="session/prompt",
            )
        assert held.is_set()
        return client, info.value


async def test_a_prompt_that_streams_is_not_judged_unanswered_when_its_output_names_another_session() -> None:
    client, exc = await _wait_on_a_prompt(stream=True)
    assert "still being worked on" in str(exc) and "'sess-other'" in str(exc)
    assert not [v for v in client.violations() if v.clause_id == "jsonrpc.every-request-answered"]


async def test_a_silent_prompt_past_its_deadline_is_judged_unanswered() -> None:
    client, _ = await _wait_on_a_prompt(stream=False)
    assert [v.clause_id for v in client.violations()] == ["jsonrpc.every-request-answered"]


async def _answer_awaited_from_a_prompt(streams_until_the_end: bool) -> tuple[Peer, PeerTimeout]:
    """The agent never answers our prompt; it streams one chunk at once and then either goes quiet
    or goes on streaming (a turn winding down slowly).  What waiting for the answer raised."""
    chunk = {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "working"}}
    async with connected(timeout=0.4) as (client, agent, _):

        async def prompt(req: Request) -> Any:
            while True:
                await agent.notify("session/update", {"sessionId": SID, "update": chunk}, validate=False)
                if not streams_until_the_end:
                    await anyio.sleep_forever()
                await anyio.sleep(0.05)  # the agent's pace, not a synchronisation of ours

        agent.handlers["session/prompt"] = prompt
        rid = await client.send_request("session/prompt", {"sessionId": SID, "prompt": []}, validate=False)
        with pytest.raises(PeerTimeout) as info:
            await client.wait_response(rid, method="session/prompt")
        return client, info.value


async def test_a_prompt_still_streaming_at_the_deadline_is_not_proven_unanswered() -> None:
    client, exc = await _answer_awaited_from_a_prompt(streams_until_the_end=True)
    assert exc.unproven and "kept streaming turn output" in exc.message
    assert not exc.charged and not client.violations()


async def test_a_prompt_that_streamed_only_early_and_then_fell_silent_is_judged_unanswered() -> None:
    client, exc = await _answer_awaited_from_a_prompt(streams_until_the_end=False)
    assert not exc.unproven and exc.charged == "jsonrpc.every-request-answered"
    assert [v.clause_id for v in client.violations()] == ["jsonrpc.every-request-answered"]


async def test_an_update_in_a_batch_line_is_seen_and_the_batch_flagged_once() -> None:
    """A prompt streaming in batch lines breaks the one-message-per-line clause, not the prompt's
    answer or the updates' clauses: the wait for its update finds it in the batch."""
    async with connected(timeout=0.5) as (client, agent, _):

        async def prompt(req: Request) -> Any:
            chunk = {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "hi"}}
            note = {"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": SID, "update": chunk}}
            await agent.send_raw(orjson.dumps([note]) + b"\n")
            await anyio.sleep_forever()

        agent.handlers["session/prompt"] = prompt
        await client.send_request("session/prompt", {"sessionId": SID, "prompt": []}, validate=False)
        got = await client.wait_for(
            lambda e: isinstance(e, Notification) and e.params.get("sessionId") == SID,
            timeout=5.0,
            what="the first update",
            awaiting="session/prompt",
        )
        assert isinstance(got, Notification) and got.params["update"]["content"]["text"] == "hi"
        assert [v.clause_id for v in client.violations()] == ["transport.stdio.one-message-per-line"]


# ------------------------------------------------ handler tasks and waiters (_tasks.py)
async def test_closing_cancels_a_running_handler_and_its_shielded_cleanup_still_runs() -> None:
    """A handler still running when the peer closes is cancelled as anyio would cancel it: a
    shielded section finishes, and closing returns only once the handler has ended."""
    started, cleaned = anyio.Event(), []

    async def slow(req: Request) -> Any:
        try:
            started.set()
            await anyio.sleep_forever()
        finally:
            with anyio.CancelScope(shield=True):
                await anyio.sleep(0.01)  # a cleanup that awaits (a terminal/release, say)
                cleaned.append(req.id)
        return NO_ANSWER

    with anyio.fail_after(10):
        async with connected() as (client, agent, _):
            agent.handlers["session/new"] = slow
            await client.send_request("session/new", NEW_SESSION)
            await started.wait()
        assert cleaned == [0]


async def test_an_error_escaping_a_handler_task_reaches_the_peers_owner_as_itself() -> None:
    """What a task group would do: the body is cancelled and the error is raised from the block."""

    class Boom(BaseException):
        pass

    async def broken_serve(req: Request) -> None:
        raise Boom("the serving path itself broke")

    with anyio.fail_after(10), pytest.raises(Boom):
        async with connected() as (client, agent, _):
            agent._serve = broken_serve  # type: ignore[method-assign]
            await client.send_request("session/new", NEW_SESSION)
            await anyio.sleep_forever()  # cancelled by the failing task


async def test_cancelling_one_waiter_leaves_another_waiting_for_the_same_answer() -> None:
    answer = anyio.Event()

    async def later(req: Request) -> Any:
        await answer.wait()
        return {"sessionId": SID}

    with anyio.fail_after(10):
        async with connected() as (client, agent, _):
            agent.handlers["session/new"] = later
            rid = await client.send_request("session/new", NEW_SESSION)
            got: list[Response] = []
            async with anyio.create_task_group() as tg:

                async def patient() -> None:
                    got.append(await client.wait_response(rid, method="session/new"))

                tg.start_soon(patient)
                with anyio.move_on_after(0.05):  # an impatient second waiter, cancelled
                    await client.wait_response(rid, method="session/new")
                answer.set()
            assert [r.result for r in got] == [{"sessionId": SID}]
            assert client._awaited == {}  # no waiter left behind


async def test_the_first_of_two_answers_arriving_together_is_the_answer() -> None:
    """A peer that answers one request twice (``permission-duplicate-answer``: allow, then reject):
    the first answer is the answer, even when both lines come in one read and the waiter wakes
    after both are decoded.  It used to be the second, so a mock agent took a client's duplicate
    reject for its answer whenever the two arrived together: a verdict that did not recur."""
    with anyio.fail_after(10):
        async with connected() as (client, _agent, agent_end):
            rid = await client.send_request("_x", {})
            await agent_end.send(
                b'{"jsonrpc":"2.0","id":%d,"result":{"n":1}}\n{"jsonrpc":"2.0","id":%d,"result":{"n":2}}\n' % (rid, rid)
            )
            assert (await client.wait_response(rid)).result == {"n": 1}
            await client.wait_for(lambda e: isinstance(e, Violation))
            assert [v.clause_id for v in client.violations()] == ["jsonrpc.no-duplicate-response"]


def test_a_search_s_missed_deadlines_spare_later_searches_but_stop_no_scripted_test() -> None:
    """A fuzz campaign's misses depend on its search, which differs from run to run: if they made
    scripted tests give up, a later test would be INCONCLUSIVE in one run and PASS in the next."""
    from acp_conformance.deadlines import DeadlineMemory
    from acp_conformance.errors import PeerGaveUp

    memory = DeadlineMemory(limit=2)
    memory.missed("session/prompt", "test_fuzz.py::a", search=True)
    memory.missed("session/prompt", "test_fuzz.py::b", search=True)
    assert memory.given_up("session/prompt", search=True)
    assert not memory.given_up("session/prompt")
    memory.check("session/prompt")  # a scripted test still asks
    memory.missed("session/prompt", "test_x.py::c")
    memory.missed("session/prompt", "test_x.py::d")
    with pytest.raises(PeerGaveUp, match=r"test_x\.py::c; test_x\.py::d"):
        memory.check("session/prompt")


async def test_silence_after_a_request_the_schema_rejects_is_robustness_not_every_request_answered(
    schema_validator: SchemaValidator,
) -> None:
    """A request sent broken on purpose (validate=False) is input no conforming peer sends: its
    silence is jsonrpc.survives-invalid-input's (a SHOULD).  The same silence after a valid request
    stays jsonrpc.every-request-answered's."""

    async def hold(req: Request) -> Any:
        return NO_ANSWER

    with anyio.fail_after(10):
        async with connected(schema_validator) as (client, agent, _):
            agent.handlers["session/new"] = hold
            rid = await client.send_request("session/new", {"mcpServers": []}, validate=False)  # no cwd
            with pytest.raises(PeerTimeout):
                await client.wait_response(rid, method="session/new", timeout=0.2)
            (found,) = client.violations()
            assert found.clause_id == "jsonrpc.survives-invalid-input"
            assert "sent on purpose, params the schema rejects: 'cwd' is a required property" in found.message
            rid = await client.send_request("session/new", NEW_SESSION, validate=False)  # valid, unvalidated
            with pytest.raises(PeerTimeout):
                await client.wait_response(rid, method="session/new", timeout=0.2)
            assert [v.clause_id for v in client.violations()][1:] == ["jsonrpc.every-request-answered"]


async def test_silence_after_a_request_the_peer_did_not_advertise_is_robustness() -> None:
    """session/load to an agent that did not advertise loadSession (session-setup.mdx: clients MUST
    NOT call it) is as forbidden as a malformed request: its silence is robustness.  Once the agent
    advertises it, the same silence is jsonrpc.every-request-answered's."""

    async def hold(req: Request) -> Any:
        return NO_ANSWER

    load = {"sessionId": SID, "cwd": "/tmp/project", "mcpServers": []}
    with anyio.fail_after(10):
        async with connected() as (client, agent, _):
            endpoint = ClientEndpoint(client)
            agent.handlers["session/load"] = hold
            endpoint.init_result = {"protocolVersion": 1, "agentCapabilities": {}}
            with pytest.raises(PeerTimeout):
                await client.call("session/load", load, timeout=0.2)
            (found,) = client.violations()
            assert found.clause_id == "jsonrpc.survives-invalid-input"
            assert "that calls session/load, which the agent did not advertise (loadSession)" in found.message
            endpoint.init_result = {"protocolVersion": 1, "agentCapabilities": {"loadSession": True}}
            with pytest.raises(PeerTimeout):
                await client.call("session/load", load, timeout=0.2)
            assert [v.clause_id for v in client.violations()][1:] == ["jsonrpc.every-request-answered"]


async def test_silence_after_a_frame_we_sent_on_purpose_is_robustness() -> None:
    """Once we have sent, on purpose, a frame no conforming peer sends (a second response, one to an
    id never used: ``send_raw(forbidden=...)``), what the peer leaves unanswered is robustness
    (jsonrpc.survives-invalid-input), never jsonrpc.every-request-answered: a raw frame sent
    without that mark changes nothing."""

    async def hold(req: Request) -> Any:
        return NO_ANSWER

    with anyio.fail_after(10):
        async with connected() as (client, agent, _):
            agent.handlers["session/new"] = hold
            await client.send_raw(b'{"jsonrpc":"2.0","method":"_x/valid","params":{}}\n')  # raw, not forbidden
            with pytest.raises(PeerTimeout):
                await client.call("session/new", NEW_SESSION, timeout=0.2)
            await client.send_raw(b'{"jsonrpc":"2.0","id":"never-used","result":{}}\n', forbidden="a stray response")
            with pytest.raises(PeerTimeout):
                await client.call("session/new", NEW_SESSION, timeout=0.2)
            clauses = [v.clause_id for v in client.violations()]
            assert clauses == ["jsonrpc.every-request-answered", "jsonrpc.survives-invalid-input"], clauses
            assert "after we had sent on purpose a stray response" in client.violations()[1].message
