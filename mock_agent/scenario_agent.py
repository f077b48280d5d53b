"""The mock agent playing a scenario file (``python -m mock_agent --scenario FILE``).

The scenario (``plays: agent``) runs beside the reference agent: requests
its ``answers`` map does not hold or script are served by ``MockAgent``'s
normal handlers (``auto``), so a file scripts only the interesting part -
say, a duplicate ``session/prompt`` response, or a permission request sent
after the client's cancel - and the rest is the reference behaviour.  When
the client closes our stdin the run ends: a JSON verdict (the scenario's
expectations plus the transcript-level clauses, judged on the client's
frames) goes to ``--verdict FILE`` and a one-line summary to stderr.

In-process use (tests, other projects' fixtures)::

    async with serve_in_memory(scenario) as (transport, agent):
        ...  # drive `transport` as the client; agent.result is the run
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio

from acp_conformance.checks import passive_results
from acp_conformance.scenario.engine import run_scenario
from acp_conformance.scenario.model import Scenario
from acp_conformance.scenario.result import ScenarioResult, Settings
from acp_conformance.transport.base import Transport
from mock_agent.agent import MockAgent

__all__ = ["ScenarioAgent", "make_scenario_agent", "run_pair", "scenario_agent_class", "serve_in_memory"]

log = logging.getLogger("mock_agent")


class ScenarioAgent(MockAgent):
    """``MockAgent`` plus a scenario played on the same connection."""

    #: After the client's EOF, how long a still-running scenario may take to notice.
    finish_grace: float = 5.0
    #: The passive checks judge the client's answers against the requests this agent sent.
    log_keeps_sent = True

    def __init__(
        self,
        scenario: Scenario,
        *,
        settings: Settings | None = None,
        verdict_path: str | None = None,
        command: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.scenario = scenario
        self.settings = settings or Settings()
        self.verdict_path = verdict_path
        self.command = command
        self.result: ScenarioResult | None = None
        self._played = anyio.Event()

    async def serve(self, transport: Transport) -> None:
        peer = self.make_peer(transport)
        self._peer = peer
        self.install_handlers(peer)
        try:
            async with peer:
                await self.on_start()
                peer.start_soon(self._play)
                await peer.closed.wait()
                log.info("stdin closed; finishing the scenario")
                with anyio.move_on_after(self.finish_grace):
                    await self._played.wait()
                await self.on_eof()
        finally:
            self.finish()
            try:
                await transport.close_output()
            except Exception:  # the other side may be long gone
                pass

    async def _play(self) -> None:
        try:
            self.result = await run_scenario(self.scenario, self.peer, settings=self.settings)
        finally:
            self._played.set()

    def finish(self) -> None:
        """Judge the client's frames too, and write the verdict."""
        if self.result is None:
            self.result = ScenarioResult(self.scenario, self.settings.seed or 0)
            self.result.end, self.result.reason = "inconclusive", "the connection ended before the scenario ran"
        self.result.passive = passive_results(self.peer.transcript, "client") if self._peer is not None else []
        verdict = self.result.verdict(command=self.command)
        if self.verdict_path:
            from acp_conformance.scenario.runner import write_verdict

            write_verdict(verdict, self.verdict_path)
        log.warning(
            "scenario %s: %s (%s)%s",
            self.scenario.scenario,
            verdict["verdict"].upper(),
            verdict["end"],
            f": {verdict['reason']}" if verdict["reason"] else "",
        )

    @property
    def exit_status(self) -> int:
        return self.result.exit_status() if self.result is not None else 3


def scenario_agent_class(base: type[MockAgent]) -> type[ScenarioAgent]:
    """``ScenarioAgent`` on top of another ``MockAgent`` subclass (e.g. a broken test agent)."""
    if issubclass(base, ScenarioAgent):
        return base
    if base is MockAgent:
        return ScenarioAgent
    return type(f"Scenario{base.__name__}", (ScenarioAgent, base), {})


@asynccontextmanager
async def serve_in_memory(
    scenario: Scenario | str | Path | None = None,
    *,
    agent_cls: type[MockAgent] = MockAgent,
    validator: Any = None,
    settings: Settings | None = None,
) -> AsyncIterator[tuple[Transport, MockAgent]]:
    """Run the mock agent (playing ``scenario`` if given) in this process; yield the client's end.

    Closing the yielded transport's output ends the agent (and its scenario).
    """
    from acp_conformance.transport.memory import memory_pair

    if isinstance(scenario, (str, Path)):
        from acp_conformance.scenario.loader import load_scenario

        scenario = load_scenario(scenario)
    client_end, agent_end = memory_pair()
    if scenario is not None:
        agent: MockAgent = scenario_agent_class(agent_cls)(scenario, settings=settings, validator=validator)
    else:
        agent = agent_cls(validator=validator)
    async with anyio.create_task_group() as tg:
        tg.start_soon(agent.serve, agent_end)
        try:
            yield client_end, agent
        finally:
            await client_end.close_output()
            with anyio.move_on_after(10):
                while True:
                    data = await client_end.receive()
                    if not data:
                        break
            tg.cancel_scope.cancel()


def make_scenario_agent(args: Any, agent_cls: type[MockAgent] = MockAgent) -> ScenarioAgent:
    """The agent ``python -m mock_agent --scenario FILE ...`` runs (``ScenarioError`` for a bad file)."""
    import shlex
    import sys

    from acp_conformance.errors import ScenarioError
    from acp_conformance.scenario.loader import load_scenario
    from acp_conformance.schema import load_validator

    scenario = load_scenario(args.scenario)
    if scenario.plays != "agent":
        raise ScenarioError(
            f"{args.scenario}: plays: {scenario.plays} - the mock agent plays scenarios with `plays: agent`; "
            "run this one against an agent: python -m mock_client --agent CMD --scenario FILE "
            "(or python -m acp_conformance.scenario run FILE --agent CMD)"
        )
    settings = Settings(seed=args.seed)
    if args.timeout is not None:
        settings.timeout = args.timeout
    validator = None if args.no_validate else load_validator(args.schema, warn=log.warning, flag="--schema")
    return scenario_agent_class(agent_cls)(
        scenario,
        settings=settings,
        verdict_path=args.verdict,
        command=shlex.join([sys.executable, "-m", "mock_agent", *sys.argv[1:]]),
        name=args.name,
        validator=validator,
    )


async def run_pair(
    client_scenario: Scenario,
    agent_scenario: Scenario | None = None,
    *,
    validator: Any = None,
    settings: Settings | None = None,
    sandbox: str | Path | None = None,
    agent_cls: type[MockAgent] = MockAgent,
) -> tuple[ScenarioResult, ScenarioResult | None]:
    """Play a ``plays: client`` scenario against the mock agent (itself playing ``agent_scenario``
    if given), in this process over memory streams; returns both sides' results.

    The client side is a ``ClientEndpoint`` (sandbox fs, virtual terminals) under the engine, exactly
    as ``python -m acp_conformance.scenario run`` plays it against a process.
    """
    import tempfile

    from acp_conformance.core.connection import Role
    from acp_conformance.endpoints.client import ClientCapabilities, ClientEndpoint, Sandbox
    from acp_conformance.peer import Peer

    settings = settings or Settings()
    with tempfile.TemporaryDirectory(prefix="acp-pair-") as tmp:
        root = Path(sandbox) if sandbox is not None else Path(tmp)
        async with serve_in_memory(agent_scenario, agent_cls=agent_cls, validator=validator, settings=settings) as (
            transport,
            agent,
        ):
            peer = Peer(transport, Role.CLIENT, validator=validator, timeout=settings.timeout)
            endpoint = ClientEndpoint(peer, capabilities=ClientCapabilities.none(), sandbox=Sandbox(root))
            async with peer:
                client_result = await run_scenario(
                    client_scenario, peer, endpoint=endpoint, sandbox=root, settings=settings
                )
                await transport.close_output()
                await peer.wait_closed(settings.timeout)
        client_result.passive = passive_results(peer.transcript, "agent")
    agent_result = agent.result if isinstance(agent, ScenarioAgent) else None
    return client_result, agent_result
