"""Shared pieces of the broken test agents (see broken_agents.py)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from acp_conformance.core import jsonrpc
from acp_conformance.peer import Peer
from acp_conformance.transport.base import Transport
from mock_agent import MockAgent

__all__ = ["Breakage", "Filtered", "Json", "frame_filter"]

Json = dict[str, Any]


def frame_filter(agent: MockAgent, fn: Callable[[dict[str, Any]], Any]) -> None:
    """Rewrite every outgoing message with ``fn`` (returning a value to send,
    bytes to send verbatim, or None to drop)."""

    def wire(data: bytes) -> bytes:
        # jsonrpc, not orjson: our own frames may carry what orjson refuses (lone surrogates, big ints).
        msg = jsonrpc.decode(data.rstrip(b"\n"))[0]
        out = fn(msg)
        if out is None:
            return b""
        if isinstance(out, bytes):
            return out
        return jsonrpc.dumps(out) + b"\n"

    agent.peer.wire_filter = wire


class Filtered(MockAgent):
    """Base for agents that damage their frames on the wire: override ``mangle``."""

    validate_outbound = False

    def mangle(self, msg: dict[str, Any]) -> Any:
        return msg

    def make_peer(self, transport: Transport) -> Peer:
        peer = super().make_peer(transport)
        self._peer = peer
        frame_filter(self, self.mangle)
        return peer


@dataclass(frozen=True)
class Breakage:
    """One broken agent and what the suite must say about it."""

    agent: type[MockAgent]
    breaks: str
    status: str = "FAIL"
    also: frozenset[str] = field(default_factory=frozenset)
    why_also: str = ""
    #: Extra suite options the proof passes (e.g. ``--acp-auth-method`` for an agent requiring auth).
    suite_args: tuple[str, ...] = ()
