"""Agents that take their time over a frame the spec forbids sending, for the fuzz campaigns'
``--acp-fuzz-patience`` (``tests/e2e/test_fuzz_patience.py``).

``python tests/peers/patience_agents.py NAME [mock_agent options]`` runs one.  Both are the
reference agent, apart from requests whose strings escape a lone UTF-16 surrogate (no valid ACP
message: JSON text is Unicode, RFC 8259 § 8.2), which the reference agent reads leniently and
answers at once:

- ``silent``: drops them without a word (simpler than zed codex-acp 0.16.0, whose parser rejects
  the line and which then writes an error without an id, never an answer under the request's id);
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
from mock_agent.cli import main


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


class _SlowPeer(AgentPeer):
    beats = 5
    beat = 0.3

    def _dispatch(self, events: list[Event]) -> None:
        slow = [e for e in events if isinstance(e, Request) and lone_surrogates(e.raw)]
        if slow:
            self.start_soon(self._work_on, slow)
            events = [e for e in events if e not in slow]
        super()._dispatch(events)

    async def _work_on(self, events: list[Event]) -> None:
        with contextlib.suppress(PeerExited):
            for _ in range(self.beats):
                # The agent's own pace (a slow parser, a busy loop), not a synchronisation.
                await anyio.sleep(self.beat)
                await self.notify("_mock_agent/working", {})
            super()._dispatch(events)


def _agent(peer_cls: type[AgentPeer]) -> type[MockAgent]:
    class Agent(MockAgent):
        def make_peer(self, transport: Transport) -> Peer:
            return peer_cls(transport, validator=self.validator)

    return Agent


AGENTS: dict[str, type[MockAgent]] = {"silent": _agent(_SilentPeer), "slow": _agent(_SlowPeer)}


if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] not in AGENTS:
        print(f"usage: {sys.argv[0]} NAME [mock_agent options]; NAME one of: {', '.join(AGENTS)}", file=sys.stderr)
        sys.exit(2)
    sys.exit(main(sys.argv[2:], agent_cls=AGENTS[sys.argv[1]]))
