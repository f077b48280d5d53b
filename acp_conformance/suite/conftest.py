"""The suites run on asyncio: the transports rely on asyncio's pipe support."""

import pytest


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"
