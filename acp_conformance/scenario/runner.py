"""Ready-made ways to run a scenario: against an agent command, or from a file to a verdict.

``run_against_agent`` starts the agent (its own process group, a sandbox
directory as session cwd), plays a ``plays: client`` scenario with a
``ClientEndpoint`` underneath, and judges the transcript on the passive
(transcript-level) clauses too.  ``run_scenario_file`` is the whole thing
for a command line: file in, JSON verdict out (``python -m mock_client
--agent CMD --scenario FILE`` calls it).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

import anyio
import orjson

from acp_conformance.checks import passive_results
from acp_conformance.core.connection import Role
from acp_conformance.endpoints.client import ClientCapabilities, ClientEndpoint, Sandbox
from acp_conformance.errors import ConfigurationError, ScenarioError
from acp_conformance.peer import Peer
from acp_conformance.scenario.engine import run_scenario
from acp_conformance.scenario.loader import load_scenario
from acp_conformance.scenario.model import Scenario
from acp_conformance.scenario.result import ScenarioResult, Settings
from acp_conformance.schema import load_validator
from acp_conformance.transcript import Transcript
from acp_conformance.transport.base import Transport
from acp_conformance.transport.process import spawn

__all__ = ["play_against", "run_against_agent", "run_scenario_file", "write_verdict"]


async def run_against_agent(
    scenario: Scenario,
    command: str | list[str],
    *,
    validator: Any = None,
    workdir: str | os.PathLike[str] | None = None,
    settings: Settings | None = None,
    env: dict[str, str] | None = None,
    cwd: str | None = None,
) -> ScenarioResult:
    """Start the agent, play ``scenario`` (plays: client) against it, judge the transcript."""
    if scenario.plays != "client":
        raise ScenarioError(
            f"{scenario.source}: plays: {scenario.plays} - a scenario run against an agent must play the client"
        )
    settings = settings or Settings()
    label = command if isinstance(command, str) else " ".join(command)
    transcript = Transcript(label=label)
    with tempfile.TemporaryDirectory(prefix="acp-scenario-") as tmp:
        root = Path(workdir) if workdir is not None else Path(tmp)
        sandbox_dir = root / "sandbox"
        sandbox_dir.mkdir(parents=True, exist_ok=True)

        def on_stderr(line: str) -> None:
            transcript.add("stderr", line)

        async with spawn(command, env=env, cwd=cwd, on_stderr=on_stderr) as transport:
            peer = Peer(
                transport,
                Role.CLIENT,
                validator=validator,
                transcript=transcript,
                timeout=settings.timeout,
                stderr_tail=lambda: list(transport.stderr_tail),
            )
            endpoint = ClientEndpoint(peer, capabilities=ClientCapabilities.none(), sandbox=Sandbox(sandbox_dir))
            async with peer:
                result = await run_scenario(scenario, peer, endpoint=endpoint, sandbox=sandbox_dir, settings=settings)
    result.passive = passive_results(transcript, "agent")
    result.transcript = transcript
    return result


async def play_against(
    scenario: Scenario,
    transport: Transport,
    *,
    validator: Any = None,
    settings: Settings | None = None,
    sandbox: str | os.PathLike[str] | None = None,
) -> ScenarioResult:
    """Play a ``plays: client`` scenario over any transport (e.g. one end of ``memory_pair()``
    whose other end an in-process agent serves); the transcript is judged too."""
    settings = settings or Settings()
    with tempfile.TemporaryDirectory(prefix="acp-scenario-") as tmp:
        root = Path(sandbox) if sandbox is not None else Path(tmp)
        peer = Peer(transport, Role.CLIENT, validator=validator, timeout=settings.timeout)
        endpoint = ClientEndpoint(peer, capabilities=ClientCapabilities.none(), sandbox=Sandbox(root))
        async with peer:
            result = await run_scenario(scenario, peer, endpoint=endpoint, sandbox=root, settings=settings)
    result.passive = passive_results(peer.transcript, "agent")
    return result


def write_verdict(verdict: dict[str, Any], path: str | os.PathLike[str]) -> None:
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(orjson.dumps(verdict, option=orjson.OPT_INDENT_2) + b"\n")


def run_scenario_file(
    path: str | os.PathLike[str],
    agent_command: str | list[str],
    *,
    verdict_path: str | os.PathLike[str] | None = None,
    transcript_path: str | os.PathLike[str] | None = None,
    schema: str | None = None,
    timeout: float | None = None,
    startup_timeout: float | None = None,
    seed: int | None = None,
    env: dict[str, str] | None = None,
    cwd: str | None = None,
) -> dict[str, Any]:
    """Load ``path``, run it against ``agent_command``, return (and optionally write) the JSON verdict.

    Raises ``ScenarioError`` for a bad file and ``ConfigurationError`` for a
    command that cannot start or a missing schema; the verdict's
    ``exit_status`` is what a command line should exit with.
    """
    scenario = load_scenario(path)
    validator = load_validator(schema, required=True)
    settings = Settings(seed=seed)
    if timeout is not None:
        settings.timeout = timeout
    if startup_timeout is not None:
        settings.startup_timeout = startup_timeout
    label = agent_command if isinstance(agent_command, str) else " ".join(agent_command)
    try:
        result = anyio.run(
            lambda: run_against_agent(scenario, agent_command, validator=validator, settings=settings, env=env, cwd=cwd)
        )
    except ConfigurationError:
        raise
    tpath = None
    if transcript_path is not None and result.transcript is not None:
        Path(transcript_path).parent.mkdir(parents=True, exist_ok=True)
        Path(transcript_path).write_bytes(result.transcript.to_jsonl())
        tpath = str(transcript_path)
    verdict = result.verdict(command=label, transcript_path=tpath)
    if verdict_path is not None:
        write_verdict(verdict, verdict_path)
    return verdict
