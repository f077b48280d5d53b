"""The public surface is explicit: every public module declares ``__all__``,
every name in it exists, and ``py.typed`` ships (httpx/anyio discipline)."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

PUBLIC = [
    "acp_conformance.errors",
    "acp_conformance.core",
    "acp_conformance.core.framing",
    "acp_conformance.core.jsonrpc",
    "acp_conformance.core.connection",
    "acp_conformance.core.events",
    "acp_conformance.transport",
    "acp_conformance.schema",
    "acp_conformance.schema.validator",
    "acp_conformance.endpoints",
    "acp_conformance.plugin",
    "acp_conformance.transcript",
    "acp_conformance.peer",
    "acp_conformance.clauses",
    "acp_conformance.results",
    "acp_conformance.checks",
    "acp_conformance.client",
    "acp_conformance.harness",
    "acp_conformance.reporting",
    "acp_conformance.strategies",
    "mock_agent",
]


@pytest.mark.parametrize("name", PUBLIC)
def test_all_is_declared_and_resolvable(name: str) -> None:
    module = importlib.import_module(name)
    exported = getattr(module, "__all__", None)
    assert exported is not None, f"{name} has no __all__"
    for attr in exported:
        assert hasattr(module, attr), f"{name}.__all__ names {attr!r}, which does not exist"


@pytest.mark.parametrize("package", ["acp_conformance", "mock_agent"])
def test_py_typed_ships(package: str) -> None:
    module = importlib.import_module(package)
    assert module.__file__ is not None
    assert (Path(module.__file__).parent / "py.typed").is_file()
