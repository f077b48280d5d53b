"""Fixtures the agent suite's test modules share (pytest finds them here; no module imports them)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from acp_conformance.harness import AgentHarness
from acp_conformance.suite.agent._helpers import passive_not_exercised


@pytest.fixture
def passive_bookkeeping(acp_agent: AgentHarness, request: pytest.FixtureRequest) -> Iterator[None]:
    """For a test bound to stream-level clauses: after it, ``passive_not_exercised``."""
    yield
    passive_not_exercised(acp_agent, request.node)
