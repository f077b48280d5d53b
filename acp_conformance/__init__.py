"""acp-conformance: a conformance suite and mock peers for the Agent Client Protocol v1.

The pytest plugin (``pytest --acp-agent=CMD``) lives in
``acp_conformance.pytest_plugin``; the building blocks other projects use
are ``acp_conformance.client.ClientEndpoint`` (the client role),
``acp_conformance.peer.Peer`` and the transports.
"""

__version__ = "0.1.0"

__all__ = ["__version__"]
