"""Benchmark agent on the official Python SDK (``agent-client-protocol`` 0.12.1, public API only).

Modelled on the SDK's own ``examples/echo_agent.py``.  ``bench:updates N`` -> N
``agent_message_chunk`` updates, then ``end_turn``; anything else -> ``end_turn``.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

from _shared import chunk_text, updates_wanted
from acp import (
    PROTOCOL_VERSION,
    Agent,
    InitializeResponse,
    NewSessionResponse,
    PromptResponse,
    run_agent,
    text_block,
    update_agent_message,
)
from acp.interfaces import Client
from acp.schema import Implementation


class BenchAgent(Agent):
    _conn: Client

    def __init__(self) -> None:
        self._messages = 0

    def on_connect(self, conn: Client) -> None:
        self._conn = conn

    async def initialize(self, protocol_version: int, **kwargs: Any) -> InitializeResponse:
        return InitializeResponse(
            protocol_version=PROTOCOL_VERSION,
            agent_info=Implementation(name="bench-py-sdk-agent", version="0"),
            auth_methods=[],
        )

    async def new_session(self, cwd: str, **kwargs: Any) -> NewSessionResponse:
        return NewSessionResponse(session_id=f"sess_{os.urandom(8).hex()}")

    async def prompt(self, session_id: str, prompt: list[Any], **kwargs: Any) -> PromptResponse:
        text = "\n".join(getattr(b, "text", "") for b in prompt if getattr(b, "type", None) == "text")
        n = updates_wanted(text)
        if n:
            self._messages += 1
            message_id = f"{session_id}-agent-{self._messages}"
            for i in range(n):
                chunk = update_agent_message(text_block(chunk_text(i)))
                chunk.message_id = message_id
                await self._conn.session_update(session_id=session_id, update=chunk)
        return PromptResponse(stop_reason="end_turn")

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        pass


if __name__ == "__main__":
    asyncio.run(run_agent(BenchAgent()))
