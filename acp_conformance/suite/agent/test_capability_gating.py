"""Client capability gating: the agent calls only what the client advertised.

The tool prompt runs once per capability set (none, fs read only, fs write
only, terminal only, all, all with an all-null elicitation object).  For each capability the client leaves out, the
agent must not call its methods (file-system.mdx / terminals.mdx § Checking
Support; elicitation.mdx § Checking support).  A gate counts as exercised -
and can PASS - only when the agent actually used a tool in that turn; the
endpoint refuses an ungated call with -32601 and records the violation.
A capability set under which the agent fails the prompt, while it copes
with all capabilities, warns on cap.all-combinations.
"""

from __future__ import annotations

import pytest

from acp_conformance.checks.turns import tool_activity
from acp_conformance.core.events import Request
from acp_conformance.endpoints.client import ClientCapabilities
from acp_conformance.harness import AgentHarness
from acp_conformance.results import Status
from acp_conformance.suite._support import new_session
from acp_conformance.suite.agent._helpers import STEER, close_out, record, round_trip

pytestmark = pytest.mark.anyio

CELLS: dict[str, ClientCapabilities] = {
    "none": ClientCapabilities.none(),
    "fs-read-only": ClientCapabilities(fs_read=True, fs_write=False, terminal=False),
    "fs-write-only": ClientCapabilities(fs_read=False, fs_write=True, terminal=False),
    "terminal-only": ClientCapabilities(fs_read=False, fs_write=False, terminal=True),
    "all": ClientCapabilities(),
    # Every capability, and an elicitation object whose modes are all null: that advertises no
    # elicitation mode at all (elicitation.mdx § Checking support; unlike MCP's empty object).
    "elicitation-all-null": ClientCapabilities(extra={"elicitation": {"form": None, "url": None}}),
    # fs as an empty object and terminal left out: the schema's defaults, false (cap.client.fs-defaults).
    "flags-omitted": ClientCapabilities(fs_read=False, fs_write=False, terminal=False, flags_omitted=True),
}
#: The cell that judges elicit.capability.explicit.
NULL_ELICITATION = "elicitation-all-null"
#: The cell that judges cap.client.fs-defaults (and no gate clause: one defect, one clause).
FLAGS_OMITTED = "flags-omitted"
TERMINAL_METHODS = (
    "terminal/create",
    "terminal/output",
    "terminal/wait_for_exit",
    "terminal/kill",
    "terminal/release",
)
#: clause, ClientCapabilities attribute, gated methods, capability name on the wire.  Elicitation is
#: never advertised in this matrix, so any elicitation/create (whatever its mode) is ungated.
GATES: tuple[tuple[str, str, tuple[str, ...], str], ...] = (
    ("fs.read.gated", "fs_read", ("fs/read_text_file",), "fs.readTextFile"),
    ("fs.write.gated", "fs_write", ("fs/write_text_file",), "fs.writeTextFile"),
    ("term.gated", "terminal", TERMINAL_METHODS, "terminal"),
    ("elicit.mode.gated", "elicitation_form", ("elicitation/create",), "elicitation"),
)


@pytest.mark.parametrize("cell", list(CELLS))
@pytest.mark.acp_clause(
    "fs.read.gated",
    "fs.write.gated",
    "term.gated",
    "elicit.mode.gated",
    "elicit.capability.explicit",
    "cap.client.fs-defaults",
    "cap.all-combinations",
    "prompt.response.stop-reason",
)
async def test_capability_gating(acp_agent: AgentHarness, cell: str, request: pytest.FixtureRequest) -> None:
    caps = CELLS[cell]
    async with acp_agent.connect(capabilities=caps, permission="allow_once") as conn:
        sid = await new_session(acp_agent, conn)
        turn = await conn.client.prompt(sid, acp_agent.config.tool_prompt)
        await round_trip(conn)  # calls made right after the answer are on record too
        events = conn.peer.events
        used_tool = tool_activity(events, sid, turn.start_event)
        # Before the gates: in its cell an ungated elicitation is this clause's finding first.
        elicitations = [r for r in conn.peer.requests() if r.method == "elicitation/create"]
        if cell != NULL_ELICITATION:
            reason = f"judged in the {NULL_ELICITATION} cell"
            record(acp_agent, Status.NOT_APPLICABLE, reason, "elicit.capability.explicit")
        else:
            _judge_no_calls(
                acp_agent,
                "elicit.capability.explicit",
                elicitations,
                used_tool,
                "no elicitation/create: clientCapabilities.elicitation {form: null, url: null} advertises no mode",
                "a tool turn with elicitation {form: null, url: null} advertised and no elicitation/create",
            )
        if cell == FLAGS_OMITTED:
            _judge_omitted_flags(acp_agent, conn.peer.requests(), used_tool)
        else:
            reason = f"judged in the {FLAGS_OMITTED} cell"
            record(acp_agent, Status.NOT_APPLICABLE, reason, "cap.client.fs-defaults")
        for clause, attr, methods, name in GATES:
            calls = [r for r in conn.peer.requests() if r.method in methods]
            if cell == FLAGS_OMITTED and clause != "elicit.mode.gated":
                record(acp_agent, Status.NOT_APPLICABLE, "judged as cap.client.fs-defaults in this cell", clause)
            elif getattr(caps, attr):
                record(acp_agent, Status.NOT_APPLICABLE, f"the client advertised {name} in this run", clause)
            else:
                _judge_no_calls(
                    acp_agent,
                    clause,
                    calls,
                    used_tool,
                    f"no {' / '.join(methods)} call: the client did not advertise {name} ({cell})",
                    f"a tool turn without {name} advertised ({cell}) and no {' / '.join(methods)} call",
                )
        resp = turn.response
        assert resp is not None
        failed = resp.is_error
        result = resp.result if isinstance(resp.result, dict) else {}
    if not failed:
        acp_agent.check(
            "cap.all-combinations", True, f"the tool turn answered with a result when the client offers {cell}", ""
        )
    elif cell == "all":
        reason = "the agent fails the tool prompt even with every capability; nothing to compare with"
        record(acp_agent, Status.INCONCLUSIVE, reason, "cap.all-combinations")
    else:
        # Is it this capability set, or does the agent fail the prompt anyway?  Ask with all of them.
        async with acp_agent.connect(capabilities=CELLS["all"], permission="allow_once") as base:
            base_sid = await new_session(acp_agent, base)
            baseline = await base.client.prompt(base_sid, acp_agent.config.tool_prompt)
        assert baseline.response is not None
        if baseline.response.is_error:
            reason = "the agent fails the tool prompt with every capability too; not specific to this set"
            record(acp_agent, Status.INCONCLUSIVE, reason, "cap.all-combinations")
        else:
            acp_agent.check(
                "cap.all-combinations",
                False,
                f"the tool turn to work with the capability set {cell}, as it does with all capabilities",
                f"error {resp.error!r} with {cell}, a result with all capabilities",
            )
    acp_agent.check(
        "prompt.response.stop-reason",
        not failed and "stopReason" in result,
        "session/prompt to end with a result carrying stopReason",
        f"error {resp.error!r}" if failed else f"result {resp.result!r}",
    )
    close_out(acp_agent, request.node, "not judged on this path")


def _judge_omitted_flags(acp_agent: AgentHarness, requests: list[Request], used_tool: bool) -> None:
    """With ``fs: {}`` and no ``terminal``, every fs and terminal flag is false by default."""
    methods = ("fs/read_text_file", "fs/write_text_file", *TERMINAL_METHODS)
    _judge_no_calls(
        acp_agent,
        "cap.client.fs-defaults",
        [r for r in requests if r.method in methods],
        used_tool,
        "no fs/* or terminal/* call: clientCapabilities {fs: {}} with terminal omitted advertises neither",
        "a tool turn with fs: {} and terminal omitted, and no fs/* or terminal/* call",
    )


def _judge_no_calls(
    acp_agent: AgentHarness, clause: str, calls: list[Request], used_tool: bool, forbidden: str, passed: str
) -> None:
    """A gate: any ungated call FAILs ``clause``; none PASSes it, but only when the agent used a
    tool in the turn (otherwise nothing tempted it: NOT_APPLICABLE, with how to steer it)."""
    if calls:
        acp_agent.check(
            clause, False, forbidden, f"{len(calls)} call(s), first: {calls[0].method} {calls[0].raw[:160]!r}"
        )
    elif not used_tool:
        record(acp_agent, Status.NOT_APPLICABLE, STEER, clause)
    else:
        acp_agent.check(clause, True, passed, "")
