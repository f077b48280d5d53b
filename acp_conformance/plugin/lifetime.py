"""How a run ends when it is cut short: SIGTERM is Ctrl-C, and workers die with their controller.

Why: CI systems send SIGTERM at their time limit, people press Ctrl-C on long runs, and an OOM
killer or a cancelled job sends SIGKILL.  pytest handles only SIGINT (``KeyboardInterrupt``):
its default SIGTERM ends the process with no teardown, no report and the agents of the running
tests left to the watchdog.  So a run with ``--acp-*`` options treats SIGTERM as Ctrl-C (once:
a second SIGTERM ends it for good), and an xdist worker asks the kernel to kill it when its
controller dies (``PR_SET_PDEATHSIG``), so that its watchdog (``acp_conformance._watchdog``)
cleans up at once instead of after the worker notices, between tests, that nobody listens.
"""

from __future__ import annotations

import signal
import threading
from types import FrameType

from acp_conformance._proctree import die_with_parent

__all__ = ["install"]


def _sigterm(signum: int, frame: FrameType | None) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # the next one is not negotiable
    raise KeyboardInterrupt("SIGTERM")


def install(*, worker: bool) -> None:
    """Called once per process of a run (controller and workers) from ``pytest_configure``."""
    if threading.current_thread() is not threading.main_thread():
        return  # signal handlers live in the main thread (pytest run in a thread: leave it)
    if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:  # somebody else's handler stays
        signal.signal(signal.SIGTERM, _sigterm)
    if worker:
        die_with_parent()
