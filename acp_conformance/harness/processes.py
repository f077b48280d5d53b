"""Agent processes started ahead of need and torn down behind it (``--acp-isolation=connection``).

Starting the agent is most of what a test that needs a process of its own waits for: ~0.15 s for
a Python agent, 1.5-2 s for a Node-based adapter, before ``initialize`` can be answered, and
50 ms to 2 s again for the process to go after stdin EOF.  Neither is evidence the test judges,
so neither has to be on its path.  ``ProcessHost`` keeps one *spare*, an agent process started
(never written to) while the tests before ran, and hands it to the next test that needs a process,
starting the next spare behind it; and a process a test is done with goes in the background.

A spare must look to its test exactly like a process started for it:
- the same command, environment and working directory (a peer profile's per-connection
  directory is the spare's own, as a pooled connection's is);
- nothing of it is lost or moved: what it wrote on stdout before the test came stays in the
  pipe, its stderr lines are kept and handed to the test's transcript first;
- a spare that has exited, or whose start failed, is not handed out: the test starts a process
  of its own, whose failure is then its own, as in process mode.
Its head start hides how long the agent takes to start, which process mode judges in one way:
``--acp-startup-timeout`` runs from the start of the process to the answer to ``initialize``.  So
no spare is handed out before a handshake with the command has succeeded in the run (the first
process of a run is always started on demand): an agent that cannot start within the deadline
fails its handshakes in both modes alike.  One that sometimes can and sometimes cannot is judged
on the starts process mode would have made on demand only until its first success.

And a process torn down behind its test is awaited before anything could observe it: the same
test's next connection (an agent that saves its sessions on exit must have done so before a
fresh process loads them), a test that judges what the process tree leaves running
(``settle``), and the end of the run.  A test whose body failed tears its process down at once,
as in process mode: what the agent writes on stderr on its way out belongs in the failure.

The host lives in the pool's task group, in the session's event loop.  The synchronous tests (the
fuzz campaigns, the stateful machine) cannot use that loop: anyio's runner runs it only while an
async test does.  They share one of their own instead, in a thread (``ThreadHost``), with a host
of its own: 15 agent processes of a run against the reference agent, each ~0.2 s to start on the
test's path, and 1-2 s each for a Node-based adapter.  A test in any other loop starts its
processes itself (``serves``).
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import Callable
from contextlib import AsyncExitStack, ExitStack
from pathlib import Path
from typing import TYPE_CHECKING

import anyio
import anyio.abc
from anyio.from_thread import BlockingPortal, start_blocking_portal

from acp_conformance.harness.agent import AgentConfig, PreparedPeer, spawn_agent
from acp_conformance.harness.base import liveness

if TYPE_CHECKING:
    from acp_conformance.transport.process import ProcessTransport

__all__ = ["Held", "ProcessHost", "ThreadHost"]

#: Stderr lines a spare keeps before its test takes it (the transport's own tail is bounded too).
_EARLY_STDERR = 500


class Held:
    """One agent process the host's task owns: started, lent to one user, then torn down."""

    def __init__(self, peer_dir: Path | None, *, spare: bool) -> None:
        #: The peer profile's directory for this process (``None`` without a profile).
        self.peer_dir = peer_dir
        #: Started ahead of need: a failed start is kept (``error``), not raised in anyone's task.
        self.spare = spare
        self.transport: ProcessTransport | None = None
        self.prepared: PreparedPeer | None = None
        #: Why its start failed (a spare's failure is not handed to anyone).
        self.error: BaseException | None = None
        self.started = anyio.Event()
        self.release = anyio.Event()
        self.done = anyio.Event()
        #: Stderr lines written before ``claim`` (after it, the transport's ``on_stderr`` is the claimer's).
        self._early: list[str] = []

    @property
    def live_transport(self) -> ProcessTransport:
        assert self.transport is not None, "a held process is handed out only once started"
        return self.transport

    def on_stderr(self, line: str) -> None:
        if len(self._early) < _EARLY_STDERR:
            self._early.append(line)

    def claim(self, on_stderr: Callable[[str], None]) -> None:
        """The process's stderr goes to ``on_stderr`` from now on, what it wrote before first."""
        early, self._early = self._early, []
        for line in early:
            on_stderr(line)
        self.live_transport.on_stderr = on_stderr

    def unfit(self) -> bool:
        """Whether a spare is not what a freshly started process would be (it failed, or ended)."""
        return self.error is not None or self.done.is_set() or self.live_transport.returncode is not None


class ProcessHost:
    """The agent processes of one pytest process's pool: one spare ahead, the finished behind."""

    def __init__(self, tg: anyio.abc.TaskGroup, config: AgentConfig, root: Path, cwd: str) -> None:
        self.tg = tg
        self.config = config
        self.root = root
        self.cwd = cwd
        self.loop = asyncio.get_running_loop()
        self.spare: Held | None = None
        self.owned: list[Held] = []
        self.started = 0
        #: Processes handed out that had started before they were asked for.
        self.ahead = 0

    def serves(self) -> bool:
        """Whether the caller runs in the host's event loop (a test in a loop of its own does not)."""
        try:
            return asyncio.get_running_loop() is self.loop
        except RuntimeError:
            return False

    async def acquire(self, peer_dir: Path | None = None) -> Held:
        """A started agent process: the spare when it fits, else one started now (its errors are
        the caller's); a new spare is started behind it.  ``peer_dir``: the peer profile's
        directory the process must use (a test's second connection), which no spare has."""
        held: Held | None = None
        # Until a handshake with this command has succeeded in the run, no spare: its head start
        # would hide a start-up slower than ``--acp-startup-timeout``, which process mode judges.
        proven = liveness("agent", self.config.command).ok
        spare = self.spare if peer_dir is None and proven else None
        if spare is not None:
            self.spare = None
            with anyio.move_on_after(self.config.startup_timeout):
                await spare.started.wait()
            if spare.started.is_set() and not spare.unfit():
                held = spare
                self.ahead += 1
            else:
                spare.release.set()
        self.owned = [h for h in self.owned if not h.done.is_set()]
        if held is None:
            held = self._new(peer_dir, spare=False)
            self.owned.append(held)
            await self.tg.start(self._own, held)
        if self.spare is None:
            self.spare = self._new(None, spare=True)
            self.owned.append(self.spare)
            self.tg.start_soon(self._own, self.spare)
        return held

    async def settle(self, held: list[Held] | None = None) -> None:
        """Wait until every process handed back (or only those of ``held``) is gone."""
        with anyio.fail_after(self.config.teardown_limit):
            for h in held if held is not None else self.owned:
                if h.release.is_set():
                    await h.done.wait()

    async def drain(self) -> None:
        """No agent process of ours left alive, the spare included (``acp_sole_process``); the
        next spare is started by the next ``acquire``."""
        if self.spare is not None:
            self.spare.release.set()
            self.spare = None
        await self.settle()

    async def aclose(self) -> None:
        """Tear every process down (the end of the run, or an interrupt)."""
        for h in self.owned:
            h.release.set()
        with anyio.CancelScope(shield=True):
            for h in self.owned:
                await h.done.wait()

    def _new(self, peer_dir: Path | None, *, spare: bool) -> Held:
        self.started += 1
        if peer_dir is None and self.config.setup is not None:
            peer_dir = self.root / f"process-{self.started}" / "peer"
        return Held(peer_dir, spare=spare)

    async def _own(self, held: Held, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Start the process, hold it until released, tear it down.  A start that fails is the
        caller's error (``tg.start``); a spare's is kept in ``Held.error``, never the group's."""
        try:
            async with AsyncExitStack() as stack:
                env = dict(self.config.env)
                if self.config.setup is not None:
                    assert held.peer_dir is not None
                    held.peer_dir.mkdir(parents=True, exist_ok=True)
                    held.prepared = await stack.enter_async_context(self.config.setup(held.peer_dir))
                    env.update(held.prepared.env)
                held.transport = await stack.enter_async_context(
                    spawn_agent(self.config, env, self.cwd, held.on_stderr)
                )
                held.started.set()
                task_status.started()
                await held.release.wait()
        except Exception as exc:
            if not (held.started.is_set() or held.spare):
                raise  # the caller's (``tg.start``)
            held.error = exc
            if held.started.is_set():
                with contextlib.suppress(Exception):
                    print(f"acp-conformance: tearing down an agent process ended with {exc!r}", file=sys.stderr)
        finally:
            held.started.set()
            held.done.set()


class ThreadHost:
    """One event loop in a thread for the run's synchronous tests, and a ``ProcessHost`` in it.

    A synchronous test drives its connections through ``portal`` (``anyio.from_thread``), so they
    run in this loop, where ``processes`` serves them: a spare started while the test before ran.
    Used as a context manager for the whole pytest session; leaving it tears every process down
    (the end of the run, or an interrupt: pytest tears session fixtures down after Ctrl-C too)."""

    def __init__(self, config: AgentConfig, root: Path, cwd: str) -> None:
        self._args = (config, root, cwd)
        self._stack = ExitStack()
        self.portal: BlockingPortal | None = None
        self.processes: ProcessHost | None = None
        self._stop: anyio.Event | None = None

    def __enter__(self) -> ThreadHost:
        try:
            portal = self._stack.enter_context(start_blocking_portal("asyncio"))
            # Last before the thread is joined: a task a test left behind in this loop (a connection
            # it never closed) is cancelled, not waited for: the run's end must not hang on it.
            self._stack.callback(portal.call, portal.stop, True)
            self._stop = portal.call(anyio.Event)
            future, self.processes = portal.start_task(self._run)
            self._stack.callback(future.result)  # after the stop below (last in, first out)
            self._stack.callback(portal.call, self._stop.set)
        except BaseException:
            self._stack.close()  # the thread too: nothing of a failed start outlives it
            raise
        self.portal = portal
        return self

    def __exit__(self, *exc: object) -> None:
        self._stack.close()

    async def _run(self, *, task_status: anyio.abc.TaskStatus[ProcessHost]) -> None:
        assert self._stop is not None
        async with anyio.create_task_group() as tg:
            host = ProcessHost(tg, *self._args)
            task_status.started(host)
            try:
                await self._stop.wait()
            finally:
                await host.aclose()

    async def drain(self) -> None:
        """``ProcessHost.drain`` in the thread's loop, awaited from another (``acp_sole_process``)."""
        portal, host = self.portal, self.processes
        if portal is not None and host is not None:
            await anyio.to_thread.run_sync(portal.call, host.drain)
