"""ACP words more than one layer decides with (one decision, one place).

``TURN_OUTPUT``: the update kinds that are a prompt turn's own output (prompt-turn.mdx § 3 and
§ 5).  The other kinds (available_commands_update, current_mode_update, config_option_update,
session_info_update, usage_update) are session metadata an agent may send at any time: they do
not show that a turn is running.  The connection (``Peer``: is the peer still working on a
request?), the checks, the stateful machine and the suite's tests all ask this.
"""

from __future__ import annotations

TURN_OUTPUT = frozenset({"agent_message_chunk", "agent_thought_chunk", "tool_call", "tool_call_update", "plan"})
