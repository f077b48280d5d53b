"""``python -m bench``: performance of the mocks against the official SDKs (see bench/README.md).

Kept empty on purpose: the benchmark peers under ``bench/peers`` run as
scripts, and nothing here may slow down their start-up.
"""
