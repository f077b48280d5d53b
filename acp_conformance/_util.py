"""Small helpers with no dependencies on the rest of the package."""

from __future__ import annotations

import anyio

__all__ = ["single_exception"]


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
