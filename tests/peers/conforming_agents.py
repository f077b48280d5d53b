"""Conforming agents with unusual timing, for proving that the suite's verdicts do not depend on it.

``python tests/peers/conforming_agents.py NAME [mock_agent options]`` runs one.  Each is the
reference agent with behaviour the spec allows but that makes races likely; the suite must
never FAIL them (``tests/e2e/test_race_soundness.py``).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from mock_agent import MockAgent
from mock_agent.cli import main


class FastTurns(MockAgent):
    """Every turn the agent is not blocked on the client for ends at once: the long prompt's
    turn streams one chunk and answers ``end_turn`` straight away (a model that is done).  A
    cancel that reaches a running turn still ends it ``cancelled``; one that reaches a turn
    already answered is ignored, as the spec allows (prompt-turn.mdx § Cancellation)."""

    long_turn_ticks = 1
    long_turn_seconds = 0.0


AGENTS: dict[str, type[MockAgent]] = {"fast-turns": FastTurns}


if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] not in AGENTS:
        print(f"usage: {sys.argv[0]} NAME [mock_agent options]; NAME one of: {', '.join(AGENTS)}", file=sys.stderr)
        sys.exit(2)
    sys.exit(main(sys.argv[2:], agent_cls=AGENTS[sys.argv[1]]))
