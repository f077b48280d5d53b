"""What the client writes on the agent's stdin, and answering every agent request exactly once."""

from __future__ import annotations

import pytest

from acp_conformance.checks.fields import judge_fields, typed_payloads
from acp_conformance.checks.shapes import unknown_method_answer
from acp_conformance.errors import PeerTimeout
from acp_conformance.harness.client import ClientHarness
from acp_conformance.results import Status
from acp_conformance.suite._support import draft_defs, inconclusive, unless_answered_elsewhere
from acp_conformance.suite.client._helpers import first_turn, require

pytestmark = pytest.mark.anyio


@pytest.mark.acp_clause(
    "transport.utf8",
    "transport.stdio.newline-delimited",
    "transport.stdio.one-message-per-line",
    "transport.stdio.stdin-clean",
    "jsonrpc.version-field",
    "schema.valid",
    # Judged on every frame the client sends (checks.passive); bound here, the smallest test
    # whose traffic holds requests and a prompt's content blocks.
    "jsonrpc.request-shape",
    "content.block.shapes",
    "cancelreq.shape",
    "ext.no-root-fields",
)
async def test_stdin_carries_only_protocol(acp_client: ClientHarness, request: pytest.FixtureRequest) -> None:
    """A whole turn with non-ASCII text and a permission round trip: every line the client writes on the
    agent's stdin is one UTF-8 JSON-RPC 2.0 message that validates against the schema, and declares
    only the schema's fields (custom data goes under _meta)."""
    require(acp_client, "prompt")
    async with acp_client.connect() as conn:
        turn = await first_turn(acp_client, conn)
        await turn.say("héllo ✓ 日本 — multi\nline")
        tcid = await turn.tool_call("Touch ünïcødé.txt")
        await turn.request_permission(tcid)
        await turn.tool_update(tcid, "completed")
        await conn.agent.barrier()
        await turn.end()
        # Whatever the client writes after the turn (until it exits or stops) is on the record too.
        await conn.peer.quiet_for(0.3, lambda e: False)
        payloads = typed_payloads(acp_client.validator, conn.peer.events)
        found = judge_fields(acp_client.validator._defs, draft_defs(request), payloads)
        acp_client.check(
            "ext.no-root-fields",
            not found.extra,
            f"no field the schema does not define in the {len(payloads)} typed message(s) from the client "
            f"(custom data belongs under _meta){found.note()}",
            "; ".join(found.extra[:8]),
        )


@pytest.mark.acp_clause(
    "jsonrpc.every-request-answered",
    "jsonrpc.response-id-echo",
    "jsonrpc.result-xor-error",
    "jsonrpc.error-object",
    "error.codes",
    "jsonrpc.unknown-method",
    "jsonrpc.id-types",
    "ext.request.respond",
    "ext.request.unknown",
)
async def test_every_agent_request_is_answered_once(acp_client: ClientHarness) -> None:
    """Unknown extension requests with integer ids (ours, a large one), a string id and a negative
    integer id get exactly one answer each: -32601."""
    require(acp_client, "prompt")
    async with acp_client.connect() as conn:
        turn = await first_turn(acp_client, conn)
        answered: dict[str, bool] = {}
        unread: dict[str, str] = {}  # an odd id's request unanswered: what came instead
        plain_kinds: list[str] = []  # the requests under our own kind of id (a non-negative integer)
        method, params = "_acp_conformance/unknown_request", {"probe": True}
        for rid in (None, "acp-string-id-1", 424242, -424242):
            plain = rid is None or (isinstance(rid, int) and rid >= 0)
            kind = "string" if isinstance(rid, str) else "integer" if plain else "negative integer"
            kind = f"{kind} id {rid if rid is not None else '(ours)'}"
            if plain:
                plain_kinds.append(kind)
                try:
                    sent = await conn.peer.send_request(method, params, id=rid)
                    resp = await conn.peer.wait_response(sent, method=method)
                except PeerTimeout as exc:
                    unless_answered_elsewhere(exc)
                    answered[kind] = False
                    continue
            else:
                # The odd ids' silence, or an error without any id, is judged below, once, as
                # jsonrpc.id-types's (the plain ids' by the connection, as ext.request.respond's).
                odd = await conn.peer.answer_under_id(method, params, rid)
                if odd.unproven:
                    inconclusive(f"no answer under the {kind}, but not proven unanswered: {odd.unproven}")
                if odd.response is None:
                    answered[kind] = False
                    unread[kind] = f"{odd.unread}, {odd.raw}" if odd.unread else odd.silence
                    continue
                resp = odd.response
            answered[kind] = True
            got = f"error {resp.error!r}" if resp.is_error else f"result {resp.result!r}"
            verdict = unknown_method_answer(resp.is_error, resp.error)
            if verdict is None:
                why = (
                    f"the client answered our made-up extension request with a {got}: it handles the name (a "
                    "catch-all handler), so that it does not recognise it is not shown"
                )
                acp_client.record("jsonrpc.unknown-method", Status.NOT_APPLICABLE, why)
                acp_client.record("ext.request.unknown", Status.NOT_APPLICABLE, why)
            else:
                acp_client.check(
                    "ext.request.unknown", verdict, "error -32601 for an unrecognised extension request", got
                )
                acp_client.check(
                    "jsonrpc.unknown-method",
                    verdict,
                    "error -32601 (method not found) for a method the client does not implement",
                    got,
                )
        missing = [k for k, ok in answered.items() if not ok]
        if not any(answered.values()):
            acp_client.record("jsonrpc.id-types", Status.INCONCLUSIVE, "no extension request was answered at all")
        else:
            acp_client.check(
                "jsonrpc.id-types",
                not missing,
                "requests with string, positive and negative integer ids answered alike",
                f"answered: {[k for k, ok in answered.items() if ok]}; never answered: "
                + "; ".join(f"{k} ({unread[k]})" if k in unread else k for k in missing),
            )
        # A plain id's silence is charged by the connection, to ext.request.respond (Peer._unanswered);
        # an odd id's above, to jsonrpc.id-types: one defect, one clause.
        if all(answered[kind] for kind in plain_kinds):
            acp_client.record(
                "ext.request.respond", Status.PASS, f"a response with the request's id under each of: {plain_kinds}"
            )
        # A second answer to any of them would show up by now (judged: jsonrpc.no-duplicate-response).
        await conn.agent.barrier()
        await turn.end()
