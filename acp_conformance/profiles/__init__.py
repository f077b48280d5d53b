"""Peer profiles: how to drive a real implementation the suite certifies.

* ``clients``: TOML profiles saying how to drive a headless client under test (prompt,
  cancel, permission policy); the bundled ``acpx``, ``python-sdk-client``, ``mock-client``;
* ``agents``: how to run a real adapter (claude-agent-acp, codex-acp, zed codex-acp) offline
  against a scripted model endpoint, with a fresh ``HOME`` per test.

The client-profile names are re-exported here (their long-standing import path).
"""

from acp_conformance.profiles.clients import (
    ACTIONS,
    BUNDLED,
    PERMISSION_POLICIES,
    ClientProfile,
    PermissionNotSelectable,
    bundled_profiles,
    default_profile,
    describe,
    has_agent_placeholder,
    load_profile,
    parse_profile,
    substitute,
)

__all__ = [
    "ACTIONS",
    "BUNDLED",
    "PERMISSION_POLICIES",
    "ClientProfile",
    "PermissionNotSelectable",
    "bundled_profiles",
    "default_profile",
    "describe",
    "has_agent_placeholder",
    "load_profile",
    "parse_profile",
    "substitute",
]
