"""Python floor, client side: asyncio subprocess + stdlib ``json``, no checks (see naive_agent.py)."""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile
import time
from typing import Any

from _shared import PING, WARM_UPDATES, CpuClock, emit_result, init_params, parse_argv, proc_status_kib, updates_prompt


async def run(round_trips: int, warmup: int, updates: int, agent: list[str]) -> None:
    with tempfile.TemporaryDirectory(prefix="acp-bench-") as tmp:
        t0 = time.perf_counter()
        proc = await asyncio.create_subprocess_exec(
            *agent, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, cwd=tmp, limit=1 << 24
        )
        assert proc.stdin is not None and proc.stdout is not None
        next_id = 0
        received = 0

        async def call(method: str, params: Any) -> Any:
            nonlocal next_id, received
            next_id += 1
            frame = {"jsonrpc": "2.0", "id": next_id, "method": method, "params": params}
            proc.stdin.write(json.dumps(frame).encode() + b"\n")  # type: ignore[union-attr]
            while True:
                msg = json.loads(await proc.stdout.readline())  # type: ignore[union-attr]
                if msg.get("id") == next_id:
                    return msg["result"]
                if msg.get("method") == "session/update":
                    received += 1

        await call("initialize", init_params())
        init_ms = (time.perf_counter() - t0) * 1e3
        sid = (await call("session/new", {"cwd": tmp, "mcpServers": []}))["sessionId"]

        def prompt(text: str) -> Any:
            return call("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": text}]})

        for _ in range(warmup):
            await prompt(PING)
        await prompt(updates_prompt(WARM_UPDATES))
        received = 0
        cpu = CpuClock(proc.pid)
        t = time.perf_counter()
        await prompt(updates_prompt(updates))
        upd_seconds = time.perf_counter() - t
        agent_cpu_upd, client_cpu_upd = cpu.stop()
        mem = proc_status_kib(proc.pid)
        got = received
        cpu = CpuClock(proc.pid)
        t = time.perf_counter()
        for _ in range(round_trips):
            await prompt(PING)
        rt_seconds = time.perf_counter() - t
        agent_cpu_rt, client_cpu_rt = cpu.stop()
        proc.stdin.close()
        try:
            await asyncio.wait_for(proc.wait(), 5.0)
        except TimeoutError:
            proc.kill()
    emit_result(
        init_ms=init_ms,
        round_trips=round_trips,
        rt_seconds=rt_seconds,
        updates=updates,
        updates_received=got,
        upd_seconds=upd_seconds,
        agent_pid=proc.pid,
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
