"""The fixtures a conformance test holds: ``acp_agent`` and ``acp_client``.

Each gives the test a fresh harness for the peer under test (its own temporary directory, its
own transcripts) and puts it in ``item.stash[HARNESS]``, where the reporter reads the results
once the test is over.  Without the matching ``--acp-*`` option the fixture skips the test.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from acp_conformance.plugin.keys import HARNESS, STATE

if TYPE_CHECKING:
    from acp_conformance.harness.agent import AgentHarness
    from acp_conformance.harness.client import ClientHarness

__all__ = ["acp_agent", "acp_client"]


@pytest.fixture
def acp_agent(request: pytest.FixtureRequest, tmp_path: Path) -> AgentHarness:
    """The agent under test: ``async with acp_agent.connect() as conn: ...``."""
    from acp_conformance.harness.agent import AgentHarness

    state = request.config.stash.get(STATE, None)
    if state is None or state.agent is None:
        pytest.skip("no --acp-agent given")
    harness = AgentHarness(state.agent, state.validator, tmp_path, label=request.node.nodeid)
    request.node.stash[HARNESS] = harness
    return harness


@pytest.fixture
def acp_client(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[ClientHarness]:
    """The client under test: ``async with acp_client.connect() as conn: turn = await conn.agent.next_turn()``."""
    from acp_conformance.harness.client import ClientHarness
    from acp_conformance.harness.human import TerminalHuman

    state = request.config.stash.get(STATE, None)
    if state is None or state.client is None:
        pytest.skip("no --acp-client given")
    human = TerminalHuman() if state.client.mode != "auto" else None
    harness = ClientHarness(state.client, state.validator, tmp_path, human=human, label=request.node.nodeid)
    request.node.stash[HARNESS] = harness
    yield harness
    if human is not None:
        human.close()
