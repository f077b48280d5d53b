"""Broken clients only the client fuzz campaigns find.

Each is the reference client with one defect no scripted test provokes; the client fuzz campaigns
(acp_conformance/suite/client/test_fuzz.py) must find it within their default budget and seed.
``Breakage.fuzz`` names the campaign.

Merged into ``BREAKAGES`` by ``broken_clients.py`` (run them through it).
"""

from __future__ import annotations

import os
from typing import Any

from acp_conformance.core import jsonrpc
from acp_conformance.core.connection import AnsweringConnection, Role
from acp_conformance.core.events import Event, Request
from acp_conformance.peer import HandlerError, Peer
from acp_conformance.transport.base import Transport
from mock_client import MockClient
from mock_client.strict import ClientPeer
from tests.peers._breakage import Breakage


class FuzzCrashesOnUnknownMethod(MockClient):
    """Exits on a request for a method it does not know that is not an extension (``_``) method."""

    def install_handlers(self, peer: Peer) -> None:
        super().install_handlers(peer)

        async def crash(req: Request) -> Any:
            if not req.method.startswith("_"):
                os._exit(72)  # an unhandled "unknown variant" error takes the client down
            raise HandlerError(-32601, f"method not found: {req.method}")

        peer.default_handler = crash


class FuzzResultForInvalidParams(MockClient):
    """Serves requests whose params miss a required member (a missing ``options`` reads as no option:
    the permission is answered ``cancelled``) instead of refusing them with -32602."""

    def check_params(self, req: Request) -> None:
        pass


class _WedgedAfterGarbage(AnsweringConnection):
    """Answers the first line that is not JSON, then reads nothing more."""

    wedged = False

    def receive_frame(self, data: bytes) -> list[Event]:
        if self.wedged:
            return []
        if jsonrpc.decode(data)[0] is None and not jsonrpc.is_json_null(data):
            self.wedged = True
        return super().receive_frame(data)


class FuzzWedgedAfterGarbage(MockClient):
    def make_peer(self, transport: Transport) -> Peer:
        peer = super().make_peer(transport)
        assert isinstance(peer, ClientPeer)
        peer.conn = _WedgedAfterGarbage(Role.CLIENT, peer.answer_malformed)
        return peer


class FuzzSilentOnParseErrors(MockClient):
    """Says nothing about a line that is not JSON (JSON-RPC wants -32700 with a null id)."""

    def make_peer(self, transport: Transport) -> Peer:
        peer = super().make_peer(transport)
        assert isinstance(peer, ClientPeer)
        answer = peer.answer_malformed

        def only_invalid_requests(code: int, message: str) -> None:
            if code != jsonrpc.ErrorCode.PARSE_ERROR:
                answer(code, message)

        peer.conn = AnsweringConnection(Role.CLIENT, only_invalid_requests)
        return peer


class FuzzParseErrorForInvalidRequests(MockClient):
    """Calls every malformed line a parse error, JSON or not (-32700 where -32600 is due)."""

    def make_peer(self, transport: Transport) -> Peer:
        peer = super().make_peer(transport)
        assert isinstance(peer, ClientPeer)
        answer = peer.answer_malformed
        peer.conn = AnsweringConnection(
            Role.CLIENT, lambda code, message: answer(jsonrpc.ErrorCode.PARSE_ERROR, "Parse error")
        )
        return peer


BREAKAGES: dict[str, Breakage[MockClient]] = {
    # A request for a method that is neither ACP's nor _-prefixed, and garbage, are frames a conforming
    # agent never sends: the client dying or wedging on them is a robustness finding.
    "fuzz-crashes-on-unknown-method": Breakage(
        FuzzCrashesOnUnknownMethod,
        "jsonrpc.survives-invalid-input",
        status="WARN",
        fuzz="test_fuzz_client_methods_and_notifications",
    ),
    "fuzz-result-for-invalid-params": Breakage(
        FuzzResultForInvalidParams, "jsonrpc.invalid-params", status="WARN", fuzz="test_fuzz_client_invalid_params"
    ),
    "fuzz-wedged-after-garbage": Breakage(
        FuzzWedgedAfterGarbage,
        "jsonrpc.survives-invalid-input",
        status="WARN",
        fuzz="test_fuzz_client_unparseable_lines",
    ),
    "fuzz-silent-on-parse-errors": Breakage(
        FuzzSilentOnParseErrors,
        "jsonrpc.parse-error",
        status="WARN",
        fuzz="test_fuzz_client_unparseable_lines",
        # The silence was waited for (``FrameFuzzer.confirm``), not read off the answered probes.
        says="no answer within",
    ),
    "fuzz-parse-error-for-invalid-requests": Breakage(
        FuzzParseErrorForInvalidRequests,
        "jsonrpc.invalid-request",
        status="WARN",
        fuzz="test_fuzz_client_invalid_requests",
    ),
}
