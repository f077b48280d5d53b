"""Shared fixtures for the unit and property tests (kept deliberately small)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from acp_conformance.schema import ENV_VAR, locate_schema
from acp_conformance.schema.validator import SchemaValidator

REPO = Path(__file__).resolve().parent.parent

#: Where the official schema may live, best first: the project's npm install,
#: then the CI copy of /work/shared beside the checkout, then /work/shared.
SCHEMA_DIRS = (
    REPO / "node_modules" / "@agentclientprotocol" / "sdk" / "schema" / "v1",
    REPO.parent / "shared" / "acp-spec" / "sdk-2.4.0",
    Path("/work/shared/acp-spec/sdk-2.4.0"),
)


@pytest.fixture(scope="session")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="session")
def schema_validator() -> Iterator[SchemaValidator]:
    """A validator over the pinned ACP v1 schema, located via ``ACP_CONFORMANCE_SCHEMA``."""
    found = next((d for d in SCHEMA_DIRS if (d / "schema.json").is_file()), None)
    if found is None:
        pytest.skip(
            "ACP schema not found: run `npm ci` in the checkout (installs @agentclientprotocol/sdk) "
            f"or provide ../shared/acp-spec/sdk-2.4.0; looked in {', '.join(map(str, SCHEMA_DIRS))}"
        )
    mp = pytest.MonkeyPatch()
    mp.setenv(ENV_VAR, str(found))
    try:
        yield SchemaValidator(locate_schema().data)
    finally:
        mp.undo()
