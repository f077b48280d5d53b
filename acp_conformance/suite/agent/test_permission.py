"""Permission: the agent's options, and whether it honours the answer (tool-calls.mdx § Requesting Permission).

Asking is optional (perm.may-request): an agent that runs the tool prompt
without asking gets NOT_APPLICABLE here, not a PASS.  Whether a refused
tool ran is judged on what reached the client - its file writes, the
commands it started, the files in the sandbox - not on what the agent
reports about the tool.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from acp_conformance.checks.turns import (
    ToolMention,
    duplicate_option_ids,
    is_absolute_path,
    option_kind,
    position_of,
    side_effects,
    tool_activity,
    tool_mentions,
    tool_operation,
    unattributed_side_effects,
)
from acp_conformance.endpoints.client import PermissionCall
from acp_conformance.harness import AgentHarness
from acp_conformance.results import Status
from acp_conformance.suite._support import inconclusive, new_session, not_applicable, run_turn
from acp_conformance.suite.agent._helpers import (
    NO_PERMISSION,
    close_out,
    describe_effect,
    no_tool_reason,
    permission_calls,
    round_trip,
)

pytestmark = pytest.mark.anyio


def files_under(root: Path) -> dict[str, bytes]:
    """Every regular file below ``root`` with its content."""
    out: dict[str, bytes] = {}
    for dirpath, _, filenames in os.walk(root):
        for name in filenames:
            path = Path(dirpath, name)
            if path.is_file() and not path.is_symlink():
                out[str(path.resolve())] = path.read_bytes()
    return out


def target_paths(mentions: list[ToolMention], tool_call_ids: set[Any]) -> set[str]:
    """Absolute paths the tool calls named as their locations or diffs."""
    out = set()
    for m in mentions:
        if m.tool_call_id not in tool_call_ids:
            continue
        for key in ("locations", "content"):
            items = m.fields.get(key)
            for item in items if isinstance(items, list) else []:
                path = item.get("path") if isinstance(item, dict) else None
                if is_absolute_path(path):
                    out.add(str(path))
    return out


def judge_option_ids(acp: AgentHarness, calls: list[PermissionCall]) -> None:
    """perm.option.shape: the optionIds of each request are distinct (the schema covers the rest)."""
    problems = [p for call in calls for p in duplicate_option_ids(call.request.params)]
    acp.check(
        "perm.option.shape",
        not problems,
        f"distinct optionIds within each of the {len(calls)} permission request(s)",
        "; ".join(problems[:3]),
    )


@pytest.mark.acp_clause("perm.agent-honours-outcome", "perm.option.shape")
async def test_rejected_tool_does_not_run(acp_agent: AgentHarness, request: pytest.FixtureRequest) -> None:
    """Every permission request answered with a reject option (``cancelled`` if none is offered):
    no file write or command may follow for the refused tool call, and the file it named must not
    change on disk."""
    async with acp_agent.connect(permission="reject") as conn:
        sid = await new_session(acp_agent, conn)
        before = files_under(conn.sandbox.root)
        turn = await run_turn(acp_agent, conn, sid, acp_agent.config.tool_prompt)
        await round_trip(conn)  # a late side effect would precede the answer
        events = conn.peer.events
        calls = permission_calls(conn, sid, turn.start_event)
        if not calls:
            not_applicable(no_tool_reason(events, sid, turn.start_event, what=NO_PERMISSION))
        judge_option_ids(acp_agent, calls)
        first = min(position_of(events, c.request) for c in calls)
        refused = {c.tool_call_id for c in calls}
        mentions = tool_mentions(events, sid, turn.start_event)
        effects = unattributed_side_effects(events, mentions, refused, first)
        # A file the agent changed on disk by itself (not through fs/write_text_file) is pinned on a
        # refused tool only when it is that tool's own target (a location or diff path it named) and
        # the turn mentions no other tool call that could have written it.
        written = {
            str(Path(r.params["path"]).resolve())
            for _, r in side_effects(events, turn.start_event)
            if r.method == "fs/write_text_file" and isinstance(r.params, dict) and isinstance(r.params.get("path"), str)
        }
        targets = {str(Path(p).resolve()) for p in target_paths(mentions, refused)}
        after = files_under(conn.sandbox.root)
        changed = sorted(p for p, data in after.items() if before.get(p) != data and p not in written)
        others = {m.tool_call_id for m in mentions} - refused
        on_disk = [p for p in changed if p in targets] if not others else []
        answers = sorted({str((c.outcome or {}).get("optionId") or (c.outcome or {}).get("outcome")) for c in calls})
        what = []
        if effects:
            what.append(
                f"{len(effects)} call(s) after the refusal: " + ", ".join(describe_effect(r) for _, r in effects[:3])
            )
        if on_disk:
            what.append(f"files changed in the sandbox: {on_disk[:3]}")
        what.append(f"sandbox writes through fs/write_text_file: {[p for p, _ in conn.sandbox.writes][:3]}")
        acp_agent.check(
            "perm.agent-honours-outcome",
            not effects and not on_disk,
            f"the refused tool call(s) {sorted(map(str, refused))} not run (we answered {answers}): "
            "no file write, no command, no file changed",
            "; ".join(what),
        )
        close_out(acp_agent, request.node, "not judged on this path")


@pytest.mark.acp_clause("perm.agent-honours-outcome", "perm.option.shape")
async def test_allow_once_is_not_remembered(acp_agent: AgentHarness, request: pytest.FixtureRequest) -> None:
    """Two tool turns answered ``allow_once``: a tool the agent asked about the first time must be
    asked about again (allow_once allows "this operation only this time")."""
    async with acp_agent.connect(permission="allow_once") as conn:
        sid = await new_session(acp_agent, conn)
        events = conn.peer.events
        first = await run_turn(acp_agent, conn, sid, acp_agent.config.tool_prompt)
        await round_trip(conn)
        second = await run_turn(acp_agent, conn, sid, acp_agent.config.tool_prompt)
        second_start = second.start_event
        await round_trip(conn)
        calls1 = permission_calls(conn, sid, first.start_event, second_start)
        calls2 = permission_calls(conn, sid, second_start)
        if not calls1:
            not_applicable(no_tool_reason(events, sid, first.start_event, second_start, what=NO_PERMISSION))
        judge_option_ids(acp_agent, calls1 + calls2)
        once = [
            c
            for c in calls1
            if (c.outcome or {}).get("outcome") == "selected"
            and option_kind(c.request.params, (c.outcome or {}).get("optionId")) == "allow_once"
        ]
        if not once:
            acp_agent.record(
                "perm.agent-honours-outcome",
                Status.NOT_APPLICABLE,
                "the agent offered no allow_once option in the first tool turn",
            )
            return
        if calls2:
            acp_agent.check(
                "perm.agent-honours-outcome",
                True,
                "permission asked again in the second tool turn after an allow_once answer",
                "",
            )
            return
        mentions1 = tool_mentions(events, sid, first.start_event, second_start)
        # allow_once allows "this operation only this time": the same operation again, not any tool of
        # its kind (an agent MAY run a tool without asking at all: a different `execute` is its own call).
        allowed = {op for c in once if (op := tool_operation(mentions1, c.tool_call_id)) is not None}
        if not allowed:
            inconclusive(
                "the tool call allowed once states no rawInput, locations or title: a later call cannot be told "
                "to be the same operation"
            )
        mentions2 = tool_mentions(events, sid, second_start)
        same = {m.tool_call_id for m in mentions2 if tool_operation(mentions2, m.tool_call_id) in allowed}
        running = ("in_progress", "completed")
        ran = sorted(
            {str(m.tool_call_id) for m in mentions2 if m.tool_call_id in same and m.fields.get("status") in running}
        )
        if not ran:
            if not tool_activity(events, sid, second_start):
                reason = "the agent made no tool call in the second tool turn; steer it with --acp-tool-prompt"
            else:
                reason = "the second tool turn ran no tool call doing the operation allowed once"
            inconclusive(reason)
        effects = side_effects(events, second_start)
        what = sorted(f"{kind}, {basis} {value}" for kind, basis, value in allowed)
        acp_agent.check(
            "perm.agent-honours-outcome",
            False,
            f"a new permission request before running again the operation allowed only once ({what[0][:200]})",
            f"the second tool turn ran it without asking: tool call(s) {ran} in progress/completed, "
            f"{len(effects)} file write(s)/command(s)",
        )
        close_out(acp_agent, request.node, "not judged on this path")
