"""Strict per-method validation: the method map, precise messages, clause mapping, cost."""

from __future__ import annotations

import time
from typing import Any

import pytest

from acp_conformance.clauses import registry
from acp_conformance.core.connection import Role
from acp_conformance.schema.validator import SchemaIssue, SchemaValidator, clause_for

A, C = Role.AGENT, Role.CLIENT

#: method -> (receiver, request definition, response definition, notification definition)
STABLE_METHODS: dict[str, tuple[Role | None, str | None, str | None, str | None]] = {
    "initialize": (A, "InitializeRequest", "InitializeResponse", None),
    "authenticate": (A, "AuthenticateRequest", "AuthenticateResponse", None),
    "session/new": (A, "NewSessionRequest", "NewSessionResponse", None),
    "session/load": (A, "LoadSessionRequest", "LoadSessionResponse", None),
    "session/prompt": (A, "PromptRequest", "PromptResponse", None),
    "session/set_mode": (A, "SetSessionModeRequest", "SetSessionModeResponse", None),
    "session/cancel": (A, None, None, "CancelNotification"),
    "session/update": (C, None, None, "SessionNotification"),
    "session/request_permission": (C, "RequestPermissionRequest", "RequestPermissionResponse", None),
    "fs/read_text_file": (C, "ReadTextFileRequest", "ReadTextFileResponse", None),
    "fs/write_text_file": (C, "WriteTextFileRequest", "WriteTextFileResponse", None),
    "terminal/create": (C, "CreateTerminalRequest", "CreateTerminalResponse", None),
    "terminal/output": (C, "TerminalOutputRequest", "TerminalOutputResponse", None),
    "terminal/wait_for_exit": (C, "WaitForTerminalExitRequest", "WaitForTerminalExitResponse", None),
    "terminal/kill": (C, "KillTerminalRequest", "KillTerminalResponse", None),
    "terminal/release": (C, "ReleaseTerminalRequest", "ReleaseTerminalResponse", None),
    "$/cancel_request": (None, None, None, "CancelRequestNotification"),
}

SID = "sess-1"
CHUNK = {
    "sessionId": SID,
    "update": {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "Hi"}},
}

#: (definition, instance) pairs shaped like what real peers exchange.
VALID: list[tuple[str, Any]] = [
    (
        "InitializeRequest",
        {
            "protocolVersion": 1,
            "clientCapabilities": {"fs": {"readTextFile": True, "writeTextFile": True}, "terminal": True},
            "clientInfo": {"name": "acp-conformance", "version": "0.1.0"},
        },
    ),
    (
        "InitializeResponse",
        {
            "protocolVersion": 1,
            "agentCapabilities": {"loadSession": True, "promptCapabilities": {"image": True}},
            "authMethods": [],
        },
    ),
    ("NewSessionRequest", {"cwd": "/tmp/project", "mcpServers": []}),
    ("NewSessionResponse", {"sessionId": SID}),
    (
        "PromptRequest",
        {
            "sessionId": SID,
            "prompt": [
                {"type": "text", "text": "Fix the bug"},
                {"type": "resource_link", "uri": "file:///tmp/project/a.py", "name": "a.py"},
            ],
        },
    ),
    ("PromptResponse", {"stopReason": "end_turn"}),
    ("CancelNotification", {"sessionId": SID}),
    ("SessionNotification", CHUNK),
    (
        "SessionNotification",
        {
            "sessionId": SID,
            "update": {
                "sessionUpdate": "tool_call",
                "toolCallId": "call_1",
                "title": "Reading a.py",
                "kind": "read",
                "status": "pending",
                "locations": [{"path": "/tmp/project/a.py", "line": 3}],
            },
        },
    ),
    (
        "SessionNotification",
        {
            "sessionId": SID,
            "update": {
                "sessionUpdate": "tool_call_update",
                "toolCallId": "call_1",
                "status": "completed",
                "content": [{"type": "content", "content": {"type": "text", "text": "ok"}}],
            },
        },
    ),
    (
        "SessionNotification",
        {
            "sessionId": SID,
            "update": {
                "sessionUpdate": "plan",
                "entries": [{"content": "step", "priority": "high", "status": "in_progress"}],
            },
        },
    ),
    (
        "RequestPermissionRequest",
        {
            "sessionId": SID,
            "toolCall": {"toolCallId": "call_1", "title": "Edit a.py"},
            "options": [
                {"optionId": "allow", "name": "Allow", "kind": "allow_once"},
                {"optionId": "deny", "name": "Deny", "kind": "reject_once"},
            ],
        },
    ),
    ("RequestPermissionResponse", {"outcome": {"outcome": "selected", "optionId": "allow"}}),
    ("RequestPermissionResponse", {"outcome": {"outcome": "cancelled"}}),
    ("ReadTextFileRequest", {"sessionId": SID, "path": "/tmp/project/a.py", "line": 1, "limit": 10}),
    ("ReadTextFileResponse", {"content": "print(1)\n"}),
    ("WriteTextFileRequest", {"sessionId": SID, "path": "/tmp/project/a.py", "content": "x"}),
    ("WriteTextFileResponse", {}),
    ("CreateTerminalRequest", {"sessionId": SID, "command": "ls", "args": ["-la"], "outputByteLimit": 1024}),
    ("CreateTerminalResponse", {"terminalId": "term-1"}),
    ("TerminalOutputResponse", {"output": "a\n", "truncated": False, "exitStatus": {"exitCode": 0, "signal": None}}),
    ("CancelRequestNotification", {"requestId": 3}),
    ("Error", {"code": -32601, "message": "Method not found"}),
    ("Error", {"code": -32002, "message": "Resource not found", "data": {"uri": "file:///x"}}),
]


# ------------------------------------------------------------------ method map
def test_method_map_covers_every_stable_method(schema_validator: SchemaValidator) -> None:
    for method, (receiver, request, response, notification) in STABLE_METHODS.items():
        spec = schema_validator.spec(method)
        assert spec is not None, f"{method} missing from the method map"
        assert (spec.receiver, spec.request, spec.response, spec.notification) == (
            receiver,
            request,
            response,
            notification,
        ), method
        for name in (request, response, notification):
            if name is not None:
                assert schema_validator.has_definition(name)


def test_methods_received_by_role(schema_validator: SchemaValidator) -> None:
    by_agent = set(schema_validator.methods_received_by(Role.AGENT))
    by_client = set(schema_validator.methods_received_by(Role.CLIENT))
    assert {"initialize", "session/prompt", "session/cancel", "$/cancel_request"} <= by_agent
    assert {"session/update", "fs/read_text_file", "terminal/create", "$/cancel_request"} <= by_client
    assert by_agent & by_client == {"$/cancel_request"}
    assert schema_validator.spec("_vendor/thing") is None


# ------------------------------------------------------------------- verdicts
@pytest.mark.parametrize(("definition", "instance"), VALID, ids=[f"{d}-{i}" for i, (d, _) in enumerate(VALID)])
def test_typical_frames_are_valid(schema_validator: SchemaValidator, definition: str, instance: Any) -> None:
    assert schema_validator.validate(definition, instance) == []


def test_bad_content_block_type_lists_allowed_values(schema_validator: SchemaValidator) -> None:
    (issue,) = schema_validator.validate(
        "PromptRequest", {"sessionId": SID, "prompt": [{"type": "text", "text": "a"}, {"type": "txt", "text": "b"}]}
    )
    assert issue.definition == "PromptRequest" and issue.path == "/prompt/1"
    assert "'txt'" in issue.message
    for allowed in ("text", "image", "audio", "resource", "resource_link"):
        assert f"'{allowed}'" in issue.message


def test_bad_stop_reason_lists_the_five_values(schema_validator: SchemaValidator) -> None:
    (issue,) = schema_validator.validate("PromptResponse", {"stopReason": "done"})
    assert issue.path == "/stopReason" and "'done'" in issue.message
    for allowed in ("end_turn", "max_tokens", "max_turn_requests", "refusal", "cancelled"):
        assert f"'{allowed}'" in issue.message
    assert clause_for(issue, {"stopReason": "done"}) == "prompt.stop-reason.enum"


def test_missing_required_field_is_named(schema_validator: SchemaValidator) -> None:
    (issue,) = schema_validator.validate("RequestPermissionResponse", {"outcome": {"outcome": "selected"}})
    assert issue.path == "/outcome" and "optionId" in issue.message and "required" in issue.message
    assert clause_for(issue, None) == "perm.response.shape"


def test_check_helpers_select_definitions_by_method(schema_validator: SchemaValidator) -> None:
    v = schema_validator
    assert v.check_request("session/prompt", {"sessionId": SID, "prompt": []}, True, Role.CLIENT) == []
    (issue,) = v.check_request("session/prompt", None, False, Role.CLIENT)
    assert issue.definition == "PromptRequest"
    assert v.check_notification("session/update", CHUNK, True, Role.AGENT) == []
    assert v.check_result("session/prompt", {"stopReason": "refusal"}) == []
    assert [i.definition for i in v.check_result("session/prompt", {})] == ["PromptResponse"]
    assert v.check_result("_unknown", {"anything": 1}) == []
    assert v.check_error({"code": -32603, "message": "x"}) == []
    assert [i.path for i in v.check_error({"code": -32603, "message": 1})] == ["/message"]


# ------------------------------------------------------------- clause mapping
BAD_UPDATES: list[tuple[dict[str, Any], str]] = [
    ({"sessionUpdate": "agent_message_chunk", "content": {"type": "txt", "text": "x"}}, "update.chunk.shape"),
    ({"sessionUpdate": "user_message_chunk"}, "update.chunk.shape"),
    ({"sessionUpdate": "agent_thought_chunk", "content": "plain"}, "update.chunk.shape"),
    ({"sessionUpdate": "tool_call", "toolCallId": "t", "title": "x", "status": "nope"}, "update.tool-call.shape"),
    ({"sessionUpdate": "tool_call_update", "status": "completed"}, "update.tool-call-update.shape"),
    ({"sessionUpdate": "plan", "entries": [{"content": "x"}]}, "update.plan.shape"),
    ({"sessionUpdate": "current_mode_update"}, "update.current-mode.shape"),
    ({"sessionUpdate": "bogus"}, "update.discriminator"),
    # v2 vocabulary after a v1 handshake: the version agreed on is not acted on.
    ({"sessionUpdate": "state_update", "state": "idle"}, "init.version.agree"),
    ({"text": "no discriminator"}, "update.discriminator"),
]


@pytest.mark.parametrize(("update", "clause"), BAD_UPDATES)
def test_clause_for_maps_update_failures(schema_validator: SchemaValidator, update: Any, clause: str) -> None:
    params = {"sessionId": SID, "update": update}
    (issue,) = schema_validator.validate("SessionNotification", params)
    assert issue.path.startswith("/update")
    assert clause_for(issue, params) == clause


def test_clause_for_session_id_and_generic(schema_validator: SchemaValidator) -> None:
    params = {"sessionId": 7, "update": CHUNK["update"]}
    (issue,) = schema_validator.validate("SessionNotification", params)
    assert clause_for(issue, params) == "prompt.updates.session-id"
    params2 = {"stopReason": "end_turn", "_meta": 5}
    issues = schema_validator.validate("PromptResponse", params2)
    assert [clause_for(i, params2) for i in issues] == ["schema.valid"]
    assert clause_for(SchemaIssue("NoSuchDefinition", "", "x"), {}) == "schema.valid"


def test_every_update_variant_has_a_registered_shape_clause(schema_validator: SchemaValidator) -> None:
    variants = [
        b["properties"]["sessionUpdate"]["const"] for b in schema_validator.definition("SessionUpdate")["oneOf"]
    ]
    assert len(variants) >= 10
    reg = registry()
    for kind in variants:
        params = {"sessionId": SID, "update": {"sessionUpdate": kind, "_meta": 5}}
        clause = clause_for(SchemaIssue("SessionNotification", "/update", "x"), params)
        assert clause != "update.discriminator", f"{kind} has no specific shape clause"
        assert clause in reg, clause


# ------------------------------------------------------ registry vs standalone
def _instances() -> list[Any]:
    """The typical frames, each with every top-level field dropped and nulled, the bad updates,
    and the odd shapes every definition must turn down or accept alike."""
    out: list[Any] = [None, {}, [], "x", 0, 1.5, True, {"sessionId": SID}, {"_meta": 5}, {"_meta": {}}]
    for _, instance in VALID:
        out.append(instance)
        if isinstance(instance, dict):
            for key in instance:
                out.append({k: v for k, v in instance.items() if k != key})
                out.append({**instance, key: None})
    out += [{"sessionId": SID, "update": u} for u, _ in BAD_UPDATES]
    out += [u for u, _ in BAD_UPDATES]
    return out


def test_registry_validators_judge_every_definition_as_standalone_ones(schema_validator: SchemaValidator) -> None:
    """The validators compiled through the registry (the fast path) and the standalone wrapper of
    each definition (what older jsonschema_rs releases compile) agree on every definition of the
    schema, for valid frames, frames missing or nulling each field, and odd shapes: the same
    verdict, and for an invalid one the same first error (path and message)."""
    import jsonschema_rs

    fresh = SchemaValidator(schema_validator._schema)
    assert fresh._registry is None
    instances = _instances()
    names = sorted(fresh._schema["$defs"])
    assert len(names) > 100
    for name in names:
        fast = fresh.compiled(name)
        slow = jsonschema_rs.validator_for(fresh.standalone(name))
        for instance in instances:
            assert fast.is_valid(instance) == slow.is_valid(instance), (name, instance)
            if not slow.is_valid(instance):
                a, b = next(iter(fast.iter_errors(instance))), next(iter(slow.iter_errors(instance)))
                assert (list(a.instance_path), a.message) == (list(b.instance_path), b.message), (name, instance)
    assert fresh._registry not in (None, False), "the registry was not used"


def _branches(node: Any) -> list[dict[str, Any]]:
    """Every ``anyOf`` / ``oneOf`` member anywhere under ``node`` (what declared.py compiles)."""
    out: list[dict[str, Any]] = []
    if isinstance(node, dict):
        for key in ("anyOf", "oneOf"):
            out += [b for b in node.get(key) or [] if isinstance(b, dict)]
        for v in node.values():
            out += _branches(v)
    elif isinstance(node, list):
        for v in node:
            out += _branches(v)
    return out


def test_a_compiled_subschema_judges_as_it_does_beside_the_whole_defs(schema_validator: SchemaValidator) -> None:
    """``compile_node`` (a union branch with its references made absolute, compiled against the
    registry) agrees with the branch compiled beside the whole ``$defs``, on every branch."""
    import jsonschema_rs

    fresh = SchemaValidator(schema_validator._schema)
    defs = fresh._schema["$defs"]
    branches = _branches(defs)
    assert len(branches) > 50
    instances = _instances()
    for branch in branches:
        fast = fresh.compile_node(branch)
        slow = jsonschema_rs.validator_for({"$schema": fresh._dialect, **branch, "$defs": defs})
        for instance in instances:
            assert fast.is_valid(instance) == slow.is_valid(instance), (branch, instance)


def test_without_registries_the_standalone_wrappers_are_compiled(
    schema_validator: SchemaValidator, monkeypatch: pytest.MonkeyPatch
) -> None:
    import jsonschema_rs

    monkeypatch.delattr(jsonschema_rs, "Registry")
    fresh = SchemaValidator(schema_validator._schema)
    assert fresh.validate("SessionNotification", CHUNK) == []
    assert fresh._registry is False
    params = {"sessionId": SID, "update": BAD_UPDATES[0][0]}
    (issue,) = fresh.validate("SessionNotification", params)
    assert issue == schema_validator.validate("SessionNotification", params)[0]


# ----------------------------------------------------------------------- cost
def test_session_update_validation_is_cheap(schema_validator: SchemaValidator) -> None:
    validate = schema_validator.validate
    for _ in range(100):
        assert validate("SessionNotification", CHUNK) == []
    n = 2000
    start = time.perf_counter()
    for _ in range(n):
        validate("SessionNotification", CHUNK)
    per_frame = (time.perf_counter() - start) / n
    assert per_frame < 50e-6, f"{per_frame * 1e6:.1f} µs per session/update"


def test_an_initialize_result_for_a_later_version_is_not_judged_by_the_v1_schema(
    schema_validator: SchemaValidator,
) -> None:
    """Answering our 999 with its latest version (2) is right; the v2-shaped body is beyond v1."""
    v2_shaped = {"protocolVersion": 2, "agentCapabilities": {}, "authMethods": [{"name": "no id in v1 terms"}]}
    assert schema_validator.check_result("initialize", v2_shaped) == []
    as_v1 = {**v2_shaped, "protocolVersion": 1}
    assert [i.path for i in schema_validator.check_result("initialize", as_v1)] == ["/authMethods/0"]
    # Not a version at all: still judged.
    assert schema_validator.check_result("initialize", {**v2_shaped, "protocolVersion": 70000})


def test_without_python_jsonschema_the_rust_error_names_the_path(
    schema_validator: SchemaValidator, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A mocks-only install has no python-jsonschema (the `suite` extra): an invalid frame is still
    explained, by jsonschema-rs, with the path that decides its clause."""
    import sys

    monkeypatch.setitem(sys.modules, "jsonschema", None)  # `import jsonschema` raises ImportError
    fresh = SchemaValidator(schema_validator._schema)
    result = {"protocolVersion": 1, "agentCapabilities": {}, "agentInfo": {"name": "x"}}
    issues = fresh.validate("InitializeResponse", result)
    assert len(issues) == 1 and issues[0].path == "/agentInfo" and issues[0].message
    assert clause_for(issues[0], result) == "init.implementation.shape"


def test_v2_vocabulary_matches_the_pinned_sdk_schemas() -> None:
    """V2_ONLY_UPDATES / V2_ONLY_METHODS are what the SDK's v2 schema adds to v1 (stable and
    unstable): re-derived here, so an SDK bump that changes them fails here, not silently."""
    import json

    from acp_conformance.schema import locate_schema
    from acp_conformance.schema.validator import V2_ONLY_METHODS, V2_ONLY_UPDATES

    try:
        source = locate_schema()
    except Exception as exc:  # the schema comes with ./run setup
        pytest.skip(f"no schema: {exc}")
    v2_path = source.path.parent.parent / "v2" / "schema.json"
    unstable_path = source.path.parent / "schema.unstable.json"
    if not v2_path.is_file() or not unstable_path.is_file():
        pytest.skip(f"the located schema ({source.source}) ships no v2 sibling")
    v1, v2 = source.data["$defs"], json.loads(v2_path.read_text())["$defs"]
    unstable = json.loads(unstable_path.read_text())["$defs"]

    def kinds(defs: dict[str, Any]) -> set[str]:
        union = defs["SessionUpdate"]
        variants = union.get("oneOf", []) + union.get("anyOf", [])
        return {
            v["properties"]["sessionUpdate"]["const"] for v in variants if "const" in v["properties"]["sessionUpdate"]
        }

    def methods(defs: dict[str, Any]) -> set[str]:
        return {d["x-method"] for d in defs.values() if isinstance(d, dict) and "x-method" in d}

    assert kinds(v2) - kinds(v1) - kinds(unstable) == V2_ONLY_UPDATES
    assert methods(v2) - methods(v1) - methods(unstable) == V2_ONLY_METHODS


def test_a_v2_method_is_charged_to_the_version_agreed_on(schema_validator: SchemaValidator) -> None:
    from acp_conformance.core.events import Request
    from acp_conformance.schema.rules import judge_frame

    ev = Request(method="auth/logout", params={}, id=5, raw=b"")
    (v,) = judge_frame(schema_validator, Role.AGENT, ev)
    assert v.clause_id == "init.version.agree" and "ACP v2" in v.message
    other = Request(method="session/no_such_thing", params={}, id=6, raw=b"")
    assert [v.clause_id for v in judge_frame(schema_validator, Role.AGENT, other)] == ["ext.method.underscore"]
