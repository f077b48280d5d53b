"""A pytest plugin for the *inner* suite runs: records the process's peak RSS.

Loaded with ``-p tests.hostile._rss_probe``; at the end of the run it writes
``ru_maxrss`` (KiB, RUSAGE_SELF: this process only, not the agents it started)
to ``$ACP_HOSTILE_PROBE_DIR/rss.<pid>``.  Under xdist every worker writes its own.
"""

from __future__ import annotations

import os
import resource
from pathlib import Path

import pytest


def pytest_unconfigure(config: pytest.Config) -> None:
    where = os.environ.get("ACP_HOSTILE_PROBE_DIR")
    if where:
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        Path(where, f"rss.{os.getpid()}").write_text(str(peak))
