"""A small scripted ACP client for the reference agent's self-tests, and the helpers they share.

A client-role ``Peer`` that validates every frame, driven by hand; the agent runs in-process over
``memory_pair()``. Used by ``test_mock_agent.py`` and ``test_mock_agent_sessions.py``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio

from acp_conformance.core.connection import Role
from acp_conformance.core.events import Event, Notification, Request, Response
from acp_conformance.peer import HandlerError, Peer
from acp_conformance.schema.validator import SchemaValidator
from acp_conformance.transport import memory_pair
from mock_agent import MockAgent

REPO = Path(__file__).resolve().parents[2]
DEADLINE = 15.0


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

    async def prompt(self, sid: str, text: str | list[dict[str, Any]]) -> tuple[Response, list[dict[str, Any]]]:
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
