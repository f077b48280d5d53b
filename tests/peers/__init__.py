"""Test peers: broken, hostile and conforming agents and clients the self-tests run.

A package, so that tests import them as ``tests.peers.broken_agents`` and so on.  The runnable
ones are also run as files (``python tests/peers/broken_agents.py NAME``); only then do they
put the repository root on ``sys.path`` themselves.
"""
