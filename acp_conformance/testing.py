"""Fixtures for other projects' own tests, with no ``--acp-*`` option needed.

Enable them in a ``conftest.py``::

    pytest_plugins = ["acp_conformance.testing"]

* ``acp_mock_agent``: command lines of the reference agent for *your client* to launch
  (plain, playing a scenario file, or requiring authentication);
* ``acp_model_stub``: a scripted model API (``anthropic`` / ``openai``) on 127.0.0.1, for adapter
  authors whose agent wraps a model: full turns with no key and no network;
* ``acp_drive_agent``: drives *your agent* through real turns with the reference client and
  returns what happened, the violations it saw included; ``run.raise_for_violations()`` turns
  them into a test failure.

The mock fixtures run the mocks as commands, the way a user would, so nothing here depends on the
mocks' internals (and the suite's rule holds: ``acp_conformance`` never imports them); the
reference agent *in-process* is ``mock_agent.fixtures.acp_inprocess_agent``, the mocks' own
plugin. Every run has a deadline, and its processes end with it (even when the test run is killed).
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from acp_conformance._proctree import die_with_parent

if TYPE_CHECKING:
    from acp_conformance.model_stub import ModelStub

__all__ = ["AgentRun", "MockAgentCommand", "acp_drive_agent", "acp_mock_agent", "acp_model_stub"]


class MockAgentCommand:
    """Builds command lines for ``python -m mock_agent`` (this interpreter, so its packages)."""

    def __call__(
        self, *, scenario: str | Path | None = None, require_auth: bool = False, args: Sequence[str] = ()
    ) -> str:
        argv = [sys.executable, "-m", "mock_agent"]
        if scenario is not None:
            argv += ["--scenario", str(scenario)]
        if require_auth:
            argv.append("--require-auth")
        return shlex.join([*argv, *args])


@dataclass
class AgentRun:
    """One run of the reference client against an agent: its exit status and its JSON account."""

    command: str
    returncode: int
    report: dict[str, Any]
    stderr: str

    @property
    def violations(self) -> list[Any]:
        """What the client saw the agent break (schema, framing, ids, capability gating)."""
        found: list[Any] = self.report.get("agent_violations") or []
        return found

    @property
    def turns(self) -> list[dict[str, Any]]:
        """Each prompt turn: the stop reason, the updates, the permission requests."""
        turns: list[dict[str, Any]] = self.report.get("turns") or []
        return turns

    def raise_for_violations(self) -> None:
        """Fail the calling test when the agent broke the protocol or the run did not complete."""
        if self.violations:
            lines = "\n".join(f"- {json.dumps(v)[:500]}" for v in self.violations[:20])
            pytest.fail(f"{self.command}: {len(self.violations)} ACP violation(s):\n{lines}", pytrace=False)
        if self.returncode != 0:
            pytest.fail(
                f"{self.command}: the reference client exited {self.returncode}: "
                f"{'; '.join(self.report.get('errors') or []) or self.stderr[-2000:]}",
                pytrace=False,
            )


def _die_with_us() -> None:
    """In the child, before exec: the kernel kills it when we die (Linux; elsewhere a no-op)."""
    die_with_parent()


def _kill_group(proc: subprocess.Popen[str]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    if proc.poll() is None:
        proc.wait(timeout=10)


@pytest.fixture
def acp_mock_agent() -> MockAgentCommand:
    """Command lines of the reference ACP agent, for the client under test to launch."""
    return MockAgentCommand()


@pytest.fixture
def acp_drive_agent(tmp_path: Path) -> Callable[..., AgentRun]:
    """``drive(agent_command, prompt="hello", caps="fs,terminal", timeout=60, args=())``: run
    ``python -m mock_client`` against the agent and return the :class:`AgentRun`."""
    counter = iter(range(1, 1_000_000))

    def drive(
        agent: str,
        prompt: str = "hello",
        *,
        caps: str = "fs,terminal",
        timeout: float = 60.0,
        args: Sequence[str] = (),
    ) -> AgentRun:
        n = next(counter)
        report = tmp_path / f"acp-run-{n}.json"
        work = tmp_path / f"acp-run-{n}"
        work.mkdir()
        argv = [sys.executable, "-m", "mock_client", "--agent", agent, "--prompt", prompt, "--caps", caps]
        argv += ["--cwd", str(work), "--report", str(report), "--quiet", *args]
        # A session of its own: at the deadline the client, the agent and anything the agent
        # started go down together.
        # And tied to this process: if the test run is killed (SIGKILL: no teardown), the kernel
        # kills the client, whose watchdog then kills the agent's tree.
        proc = subprocess.Popen(
            argv,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=work,
            start_new_session=True,
            preexec_fn=_die_with_us,
        )
        try:
            _, stderr = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            pytest.fail(f"{agent}: no complete run within {timeout} s (the client and agent were stopped)")
        finally:
            _kill_group(proc)
        data = json.loads(report.read_text("utf-8")) if report.is_file() else {"errors": ["no report written"]}
        return AgentRun(agent, proc.returncode, data, stderr)

    return drive


@pytest.fixture
def acp_model_stub() -> Iterator[Callable[..., ModelStub]]:
    """``stub = acp_model_stub("anthropic" | "openai", script=None)``: a scripted model API on
    127.0.0.1 for the test's duration, for adapter authors.  Start your adapter with
    ``env={**os.environ, **stub.env}`` (base URL, a dummy key, and proxies that send any other
    host to the stub, where the attempt is recorded and refused); afterwards ``stub.model_requests``
    are the calls it made and ``stub.evidence()`` says them in one line each.  It serves from a
    thread of its own, so synchronous tests can use it."""
    from anyio.from_thread import start_blocking_portal

    from acp_conformance.model_stub import ModelStub

    with contextlib.ExitStack() as stack:
        portal = stack.enter_context(start_blocking_portal("asyncio"))

        def start(kind: str = "anthropic", script: Any = None) -> ModelStub:
            return stack.enter_context(portal.wrap_async_context_manager(ModelStub(kind, script)))

        yield start
