"""Extensibility and errors: _meta everywhere, method names, invalid params, unknown sessions.

Unknown ``_``-prefixed requests and notifications are judged in
test_jsonrpc.py (ext.request.unknown, ext.notification.ignore).
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from acp_conformance.checks.fields import judge_fields, typed_payloads
from acp_conformance.checks.sessions import session_updates, trace_key_problems, update_kind
from acp_conformance.core.events import Notification, Request, Response
from acp_conformance.core.jsonrpc import ErrorCode
from acp_conformance.errors import PeerTimeout
from acp_conformance.harness import AgentHarness, Connection
from acp_conformance.results import Status
from acp_conformance.suite._support import check_or_stop, draft_defs, silence_judged_once
from acp_conformance.suite.agent._helpers import (
    authenticate_if_configured,
    check_auth,
    describe,
    open_session,
    plain_prompt_elsewhere,
    prompt_turn,
)

pytestmark = pytest.mark.anyio

Json = dict[str, Any]

#: Ordinary extension data, string-valued.
META: Json = {"acp-conformance.dev/probe": "meta"}
#: Extension data whose values no receiver can have expected.
ODD_META: Json = {
    "acp-conformance.dev/null": None,
    "acp-conformance.dev/list": [1, "two", {"three": [None, True]}],
    "acp-conformance.dev/number": -1.5,
    "acp-conformance.dev/flag": False,
    "acp-conformance.dev/object": {"_meta": {"deeper": {}}},
    "acp-conformance.dev/long": "x" * 4096,
}


async def _prompt_with_meta(acp: AgentHarness, conn: Connection, sid: str, meta: Json) -> Response:
    """session/prompt with ``meta`` in its params and in its text block."""
    block = {"type": "text", "text": acp.config.prompt, "_meta": meta}
    resp = await conn.peer.call("session/prompt", {"sessionId": sid, "prompt": [block], "_meta": meta})
    check_auth(acp, conn, resp)
    return resp


def _stopped(resp: Response) -> bool:
    return not resp.is_error and isinstance(resp.result, dict) and "stopReason" in resp.result


async def _judge_meta_prompt(acp: AgentHarness, conn: Connection, clause: str, resp: Response, expected: str) -> None:
    """Judge ``clause`` on a prompt that carried ``_meta``.  A failed one is the ``_meta``'s doing
    only if the same prompt without it succeeds (in a fresh session): an agent failing every
    prompt is content.text.baseline's and prompt.response.stop-reason's, not this clause's."""
    if not _stopped(resp):
        plain = await plain_prompt_elsewhere(acp, conn)
        if plain is None or not _stopped(plain):
            acp.record(
                clause,
                Status.INCONCLUSIVE,
                f"the prompt with _meta failed ({describe(resp)}), but so does the same prompt without it "
                f"({describe(plain)}): nothing shows the _meta was the cause",
            )
            return
    acp.check(clause, _stopped(resp), expected, describe(resp))


@pytest.mark.acp_clause("ext.meta.everywhere", "cap.custom-meta", "ext.method.underscore")
async def test_meta_is_accepted_everywhere(acp_agent: AgentHarness) -> None:
    """_meta in initialize (params, clientInfo, capability objects), session/new and session/prompt (and its block)."""
    async with acp_agent.connect(initialize=False) as conn:
        caps = conn.client.capabilities.to_wire()
        caps["fs"] = {**caps["fs"], "_meta": META}
        caps["_meta"] = {"acp-conformance.dev": {"probe": True}}
        params = {
            "protocolVersion": 1,
            "clientCapabilities": caps,
            "clientInfo": {**conn.client.client_info, "_meta": META},
            "_meta": META,
        }
        resp = await conn.peer.call("initialize", params, timeout=acp_agent.config.startup_timeout)
        # Answered, not refused: what the answer holds (a protocolVersion...) is judged by the clauses of
        # the initialize response on every connection, with or without _meta.
        ok = not resp.is_error and isinstance(resp.result, dict)
        acp_agent.check(
            "cap.custom-meta",
            ok,
            "initialize with _meta in clientCapabilities and in its fs object answered normally",
            describe(resp),
        )
        check_or_stop(
            acp_agent,
            "ext.meta.everywhere",
            ok,
            "initialize with _meta in params, clientInfo and the capability objects answered normally",
            describe(resp),
        )
        assert isinstance(resp.result, dict)
        conn.client.init_result = resp.result
        await authenticate_if_configured(acp_agent, conn)
        sid = await open_session(
            acp_agent,
            conn,
            extra={"_meta": META},
            clause="ext.meta.everywhere",
            expected="session/new with _meta in its params answered with a sessionId",
        )
        resp = await _prompt_with_meta(acp_agent, conn, sid, META)
        await _judge_meta_prompt(
            acp_agent,
            conn,
            "ext.meta.everywhere",
            resp,
            "session/prompt with _meta in its params and in its text block to end with a stopReason",
        )
        validator = acp_agent.validator
        odd = sorted(
            {
                e.method
                for e in conn.peer.events
                if isinstance(e, (Request, Notification))
                and validator.spec(e.method) is None
                and not e.method.startswith("_")
            }
        )
        acp_agent.check(
            "ext.method.underscore",
            not odd,
            "every method the agent sent to be an ACP method or start with '_'",
            f"custom methods without '_': {odd}",
        )


@pytest.mark.acp_clause("ext.meta.no-assumptions")
async def test_meta_values_are_not_interpreted(acp_agent: AgentHarness) -> None:
    """_meta values of every JSON type (null, arrays, numbers, nested _meta, a long string) change nothing."""
    async with acp_agent.connect() as conn:
        sid = await open_session(acp_agent, conn)
        resp = await _prompt_with_meta(acp_agent, conn, sid, ODD_META)
        await _judge_meta_prompt(
            acp_agent,
            conn,
            "ext.meta.no-assumptions",
            resp,
            "session/prompt with unusual _meta values (params and block) to end with a stopReason",
        )


@pytest.mark.acp_clause("jsonrpc.invalid-params")
async def test_missing_required_params_get_invalid_params(acp_agent: AgentHarness) -> None:
    """Only required fields and top-level types are broken: SDKs may default bad optional fields."""
    async with acp_agent.connect() as conn:
        sid = await open_session(acp_agent, conn)
        broken: list[tuple[str, dict[str, Any], str]] = [
            ("session/new", {"mcpServers": []}, "session/new without its required cwd"),
            (
                "session/prompt",
                {"sessionId": sid, "prompt": acp_agent.config.prompt},
                "session/prompt whose prompt is a string, not an array of content blocks",
            ),
        ]
        for method, params, what in broken:
            expected = f"error -32602 for {what}"
            try:
                resp = await conn.peer.call(method, params, validate=False)
            except PeerTimeout as exc:
                silence_judged_once(acp_agent, "jsonrpc.invalid-params", expected, exc)
                continue
            acp_agent.check("jsonrpc.invalid-params", resp.code == ErrorCode.INVALID_PARAMS, expected, describe(resp))


@pytest.mark.acp_clause("prompt.unknown-session", "error.resource-not-found")
async def test_prompt_for_an_unknown_session(acp_agent: AgentHarness) -> None:
    async with acp_agent.connect() as conn:
        await open_session(acp_agent, conn)  # an auth-gated agent is reported as blocked
        bogus = f"acp-conformance-unknown-{uuid.uuid4().hex}"
        any_error = f"an error for session/prompt to the unknown session {bogus!r}"
        not_found = f"error -32002 (resource not found) for session/prompt to the unknown session {bogus!r}"
        try:
            resp = await conn.peer.call(
                "session/prompt", {"sessionId": bogus, "prompt": [{"type": "text", "text": acp_agent.config.prompt}]}
            )
        except PeerTimeout as exc:
            silence_judged_once(acp_agent, "prompt.unknown-session", any_error, exc)
            silence_judged_once(acp_agent, "error.resource-not-found", not_found, exc)
            return
        acp_agent.check("prompt.unknown-session", resp.is_error, any_error, describe(resp))
        acp_agent.check(
            "error.resource-not-found", resp.code == ErrorCode.RESOURCE_NOT_FOUND, not_found, describe(resp)
        )


@pytest.mark.acp_clause(
    "ext.meta.trace-keys", "session.info-update.fields", "ext.no-root-fields", "ext.withdrawn-draft-field"
)
async def test_custom_data_only_under_meta(acp_agent: AgentHarness, request: pytest.FixtureRequest) -> None:
    """A session, a plain and a tool turn: every object the agent sends declares only spec fields
    (custom data goes under _meta), and the W3C trace keys in _meta carry only trace context."""
    async with acp_agent.connect() as conn:
        sid = await open_session(acp_agent, conn)
        await prompt_turn(acp_agent, conn, sid, acp_agent.config.prompt)
        await prompt_turn(acp_agent, conn, sid, acp_agent.config.tool_prompt)
        payloads = typed_payloads(acp_agent.validator, conn.peer.events)
        seen, bad_trace = 0, []
        for where, _, obj in payloads:
            n, problems = trace_key_problems(obj)
            seen += n
            bad_trace += [f"{where}: {p}" for p in problems]
        if seen:
            acp_agent.check(
                "ext.meta.trace-keys",
                not bad_trace,
                "traceparent / tracestate / baggage at the root of _meta to hold W3C trace context only",
                "; ".join(bad_trace[:5]),
            )
        else:
            acp_agent.record("ext.meta.trace-keys", Status.NOT_APPLICABLE, "the agent sent no trace-context keys")
        infos = [u for u in session_updates(conn.peer.events) if update_kind(u) == "session_info_update"]
        if infos:
            bad = [
                f"{sorted(k for k in ('sessionId', 'cwd', 'additionalDirectories') if k in u['update'])}"
                for u in infos
                if any(k in u["update"] for k in ("sessionId", "cwd", "additionalDirectories"))
            ]
            acp_agent.check(
                "session.info-update.fields",
                not bad,
                "session_info_update objects without sessionId, cwd or additionalDirectories",
                f"{len(bad)} of {len(infos)} carry {bad[:3]}",
            )
        else:
            acp_agent.record(
                "session.info-update.fields", Status.NOT_APPLICABLE, "the agent sent no session_info_update"
            )
        # The whole $defs: undeclared_fields follows $ref.
        found = judge_fields(acp_agent.validator._defs, draft_defs(request), payloads)
        extra, withdrawn, note = found.extra, found.withdrawn, found.note()
        acp_agent.check(
            "ext.withdrawn-draft-field",
            not withdrawn,
            "no withdrawn draft name of the protocol in the agent's messages",
            "; ".join(withdrawn[:4]),
        )
        acp_agent.check(
            "ext.no-root-fields",
            not extra,
            f"no field the schema does not define in the {len(payloads)} typed message(s) from the agent "
            f"(custom data belongs under _meta){note}",
            "; ".join(extra[:8]),
        )
