"""The request-handler API of a ``Peer``: what a handler returns or raises.

Its own module so that everything built on handlers (the mocks, the endpoints, the broken peers)
names them without reaching into the I/O class; ``acp_conformance.peer`` re-exports them.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from acp_conformance.core.events import Notification, Request

__all__ = ["NO_ANSWER", "HandlerError", "NotificationListener", "RequestHandler"]


class HandlerError(Exception):
    """Raise from a request handler to answer with a JSON-RPC error."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data


class _NoAnswer:
    def __repr__(self) -> str:
        return "NO_ANSWER"


#: Return this from a handler to leave the request unanswered on purpose.
NO_ANSWER: Any = _NoAnswer()

RequestHandler = Callable[[Request], Awaitable[Any]]
NotificationListener = Callable[[Notification], None]
