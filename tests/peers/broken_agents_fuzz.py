"""Broken agents that only the fuzzer finds (merged into BREAKAGES by broken_agents.py).

Each one is the reference agent with one defect that no scripted test
provokes: it takes a malformed line, a huge one, a bidi control character
or a line of garbage to show.  The fuzz campaigns of
``acp_conformance/suite/agent/test_fuzz.py`` must find each within their
default budget and seed.
"""

from __future__ import annotations

import os
from typing import Any

from acp_conformance.core import jsonrpc
from acp_conformance.core.connection import AnsweringConnection, Role
from acp_conformance.core.events import Event
from acp_conformance.peer import Peer
from acp_conformance.transport.base import Transport
from mock_agent import AgentPeer, MockAgent
from tests.peers._breakage import Breakage

__all__ = ["BREAKAGES"]

ErrorCode = jsonrpc.ErrorCode


class _Peer(AgentPeer):
    """An AgentPeer whose connection is ``connection_cls``."""

    connection_cls: type[AnsweringConnection] = AnsweringConnection

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.conn = self.connection_cls(Role.AGENT, self.answer_malformed)


def _agent(peer_cls: type[AgentPeer]) -> type[MockAgent]:
    class Agent(MockAgent):
        def make_peer(self, transport: Transport) -> Peer:
            return peer_cls(transport, validator=self.validator)

    Agent.__name__ = Agent.__qualname__ = peer_cls.__name__.lstrip("_") + "Agent"
    return Agent


# ------------------------------------------------------------ error answers
class _SilentOnParseErrors(AgentPeer):
    """Says nothing about a line that is not JSON (JSON-RPC wants -32700)."""

    def answer_malformed(self, code: int, message: str) -> None:
        if code != ErrorCode.PARSE_ERROR:
            super().answer_malformed(code, message)


class _ParseErrorForInvalidRequests(AgentPeer):
    """Calls every malformed line a parse error, JSON or not (-32700 where -32600 is due)."""

    def answer_malformed(self, code: int, message: str) -> None:
        super().answer_malformed(ErrorCode.PARSE_ERROR, "Parse error")


# -------------------------------------------------------- crashes and wedges
class _CrashesOnHugeLine(AnsweringConnection):
    """Exits on any line over 256 KiB (a fixed-size read buffer, say)."""

    def receive_frame(self, data: bytes) -> list[Event]:
        if len(data) > 256 * 1024:
            os._exit(70)
        return super().receive_frame(data)


class _WedgedAfterGarbage(AnsweringConnection):
    """Answers the first unparseable line, then ignores everything that follows."""

    wedged = False

    def receive_frame(self, data: bytes) -> list[Event]:
        if self.wedged:
            return []
        if jsonrpc.decode(data)[0] is None:
            self.wedged = True
        return super().receive_frame(data)


class _DiesOnBidiControls(AnsweringConnection):
    """Exits when a frame carries U+202E RIGHT-TO-LEFT OVERRIDE (raw or escaped)."""

    def receive_frame(self, data: bytes) -> list[Event]:
        if "\u202e".encode() in data or b"\\u202e" in data.lower():
            os._exit(71)
        return super().receive_frame(data)


class _DiesOnArrayLine(AnsweringConnection):
    """Exits on a line holding a JSON array (the Python SDK 0.12.1 calls .get on it and dies)."""

    def receive_frame(self, data: bytes) -> list[Event]:
        if data.lstrip().startswith(b"["):
            os._exit(72)
        return super().receive_frame(data)


def _with_connection(conn: type[AnsweringConnection]) -> type[AgentPeer]:
    return type(conn.__name__, (_Peer,), {"connection_cls": conn})


_DEAD = "the agent is gone (or deaf) after the frame: the probes that follow it are never answered"
#: What a frame the spec forbids us to send provokes is a robustness finding (never a MUST FAIL).
_FORBIDDEN = "jsonrpc.survives-invalid-input"

BREAKAGES: dict[str, Breakage[MockAgent]] = {
    "fuzz-silent-on-parse-errors": Breakage(
        _agent(_SilentOnParseErrors),
        "jsonrpc.parse-error",
        status="WARN",
        fuzz="test_fuzz_unparseable_lines",
        # The silence was waited for (``FrameFuzzer.confirm``), not read off the answered probes.
        says="no answer within",
    ),
    "fuzz-parse-error-for-invalid-requests": Breakage(
        _agent(_ParseErrorForInvalidRequests),
        "jsonrpc.invalid-request",
        status="WARN",
        fuzz="test_fuzz_invalid_requests",
    ),
    # A line over 256 KiB is beyond a limit RFC 8259 § 9 lets a receiver set, and garbage or an
    # array line is no valid ACP message: the deaths they cause are robustness findings.
    "fuzz-crashes-on-huge-line": Breakage(
        _agent(_with_connection(_CrashesOnHugeLine)),
        _FORBIDDEN,
        status="WARN",
        fuzz="test_fuzz_survives_unusual_frames",
    ),
    "fuzz-wedged-after-garbage": Breakage(
        _agent(_with_connection(_WedgedAfterGarbage)),
        _FORBIDDEN,
        status="WARN",
        also=frozenset({"jsonrpc.invalid-request"}),
        why_also="once wedged it answers no later frame: the malformed-input scenario's invalid request, sent "
        "after its garbage line, never gets its -32600 (the fuzz campaigns charge what follows the garbage to "
        "the one robustness finding)",
        fuzz="test_fuzz_unparseable_lines",
    ),
    "fuzz-dies-on-array-line": Breakage(
        _agent(_with_connection(_DiesOnArrayLine)), _FORBIDDEN, status="WARN", fuzz="test_fuzz_invalid_requests"
    ),
    "fuzz-dies-on-bidi-controls": Breakage(
        _agent(_with_connection(_DiesOnBidiControls)),
        "jsonrpc.every-request-answered",
        also=frozenset({_FORBIDDEN}),
        why_also=_DEAD + "; dying on a frame we were not allowed to send as well is a robustness finding",
        # Valid requests carrying RTL text: this campaign sends them, but it meets an invalid frame
        # with U+202E first, and the valid one while shrinking that: give the shrink its 30 s
        # (it ends as soon as it is done, ~10 s here).
        fuzz="test_fuzz_survives_unusual_frames",
        suite_args=("--acp-fuzz-shrink-seconds=30",),
    ),
}
