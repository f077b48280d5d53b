"""Where an interrupt of a run lands: between two callbacks of the event loop, never inside a task.

A ``KeyboardInterrupt`` raised inside a task step tears that task at an arbitrary bytecode (in
anyio's cancel-scope bookkeeping, between the loop popping a callback and running it), and the
test runner's teardown can then wait forever for it.  These tests send real signals to this
process and check the loop stops with every task intact, that the interrupt is never lost, and
that a second one is never negotiated.
"""

from __future__ import annotations

import asyncio
import signal
import threading
import time
from collections.abc import Iterator

import pytest

from acp_conformance.plugin import lifetime

pytestmark = pytest.mark.skipif(
    threading.current_thread() is not threading.main_thread(), reason="signal handlers live in the main thread"
)


@pytest.fixture
def installed(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    saved = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    interrupt = getattr(lifetime, "_Interrupt", None)
    if interrupt is not None:
        monkeypatch.setattr(interrupt, "asked", None)
        monkeypatch.setattr(interrupt, "raised", False)
        monkeypatch.setattr(interrupt, "timer", None, raising=False)
        monkeypatch.setattr(lifetime, "ESCALATE_AFTER", 0.3, raising=False)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    lifetime.install(worker=False)
    try:
        yield
    finally:
        timer = getattr(interrupt, "timer", None)
        if timer is not None:
            timer.cancel()  # a test's pending escalation must not signal the next test
        for sig, handler in saved.items():
            signal.signal(sig, handler)


@pytest.fixture
def loop() -> Iterator[asyncio.AbstractEventLoop]:
    """A loop the test drives with ``run_until_complete`` itself, as anyio's pytest runner does."""
    new = asyncio.new_event_loop()
    try:
        yield new
    finally:
        new.close()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_an_interrupt_inside_a_task_stops_the_loop_with_the_task_intact(
    installed: None, loop: asyncio.AbstractEventLoop, sig: signal.Signals
) -> None:
    wound_down: list[str] = []

    async def test_body() -> None:
        try:
            signal.raise_signal(sig)  # the handler runs here, in the middle of this task's step
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            wound_down.append("cancelled at an await")
            raise

    task = loop.create_task(test_body())
    with pytest.raises(KeyboardInterrupt, match=sig.name):
        loop.run_until_complete(task)
    # The old handler raised inside test_body: the task was done, torn by KeyboardInterrupt.
    assert not task.done(), "the interrupt tore the task instead of stopping the loop"
    task.cancel()  # what the test runner's teardown does with every task left
    loop.run_until_complete(asyncio.gather(task, return_exceptions=True))
    assert wound_down == ["cancelled at an await"]


def test_an_interrupt_outside_a_loop_is_raised_where_it_lands(installed: None) -> None:
    with pytest.raises(KeyboardInterrupt, match="SIGTERM"):
        signal.raise_signal(signal.SIGTERM)
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL, "a second SIGTERM must end the run for good"
    lifetime.raise_pending()  # already raised: nothing left to deliver


def test_an_interrupt_after_one_raised_outside_a_loop_is_raised_at_once(
    installed: None, loop: asyncio.AbstractEventLoop
) -> None:
    """Ctrl-C between tests, then Ctrl-C again while a fixture's teardown runs the loop: the
    second one must not wait in the loop's queue behind the first (found in review)."""
    with pytest.raises(KeyboardInterrupt):
        signal.raise_signal(signal.SIGINT)
    reached: list[str] = []

    async def teardown() -> None:
        signal.raise_signal(signal.SIGINT)
        reached.append("went on after the second Ctrl-C")

    with pytest.raises(KeyboardInterrupt):
        loop.run_until_complete(teardown())
    assert reached == []


def test_a_loop_stuck_in_synchronous_code_gets_the_interrupt_anyway(
    installed: None, loop: asyncio.AbstractEventLoop
) -> None:
    reached: list[str] = []

    async def stuck() -> None:
        signal.raise_signal(signal.SIGTERM)  # asked of the loop, which never gets to run it
        time.sleep(10)  # synchronous: the escalation (ESCALATE_AFTER, 0.3 s here) interrupts it
        reached.append("slept it out")

    started = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        loop.run_until_complete(stuck())
    assert reached == [] and time.monotonic() - started < 5


def test_a_second_interrupt_is_raised_at_once_for_a_loop_stuck_in_synchronous_code(
    installed: None, loop: asyncio.AbstractEventLoop
) -> None:
    reached: list[str] = []

    async def stuck() -> None:
        signal.raise_signal(signal.SIGINT)  # asked of the loop, which never gets to run it
        reached.append("after the first")
        signal.raise_signal(signal.SIGINT)
        reached.append("after the second")

    with pytest.raises(KeyboardInterrupt):
        loop.run_until_complete(stuck())
    assert reached == ["after the first"]


def test_an_interrupt_that_came_as_the_loop_stopped_is_raised_between_tests_and_only_once(
    installed: None, loop: asyncio.AbstractEventLoop
) -> None:
    async def last_step() -> None:
        # The signal comes in the pass that stops the loop, after run_until_complete's own
        # callback: the callback the handler queues would only run at the loop's next start.
        this = asyncio.current_task()
        assert this is not None
        this.add_done_callback(lambda _: signal.raise_signal(signal.SIGTERM))

    task = loop.create_task(last_step())
    loop.run_until_complete(task)
    assert task.done()
    with pytest.raises(KeyboardInterrupt, match="SIGTERM"):
        lifetime.raise_pending()  # the plugin calls this after every test
    loop.run_until_complete(asyncio.sleep(0))  # the queued callback is stale: teardown goes on
    lifetime.raise_pending()
