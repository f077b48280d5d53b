"""Light tasks for the per-frame hot path: one per request the peer sends us.

``anyio``'s ``TaskGroup.start_soon`` cost 37-46 µs per task on asyncio in a micro-benchmark on
a 2-core VM (its task handle, its task state, a done callback that costs the event loop one more
pass); a native asyncio task 7-9, one with an ``anyio.CancelScope`` of its own 18-22
(``bench/README.md``, item 12).  A mock agent spends one task per prompt round trip, so the
difference is about a tenth of a round trip.

What the task group gave us is kept: each task runs inside a cancel scope of its own, so closing
cancels it the way anyio would (a shielded cleanup in a handler still runs), ``aclose`` waits for
every task to end, and an exception escaping a task is handed to ``on_error`` (the owner cancels
itself and raises it, as a task group would) instead of vanishing with the task.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any

import anyio

__all__ = ["LightTasks"]


class LightTasks:
    """Native asyncio tasks with anyio's cancellation semantics, owned by one object."""

    __slots__ = ("_closing", "_loop", "_on_error", "_scope_type", "_scopes", "error")

    def __init__(self, on_error: Callable[[BaseException], None]) -> None:
        self._on_error = on_error
        #: Every running task, with its cancel scope once it has entered it.
        self._scopes: dict[asyncio.Task[None], anyio.CancelScope | None] = {}
        self._closing = False
        #: The first exception a task let escape (``on_error`` was called with it).
        self.error: BaseException | None = None
        # The loop and anyio's cancel scope class, looked up once: on Python 3.11 every
        # ``get_running_loop`` (``current_task`` and anyio's backend lookup make one each) is a
        # ``getpid`` system call, and a request's task made four (bench/README.md).
        self._loop: asyncio.AbstractEventLoop | None = None
        self._scope_type: Callable[[], anyio.CancelScope] | None = None

    def start(self, fn: Callable[..., Coroutine[Any, Any, Any]], *args: Any) -> None:
        """Run ``fn(*args)`` in a task of its own (the caller's context is copied, as always)."""
        loop = self._loop
        if loop is None:
            loop = self._loop = asyncio.get_running_loop()
        cell: list[asyncio.Task[None]] = []  # the task, for itself (it starts after this returns)
        task = loop.create_task(self._run(fn, args, cell))
        cell.append(task)
        self._scopes[task] = None

    async def _run(
        self, fn: Callable[..., Coroutine[Any, Any, Any]], args: tuple[Any, ...], cell: list[asyncio.Task[None]]
    ) -> None:
        task = cell[0]
        make_scope = self._scope_type
        if make_scope is None:
            make_scope = self._scope_type = type(anyio.CancelScope())
        try:
            with make_scope() as scope:
                self._scopes[task] = scope
                if self._closing:
                    scope.cancel()
                await fn(*args)
        except asyncio.CancelledError:
            raise  # the loop itself is shutting down (not our scope: that one is absorbed above)
        except BaseException as exc:
            if self.error is None:
                self.error = exc
                self._on_error(exc)
        finally:
            del self._scopes[task]

    async def aclose(self) -> None:
        """Cancel every task (their shielded sections still run) and wait until all have ended."""
        self._closing = True
        with anyio.CancelScope(shield=True):
            while self._scopes:
                for scope in self._scopes.values():
                    if scope is not None:
                        scope.cancel()
                await asyncio.wait(list(self._scopes))
        self._loop = None
