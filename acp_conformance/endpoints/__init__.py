"""The two roles the suite plays against the implementation under test.

* ``client``: the client (``ClientEndpoint``), against an agent under test: answers its
  requests by policy, serves ``fs/*`` from a sandbox, virtual terminals, can hold requests;
* ``agent``: the agent (``AgentEndpoint``), against a client under test, scripted per test.
"""

__all__: list[str] = []
