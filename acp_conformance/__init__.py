"""acp-conformance: a conformance suite and mock peers for the Agent Client Protocol v1.

The pytest plugin (``pytest --acp-agent=CMD``) lives in
``acp_conformance.plugin``; the building blocks other projects use
are ``acp_conformance.client.ClientEndpoint`` (the client role),
``acp_conformance.peer.Peer``, the transports, ``acp_conformance.scenario``
(scenario files) and ``acp_conformance.strategies`` (Hypothesis strategies
for valid, unusual and broken ACP frames, to fuzz any implementation).
"""

__version__ = "0.2.0"

__all__ = ["__version__"]
