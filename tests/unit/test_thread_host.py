"""``ThreadHost``: the run's synchronous tests (fuzz campaigns, the stateful machine) share one event
loop in a thread, whose host starts each one's agent process while the one before runs, and leaves
no process behind when the run ends or a test needs the only agent process."""

from __future__ import annotations

import os
import sys
import threading
from pathlib import Path

import anyio

from acp_conformance.fuzz.campaign import live_connection, portal_for
from acp_conformance.harness import AgentHarness
from acp_conformance.harness.agent import AgentConfig
from acp_conformance.harness.base import liveness
from acp_conformance.harness.processes import ThreadHost
from acp_conformance.schema.validator import SchemaValidator

AGENT = f"{sys.executable} -m mock_agent"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is gone for our purpose: its parent has only to reap it
        with open(f"/proc/{pid}/stat", encoding="ascii") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _session(host: ThreadHost, config: AgentConfig, validator: SchemaValidator, tmp: Path, n: int) -> int:
    """One synchronous test: a harness as the ``acp_agent`` fixture makes it, one connection, the pid."""
    acp = AgentHarness(
        config, validator, tmp / f"test-{n}", label=f"test {n}", processes=host.processes, thread_host=host
    )
    with portal_for(acp) as portal:
        assert portal is host.portal
        with live_connection(portal, acp, []) as conn:
            portal.call(conn.peer.call, "session/new", {"cwd": str(conn.sandbox.root), "mcpServers": []})
            pid: int = conn.transport.pid
    acp.release()
    return pid


def test_a_synchronous_test_gets_the_process_started_while_the_one_before_ran(
    schema_validator: SchemaValidator, tmp_path: Path
) -> None:
    config = AgentConfig(command=AGENT, timeout=5, startup_timeout=30)
    with ThreadHost(config, tmp_path / "host", str(tmp_path)) as host:
        assert host.processes is not None and host.portal is not None
        first = _session(host, config, schema_validator, tmp_path, 1)
        assert liveness("agent", config.command).ok  # spares come only after a handshake succeeded
        spare = host.processes.spare
        assert spare is not None
        host.portal.call(spare.started.wait)
        assert spare.transport is not None
        second = _session(host, config, schema_validator, tmp_path, 2)
        assert second == spare.transport.pid != first
        assert host.processes.ahead >= 1
        behind = host.processes.spare
        assert behind is not None and behind.transport is not None
        host.portal.call(host.processes.settle)
        assert not _alive(first) and not _alive(second)
        # A test that needs the only agent process empties it, from another loop.
        anyio.run(host.drain)
        assert host.processes.spare is None and not _alive(behind.transport.pid)
        third = _session(host, config, schema_validator, tmp_path, 3)
        last = host.processes.spare
        assert last is not None
        host.portal.call(last.started.wait)
        assert last.transport is not None
        left = last.transport.pid
    # Leaving it (the end of the run) tears every process down.
    assert not _alive(third) and not _alive(left)


def test_a_connection_a_test_left_open_does_not_hang_the_end_of_the_run(
    schema_validator: SchemaValidator, tmp_path: Path
) -> None:
    """A campaign that failed before closing its connection left the connection's tasks in the
    shared loop, and the end of the run waited for them forever (a portal stops only once its tasks
    are done): they are cancelled now, and the process goes with them."""
    config = AgentConfig(command=AGENT, timeout=5, startup_timeout=30)
    host = ThreadHost(config, tmp_path / "host", str(tmp_path)).__enter__()
    assert host.portal is not None
    acp = AgentHarness(config, schema_validator, tmp_path / "t", label="t", processes=host.processes, thread_host=host)
    conn = live_connection(host.portal, acp, []).__enter__()  # never left: what the leaking campaign did
    pid: int = conn.transport.pid
    host.portal.start_task_soon(anyio.sleep_forever)
    # The end of the run, watched from outside: a regression hangs that thread, not the test run.
    end = threading.Thread(target=host.__exit__, args=(None, None, None), daemon=True)
    end.start()
    end.join(30)
    assert not end.is_alive(), "the end of the run waited for tasks a test left behind"
    assert not _alive(pid)
