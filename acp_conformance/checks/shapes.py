"""Object shapes the suites judge explicitly, beside the schema (one rule each, both roles)."""

from __future__ import annotations

from typing import Any

from acp_conformance.core.jsonrpc import ErrorCode

__all__ = ["implementation_ok", "unknown_method_answer"]


def implementation_ok(info: Any) -> bool:
    """``clientInfo`` / ``agentInfo`` as the schema's ``Implementation``: string ``name`` and
    ``version`` (``title`` optional).  Judged explicitly too so that the clause has a test of its
    own (the schema's error at the same path is charged to it as well)."""
    return isinstance(info, dict) and isinstance(info.get("name"), str) and isinstance(info.get("version"), str)


def unknown_method_answer(is_error: bool, error: Any) -> bool | None:
    """An answer to a request for a method the receiver cannot know (an extension name we made up),
    against ``jsonrpc.unknown-method`` and ``ext.request.unknown`` alike: True for error -32601,
    False for another error (it does not implement the method and says so with the wrong code),
    None for a result: the receiver handles the name (a catch-all extension handler is an
    implementation), so that it "doesn't recognize" it (extensibility.mdx) is not shown, and
    neither clause is judged on it."""
    if not is_error:
        return None
    code = error.get("code") if isinstance(error, dict) else None
    return type(code) is int and code == ErrorCode.METHOD_NOT_FOUND
