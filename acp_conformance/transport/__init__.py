"""Byte transports: a spawned process, our own stdio, or an in-memory pair.

They move bytes and nothing else; the protocol core never sees them.
"""

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
