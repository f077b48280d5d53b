"""The client side of ACP as the suite plays it (public face of ``acp_conformance.endpoints.client``)."""

from acp_conformance.endpoints.client import (
    ClientCapabilities,
    ClientEndpoint,
    HeldRequest,
    PermissionCall,
    PermissionPolicy,
    Sandbox,
    Turn,
    VirtualTerminals,
)

__all__ = [
    "ClientCapabilities",
    "ClientEndpoint",
    "HeldRequest",
    "PermissionCall",
    "PermissionPolicy",
    "Sandbox",
    "Turn",
    "VirtualTerminals",
]
