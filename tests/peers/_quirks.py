"""What the test peers share: the quirks the spec allows (``conforming_agents.py``,
``conforming_clients.py``), and how a peer answers extension requests it has no handler for
(``answer_extensions``, broken and conforming peers alike)."""

from __future__ import annotations

import itertools
from collections.abc import Awaitable, Callable
from typing import Any

import anyio

from acp_conformance.core.events import Request
from acp_conformance.peer import HandlerError, Peer
from acp_conformance.transport.base import Transport

#: Extension data the quirky peers attach: what it holds must change nothing (extensibility.mdx).
META = {"example.com/trace": {"span": "0f1e2d3c", "sampled": True}}


def answer_extensions(peer: Peer, answer: Callable[[Request], Awaitable[Any]]) -> None:
    """Serve every extension (``_``) request ``peer`` has no handler for with ``answer``, and any
    other method it does not implement with -32601 (Method not found), as the mocks do."""

    async def unknown(req: Request) -> Any:
        if req.method.startswith("_"):
            return await answer(req)
        raise HandlerError(-32601, f"method not found: {req.method}")

    peer.default_handler = unknown


class StringIds(Peer):
    """Names its own requests with strings (``id_prefix`` and a number) instead of numbers: JSON-RPC
    allows a String or a Number (schema ``RequestId``)."""

    id_prefix = "req-"
    _names = itertools.count(1)

    async def send_request(self, method: str, params: Any = None, *, id: Any = None, validate: bool = True) -> Any:
        if id is None:
            id = f"{self.id_prefix}{next(self._names)}"
        return await super().send_request(method, params, id=id, validate=validate)


class MetaOnSent(Peer):
    """Puts ``_meta`` on the params of every request and notification it sends, and on an update."""

    async def notify(self, method: str, params: Any = None, *, validate: bool = True) -> None:
        if isinstance(params, dict):
            params = {**params, "_meta": META}
            if isinstance(params.get("update"), dict):
                params["update"] = {**params["update"], "_meta": META}
        await super().notify(method, params, validate=validate)

    async def send_request(self, method: str, params: Any = None, *, id: Any = None, validate: bool = True) -> Any:
        if isinstance(params, dict):
            params = {**params, "_meta": META}
        return await super().send_request(method, params, id=id, validate=validate)


def with_meta(handler: Callable[[Request], Awaitable[Any]]) -> Callable[[Request], Awaitable[Any]]:
    """``handler``, its result (when an object) carrying ``_meta``."""

    async def answer(req: Request) -> Any:
        result = await handler(req)
        return {**result, "_meta": META} if isinstance(result, dict) else result

    return answer


class SplitSends:
    """A transport whose every write goes out in three pieces, 2 ms apart: a reader sees partial
    lines, which newline-delimited framing allows (transports.mdx: messages are delimited by
    newlines, not by writes)."""

    def __init__(self, inner: Transport) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def send(self, data: bytes) -> None:
        a, b = len(data) // 3, 2 * len(data) // 3
        for piece in (data[:a], data[a:b], data[b:]):
            if piece:
                await self._inner.send(piece)
                await anyio.sleep(0.002)
