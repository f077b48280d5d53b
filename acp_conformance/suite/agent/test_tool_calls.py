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
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pytest

from acp_conformance.checks import PASSIVE_CLAUSES
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
    status_regressions,
    terminal_embeds,
    tool_activity,
    tool_mentions,
    unannounced_tool_work,
    unknown_tool_call_updates,
)
from acp_conformance.core.events import Event, Notification, Request, Response
from acp_conformance.core.ids import same_id
from acp_conformance.endpoints.client import PermissionCall, Turn
from acp_conformance.errors import PeerTimeout
from acp_conformance.harness import AgentHarness, Connection
from acp_conformance.results import Status
from acp_conformance.suite._support import new_session, run_turn

pytestmark = pytest.mark.anyio

#: Why a tool clause could not be judged when the agent did not use a tool.
STEER = "the agent made no tool call for --acp-tool-prompt; steer it with --acp-tool-prompt"
#: A request no agent implements: the answer (-32601 expected, anything will do) closes a round trip.
PING = "_acp_conformance/ping"


# ------------------------------------------------------------ shared helpers
def record(acp: AgentHarness, status: Status, reason: str, *clauses: str) -> None:
    """Give each clause ``status`` (NOT_APPLICABLE / INCONCLUSIVE) for this test, with the reason."""
    for clause in clauses:
        acp.record(clause, status, reason)


def close_out(acp: AgentHarness, node: pytest.Item, reason: str) -> None:
    """Every clause this test is bound to but did not judge becomes INCONCLUSIVE, so that the
    plugin never counts an unexercised clause as passed."""
    judged = {r.clause for r in acp.results}
    for mark in node.iter_markers("clause"):
        for clause in mark.args:
            # Passive clauses are judged on the transcript when the connection closes, after this.
            if clause not in judged and clause not in PASSIVE_CLAUSES:
                acp.record(clause, Status.INCONCLUSIVE, reason)


def passive_not_exercised(acp: AgentHarness, node: pytest.Item) -> None:
    """Call after the test's connections closed (``passive_bookkeeping`` does): every stream-level
    clause the test is bound to that none of its transcripts exercised becomes NOT_APPLICABLE, so
    that the plugin does not count the test passing as the clause passing."""
    judged = {r.clause for r in acp.results}
    for mark in node.iter_markers("clause"):
        for clause in mark.args:
            if clause in PASSIVE_CLAUSES and clause not in judged:
                acp.record(clause, Status.NOT_APPLICABLE, "the agent sent no frame of this kind in this test")


@pytest.fixture
def passive_bookkeeping(acp_agent: AgentHarness, request: pytest.FixtureRequest) -> Iterator[None]:
    """For a test bound to stream-level clauses: after it, ``passive_not_exercised``."""
    yield
    passive_not_exercised(acp_agent, request.node)


def is_prompt_response(rid: Any) -> Callable[[Event], bool]:
    return lambda e: isinstance(e, Response) and e.method == "session/prompt" and same_id(e.id, rid)


async def round_trip(conn: Connection, *, also: Callable[[Event], bool] | None = None) -> Event:
    """Send a request every agent must answer and wait for the answer (or, if given, for an
    event matching ``also``): frames the agent wrote before answering are on record afterwards."""
    mark = len(conn.peer.events)
    rid = await conn.peer.send_request(PING, {"purpose": "round trip"})

    def done(e: Event) -> bool:
        return (isinstance(e, Response) and e.method == PING and same_id(e.id, rid)) or (also is not None and also(e))

    return await conn.peer.wait_for(done, start=mark, what=f"an answer to our {PING} request")


async def wait_prompt_response(
    conn: Connection, rid: Any, start: int, timeout: float | None = None, *, flag: bool = True
) -> Response | None:
    """The session/prompt response, or None if none came in time.  A full deadline passing is
    ``jsonrpc.every-request-answered`` (and a miss the run remembers, so a peer that never answers
    prompts costs two deadlines, not one per test); a shorter observation window flags nothing,
    nor does a wait whose silence a more specific clause judges (``flag=False``)."""
    full = flag and (timeout is None or timeout >= conn.peer.timeout)
    try:
        return await conn.peer.wait_response(rid, method="session/prompt", timeout=timeout, flag=full)
    except PeerTimeout:
        return None


def permission_calls(conn: Connection, sid: str, start: int = 0, end: int | None = None) -> list[PermissionCall]:
    """Our record of the permission requests of ``sid`` that arrived in the event window."""
    events = conn.peer.events
    out = []
    for call in conn.client.permission_calls:
        if call.session_id != sid:
            continue
        pos = position_of(events, call.request)
        if pos >= start and (end is None or pos < end):
            out.append(call)
    return out


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


def turn_sign(sid: str, rid: Any) -> Callable[[Event], bool]:
    """The agent is working on the turn: any session/update, any request of its own, or the answer."""

    def pred(e: Event) -> bool:
        if isinstance(e, Notification) and e.method == "session/update":
            return True
        return isinstance(e, Request) or is_prompt_response(rid)(e)

    return pred


def no_tool_reason(events: Sequence[Event], sid: str, start: int = 0, end: int | None = None, *, what: str) -> str:
    """Why a tool clause is not applicable: no tool call at all, or the agent did not do ``what``."""
    if not tool_activity(events, sid, start, end):
        return STEER
    return f"the agent {what} for --acp-tool-prompt"


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
@pytest.mark.clause(*TOOL_CLAUSES, *TOOL_SHAPE_CLAUSES, "prompt.stop-reason.enum", "prompt.updates.before-response")
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

        # SHOULD-level first (a miss warns and the test goes on).
        problems = unannounced_tool_work(events, mentions, turns)
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
            problems = missing_in_progress(mentions, granted)
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
