"""Robustness: odd but legal (or merely unexpected) agent behaviour must not break the client.

After each provocation the agent asks for permission: the client must still
answer that next request, validly.  A client that crashes, hangs or stops
answering fails ``jsonrpc.every-request-answered`` (or the clause named).
"""

from __future__ import annotations

from typing import Any

import anyio
import orjson
import pytest

from acp_conformance.core.events import Response
from acp_conformance.endpoints.agent import AgentSetup
from acp_conformance.errors import PeerError
from acp_conformance.harness.client import ClientHarness
from acp_conformance.suite._support import inconclusive, unless_answered_elsewhere
from acp_conformance.suite.client._helpers import (
    advertised,
    first_turn,
    permission_baseline,
    probe_path,
    require,
    still_answers,
)

pytestmark = pytest.mark.anyio


@pytest.mark.acp_clause("jsonrpc.survives-invalid-input")
async def test_unknown_update_kinds_sessions_and_tool_calls(acp_client: ClientHarness) -> None:
    """A session/update of an unknown kind, a tool_call_update for a toolCallId never announced, and updates
    for a session that does not exist: the client ignores them and still answers the next request.  None of
    them is a frame a conforming agent sends (the schema has no such kind; updates name the session and the
    tool call they belong to), so a client that breaks on them is a robustness finding, never a MUST FAIL."""
    require(acp_client, "prompt")
    async with acp_client.connect() as conn:
        turn = await first_turn(acp_client, conn)
        baseline = await permission_baseline(turn)
        await turn.say("Before the odd updates.")
        await turn.update(
            {"sessionUpdate": "acp_conformance_future_kind", "content": {"type": "text", "text": "?"}, "level": 3},
            validate=False,
        )
        await turn.update(
            {"sessionUpdate": "tool_call_update", "toolCallId": "never-announced-42", "status": "completed"}
        )
        await turn.update(
            {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "for nobody"}},
            session_id="sess-that-does-not-exist",
        )
        await still_answers(
            acp_client,
            turn,
            "jsonrpc.survives-invalid-input",
            "unknown update kinds, tool calls and sessions",
            baseline,
        )
        await turn.end()


@pytest.mark.acp_clause("jsonrpc.every-request-answered")
async def test_update_flood(acp_client: ClientHarness) -> None:
    """2000 streamed message chunks (about 400 KiB) as fast as the wire takes them, then a permission request:
    the client keeps reading, and answers it as it answered the one before the flood."""
    require(acp_client, "prompt")
    async with acp_client.connect() as conn:
        turn = await first_turn(acp_client, conn)
        baseline = await permission_baseline(turn)
        words = "streaming " * 20
        for i in range(2000):
            await turn.say(f"{i:04d} {words}\n")
        await still_answers(acp_client, turn, "jsonrpc.every-request-answered", "a flood of 2000 updates", baseline)
        await turn.end()


@pytest.mark.acp_clause("ext.meta.everywhere", "ext.meta.no-assumptions", "cap.custom-meta")
async def test_meta_everywhere(acp_client: ClientHarness) -> None:
    """``_meta`` on the initialize result, the capabilities, the session, every update, content block and
    request, with values the client cannot know: it accepts them all and behaves as without."""
    require(acp_client, "prompt")
    async with acp_client.connect(AgentSetup(meta=True)) as conn:
        turn = await first_turn(acp_client, conn)
        conn.agent.setup.meta = False  # the baseline request carries no _meta
        baseline = await permission_baseline(turn)
        conn.agent.setup.meta = True
        await turn.say("Hello with _meta.")
        answer = await still_answers(acp_client, turn, "ext.meta.everywhere", "requests carrying _meta", baseline)
        acp_client.check(
            "cap.custom-meta",
            answer is not None,
            "unknown keys under the capabilities' _meta accepted (the session went on)",
            "the client stopped",
        )
        if advertised(conn, "fs.readTextFile"):
            probe = probe_path(conn, turn, "acp-meta-probe.txt")
            probe.write_text("meta\n", "utf-8")
            conn.agent.setup.meta = False
            plain = await turn.read_text_file(str(probe))
            conn.agent.setup.meta = True
            with_meta = await turn.read_text_file(str(probe))
            acp_client.check(
                "ext.meta.everywhere",
                with_meta.is_error == plain.is_error and with_meta.result == plain.result,
                "fs/read_text_file with _meta in its params served as without it "
                f"({'error' if plain.is_error else 'result'} {plain.error if plain.is_error else plain.result!r})",
                f"error {with_meta.error!r}" if with_meta.is_error else f"result {with_meta.result!r}",
            )
        acp_client.check(
            "ext.meta.no-assumptions",
            answer is not None and answer.kind == baseline.kind,
            f"the same answer as without _meta ({baseline.describe()}), whatever values it holds",
            answer.describe() if answer else "no answer",
        )
        await turn.end()


@pytest.mark.acp_clause("ext.notification.ignore", "jsonrpc.notification-no-response")
async def test_unknown_extension_notifications(acp_client: ClientHarness) -> None:
    """Unknown ``_`` notifications are ignored: never answered, and the session goes on."""
    require(acp_client, "prompt")
    async with acp_client.connect() as conn:
        turn = await first_turn(acp_client, conn)
        baseline = await permission_baseline(turn)
        start = len(conn.peer.events)
        for i in range(3):
            await conn.peer.notify("_acp_conformance/unknown_notification", {"n": i, "_meta": {"x": [1, 2]}})
        await still_answers(acp_client, turn, "ext.notification.ignore", "unknown extension notifications", baseline)
        stray = [e for e in conn.peer.events[start:] if isinstance(e, Response) and e.method is None]
        acp_client.check(
            "jsonrpc.notification-no-response",
            not stray,
            "no response to the notifications",
            f"{len(stray)} response(s) with no matching request, e.g. {stray[0].raw[:120]!r}" if stray else "",
        )
        await turn.end()


@pytest.mark.acp_clause("jsonrpc.id-spaces-independent", "jsonrpc.survives-invalid-input")
async def test_stray_responses_and_shared_ids(acp_client: ClientHarness) -> None:
    """A request whose id equals the client's pending session/prompt id: answered as any other, the
    client's own request still pending (``jsonrpc.id-spaces-independent``).  Then responses it never
    asked for (to an id it never used, a second one to its initialize), which no conforming agent
    sends: a client that stops answering after them misses a robustness SHOULD
    (``jsonrpc.survives-invalid-input``), never the MUST of the legal request before them."""
    require(acp_client, "prompt")
    async with acp_client.connect() as conn:
        turn = await first_turn(acp_client, conn)
        baseline = await permission_baseline(turn)
        # Our request id = the client's own pending session/prompt id (same value and type).
        await turn.tool_call("Shared id")
        try:
            params = {
                "sessionId": turn.session_id,
                "toolCall": {"toolCallId": "shared-id", "title": "Shared id", "status": "pending"},
                "options": [
                    {"optionId": "ok-1", "name": "OK", "kind": "allow_once"},
                    {"optionId": "no-1", "name": "No", "kind": "reject_once"},
                ],
            }
            resp = await conn.peer.call("session/request_permission", params, id=turn.request.id)
        except PeerError as exc:
            unless_answered_elsewhere(exc)
            acp_client.check(
                "jsonrpc.id-spaces-independent",
                False,
                "an answer to our request that reuses the id of the client's own pending request",
                exc.message,
            )
            return
        acp_client.check(
            "jsonrpc.id-spaces-independent",
            resp.is_error == (baseline.kind == "error") and not turn.answered,
            "an answer (as to any permission request: " + baseline.describe() + ") to our request carrying the "
            "id of the client's own pending session/prompt",
            f"error {resp.error!r}" if resp.is_error else f"result {resp.result!r}",
        )
        init = conn.agent.init_request
        stray = b'{"jsonrpc":"2.0","id":"never-sent-by-the-client-9","result":{}}\n'
        await conn.peer.send_raw(stray, forbidden="a response to an id the client never used")
        if init is not None:
            again: dict[str, Any] = {"jsonrpc": "2.0", "id": init.id, "result": AgentSetup().initialize_result()}
            await conn.peer.send_raw(orjson.dumps(again) + b"\n", forbidden="a second response to initialize")
        await still_answers(
            acp_client, turn, "jsonrpc.survives-invalid-input", "responses it never asked for", baseline
        )
        await turn.end()


@pytest.mark.acp_clause("transport.stdio.stderr-logs")
async def test_stderr_flood(acp_client: ClientHarness) -> None:
    """The agent writes 2 MiB to stderr, protocol-looking lines included: the client keeps draining it,
    never parses it, and answers the next request."""
    require(acp_client, "prompt")
    async with acp_client.connect() as conn:
        turn = await first_turn(acp_client, conn)
        baseline = await permission_baseline(turn)
        line = b'{"jsonrpc":"2.0","id":0,"result":{"outcome":{"outcome":"cancelled"}}} log line ' + b"x" * 100 + b"\n"
        chunk = line * (64 * 1024 // len(line) + 1)
        written = 0
        done = anyio.Event()

        async def flood() -> None:
            nonlocal written
            try:
                for _ in range(32):
                    await conn.relay.write_stderr(chunk)  # blocks, like a real agent, while nobody reads
                    written += len(chunk)
            except PeerError:
                return  # the relay went away (teardown of a client that never drained): judged below
            done.set()

        # In a task: a send cancelled half-way would cut a control frame.
        conn.peer.start_soon(flood)
        with anyio.move_on_after(acp_client.config.timeout):
            await done.wait()
        if not done.is_set():
            acp_client.check(
                "transport.stdio.stderr-logs",
                False,
                "the client to keep draining the agent's stderr",
                f"the agent blocked writing stderr: {written} of {32 * len(chunk)} bytes taken after "
                f"{acp_client.config.timeout:g} s",
            )
            return
        await still_answers(acp_client, turn, "transport.stdio.stderr-logs", "a 2 MiB stderr flood", baseline)
        await turn.end()


@pytest.mark.acp_clause("cancelreq.must-answer")
async def test_a_cancelled_request_still_gets_an_answer(acp_client: ClientHarness) -> None:
    """We send an extension request and, at once, ``$/cancel_request`` naming it: acting on the
    notification is optional (a MAY), but the request is still owed its one response, a result or
    an error (-32800 when the cancellation aborted it).  A second response is
    jsonrpc.no-duplicate-response's, judged on the transcript."""
    require(acp_client, "prompt")
    async with acp_client.connect() as conn:
        turn = await first_turn(acp_client, conn)
        # The same request, not cancelled: a client that answers no extension request at all (the
        # finding of ext.request.respond) tells us nothing about cancelled ones.
        try:
            # Not flagged, nor counted against the method's deadline: the tests of ext.request.respond
            # judge that silence (and would give up on a method that already missed twice).
            first = await conn.peer.send_request("_acp_conformance/unknown_request", {"probe": "baseline"})
            await conn.peer.wait_response(first, method="_acp_conformance/unknown_request", flag=False)
        except PeerError as exc:
            inconclusive(f"the client did not answer our extension request even without a cancel: {exc.message}")
        rid = await conn.peer.send_request("_acp_conformance/unknown_request", {"probe": "cancelled"})
        await conn.peer.notify("$/cancel_request", {"requestId": rid})
        try:
            # The silence, if any, is this clause's (the one naming it), not flagged twice.
            resp = await conn.peer.wait_response(rid, method="_acp_conformance/unknown_request", flag=False)
            got = f"error {resp.error!r}" if resp.is_error else f"result {resp.result!r}"
        except PeerError as exc:
            # Whether it ever read the request, or answered it under another id, is what this
            # silence may leave unknown (Peer.why_unproven).
            unless_answered_elsewhere(exc, own_answer=True)
            resp, got = None, exc.message
        acp_client.check(
            "cancelreq.must-answer",
            resp is not None,
            "a response to our request after $/cancel_request named it (a result, or an error such as -32800)",
            got,
        )
        await turn.end()
