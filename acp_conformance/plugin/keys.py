"""Typed stash keys of the plugin: the per-process state and each test's harness."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from acp_conformance.harness.base import HarnessLike
    from acp_conformance.plugin.state import AcpState

__all__ = ["HARNESS", "POOL_OUTPUT", "STATE"]

#: config.stash: the per-process ``AcpState`` (options, schema, validator, the peer's config).
STATE: pytest.StashKey[AcpState] = pytest.StashKey()
#: item.stash: the test's harness (agent or client: both are ``HarnessLike``).
HARNESS: pytest.StashKey[HarnessLike] = pytest.StashKey()
#: xdist's ``workeroutput`` (worker -> controller at the end of a worker's session): its pool summary.
POOL_OUTPUT = "acp_pool_summary"
