"""Teardown of an agent that never exits on stdin EOF: the wait after EOF is paid twice per run,
not once per test (``harness.base.ExitMemory``).  Not exiting on EOF is a MAY, judged by its own
test with its own wait; teardown judges nothing (our reader has stopped), so only time is saved."""

from __future__ import annotations

import sys
from pathlib import Path

import anyio
import pytest

from acp_conformance.harness import AgentConfig, AgentHarness
from acp_conformance.harness.base import exit_memory
from acp_conformance.schema.validator import SchemaValidator
from tests.hostile._run import PY, ROOT

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="process groups and signals")

GRACE = 2.0  # the harness's per-stage teardown wait with --acp-timeout >= 2


async def _teardowns(command: str, validator: SchemaValidator, tmp: Path, n: int) -> list[float]:
    exit_memory(command).outlived = 0  # the memory is per run; this test is its own run
    acp = AgentHarness(AgentConfig(command=command, timeout=3, startup_timeout=30), validator, tmp)
    took = []
    with anyio.fail_after(60):
        for _ in range(n):
            async with acp.connect():
                t0 = anyio.current_time()
            took.append(anyio.current_time() - t0)
    return took


@pytest.mark.anyio
async def test_an_agent_ignoring_eof_costs_the_eof_wait_twice_then_is_signalled_at_once(
    schema_validator: SchemaValidator, tmp_path: Path
) -> None:
    command = f"{PY} {ROOT / 'tests' / 'peers' / 'broken_agents.py'} never-exits"
    took = await _teardowns(command, schema_validator, tmp_path, 3)
    # The first two wait the whole stage (the agent cannot end it early); the third waits 0.2 s.
    assert took[0] >= GRACE and took[1] >= GRACE, took
    assert took[2] < GRACE, took
    assert exit_memory(command).outlived == 3


@pytest.mark.anyio
async def test_an_agent_exiting_on_eof_keeps_the_whole_wait(schema_validator: SchemaValidator, tmp_path: Path) -> None:
    command = f"{PY} -m mock_agent"
    await _teardowns(command, schema_validator, tmp_path, 3)
    assert exit_memory(command).outlived == 0
    assert exit_memory(command).eof_grace(GRACE) == GRACE
