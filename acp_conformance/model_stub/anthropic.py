"""The Anthropic Messages API, scripted (what Claude Code behind claude-agent-acp talks to).

Serves ``POST /v1/messages`` (streamed as the public SSE event sequence:
``message_start``, ``ping``, per content block ``content_block_start`` /
``content_block_delta`` (``text_delta``, ``thinking_delta`` +
``signature_delta``, ``input_json_delta``) / ``content_block_stop``, then
``message_delta`` with ``stop_reason`` and ``message_stop``; or one JSON
message when ``stream`` is false), ``POST /v1/messages/count_tokens`` and
``GET /v1/models``.  Errors use the API's error body,
``{"type": "error", "error": {"type", "message"}}``, with
``x-should-retry: false`` so the client's retry loop does not turn a
scripted error into minutes of back-off.
"""

from __future__ import annotations

import re
import uuid
from typing import Any

import anyio
import orjson

from acp_conformance.model_stub._common import chunks, json_schema_of
from acp_conformance.model_stub.script import (
    Conversation,
    Fail,
    Reply,
    Script,
    SlowText,
    Text,
    Thinking,
    ToolCall,
    expand,
    render,
)
from acp_conformance.model_stub.server import HttpRequest, Responder

__all__ = ["MODELS", "AnthropicApi", "conversation"]

#: What ``GET /v1/models`` lists (names only matter to the client's model picker).
MODELS = ("claude-sonnet-4-5", "claude-opus-4-1", "claude-haiku-4-5")
_CWD = re.compile(r"(?:Primary working directory|Working directory|cwd):\s*(/[^\s<\"']*)")


def _texts(content: Any) -> list[str]:
    if isinstance(content, str):
        return [content]
    out: list[str] = []
    if isinstance(content, list):
        for block in content:
            if isinstance(block, dict) and block.get("type") == "text" and isinstance(block.get("text"), str):
                out.append(block["text"])
    return out


def _tool_result_text(block: dict[str, Any]) -> str:
    content = block.get("content")
    return "\n".join(_texts(content)) if not isinstance(content, str) else content


def conversation(body: Any) -> Conversation:
    """The provider-neutral view of a Messages API request body."""
    if not isinstance(body, dict):
        return Conversation("anthropic")
    messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
    tools = tuple(str(t.get("name")) for t in body.get("tools") or [] if isinstance(t, dict) and t.get("name"))
    last_text = headline = ""
    for m in reversed(messages):
        if m.get("role") == "user":
            texts = _texts(m.get("content"))
            if texts:
                last_text = "\n".join(texts)
                own = [t for t in texts if not t.lstrip().startswith("<system-reminder>")]
                headline = (own or texts)[-1]
                break
    after_tool = False
    results: list[str] = []
    # Mid-conversation "system" messages (environment notes) do not end the exchange.
    exchange = [m for m in messages if m.get("role") in ("user", "assistant")]
    if exchange and exchange[-1].get("role") == "user" and isinstance(exchange[-1].get("content"), list):
        for block in exchange[-1]["content"]:
            if isinstance(block, dict) and block.get("type") == "tool_result":
                after_tool = True
                results.append(_tool_result_text(block))
    calls = sum(
        1
        for m in messages
        if m.get("role") == "assistant" and isinstance(m.get("content"), list)
        for b in m["content"]
        if isinstance(b, dict) and b.get("type") == "tool_use"
    )
    cwd = None
    haystack = [*_texts(body.get("system")), *(t for m in messages for t in _texts(m.get("content")))]
    for text in haystack:
        found = _CWD.search(text)
        if found:
            cwd = found.group(1).rstrip(".,;")
            break
    return Conversation(
        "anthropic",
        model=str(body.get("model", "")),
        last_user_text=last_text,
        after_tool_result=after_tool,
        tool_results=tuple(results),
        tools=tools,
        cwd=cwd,
        tool_calls_so_far=calls,
        streaming=bool(body.get("stream")),
        system_text="\n".join(_texts(body.get("system"))),
        headline=headline,
        output_schema=_output_schema(body),
    )


def _output_schema(body: dict[str, Any]) -> dict[str, Any] | None:
    for holder in (body.get("output_config"), body):
        schema = json_schema_of(holder.get("format") if isinstance(holder, dict) else None)
        if schema is not None:
            return schema
    return None


class AnthropicApi:
    """Request handler for a ``StubServer``."""

    provider = "anthropic"

    def __init__(self, script: Script) -> None:
        self.script = script
        self._n = 0
        #: Slow streams (``SlowText``) being written now: while one is open, the turn that asked
        #: for it cannot have ended by itself (``ModelStub.holding``).
        self.slow_open = 0

    async def __call__(self, req: HttpRequest, resp: Responder) -> None:
        self._n += 1
        headers = {"request-id": f"req_stub_{self._n:04d}", "anthropic-organization-id": "stub"}
        path = req.path.rstrip("/")
        if req.method == "POST" and path == "/v1/messages":
            await self._messages(req, resp, headers)
        elif req.method == "POST" and path == "/v1/messages/count_tokens":
            body = req.json()
            n = len(orjson.dumps(body)) // 4 if body is not None else 0
            resp.record.rule, resp.record.answer = "count_tokens", f"{n} tokens"
            await resp.json(200, {"input_tokens": n}, headers)
        elif req.method == "GET" and path == "/v1/models":
            resp.record.rule, resp.record.answer = "models", f"{len(MODELS)} models"
            data = [_model(m) for m in MODELS]
            await resp.json(
                200, {"data": data, "has_more": False, "first_id": MODELS[0], "last_id": MODELS[-1]}, headers
            )
        elif req.method == "GET" and path.startswith("/v1/models/"):
            resp.record.rule, resp.record.answer = "models", "one model"
            await resp.json(200, _model(path.rsplit("/", 1)[1]), headers)
        else:
            resp.record.rule, resp.record.answer = "unscripted", "404 not_found_error"
            await resp.json(
                404, _error("not_found_error", f"the model stub does not serve {req.method} {path}"), headers
            )

    async def _messages(self, req: HttpRequest, resp: Responder, headers: dict[str, str]) -> None:
        body = req.json()
        conv = conversation(body)
        last = (conv.headline or conv.last_user_text).strip().replace("\n", " ")
        resp.record.about = (
            f"tools={len(conv.tools)} stream={conv.streaming} "
            + ("after tool_result " if conv.after_tool_result else "")
            + f"last user: {last[:60]!r}"
        )
        rule, reply = self.script.decide(conv)
        resp.record.rule, resp.record.answer = rule, reply.summary()
        if reply.error is not None:
            await _fail(resp, reply.error, headers)
        elif conv.streaming:
            await self._stream(conv, reply, resp, headers)
        else:
            await self._whole(conv, reply, resp, headers)

    async def _stream(self, conv: Conversation, reply: Reply, resp: Responder, headers: dict[str, str]) -> None:
        msg_id = f"msg_stub_{uuid.uuid4().hex[:20]}"
        await resp.start_stream(headers)
        start = {
            "type": "message_start",
            "message": {
                "id": msg_id,
                "type": "message",
                "role": "assistant",
                "model": conv.model or MODELS[0],
                "content": [],
                "stop_reason": None,
                "stop_sequence": None,
                "usage": {
                    "input_tokens": 10,
                    "output_tokens": 1,
                    "cache_creation_input_tokens": 0,
                    "cache_read_input_tokens": 0,
                },
            },
        }
        if not await resp.event("message_start", start):
            return
        await resp.event("ping", {"type": "ping"})
        out_tokens = 1
        n_calls = conv.tool_calls_so_far
        for index, part in enumerate(reply.parts):
            if isinstance(part, Text):
                ok = await self._block(
                    resp,
                    index,
                    {"type": "text", "text": ""},
                    [{"type": "text_delta", "text": c} for c in chunks(render(part.text, conv), part.chunk)],
                )
                out_tokens += len(part.text) // 4 + 1
            elif isinstance(part, Thinking):
                deltas: list[dict[str, Any]] = [
                    {"type": "thinking_delta", "thinking": c} for c in chunks(part.text, 24)
                ]
                deltas.append({"type": "signature_delta", "signature": "c3R1Yi1zaWduYXR1cmU="})
                ok = await self._block(resp, index, {"type": "thinking", "thinking": "", "signature": ""}, deltas)
                out_tokens += len(part.text) // 4 + 1
            elif isinstance(part, ToolCall):
                n_calls += 1
                args = orjson.dumps(expand(dict(part.arguments), conv, n_calls)).decode()
                block = {
                    "type": "tool_use",
                    "id": part.id or f"toolu_stub_{uuid.uuid4().hex[:20]}",
                    "name": part.name,
                    "input": {},
                }
                ok = await self._block(
                    resp, index, block, [{"type": "input_json_delta", "partial_json": c} for c in chunks(args, 32)]
                )
                out_tokens += len(args) // 4 + 1
            else:
                ok, sent = await self._slow(resp, index, part)
                out_tokens += sent
            if not ok:
                return
        stop = "tool_use" if reply.tool_calls else "end_turn"
        await resp.event(
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": stop, "stop_sequence": None},
                "usage": {"output_tokens": out_tokens},
            },
        )
        await resp.event("message_stop", {"type": "message_stop"})
        await resp.end_stream()

    async def _block(self, resp: Responder, index: int, block: dict[str, Any], deltas: list[dict[str, Any]]) -> bool:
        if not await resp.event(
            "content_block_start", {"type": "content_block_start", "index": index, "content_block": block}
        ):
            return False
        for delta in deltas:
            if not await resp.event(
                "content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta}
            ):
                return False
        return await resp.event("content_block_stop", {"type": "content_block_stop", "index": index})

    async def _slow(self, resp: Responder, index: int, part: SlowText) -> tuple[bool, int]:
        self.slow_open += 1
        try:
            return await self._slow_stream(resp, index, part)
        finally:
            self.slow_open -= 1

    async def _slow_stream(self, resp: Responder, index: int, part: SlowText) -> tuple[bool, int]:
        if not await resp.event(
            "content_block_start",
            {"type": "content_block_start", "index": index, "content_block": {"type": "text", "text": ""}},
        ):
            return False, 0
        sent = 0
        with anyio.move_on_after(part.max_seconds):
            while True:
                delta = {"type": "text_delta", "text": part.piece}
                if not await resp.event(
                    "content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta}
                ):
                    resp.record.notes.append(f"client went away after {sent} slow pieces")
                    return False, sent
                sent += 1
                with anyio.move_on_after(part.interval):
                    await resp.client_gone.wait()
                if resp.client_gone.is_set():
                    resp.record.notes.append(f"client went away after {sent} slow pieces")
                    return False, sent
        resp.record.notes.append(f"slow stream ended after {part.max_seconds:g} s ({sent} pieces)")
        ok = await resp.event("content_block_stop", {"type": "content_block_stop", "index": index})
        return ok, sent

    async def _whole(self, conv: Conversation, reply: Reply, resp: Responder, headers: dict[str, str]) -> None:
        content: list[dict[str, Any]] = []
        n_calls = conv.tool_calls_so_far
        for part in reply.parts:
            if isinstance(part, Text):
                content.append({"type": "text", "text": render(part.text, conv)})
            elif isinstance(part, Thinking):
                content.append({"type": "thinking", "thinking": part.text, "signature": "c3R1Yi1zaWduYXR1cmU="})
            elif isinstance(part, ToolCall):
                n_calls += 1
                content.append(
                    {
                        "type": "tool_use",
                        "id": part.id or f"toolu_stub_{uuid.uuid4().hex[:20]}",
                        "name": part.name,
                        "input": expand(dict(part.arguments), conv, n_calls),
                    }
                )
            else:
                resp.watch_client()
                with anyio.move_on_after(part.max_seconds):
                    await resp.client_gone.wait()
                if resp.client_gone.is_set():
                    resp.record.notes.append("client went away while the slow answer was pending")
                    return
                content.append({"type": "text", "text": part.piece})
        body = {
            "id": f"msg_stub_{uuid.uuid4().hex[:20]}",
            "type": "message",
            "role": "assistant",
            "model": conv.model or MODELS[0],
            "content": content,
            "stop_reason": "tool_use" if reply.tool_calls else "end_turn",
            "stop_sequence": None,
            "usage": {
                "input_tokens": 10,
                "output_tokens": 10,
                "cache_creation_input_tokens": 0,
                "cache_read_input_tokens": 0,
            },
        }
        await resp.json(200, body, headers)


def _model(model_id: str) -> dict[str, Any]:
    return {"type": "model", "id": model_id, "display_name": model_id, "created_at": "2025-01-01T00:00:00Z"}


def _error(kind: str, message: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": kind, "message": message}}


async def _fail(resp: Responder, fail: Fail, headers: dict[str, str]) -> None:
    await resp.json(fail.status, _error(fail.type, fail.message), {**headers, "x-should-retry": "false"})
