"""Transcript -> scenario: a recorded session replays deterministically against the other side's mock."""

from __future__ import annotations

from typing import Any

import pytest

from acp_conformance.scenario.convert import dump_scenario, transcript_to_scenario
from acp_conformance.scenario.engine import Settings
from acp_conformance.scenario.library_index import library_dir
from acp_conformance.scenario.loader import load_scenario, load_text
from acp_conformance.schema.validator import SchemaValidator
from acp_conformance.transcript import Transcript
from mock_agent.scenario_agent import run_pair

pytestmark = pytest.mark.anyio

FAST = Settings(timeout=3.0, startup_timeout=3.0)


async def record(name: str, validator: SchemaValidator) -> Transcript:
    result, _ = await run_pair(load_scenario(library_dir() / "agent" / name), validator=validator, settings=FAST)
    assert result.verdict_word() == "pass", result.summary()
    # Through the file format, as a user's bug report would arrive.
    return Transcript.from_jsonl(result.transcript.to_jsonl(), label=name)


def convert(transcript: Transcript, **kw: Any) -> Any:
    data = transcript_to_scenario(transcript, name="converted", **kw)
    text = dump_scenario(data, header="test")
    return load_text(text, "converted.yaml"), text


@pytest.mark.parametrize("name", ["tool-call-lifecycle.yaml", "load-replay-history.yaml", "malformed-input.yaml"])
async def test_a_recording_replays_against_the_reference_agent(name: str, schema_validator: SchemaValidator) -> None:
    transcript = await record(name, schema_validator)
    scenario, text = convert(transcript)
    assert "$capture(session_1)" in text  # the agent's invention, captured (templated where used again)
    assert "{{sandbox}}" in text  # our cwd, relocatable
    for _ in range(2):  # deterministic: twice in a row
        replay, _ = await run_pair(scenario, validator=schema_validator, settings=FAST)
        assert replay.verdict_word() == "pass", replay.summary() + "\n" + text


async def test_the_agent_side_of_a_recording_replays_against_the_original_client(
    schema_validator: SchemaValidator,
) -> None:
    original = load_scenario(library_dir() / "agent" / "permission-cancel-then-answer.yaml")
    transcript = await record("permission-cancel-then-answer.yaml", schema_validator)
    agent_side, text = convert(transcript, play="agent")
    assert agent_side.plays == "agent"
    assert "session/prompt: hold" in text
    client_result, agent_result = await run_pair(original, agent_side, validator=schema_validator, settings=FAST)
    assert client_result.verdict_word() == "pass", client_result.summary()
    assert agent_result is not None
    assert agent_result.end == "completed", agent_result.summary()


async def test_every_expectation_names_a_clause_and_volatile_values_are_loosened(
    schema_validator: SchemaValidator,
) -> None:
    transcript = await record("tool-call-lifecycle.yaml", schema_validator)
    data = transcript_to_scenario(transcript, name="x")
    expects = [s["expect"] for s in data["steps"] if "expect" in s]
    assert expects and all(e["clause"] for e in expects)
    chunks = [e for e in expects if "messageId" in str(e)]
    assert chunks and all("'messageId': '$string'" in str(e) for e in chunks)
    shape = transcript_to_scenario(transcript, name="x", mode="shape", clause="schema.valid")
    assert all(s["expect"]["clause"] == "schema.valid" for s in shape["steps"] if "expect" in s)


def test_an_unparseable_line_of_ours_becomes_a_raw_step() -> None:
    t = Transcript()
    t.add("out", b"not json at all")
    t.add("in", b'{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}')
    data = transcript_to_scenario(t, name="raw")
    assert data["steps"][0] == {"raw": "not json at all"}
    assert data["steps"][1]["expect"]["response_id"] is None
    load_text(dump_scenario(data), "raw.yaml")
