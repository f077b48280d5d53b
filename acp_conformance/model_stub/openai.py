"""The OpenAI Responses API, scripted (what the Codex app-server behind codex-acp talks to).

Serves ``POST /v1/responses`` (streamed as the public SSE event sequence:
``response.created``, ``response.in_progress``, per output item
``response.output_item.added`` ... ``response.output_item.done`` with
``response.output_text.delta`` / ``response.function_call_arguments.delta``
/ ``response.reasoning_summary_text.delta`` in between, then
``response.completed`` with usage; every event carries ``type`` and
``sequence_number``), and ``GET /v1/models``.  A tool result comes back as
a ``function_call_output`` input item.  Errors use the API's error body
``{"error": {"message", "type", "param", "code"}}``.
"""

from __future__ import annotations

import re
import time
import uuid
from typing import Any

import anyio
import orjson

from acp_conformance.model_stub._common import chunks, json_schema_of
from acp_conformance.model_stub.script import (
    Conversation,
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

__all__ = ["MODELS", "OpenAIResponsesApi", "conversation"]

MODELS = ("gpt-5", "gpt-5-codex")
_CWD = re.compile(r"<cwd>\s*([^<]+?)\s*</cwd>")
#: Tool results of the Responses API input (``function_call_output`` is the common one).
_OUTPUTS = frozenset(
    {"function_call_output", "custom_tool_call_output", "local_shell_call_output", "mcp_tool_call_output"}
)
#: User-role context messages an agent injects, which are not the user's prompt.
_CONTEXT_PREFIXES = (
    "<environment_context>",
    "<user_instructions>",
    "# AGENTS.md",
    "<permissions",
    "<turn_aborted>",
    "<user_shell_command>",
    "<skills_instructions>",
    "<collaboration_mode>",
)


def _texts(content: Any) -> list[str]:
    if isinstance(content, str):
        return [content]
    out: list[str] = []
    if isinstance(content, list):
        for part in content:
            if isinstance(part, dict) and isinstance(part.get("text"), str):
                out.append(part["text"])
    return out


def _output_text(item: dict[str, Any]) -> str:
    out = item.get("output")
    if isinstance(out, str):
        return out
    if isinstance(out, dict):
        inner = out.get("content")
        return inner if isinstance(inner, str) else "\n".join(_texts(inner))
    return "\n".join(_texts(out))


def conversation(body: Any) -> Conversation:
    """The provider-neutral view of a Responses API request body."""
    if not isinstance(body, dict):
        return Conversation("openai")
    raw = body.get("input")
    items: list[dict[str, Any]] = (
        [{"type": "message", "role": "user", "content": raw}]
        if isinstance(raw, str)
        else [i for i in raw or [] if isinstance(i, dict)]
    )
    tools = tuple(str(t.get("name") or t.get("type")) for t in body.get("tools") or [] if isinstance(t, dict))
    last_text = ""
    for item in reversed(items):
        if item.get("type", "message") == "message" and item.get("role") == "user":
            texts = [t for t in _texts(item.get("content")) if not t.lstrip().startswith(_CONTEXT_PREFIXES)]
            if texts:
                last_text = "\n".join(texts)
                break
    headline = last_text
    results: list[str] = []
    for item in reversed(items):
        if item.get("type") not in _OUTPUTS:
            break
        results.insert(0, _output_text(item))
    calls = sum(1 for i in items if i.get("type") in ("function_call", "custom_tool_call", "local_shell_call"))
    cwd = None
    for text in [str(body.get("instructions") or ""), *(t for i in items for t in _texts(i.get("content")))]:
        found = _CWD.search(text)
        if found:
            cwd = found.group(1).strip()
    return Conversation(
        "openai",
        model=str(body.get("model", "")),
        last_user_text=last_text,
        after_tool_result=bool(results),
        tool_results=tuple(results),
        tools=tools,
        cwd=cwd,
        tool_calls_so_far=calls,
        streaming=bool(body.get("stream")),
        system_text="\n".join(
            [
                str(body.get("instructions") or ""),
                *(t for i in items if i.get("role") in ("developer", "system") for t in _texts(i.get("content"))),
            ]
        ),
        headline=headline,
        output_schema=_output_schema(body),
    )


def _output_schema(body: dict[str, Any]) -> dict[str, Any] | None:
    text = body.get("text")
    return json_schema_of(text.get("format") if isinstance(text, dict) else None)


class _Stream:
    """Numbers the events of one streamed response."""

    def __init__(self, resp: Responder) -> None:
        self.resp = resp
        self.seq = 0

    async def send(self, kind: str, **fields: Any) -> bool:
        data = {"type": kind, "sequence_number": self.seq, **fields}
        self.seq += 1
        return await self.resp.event(kind, data)


class OpenAIResponsesApi:
    """Request handler for a ``StubServer``."""

    provider = "openai"

    def __init__(self, script: Script) -> None:
        self.script = script
        self._n = 0
        #: Slow streams (``SlowText``) being written now: while one is open, the turn that asked
        #: for it cannot have ended by itself (``ModelStub.holding``).
        self.slow_open = 0

    async def __call__(self, req: HttpRequest, resp: Responder) -> None:
        self._n += 1
        headers = {"x-request-id": f"req_stub_{self._n:04d}", "openai-processing-ms": "1"}
        path = req.path.rstrip("/")
        if req.method == "POST" and path.endswith("/responses"):
            await self._responses(req, resp, headers)
        elif req.method == "GET" and path.endswith("/models"):
            resp.record.rule, resp.record.answer = "models", f"{len(MODELS)} models"
            data = [{"id": m, "object": "model", "created": 1735689600, "owned_by": "stub"} for m in MODELS]
            await resp.json(200, {"object": "list", "data": data}, headers)
        else:
            resp.record.rule, resp.record.answer = "unscripted", "404"
            msg = f"the model stub does not serve {req.method} {path}"
            await resp.json(404, _error("invalid_request_error", msg, "not_found"), headers)

    async def _responses(self, req: HttpRequest, resp: Responder, headers: dict[str, str]) -> None:
        body = req.json()
        conv = conversation(body)
        last = (conv.headline or conv.last_user_text).strip().replace("\n", " ")
        resp.record.about = (
            f"tools={len(conv.tools)} stream={conv.streaming} "
            + (f"after {len(conv.tool_results)} tool output(s) " if conv.after_tool_result else "")
            + f"last user: {last[:60]!r}"
        )
        rule, reply = self.script.decide(conv)
        resp.record.rule, resp.record.answer = rule, reply.summary()
        if reply.error is not None:
            f = reply.error
            await resp.json(f.status, _error(f.type, f.message, f.type), headers)
            return
        await self._answer(conv, reply, resp, headers)

    async def _answer(self, conv: Conversation, reply: Reply, resp: Responder, headers: dict[str, str]) -> None:
        response: dict[str, Any] = {
            "id": f"resp_stub_{uuid.uuid4().hex[:24]}",
            "object": "response",
            "created_at": int(time.time()),
            "status": "in_progress",
            "model": conv.model or MODELS[0],
            "output": [],
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": [],
            "usage": None,
        }
        s: _Stream | None = None
        if conv.streaming:
            await resp.start_stream(headers)
            s = _Stream(resp)
            if not await s.send("response.created", response=response):
                return
            await s.send("response.in_progress", response=response)
        output: list[dict[str, Any]] = []
        out_tokens = 0
        n_calls = conv.tool_calls_so_far
        for index, part in enumerate(reply.parts):
            if isinstance(part, ToolCall):
                n_calls += 1
                args = orjson.dumps(expand(dict(part.arguments), conv, n_calls)).decode()
                item, ok = await self._function_call(s, index, part, args)
                out_tokens += len(args) // 4 + 1
            elif isinstance(part, Thinking):
                item, ok = await self._reasoning(s, index, part.text)
                out_tokens += len(part.text) // 4 + 1
            elif isinstance(part, Text):
                item, ok = await self._message(s, index, chunks(render(part.text, conv), part.chunk), None)
                out_tokens += len(part.text) // 4 + 1
            else:
                item, ok = await self._message(s, index, [], part, resp)
                out_tokens += 1
            if not ok:
                return
            output.append(item)
        usage = {
            "input_tokens": 10,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": out_tokens,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": 10 + out_tokens,
        }
        done = {**response, "status": "completed", "output": output, "usage": usage}
        if s is None:
            await resp.json(200, done, headers)
            return
        await s.send("response.completed", response=done)
        await resp.end_stream()

    async def _function_call(
        self, s: _Stream | None, index: int, part: ToolCall, args: str
    ) -> tuple[dict[str, Any], bool]:
        item = {
            "type": "function_call",
            "id": f"fc_stub_{uuid.uuid4().hex[:20]}",
            "call_id": part.id or f"call_stub_{uuid.uuid4().hex[:20]}",
            "name": part.name,
            "arguments": "",
            "status": "in_progress",
        }
        done = {**item, "arguments": args, "status": "completed"}
        if s is None:
            return done, True
        ok = await s.send("response.output_item.added", output_index=index, item=item)
        for piece in chunks(args, 32):
            ok = ok and await s.send(
                "response.function_call_arguments.delta", item_id=item["id"], output_index=index, delta=piece
            )
        ok = ok and await s.send(
            "response.function_call_arguments.done", item_id=item["id"], output_index=index, arguments=args
        )
        ok = ok and await s.send("response.output_item.done", output_index=index, item=done)
        return done, ok

    async def _reasoning(self, s: _Stream | None, index: int, text: str) -> tuple[dict[str, Any], bool]:
        rid = f"rs_stub_{uuid.uuid4().hex[:20]}"
        done = {"type": "reasoning", "id": rid, "summary": [{"type": "summary_text", "text": text}]}
        if s is None:
            return done, True
        ok = await s.send(
            "response.output_item.added", output_index=index, item={"type": "reasoning", "id": rid, "summary": []}
        )
        where = {"item_id": rid, "output_index": index, "summary_index": 0}
        ok = ok and await s.send(
            "response.reasoning_summary_part.added", **where, part={"type": "summary_text", "text": ""}
        )
        for piece in chunks(text, 24):
            ok = ok and await s.send("response.reasoning_summary_text.delta", **where, delta=piece)
        ok = ok and await s.send("response.reasoning_summary_text.done", **where, text=text)
        ok = ok and await s.send(
            "response.reasoning_summary_part.done", **where, part={"type": "summary_text", "text": text}
        )
        ok = ok and await s.send("response.output_item.done", output_index=index, item=done)
        return done, ok

    async def _message(
        self,
        s: _Stream | None,
        index: int,
        pieces: list[str],
        slow: SlowText | None,
        resp: Responder | None = None,
    ) -> tuple[dict[str, Any], bool]:
        mid = f"msg_stub_{uuid.uuid4().hex[:20]}"
        item = {"type": "message", "id": mid, "status": "in_progress", "role": "assistant", "content": []}
        where = {"item_id": mid, "output_index": index, "content_index": 0}
        ok = True
        if s is not None:
            ok = await s.send("response.output_item.added", output_index=index, item=item)
            ok = ok and await s.send(
                "response.content_part.added", **where, part={"type": "output_text", "text": "", "annotations": []}
            )
        sent: list[str] = []
        for piece in pieces:
            sent.append(piece)
            if s is not None:
                ok = ok and await s.send("response.output_text.delta", **where, delta=piece, logprobs=[])
        if slow is not None and resp is not None and ok:
            ok = await self._slow(s, resp, slow, where, sent)
        if not ok:
            return item, False
        text = "".join(sent)
        part = {"type": "output_text", "text": text, "annotations": []}
        done = {**item, "status": "completed", "content": [part]}
        if s is not None:
            ok = await s.send("response.output_text.done", **where, text=text, logprobs=[])
            ok = ok and await s.send("response.content_part.done", **where, part=part)
            ok = ok and await s.send("response.output_item.done", output_index=index, item=done)
        return done, ok

    async def _slow(
        self, s: _Stream | None, resp: Responder, slow: SlowText, where: dict[str, Any], sent: list[str]
    ) -> bool:
        self.slow_open += 1
        try:
            return await self._slow_stream(s, resp, slow, where, sent)
        finally:
            self.slow_open -= 1

    async def _slow_stream(
        self, s: _Stream | None, resp: Responder, slow: SlowText, where: dict[str, Any], sent: list[str]
    ) -> bool:
        resp.watch_client()
        with anyio.move_on_after(slow.max_seconds):
            while True:
                if s is not None and not await s.send(
                    "response.output_text.delta", **where, delta=slow.piece, logprobs=[]
                ):
                    resp.record.notes.append(f"client went away after {len(sent)} slow pieces")
                    return False
                sent.append(slow.piece)
                with anyio.move_on_after(slow.interval):
                    await resp.client_gone.wait()
                if resp.client_gone.is_set():
                    resp.record.notes.append(f"client went away after {len(sent)} slow pieces")
                    return False
        resp.record.notes.append(f"slow stream ended after {slow.max_seconds:g} s ({len(sent)} pieces)")
        return True


def _error(kind: str, message: str, code: str | None) -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "param": None, "code": code}}
