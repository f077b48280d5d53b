"""Python floor, agent side: what ~40 lines of asyncio + stdlib ``json`` do, with no checks at all.

Not an ACP implementation (no validation, no error handling, no state): it shows what
the interpreter itself costs, so the distance from it to the real stacks is overhead.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys

from _shared import chunk_text, updates_wanted


async def main() -> None:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=1 << 24)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    wt, _ = await loop.connect_write_pipe(asyncio.Protocol, sys.stdout)
    sid = f"sess_{os.urandom(8).hex()}"
    while line := await reader.readline():
        msg = json.loads(line)
        method = msg.get("method")
        if method == "initialize":
            result = {"protocolVersion": 1, "agentCapabilities": {}, "authMethods": []}
        elif method == "session/new":
            result = {"sessionId": sid}
        elif method == "session/prompt":
            text = "".join(b.get("text", "") for b in msg["params"]["prompt"])
            for i in range(updates_wanted(text)):
                update = {
                    "sessionUpdate": "agent_message_chunk",
                    "content": {"type": "text", "text": chunk_text(i)},
                    "messageId": f"{sid}-agent-1",
                }
                note = {"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": sid, "update": update}}
                wt.write(json.dumps(note, separators=(",", ":")).encode() + b"\n")
            result = {"stopReason": "end_turn"}
        else:
            continue
        wt.write(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": result}).encode() + b"\n")


if __name__ == "__main__":
    asyncio.run(main())
