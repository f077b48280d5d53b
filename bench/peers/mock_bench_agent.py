"""The reference mock agent, plus the benchmark's ``bench:updates N`` keyword.

``python bench/peers/mock_bench_agent.py [--no-validate]``: exactly ``python -m mock_agent``
(same CLI, same start-up path, same ``MockAgent`` machinery: ``emit`` records every update
for ``session/load`` replay and validates it before sending) except for the prompt turn:

* a prompt containing ``bench:updates N`` streams N ``agent_message_chunk`` updates with one
  ``messageId``, then ends ``end_turn`` (``cancelled`` if cancelled meanwhile);
* any other prompt ends the turn at once with ``end_turn`` and no update (the reference
  agent's default turn sends four updates, which would make a round trip measure more
  than a round trip).

The reference agent has no keyword for this; it lives here so that ``mock_agent`` is not
changed for the benchmark.
"""

from __future__ import annotations

import sys

from _shared import chunk_text, updates_wanted

from mock_agent import MockAgent, Turn
from mock_agent.cli import main


class BenchAgent(MockAgent):
    def choose_scenario(self, turn: Turn) -> str:
        return "bench_updates" if updates_wanted(turn.text) else "bench_empty"

    async def prompt_turn(self, turn: Turn) -> str:
        n = updates_wanted(turn.text)
        if n:
            message_id = turn.session.next_message_id("agent")
            for i in range(n):
                if turn.cancelled:
                    return "cancelled"
                await self.emit(turn, self.message_chunk("agent_message_chunk", chunk_text(i), message_id))
        return "end_turn"


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:], agent_cls=BenchAgent))
