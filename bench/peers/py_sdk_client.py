"""Benchmark client driver on the official Python SDK (``agent-client-protocol`` 0.12.1).

Public API only: ``spawn_agent_process`` + ``ClientSideConnection`` + a ``Client``
implementation counting ``session/update``.  Protocol: see ``_shared.py``.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
import time
from typing import Any

from _shared import PING, WARM_UPDATES, CpuClock, emit_result, parse_argv, proc_status_kib, updates_prompt
from acp import PROTOCOL_VERSION, Client, RequestError, spawn_agent_process, text_block
from acp.schema import ClientCapabilities, FileSystemCapabilities, Implementation


class CountingClient(Client):
    def __init__(self) -> None:
        self.updates = 0

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.updates += 1

    async def request_permission(self, *args: Any, **kwargs: Any) -> Any:
        raise RequestError.method_not_found("session/request_permission")


async def run(round_trips: int, warmup: int, updates: int, agent: list[str]) -> None:
    client = CountingClient()
    with tempfile.TemporaryDirectory(prefix="acp-bench-") as tmp:
        t0 = time.perf_counter()
        async with spawn_agent_process(client, agent[0], *agent[1:], cwd=tmp) as (conn, process):
            await conn.initialize(
                protocol_version=PROTOCOL_VERSION,
                client_capabilities=ClientCapabilities(
                    fs=FileSystemCapabilities(read_text_file=False, write_text_file=False), terminal=False
                ),
                client_info=Implementation(name="acp-bench", version="0"),
            )
            init_ms = (time.perf_counter() - t0) * 1e3
            sid = (await conn.new_session(cwd=tmp, mcp_servers=[])).session_id
            for _ in range(warmup):
                await conn.prompt(session_id=sid, prompt=[text_block(PING)])
            await conn.prompt(session_id=sid, prompt=[text_block(updates_prompt(WARM_UPDATES))])
            client.updates = 0
            cpu = CpuClock(process.pid)
            t = time.perf_counter()
            resp = await conn.prompt(session_id=sid, prompt=[text_block(updates_prompt(updates))])
            # prompt() returns once the connection has handled the turn's updates; be sure.
            while client.updates < updates and time.perf_counter() - t < 60:
                await asyncio.sleep(0)
            upd_seconds = time.perf_counter() - t
            agent_cpu_upd, client_cpu_upd = cpu.stop()
            if resp.stop_reason != "end_turn":
                raise SystemExit(f"the long turn ended {resp.stop_reason!r}")
            mem = proc_status_kib(process.pid)
            received = client.updates
            cpu = CpuClock(process.pid)
            t = time.perf_counter()
            for _ in range(round_trips):
                await conn.prompt(session_id=sid, prompt=[text_block(PING)])
            rt_seconds = time.perf_counter() - t
            agent_cpu_rt, client_cpu_rt = cpu.stop()
            process.stdin.close()
            try:
                await asyncio.wait_for(process.wait(), 5.0)
            except TimeoutError:
                process.kill()
    emit_result(
        init_ms=init_ms,
        round_trips=round_trips,
        rt_seconds=rt_seconds,
        updates=updates,
        updates_received=received,
        upd_seconds=upd_seconds,
        agent_pid=process.pid,
        agent_vmhwm_kib=mem.get("VmHWM"),
        agent_vmrss_kib=mem.get("VmRSS"),
        agent_cpu_rt_s=agent_cpu_rt,
        client_cpu_rt_s=client_cpu_rt,
        agent_cpu_upd_s=agent_cpu_upd,
        client_cpu_upd_s=client_cpu_upd,
    )


if __name__ == "__main__":
    _, r, w, n, argv = parse_argv(sys.argv[1:])
    asyncio.run(run(r, w, n, argv))
