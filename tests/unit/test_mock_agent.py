"""Self-tests of the reference agent (``mock_agent``).

The agent runs in-process over ``memory_pair()`` against a small scripted
client built on a client-role ``Peer`` that validates every frame; one
test spawns ``python -m mock_agent`` for real.  Every test has a deadline.
"""

from __future__ import annotations

import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import orjson
import pytest

from acp_conformance.core.connection import Role
from acp_conformance.core.events import Event, Notification, Request, Response
from acp_conformance.errors import SchemaNotFound
from acp_conformance.peer import HandlerError, Peer
from acp_conformance.schema import locate_schema
from acp_conformance.schema.validator import SchemaValidator
from acp_conformance.transport import memory_pair, spawn
from mock_agent import PROBE_CONTENT, PROBE_FILE, MockAgent, Turn

REPO = Path(__file__).resolve().parents[2]
DEADLINE = 15.0


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def validator() -> SchemaValidator:
    try:
        return SchemaValidator(locate_schema().data)
    except SchemaNotFound as exc:  # pragma: no cover - environment problem
        pytest.skip(f"ACP schema not available: {exc}")


class FakeClient:
    """A scripted ACP client: fs in a temp dir, virtual terminals, permission policy."""

    def __init__(
        self,
        peer: Peer,
        root: Path,
        *,
        fs: bool = True,
        fs_write: bool | None = None,
        terminal: bool = True,
        permission: str = "allow_once",
    ) -> None:
        self.peer = peer
        self.root = root
        self.fs = fs
        self.fs_write = fs if fs_write is None else fs_write
        self.terminal = terminal
        self.permission = permission  # allow_once | allow_always | reject_once | reject_always | hold
        self.permission_requests: list[Request] = []
        self.permission_arrived = anyio.Event()
        self.permission_answer: dict[str, Any] | None = None
        self.permission_release = anyio.Event()
        self.hold_wait_for_exit = False
        self.calls: list[str] = []
        self.created: list[str] = []
        self.released: list[str] = []
        for method in (
            "session/request_permission",
            "fs/read_text_file",
            "fs/write_text_file",
            "terminal/create",
            "terminal/wait_for_exit",
            "terminal/output",
            "terminal/release",
            "terminal/kill",
        ):
            peer.handlers[method] = self._serve

    def capabilities(self) -> dict[str, Any]:
        return {"fs": {"readTextFile": self.fs, "writeTextFile": self.fs_write}, "terminal": self.terminal}

    async def _serve(self, req: Request) -> Any:
        self.calls.append(req.method)
        p = req.params
        assert isinstance(p, dict)
        if req.method == "session/request_permission":
            self.permission_requests.append(req)
            self.permission_arrived.set()
            if self.permission == "hold":
                await self.permission_release.wait()
                return {"outcome": self.permission_answer}
            kind = self.permission
            option = next(o for o in p["options"] if o["kind"] == kind)
            return {"outcome": {"outcome": "selected", "optionId": option["optionId"]}}
        if req.method == "fs/write_text_file":
            path = Path(p["path"])
            assert path.is_absolute() and self.root in path.parents
            path.write_text(p["content"], "utf-8")
            return {}
        if req.method == "fs/read_text_file":
            path = Path(p["path"])
            if not path.is_file():
                raise HandlerError(-32002, f"no such file {path}")
            lines = path.read_text("utf-8").splitlines(keepends=True)
            start = p.get("line", 1) - 1
            return {"content": "".join(lines[start : start + p.get("limit", len(lines))])}
        if req.method == "terminal/create":
            tid = f"term-{len(self.created) + 1}"
            self.created.append(tid)
            return {"terminalId": tid}
        if req.method == "terminal/wait_for_exit":
            if self.hold_wait_for_exit:
                await anyio.sleep_forever()
            return {"exitCode": 0, "signal": None}
        if req.method == "terminal/output":
            return {"output": "hello\n", "truncated": False, "exitStatus": {"exitCode": 0, "signal": None}}
        if req.method == "terminal/release":
            self.released.append(p["terminalId"])
            return {}
        return {}

    async def initialize(self, version: Any = 1) -> dict[str, Any]:
        result = await self.peer.request(
            "initialize",
            {
                "protocolVersion": version,
                "clientCapabilities": self.capabilities(),
                "clientInfo": {"name": "test-client", "version": "0"},
            },
        )
        assert isinstance(result, dict)
        return result

    async def new_session(self, cwd: Path | None = None) -> str:
        result = await self.peer.request("session/new", {"cwd": str(cwd or self.root), "mcpServers": []})
        sid = result["sessionId"]
        assert isinstance(sid, str)
        return sid

    async def prompt(
        self, sid: str, text: str | list[dict[str, Any]]
    ) -> tuple[Response, list[dict[str, Any]]]:
        """Run a turn; returns the response and the session's updates that preceded it."""
        blocks = [{"type": "text", "text": text}] if isinstance(text, str) else text
        start = len(self.peer.events)
        resp = await self.peer.call("session/prompt", {"sessionId": sid, "prompt": blocks})
        return resp, updates_between(self.peer, sid, start, self.peer.events.index(resp))


def updates_between(peer: Peer, sid: str, start: int, end: int) -> list[dict[str, Any]]:
    return [
        e.params["update"]
        for e in peer.events[start:end]
        if isinstance(e, Notification) and e.method == "session/update" and e.params["sessionId"] == sid
    ]


def is_update(sid: str, kind: str | None = None) -> Any:
    def pred(e: Event) -> bool:
        return (
            isinstance(e, Notification)
            and e.method == "session/update"
            and e.params.get("sessionId") == sid
            and (kind is None or e.params["update"]["sessionUpdate"] == kind)
        )

    return pred


@asynccontextmanager
async def connected(
    validator: SchemaValidator, tmp_path: Path, *, agent: MockAgent | None = None, **client_kw: Any
) -> AsyncIterator[tuple[MockAgent, Peer, FakeClient]]:
    """An agent served in-process and a validating client peer, torn down via EOF."""
    agent_end, client_end = memory_pair()
    agent = agent or MockAgent(validator=validator)
    async with anyio.create_task_group() as tg:
        tg.start_soon(agent.serve, agent_end)
        async with Peer(client_end, Role.CLIENT, validator=validator, timeout=10.0) as peer:
            client = FakeClient(peer, tmp_path.resolve(), **client_kw)
            yield agent, peer, client
            await client_end.close_output()
            assert await peer.wait_closed(10.0), "the agent did not close its output after our EOF"


@asynccontextmanager
async def in_session(
    validator: SchemaValidator, tmp_path: Path, *, agent: MockAgent | None = None, **client_kw: Any
) -> AsyncIterator[tuple[MockAgent, Peer, FakeClient, str]]:
    """How most tests start, under their deadline: ``connected``, initialized, with one session (its id last)."""
    with anyio.fail_after(DEADLINE):
        async with connected(validator, tmp_path, agent=agent, **client_kw) as (served, peer, client):
            await client.initialize()
            sid = await client.new_session()
            yield served, peer, client, sid


def kinds(updates: list[dict[str, Any]]) -> list[str]:
    return [u["sessionUpdate"] for u in updates]


def text_of(updates: list[dict[str, Any]], kind: str = "agent_message_chunk") -> str:
    return "".join(u["content"]["text"] for u in updates if u["sessionUpdate"] == kind)


def error_code(resp: Response) -> Any:
    assert resp.is_error, f"expected an error, got {resp.result!r}"
    return resp.error["code"]


# ----------------------------------------------------------------------------- tests
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
        bad = await peer.call(
            "session/prompt", {"sessionId": sid, "prompt": [{"type": "video"}]}, validate=False
        )
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
async def test_stop_reason_keywords(
    validator: SchemaValidator, tmp_path: Path, keyword: str, stop: str
) -> None:
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
async def test_cancel_with_unanswered_permission_ends_after_grace(
    validator: SchemaValidator, tmp_path: Path
) -> None:
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
        second = await peer.call(
            "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "x"}]}
        )
        assert second.is_error
        await peer.notify("session/cancel", {"sessionId": sid})
        assert (await peer.wait_response(rid)).result == {"stopReason": "cancelled"}


@pytest.mark.anyio
async def test_load_replays_history_before_responding(validator: SchemaValidator, tmp_path: Path) -> None:
    async with in_session(validator, tmp_path) as (_agent, peer, client, sid):
        _, first = await client.prompt(sid, "ping-123")
        _, second = await client.prompt(sid, "acp:tool")
        start = len(peer.events)
        resp = await peer.call("session/load", {"sessionId": sid, "cwd": str(tmp_path), "mcpServers": []})
        assert isinstance(resp.result, dict) and resp.result["modes"]["currentModeId"] == "ask"
        replay = updates_between(peer, sid, start, peer.events.index(resp))
        user = [u for u in replay if u["sessionUpdate"] == "user_message_chunk"]
        assert [u["content"]["text"] for u in user] == ["ping-123", "acp:tool"]
        assert [u for u in replay if u["sessionUpdate"] != "user_message_chunk"] == first + second
        assert replay[0]["sessionUpdate"] == "user_message_chunk"
        # Distinct messages never share a messageId.
        by_id: dict[str, set[str]] = {}
        for u in replay:
            if "messageId" in u:
                by_id.setdefault(u["messageId"], set()).add(u["sessionUpdate"])
        assert all(len(v) == 1 for v in by_id.values())
        assert await peer.quiet_for(0.2, is_update(sid), start=peer.events.index(resp)) is None
        resp, _ = await client.prompt(sid, "still there?")
        assert resp.result == {"stopReason": "end_turn"}
        missing = await peer.call(
            "session/load", {"sessionId": "nope", "cwd": str(tmp_path), "mcpServers": []}
        )
        assert error_code(missing) == -32002
        # session/resume restores without any replay.
        start = len(peer.events)
        resumed = await peer.call("session/resume", {"sessionId": sid, "cwd": str(tmp_path)})
        assert isinstance(resumed.result, dict)
        assert updates_between(peer, sid, start, peer.events.index(resumed)) == []
        assert peer.violations() == []


@pytest.mark.anyio
async def test_set_mode_and_config_option(validator: SchemaValidator, tmp_path: Path) -> None:
    async with in_session(validator, tmp_path) as (_agent, peer, _client, sid):
        start = len(peer.events)
        resp = await peer.call("session/set_mode", {"sessionId": sid, "modeId": "code"})
        assert resp.result == {}
        mode_updates = [
            u
            for u in updates_between(peer, sid, start, peer.events.index(resp))
            if u["sessionUpdate"] == "current_mode_update"
        ]
        assert mode_updates == [{"sessionUpdate": "current_mode_update", "currentModeId": "code"}]
        for params in ({"sessionId": sid, "modeId": "nope"}, {"sessionId": "nope", "modeId": "ask"}):
            assert error_code(await peer.call("session/set_mode", params)) == -32602
        result = await peer.request(
            "session/set_config_option", {"sessionId": sid, "configId": "model", "value": "smart"}
        )
        values = {o["id"]: o["currentValue"] for o in result["configOptions"]}
        assert values == {"model": "smart", "mode": "code"}
        result = await peer.request(
            "session/set_config_option", {"sessionId": sid, "configId": "mode", "value": "ask"}
        )
        assert {o["id"]: o["currentValue"] for o in result["configOptions"]} == {
            "model": "smart",
            "mode": "ask",
        }
        bad_config: tuple[dict[str, Any], ...] = (
            {"sessionId": sid, "configId": "nope", "value": "x"},
            {"sessionId": sid, "configId": "model", "value": "nope"},
            {"sessionId": sid, "configId": "model", "type": "boolean", "value": True},
        )
        for params in bad_config:
            assert error_code(await peer.call("session/set_config_option", params)) == -32602
        assert peer.violations() == []


@pytest.mark.anyio
async def test_list_close_delete(validator: SchemaValidator, tmp_path: Path) -> None:
    with anyio.fail_after(DEADLINE):
        async with connected(validator, tmp_path) as (_agent, peer, client):
            await client.initialize()
            assert await peer.request("session/list", {}) == {"sessions": []}
            a_dir, b_dir = tmp_path / "a", tmp_path / "b"
            a_dir.mkdir()
            b_dir.mkdir()
            a = await client.new_session(a_dir)
            b = await client.new_session(b_dir)
            await client.prompt(a, "title me")
            listed = (await peer.request("session/list", {}))["sessions"]
            assert [s["sessionId"] for s in listed] == [a, b]
            assert listed[0]["title"] == "title me" and listed[0]["cwd"] == str(a_dir)
            only_b = (await peer.request("session/list", {"cwd": str(b_dir)}))["sessions"]
            assert [s["sessionId"] for s in only_b] == [b]
            assert await peer.request("session/list", {"cwd": "/nonexistent/unique-dir"}) == {"sessions": []}
            assert (
                error_code(await peer.call("session/list", {"cursor": "definitely-not-a-cursor"})) == -32602
            )
            # Closing a session with a running turn cancels it first.
            rid = await peer.send_request(
                "session/prompt", {"sessionId": a, "prompt": [{"type": "text", "text": "acp:long"}]}
            )
            await peer.wait_for(is_update(a, "agent_message_chunk"))
            close = await peer.call("session/close", {"sessionId": a})
            prompt = await peer.wait_response(rid)
            assert prompt.result == {"stopReason": "cancelled"}
            assert close.result == {}
            assert peer.events.index(prompt) < peer.events.index(close)
            assert error_code(await peer.call("session/close", {"sessionId": a})) == -32002
            assert [s["sessionId"] for s in (await peer.request("session/list"))["sessions"]] == [b]
            assert await peer.request("session/delete", {"sessionId": b}) == {}
            assert await peer.request("session/delete", {"sessionId": b}) == {}
            assert await peer.request("session/list", {}) == {"sessions": []}
            assert peer.violations() == []


@pytest.mark.anyio
async def test_unknown_methods_and_garbage(validator: SchemaValidator, tmp_path: Path) -> None:
    with anyio.fail_after(DEADLINE):
        async with connected(validator, tmp_path) as (_agent, peer, client):
            # Requests before initialize are still answered.
            early = await peer.call("session/list", {})
            assert early.result == {"sessions": []}
            await client.initialize()
            for method in ("foo/bar", "_x.invalid/unknown", "logout"):
                resp = await peer.call(method, {}, validate=False)
                assert error_code(resp) == -32601, method
            await peer.notify("_x.invalid/event", {"a": 1})
            start = len(peer.events)
            await peer.send_raw(b"{bad json\n")
            parse = await peer.wait_for(lambda e: isinstance(e, Response) and e.id is None, start=start)
            assert isinstance(parse, Response) and parse.error["code"] == -32700
            await peer.send_raw(b'[{"jsonrpc":"2.0","method":"x"}]\n')
            invalid = await peer.wait_for(
                lambda e: isinstance(e, Response) and e.id is None, start=peer.events.index(parse) + 1
            )
            assert isinstance(invalid, Response) and invalid.error["code"] == -32600
            authenticate = await peer.call("authenticate", {"methodId": "nope"})
            assert error_code(authenticate) == -32602
            sid = await client.new_session()
            resp, _ = await client.prompt(sid, "still alive")
            assert resp.result == {"stopReason": "end_turn"}
            assert peer.violations() == []


@pytest.mark.anyio
async def test_frames_the_fuzzer_found_mishandled(validator: SchemaValidator, tmp_path: Path) -> None:
    """Regressions found by fuzzing: ``null``, ids of the wrong JSON type, ``"params": null``, surrogates."""
    with anyio.fail_after(DEADLINE):
        async with connected(validator, tmp_path) as (_agent, peer, client):
            await client.initialize()
            for line in (
                b"null\n",
                b'{"jsonrpc":"2.0","id":true,"method":"session/list","params":{}}\n',
                b'{"jsonrpc":"2.0","id":[1],"method":"session/list","params":{}}\n',
                b'{"jsonrpc":"2.0","id":{"a":1},"method":"session/list","params":{}}\n',
            ):
                start = len(peer.events)
                await peer.send_raw(line)
                answer = await peer.wait_for(lambda e: isinstance(e, Response), start=start)
                assert isinstance(answer, Response) and answer.id is None, line
                assert answer.error["code"] == -32600, line
            await peer.send_raw(b'{"jsonrpc":"2.0","id":"n","method":"session/list","params":null}\n')
            assert (await peer.wait_response("n", method="session/list")).error["code"] == -32602
            await peer.send_raw(
                b'{"jsonrpc":"2.0","id":"s","method":"session/close","params":{"sessionId":"a\\ud800"}}\n'
            )
            assert (await peer.wait_response("s", method="session/close")).is_error
            sid = await client.new_session()
            resp, _ = await client.prompt(sid, "still alive")
            assert resp.result == {"stopReason": "end_turn"}


@pytest.mark.anyio
async def test_cancel_right_behind_the_prompt_is_not_lost(validator: SchemaValidator, tmp_path: Path) -> None:
    """Found by stateful fuzzing: a cancel read before the prompt's handler ran was dropped."""
    async with in_session(validator, tmp_path) as (_agent, peer, client, sid):
        prompt = {
            "jsonrpc": "2.0",
            "id": "p",
            "method": "session/prompt",
            "params": {"sessionId": sid, "prompt": [{"type": "text", "text": "acp:long"}]},
        }
        cancel = {"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": sid}}
        peer.conn.send_request("session/prompt", prompt["params"], id="p")  # so the answer is paired
        await peer.send_raw(orjson.dumps(prompt) + b"\n" + orjson.dumps(cancel) + b"\n")  # one write
        resp = await peer.wait_response("p", method="session/prompt")
        assert resp.result == {"stopReason": "cancelled"}
        # An idle cancel (no prompt behind it) cancels nothing later.
        await peer.notify("session/cancel", {"sessionId": sid})
        resp, _ = await client.prompt(sid, "hello")
        assert resp.result == {"stopReason": "end_turn"}


@pytest.mark.anyio
async def test_subclass_breaks_one_behaviour(validator: SchemaValidator, tmp_path: Path) -> None:
    class IgnoresCancel(MockAgent):
        def stop_reason(self, turn: Turn, proposed: str) -> str:
            return "end_turn"

    agent = IgnoresCancel(validator=validator)
    async with in_session(validator, tmp_path, agent=agent) as (_agent, peer, _client, sid):
        rid = await peer.send_request(
            "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "acp:long"}]}
        )
        await peer.wait_for(is_update(sid, "agent_message_chunk"))
        await peer.notify("session/cancel", {"sessionId": sid})
        assert (await peer.wait_response(rid)).result == {"stopReason": "end_turn"}


@pytest.mark.anyio
async def test_eof_ends_serve(validator: SchemaValidator, tmp_path: Path) -> None:
    agent_end, client_end = memory_pair()
    agent = MockAgent(validator=validator)
    with anyio.fail_after(DEADLINE):
        async with anyio.create_task_group() as tg:
            tg.start_soon(agent.serve, agent_end)
            async with Peer(client_end, Role.CLIENT, validator=validator) as peer:
                client = FakeClient(peer, tmp_path)
                await client.initialize()
                sid = await client.new_session()
                # EOF in the middle of a long turn: the agent winds the turn down and exits.
                await peer.send_request(
                    "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "acp:long"}]}
                )
                await peer.wait_for(is_update(sid, "agent_message_chunk"))
                await client_end.close_output()
                assert await peer.wait_closed(10.0)
        # serve() returned (the task group finished) well before the 60 s long-turn deadline.


def _env(**extra: str) -> dict[str, str]:
    env = {"PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    env.update(extra)
    return env


@pytest.mark.anyio
async def test_subprocess_stdio(validator: SchemaValidator, tmp_path: Path) -> None:
    with anyio.fail_after(DEADLINE * 2):
        async with spawn([sys.executable, "-m", "mock_agent"], env=_env(), cwd=REPO) as transport:
            async with Peer(
                transport, Role.CLIENT, validator=validator, stderr_tail=lambda: list(transport.stderr_tail)
            ) as peer:
                client = FakeClient(peer, tmp_path.resolve())
                assert (await client.initialize())["protocolVersion"] == 1
                sid = await client.new_session()
                resp, _updates = await client.prompt(sid, "acp:tool")
                assert resp.result == {"stopReason": "end_turn"}
                assert (tmp_path / PROBE_FILE).read_text("utf-8") == PROBE_CONTENT
                await transport.close_output()
                await transport.process.wait()
                assert transport.returncode == 0
                assert peer.violations() == []


@pytest.mark.anyio
async def test_subprocess_without_schema(validator: SchemaValidator, tmp_path: Path) -> None:
    missing = str(tmp_path / "no-schema-here")
    with anyio.fail_after(DEADLINE * 2):
        async with spawn(
            [sys.executable, "-m", "mock_agent"], env=_env(ACP_CONFORMANCE_SCHEMA=missing), cwd=REPO
        ) as transport:
            async with Peer(transport, Role.CLIENT, validator=validator) as peer:
                client = FakeClient(peer, tmp_path.resolve())
                assert (await client.initialize())["protocolVersion"] == 1
                resp, _ = await client.prompt(await client.new_session(), "hi")
                assert resp.result == {"stopReason": "end_turn"}
                await transport.close_output()
                await transport.process.wait()
                assert transport.returncode == 0
                assert any("WITHOUT schema validation" in line for line in transport.stderr_tail)
                assert peer.violations() == []


def test_cli_rejects_bad_options(capsys: pytest.CaptureFixture[str]) -> None:
    from mock_agent import build_parser

    with pytest.raises(SystemExit) as exc:
        build_parser().parse_args(["--log-level", "loud"])
    assert exc.value.code == 2
    assert "--log-level" in capsys.readouterr().err
