"""Object shapes the suites judge explicitly, beside the schema (one rule each, both roles)."""

from __future__ import annotations

from typing import Any

__all__ = ["implementation_ok"]


def implementation_ok(info: Any) -> bool:
    """``clientInfo`` / ``agentInfo`` as the schema's ``Implementation``: string ``name`` and
    ``version`` (``title`` optional).  Judged explicitly too so that the clause has a test of its
    own (the schema's error at the same path is charged to it as well)."""
    return isinstance(info, dict) and isinstance(info.get("name"), str) and isinstance(info.get("version"), str)
