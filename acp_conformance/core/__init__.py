"""Sans-IO protocol core: framing, JSON-RPC classification, connection state.

Nothing in this package performs I/O or imports anyio/pytest: it takes
bytes and returns events, takes messages and returns bytes.  That keeps it
fuzzable at full speed and reusable by every role (suite, mock agent, mock
client, proxy).
"""

from acp_conformance.core.connection import Connection, Role
from acp_conformance.core.events import (
    Event,
    Notification,
    Request,
    Response,
    Violation,
)
from acp_conformance.core.framing import DEFAULT_MAX_FRAME_BYTES, FrameDecoder, RawFrame

__all__ = [
    "DEFAULT_MAX_FRAME_BYTES",
    "Connection",
    "Event",
    "FrameDecoder",
    "Notification",
    "RawFrame",
    "Request",
    "Response",
    "Role",
    "Violation",
]
