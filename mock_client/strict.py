"""The reference client's answers to malformed input, as JSON-RPC 2.0 and the ACP schema ask.

``ClientPeer`` answers a line that is not JSON with -32700 and JSON that is
no request object (or a request whose id is no JSON-RPC id) with -32600,
both under a null id; the core only records such lines as violations.
``check_params`` refuses, with -32602, a request to a method the client
serves whose params are no object or miss a required member, or carry one of
the wrong JSON type (the schema's ``required`` lists of the requests an agent
sends a client); optional members are left to the handlers, as SDKs default
them.  The client-side fuzz campaigns (``acp_conformance/suite/client/test_fuzz.py``)
hold the reference client to exactly this.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from acp_conformance.core import jsonrpc
from acp_conformance.core.connection import Role
from acp_conformance.core.events import Request
from acp_conformance.peer import HandlerError, Peer
from acp_conformance.transport.base import Transport

if TYPE_CHECKING:
    from acp_conformance.schema.validator import SchemaValidator

__all__ = ["REQUIRED", "ClientPeer", "check_params"]

ErrorCode = jsonrpc.ErrorCode

_TERMINAL: dict[str, type] = {"sessionId": str, "terminalId": str}
#: Required members (and their JSON type) of every request an agent sends a client (schema ``required``).
REQUIRED: dict[str, dict[str, type]] = {
    "session/request_permission": {"sessionId": str, "toolCall": dict, "options": list},
    "fs/read_text_file": {"sessionId": str, "path": str},
    "fs/write_text_file": {"sessionId": str, "path": str, "content": str},
    "terminal/create": {"sessionId": str, "command": str},
    "terminal/output": _TERMINAL,
    "terminal/release": _TERMINAL,
    "terminal/wait_for_exit": _TERMINAL,
    "terminal/kill": _TERMINAL,
}


def check_params(req: Request) -> None:
    """Raise -32602 when ``req``'s params are no object or break a required member of its method."""
    required = REQUIRED.get(req.method)
    if required is None:
        return
    params = req.params
    if not isinstance(params, dict):
        raise HandlerError(ErrorCode.INVALID_PARAMS, f"{req.method}: params must be an object")
    for name, kind in required.items():
        if name not in params:
            raise HandlerError(ErrorCode.INVALID_PARAMS, f"{req.method}: {name} is required")
        if not isinstance(params[name], kind):
            raise HandlerError(ErrorCode.INVALID_PARAMS, f"{req.method}: {name} must be of type {kind.__name__}")


class ClientPeer(Peer):
    """``Peer`` in the client role that answers malformed lines as JSON-RPC asks."""

    def __init__(self, transport: Transport, *, validator: SchemaValidator | None, timeout: float) -> None:
        super().__init__(transport, Role.CLIENT, validator=validator, timeout=timeout, strict=True)
