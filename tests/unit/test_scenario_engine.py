"""The engine, in process over memory streams against the reference agent (and small variations)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from acp_conformance.results import Status
from acp_conformance.scenario.engine import ScenarioResult, Settings
from acp_conformance.scenario.library_index import library_dir
from acp_conformance.scenario.loader import load_scenario, load_text
from acp_conformance.schema.validator import SchemaValidator
from mock_agent import MockAgent, Turn
from mock_agent.agent import CANCELLED
from mock_agent.scenario_agent import run_pair

pytestmark = pytest.mark.anyio

FAST = Settings(timeout=3.0, startup_timeout=3.0)

HANDSHAKE = """
  - call:
      request: initialize
      params: {protocolVersion: 1, clientCapabilities: {}, clientInfo: {name: t, version: "1"}}
      precondition: handshake
  - call:
      request: session/new
      params: {cwd: "{{sandbox}}", mcpServers: []}
      result: {sessionId: $capture(session)}
      precondition: a session
"""


def scenario(steps: str, *, head: str = "") -> Any:
    return load_text(f"scenario: t\nplays: client\n{head}steps:\n{HANDSHAKE}{steps}", "t.yaml")


async def play(text_or_scenario: Any, agent_cls: type[MockAgent] = MockAgent, **kw: Any) -> ScenarioResult:
    head = kw.pop("head", "")
    s = scenario(text_or_scenario, head=head) if isinstance(text_or_scenario, str) else text_or_scenario
    result, _ = await run_pair(s, agent_cls=agent_cls, settings=kw.pop("settings", FAST), **kw)
    return result


def statuses(result: ScenarioResult) -> dict[str, str]:
    return {r.clause: r.status.value for r in result.scenario_results()}


AGENT_LIBRARY = sorted((library_dir() / "agent").glob("*.yaml"))


@pytest.mark.parametrize("path", AGENT_LIBRARY, ids=lambda p: p.stem)
async def test_library_scenario_passes_against_the_reference_agent(
    path: Path, schema_validator: SchemaValidator
) -> None:
    result = await play(load_scenario(path), validator=schema_validator)
    assert result.end == "completed", result.summary()
    assert not [o for o in result.outcomes if o.status is not Status.PASS], result.summary()
    assert not [r for r in result.passive if r.status in (Status.FAIL, Status.WARN)], result.summary()


async def test_a_plain_turn_with_captures_and_faker() -> None:
    result = await play(
        """
  - send:
      request: session/prompt
      params: {sessionId: "{{session}}", prompt: [{type: text, text: "{{fake.sentence}}"}]}
      as: turn
  - expect:
      notification: session/update
      params: {sessionId: "{{session}}", update: {sessionUpdate: agent_message_chunk, content: {text: $capture(first)}}}
      clause: prompt.updates.session-id
  - expect: {response: turn, result: {stopReason: end_turn}, clause: prompt.response.stop-reason}
  - check: {ref: first, matches: "You said: ", clause: content.text.baseline}
"""
    )
    assert result.verdict_word() == "pass", result.summary()
    assert len(result.outcomes) == 3


async def test_faker_values_are_reproducible_from_the_seed() -> None:
    steps = """
  - call:
      request: session/prompt
      params: {sessionId: "{{session}}", prompt: [{type: text, text: "{{fake.sentence}} {{fake.uuid4}}"}]}
      precondition: a turn
"""
    texts = []
    for _ in range(2):
        result = await play(scenario(steps, head="seed: 42\n"))
        sent = [e.message for e in result.transcript.entries if e.direction == "out" and e.method == "session/prompt"]
        texts.append(sent[0]["params"]["prompt"][0]["text"])
    assert texts[0] == texts[1]
    assert result.seed == 42


async def test_a_mismatching_response_fails_at_once_with_expected_vs_actual() -> None:
    result = await play(
        """
  - send: {request: session/prompt, params: {sessionId: "{{session}}", prompt: [{type: text, text: hi}]}, as: turn}
  - expect: {response: turn, result: {stopReason: cancelled}, within: 30s, clause: cancel.stop-reason}
  - check: {ref: seed, matches: $integer, clause: schema.valid}
"""
    )
    assert result.end == "failed"
    assert result.duration < 10  # a response is unique: no waiting for the deadline
    [outcome] = [o for o in result.outcomes if o.status is Status.FAIL]
    assert outcome.line == 16 and outcome.step == "steps[3]"
    assert 'at /result/stopReason: expected "cancelled", got "end_turn"' in outcome.message
    assert "t.yaml:16" in outcome.message
    assert '"stopReason":"end_turn"' in outcome.evidence  # the transcript around it
    assert statuses(result) == {"cancel.stop-reason": "FAIL", "schema.valid": "INCONCLUSIVE"}


async def test_order_is_asserted() -> None:
    result = await play(
        """
  - send: {request: session/prompt, params: {sessionId: "{{session}}", prompt: [{type: text, text: hi}]}, as: turn}
  - expect: {response: turn, clause: prompt.response.stop-reason}
  - expect:
      notification: session/update
      params: {update: {sessionUpdate: agent_message_chunk}}
      within: 300ms
      clause: prompt.updates.before-response
"""
    )
    assert statuses(result)["prompt.updates.before-response"] == "WARN"  # a SHOULD: WARN, and the run goes on
    assert result.end == "completed"


async def test_before_fails_as_soon_as_the_bounding_frame_arrives() -> None:
    result = await play(
        """
  - send: {request: session/prompt, params: {sessionId: "{{session}}", prompt: [{type: text, text: hi}]}, as: turn}
  - expect:
      request: session/request_permission
      before: turn
      within: 30s
      clause: perm.may-request
"""
    )
    assert result.duration < 10
    assert "'turn' arrived first" in result.outcomes[-1].message


async def test_a_failed_precondition_is_inconclusive_not_fail() -> None:
    result = await play(
        """
  - send: {request: session/prompt, params: {sessionId: "{{session}}", prompt: [{type: text, text: hi}]}, as: turn}
  - expect: {request: session/request_permission, before: turn, precondition: the agent asks permission}
  - expect: {response: turn, clause: prompt.response.stop-reason}
"""
    )
    assert result.end == "inconclusive"
    assert "precondition not met" in result.reason and "the agent asks permission" in result.reason
    assert statuses(result) == {"prompt.response.stop-reason": "INCONCLUSIVE"}
    assert result.exit_status() == 3


class NoLoadSession(MockAgent):
    def agent_capabilities(self) -> dict[str, Any]:
        return {**super().agent_capabilities(), "loadSession": False}


async def test_capability_branches_make_clauses_not_applicable() -> None:
    result = await play(load_scenario(library_dir() / "agent" / "load-replay-history.yaml"), agent_cls=NoLoadSession)
    assert result.end == "not_applicable"
    assert set(statuses(result).values()) == {"NOT_APPLICABLE"}
    assert result.exit_status() == 0


class InvalidStopReason(MockAgent):
    validate_outbound = False

    def prompt_result(self, turn: Turn, stop_reason: str) -> dict[str, Any]:
        return {"stopReason": "done"}


async def test_an_expectation_over_a_garbled_frame_is_inconclusive(schema_validator: SchemaValidator) -> None:
    result = await play(
        """
  - send: {request: session/prompt, params: {sessionId: "{{session}}", prompt: [{type: text, text: hi}]}, as: turn}
  - expect: {response: turn, as: done, clause: prompt.response.stop-reason}
  - check: {ref: done, matches: {result: {stopReason: end_turn}}, clause: cancel.no-error}
""",
        agent_cls=InvalidStopReason,
        validator=schema_validator,
    )
    assert statuses(result)["cancel.no-error"] == "INCONCLUSIVE"
    assert "not judged" in result.outcomes[-1].message
    assert any(r.status is Status.FAIL for r in result.passive)  # the breach itself: the transcript checks


async def test_parallel_branches_and_a_forced_interleaving() -> None:
    result = await play(
        """
  - send:
      request: session/prompt
      params: {sessionId: "{{session}}", prompt: [{type: text, text: "{{tool_prompt}}"}]}
      as: turn
  - parallel:
      - - expect: {request: session/request_permission, as: perm, before: turn, precondition: asked}
      - - wait: {captured: perm}
        - send: {notification: session/cancel, params: {sessionId: "{{session}}"}}
        - answer: {request: perm, result: {outcome: {outcome: cancelled}}}
  - expect: {response: turn, result: {stopReason: cancelled}, clause: cancel.stop-reason}
  - answer: {request: perm, result: {outcome: {outcome: cancelled}}, again: true}
  - call:
      request: session/new
      params: {cwd: "{{sandbox}}", mcpServers: []}
      clause: jsonrpc.every-request-answered
""",
        head="answers: {session/request_permission: hold}\n",
    )
    assert result.verdict_word() == "pass", result.summary()
    notes = [e.text() for e in result.transcript.entries if e.direction == "note"]
    assert any("deliberately answering" in n for n in notes)


async def test_expect_nothing_within_a_window() -> None:
    result = await play(
        """
  - send: {request: session/prompt, params: {sessionId: "{{session}}", prompt: [{type: text, text: hi}]}, as: turn}
  - expect_nothing: {notification: session/update, within: 2s, clause: prompt.updates.before-response}
"""
    )
    [outcome] = result.outcomes
    assert outcome.status is Status.FAIL or outcome.status is Status.WARN
    assert "matched" in outcome.message


async def test_a_window_whose_end_never_comes_judges_nothing() -> None:
    """``expect_nothing ... until`` a frame that never arrives has no end: the window proves nothing.
    As a clause's check it is INCONCLUSIVE and the scenario goes on; as a precondition the scenario
    stops INCONCLUSIVE, naming it (what follows relied on the window)."""
    window = "  - expect_nothing: {notification: session/update, until: eof, within: 0.3s, %s}\n"
    prompt = '{sessionId: "{{session}}", prompt: [{type: text, text: hi}]}'
    turn = f"  - send: {{request: session/prompt, params: {prompt}, as: turn}}\n"
    after = "  - expect: {response: turn, clause: prompt.response.stop-reason}\n"
    judged = await play(turn + window % "clause: prompt.updates.before-response" + after)
    assert statuses(judged)["prompt.updates.before-response"] == "INCONCLUSIVE", judged.summary()
    assert statuses(judged)["prompt.response.stop-reason"] == "PASS", judged.summary()
    assert any("'eof': that frame never arrived" in o.message for o in judged.outcomes), judged.summary()
    guarded = await play(turn + window % "precondition: the agent closes" + after)
    assert guarded.end == "inconclusive", guarded.summary()
    assert "precondition not established" in guarded.reason and "the agent closes" in guarded.reason
    assert "'eof' never arrived" in guarded.reason
    assert statuses(guarded) == {"prompt.response.stop-reason": "INCONCLUSIVE"}, guarded.summary()


async def test_raw_bytes_and_the_answers_to_them() -> None:
    result = await play(
        """
  - raw: {hex: "7b7d", newline: true}
  - expect: {response_id: null, error: {code: -32600}, clause: jsonrpc.invalid-request}
  - raw: {base64: "bm90IGpzb24=", newline: true}
  - expect: {response_id: null, error: {code: -32700}, clause: jsonrpc.parse-error}
"""
    )
    assert result.verdict_word() == "pass", result.summary()
    raw = [e.text() for e in result.transcript.entries if e.direction == "out"]
    assert "{}\n" in raw and "not json\n" in raw


async def test_a_deadline_bounds_every_wait() -> None:
    result = await play(
        """
  - expect: {notification: _never/sent, within: 200ms, clause: schema.valid}
""",
        settings=Settings(timeout=30),
    )
    assert result.duration < 10
    assert "nothing matched within 0.2 s" in result.outcomes[-1].message


async def test_a_template_that_cannot_resolve_is_a_scenario_error() -> None:
    result = await play(
        """
  - send: {request: session/prompt, params: {sessionId: "{{session.nope}}", prompt: []}}
"""
    )
    assert result.end == "error"
    assert result.exit_status() == 2
    assert "t.yaml:15 steps[2]" in result.reason


# ------------------------------------------------------------------ playing the agent
PAIR_DRIVERS = {
    "permission-after-cancel": """
  - send: {request: session/prompt, params: {sessionId: "{{session}}", prompt: [{type: text, text: go}]}, as: turn}
  - expect: {notification: session/update, params: {update: {sessionUpdate: tool_call}}, before: turn, precondition: t}
  - send: {notification: session/cancel, params: {sessionId: "{{session}}"}}
  - expect: {response: turn, result: {stopReason: cancelled}, clause: cancel.stop-reason}
""",
    "cancel-pending-permission": """
  - send: {request: session/prompt, params: {sessionId: "{{session}}", prompt: [{type: text, text: go}]}, as: turn}
  - expect: {request: session/request_permission, before: turn, as: perm, precondition: asked}
  - send: {notification: session/cancel, params: {sessionId: "{{session}}"}}
  - answer: {request: perm, result: {outcome: {outcome: cancelled}}}
  - expect: {response: turn, result: {stopReason: cancelled}, clause: cancel.stop-reason}
""",
    "duplicate-and-stray-responses": """
  - call: {request: session/prompt, params: {sessionId: "{{session}}", prompt: [{type: text, text: a}]},
      precondition: a first turn}
  - call: {request: session/prompt, params: {sessionId: "{{session}}", prompt: [{type: text, text: b}]},
      clause: prompt.response.stop-reason}
""",
    "load-gated": """
  - if: {capability: loadSession}
    then:
      - call: {request: session/load, params: {sessionId: "{{session}}", cwd: "{{sandbox}}", mcpServers: []},
          precondition: loaded}
  - close: true
""",
}


@pytest.mark.parametrize("name", sorted(PAIR_DRIVERS))
async def test_client_library_played_by_the_engine_in_the_agent_role(
    name: str, schema_validator: SchemaValidator
) -> None:
    hold = "answers: {session/request_permission: hold}\n" if name == "cancel-pending-permission" else ""
    driver = scenario(PAIR_DRIVERS[name], head=hold)
    agent_side = load_scenario(library_dir() / "client" / f"{name}.yaml")
    _, agent_result = await run_pair(driver, agent_side, validator=schema_validator, settings=FAST)
    assert agent_result is not None
    assert agent_result.verdict_word() == "pass", agent_result.summary()
    assert agent_result.end == "completed"
    assert [o.status for o in agent_result.outcomes] == [Status.PASS] * len(agent_result.outcomes)


class DiesOnGarbage(MockAgent):
    def install_handlers(self, peer: Any) -> None:
        super().install_handlers(peer)
        peer.conn._on_malformed = lambda code, message: peer.start_soon(self._die)

    async def _die(self) -> None:
        await self.peer.transport.close_output()
        await self.peer.transport.aclose()


async def test_a_peer_that_dies_mid_scenario_ends_it_without_a_traceback() -> None:
    result = await play(
        """
  - raw: "garbage"
  - expect: {response_id: null, error: {code: -32700}, within: 2s, clause: jsonrpc.parse-error}
  - raw: "more garbage"
  - raw: "and more"
  - call: {request: session/new, params: {cwd: "{{sandbox}}", mcpServers: []}, clause: jsonrpc.every-request-answered}
""",
        agent_cls=DiesOnGarbage,
    )
    assert result.end in ("inconclusive", "failed"), result.summary()
    assert statuses(result)["jsonrpc.parse-error"] == "WARN"


class QuickLongTurn(MockAgent):
    """Conforming, but its "long" turn is over after one chunk: nothing is left to cancel."""

    async def turn_long(self, turn: Turn) -> str:
        await self.emit(turn, self.message_chunk("agent_message_chunk", "done already", None))
        return "end_turn"


async def test_while_pending_makes_a_race_that_was_not_provoked_inconclusive() -> None:
    """A turn answered before the cancel went out owes nothing to it: INCONCLUSIVE, never FAIL."""
    result = await play(load_scenario(library_dir() / "agent" / "cancel-long-turn.yaml"), agent_cls=QuickLongTurn)
    assert result.end == "inconclusive", result.summary()
    assert "answered before this step went out" in result.reason
    assert not [o for o in result.outcomes if o.status is Status.FAIL], result.summary()
    # The round trip that proves it is an extension request, not something the scenario judges.
    assert result.transcript is not None
    assert b"_acp-conformance/ping" in result.transcript.to_jsonl()


class SilentOnASecondSession(MockAgent):
    """Reads a second ``session/new`` and never answers it; with ``exits``, closes its output instead."""

    exits = False

    async def handle_new_session(self, req: Any) -> Any:
        if getattr(self, "_one_served", False):
            if self.exits:
                await self.peer.transport.close_output()
                await self.peer.transport.aclose()
            await anyio.sleep_forever()
        self._one_served = True
        return await super().handle_new_session(req)


class ExitsOnASecondSession(SilentOnASecondSession):
    exits = True


SECOND_SESSION = """
  - call:
      request: session/new
      params: {cwd: "{{sandbox}}", mcpServers: []}
      clause: jsonrpc.every-request-answered
"""


@pytest.mark.parametrize("how", ["call", "send-expect"])
async def test_a_missing_answer_is_judged_only_where_proven(how: str) -> None:
    """A peer alive and silent past the deadline left our request unanswered: FAIL.  A peer that
    closed its output with it pending may never have read it (``Peer.why_unproven``, the rule the
    suite's tests share): INCONCLUSIVE with that reason, never FAIL."""
    steps = SECOND_SESSION
    if how == "send-expect":
        steps = """
  - send: {request: session/new, params: {cwd: "{{sandbox}}", mcpServers: []}, as: second}
  - expect: {response: second, clause: jsonrpc.every-request-answered}
"""
    silent = await play(steps, agent_cls=SilentOnASecondSession, settings=Settings(timeout=1.0, startup_timeout=3.0))
    assert statuses(silent)["jsonrpc.every-request-answered"] == "FAIL", silent.summary()
    gone = await play(steps, agent_cls=ExitsOnASecondSession)
    assert gone.end == "inconclusive", gone.summary()
    assert statuses(gone)["jsonrpc.every-request-answered"] == "INCONCLUSIVE", gone.summary()
    said = [o.message for o in gone.outcomes if o.status is Status.INCONCLUSIVE]
    assert any("nothing shows it had read the request" in m for m in said), said


class StreamsWithoutEnd(MockAgent):
    """A turn that streams message chunks and never ends; with ``quiet``, one that says nothing."""

    quiet = False

    async def handle_prompt(self, req: Any) -> Any:
        sid = req.params["sessionId"]
        while not self.quiet:
            await self.send_update(sid, self.message_chunk("agent_message_chunk", "more", None))
            await anyio.sleep(0.05)  # the pace of a slow model, not a synchronisation
        await anyio.sleep_forever()


class SilentTurn(StreamsWithoutEnd):
    quiet = True


@pytest.mark.parametrize("how", ["call", "send-expect"])
async def test_a_turn_still_streaming_at_the_deadline_is_not_judged_unanswered(how: str) -> None:
    """The spec sets no time for a turn: one the agent kept streaming through the second half of
    the step's wait is at work (``Peer.turn_in_progress``, the rule ``Peer.wait_response`` judges
    by), INCONCLUSIVE with that reason; a turn silent past the deadline still FAILs."""
    prompt = 'request: session/prompt, params: {sessionId: "{{session}}", prompt: [{type: text, text: a}]}'
    steps = f"\n  - call: {{{prompt}, within: 1, clause: jsonrpc.every-request-answered}}\n"
    if how == "send-expect":
        steps = (
            f"\n  - send: {{{prompt}, as: turn}}"
            "\n  - expect: {response: turn, within: 1, clause: jsonrpc.every-request-answered}\n"
        )
    streaming = await play(steps, agent_cls=StreamsWithoutEnd)
    assert statuses(streaming)["jsonrpc.every-request-answered"] == "INCONCLUSIVE", streaming.summary()
    said = [o.message for o in streaming.outcomes if o.status is Status.INCONCLUSIVE]
    assert any("still being worked on" in m and "agent_message_chunk" in m for m in said), said
    silent = await play(steps, agent_cls=SilentTurn)
    assert statuses(silent)["jsonrpc.every-request-answered"] == "FAIL", silent.summary()


class WritesDespiteACancelledPermission(MockAgent):
    """Runs the tool it asked about although the answer was ``cancelled``: its write follows."""

    async def turn_tool(self, turn: Turn) -> str:
        tool = turn.session.next_tool_call_id()
        await self.emit(turn, self.tool_call(turn, tool))
        await self.request_permission(turn, tool)
        await self.write_probe(turn)
        return CANCELLED


class RunsAToolBeside(MockAgent):
    """A second tool call, already running when the first asks permission, writes after the
    permission request and then completes: a write no one can pin on the refused tool."""

    async def turn_tool(self, turn: Turn) -> str:
        beside = turn.session.next_tool_call_id()
        await self.emit(turn, {**self.tool_call(turn, beside), "status": "in_progress"})
        tool = turn.session.next_tool_call_id()
        await self.emit(turn, self.tool_call(turn, tool))
        await self.request_permission(turn, tool)
        await self.write_probe(turn)
        await self.emit(turn, self.tool_update(beside, "completed"))
        return CANCELLED


PERMISSION_WINDOWS = [
    "cancel-mid-permission",
    "permission-cancel-then-answer",
    "permission-answer-then-cancel",
    "duplicate-and-late-responses",
]


@pytest.mark.parametrize("name", PERMISSION_WINDOWS)
async def test_a_write_after_a_refused_permission_is_pinned_on_it_only_when_no_other_tool_is_about(
    name: str, schema_validator: SchemaValidator
) -> None:
    """The library's windows for a write after the permission request: the refused tool's own
    write is a breach of ``perm.agent-honours-outcome``; with another tool call about (announced
    or updated in the window) the write may be that one's, as the suite's own test
    (``checks.turns.unattributed_side_effects``) holds, and the scenario stops INCONCLUSIVE at
    its precondition instead of judging it."""
    s = load_scenario(library_dir() / "agent" / f"{name}.yaml")
    alone = await play(s, agent_cls=WritesDespiteACancelledPermission, validator=schema_validator)
    assert statuses(alone).get("perm.agent-honours-outcome") in ("FAIL", "WARN"), alone.summary()
    beside = await play(s, agent_cls=RunsAToolBeside, validator=schema_validator)
    assert beside.end == "inconclusive", beside.summary()
    assert statuses(beside).get("perm.agent-honours-outcome") != "FAIL", beside.summary()
    assert not [o for o in beside.outcomes if "fs/write_text_file" in o.message and o.status is Status.FAIL]
