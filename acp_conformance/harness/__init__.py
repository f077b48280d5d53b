"""Running the implementation under test, for one conformance test.

* ``base``: what every harness shares (results, checks, per-run liveness and deadline memory);
* ``agent``: ``AgentHarness``, an agent under test (process, the suite's client, evidence);
* ``client``: ``ClientHarness``, a client under test (process, the relay it launches, the
  suite's agent);
* ``control`` and ``relay``: the channel between the test process and the relay agent a client
  under test launches (``python -m acp_conformance.harness.relay``, stdlib only);
* ``human``: the person at the terminal in the editor modes.

The agent-harness names are re-exported here, lazily: the relay imports this package, and
must start in milliseconds.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from acp_conformance.harness.agent import AgentConfig, AgentHarness, Connection, PreparedPeer
    from acp_conformance.harness.base import AcpSpecWarning, judge_transcript

__all__ = ["AcpSpecWarning", "AgentConfig", "AgentHarness", "Connection", "PreparedPeer", "judge_transcript"]

_HOMES = {
    "AgentConfig": "agent",
    "AgentHarness": "agent",
    "Connection": "agent",
    "PreparedPeer": "agent",
    "AcpSpecWarning": "base",
    "judge_transcript": "base",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{home}"), name)
