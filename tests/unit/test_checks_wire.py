"""checks.wire: the clause checks judged on every inbound frame, on hand-built transcripts; and
their constants, re-derived from the pinned schema files."""

from __future__ import annotations

from typing import Any

import pytest

from acp_conformance.checks import passive_results, wire
from acp_conformance.results import Status
from acp_conformance.schema import locate_schema
from acp_conformance.transcript import Entry, Transcript

SID = "sess-1"


def entry(direction: str, message: dict[str, Any]) -> Entry:
    return Entry(0.0, direction, b"", message)  # type: ignore[arg-type]


def update(update_kind: str, **fields: Any) -> Entry:
    params = {"sessionId": SID, "update": {"sessionUpdate": update_kind, **fields}}
    return entry("in", {"jsonrpc": "2.0", "method": "session/update", "params": params})


def init(session_caps: dict[str, Any] | None = None) -> Entry:
    caps: dict[str, Any] = {"fs": {"readTextFile": True}}
    if session_caps is not None:
        caps["session"] = session_caps
    params = {"protocolVersion": 1, "clientCapabilities": caps}
    return entry("out", {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": params})


def judge(check: wire.WireCheck, inbound: list[Entry], outbound: list[Entry] | None = None) -> tuple[bool, list[str]]:
    seen, findings = check(wire.Frames(inbound, outbound if outbound is not None else [init()]))
    return seen, [f.message for f in findings]


# ------------------------------------------------------------------ constants
def _defs(unstable: bool = False) -> dict[str, Any]:
    try:
        source = locate_schema(unstable=unstable)
    except Exception as exc:  # the schema comes with ./run setup (npm ci)
        pytest.skip(f"no schema: {exc}")
    defs: dict[str, Any] = source.data["$defs"]
    return defs


def _consts(variants: list[dict[str, Any]], key: str | None = None) -> set[str]:
    out = set()
    for v in variants:
        prop = v.get("properties", {}).get(key, {}) if key else v
        if "const" in prop:
            out.add(prop["const"])
    return out


def test_constants_match_the_pinned_schema() -> None:
    stable, unstable = _defs(), _defs(unstable=True)
    assert _consts(stable["ToolKind"]["oneOf"]) == wire.TOOL_KINDS
    assert _consts(stable["ToolCallStatus"]["oneOf"]) == wire.TOOL_CALL_STATUSES
    updates = _consts(stable["SessionUpdate"]["oneOf"], "sessionUpdate")
    assert _consts(unstable["SessionUpdate"]["oneOf"], "sessionUpdate") - updates == wire.UNSTABLE_ONLY_UPDATES
    assert _consts(stable["ContentBlock"]["oneOf"], "type") == set(wire.CONTENT_BLOCK_FIELDS)
    assert _consts(stable["ToolCallContent"]["oneOf"], "type") == set(wire.TOOL_CONTENT_FIELDS)
    for kind, fields in wire.TOOL_CONTENT_FIELDS.items():
        ref = {"content": "Content", "diff": "Diff", "terminal": "Terminal"}[kind]
        assert set(fields) <= set(stable[ref]["required"])
    assert set(wire.GATED_UPDATES) <= set(stable["ClientSessionCapabilities"]["properties"])


# --------------------------------------------------------------------- checks
def test_base64() -> None:
    assert wire.is_base64("aGVsbG8=") and wire.is_base64("aGVsbG8") and wire.is_base64("")
    assert not wire.is_base64("<svg/>") and not wire.is_base64("aGVsb") and not wire.is_base64("aGVs bG8=")
    img = {"type": "image", "mimeType": "image/png"}
    seen, problems = judge(wire.check_base64, [update("agent_message_chunk", content={**img, "data": "aGk="})])
    assert seen and not problems
    bad = update("agent_message_chunk", content={"type": "resource", "resource": {"uri": "f:/x", "blob": "%%"}})
    assert judge(wire.check_base64, [bad])[1] == ["agent_message_chunk: resource blob '%%' is not base64"]
    assert judge(wire.check_base64, [update("agent_message_chunk", content={"type": "text", "text": "x"})]) == (
        False,
        [],
    )


def test_content_blocks() -> None:
    good = [
        {"type": "text", "text": "x"},
        {"type": "resource_link", "uri": "file:///a", "name": "a"},
        {"type": "resource", "resource": {"uri": "file:///a", "text": "t"}},
    ]
    assert judge(wire.check_content_blocks, [update("agent_message_chunk", content=b) for b in good]) == (True, [])
    bad = update("agent_thought_chunk", content={"type": "image", "mimeType": "image/png"})
    assert judge(wire.check_content_blocks, [bad])[1] == [
        "agent_thought_chunk: content block (image) lacks the string field(s) data"
    ]
    nested = update("tool_call", toolCallId="t", content=[{"type": "content", "content": {"type": "txt"}}])
    assert "has type 'txt'" in judge(wire.check_content_blocks, [nested])[1][0]


def test_tool_kinds_statuses_and_content() -> None:
    ok = update("tool_call", toolCallId="t", kind="switch_mode", status="pending", content=[])
    assert judge(wire.check_tool_kinds, [ok]) == (True, [])
    assert judge(wire.check_tool_kinds, [update("tool_call_update", toolCallId="t", kind=None)]) == (True, [])
    assert judge(wire.check_tool_kinds, [update("tool_call", toolCallId="t", kind="write")])[1]
    assert judge(wire.check_tool_statuses, [update("tool_call_update", toolCallId="t", status="done")])[1]
    permission = entry(
        "in",
        {
            "jsonrpc": "2.0",
            "id": 5,
            "method": "session/request_permission",
            "params": {"sessionId": SID, "toolCall": {"toolCallId": "t", "status": "running"}, "options": []},
        },
    )
    assert "permission request" in judge(wire.check_tool_statuses, [permission])[1][0]
    items = [
        {"type": "content", "content": {"type": "text", "text": "x"}},
        {"type": "diff", "path": "/a", "newText": "n", "oldText": None},
        {"type": "terminal", "terminalId": "term-1"},
    ]
    assert judge(wire.check_tool_content, [update("tool_call_update", toolCallId="t", content=items)]) == (True, [])
    bare = update("tool_call_update", toolCallId="t", content=[{"type": "text", "text": "x"}])
    assert "bare 'text' ContentBlock" in judge(wire.check_tool_content, [bare])[1][0]
    assert (
        "lacks the string field(s) newText"
        in judge(
            wire.check_tool_content, [update("tool_call", toolCallId="t", content=[{"type": "diff", "path": "/a"}])]
        )[1][0]
    )


def test_unstable_variants_and_gating() -> None:
    assert judge(wire.check_no_unstable_updates, [update("plan", entries=[])]) == (True, [])
    assert judge(wire.check_no_unstable_updates, [update("plan_removed")])[1]
    notice = update("notice", severity="info", title="t")
    gated = wire.WIRE_CHECKS["update.notice.gated"]
    assert judge(gated, [notice])[1], "ungated notice"
    assert judge(gated, [notice], [init({"notices": {}})]) == (False, [])
    assert judge(gated, [notice], [init({"notices": None})])[1], "null advertises nothing"
    assert judge(gated, [notice], []) == (False, []), "no initialize of ours: nothing to judge by"
    compaction = wire.WIRE_CHECKS["update.compaction.gated"]
    assert judge(compaction, [update("compaction_summary_chunk", compactionId="c")])[1]
    assert judge(compaction, [notice]) == (True, [])


def test_config_options() -> None:
    select = {
        "id": "model",
        "name": "Model",
        "type": "select",
        "currentValue": "fast",
        "options": [{"group": "g", "name": "G", "options": [{"value": "fast", "name": "Fast"}]}],
    }
    boolean = {"id": "web", "name": "Web", "type": "boolean", "currentValue": False}
    request = entry("out", {"jsonrpc": "2.0", "id": 3, "method": "session/new", "params": {}})
    result = entry("in", {"jsonrpc": "2.0", "id": 3, "result": {"sessionId": SID, "configOptions": [select, boolean]}})
    assert judge(wire.check_config_options, [result], [request]) == (True, [])
    broken = update("config_option_update", configOptions=[{**boolean, "currentValue": "on"}])
    assert "not a boolean" in judge(wire.check_config_options, [broken])[1][0]
    stray = entry("in", {"jsonrpc": "2.0", "id": 4, "result": {"configOptions": "x"}})
    assert judge(wire.check_config_options, [stray], [request]) == (False, []), "an answer to no request of ours"


def test_cancel_request_target() -> None:
    theirs = entry("in", {"jsonrpc": "2.0", "id": 7, "method": "session/request_permission", "params": {}})
    cancel = entry("in", {"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": 7}})
    assert judge(wire.check_cancel_request_target, [theirs, cancel]) == (True, [])
    ours = entry("out", {"jsonrpc": "2.0", "id": 9, "method": "session/prompt", "params": {}})
    mirrored = entry("in", {"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": 9}})
    assert judge(wire.check_cancel_request_target, [theirs, mirrored], [ours])[1] == [
        "$/cancel_request names requestId 9, our session/prompt request"
    ]
    assert judge(wire.check_cancel_request_target, [cancel, theirs])[1], "before the request it names"


def test_passive_results_report_wire_findings_by_clause() -> None:
    t = Transcript()
    t.add("out", b"{}", init().message)
    chunk = {"sessionUpdate": "agent_message_chunk", "content": {"type": "image", "mimeType": "i", "data": "!"}}
    for _ in range(30):
        t.add(
            "in", b"{}", {"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": SID, "update": chunk}}
        )
    results = passive_results(t, "agent")
    base64 = [r for r in results if r.clause == "content.base64"]
    assert [r.status for r in base64] == [Status.WARN], "one result for 30 identical findings (a SHOULD)"
    statuses = {r.clause: r.status for r in results if r.clause in wire.WIRE_CHECKS}
    assert statuses["content.block.shapes"] is Status.PASS
    assert statuses["update.notice.gated"] is Status.PASS
    assert "tool.kind.enum" not in statuses, "no tool call: not exercised, no PASS"
    assert not [r for r in passive_results(t, "client") if r.clause in wire.WIRE_CHECKS]


def test_client_role_judges_the_clients_own_frames() -> None:
    """The client table: a prompt's content blocks and a client's $/cancel_request, judged on what
    the client sent; the agent-only checks (updates, tool calls) never judge a client."""
    good = [{"type": "text", "text": "hi"}, {"type": "resource_link", "uri": "file:///a", "name": "a"}]
    prompt = entry("in", {"jsonrpc": "2.0", "id": 3, "method": "session/prompt", "params": {"prompt": good}})
    assert judge(wire.check_prompt_blocks, [prompt]) == (True, [])
    bad = entry(
        "in",
        {"jsonrpc": "2.0", "id": 4, "method": "session/prompt", "params": {"prompt": [{"type": "resource_link"}]}},
    )
    assert judge(wire.check_prompt_blocks, [bad])[1] == [
        "session/prompt prompt[0]: content block (resource_link) lacks the string field(s) uri, name"
    ]
    assert judge(wire.check_prompt_blocks, [update("agent_message_chunk", content={"type": "txt"})]) == (False, [])
    assert set(wire.wire_checks("client")) == {"content.block.shapes", "content.base64", "cancelreq.shape"}
    image = {"type": "image", "mimeType": "image/png", "data": "data:image/png;base64,iVBORw0KGgo="}  # a data URL
    attached = entry("in", {"jsonrpc": "2.0", "id": 5, "method": "session/prompt", "params": {"prompt": [image]}})
    assert judge(wire.check_prompt_base64, [attached])[1] == [
        "session/prompt prompt[0]: image data 'data:image/png;base64,iVBORw0KGgo=' is not base64"
    ]
    image["data"] = "iVBORw0KGgo="
    assert judge(wire.check_prompt_base64, [attached]) == (True, [])
    assert wire.wire_checks("agent") is wire.WIRE_CHECKS

    t = Transcript()
    t.add("in", b"{}", bad.message)
    t.add("in", b"{}", {"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": "never"}})
    statuses = {r.clause: r.status for r in passive_results(t, "client")}
    assert statuses["content.block.shapes"] is Status.FAIL
    assert statuses["cancelreq.shape"] is Status.WARN  # a SHOULD: no keyword on "the sender's own request"
    assert "tool.kind.enum" not in statuses and "update.no-unstable-variants" not in statuses


def _elicit(props: dict[str, Any], mode: str = "form") -> Entry:
    requested = {"type": "object", "properties": props}
    params = {"sessionId": SID, "mode": mode, "message": "m", "requestedSchema": requested}
    return entry("in", {"jsonrpc": "2.0", "id": 8, "method": "elicitation/create", "params": params})


def test_form_secrets() -> None:
    """A free-text field labelled as a credential the docs list fails; choices, other labels and URL
    mode do not (the profile data the docs allow: name, email, username)."""
    ok = _elicit(
        {
            "greeting": {"type": "string", "enum": ["hello"]},
            "email": {"type": "string", "title": "Email address"},
            "username": {"type": "string"},
            "reset": {"type": "boolean", "title": "Reset my password?"},
            "manager": {"type": "string", "title": "Password manager", "enum": ["a", "b"]},
        }
    )
    assert judge(wire.check_form_secrets, [ok]) == (True, [])
    assert judge(wire.check_form_secrets, [_elicit({"x": {"type": "string"}}, mode="url")]) == (False, [])
    for props in (
        {"api_key": {"type": "string"}},
        {"k": {"type": "string", "title": "Your API key"}},
        {"p": {"type": "string", "description": "The account password"}},
        {"t": {"type": "string", "title": "Refresh token"}},
        {"c": {"type": "string", "title": "Card number"}},
    ):
        findings = judge(wire.check_form_secrets, [_elicit(props)])[1]
        assert len(findings) == 1 and "asks for a secret" in findings[0], props


def test_form_content_follows_the_requested_schema() -> None:
    from acp_conformance.endpoints.client import form_content

    requested = {
        "type": "object",
        "properties": {
            "a": {"type": "string", "default": "d"},
            "b": {"type": "string", "enum": ["x", "y"]},
            "c": {"type": "integer"},
            "d": {"type": "_custom"},
            "e": {"type": "string", "oneOf": [{"const": "one", "title": "One"}]},
        },
    }
    assert form_content(requested) == {"a": "d", "b": "x", "c": 1, "e": "one"}
    assert form_content(None) == {}


def _url(rid: int, eid: str) -> Entry:
    params = {"sessionId": SID, "mode": "url", "elicitationId": eid, "url": "https://x.test/", "message": "m"}
    return entry("in", {"jsonrpc": "2.0", "id": rid, "method": "elicitation/create", "params": params})


def _answer(rid: int, action: str) -> Entry:
    return entry("out", {"jsonrpc": "2.0", "id": rid, "result": {"action": action}})


def _complete(eid: str) -> Entry:
    return entry("in", {"jsonrpc": "2.0", "method": "elicitation/complete", "params": {"elicitationId": eid}})


def test_url_elicitation_ids_and_completion() -> None:
    # Accepted and completed, then reused: fine.  Accepted, not completed, reused: outstanding.
    assert judge(wire.check_elicitation_ids, [_url(1, "a"), _complete("a"), _url(2, "a")], [_answer(1, "accept")]) == (
        True,
        [],
    )
    reused = judge(wire.check_elicitation_ids, [_url(1, "a"), _url(2, "a")], [_answer(1, "accept")])[1]
    assert reused == ["URL elicitation reuses elicitationId 'a', still outstanding on this connection"]
    declined = judge(wire.check_elicitation_ids, [_url(1, "a"), _url(2, "a")], [_answer(1, "decline")])
    assert declined == (True, []), "a declined elicitation is over"
    assert judge(wire.check_completion_routing, [_url(1, "a"), _complete("a")]) == (True, [])
    assert judge(wire.check_completion_routing, [_url(1, "a"), _complete("b")])[1] == [
        "elicitation/complete for 'b', no URL elicitation this client received"
    ]
    assert judge(wire.check_completion_routing, [_url(1, "a")]) == (False, [])


def test_url_credentials() -> None:
    def url(u: str) -> Entry:
        params = {"sessionId": SID, "mode": "url", "elicitationId": "e", "url": u, "message": "m"}
        return entry("in", {"jsonrpc": "2.0", "id": 3, "method": "elicitation/create", "params": params})

    ok = url("https://auth.example/authorize?client_id=c&state=s&code_challenge=x&elicitationId=e")
    assert judge(wire.check_url_credentials, [ok]) == (True, [])
    for bad in (
        "https://x.example/cb?access_token=abc",
        "https://x.example/cb#token=abc",
        "https://x.example/cb?client_secret=abc",
        "https://user:hunter2@x.example/",
        "https://x.example/?api_key=abc",
    ):
        assert len(judge(wire.check_url_credentials, [url(bad)])[1]) == 1, bad
