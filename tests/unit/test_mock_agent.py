"""Self-tests of the reference agent (``mock_agent``).

The agent runs in-process over ``memory_pair()`` against a small scripted
client built on a client-role ``Peer`` that validates every frame; one
test spawns ``python -m mock_agent`` for real.  Every test has a deadline.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from acp_conformance.core.events import Request, Response
from acp_conformance.schema.validator import SchemaValidator
from mock_agent import PROBE_CONTENT, PROBE_FILE, MockAgent
from tests.unit.fake_acp_client import (
    DEADLINE,
    connected,
    error_code,
    in_session,
    is_update,
    kinds,
    text_of,
    updates_between,
)


@pytest.fixture
def validator(schema_validator: SchemaValidator) -> SchemaValidator:
    return schema_validator


@pytest.mark.anyio
async def test_initialize_negotiates_v1(validator: SchemaValidator, tmp_path: Path) -> None:
    with anyio.fail_after(DEADLINE):
        async with connected(validator, tmp_path) as (agent, peer, client):
            for asked in (1, 0, 999):
                result = await client.initialize(asked)
                assert result["protocolVersion"] == 1
            caps = result["agentCapabilities"]
            assert caps["loadSession"] is True
            assert caps["promptCapabilities"] == {"image": True, "audio": True, "embeddedContext": True}
            assert caps["mcpCapabilities"] == {"http": False, "sse": False}
            assert {"list", "close"} <= set(caps["sessionCapabilities"])
            assert result["agentInfo"]["name"] == "acp-conformance-mock-agent"
            assert result["authMethods"] == []
            assert agent.client_caps.write_text_file and agent.client_caps.terminal
            bad = await peer.call("initialize", {"protocolVersion": "1"}, validate=False)
            assert error_code(bad) == -32602
            assert peer.violations() == []


@pytest.mark.anyio
async def test_require_auth_gates_sessions_until_authenticate(validator: SchemaValidator, tmp_path: Path) -> None:
    """``--require-auth``: one advertised method and auth.logout; session/new is -32000 until
    authenticate, and again after logout."""
    with anyio.fail_after(DEADLINE):
        agent = MockAgent(validator=validator, require_auth=True)
        async with connected(validator, tmp_path, agent=agent) as (_agent, peer, client):
            result = await client.initialize()
            assert [m["id"] for m in result["authMethods"]] == [MockAgent.AUTH_METHOD_ID]
            assert result["agentCapabilities"]["auth"] == {"logout": {}}
            params = {"cwd": str(tmp_path), "mcpServers": []}
            assert error_code(await peer.call("session/new", params)) == -32000
            assert error_code(await peer.call("authenticate", {"methodId": "nope"})) == -32602
            assert await peer.request("authenticate", {"methodId": MockAgent.AUTH_METHOD_ID}) == {}
            assert not (await peer.call("session/new", params)).is_error
            assert await peer.request("logout", {}) == {}
            assert error_code(await peer.call("session/list", {})) == -32000
            assert peer.violations() == []


@pytest.mark.anyio
async def test_new_session(validator: SchemaValidator, tmp_path: Path) -> None:
    with anyio.fail_after(DEADLINE):
        async with connected(validator, tmp_path) as (_agent, peer, client):
            await client.initialize()
            result = await peer.request(
                "session/new", {"cwd": str(tmp_path), "mcpServers": [], "_meta": {"x.test/k": [1, None]}}
            )
            assert result["modes"]["currentModeId"] == "ask"
            assert [m["id"] for m in result["modes"]["availableModes"]] == ["ask", "code"]
            model = next(o for o in result["configOptions"] if o["id"] == "model")
            assert (model["type"], model["category"], model["currentValue"]) == ("select", "model", "fast")
            ids = {result["sessionId"], await client.new_session(), await client.new_session()}
            assert len(ids) == 3
            stdio = {"name": "x", "command": "/bin/true", "args": [], "env": []}
            ok = await peer.call("session/new", {"cwd": str(tmp_path), "mcpServers": [stdio]})
            assert not ok.is_error
            bad_params: tuple[dict[str, Any], ...] = (
                {"cwd": "relative/dir", "mcpServers": []},
                {"cwd": str(tmp_path)},
                {"mcpServers": []},
                {
                    "cwd": str(tmp_path),
                    "mcpServers": [{"type": "http", "name": "h", "url": "http://x", "headers": []}],
                },
                {
                    "cwd": str(tmp_path),
                    "mcpServers": [{"type": "sse", "name": "s", "url": "http://x", "headers": []}],
                },
            )
            for params in bad_params:
                resp = await peer.call("session/new", params, validate=False)
                assert error_code(resp) == -32602, params
            assert peer.violations() == []


@pytest.mark.anyio
async def test_default_prompt_turn(validator: SchemaValidator, tmp_path: Path) -> None:
    async with in_session(validator, tmp_path) as (_agent, peer, client, sid):
        resp, updates = await client.prompt(sid, "hello héllo ✓ 日本")
        assert resp.result == {"stopReason": "end_turn"}
        assert kinds(updates)[:2] == ["agent_thought_chunk", "plan"]
        assert kinds(updates)[2:].count("agent_message_chunk") >= 2
        assert set(kinds(updates)[2:]) == {"agent_message_chunk"}
        assert text_of(updates) == "You said: hello héllo ✓ 日本"
        plan = updates[1]["entries"]
        assert plan and all({"content", "priority", "status"} <= set(e) for e in plan)
        # Nothing of the turn arrives after the response.
        late = await peer.quiet_for(0.2, is_update(sid), start=peer.events.index(resp))
        assert late is None
        # Non-text blocks are acknowledged.
        blocks: list[dict[str, Any]] = [
            {"type": "text", "text": "look", "_meta": {"k": 1}},
            {"type": "image", "mimeType": "image/png", "data": "iVBORw0KGgo="},
            {"type": "audio", "mimeType": "audio/wav", "data": "UklGRg=="},
            {"type": "resource", "resource": {"uri": "file:///w/a.py", "text": "x = 1"}},
            {"type": "resource_link", "uri": "file:///w/b.pdf", "name": "b.pdf"},
        ]
        resp, updates = await client.prompt(sid, blocks)
        assert resp.result == {"stopReason": "end_turn"}
        reply = text_of(updates)
        for word in ("image/png", "audio/wav", "file:///w/a.py", "b.pdf"):
            assert word in reply
        bad = await peer.call("session/prompt", {"sessionId": sid, "prompt": [{"type": "video"}]}, validate=False)
        assert error_code(bad) == -32602
        unknown = await peer.call("session/prompt", {"sessionId": "nope", "prompt": []})
        assert error_code(unknown) in (-32602, -32002)
        assert peer.violations() == []


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("keyword", "stop"),
    [
        ("acp:refuse", "refusal"),
        ("acp:max-tokens", "max_tokens"),
        ("ACP:MAX-TURN-REQUESTS", "max_turn_requests"),
    ],
)
async def test_stop_reason_keywords(validator: SchemaValidator, tmp_path: Path, keyword: str, stop: str) -> None:
    async with in_session(validator, tmp_path) as (_agent, peer, client, sid):
        resp, updates = await client.prompt(sid, f"please {keyword} now")
        assert resp.result == {"stopReason": stop}
        assert "agent_message_chunk" in kinds(updates)
        assert peer.violations() == []


@pytest.mark.anyio
async def test_tool_turn_allow(validator: SchemaValidator, tmp_path: Path) -> None:
    async with in_session(validator, tmp_path) as (_agent, peer, client, sid):
        resp, updates = await client.prompt(sid, "acp:tool please")
        assert resp.result == {"stopReason": "end_turn"}
        probe = tmp_path.resolve() / PROBE_FILE
        assert probe.read_text("utf-8") == PROBE_CONTENT
        assert client.calls == [
            "session/request_permission",
            "fs/write_text_file",
            "fs/read_text_file",
            "terminal/create",
            "terminal/wait_for_exit",
            "terminal/output",
            "terminal/release",
        ]
        assert client.created == client.released == ["term-1"]
        perm = client.permission_requests[0].params
        assert {o["kind"] for o in perm["options"]} == {
            "allow_once",
            "allow_always",
            "reject_once",
            "reject_always",
        }
        tool_updates = [u for u in updates if u["sessionUpdate"] in ("tool_call", "tool_call_update")]
        call_id = tool_updates[0]["toolCallId"]
        assert perm["toolCall"]["toolCallId"] == call_id
        assert [(u["sessionUpdate"], u.get("status")) for u in tool_updates] == [
            ("tool_call", "pending"),
            ("tool_call_update", "in_progress"),
            ("tool_call_update", "completed"),
        ]
        assert tool_updates[0]["kind"] == "edit"
        assert tool_updates[0]["locations"][0]["path"] == str(probe)
        diff = next(c for c in tool_updates[-1]["content"] if c["type"] == "diff")
        assert diff == {"type": "diff", "path": str(probe), "oldText": None, "newText": PROBE_CONTENT}
        # allow_once is not remembered: the next tool turn asks again, with a fresh toolCallId.
        resp, updates = await client.prompt(sid, "now use a tool again")
        assert resp.result == {"stopReason": "end_turn"}
        assert len(client.permission_requests) == 2
        assert updates[0]["sessionUpdate"] == "tool_call" and updates[0]["toolCallId"] != call_id
        assert peer.violations() == []


@pytest.mark.anyio
async def test_tool_turn_allow_always_is_remembered(validator: SchemaValidator, tmp_path: Path) -> None:
    async with in_session(validator, tmp_path, permission="allow_always") as (_agent, peer, client, sid):
        for _ in range(2):
            resp, _updates = await client.prompt(sid, "acp:tool")
            assert resp.result == {"stopReason": "end_turn"}
        assert len(client.permission_requests) == 1
        assert client.calls.count("fs/write_text_file") == 2
        assert peer.violations() == []


@pytest.mark.anyio
@pytest.mark.parametrize("choice", ["reject_once", "reject_always"])
async def test_tool_turn_reject(validator: SchemaValidator, tmp_path: Path, choice: str) -> None:
    async with in_session(validator, tmp_path, permission=choice) as (_agent, peer, client, sid):
        resp, updates = await client.prompt(sid, "acp:tool")
        assert resp.result == {"stopReason": "end_turn"}
        assert client.calls == ["session/request_permission"]
        assert not (tmp_path / PROBE_FILE).exists()
        statuses = [u.get("status") for u in updates if u["sessionUpdate"].startswith("tool_call")]
        assert statuses == ["pending", "failed"]
        assert peer.violations() == []


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("caps", "expected_calls"),
    [
        ({"fs": False, "terminal": False}, ["session/request_permission"]),
        (
            {"fs": True, "fs_write": False, "terminal": False},
            ["session/request_permission", "fs/read_text_file"],
        ),
        (
            {"fs": False, "terminal": True},
            [
                "session/request_permission",
                "terminal/create",
                "terminal/wait_for_exit",
                "terminal/output",
                "terminal/release",
            ],
        ),
    ],
)
async def test_tool_turn_respects_client_capabilities(
    validator: SchemaValidator, tmp_path: Path, caps: dict[str, Any], expected_calls: list[str]
) -> None:
    async with in_session(validator, tmp_path, **caps) as (_agent, peer, client, sid):
        resp, updates = await client.prompt(sid, "acp:tool")
        assert resp.result == {"stopReason": "end_turn"}
        assert client.calls == expected_calls
        assert not (tmp_path / PROBE_FILE).exists()
        final = [u for u in updates if u["sessionUpdate"] == "tool_call_update"][-1]
        assert final["status"] == "completed"
        assert not any(c["type"] == "diff" for c in final["content"])
        assert peer.violations() == []


@pytest.mark.anyio
async def test_cancel_while_permission_pending(validator: SchemaValidator, tmp_path: Path) -> None:
    async with in_session(validator, tmp_path, permission="hold") as (_agent, peer, client, sid):
        start = len(peer.events)
        rid = await peer.send_request(
            "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "acp:tool"}]}
        )
        await client.permission_arrived.wait()
        await peer.notify("session/cancel", {"sessionId": sid})
        await peer.notify("session/cancel", {"sessionId": sid})  # twice is harmless
        client.permission_answer = {"outcome": "cancelled"}
        client.permission_release.set()
        resp = await peer.wait_response(rid, method="session/prompt")
        assert resp.result == {"stopReason": "cancelled"}
        assert client.calls == ["session/request_permission"]
        assert not (tmp_path / PROBE_FILE).exists()
        assert await peer.quiet_for(0.2, is_update(sid), start=peer.events.index(resp)) is None
        # A cancel for an idle or unknown session is ignored and the session still works.
        await peer.notify("session/cancel", {"sessionId": sid})
        await peer.notify("session/cancel", {"sessionId": "unknown"})
        resp, _ = await client.prompt(sid, "hi")
        assert resp.result == {"stopReason": "end_turn"}
        assert not any(isinstance(e, Response) and e.id is None for e in peer.events[start:])
        assert peer.violations() == []


@pytest.mark.anyio
async def test_cancel_with_unanswered_permission_ends_after_grace(validator: SchemaValidator, tmp_path: Path) -> None:
    agent = MockAgent(validator=validator)
    agent.cancel_grace = 0.3
    async with in_session(validator, tmp_path, agent=agent, permission="hold") as (_agent, peer, client, sid):
        rid = await peer.send_request(
            "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "acp:tool"}]}
        )
        await client.permission_arrived.wait()
        await peer.notify("session/cancel", {"sessionId": sid})
        resp = await peer.wait_response(rid, method="session/prompt")
        assert resp.result == {"stopReason": "cancelled"}
        withdrawn = [n for n in peer.notifications("$/cancel_request")]
        assert [n.params["requestId"] for n in withdrawn] == [client.permission_requests[0].id]
        client.permission_answer = {"outcome": "cancelled"}
        client.permission_release.set()


@pytest.mark.anyio
async def test_cancel_during_terminal_releases_it(validator: SchemaValidator, tmp_path: Path) -> None:
    with anyio.fail_after(DEADLINE):
        async with connected(validator, tmp_path) as (_agent, peer, client):
            client.hold_wait_for_exit = True
            await client.initialize()
            sid = await client.new_session()
            rid = await peer.send_request(
                "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "acp:tool"}]}
            )
            await peer.wait_for(lambda e: isinstance(e, Request) and e.method == "terminal/wait_for_exit")
            await peer.notify("session/cancel", {"sessionId": sid})
            resp = await peer.wait_response(rid, method="session/prompt")
            assert resp.result == {"stopReason": "cancelled"}
            assert client.created == client.released == ["term-1"]
            assert "terminal/output" not in client.calls


@pytest.mark.anyio
@pytest.mark.parametrize("how", ["session/cancel", "$/cancel_request"])
async def test_long_turn_cancelled(validator: SchemaValidator, tmp_path: Path, how: str) -> None:
    async with in_session(validator, tmp_path) as (_agent, peer, _client, sid):
        start = len(peer.events)
        rid = await peer.send_request(
            "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "acp:long"}]}
        )
        await peer.wait_for(is_update(sid, "agent_message_chunk"), start=start)
        # Modes and config options may change mid-turn.
        assert await peer.request("session/set_mode", {"sessionId": sid, "modeId": "code"}) == {}
        if how == "session/cancel":
            await peer.notify("session/cancel", {"sessionId": sid})
        else:
            await peer.notify("$/cancel_request", {"requestId": rid})
        resp = await peer.wait_response(rid, method="session/prompt")
        assert resp.result == {"stopReason": "cancelled"}
        ticks = [
            u["content"]["text"]
            for u in updates_between(peer, sid, start, peer.events.index(resp))
            if u["sessionUpdate"] == "agent_message_chunk"
        ]
        assert ticks[:1] == ["tick 1"]
        assert await peer.quiet_for(0.2, is_update(sid), start=peer.events.index(resp)) is None
        assert peer.violations() == []


@pytest.mark.anyio
async def test_long_turn_ends_itself(validator: SchemaValidator, tmp_path: Path) -> None:
    agent = MockAgent(validator=validator)
    agent.long_turn_seconds = 0.2
    async with in_session(validator, tmp_path, agent=agent) as (_agent, peer, client, sid):
        resp, updates = await client.prompt(sid, "acp:long")
        assert resp.result == {"stopReason": "end_turn"}
        assert text_of(updates) == "tick 1tick 2tick 3tick done"
        second = await peer.call("session/prompt", {"sessionId": sid, "prompt": []})
        assert second.result == {"stopReason": "end_turn"}


@pytest.mark.anyio
async def test_concurrent_prompt_is_refused(validator: SchemaValidator, tmp_path: Path) -> None:
    async with in_session(validator, tmp_path) as (_agent, peer, _client, sid):
        rid = await peer.send_request(
            "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "acp:long"}]}
        )
        await peer.wait_for(is_update(sid, "agent_message_chunk"))
        second = await peer.call("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "x"}]})
        assert second.is_error
        await peer.notify("session/cancel", {"sessionId": sid})
        assert (await peer.wait_response(rid)).result == {"stopReason": "cancelled"}


def test_dictated_plan_steps() -> None:
    """One rule for the agent that plans and the test that judges plans (prompts.dictated_steps)."""
    from acp_conformance.prompts import DEFAULT_PLAN_PROMPT, dictated_steps

    assert dictated_steps(DEFAULT_PLAN_PROMPT) == ["Read the prompt", "Write the reply", "Check the reply"]
    assert dictated_steps("acp:plan Step one; Step two.") == ["Step one", "Step two"]
    assert dictated_steps("no steps here") == ["no steps here"]


def test_the_mock_agent_does_not_load_openssl_or_the_http_stack_to_read_the_schema() -> None:
    """Its peak RSS budget is 40 MiB (issue 18): urllib.request (http.client) and hashlib
    (OpenSSL's libcrypto) cost several MiB, and reading the schema needs neither; only fetching
    it (``fetch_into_cache``) and a report's ``sha256`` do.  ``ssl`` itself is not checked: asyncio
    imports it (``asyncio.sslproto``), and the agent runs on asyncio whatever it reads."""
    import subprocess
    import sys

    code = (
        "import sys, mock_agent.cli\n"
        "from acp_conformance.schema import locate_schema\n"
        "from acp_conformance.schema.validator import SchemaValidator\n"
        "SchemaValidator(locate_schema().data)\n"
        "print(sorted(m for m in ('_hashlib', 'http.client', 'tarfile') if m in sys.modules))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.strip() == "[]", done.stdout + done.stderr
