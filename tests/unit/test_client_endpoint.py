"""ClientEndpoint: the fs sandbox, capability gating, virtual terminals, permission policies."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from acp_conformance.core.connection import Role
from acp_conformance.core.events import Response
from acp_conformance.endpoints.client import (
    ClientCapabilities,
    ClientEndpoint,
    PermissionPolicy,
    Sandbox,
    VirtualTerminals,
)
from acp_conformance.peer import HandlerError, Peer
from acp_conformance.schema.validator import SchemaValidator
from acp_conformance.transport import memory_pair

SID = "sess-1"
INVALID_PARAMS, RESOURCE_NOT_FOUND, METHOD_NOT_FOUND = -32602, -32002, -32601


def tree(path: Path) -> dict[str, bytes | None]:
    """Every entry under ``path`` (files with content), to prove nothing changed."""
    out: dict[str, bytes | None] = {}
    for dirpath, dirnames, filenames in os.walk(path):
        for name in dirnames + filenames:
            p = Path(dirpath, name)
            out[str(p.relative_to(path))] = p.read_bytes() if p.is_file() and not p.is_symlink() else None
    return out


@pytest.fixture
def layout(tmp_path: Path) -> tuple[Path, Path]:
    """(sandbox root, a sibling directory outside it holding a secret)."""
    root = tmp_path / "root"
    outside = tmp_path / "root-evil"  # shares the root's name as a string prefix
    root.mkdir()
    outside.mkdir()
    (outside / "secret.txt").write_text("top secret\n")
    (root / "notes.txt").write_text("l1\nl2\nl3\nl4\n")
    (root / "link-dir").symlink_to(outside, target_is_directory=True)
    (root / "link-file").symlink_to(outside / "secret.txt")
    (root / "dangling").symlink_to(outside / "created-through-link.txt")
    (root / "inner-link").symlink_to(root / "notes.txt")
    return root, outside


# ------------------------------------------------------------------- sandbox
def escapes(root: Path, outside: Path) -> list[str]:
    return [
        f"{root}/../root-evil/secret.txt",
        f"{root}/sub/../../root-evil/secret.txt",
        str(outside / "secret.txt"),
        "/etc/passwd",
        f"{root}/link-dir/secret.txt",
        f"{root}/link-file",
        f"{root}/dangling",
        f"{root}/link-dir/new.txt",
    ]


def test_sandbox_refuses_every_escape_and_writes_nothing_outside(layout: tuple[Path, Path]) -> None:
    root, outside = layout
    box = Sandbox(root)
    before = tree(root.parent)
    for path in escapes(root, outside):
        for op in (lambda p: box.read(p), lambda p: box.write(p, "pwned")):
            with pytest.raises(HandlerError) as info:
                op(path)
            assert info.value.code == INVALID_PARAMS and "outside the session sandbox" in info.value.message, path
    assert tree(root.parent) == before
    assert box.writes == [] and box.reads == []
    assert not Path("/etc/pwned").exists()


@pytest.mark.parametrize("path", ["notes.txt", "./notes.txt", "", "root/notes.txt", None, 42])
def test_sandbox_refuses_non_absolute_paths(layout: tuple[Path, Path], path: Any) -> None:
    root, _ = layout
    with pytest.raises(HandlerError) as info:
        Sandbox(root).write(path, "x")
    assert info.value.code == INVALID_PARAMS
    assert not (root / "root").exists() and (root / "notes.txt").read_text() == "l1\nl2\nl3\nl4\n"


def test_sandbox_refuses_nul_bytes(layout: tuple[Path, Path]) -> None:
    root, _ = layout
    with pytest.raises(HandlerError, match="NUL"):
        Sandbox(root).read(f"{root}/notes.txt\x00.png")


def test_sandbox_allows_paths_inside(layout: tuple[Path, Path]) -> None:
    root, _ = layout
    box = Sandbox(root)
    assert box.read(f"{root}/inner-link") == "l1\nl2\nl3\nl4\n"
    assert box.read(f"{root}/sub/../notes.txt") == "l1\nl2\nl3\nl4\n"
    box.write(f"{root}/new/dir/file.txt", "héllo")
    assert (root / "new" / "dir" / "file.txt").read_text("utf-8") == "héllo"
    assert box.writes == [(str(root / "new" / "dir" / "file.txt"), "héllo")]


@pytest.mark.parametrize(
    ("line", "limit", "expected"),
    [
        (None, None, "l1\nl2\nl3\nl4\n"),
        (2, 2, "l2\nl3\n"),
        (1, 1, "l1\n"),
        (None, 3, "l1\nl2\nl3\n"),
        (3, None, "l3\nl4\n"),
        (4, 10, "l4\n"),
        (9, 1, ""),
        (2, 0, ""),
    ],
)
def test_read_with_line_and_limit(layout: tuple[Path, Path], line: Any, limit: Any, expected: str) -> None:
    root, _ = layout
    assert Sandbox(root).read(f"{root}/notes.txt", line, limit) == expected


def test_read_line_numbers_count_only_newlines(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("a\x0cb\nc\u2028d\ne\n", "utf-8")
    assert Sandbox(tmp_path).read(f"{tmp_path}/a.py", 2, 1) == "c\u2028d\n"


def test_missing_file_is_resource_not_found(layout: tuple[Path, Path]) -> None:
    root, _ = layout
    with pytest.raises(HandlerError) as info:
        Sandbox(root).read(f"{root}/missing.txt")
    assert info.value.code == RESOURCE_NOT_FOUND
    assert info.value.data == {"uri": f"file://{root}/missing.txt"}


# ------------------------------------------------------------------ endpoint
@asynccontextmanager
async def endpoint(
    validator: SchemaValidator | None,
    root: Path | None = None,
    **kwargs: Any,
) -> AsyncIterator[tuple[ClientEndpoint, Peer]]:
    """A ClientEndpoint and the agent-side Peer that drives it."""
    agent_end, client_end = memory_pair()
    async with (
        Peer(client_end, Role.CLIENT, validator=validator, timeout=5) as client,
        Peer(agent_end, Role.AGENT, timeout=5) as agent,
    ):
        ep = ClientEndpoint(client, sandbox=Sandbox(root) if root else None, **kwargs)
        yield ep, agent


def error_code(resp: Response) -> int:
    assert resp.is_error, resp.result
    return int(resp.error["code"])


@pytest.mark.anyio
async def test_fs_round_trip_through_the_endpoint(schema_validator: SchemaValidator, layout: tuple[Path, Path]) -> None:
    root, outside = layout
    before_outside = tree(outside)
    with anyio.fail_after(10):
        async with endpoint(schema_validator, root) as (ep, agent):
            read = {"sessionId": SID, "path": f"{root}/notes.txt", "line": 2, "limit": 2}
            assert await agent.request("fs/read_text_file", read) == {"content": "l2\nl3\n"}
            missing = await agent.call("fs/read_text_file", {"sessionId": SID, "path": f"{root}/nope.txt"})
            assert error_code(missing) == RESOURCE_NOT_FOUND
            write = {"sessionId": SID, "path": f"{root}/out/a.txt", "content": "new\n"}
            assert await agent.request("fs/write_text_file", write) == {}
            assert (root / "out" / "a.txt").read_text() == "new\n"
            for path in escapes(root, outside):
                resp = await agent.call("fs/write_text_file", {"sessionId": SID, "path": path, "content": "pwned"})
                assert error_code(resp) == INVALID_PARAMS
                resp = await agent.call("fs/read_text_file", {"sessionId": SID, "path": path})
                assert error_code(resp) == INVALID_PARAMS
                assert b"top secret" not in resp.raw
            assert ep.peer.violations() == []
    assert tree(outside) == before_outside


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("method", "params", "clause"),
    [
        ("fs/read_text_file", {"sessionId": SID, "path": "/tmp/x"}, "fs.read.gated"),
        ("fs/write_text_file", {"sessionId": SID, "path": "/tmp/x", "content": "x"}, "fs.write.gated"),
    ],
)
async def test_fs_without_capability_is_refused_and_recorded(
    tmp_path: Path, method: str, params: dict[str, Any], clause: str
) -> None:
    with anyio.fail_after(10):
        async with endpoint(None, tmp_path, capabilities=ClientCapabilities.none()) as (ep, agent):
            resp = await agent.call(method, params)
            assert error_code(resp) == METHOD_NOT_FOUND
            assert [v.clause_id for v in ep.peer.violations()] == [clause]
    assert list(tmp_path.iterdir()) == []


@pytest.mark.anyio
async def test_relative_path_through_the_endpoint_is_refused_and_recorded(tmp_path: Path) -> None:
    with anyio.fail_after(10):
        async with endpoint(None, tmp_path) as (ep, agent):
            resp = await agent.call("fs/read_text_file", {"sessionId": SID, "path": "notes.txt"})
            assert error_code(resp) == INVALID_PARAMS
            assert [v.clause_id for v in ep.peer.violations()] == ["fs.read.shape"]


@pytest.mark.anyio
async def test_writing_to_a_directory_is_an_error_not_a_crash(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    with anyio.fail_after(10):
        async with endpoint(None, tmp_path) as (_ep, agent):
            resp = await agent.call("fs/write_text_file", {"sessionId": SID, "path": f"{tmp_path}/sub", "content": "x"})
            assert resp.is_error


# ----------------------------------------------------------------- terminals
@pytest.mark.anyio
async def test_terminal_lifecycle_and_release(schema_validator: SchemaValidator) -> None:
    terms = VirtualTerminals({"pytest": ("é" * 100 + "PASSED\n", 1)})
    with anyio.fail_after(10):
        async with endpoint(schema_validator, terminals=terms) as (ep, agent):
            created = await agent.request(
                "terminal/create", {"sessionId": SID, "command": "pytest", "args": ["-q"], "outputByteLimit": 11}
            )
            tid = created["terminalId"]
            ref = {"sessionId": SID, "terminalId": tid}
            out = await agent.request("terminal/output", ref)
            assert out == {"output": "ééPASSED\n", "truncated": True, "exitStatus": {"exitCode": 1, "signal": None}}
            assert await agent.request("terminal/wait_for_exit", ref) == {"exitCode": 1, "signal": None}
            echo = await agent.request("terminal/create", {"sessionId": SID, "command": "echo", "args": ["a", "b"]})
            assert (await agent.request("terminal/output", {"sessionId": SID, **echo}))["output"] == "a b\n"
            assert await agent.request("terminal/release", ref) == {}
            assert ep.terminals.unreleased == [echo["terminalId"]]
            for method in ("terminal/output", "terminal/wait_for_exit", "terminal/kill", "terminal/release"):
                assert error_code(await agent.call(method, ref)) == INVALID_PARAMS, method
            assert error_code(await agent.call("terminal/output", {"sessionId": SID, "terminalId": "term-99"})) == (
                INVALID_PARAMS
            )


def test_truncate_examples() -> None:
    assert VirtualTerminals.truncate("abc", None) == ("abc", False)
    assert VirtualTerminals.truncate("abc", 3) == ("abc", False)
    assert VirtualTerminals.truncate("abcd", 3) == ("bcd", True)
    assert VirtualTerminals.truncate("a😀", 3) == ("", True)  # the 4-byte emoji does not fit
    assert VirtualTerminals.truncate("a😀", 4) == ("😀", True)
    assert VirtualTerminals.truncate("xyz", 0) == ("", True)


@settings(max_examples=300, deadline=None, derandomize=True, database=None)
@given(text=st.text(), limit=st.integers(min_value=0, max_value=64))
def test_truncate_keeps_a_whole_character_tail_within_the_limit(text: str, limit: int) -> None:
    out, truncated = VirtualTerminals.truncate(text, limit)
    size = len(text.encode("utf-8"))
    assert truncated == (size > limit)
    assert text.endswith(out)  # a tail, made of whole characters (it is a str)
    assert len(out.encode("utf-8")) <= limit or not truncated
    if truncated:
        # Only the partial character at the cut was dropped (at most 3 bytes of it).
        assert len(out.encode("utf-8")) > limit - 4
    else:
        assert out == text


# ---------------------------------------------------------------- permission
OPTIONS = [
    {"optionId": "a1", "name": "Allow", "kind": "allow_once"},
    {"optionId": "a2", "name": "Always", "kind": "allow_always"},
    {"optionId": "r1", "name": "Reject", "kind": "reject_once"},
    {"optionId": "r2", "name": "Never", "kind": "reject_always"},
]


@pytest.mark.parametrize(
    ("spec", "options", "expected"),
    [
        ("allow_once", OPTIONS, "a1"),
        ("allow_always", OPTIONS, "a2"),
        ("reject_once", OPTIONS, "r1"),
        ("reject_always", OPTIONS, "r2"),
        ("allow", OPTIONS[::-1], "a1"),
        ("reject", OPTIONS[::-1], "r1"),
        ("allow_once", [OPTIONS[2], OPTIONS[1]], "a2"),  # same-family fallback
        ("reject_always", [OPTIONS[0], OPTIONS[2]], "r1"),
        ("allow", [OPTIONS[2], OPTIONS[3]], None),  # nothing acceptable: cancelled
        ("allow_once", [{"name": "broken", "kind": "allow_once"}, {"optionId": 5, "kind": "allow_once"}], None),
        ("option:custom", OPTIONS, "custom"),
    ],
)
def test_permission_policy_choices(spec: str, options: list[Any], expected: str | None) -> None:
    outcome = PermissionPolicy(spec).choose(options)
    if expected is None:
        assert outcome == {"outcome": "cancelled"}
    else:
        assert outcome == {"outcome": "selected", "optionId": expected}


def test_permission_policy_special_kinds() -> None:
    assert PermissionPolicy("cancelled").choose(OPTIONS) == {"outcome": "cancelled"}
    assert PermissionPolicy("never").choose(OPTIONS) is None
    assert PermissionPolicy("hold").choose(OPTIONS) is None
    with pytest.raises(ValueError, match="unknown permission policy"):
        PermissionPolicy("yolo")


def permission_params(tool: str = "call_1") -> dict[str, Any]:
    return {"sessionId": SID, "toolCall": {"toolCallId": tool, "title": "Edit"}, "options": OPTIONS}


@pytest.mark.anyio
@pytest.mark.parametrize(("policy", "option"), [("allow_once", "a1"), ("reject_always", "r2")])
async def test_permission_answered_by_policy(schema_validator: SchemaValidator, policy: str, option: str) -> None:
    with anyio.fail_after(10):
        async with endpoint(schema_validator, permission=policy) as (ep, agent):
            result = await agent.request("session/request_permission", permission_params())
            assert result == {"outcome": {"outcome": "selected", "optionId": option}}
            (call,) = ep.permission_calls
            assert call.answered.is_set() and call.tool_call_id == "call_1" and call.session_id == SID


@pytest.mark.anyio
async def test_held_permission_is_answered_by_the_test_and_cancel_answers_the_rest(
    schema_validator: SchemaValidator,
) -> None:
    with anyio.fail_after(10):
        async with endpoint(schema_validator, permission="hold") as (ep, agent):
            first = await agent.send_request("session/request_permission", permission_params("t1"))
            second = await agent.send_request("session/request_permission", permission_params("t2"))
            call = await ep.wait_permission(index=0)
            await ep.wait_permission(index=1)
            await ep.answer_permission(call, {"outcome": "selected", "optionId": "a2"})
            assert (await agent.wait_response(first)).result == {"outcome": {"outcome": "selected", "optionId": "a2"}}
            await ep.cancel(SID)
            assert (await agent.wait_response(second)).result == {"outcome": {"outcome": "cancelled"}}
            # Requests arriving after the cancel are answered cancelled at once.
            late = await agent.request("session/request_permission", permission_params("t3"))
            assert late == {"outcome": {"outcome": "cancelled"}}
            assert ep.peer.conn.pending_incoming == []


@pytest.mark.anyio
async def test_a_flooded_turn_says_how_many_events_the_bounded_log_dropped(tmp_path: Path) -> None:
    """``Turn.updates`` holds what the peer's bounded event log kept; ``Turn.dropped`` says when
    that is not everything, so a caller counting updates is never silently short."""
    from acp_conformance.core.events import EventLog
    from mock_agent import MockAgent, Turn

    class Streamer(MockAgent):
        async def prompt_turn(self, turn: Turn) -> str:
            if "stream" not in turn.text:
                return await super().prompt_turn(turn)
            message_id = turn.session.next_message_id("agent")
            for n in range(60):
                await self.emit(turn, self.message_chunk("agent_message_chunk", f"chunk {n}", message_id))
            return "end_turn"

    client_end, agent_end = memory_pair()
    async with anyio.create_task_group() as tg:
        tg.start_soon(Streamer().serve, agent_end)
        async with Peer(client_end, Role.CLIENT, timeout=10) as peer:
            peer.events = EventLog(head=5, tail=10, structural=10)
            client = ClientEndpoint(peer, capabilities=ClientCapabilities.none(), sandbox=Sandbox(str(tmp_path)))
            await client.initialize()
            sid = await client.new_session(str(tmp_path))
            small = await client.prompt(sid, "hello")
            assert small.dropped == 0
            flooded = await client.prompt(sid, "stream")
            assert flooded.stop_reason == "end_turn"
            assert flooded.dropped > 0
            assert len(flooded.updates) + flooded.dropped == 60
            await client_end.close_output()
        tg.cancel_scope.cancel()


@pytest.mark.anyio
@pytest.mark.parametrize("next_turn", [False, True])
async def test_a_cancel_ends_with_its_turn(schema_validator: SchemaValidator, next_turn: bool) -> None:
    """Per-turn state ends with its turn: after a cancelled turn was answered (and when a new
    prompt starts), permission requests are answered by the policy again, not ``cancelled``
    (the suite once answered later turns' requests cancelled without having cancelled them)."""
    from acp_conformance.peer import NO_ANSWER

    with anyio.fail_after(10):
        async with endpoint(schema_validator, permission="allow_once") as (ep, agent):
            prompts: list[Any] = []
            arrived = anyio.Event()

            async def on_prompt(req: Any) -> Any:
                prompts.append(req)
                arrived.set()
                return NO_ANSWER

            agent.handlers["session/prompt"] = on_prompt
            rid, _ = await ep.send_prompt(SID, "first")
            await ep.cancel(SID)
            during = await agent.request("session/request_permission", permission_params("t1"))
            assert during == {"outcome": {"outcome": "cancelled"}}  # the cancelled turn still runs
            await arrived.wait()
            await agent.respond(prompts[0].id, {"stopReason": "cancelled"}, method="session/prompt")
            await ep.peer.wait_response(rid, method="session/prompt")
            if next_turn:
                await ep.send_prompt(SID, "second")
            after = await agent.request("session/request_permission", permission_params("t2"))
            assert after == {"outcome": {"outcome": "selected", "optionId": "a1"}}
            assert not ep.is_cancelled(SID)


@pytest.mark.anyio
async def test_a_turn_ends_at_its_response_even_when_output_follows_in_the_same_read(tmp_path: Path) -> None:
    """An agent writes its prompt answer and one more chunk in one write: we read both at once,
    but the chunk is not the turn's (it comes after the answer: prompt.updates.before-response)."""
    agent_end, client_end = memory_pair()
    async with Peer(client_end, Role.CLIENT, timeout=5) as peer:
        client = ClientEndpoint(peer, capabilities=ClientCapabilities.none(), sandbox=Sandbox(tmp_path))
        rid, start = await client.send_prompt(SID, "hello")
        request = await agent_end.receive()
        assert b'"session/prompt"' in request

        def update(text: str) -> bytes:
            chunk = {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}}
            return (
                b'{"jsonrpc":"2.0","method":"session/update","params":'
                + orjson.dumps({"sessionId": SID, "update": chunk})
                + b"}\n"
            )

        answer = b'{"jsonrpc":"2.0","id":%d,"result":{"stopReason":"end_turn"}}\n' % rid
        await agent_end.send(update("before") + answer + update("after"))
        turn = await client.finish_turn(SID, rid, start)
        assert [u.params["update"]["content"]["text"] for u in turn.updates] == ["before"]
        late = [e for e in peer.events[turn.end_event :] if getattr(e, "method", None) == "session/update"]
        assert [e.params["update"]["content"]["text"] for e in late] == ["after"]
