"""Self-tests of the reference agent (``mock_agent``): sessions (load, modes, config, list, close,
delete), robustness, subclassing, EOF and the real subprocess. The prompt-turn tests are in
``test_mock_agent.py``; the scripted client both use is ``fake_acp_client.py``.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import anyio
import orjson
import pytest

from acp_conformance.core.connection import Role
from acp_conformance.core.events import Response
from acp_conformance.peer import Peer
from acp_conformance.schema.validator import SchemaValidator
from acp_conformance.transport import memory_pair, spawn
from mock_agent import PROBE_CONTENT, PROBE_FILE, MockAgent, Turn
from tests.unit.fake_acp_client import (
    DEADLINE,
    REPO,
    FakeClient,
    connected,
    error_code,
    in_session,
    is_update,
    updates_between,
)


@pytest.fixture
def validator(schema_validator: SchemaValidator) -> SchemaValidator:
    return schema_validator


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
        missing = await peer.call("session/load", {"sessionId": "nope", "cwd": str(tmp_path), "mcpServers": []})
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
        result = await peer.request("session/set_config_option", {"sessionId": sid, "configId": "mode", "value": "ask"})
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
            assert error_code(await peer.call("session/list", {"cursor": "definitely-not-a-cursor"})) == -32602
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
