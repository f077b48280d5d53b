"""Agents that take their time over a frame the spec forbids sending, for the fuzz campaigns'
``--acp-fuzz-patience`` (``tests/e2e/test_fuzz_patience.py``).

``python tests/peers/patience_agents.py NAME [mock_agent options]`` runs one.  Each is the
reference agent, apart from requests whose strings escape a lone UTF-16 surrogate (no valid ACP
message: JSON text is Unicode, RFC 8259 § 8.2), which the reference agent reads leniently and
answers at once:

- ``silent``: drops them without a word (simpler than zed codex-acp 0.16.0, whose parser rejects
  the line and which then writes an error without an id, never an answer under the request's id);
- ``aside``: drops them too, but writes one extension notification right after each (a frame of
  its own, as a fresh session's ``available_commands_update`` may come just after our frame);
- ``idless``: answers them at once as zed codex-acp 0.16.0 does, with a -32700 error that has no
  ``id`` member (JSON-RPC wants the id, or null where it could not be read) and the line in ``data``;
- ``stray-idless``: before each request it can parse with an unusual id (a string, a negative number:
  the odd-ids campaign's), writes an error without an id, as a late answer to something earlier
  would come, and serves the request 0.3 s later: that error is no answer to the frame;
- ``late``: serves each ACP request with an unusual id 1.5 s late (past a 1 s ``--acp-timeout``),
  extension requests at once (the campaigns' probe among them: were it late under a string id
  too, the campaigns would leave string-id frames to ``jsonrpc.id-types``' own test);
- ``slow``: answers them 1.5 s late, saying meanwhile, in an extension notification every 0.3 s
  (a client ignores what it does not know, extensibility.mdx), that it is working: a slow peer,
  not a deaf one.
"""

from __future__ import annotations

import sys
from pathlib import Path

if __name__ == "__main__":  # run as a file: make the repository root importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import contextlib
import json

import anyio
import orjson

from acp_conformance.core.events import Event, Request
from acp_conformance.errors import PeerExited
from acp_conformance.peer import Peer
from acp_conformance.transport.base import Transport
from mock_agent import AgentPeer, MockAgent
from mock_agent.cli import run


def lone_surrogates(data: bytes) -> bool:
    """JSON our strict decoder refuses (orjson) and a lenient one reads (the standard library's, on
    the text as UTF-8, which lets an escaped lone surrogate through): the line's defect is such a string."""
    try:
        orjson.loads(data)
    except orjson.JSONDecodeError:
        try:
            json.loads(data.decode("utf-8"))
        except (ValueError, RecursionError):
            return False
        return True
    return False


class _SilentPeer(AgentPeer):
    def _dispatch(self, events: list[Event]) -> None:
        super()._dispatch([e for e in events if not (isinstance(e, Request) and lone_surrogates(e.raw))])


class _AsidePeer(AgentPeer):
    def _dispatch(self, events: list[Event]) -> None:
        kept = [e for e in events if not (isinstance(e, Request) and lone_surrogates(e.raw))]
        for _ in range(len(events) - len(kept)):
            self.start_soon(self._aside)
        super()._dispatch(kept)

    async def _aside(self) -> None:
        with contextlib.suppress(PeerExited):
            await self.notify("_mock_agent/aside", {})


class _IdlessPeer(AgentPeer):
    def _dispatch(self, events: list[Event]) -> None:
        bad = [e for e in events if isinstance(e, Request) and lone_surrogates(e.raw)]
        for ev in bad:
            self.start_soon(self._reject, ev)
        super()._dispatch([e for e in events if e not in bad])

    async def _reject(self, ev: Event) -> None:
        line = ev.raw.decode("utf-8", "replace") if isinstance(ev, Request) else ""
        error = {"code": -32700, "message": "Parse error", "data": {"line": line}}
        with contextlib.suppress(PeerExited):
            await self.send_raw(orjson.dumps({"jsonrpc": "2.0", "error": error}) + b"\n")


def unusual_id(ev: Event) -> bool:
    """A request we can parse under an id our harness never uses (a string, a negative number)."""
    unusual = isinstance(ev, Request) and (isinstance(ev.id, str) or (isinstance(ev.id, int) and ev.id < 0))
    return unusual and not lone_surrogates(ev.raw)


class _HoldingPeer(AgentPeer):
    """Serves the requests ``holds`` picks only once ``before_serving`` returns (in a task of its
    own: the reader goes on), the others at once."""

    def holds(self, ev: Event) -> bool:
        raise NotImplementedError

    async def before_serving(self) -> None:
        raise NotImplementedError

    def _dispatch(self, events: list[Event]) -> None:
        held = [e for e in events if self.holds(e)]
        if held:
            self.start_soon(self._serve_later, held)
            events = [e for e in events if e not in held]
        super()._dispatch(events)

    async def _serve_later(self, events: list[Event]) -> None:
        with contextlib.suppress(PeerExited):
            await self.before_serving()
            super()._dispatch(events)


class _StrayIdlessPeer(_HoldingPeer):
    pause = 0.3

    def holds(self, ev: Event) -> bool:
        return unusual_id(ev)

    async def before_serving(self) -> None:
        error = {"code": -32603, "message": "a late error for something earlier"}
        await self.send_raw(orjson.dumps({"jsonrpc": "2.0", "error": error}) + b"\n")
        # The agent's own pace: the answer comes after the stray error, not with it.
        await anyio.sleep(self.pause)


class _LatePeer(_HoldingPeer):
    delay = 1.5

    def holds(self, ev: Event) -> bool:
        return unusual_id(ev) and isinstance(ev, Request) and not ev.method.startswith("_")

    async def before_serving(self) -> None:
        await anyio.sleep(self.delay)  # the agent's own pace: an answer past the deadline


class _SlowPeer(_HoldingPeer):
    beats = 5
    beat = 0.3

    def holds(self, ev: Event) -> bool:
        return isinstance(ev, Request) and lone_surrogates(ev.raw)

    async def before_serving(self) -> None:
        for _ in range(self.beats):
            # The agent's own pace (a slow parser, a busy loop), not a synchronisation.
            await anyio.sleep(self.beat)
            await self.notify("_mock_agent/working", {})


def _agent(peer_cls: type[AgentPeer]) -> type[MockAgent]:
    class Agent(MockAgent):
        def make_peer(self, transport: Transport) -> Peer:
            return peer_cls(transport, validator=self.validator)

    return Agent


AGENTS: dict[str, type[MockAgent]] = {
    "silent": _agent(_SilentPeer),
    "aside": _agent(_AsidePeer),
    "idless": _agent(_IdlessPeer),
    "stray-idless": _agent(_StrayIdlessPeer),
    "late": _agent(_LatePeer),
    "slow": _agent(_SlowPeer),
}


if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] not in AGENTS:
        print(f"usage: {sys.argv[0]} NAME [mock_agent options]; NAME one of: {', '.join(AGENTS)}", file=sys.stderr)
        sys.exit(2)
    run(sys.argv[2:], agent_cls=AGENTS[sys.argv[1]])
