"""Driver for OUR stack: ``acp_conformance`` client side over a spawned agent.

The same path the conformance suite uses (``transport.spawn`` + ``Peer`` in the client role
+ ``ClientEndpoint``), with the schema validator (validation on, as in the product) or
without it (``--no-validate``).  Protocol: see ``_shared.py``.
"""

from __future__ import annotations

import sys
import tempfile
import time

import anyio
from _shared import (
    PING,
    WARM_UPDATES,
    CpuClock,
    emit_result,
    parse_argv,
    proc_status_kib,
    updates_prompt,
)

from acp_conformance.core.connection import Role
from acp_conformance.core.events import Notification
from acp_conformance.endpoints.client import ClientCapabilities, ClientEndpoint, Sandbox
from acp_conformance.peer import Peer
from acp_conformance.transport.process import spawn


def _validator(validate: bool):  # type: ignore[no-untyped-def]
    if not validate:
        return None
    from acp_conformance.schema import locate_schema
    from acp_conformance.schema.validator import SchemaValidator

    return SchemaValidator(locate_schema().data)


async def run(validate: bool, round_trips: int, warmup: int, updates: int, agent: list[str]) -> None:
    validator = _validator(validate)
    with tempfile.TemporaryDirectory(prefix="acp-bench-") as tmp:
        t0 = time.perf_counter()
        async with spawn(agent, cwd=tmp) as transport:
            peer = Peer(
                transport,
                Role.CLIENT,
                validator=validator,
                timeout=120.0,
                stderr_tail=lambda: list(transport.stderr_tail),
            )
            client = ClientEndpoint(peer, capabilities=ClientCapabilities.none(), sandbox=Sandbox(tmp))
            # Counted as they arrive: a turn's ``updates`` holds only what the bounded event log
            # kept (its head and tail, see docs/hostile-peers.md), not all 10,000.
            seen = [0]

            def count(ev: Notification) -> None:
                if ev.method == "session/update":
                    seen[0] += 1

            peer.listeners.append(count)
            async with peer:
                await client.initialize()
                init_ms = (time.perf_counter() - t0) * 1e3
                sid = await client.new_session(tmp)
                for _ in range(warmup):
                    await client.prompt(sid, PING)
                await client.prompt(sid, updates_prompt(WARM_UPDATES))
                cpu = CpuClock(transport.pid)
                seen[0] = 0
                t = time.perf_counter()
                turn = await client.prompt(sid, updates_prompt(updates))
                received = seen[0]
                upd_seconds = time.perf_counter() - t
                agent_cpu_upd, client_cpu_upd = cpu.stop()
                if turn.stop_reason != "end_turn":
                    raise SystemExit(f"the long turn ended {turn.stop_reason!r}")
                mem = proc_status_kib(transport.pid)
                cpu = CpuClock(transport.pid)
                t = time.perf_counter()
                for _ in range(round_trips):
                    await client.prompt(sid, PING)
                rt_seconds = time.perf_counter() - t
                agent_cpu_rt, client_cpu_rt = cpu.stop()
                violations = peer.violations()
                if violations:
                    raise SystemExit(f"{len(violations)} violation(s), first: {violations[0]}")
            await transport.close_output()
            await transport.wait_exit(5.0)
    emit_result(
        init_ms=init_ms,
        round_trips=round_trips,
        rt_seconds=rt_seconds,
        updates=updates,
        updates_received=received,
        upd_seconds=upd_seconds,
        agent_pid=transport.pid,
        agent_vmhwm_kib=mem.get("VmHWM"),
        agent_vmrss_kib=mem.get("VmRSS"),
        agent_cpu_rt_s=agent_cpu_rt,
        client_cpu_rt_s=client_cpu_rt,
        agent_cpu_upd_s=agent_cpu_upd,
        client_cpu_upd_s=client_cpu_upd,
    )


if __name__ == "__main__":
    v, r, w, n, argv = parse_argv(sys.argv[1:])
    anyio.run(run, v, r, w, n, argv)
