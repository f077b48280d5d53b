"""Stash keys shared by the plugin modules (kept apart to avoid import cycles)."""

from __future__ import annotations

from typing import Any

import pytest

__all__ = ["HARNESS", "STATE"]

#: config.stash: the per-process ``AcpState`` (options, schema, validator).
STATE = pytest.StashKey[Any]()
#: item.stash: the test's harness.  Duck-typed so the agent and the client
#: harness both fit: ``results`` (list[ClauseResult]), ``evidence() -> str``,
#: ``peer_info`` (dict | None) and ``body_completed`` (bool).
HARNESS = pytest.StashKey[Any]()
