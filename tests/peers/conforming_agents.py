"""Conforming agents with unusual timing, for proving that the suite's verdicts do not depend on it.

``python tests/peers/conforming_agents.py NAME [mock_agent options]`` runs one.  Each is the
reference agent with behaviour the spec allows but that makes races likely; the suite must
never FAIL them (``tests/e2e/test_race_soundness.py``).
"""

from __future__ import annotations

import sys
from pathlib import Path

if __name__ == "__main__":  # run as a file: make the repository root importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from typing import Any

from mock_agent import MockAgent, Turn
from mock_agent.cli import main

Json = dict[str, Any]


class FastTurns(MockAgent):
    """Every turn the agent is not blocked on the client for ends at once: the long prompt's
    turn streams one chunk and answers ``end_turn`` straight away (a model that is done).  A
    cancel that reaches a running turn still ends it ``cancelled``; one that reaches a turn
    already answered is ignored, as the spec allows (prompt-turn.mdx § Cancellation)."""

    long_turn_ticks = 1
    long_turn_seconds = 0.0


class TwoToolCalls(MockAgent):
    """Every tool turn first announces and finishes a read-only lookup (its own toolCallId), then
    does the usual write: two tool calls per turn, each updated only after its announcement (the
    TypeScript SDK example does this; the suite once warned tool.update.known-id on the second)."""

    async def turn_tool(self, turn: Turn) -> str:
        lookup = turn.session.next_tool_call_id()
        await self.emit(
            turn,
            {
                "sessionUpdate": "tool_call",
                "toolCallId": lookup,
                "title": "Look around",
                "kind": "read",
                "status": "pending",
            },
        )
        await self.emit(turn, self.tool_update(lookup, "in_progress"))
        await self.emit(turn, self.tool_update(lookup, "completed", [self.text_content("nothing to see")]))
        return await super().turn_tool(turn)


class AnnouncesWhenRunning(MockAgent):
    """Asks permission first and announces the tool call only once it runs, with status
    in_progress (zed codex-acp does this; prompt-turn.mdx § 5 asks for the status, not a frame)."""

    async def emit(self, turn: Turn, update: Json) -> None:
        if update.get("sessionUpdate") == "tool_call":
            self._announce = update  # held back until the permission is granted
            return
        if update.get("sessionUpdate") == "tool_call_update" and update.get("status") == "in_progress":
            announced = getattr(self, "_announce", None)
            if announced is not None and announced.get("toolCallId") == update.get("toolCallId"):
                self._announce = None
                update = {**announced, **{k: v for k, v in update.items() if k != "sessionUpdate"}}
                update["sessionUpdate"] = "tool_call"
        await super().emit(turn, update)

    async def request_permission(self, turn: Turn, tool_call_id: str) -> str:
        decision = await super().request_permission(turn, tool_call_id)
        announced = getattr(self, "_announce", None)
        if decision not in ("allow_once", "allow_always") and announced is not None:
            self._announce = None
            await super().emit(turn, announced)  # a rejected call is still announced, then failed
        return decision


class RetitlesAfterEachTurn(MockAgent):
    """Sends a ``session_info_update`` (a new title) right after every ``session/prompt``
    response, cancelled turns included (claude-agent-acp does this).  Session metadata may be
    pushed at any time (session-list.mdx § Updating Session Metadata); only "content or tool call
    updates" must precede a cancelled turn's response (prompt-turn.mdx § Cancellation)."""

    async def after_prompt_response(self, turn: Turn) -> None:
        title = f"{turn.text.strip()[:40] or 'untitled'} ({'cancelled' if turn.cancelled else 'done'})"
        await self.peer.notify(
            "session/update",
            {"sessionId": turn.session.id, "update": {"sessionUpdate": "session_info_update", "title": title}},
        )


AGENTS: dict[str, type[MockAgent]] = {
    "fast-turns": FastTurns,
    "two-tool-calls": TwoToolCalls,
    "announces-when-running": AnnouncesWhenRunning,
    "retitles-after-each-turn": RetitlesAfterEachTurn,
}


if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] not in AGENTS:
        print(f"usage: {sys.argv[0]} NAME [mock_agent options]; NAME one of: {', '.join(AGENTS)}", file=sys.stderr)
        sys.exit(2)
    sys.exit(main(sys.argv[2:], agent_cls=AGENTS[sys.argv[1]]))
