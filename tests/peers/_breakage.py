"""Shared pieces of the broken test peers (see broken_agents.py and broken_clients.py)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from acp_conformance.core import jsonrpc
from acp_conformance.peer import Peer, PeerError
from acp_conformance.transport.base import Transport
from mock_agent import MockAgent
from mock_client import MockClient

__all__ = ["Breakage", "Filtered", "FilteredClient", "Json", "frame_filter", "own_requests_answered"]

Json = dict[str, Any]


async def own_requests_answered(peer: Peer) -> None:
    """Return once no request of ours to ``peer`` is pending: how a peer that serves one direction
    at a time (jsonrpc.bidirectional broken, either role) waits before it serves anything."""
    while peer.conn.pending_outgoing:
        for rid, method in peer.conn.pending_outgoing:
            with contextlib.suppress(PeerError):
                await peer.wait_response(rid, method=method, flag=False)


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


class FilteredClient(MockClient):
    """Base for clients that damage their frames on the wire: override ``mangle``
    (return a message to send, bytes to send verbatim, or None to drop)."""

    def mangle(self, msg: Json) -> Any:
        return msg

    def make_peer(self, transport: Transport) -> Peer:
        peer = super().make_peer(transport)

        def wire(data: bytes) -> bytes:
            # jsonrpc, not orjson: our answers may carry what orjson refuses (a fuzz campaign's
            # integer ids beyond 64 bits), and a filter that drops them breaks clauses it does not name.
            out = self.mangle(jsonrpc.decode(data.rstrip(b"\n"))[0])
            if out is None:
                return b""
            if isinstance(out, bytes):
                return out
            return jsonrpc.dumps(out) + b"\n"

        peer.wire_filter = wire
        return peer


#: The class of a broken peer: an agent or a client.
P = TypeVar("P", bound=MockAgent | MockClient)

#: Fields only the client proofs (tests/e2e/test_broken_clients.py) read.
_CLIENT_ONLY = ("scenario", "prompts_on_stdin")
#: Fields only the agent proofs (tests/e2e/test_broken_agents.py) read.
_AGENT_ONLY: tuple[str, ...] = ()


@dataclass(frozen=True)
class Breakage(Generic[P]):
    """One broken peer (an agent or a client) and what the suite must say about it.

    ``peer`` is the reference agent or client with one defect; the suite must give ``breaks`` the
    status ``status``, and flag nothing else but the collateral ``also`` (why: ``why_also``).
    ``status="PASS"``: no defect, a conforming peer unusual in a way the check of ``breaks`` must
    not take for one (a slow answer, say): nothing but ``also`` may be flagged."""

    peer: type[P]
    breaks: str
    status: str = "FAIL"
    also: frozenset[str] = field(default_factory=frozenset)
    why_also: str = ""
    #: Extra suite options the proof passes (e.g. ``--acp-auth-method`` for an agent requiring auth).
    suite_args: tuple[str, ...] = ()
    #: Clauses whose tests a targeted proof runs as well, though the breakage must give them no finding:
    #: the proof that a rule keeping a FAIL away holds (a full proof runs them anyway).
    quiet: frozenset[str] = field(default_factory=frozenset)
    #: The one test that finds the breakage (a fuzz campaign, or a scripted test where only one
    #: does): targeted proofs run only it, with the campaigns' example budget.
    fuzz: str = ""
    #: Words the finding on ``breaks`` must carry in one test's message: which of the places that
    #: judge the clause gave it, where the breakage exists to show that one of them can.
    says: str = ""
    #: Clients: a file of the scenario library (scenarios/client/, by its id) whose suite test must give
    #: ``breaks`` this status too: the proof that the client suite runs the library and the file catches it.
    scenario: str = ""
    #: Clients: driven with prompts on stdin (a profile with prompt.via = "stdin"), for checks needing a
    #: second prompt.
    prompts_on_stdin: bool = False

    def __post_init__(self) -> None:
        # The other role's proofs would silently ignore them.
        client = issubclass(self.peer, MockClient)
        given = [name for name in (_AGENT_ONLY if client else _CLIENT_ONLY) if getattr(self, name)]
        if given:
            raise TypeError(
                f"{self.peer.__name__}: {', '.join(given)} only apply to broken {'agents' if client else 'clients'}"
            )
