"""The implementations compared, as commands: one agent and one client driver per stack."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field

from bench.common import PEERS, PY, SDK_DIR, BenchError

#: The stack every ratio is taken against: our mocks with validation on, as in the product.
BASELINE = "mock-on"


@dataclass
class Stack:
    key: str
    label: str
    kind: str  # "ours", "sdk" or "floor"
    driver: list[str]
    agent: list[str]
    #: Why this stack cannot run here (None: it can).
    skip: str | None = None
    note: str = ""

    def argv(self, round_trips: int, warmup: int, updates: int) -> list[str]:
        return [*self.driver, str(round_trips), str(warmup), str(updates), *self.agent]


@dataclass
class ColdAgent:
    """An agent command whose spawn -> initialize response is timed."""

    key: str
    label: str
    argv: list[str]
    skip: str | None = None
    note: str = ""


@dataclass
class Tools:
    node: str | None
    raw_pipe: str | None
    raw_pipe_error: str | None
    py_sdk: str | None
    ts_sdk: bool
    workdir: str
    extra: dict[str, str] = field(default_factory=dict)


def discover_tools(workdir: str) -> Tools:
    """Find node, the SDKs, and compile the raw-pipe floor into ``workdir``."""
    node = shutil.which("node")
    raw, raw_error = compile_raw_pipe(workdir)
    try:
        import acp  # noqa: F401

        from bench.common import _dist_version

        py_sdk = _dist_version("agent-client-protocol") or "?"
    except ImportError:
        py_sdk = None
    return Tools(
        node=node,
        raw_pipe=raw,
        raw_pipe_error=raw_error,
        py_sdk=py_sdk,
        ts_sdk=(SDK_DIR / "package.json").is_file(),
        workdir=workdir,
    )


def compile_raw_pipe(workdir: str) -> tuple[str | None, str | None]:
    gcc = shutil.which("gcc") or shutil.which("cc")
    if gcc is None:
        return None, "no C compiler (gcc/cc) on PATH"
    out = os.path.join(workdir, "raw_pipe")
    try:
        done = subprocess.run(
            [gcc, "-O2", "-o", out, str(PEERS / "raw_pipe.c")],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, f"compiling raw_pipe.c failed: {exc}"
    if done.returncode != 0:
        return None, f"compiling raw_pipe.c failed: {done.stderr.strip()[-300:]}"
    return out, None


def e2e_stacks(tools: Tools) -> list[Stack]:
    py = [PY]
    no_node = None if tools.node else "node is not on PATH"
    no_ts = no_node or (None if tools.ts_sdk else f"{SDK_DIR} is missing (run `npm ci`)")
    no_py_sdk = (
        None if tools.py_sdk else "the Python SDK is not installed (pip install 'agent-client-protocol==0.12.1')"
    )
    raw = tools.raw_pipe
    return [
        Stack(
            "mock-on",
            "mock agent + our client, validation on",
            "ours",
            [*py, str(PEERS / "ours_client.py")],
            [*py, str(PEERS / "mock_bench_agent.py")],
            note="both ends validate every frame against the schema (the product)",
        ),
        Stack(
            "mock-off",
            "mock agent + our client, validation off",
            "ours",
            [*py, str(PEERS / "ours_client.py"), "--no-validate"],
            [*py, str(PEERS / "mock_bench_agent.py"), "--no-validate"],
            note="agent --no-validate, client validator=None",
        ),
        Stack(
            "ts-sdk",
            f"TypeScript SDK {_ts_version()}",
            "sdk",
            [tools.node or "node", str(PEERS / "ts_client.mjs")],
            [tools.node or "node", str(PEERS / "ts_agent.mjs")],
            skip=no_ts,
        ),
        Stack(
            "py-sdk",
            f"Python SDK {tools.py_sdk or ''}".strip(),
            "sdk",
            [*py, str(PEERS / "py_sdk_client.py")],
            [*py, str(PEERS / "py_sdk_agent.py")],
            skip=no_py_sdk,
        ),
        Stack(
            "naive-py",
            "naive Python (asyncio + json, no checks)",
            "floor",
            [*py, str(PEERS / "naive_client.py")],
            [*py, str(PEERS / "naive_agent.py")],
            note="what the interpreter alone costs",
        ),
        Stack(
            "raw-c",
            "raw pipe, C (no JSON work)",
            "floor",
            [raw or "raw_pipe", "client"],
            [raw or "raw_pipe", "agent"],
            skip=None if raw else tools.raw_pipe_error,
            note="one write() per frame, canned bytes",
        ),
    ]


def cold_agents(tools: Tools) -> list[ColdAgent]:
    py = [PY]
    stacks = {s.key: s for s in e2e_stacks(tools)}
    agents = [
        ColdAgent("mock-on", "`python -m mock_agent` (validation on)", [*py, "-m", "mock_agent"]),
        ColdAgent("mock-off", "`python -m mock_agent --no-validate`", [*py, "-m", "mock_agent", "--no-validate"]),
    ]
    shim = _python_shim()
    if shim is not None:
        agents.append(
            ColdAgent(
                "mock-on-shim",
                "`python -m mock_agent` via `python` on PATH",
                [shim, "-m", "mock_agent"],
                note=f"{shim} is a script (e.g. a pyenv shim), not the interpreter",
            )
        )
    for key in ("ts-sdk", "py-sdk", "naive-py", "raw-c"):
        s = stacks[key]
        agents.append(ColdAgent(key, s.label, s.agent, skip=s.skip))
    return agents


def _ts_version() -> str:
    import json

    try:
        return str(json.loads((SDK_DIR / "package.json").read_text())["version"])
    except (OSError, ValueError, KeyError):
        return "?"


def _python_shim() -> str | None:
    """``python`` on PATH when it is a script rather than an interpreter (pyenv, asdf...)."""
    found = shutil.which("python")
    if found is None:
        return None
    try:
        with open(found, "rb") as fh:
            magic = fh.read(4)
    except OSError:
        return None
    if magic.startswith(b"#!"):
        return found
    return None


def new_workdir() -> str:
    return tempfile.mkdtemp(prefix="acp-bench-")


def require(stack: Stack) -> None:
    if stack.skip:
        raise BenchError(stack.skip)
