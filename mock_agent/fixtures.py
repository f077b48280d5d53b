"""The reference agent in-process, as a pytest fixture for a Python client's own tests.

Enable it beside the command-line fixtures::

    pytest_plugins = ["acp_conformance.testing", "mock_agent.fixtures"]

Why a separate plugin: ``acp_conformance`` reaches the mocks only as commands (its layer rule),
so the fixture that runs ``MockAgent`` in the test's own event loop lives with the mock.  In-process
means no process start-up (about a millisecond per connection), a transport your client code reads
and writes directly, and the agent's view of the client afterwards: every frame the client sent,
judged against the schema.

``acp_inprocess_agent`` is used from async tests (anyio's pytest plugin, which comes with anyio;
mark the test ``@pytest.mark.anyio``)::

    async def test_my_client(acp_inprocess_agent):
        async with acp_inprocess_agent() as transport:   # a Transport: send(bytes) / receive()
            await my_client.run(transport)
        acp_inprocess_agent.raise_for_violations()
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

import anyio
import pytest

from acp_conformance.core.events import Violation
from acp_conformance.transcript import Transcript
from acp_conformance.transport import MemoryTransport, memory_pair
from mock_agent.agent import MockAgent

__all__ = ["InProcessAgent", "acp_inprocess_agent"]


class InProcessAgent:
    """Connections to the reference agent in this event loop, and what it saw of the client."""

    def __init__(self, timeout: float) -> None:
        self.timeout = timeout
        self.transcripts: list[Transcript] = []
        self.violations: list[Violation] = []

    def __call__(self, agent: MockAgent | None = None, **options: Any) -> AbstractAsyncContextManager[MemoryTransport]:
        """One connection: yields the client's end; ``options`` go to ``MockAgent`` (or pass one,
        a subclass of yours included).  On leaving the block the client's end is closed, the agent
        winds down, and its findings are added to ``violations``."""
        return self._connect(agent if agent is not None else MockAgent(**options))

    @asynccontextmanager
    async def _connect(self, agent: MockAgent) -> AsyncIterator[MemoryTransport]:
        agent_end, client_end = memory_pair()
        with anyio.fail_after(self.timeout):  # a client that never hangs up still ends
            async with anyio.create_task_group() as tg:
                tg.start_soon(agent.serve, agent_end)
                try:
                    yield client_end
                finally:
                    await client_end.close_output()  # EOF: serve() returns
        peer = agent._peer
        if peer is not None:
            self.transcripts.append(peer.transcript)
            self.violations.extend(peer.violations())

    def raise_for_violations(self) -> None:
        """Fail the calling test if the client broke the protocol on any connection."""
        if self.violations:
            lines = "\n".join(f"- [{v.clause_id}] {v.message[:300]}" for v in self.violations[:20])
            pytest.fail(f"the client broke ACP ({len(self.violations)} finding(s)):\n{lines}", pytrace=False)


@pytest.fixture
def acp_inprocess_agent() -> InProcessAgent:
    """``async with acp_inprocess_agent(**MockAgent options) as transport``: the reference agent
    serving one connection in-process (each block its own, 60 s at most)."""
    return InProcessAgent(timeout=60.0)
