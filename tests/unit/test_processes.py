"""``ProcessHost``: under ``--acp-isolation=connection`` a test that needs a process of its own gets
one started ahead of it and torn down behind it, and sees it exactly as a process started for it."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import anyio
import pytest

from acp_conformance.errors import PeerExited
from acp_conformance.harness import AgentHarness
from acp_conformance.harness.pool import ConnectionPool
from acp_conformance.schema.validator import SchemaValidator
from tests.unit.test_pool import CRASHES_AFTER_CLOSING, pool_of

pytestmark = pytest.mark.anyio

AGENT = f"{sys.executable} -m mock_agent"
#: Says something on stderr before anyone talks to it, then is the mock agent.
SAYS_HELLO = f"sh -c 'echo early-words >&2; exec {AGENT}'"


def own(pool: ConnectionPool, tmp: Path, n: int) -> AgentHarness:
    """The harness of a test marked ``acp_own_process``."""
    return AgentHarness(pool.config, pool.validator, tmp / f"test-{n}", label=f"test {n}", processes=pool.processes)


async def session(acp: AgentHarness) -> int:
    async with acp.connect() as conn:
        await conn.peer.call("session/new", {"cwd": str(conn.sandbox.root), "mcpServers": []})
        return conn.transport.pid


async def test_the_next_test_gets_the_process_started_behind_the_last_with_what_it_wrote_first(
    schema_validator: SchemaValidator, tmp_path: Path
) -> None:
    async with pool_of(SAYS_HELLO, schema_validator, tmp_path) as pool:
        host = pool.processes
        first = await session(own(pool, tmp_path, 1))
        spare = host.spare
        assert spare is not None and spare.transport is not None and spare.transport.pid != first
        second = own(pool, tmp_path, 2)
        async with second.connect() as conn:
            assert conn.transport.pid == spare.transport.pid
            # Its stderr from before the test came is the test's, first, as a fresh process's is.
            stderr = [e.raw for e in conn.transcript.entries if e.direction == "stderr"]
            assert stderr[:1] == ["early-words"]
        assert host.ahead == 1 and host.started == 3  # the second test's spare is up already


async def test_a_spare_that_died_waiting_is_not_handed_out(schema_validator: SchemaValidator, tmp_path: Path) -> None:
    async with pool_of(AGENT, schema_validator, tmp_path) as pool:
        host = pool.processes
        await session(own(pool, tmp_path, 1))
        spare = host.spare
        assert spare is not None
        await spare.started.wait()
        os.kill(spare.live_transport.pid, signal.SIGKILL)
        with anyio.fail_after(10):
            await spare.live_transport.process.wait()
        pid = await session(own(pool, tmp_path, 2))
        assert pid != spare.live_transport.pid and host.ahead == 0


async def test_a_second_connection_of_a_test_starts_after_the_first_process_is_gone(
    schema_validator: SchemaValidator, tmp_path: Path
) -> None:
    """An agent that saves its sessions on exit has done so before a fresh process loads them."""
    async with pool_of(AGENT, schema_validator, tmp_path) as pool:
        acp = own(pool, tmp_path, 1)
        async with acp.connect() as first:
            pass
        async with acp.connect() as second:
            assert first.transport.returncode is not None
            assert second.transport.pid != first.transport.pid


async def test_a_test_that_needs_the_only_agent_process_finds_no_spare_alive(
    schema_validator: SchemaValidator, tmp_path: Path
) -> None:
    async with pool_of(AGENT, schema_validator, tmp_path) as pool:
        await session(own(pool, tmp_path, 1))
        spare = pool.processes.spare
        assert spare is not None
        await pool.retire_idle()  # what ``acp_sole_process`` does before its test starts
        assert pool.processes.spare is None and spare.done.is_set()
        assert all(h.done.is_set() for h in pool.processes.owned)


async def test_a_failed_test_tears_its_process_down_before_the_message_is_made(
    schema_validator: SchemaValidator, tmp_path: Path
) -> None:
    script = tmp_path / "crashes.py"
    script.write_text(CRASHES_AFTER_CLOSING)
    async with pool_of(f"{sys.executable} {script}", schema_validator, tmp_path) as pool:
        with pytest.raises(PeerExited) as raised:
            await session(own(pool, tmp_path, 1))
        assert any("crash report: out of memory" in line for line in raised.value.stderr_tail), raised.value


async def test_a_test_in_a_loop_of_its_own_starts_its_process_itself(
    schema_validator: SchemaValidator, tmp_path: Path
) -> None:
    """The fuzz campaigns and the stateful machine run in a thread's loop: the host is not theirs."""
    async with pool_of(AGENT, schema_validator, tmp_path) as pool:
        acp = own(pool, tmp_path, 1)

        def elsewhere() -> int:
            return anyio.run(session, acp)

        pid = await anyio.to_thread.run_sync(elsewhere)
        assert pid > 0 and pool.processes.started == 0


async def test_no_spare_is_handed_out_before_a_handshake_with_the_command_succeeded(
    schema_validator: SchemaValidator, tmp_path: Path
) -> None:
    """A spare's head start would hide a start-up slower than --acp-startup-timeout, which process
    mode judges: until one handshake in the run has succeeded, every process is started on demand."""
    command = f"{AGENT} --name never-shaken-{tmp_path.name}"  # a command this process has not met
    async with pool_of(command, schema_validator, tmp_path) as pool:
        host = pool.processes
        for n in (1, 2):
            async with own(pool, tmp_path, n).connect(initialize=False) as conn:
                spare = host.spare
                assert spare is not None
                await spare.started.wait()
                assert conn.transport.pid != spare.live_transport.pid
        assert host.ahead == 0
        await session(own(pool, tmp_path, 3))  # the handshake succeeds: from now on, spares
        assert await session(own(pool, tmp_path, 4)) and host.ahead == 1
