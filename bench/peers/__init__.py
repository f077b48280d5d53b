"""Benchmark peers: one small agent and one client driver per stack, all doing the same work.

They run as programs (never imported by the orchestrator); the protocol they share is
described in ``_shared.py``.
"""
