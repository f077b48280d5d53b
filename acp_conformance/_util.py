"""Small helpers with no dependencies on the rest of the package."""

from __future__ import annotations

import gc
import logging
import os
import sys
from collections.abc import Callable
from typing import NoReturn

import anyio

__all__ = ["run_as_program", "single_exception"]


def single_exception(group: BaseExceptionGroup[BaseException]) -> BaseException:
    """The one meaningful exception inside a task-group's group, or the group.

    Task groups wrap whatever the body raised; callers of the suite want
    the ``ConformanceFailure``/``PeerExited``/skip itself.
    """
    leaves: list[BaseException] = []
    stack: list[BaseException] = [group]
    while stack:
        exc = stack.pop()
        if isinstance(exc, BaseExceptionGroup):
            stack.extend(exc.exceptions)
        else:
            leaves.append(exc)
    real = [e for e in leaves if not isinstance(e, anyio.get_cancelled_exc_class())]
    return real[0] if len(real) == 1 else group


def run_as_program(main: Callable[[], int]) -> NoReturn:
    """Run a mock's ``main`` as the process's last act, without the interpreter's teardown.

    A certification run starts the agent under test some seventy times (issue 18), so what
    a mock costs around its work is paid seventy times, and two of those costs buy nothing:

    * every garbage collection walks what the imports left alive (the schema, the modules);
      frozen before ``main``, those objects are out of every later collection;
    * the interpreter's teardown frees every module and object one by one (~20 ms of CPU for
      the mock agent, more than its work in most tests) once ``main`` has answered, flushed
      and closed its output, when the kernel frees a process at once.

    So this flushes the standard streams and logging and leaves through ``os._exit``.  Only
    for a program whose ``main`` leaves nothing to ``atexit`` (a process it spawned, a
    temporary file): the mocks' ``main`` finishes its work before it returns.  Exceptions
    ``main`` lets through (argparse's ``SystemExit``) take the usual way out.
    """
    gc.freeze()
    status = main()
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
        try:
            if stream is not None:
                stream.flush()
        except (OSError, ValueError):  # closed by the transport, or the reader is gone
            pass
    os._exit(status)
