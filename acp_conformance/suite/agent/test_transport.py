"""stdio transport hygiene: what the agent writes on stdout, how it ends."""

from __future__ import annotations

import anyio
import pytest

from acp_conformance.harness import AgentHarness
from acp_conformance.suite._support import new_session, run_turn

# Own process under --acp-isolation=connection: closes pipes and watches the process exit.
pytestmark = [pytest.mark.anyio, pytest.mark.acp_own_process]


@pytest.mark.acp_clause(
    "transport.utf8",
    "transport.stdio.newline-delimited",
    "transport.stdio.one-message-per-line",
    "transport.stdio.stdout-clean",
    "jsonrpc.version-field",
)
async def test_stdout_carries_only_protocol(acp_agent: AgentHarness) -> None:
    """A full turn with non-ASCII text: every stdout line must be one UTF-8 JSON-RPC object."""
    async with acp_agent.connect() as conn:
        sid = await new_session(acp_agent, conn)
        await run_turn(acp_agent, conn, sid, "héllo ✓ 日本 — " + acp_agent.config.prompt)
        # One more round trip so output trailing the turn is on the record too.
        await new_session(acp_agent, conn)


@pytest.mark.acp_clause("transport.stdio.newline-delimited")
async def test_escaped_newlines_in_strings_are_accepted(acp_agent: AgentHarness) -> None:
    """Newlines inside JSON strings are escaped on the wire and must not split a frame."""
    async with acp_agent.connect() as conn:
        sid = await new_session(acp_agent, conn)
        turn = await run_turn(acp_agent, conn, sid, "first line\nsecond line\r\nthird line")
        assert turn.response is not None


# Also newline-delimited: whatever the agent writes on its way out must be whole lines.
@pytest.mark.acp_sole_process  # what the process tree leaves running is judged
@pytest.mark.acp_clause("transport.stdio.exit-on-stdin-close", "transport.stdio.newline-delimited")
async def test_exits_after_stdin_closes(acp_agent: AgentHarness) -> None:
    """Reported, not required: does the agent exit once the client closes its stdin?"""
    async with acp_agent.connect() as conn:
        await conn.transport.close_output()
        exited = await conn.transport.wait_gone(5.0)
        if exited:
            # What it wrote on its way out is in the pipe before the EOF its exit leaves there: read
            # to that EOF, so the frames are judged (newline-delimited) whatever our reader's lag.  An
            # agent that exits within a few ms of its last write outran the reader otherwise.
            with anyio.move_on_after(acp_agent.config.timeout):
                await conn.peer.closed.wait()
        acp_agent.check(
            "transport.stdio.exit-on-stdin-close",
            exited,
            "the agent to exit within 5 s of stdin EOF (the spec does not require it)",
            "the agent was still running 5 s after its stdin closed; clients must kill it",
        )
