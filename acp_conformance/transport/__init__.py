"""Byte transports: a spawned process, our own stdio, or an in-memory pair.

They move bytes and nothing else; the protocol core never sees them.  The
submodules are imported on first use, so a mock that only needs its own
stdio does not pay for the process machinery at start-up.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from acp_conformance.transport.base import Transport
    from acp_conformance.transport.memory import MemoryTransport, memory_pair
    from acp_conformance.transport.process import ProcessTransport, spawn
    from acp_conformance.transport.stdio import StdioTransport

__all__ = [
    "MemoryTransport",
    "ProcessTransport",
    "StdioTransport",
    "Transport",
    "memory_pair",
    "spawn",
]

_WHERE = {
    "Transport": "base",
    "MemoryTransport": "memory",
    "memory_pair": "memory",
    "ProcessTransport": "process",
    "spawn": "process",
    "StdioTransport": "stdio",
}


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        return getattr(importlib.import_module(f"{__name__}.{_WHERE[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
