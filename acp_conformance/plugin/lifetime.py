"""How a run ends when it is cut short: SIGTERM is Ctrl-C, and workers die with their controller.

Why: CI systems send SIGTERM at their time limit, people press Ctrl-C on long runs, and an OOM
killer or a cancelled job sends SIGKILL.  pytest handles only SIGINT (``KeyboardInterrupt``):
its default SIGTERM ends the process with no teardown, no report and the agents of the running
tests left to the watchdog.  So a run with ``--acp-*`` options treats SIGTERM as Ctrl-C (once:
a second SIGTERM ends it for good), and an xdist worker asks the kernel to kill it when its
controller dies (``PR_SET_PDEATHSIG``), so that its watchdog (``acp_conformance._watchdog``)
cleans up at once instead of after the worker notices, between tests, that nobody listens.

Where the interrupt is raised matters as much as that it is.  The suite's tests run on an
asyncio loop that anyio's pytest runner drives with ``run_until_complete``, and Python's default
SIGINT handler raises ``KeyboardInterrupt`` at whatever bytecode the main thread runs: inside a
task step, in the middle of anyio's cancel-scope bookkeeping, or between the loop popping a
callback and running it.  A task torn there may never be stepped again, and the runner's
teardown (cancel every task, wait for them) then waits forever on an agent that is still alive:
the run neither stops nor reports.  ``asyncio.Runner`` avoids this for its own loop by cancelling
its main task instead; we do the equivalent for any loop: while a loop runs in the main thread,
the first SIGINT or SIGTERM asks the loop itself to raise ``KeyboardInterrupt`` from a callback
of its own, which ends ``run_until_complete`` between two callbacks with every task intact.
Outside a loop (collection, synchronous tests, the thread that waits on a fuzzing portal) the
interrupt is raised where it lands, as before, and so is every interrupt after the first; a
loop that has not raised it within ``ESCALATE_AFTER`` seconds (stuck in synchronous code) gets a
second SIGINT from a timer, which is raised where it lands.
"""

from __future__ import annotations

import asyncio
import signal
import threading
from types import FrameType

from acp_conformance._proctree import die_with_parent

__all__ = ["install", "raise_pending"]


#: A loop asked to raise an interrupt that has not after this long is stuck in synchronous code:
#: the interrupt is then raised where the main thread is, as Python's own handler would have.
ESCALATE_AFTER = 5.0


class _Interrupt:
    """The first interrupt of the process, until one place has raised it."""

    asked: str | None = None  # the signal's name, once a running loop was asked to raise it
    raised: bool = False
    timer: threading.Timer | None = None  # the pending escalation


def _raise(name: str) -> None:
    if not _Interrupt.raised:  # a callback left queued on a loop that stopped before running it
        _Interrupt.raised = True
        if _Interrupt.timer is not None:
            _Interrupt.timer.cancel()
        raise KeyboardInterrupt(name)


def raise_pending() -> None:
    """Raise an interrupt a loop was asked to raise but stopped before it could (the signal came
    as a coroutine finished).  Called between tests and before a test's teardown, where raising
    is safe, so that the queued callback does not fire inside the next teardown instead."""
    if _Interrupt.asked is not None:
        _raise(_Interrupt.asked)


def _escalate() -> None:
    """From the timer's thread: the loop never ran our callback; signal the main thread again, and
    the second interrupt is raised where it lands.  (Only the pending timer may: it is the one
    ``_raise`` did not cancel.)"""
    pending = threading.current_thread() is _Interrupt.timer
    if pending and not _Interrupt.raised and signal.getsignal(signal.SIGINT) is _interrupt:
        signal.pthread_kill(threading.main_thread().ident or 0, signal.SIGINT)


def _interrupt(signum: int, frame: FrameType | None) -> None:
    name = signal.Signals(signum).name
    if signum == signal.SIGTERM:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)  # the next one is not negotiable
    first = _Interrupt.asked is None and not _Interrupt.raised
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        loop = None
    if loop is None or not first:
        _Interrupt.raised = True
        raise KeyboardInterrupt(name)
    _Interrupt.asked = name
    loop.call_soon_threadsafe(_raise, name)  # also wakes a loop that sits in select()
    timer = _Interrupt.timer = threading.Timer(ESCALATE_AFTER, _escalate)
    timer.daemon = True
    timer.start()


def install(*, worker: bool) -> None:
    """Called once per process of a run (controller and workers) from ``pytest_configure``."""
    if threading.current_thread() is not threading.main_thread():
        return  # signal handlers live in the main thread (pytest run in a thread: leave it)
    if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:  # somebody else's handler stays
        signal.signal(signal.SIGTERM, _interrupt)
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        signal.signal(signal.SIGINT, _interrupt)
    if worker:
        die_with_parent()
