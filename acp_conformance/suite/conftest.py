"""The suites run on asyncio: the transports rely on asyncio's pipe support.

Session-scoped, so that ``--acp-isolation=connection``'s pool (a session-scoped async fixture)
can keep one event loop, and the agent processes it owns, across tests."""

import pytest


@pytest.fixture(scope="session")
def anyio_backend() -> str:
    return "asyncio"
