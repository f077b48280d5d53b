"""Tool calls as the agent reports them: ids, statuses, locations, diffs (tool-calls.mdx).

The agent is steered into using a tool with ``--acp-tool-prompt`` (default:
create ``acp-probe.txt``) and allowed to run it.  Two tool turns run in one
session, so a reused toolCallId or a status that goes back can show.  An
agent that makes no tool call for the prompt gets NOT_APPLICABLE with the
hint to steer it, never a PASS.

The helpers at the top are shared by the other turn-level suites
(permission, cancellation, capability gating, fs/terminal, content).
"""

from __future__ import annotations

import os
from typing import Any

import pytest

from acp_conformance.checks.turns import (
    STOP_REASONS,
    diff_path_problems,
    diff_semantics_problems,
    embedded_after_release,
    late_turn_output,
    location_problems,
    missing_in_progress,
    option_kind,
    position_of,
    reached_finished,
    reused_tool_call_ids,
    sessions_given,
    status_regressions,
    terminal_embeds,
    tool_activity,
    tool_mentions,
    unannounced_tool_work,
    unknown_tool_call_updates,
)
from acp_conformance.endpoints.client import PermissionCall, Turn
from acp_conformance.harness import AgentHarness
from acp_conformance.results import Status
from acp_conformance.suite._support import new_session, run_turn
from acp_conformance.suite.agent._helpers import (
    STEER,
    close_out,
    no_tool_reason,
    permission_calls,
    record,
    round_trip,
)

pytestmark = pytest.mark.anyio


def granted_ids(calls: list[PermissionCall]) -> list[Any]:
    """Tool calls whose permission we answered with an allow_* option."""
    out = []
    for call in calls:
        outcome = call.outcome or {}
        if outcome.get("outcome") != "selected":
            continue
        if option_kind(call.request.params, outcome.get("optionId")) in ("allow_once", "allow_always"):
            out.append(call.tool_call_id)
    return out


# ---------------------------------------------------------------------- tests
TOOL_CLAUSES = (
    "tool.report",
    "tool.id.unique",
    "tool.update.known-id",
    "tool.status.terminal-final",
    "tool.location.shape",
    "tool.diff.semantics",
    "tool.terminal.embed-before-release",
    "prompt.tool-in-progress",
    "session.lines.one-based",
    "session.paths.absolute",
)


#: Judged on every transcript (checks.wire); bound here, where tool calls are sure to be sent.
TOOL_SHAPE_CLAUSES = ("tool.kind.enum", "tool.status.enum", "tool.content.shapes")


@pytest.mark.usefixtures("passive_bookkeeping")
@pytest.mark.acp_clause(*TOOL_CLAUSES, *TOOL_SHAPE_CLAUSES, "prompt.stop-reason.enum", "prompt.updates.before-response")
async def test_tool_calls_are_reported_consistently(acp_agent: AgentHarness, request: pytest.FixtureRequest) -> None:
    """Two tool turns (allow once each time): every tool call mention is judged."""
    async with acp_agent.connect(permission="allow_once") as conn:
        sid = await new_session(acp_agent, conn)
        events = conn.peer.events
        turns: list[tuple[int, int]] = []
        for n in (1, 2):
            turn: Turn = await run_turn(acp_agent, conn, sid, acp_agent.config.tool_prompt)
            assert turn.response is not None
            acp_agent.check(
                "prompt.stop-reason.enum",
                turn.stop_reason in STOP_REASONS,
                f"stopReason in {sorted(STOP_REASONS)}",
                f"stopReason {turn.stop_reason!r} (tool turn {n})",
            )
            answered = position_of(events, turn.response)
            await round_trip(conn)  # late output of this turn would precede the answer
            late = late_turn_output(events, sid, answered)
            acp_agent.check(
                "prompt.updates.before-response",
                not late,
                "all output of the tool turn before its session/prompt response",
                f"{len(late)} update(s) after the response of tool turn {n}, first: {late[:1]}",
            )
            turns.append((turn.start_event, len(events)))

        if not tool_activity(events, sid):
            record(acp_agent, Status.NOT_APPLICABLE, STEER, *TOOL_CLAUSES)
            return
        mentions = tool_mentions(events, sid)
        calls = permission_calls(conn, sid)

        # Whether tool calls were reported at all: an update under a session id the agent never
        # gave us reports them too (its misaddressing is prompt.updates.session-id's, once).
        reported = tool_mentions(events, sid, misaddressed=sessions_given(events))

        # SHOULD-level first (a miss warns and the test goes on).
        problems = unannounced_tool_work(events, reported, turns)
        acp_agent.check(
            "tool.report",
            not problems,
            "every tool the agent runs announced with a tool_call update",
            "; ".join(problems[:3]),
        )
        updates = [m for m in mentions if m.source == "tool_call_update"]
        if updates:
            problems = unknown_tool_call_updates(mentions)
            acp_agent.check(
                "tool.update.known-id",
                not problems,
                f"each of the {len(updates)} tool_call_update(s) to name a tool call introduced earlier",
                "; ".join(problems[:3]),
            )
        else:
            record(acp_agent, Status.NOT_APPLICABLE, "the agent sent no tool_call_update", "tool.update.known-id")
        if reached_finished(mentions):
            problems = status_regressions(mentions)
            acp_agent.check(
                "tool.status.terminal-final",
                not problems,
                "no tool call going back to pending/in_progress after completed or failed",
                "; ".join(problems[:3]),
            )
        else:
            reason = "no tool call reached completed or failed"
            record(acp_agent, Status.NOT_APPLICABLE, reason, "tool.status.terminal-final")
        granted = granted_ids(calls)
        if granted:
            problems = missing_in_progress(reported, granted)
            acp_agent.check(
                "prompt.tool-in-progress",
                not problems,
                "each tool call we allowed reported in_progress once it ran",
                "; ".join(problems[:3]),
            )
        else:
            reason = no_tool_reason(events, sid, what="asked no permission we could grant")
            record(acp_agent, Status.NOT_APPLICABLE, reason, "prompt.tool-in-progress")

        # MUST-level: independent judgements of the same traffic, so none stops the others
        # (the test fails at the end if any did).
        announced = [m for m in mentions if m.source == "tool_call"]
        if len(announced) >= 2:
            problems = reused_tool_call_ids(mentions)
            acp_agent.check(
                "tool.id.unique",
                not problems,
                f"{len(announced)} tool_call announcements in one session, each with its own toolCallId",
                "; ".join(problems[:3]),
                stop=False,
            )
        else:
            reason = f"the agent announced {len(announced)} tool call(s) in two tool turns; uniqueness needs two"
            record(acp_agent, Status.NOT_APPLICABLE, reason, "tool.id.unique")
        seen, relative, zero = location_problems(mentions)
        if seen:
            acp_agent.check(
                "tool.location.shape",
                not relative,
                f"absolute paths in all {seen} tool call location(s)",
                "; ".join(relative[:3]),
                stop=False,
            )
            # Schema-valid (minimum 0) but lines count from 1 (no BCP 14 keyword: a SHOULD).
            acp_agent.check(
                "session.lines.one-based",
                not zero,
                f"1-based line numbers in all {seen} tool call location(s)",
                "; ".join(zero[:3]),
            )
        else:
            record(acp_agent, Status.NOT_APPLICABLE, "the agent reported no tool call locations", "tool.location.shape")
        seen, problems = diff_path_problems(mentions)
        if seen:
            acp_agent.check(
                "session.paths.absolute",
                not problems,
                f"absolute paths in all {seen} diff(s)",
                "; ".join(problems[:3]),
                stop=False,
            )
            root = str(conn.sandbox.root)
            judged_diffs, problems = diff_semantics_problems(
                events, mentions, lambda path: not (path == root or path.startswith(root + os.sep))
            )
            if judged_diffs:
                acp_agent.check(
                    "tool.diff.semantics",
                    not problems,
                    f"{judged_diffs} diff(s) of files the suite knows: no oldText for a new file, the complete "
                    "written text as newText",
                    "; ".join(problems[:3]),
                )
            else:
                reason = "no diff of a file whose contents the suite knows (new in the session, or written via fs/*)"
                record(acp_agent, Status.NOT_APPLICABLE, reason, "tool.diff.semantics")
        else:
            record(acp_agent, Status.NOT_APPLICABLE, "the agent reported no diff", "tool.diff.semantics")
        embeds = terminal_embeds(mentions)
        if embeds:
            problems = embedded_after_release(events, mentions)
            acp_agent.check(
                "tool.terminal.embed-before-release",
                not problems,
                "every terminal embedded in a tool call before the agent released it",
                "; ".join(problems[:3]),
                stop=False,
            )
        else:
            reason = "the agent embedded no terminal in a tool call"
            record(acp_agent, Status.NOT_APPLICABLE, reason, "tool.terminal.embed-before-release")
        close_out(acp_agent, request.node, "not judged on this path")
