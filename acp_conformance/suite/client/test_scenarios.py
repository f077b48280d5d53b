"""The client-direction scenario library (``scenarios/client/*.yaml``), run against the client under test.

Each file (``plays: agent``, not tagged ``not-in-suite``) is one test, bound
statically (through its ``pytest.param`` marks, which ``plugin.bindings``
reads) to the clauses its expectations name.  Every expectation's outcome is
recorded on its clauses with file, line, step, expected vs actual and the
transcript around it, as ``suite/agent/test_scenarios.py`` does for agents.

How the scenario and the harness share the connection
-----------------------------------------------------
The scenario engine runs in the agent role on the ``Peer`` of the connection
the client under test opened (``ClientHarness.connect``), *on top of* the
``AgentEndpoint`` that serves it, rather than on the raw relay connection:

* The ``AgentEndpoint`` answers what the file does not script - the
  handshake, ``session/new`` and the rest - as the reference agent does for
  ``python -m mock_agent --scenario``, and keeps judging the client on the
  clauses only the agent side sees (first request, session parameters,
  prompt gating).  The harness keeps its own duties: ``init.first`` with the
  client's stderr for a client that never connects, the peer info of the
  report, ending open turns and the transcript checks at teardown.  On the raw
  connection all of that would have to be rebuilt, or lost.
* The engine takes over only the methods the file's ``answers`` names.  Two
  of them are the endpoint's own business, so they are handed to it instead:
  a literal ``initialize`` result becomes the endpoint's ``AgentSetup`` (what
  the endpoint gates on - ``loadSession``, prompt and MCP capabilities - then
  agrees with what the client was told), and ``session/prompt: hold`` is what
  the endpoint does anyway with a prompt (it keeps the turn, so a scenario
  that stops early still gets the turn ended at teardown).  Prompts a file
  does not hold get a plain answer (a short message, ``end_turn``).  Any
  other policy is installed by the engine before it reads another frame; a
  request it should have answered that arrived before is INCONCLUSIVE.
* The engine's ``expect`` searches the whole connection from its start, so
  starting it after the harness saw ``initialize`` loses nothing.

The client's user
-----------------
The files expect frames only a client's *user* causes: ``session/cancel``
(the user stops the turn), a second ``session/prompt``, the end of the
connection.  The engine calls ``before_wait`` before each wait; there the
test makes the client act through its profile, exactly as the hand-written
tests do (``conn.cancel()``, ``conn.prompt()``), after a barrier request that
proves the client has read everything the agent sent before.  What a file
needs is read from it up front (an ``expect`` of ``session/cancel`` needs the
profile's cancel; one that must arrive ``before:`` our pending permission
request needs the client to hold permission requests; a second
``session/prompt`` needs a second prompt; a wait for EOF needs a client the
harness started), so a profile that cannot do it makes the test
NOT_APPLICABLE with the reason.  A race the run could not set up - the cancel
must cross a pending permission request, and the client never answered the
barrier, so whether it had read the request is unknown - is INCONCLUSIVE,
never PASS; so is every precondition of the file that does not hold.
"""

from __future__ import annotations

import copy
import fnmatch
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import pytest

from acp_conformance.clauses import registry
from acp_conformance.core import jsonrpc
from acp_conformance.core.events import Request
from acp_conformance.endpoints.agent import AgentSetup, PromptTurn
from acp_conformance.harness.client import ClientConnection, ClientHarness, Unsupported
from acp_conformance.results import Status, adjust
from acp_conformance.scenario.answers import settle
from acp_conformance.scenario.engine import Engine
from acp_conformance.scenario.library_index import library_entries
from acp_conformance.scenario.loader import load_scenario
from acp_conformance.scenario.model import (
    ExpectNothingStep,
    ExpectSpec,
    ExpectStep,
    NothingSpec,
    ResultPolicy,
    Scenario,
    SendStep,
    WaitSpec,
    WaitStep,
    iter_steps,
)
from acp_conformance.scenario.result import Outcome, ScenarioResult, Settings
from acp_conformance.suite._support import conclude
from acp_conformance.suite.client._helpers import end_session, inconclusive, not_applicable, require

pytestmark = pytest.mark.anyio

#: The text of a second prompt the user types.
SECOND_PROMPT = "and once more, please"


def _object(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


@dataclass
class ScriptedSetup(AgentSetup):
    """An ``AgentSetup`` that answers ``initialize`` with exactly the file's result.

    The capability fields are derived from that result, so the endpoint's gating
    checks (``session/load``, prompt content, MCP transports) judge the client on
    what it was actually told.
    """

    result: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_result(cls, result: dict[str, Any]) -> ScriptedSetup:
        caps = _object(result.get("agentCapabilities"))
        prompt = _object(caps.get("promptCapabilities"))
        mcp = _object(caps.get("mcpCapabilities"))
        sessions = caps.get("sessionCapabilities")
        setup = cls(
            protocol_version=result.get("protocolVersion", 1),
            load_session=caps.get("loadSession") is True,
            image=prompt.get("image") is True,
            audio=prompt.get("audio") is True,
            embedded_context=prompt.get("embeddedContext") is True,
            mcp_http=mcp.get("http") is True,
            mcp_sse=mcp.get("sse") is True,
            session_capabilities=dict(sessions) if isinstance(sessions, dict) else {},
            auth_methods=[m for m in result.get("authMethods") or [] if isinstance(m, dict)],
            result=copy.deepcopy(result),
        )
        if isinstance(result.get("agentInfo"), dict):
            setup.agent_info = dict(result["agentInfo"])
        return setup

    def initialize_result(self, client_capabilities: dict[str, Any] | None = None) -> dict[str, Any]:
        return copy.deepcopy(self.result)  # the file's answer, as written


@dataclass(frozen=True)
class Plan:
    """What playing one file in the client suite takes, read from the file before anything runs."""

    #: What the engine plays: the file minus the answers handed to the endpoint.
    scenario: Scenario
    setup: AgentSetup
    #: The file holds the client's prompts (the endpoint keeps each turn open for it).
    holds_prompts: bool
    #: Driver actions the profile must offer (``ClientHarness.unsupported``).
    actions: tuple[str, ...]
    #: Permission policy the client is started with (None: the profile's default).
    permission: str | None
    #: A step waits for the client to close the connection: its user ends the session.
    ends_session: bool
    #: Our requests a cancel must cross while they are pending at the client.
    crossed: frozenset[str]


def _is_prompt(spec: ExpectSpec) -> bool:
    return spec.request is not None and fnmatch.fnmatchcase("session/prompt", spec.request)


def _is_cancel(spec: ExpectSpec) -> bool:
    return spec.notification is not None and fnmatch.fnmatchcase("session/cancel", spec.notification)


def _waits_for_eof(spec: Any) -> bool:
    return (isinstance(spec, NothingSpec) and spec.until == "eof") or (isinstance(spec, WaitSpec) and bool(spec.eof))


def plan(scenario: Scenario) -> Plan:
    """How the client suite plays ``scenario``; ``ValueError`` for a file it cannot play (at collection)."""
    setup: AgentSetup = AgentSetup()
    holds = False
    answers: dict[str, Any] = {}
    for method, policy in scenario.answers.items():
        if method == "initialize":
            if not isinstance(policy, ResultPolicy) or b"{{" in orjson.dumps(policy.result):
                raise ValueError(
                    f"{scenario.source}: answers: initialize: the client suite answers initialize itself (the "
                    "harness judges the handshake) and can only take a literal {result: ...}; run this file with "
                    "python -m mock_agent --scenario, or tag it not-in-suite"
                )
            if not isinstance(policy.result, dict):
                raise ValueError(f"{scenario.source}: answers: initialize: the result must be an object")
            setup = ScriptedSetup.from_result(policy.result)
        elif method == "session/prompt" and policy in ("hold", "never"):
            holds = True
        elif policy != "auto":
            answers[method] = policy
    permissions: set[str] = set()
    prompts = 0
    cancel = False
    crossed: set[str] = set()
    ends = False
    for _, step in iter_steps(scenario.steps):
        if isinstance(step, SendStep) and step.send.request == "session/request_permission" and step.send.as_:
            permissions.add(step.send.as_)
        elif isinstance(step, ExpectStep):
            spec = step.expect
            if _is_prompt(spec):
                prompts += 1
            elif _is_cancel(spec):
                cancel = True
                if spec.before in permissions:
                    crossed.add(spec.before)
        elif isinstance(step, ExpectNothingStep) and _waits_for_eof(step.expect_nothing):
            ends = True
        elif isinstance(step, WaitStep) and _waits_for_eof(step.wait):
            ends = True
    wanted = (("prompt", prompts > 0), ("second-prompt", prompts > 1), ("cancel", cancel))
    actions = [action for action, needed in wanted if needed]
    permission = "hold" if crossed else None
    if permission:
        actions.append(f"permission:{permission}")
    return Plan(
        scenario=scenario.model_copy(update={"answers": answers}),
        setup=setup,
        holds_prompts=holds,
        actions=tuple(actions),
        permission=permission,
        ends_session=ends,
        crossed=frozenset(crossed),
    )


def _library() -> list[Any]:
    # A bad library file, or one this suite cannot play (plan), is a collection error naming file and line.
    return [
        pytest.param(e.path, marks=pytest.mark.acp_clause(*e.clauses), id=e.scenario)
        for e in library_entries("client", check=_playable)
        if e.plays == "agent" and "not-in-suite" not in e.tags
    ]


def _playable(scenario: Scenario) -> None:
    if scenario.plays == "agent" and "not-in-suite" not in scenario.tags:
        plan(scenario)


SCENARIOS = _library()


class User:
    """The client's user, as a file needs one: ``before_wait`` of the engine.

    Right before the scenario waits for a frame only a user causes, the user acts
    through the profile: a cancel before ``session/cancel`` is expected, another
    prompt before a second ``session/prompt``, the end of the session before EOF.
    Each act comes after a barrier (the client answered a request sent after
    everything else, so it has read all of it).
    """

    def __init__(self, acp: ClientHarness, conn: ClientConnection, how: Plan) -> None:
        self.acp = acp
        self.conn = conn
        self.plan = how
        self.prompts_expected = 0
        self.cancelled = False
        self.ended = False

    async def __call__(self, path: str, spec: Any) -> str | None:
        if isinstance(spec, ExpectSpec) and _is_prompt(spec):
            self.prompts_expected += 1
            sent = sum(1 for e in self.conn.peer.events if isinstance(e, Request) and e.method == "session/prompt")
            if self.prompts_expected > 1 and sent < self.prompts_expected:
                await self._barrier()
                await self.conn.prompt(SECOND_PROMPT)
        elif isinstance(spec, ExpectSpec) and _is_cancel(spec) and not self.cancelled:
            self.cancelled = True
            read = await self._barrier()
            if not read and spec.before in self.plan.crossed:
                return (
                    f"the client never answered the barrier request, so whether it had read {spec.before!r} "
                    "before its user cancelled is unknown: the race could not be set up"
                )
            await self.conn.cancel()
        elif _waits_for_eof(spec) and not self.ended:
            self.ended = True
            await end_session(self.acp, self.conn)
        return None

    async def _barrier(self) -> bool:
        if self.conn.peer.closed.is_set():
            return False
        return await self.conn.agent.barrier()


async def _plain_turn(turn: PromptTurn) -> None:
    """A prompt the file does not script gets what a plain agent gives: a short answer, ``end_turn``."""
    await turn.say("Hello from the scenario agent.")
    await turn.end()


def _where(result: ScenarioResult, outcome: Outcome) -> str:
    source = result.scenario.source
    return f"{source}:{outcome.line} {outcome.step}" if outcome.line else f"{source} {outcome.step}"


def _status_for(status: Status, clause: str) -> Status:
    """An outcome's status on one of its clauses (a missed SHOULD is a WARN, never a FAIL)."""
    return adjust(registry().get(clause), status)


def _record(acp: ClientHarness, result: ScenarioResult) -> None:
    """Every expectation's outcome on each of its clauses, located in the file; then what no expectation
    decided (not reached, a branch not taken, the whole file not applicable).

    The undecided ones are recorded explicitly, not left to the skip that follows: a stream-level FAIL
    raised when the connection closes replaces that skip, and the plugin would then count the test's
    unrecorded clauses as passed.
    """
    for o in result.outcomes:
        where = _where(result, o)
        message = o.message if o.message.startswith(result.scenario.source) else f"{where}: {o.message}"
        for cid in o.clauses:
            acp.record(cid, _status_for(o.status, cid), message, o.evidence)
    judged = {c for o in result.outcomes for c in o.clauses}
    for r in result.scenario_results():
        if r.clause not in judged:
            acp.record(r.clause, r.status, r.message, r.evidence)


def _close_answered_turns(conn: ClientConnection) -> None:
    """Turns the scenario answered itself are over: teardown must not answer them again."""
    pending = {jsonrpc.id_key(rid) for rid, _ in conn.peer.conn.pending_incoming}
    for turn in conn.agent.turns:
        if jsonrpc.id_key(turn.request.id) not in pending:
            turn.answered = True


@pytest.mark.parametrize("path", SCENARIOS)
async def test_scenario(acp_client: ClientHarness, path: Path) -> None:
    scenario = load_scenario(path)
    how = plan(scenario)
    if how.ends_session and acp_client.mode != "auto":
        not_applicable(
            "the scenario judges the whole connection, up to the client's EOF; in agent-initiated and manual "
            "modes the editor keeps its agent running"
        )
    require(acp_client, *how.actions)
    config = acp_client.config
    settings = Settings(timeout=config.timeout, startup_timeout=config.startup_timeout)
    async with acp_client.connect(how.setup, permission=how.permission) as conn:
        if not how.holds_prompts:
            conn.agent.turn_script = _plain_turn
            for turn in list(conn.agent.turns):  # a prompt that came with the handshake
                if not turn.answered:
                    conn.peer.start_soon(_plain_turn, turn)
        user = User(acp_client, conn, how)
        engine = Engine(how.scenario, conn.peer, sandbox=conn.sandbox, settings=settings, before_wait=user)
        # No await from here to the engine installing its answers: every later frame is the engine's.
        taken_over = len(conn.peer.events)
        try:
            result = await engine.run()
        except Unsupported as exc:
            not_applicable(str(exc))
        finally:
            _close_answered_turns(conn)
        await settle(conn.peer, scenario)  # the file's own answers: prompts it holds are not waited for
        early = [
            e
            for e in list(conn.peer.events)[:taken_over]
            if isinstance(e, Request) and e.method in how.scenario.answers
        ]
        if early:
            inconclusive(
                f"the client sent {early[0].method} before the scenario took over the connection, so it was "
                "answered by the suite's agent, not as the file says"
            )
        # Recorded before the connection closes: a stream-level finding raised on exit must not
        # hide what the expectations found (the same defect often breaks both).
        _record(acp_client, result)
    conclude(result)
