"""The client-certification suite: ``pytest --acp-client=CMD`` collects this package.

Each test starts the client under test afresh (``acp_client.connect()``),
plays the agent it launches from inside the test process, and binds its
checks to clause ids with ``@pytest.mark.acp_clause``.
"""
