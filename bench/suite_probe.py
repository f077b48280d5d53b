"""pytest plugin (``-p bench.suite_probe``) that counts and times the suite's agent processes.

Used in the ``suite`` section's separate *probe* run (never in its timed runs) and in every
run of the ``real`` section, whose process counts come from it (its cost, one awaited wrapper
per read, is in those times; bench/real.py).  It wraps ``acp_conformance.transport.process.spawn``
(wherever a module imported it by name) and appends one JSON line per agent process to the file named by
``$ACP_BENCH_PROBE``: time to the process being started, to its first output (normally
the ``initialize`` answer), and the teardown after the test let go.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import acp_conformance.transport.process as _process

_ORIGINAL = _process.spawn
_OUT = os.environ.get("ACP_BENCH_PROBE")


@asynccontextmanager
async def _probed_spawn(*args: Any, **kwargs: Any) -> AsyncIterator[Any]:
    t0 = time.perf_counter()
    first: float | None = None
    started = released = t0
    async with _ORIGINAL(*args, **kwargs) as transport:
        started = time.perf_counter()
        receive = transport.receive

        async def probed_receive() -> bytes:
            nonlocal first
            data: bytes = await receive()
            if first is None and data:
                first = time.perf_counter()
            return data

        transport.receive = probed_receive
        try:
            yield transport
        finally:
            released = time.perf_counter()
    done = time.perf_counter()
    if _OUT:
        record = {
            "pid": os.getpid(),
            "start_ms": (started - t0) * 1e3,
            "first_output_ms": ((first or released) - t0) * 1e3,
            "life_ms": (released - t0) * 1e3,
            "teardown_ms": (done - released) * 1e3,
        }
        with open(_OUT, "a") as fh:
            fh.write(json.dumps(record) + "\n")


def _install() -> None:
    """Rebind ``spawn`` in every loaded ``acp_conformance`` module that imported it."""
    for name, module in list(sys.modules.items()):
        if (name == "acp_conformance" or name.startswith("acp_conformance.")) and getattr(
            module, "spawn", None
        ) is _ORIGINAL:
            module.spawn = _probed_spawn  # type: ignore[attr-defined]


def pytest_configure(config: Any) -> None:
    import acp_conformance.harness  # noqa: F401  (the agent suite's user of spawn)

    _install()


def pytest_collection_finish(session: Any) -> None:
    _install()  # modules the tests imported meanwhile
