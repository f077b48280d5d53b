"""Capability gating, one place (``checks.gating``): what "advertised" means, and which
schema-valid messages a client may still not send to an agent."""

from __future__ import annotations

import pytest

from acp_conformance.checks.gating import advertised, gated_use


@pytest.mark.parametrize(
    ("caps", "path", "expected"),
    [
        ({"loadSession": True}, "loadSession", True),
        ({"loadSession": False}, "loadSession", False),
        ({}, "loadSession", False),
        ({"sessionCapabilities": {"list": {}}}, "sessionCapabilities.list", True),  # an empty object declares it
        ({"sessionCapabilities": {"list": None}}, "sessionCapabilities.list", False),
        ({"sessionCapabilities": None}, "sessionCapabilities.list", False),
        ({"sessionCapabilities": []}, "sessionCapabilities.list", False),
    ],
)
def test_advertised(caps: dict[str, object], path: str, expected: bool) -> None:
    assert advertised(caps, path) is expected


def new(params: dict[str, object]) -> dict[str, object]:
    return {"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": {"cwd": "/w", "mcpServers": [], **params}}


def test_additional_directories_are_gated_even_when_empty() -> None:
    """session-setup.mdx: "Clients MUST only send additionalDirectories when the Agent advertises"
    it; an empty list is still the field (zed codex-acp's odd-ids FAIL once came from such a frame)."""
    assert gated_use(new({"additionalDirectories": []}), {}) is not None
    assert gated_use(new({"additionalDirectories": ["/x"]}), {}) is not None
    assert gated_use(new({"additionalDirectories": []}), {"sessionCapabilities": {"additionalDirectories": {}}}) is None
    assert gated_use(new({}), {}) is None


def test_gated_methods_blocks_and_mcp_servers() -> None:
    assert gated_use({"method": "session/load", "params": {}}, {}) is not None
    assert gated_use({"method": "session/load", "params": {}}, {"loadSession": True}) is None
    prompt = {"method": "session/prompt", "params": {"sessionId": "s", "prompt": [{"type": "resource"}]}}
    assert gated_use(prompt, {}) is not None
    assert gated_use(prompt, {"promptCapabilities": {"embeddedContext": True}}) is None
    http = new({"mcpServers": [{"type": "http", "name": "m", "url": "http://x", "headers": []}]})
    assert gated_use(http, {"mcpCapabilities": {"http": False}}) is not None
    assert gated_use({"method": "session/prompt", "params": {"prompt": [{"type": "text", "text": "hi"}]}}, {}) is None
