"""The fixtures a conformance test holds: ``acp_agent`` and ``acp_client``.

Each gives the test a fresh harness for the peer under test (its own temporary directory, its
own transcripts) and puts it in ``item.stash[HARNESS]``, where the reporter reads the results
once the test is over.  Without the matching ``--acp-*`` option the fixture skips the test.
"""

from __future__ import annotations

import inspect
import warnings
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from acp_conformance.plugin.keys import HARNESS, POOL_OUTPUT, STATE

if TYPE_CHECKING:
    from acp_conformance.harness.agent import AgentHarness
    from acp_conformance.harness.client import ClientHarness
    from acp_conformance.harness.pool import ConnectionPool
    from acp_conformance.harness.processes import ThreadHost

__all__ = ["OWN_PROCESS", "SOLE_PROCESS", "acp_agent", "acp_agent_pool", "acp_agent_thread_host", "acp_client"]


#: A test (or module, ``pytestmark``) that must have an agent process of its own even under
#: ``--acp-isolation=connection``: it changes what a later test would see of the process.
OWN_PROCESS = "acp_own_process"
#: A test that judges what the agent's process tree leaves running (``wait_gone``): it gets a
#: process of its own, and the pool's idle processes are retired before it starts.  A
#: double-forked daemon is ours only by when it was born (``transport.process``), which names no
#: spawn while other agent processes live beside the test's.
SOLE_PROCESS = "acp_sole_process"


@pytest.fixture
def acp_agent(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[AgentHarness]:
    """The agent under test: ``async with acp_agent.connect() as conn: ...``."""
    from acp_conformance.harness.agent import AgentHarness

    state = request.config.stash.get(STATE, None)
    if state is None or state.agent is None:
        pytest.skip("no --acp-agent given")
    pool = drain = processes = thread_host = None
    pooled = request.config.getoption("acp_isolation") == "connection"
    marked = request.node.get_closest_marker
    coroutine = inspect.iscoroutinefunction(getattr(request.node, "obj", None))
    if pooled and marked(SOLE_PROCESS) is not None and _loop_outlives_tests(request):
        drain = request.getfixturevalue("acp_agent_pool")
        thread_host = request.config.stash.get(_THREAD_HOST, None)  # its spare must go too
    elif pooled and _loop_outlives_tests(request):
        if marked(OWN_PROCESS) is None:
            pool = request.getfixturevalue("acp_agent_pool")
        elif coroutine:
            # A process of its own, started ahead of it (``harness.processes``).
            processes = request.getfixturevalue("acp_agent_pool").processes
    if pooled and not coroutine and marked(OWN_PROCESS) is not None and marked(SOLE_PROCESS) is None:
        # A synchronous test (a fuzz campaign, the stateful machine) runs its connections in a loop
        # of its own: the one the run's synchronous tests share, whose host starts them ahead.
        thread_host = request.getfixturevalue("acp_agent_thread_host")
        processes = thread_host.processes
    harness = AgentHarness(
        state.agent,
        state.validator,
        tmp_path,
        label=request.node.nodeid,
        pool=pool,
        drain=drain,
        processes=processes,
        thread_host=thread_host,
    )
    request.node.stash[HARNESS] = harness
    yield harness
    harness.release()


def _loop_outlives_tests(request: pytest.FixtureRequest) -> bool:
    """Whether this test's ``anyio_backend`` is session-scoped, as the bundled suite's is: only
    then can one event loop, and the processes the pool owns in it, outlive a test.  A project's
    own tests with a narrower one start the agent afresh, and are told so once."""
    try:
        defs = request._fixturemanager.getfixturedefs("anyio_backend", request.node)
        scope = defs[-1].scope if defs else None
    except Exception:
        scope = None
    if scope == "session":
        return True
    if not request.config.stash.get(_WARNED, False):
        request.config.stash[_WARNED] = True
        warnings.warn(
            f"--acp-isolation=connection needs a session-scoped anyio_backend fixture ({request.node.nodeid} "
            f"has a {scope or 'missing'} one): these tests start the agent afresh",
            pytest.PytestWarning,
            stacklevel=1,
        )
    return False


_WARNED = pytest.StashKey[bool]()
_THREAD_HOST = pytest.StashKey["ThreadHost"]()


@pytest.fixture(scope="session")
def acp_agent_thread_host(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ThreadHost]:
    """The event loop, in a thread, that this pytest process's synchronous agent tests share, and
    the agent processes it starts ahead of them (``--acp-isolation=connection``)."""
    import tempfile

    from acp_conformance.harness.processes import ThreadHost

    state = request.config.stash[STATE]
    assert state.agent is not None
    root = tmp_path_factory.mktemp("acp-thread-host")
    with ThreadHost(state.agent, root, state.agent.cwd or tempfile.gettempdir()) as host:
        request.config.stash[_THREAD_HOST] = host
        try:
            yield host
        finally:
            del request.config.stash[_THREAD_HOST]


@pytest.fixture(scope="session")
async def acp_agent_pool(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[ConnectionPool]:
    """The warm agent connections of this pytest process (``--acp-isolation=connection``).

    Session-scoped and async: the pool's processes live in the event loop, so anyio's runner (and
    its loop) must live as long as the pool does; the suite's ``anyio_backend`` is session-scoped
    for that reason.  The pool's own task group runs in a task of its own (``hosted_pool``)."""
    import tempfile

    from acp_conformance.harness.pool import hosted_pool

    state = request.config.stash[STATE]
    assert state.agent is not None
    root = tmp_path_factory.mktemp("acp-pool")
    async with hosted_pool(state.agent, state.validator, root, state.agent.cwd or tempfile.gettempdir()) as pool:
        try:
            yield pool
        finally:
            # To the terminal summary (``Reporter``): written to stderr here, it was captured as
            # the last test's teardown output and shown to nobody.  A worker's goes to the
            # controller with xdist's ``workeroutput`` at the end of the worker's session.
            summary = pool.summary()
            state.pool_lines.append(summary)
            workeroutput = getattr(request.config, "workeroutput", None)
            if workeroutput is not None:
                workeroutput[POOL_OUTPUT] = summary


@pytest.fixture
def acp_client(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[ClientHarness]:
    """The client under test: ``async with acp_client.connect() as conn: turn = await conn.agent.next_turn()``."""
    from acp_conformance.harness.client import ClientHarness
    from acp_conformance.harness.human import TerminalHuman

    state = request.config.stash.get(STATE, None)
    if state is None or state.client is None:
        pytest.skip("no --acp-client given")
    human = TerminalHuman() if state.client.mode != "auto" else None
    harness = ClientHarness(state.client, state.validator, tmp_path, human=human, label=request.node.nodeid)
    request.node.stash[HARNESS] = harness
    yield harness
    if human is not None:
        human.close()
