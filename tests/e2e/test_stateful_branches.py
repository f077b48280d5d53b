"""Branches of the stateful machine driven step by step, without Hypothesis's search.

A broken agent's proof through the stateful campaign holds only if the seed's examples happen to
take the path that meets the defect, and which path an example takes depends on timing (which
turns are still running when a step picks one).  A branch that judges a clause is shown to FAIL
here by calling the machine's rules in the order that reaches it, against the broken agent made
for it, so the proof does not rest on the search finding it on a loaded machine."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from acp_conformance.fuzz._budget import FuzzBudget
from acp_conformance.fuzz._findings import FuzzFinding
from acp_conformance.fuzz.campaign import portal_for
from acp_conformance.fuzz.stateful import StatefulContext, machine_for
from acp_conformance.harness import AgentHarness
from acp_conformance.harness.agent import AgentConfig
from acp_conformance.schema.validator import SchemaValidator

BROKEN = Path(__file__).resolve().parents[1] / "peers" / "broken_agents.py"


def _harness(name: str, validator: SchemaValidator, tmp: Path) -> AgentHarness:
    """The harness the ``acp_agent`` fixture would make for the broken agent ``name``."""
    config = AgentConfig(command=f"{sys.executable} {BROKEN} {name}", timeout=3, startup_timeout=30)
    return AgentHarness(config, validator, tmp / "run", label=name)


@pytest.mark.parametrize("read_proof", [True, False], ids=["read-proof", "no-read-proof"])
def test_a_turn_whose_agent_quits_after_our_permission_answer_is_judged_on_the_read_proof(
    read_proof: bool, schema_validator: SchemaValidator, tmp_path: Path
) -> None:
    """``_advance`` after a permission answer meets the agent's exit (``quits-on-a-granted-permission``).

    With a request the agent answered after reading the prompt (a second ``session/new``), the
    turn is proven read and left unanswered: ``jsonrpc.every-request-answered`` FAILs there, in
    the words of that branch.  Without it the agent does not quit (its defect needs the proof),
    the turn ends, and the machine finds nothing: the branch flags only what it can prove."""
    acp = _harness("quits-on-a-granted-permission", schema_validator, tmp_path)
    with portal_for(acp) as portal:
        ctx = StatefulContext(acp, portal, FuzzBudget(), deadline=time.monotonic() + 120)
        machine = machine_for(ctx)()
        try:
            machine.start()  # session 1
            machine.prompt("tool", 0)  # waits until the turn asks permission
            if read_proof:
                machine.session_op("new", 0, 0)  # answered after the prompt was read
                with pytest.raises(FuzzFinding) as found:
                    machine.act_on_turn("allow_once", 0)
                finding = found.value
                assert finding.clause == "jsonrpc.every-request-answered"
                assert finding.unproven == "", finding.unproven
                assert "neither ended nor asked anything" in finding.message, finding.message
                assert "closed its output" in finding.message, finding.message
            else:
                machine.act_on_turn("allow_once", 0)
                assert not machine.raised
        finally:
            machine.teardown()
    acp.release()


def test_a_cancelled_turn_whose_agent_quits_on_the_cancel_is_judged_on_the_read_proof(
    schema_validator: SchemaValidator, tmp_path: Path
) -> None:
    """``wait_cancelled`` meets the agent's exit (``abandons-a-turn-for-another``): the long turn of
    session 1 is abandoned when session 2 gets a prompt; the answer to a later ``session/new`` proves
    that prompt read; our cancel of session 1 makes the agent exit.  The
    turn was proven read and never answered: ``jsonrpc.every-request-answered`` FAILs in the words
    of the cancelled turn's wait, not as a stop reason (the spec sets no deadline for a cancel)."""
    acp = _harness("abandons-a-turn-for-another", schema_validator, tmp_path)
    with portal_for(acp) as portal:
        ctx = StatefulContext(acp, portal, FuzzBudget(), deadline=time.monotonic() + 120)
        machine = machine_for(ctx)()
        try:
            for step in (
                machine.start,  # session 1
                lambda: machine.prompt("long", 0),  # session 1's turn streams until cancelled
                lambda: machine.session_op("new", 0, 0),  # session 2
                lambda: machine.prompt("plain", 0),  # session 2 (the only idle one): session 1 abandoned
                lambda: machine.act_on_turn("wait", 1),  # session 2's turn runs to its answer
                lambda: machine.session_op("new", 0, 0),  # session 3: answered after the abandoned prompt
            ):
                step()
                machine.sessions_are_consistent()  # as Hypothesis calls it after every step
            with pytest.raises(FuzzFinding) as found:
                machine.act_on_turn("cancel", 0)  # session 1 (the turns in the order they began)
        finally:
            machine.teardown()
    acp.release()
    finding = found.value
    assert finding.clause == "jsonrpc.every-request-answered", finding
    assert finding.unproven == "", finding.unproven
    assert "session/prompt was not answered (the peer closed its output" in finding.message, finding.message
