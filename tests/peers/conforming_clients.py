"""Conforming clients with unusual but allowed behaviour, for proving the client suite's verdicts.

``python tests/peers/conforming_clients.py NAME [mock_client options]`` runs one.  Each is the
reference client with quirks the spec allows; the suite must find nothing in any of them
(``tests/e2e/test_conforming_clients.py``).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

if __name__ == "__main__":  # run as a file: make the repository root importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import anyio

from acp_conformance.core.events import Notification, Request
from acp_conformance.peer import HandlerError, Peer
from acp_conformance.transport.base import Transport
from mock_client import MockClient
from mock_client.cli import main
from mock_client.client import ClientPeer
from tests.peers._quirks import MetaOnSent, SplitSends, StringIds, with_meta


class _QuirkyPeer(StringIds, MetaOnSent, ClientPeer):
    """Names its requests "client-req-1", ..., and puts ``_meta`` on the params of every request
    and notification it sends."""

    id_prefix = "client-req-"


def _late(handler: Callable[[Request], Awaitable[Any]]) -> Callable[[Request], Awaitable[Any]]:
    """The handler's answer, 0.15 s after the client has it, ``_meta`` added to a result."""

    async def answer(req: Request) -> Any:
        result = await with_meta(handler)(req)
        await anyio.sleep(0.15)
        return result

    return answer


class AllUnusual(MockClient):
    """String request ids, ``_meta`` on everything it sends, frames written in pieces, every answer
    to the agent 0.15 s late (a user reading a permission prompt is slower), an extension
    notification before every prompt (extensibility.mdx: the agent ignores what it does not know),
    every session listing done twice, and terminal output with "\\r\\n" line ends (a pseudo-terminal's)."""

    def make_peer(self, transport: Transport) -> Peer:
        return _QuirkyPeer(SplitSends(transport), validator=self.validator, timeout=self.options.timeout)

    def install_handlers(self, peer: Peer) -> None:
        super().install_handlers(peer)
        for method, handler in list(peer.handlers.items()):
            peer.handlers[method] = _late(handler)

    async def run_turn(self, session_id: str, text: str) -> dict[str, Any]:
        await self.peer.notify("_example.com/focus", {"sessionId": session_id, "editor": "visible"})
        return await super().run_turn(session_id, text)

    async def list_sessions(self) -> list[dict[str, Any]]:
        """Lists every page twice over (a refresh): a new listing may follow its cursors again."""
        await super().list_sessions()
        return await super().list_sessions()

    async def terminal_call(self, name: str, params: dict[str, Any]) -> Any:
        """Terminal output as a pseudo-terminal hands it back, every line ended with "\\r\\n"."""
        result = await super().terminal_call(name, params)
        if name == "output" and isinstance(result, dict) and isinstance(result.get("output"), str):
            result = {**result, "output": result["output"].replace("\n", "\r\n")}
        return result


class RefusesCommands(MockClient):
    """Advertises terminals and refuses every command the agent asks it to run, as a client whose
    policy or sandbox forbids it may: no clause makes a client run a command it is asked to, so an
    error (an application-defined code) is an answer, not a finding.  The terminal tests cannot
    judge what they are about, and must say so (INCONCLUSIVE), not charge it to ``term.wait`` or
    ``term.create.immediate``."""

    async def terminal_call(self, name: str, params: dict[str, Any]) -> Any:
        if name == "create":
            raise HandlerError(1, "running commands is not allowed in this workspace")
        return await super().terminal_call(name, params)


class NoCapabilitiesObject(MockClient):
    """Initializes without ``clientCapabilities`` (the schema makes it optional, every capability
    off by default; initialization.mdx: omitted capabilities "MUST [be treated] as UNSUPPORTED"),
    and still serves file and terminal requests (nothing stops a client serving what it did not
    advertise; an elicitation it did not advertise it must refuse: run it without elicitation).
    The suite must read the omission as advertising nothing (so nothing gated is judged) and flag
    nothing for it."""

    def initialize_params(self) -> dict[str, Any]:
        return {k: v for k, v in super().initialize_params().items() if k != "clientCapabilities"}


class EndsOnACompletion(MockClient):
    """Ends its session (exits) when an agent completes a URL elicitation, as an editor may close a
    workspace once the flow it was waiting for is done.  What a client does with the first completion
    of an id it knows is not the business of ``elicit.complete.ignore-unknown`` ("Clients MUST ignore
    unknown or already-completed IDs"): the test of that clause must find its precondition (the
    client still answering after that first completion) unmet and say so, not charge the MUST."""

    def on_notification(self, note: Notification) -> None:
        if note.method == "elicitation/complete":
            sys.stderr.write("client: the elicitation is complete, closing the workspace\n")
            sys.stderr.flush()
            os._exit(0)
        super().on_notification(note)


CLIENTS: dict[str, type[MockClient]] = {
    "all-unusual": AllUnusual,
    "refuses-commands": RefusesCommands,
    "no-capabilities-object": NoCapabilitiesObject,
    "ends-on-a-completion": EndsOnACompletion,
}


if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] not in CLIENTS:
        print(f"usage: {sys.argv[0]} NAME [mock_client options]; NAME one of: {', '.join(CLIENTS)}", file=sys.stderr)
        sys.exit(2)
    sys.exit(main(sys.argv[2:], client_cls=CLIENTS[sys.argv[1]]))
