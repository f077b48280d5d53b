"""The scripted model endpoints, against a tiny in-test HTTP/1.1 client.

The event sequences are checked against the public API shapes (Anthropic
Messages streaming, OpenAI Responses streaming); the script model, request
recording, the unscripted defaults and the peer-profile plumbing are
checked without starting any adapter.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import pytest

from acp_conformance.model_stub import (
    Fail,
    Match,
    ModelStub,
    Reply,
    Rule,
    Script,
    ScriptError,
    SlowText,
    Text,
    Thinking,
    ToolCall,
    default_script,
    model_stub_setup,
)
from acp_conformance.model_stub import anthropic as anthropic_api
from acp_conformance.model_stub import openai as openai_api
from acp_conformance.profiles.agents import CLAUDE_AGENT_ACP, CODEX_ACP, ProfileError, profile_setup, resolve

pytestmark = pytest.mark.anyio

DEADLINE = 10.0


# ----------------------------------------------------------- HTTP client
@dataclass
class Resp:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)

    def events(self) -> list[tuple[str | None, Any]]:
        """The SSE events of the body: ``(event name, parsed data)``."""
        out: list[tuple[str | None, Any]] = []
        for block in self.body.decode().split("\n\n"):
            if not block.strip():
                continue
            name = None
            data = []
            for line in block.split("\n"):
                if line.startswith("event: "):
                    name = line[len("event: ") :]
                elif line.startswith("data: "):
                    data.append(line[len("data: ") :])
            out.append((name, json.loads("\n".join(data))))
        return out


class Client:
    """One keep-alive HTTP/1.1 connection."""

    def __init__(self, stream: anyio.abc.SocketStream) -> None:
        self.stream = stream
        self.buf = b""

    async def _more(self) -> None:
        data = await self.stream.receive()
        self.buf += data

    async def _until(self, delim: bytes) -> bytes:
        while delim not in self.buf:
            await self._more()
        head, self.buf = self.buf.split(delim, 1)
        return head

    async def _exactly(self, n: int) -> bytes:
        while len(self.buf) < n:
            await self._more()
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    async def send(
        self,
        method: str,
        path: str,
        body: Any = None,
        headers: dict[str, str] | None = None,
        *,
        chunked: bool = False,
    ) -> None:
        data = b"" if body is None else json.dumps(body).encode()
        head = {"host": "127.0.0.1", "content-type": "application/json", **(headers or {})}
        if chunked:
            head["transfer-encoding"] = "chunked"
            half = len(data) // 2
            payload = b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in (data[:half], data[half:]) if p) + b"0\r\n\r\n"
        else:
            head["content-length"] = str(len(data))
            payload = data
        lines = [f"{method} {path} HTTP/1.1", *(f"{k}: {v}" for k, v in head.items())]
        await self.stream.send(("\r\n".join(lines) + "\r\n\r\n").encode() + payload)

    async def head(self) -> tuple[int, dict[str, str]]:
        raw = (await self._until(b"\r\n\r\n")).decode("latin-1").split("\r\n")
        status = int(raw[0].split(" ")[1])
        headers = {}
        for line in raw[1:]:
            k, _, v = line.partition(":")
            headers[k.strip().lower()] = v.strip()
        return status, headers

    async def chunk(self) -> bytes | None:
        size = int((await self._until(b"\r\n")).split(b";")[0], 16)
        if size == 0:
            await self._until(b"\r\n")
            return None
        data = await self._exactly(size)
        await self._exactly(2)
        return data

    async def response(self) -> Resp:
        status, headers = await self.head()
        if headers.get("transfer-encoding") == "chunked":
            body = b""
            while (piece := await self.chunk()) is not None:
                body += piece
        else:
            body = await self._exactly(int(headers.get("content-length", "0")))
        return Resp(status, headers, body)

    async def request(self, method: str, path: str, body: Any = None, **kw: Any) -> Resp:
        await self.send(method, path, body, **kw)
        return await self.response()


async def connect(stub: ModelStub) -> Client:
    return Client(await anyio.connect_tcp("127.0.0.1", stub.server.port))


async def call(stub: ModelStub, method: str, path: str, body: Any = None, **kw: Any) -> Resp:
    client = await connect(stub)
    async with client.stream:
        with anyio.fail_after(DEADLINE):
            return await client.request(method, path, body, **kw)


# ------------------------------------------------------------- requests
def messages_body(*messages: dict[str, Any], tools: bool = True, stream: bool = True, **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": "claude-test",
        "max_tokens": 1000,
        "system": [{"type": "text", "text": "You are a test.\nPrimary working directory: /work/sandbox"}],
        "messages": list(messages),
        "stream": stream,
        **extra,
    }
    if tools:
        body["tools"] = [{"name": "Write", "input_schema": {"type": "object"}}, {"name": "Bash"}]
    return body


def user(text: str) -> dict[str, Any]:
    return {
        "role": "user",
        "content": [{"type": "text", "text": "<system-reminder>ctx</system-reminder>"}, {"type": "text", "text": text}],
    }


def responses_body(*items: dict[str, Any], escalation: bool = True, **extra: Any) -> dict[str, Any]:
    perms = "Provide `sandbox_permissions` = `require_escalated`" if escalation else "Approval policy is never."
    return {
        "model": "gpt-test",
        "instructions": "You are Codex.",
        "input": [
            {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": perms}]},
            {
                "type": "message",
                "role": "user",
                "content": [{"type": "input_text", "text": "<environment_context>\n  <cwd>/work/box</cwd>\n"}],
            },
            *items,
        ],
        "tools": [{"type": "function", "name": "exec_command", "parameters": {}}],
        "stream": True,
        **extra,
    }


def oa_user(text: str) -> dict[str, Any]:
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}


# --------------------------------------------------------- Anthropic SSE
def check_anthropic_stream(resp: Resp) -> list[tuple[str | None, Any]]:
    """The public event grammar: names equal data types, blocks opened/closed in order."""
    assert resp.status == 200
    assert resp.headers["content-type"].startswith("text/event-stream")
    events = resp.events()
    for name, data in events:
        assert name == data["type"], (name, data)
    names = [n for n, _ in events]
    assert names[0] == "message_start" and names[-2:] == ["message_delta", "message_stop"]
    start = events[0][1]["message"]
    assert start["role"] == "assistant" and start["content"] == [] and start["stop_reason"] is None
    open_index: int | None = None
    seen: list[int] = []
    for name, data in events[1:-2]:
        if name == "content_block_start":
            assert open_index is None
            open_index = data["index"]
            seen.append(open_index)
        elif name == "content_block_delta":
            assert data["index"] == open_index
        elif name == "content_block_stop":
            assert data["index"] == open_index
            open_index = None
        else:
            assert name == "ping"
    assert open_index is None
    assert seen == list(range(len(seen)))
    return events


def blocks(events: list[tuple[str | None, Any]]) -> list[dict[str, Any]]:
    """Reassemble the content blocks from their deltas."""
    out: list[dict[str, Any]] = []
    for name, data in events:
        if name == "content_block_start":
            out.append({**data["content_block"], "_json": ""})
        elif name == "content_block_delta":
            d = data["delta"]
            block = out[data["index"]]
            if d["type"] == "text_delta":
                block["text"] += d["text"]
            elif d["type"] == "input_json_delta":
                block["_json"] += d["partial_json"]
            elif d["type"] == "thinking_delta":
                block["thinking"] += d["thinking"]
            elif d["type"] == "signature_delta":
                block["signature"] += d["signature"]
    for block in out:
        if block["type"] == "tool_use":
            block["input"] = json.loads(block["_json"])
        del block["_json"]
    return out


async def test_anthropic_plain_text_turn() -> None:
    async with ModelStub("anthropic") as stub:
        resp = await call(stub, "POST", "/v1/messages?beta=true", messages_body(user("Hello there")))
    events = check_anthropic_stream(resp)
    assert blocks(events) == [{"type": "text", "text": "Hello from the scripted model."}]
    assert events[-2][1]["delta"]["stop_reason"] == "end_turn"
    assert stub.requests[0].rule == "default"


async def test_anthropic_tool_call_then_final_text() -> None:
    async with ModelStub("anthropic") as stub:
        first = await call(stub, "POST", "/v1/messages", messages_body(user("acp:tool please write")))
        events = check_anthropic_stream(first)
        (tool,) = blocks(events)
        assert tool["type"] == "tool_use" and tool["name"] == "Write" and tool["id"].startswith("toolu_")
        assert tool["input"] == {"file_path": "/work/sandbox/acp-probe.txt", "content": "hello\n"}
        assert events[-2][1]["delta"]["stop_reason"] == "tool_use"
        result = {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": tool["id"], "content": "File created successfully"}],
        }
        assistant = {"role": "assistant", "content": [{k: tool[k] for k in ("type", "id", "name", "input")}]}
        body = messages_body(user("acp:tool please write"), assistant, result)
        # A mid-conversation system message does not hide the tool result.
        body["messages"].append({"role": "system", "content": "note"})
        second = await call(stub, "POST", "/v1/messages", body)
    events = check_anthropic_stream(second)
    assert blocks(events) == [{"type": "text", "text": "Done. The tool reported: File created successfully"}]
    assert events[-2][1]["delta"]["stop_reason"] == "end_turn"
    assert [r.rule for r in stub.requests] == ["tool", "after-tool"]


async def test_anthropic_side_request_without_tools_gets_the_default() -> None:
    """A title request carries the prompt but offers no tools: no tool call for it."""
    async with ModelStub("anthropic") as stub:
        resp = await call(stub, "POST", "/v1/messages", messages_body(user("acp:tool x"), tools=False))
    assert blocks(check_anthropic_stream(resp))[0]["type"] == "text"
    assert stub.requests[0].rule == "default"


async def test_anthropic_structured_output_gets_json() -> None:
    schema = {"type": "object", "properties": {"title": {"type": "string"}}, "required": ["title"]}
    body = messages_body(
        user("name it"), tools=False, output_config={"format": {"type": "json_schema", "schema": schema}}
    )
    async with ModelStub("anthropic") as stub:
        resp = await call(stub, "POST", "/v1/messages", body)
    (text,) = blocks(check_anthropic_stream(resp))
    assert isinstance(json.loads(text["text"])["title"], str)


async def test_anthropic_thinking_and_several_tool_calls() -> None:
    script = Script(
        [
            Rule(
                Match(contains="two"),
                Reply(
                    (
                        Thinking("let me think"),
                        Text("Two calls."),
                        ToolCall("Bash", {"command": "echo {n}"}),
                        ToolCall("Bash", {"command": "echo {n}"}),
                    )
                ),
                name="two",
            )
        ]
    )
    async with ModelStub("anthropic", script) as stub:
        resp = await call(stub, "POST", "/v1/messages", messages_body(user("do two things")))
    got = blocks(check_anthropic_stream(resp))
    assert [b["type"] for b in got] == ["thinking", "text", "tool_use", "tool_use"]
    assert got[0]["thinking"] == "let me think" and got[0]["signature"]
    assert [b["input"]["command"] for b in got[2:]] == ["echo 1", "echo 2"]
    assert got[2]["id"] != got[3]["id"]


async def test_anthropic_scripted_error_and_non_streaming() -> None:
    script = Script(
        [Rule(Match(contains="boom"), Reply(error=Fail(529, "overloaded_error", "busy")), name="boom")],
        Reply((Text("plain"),)),
    )
    async with ModelStub("anthropic", script) as stub:
        err = await call(stub, "POST", "/v1/messages", messages_body(user("boom")))
        whole = await call(stub, "POST", "/v1/messages", messages_body(user("hi"), stream=False))
    assert err.status == 529 and err.headers["x-should-retry"] == "false"
    assert err.json() == {"type": "error", "error": {"type": "overloaded_error", "message": "busy"}}
    msg = whole.json()
    assert whole.status == 200 and msg["type"] == "message" and msg["stop_reason"] == "end_turn"
    assert msg["content"] == [{"type": "text", "text": "plain"}]


async def test_anthropic_side_endpoints_and_unscripted_paths() -> None:
    async with ModelStub("anthropic") as stub:
        tokens = await call(stub, "POST", "/v1/messages/count_tokens", messages_body(user("x")))
        models = await call(stub, "GET", "/v1/models")
        missing = await call(stub, "POST", "/v1/complete", {"prompt": "x"})
    assert tokens.status == 200 and isinstance(tokens.json()["input_tokens"], int)
    assert models.status == 200 and models.json()["data"][0]["type"] == "model"
    assert missing.status == 404 and missing.json()["error"]["type"] == "not_found_error"
    assert [r.rule for r in stub.requests] == ["count_tokens", "models", "unscripted"]


# ------------------------------------------------------------ recording
async def test_every_request_is_recorded_without_credentials(tmp_path: Path) -> None:
    log = tmp_path / "requests.jsonl"
    async with ModelStub("anthropic", log=log) as stub:
        client = await connect(stub)
        async with client.stream:
            with anyio.fail_after(DEADLINE):
                secret = {"x-api-key": "sk-very-secret-1234", "authorization": "Bearer sk-very-secret-1234"}
                a = await client.request("POST", "/v1/messages", messages_body(user("one")), headers=secret)
                # keep-alive, and a chunked request body
                b = await client.request("POST", "/v1/messages", messages_body(user("two")), chunked=True)
    assert a.status == b.status == 200
    first, second = stub.requests
    assert first.headers["x-api-key"] == "[redacted]" and first.headers["authorization"] == "[redacted]"
    assert first.body["messages"][0]["content"][1]["text"] == "one"
    assert second.body["messages"][0]["content"][1]["text"] == "two"
    assert first.client == second.client and first.client.startswith("127.0.0.1:")
    evidence = stub.evidence()
    assert "2 request(s)" in evidence and "POST /v1/messages" in evidence and "'two'" in evidence
    assert "sk-very-secret" not in evidence
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    assert [line["rule"] for line in lines] == ["default", "default"]
    assert "sk-very-secret" not in log.read_text()


async def test_requests_for_other_hosts_are_refused_and_recorded() -> None:
    async with ModelStub("openai") as stub:
        connect_resp = await call(stub, "CONNECT", "github.com:443")
        absolute = await call(stub, "GET", "http://example.com/index.html")
        await call(stub, "GET", "/v1/models")
    assert connect_resp.status == absolute.status == 403
    assert [r.target for r in stub.egress] == ["github.com:443", "http://example.com/index.html"]
    assert "2 EGRESS ATTEMPT(S)" in stub.evidence()
    assert stub.env["HTTPS_PROXY"] == stub.url and "127.0.0.1" in stub.env["NO_PROXY"]


async def test_slow_stream_stops_when_the_client_goes_away() -> None:
    finished = anyio.Event()
    async with ModelStub("anthropic") as stub:
        stub.server.on_record = lambda record: finished.set()
        client = await connect(stub)
        with anyio.fail_after(DEADLINE):
            await client.send("POST", "/v1/messages", messages_body(user("acp:long count")))
            status, _ = await client.head()
            assert status == 200
            text = b""
            while b"counting" not in text:
                piece = await client.chunk()
                assert piece is not None
                text += piece
            await client.stream.aclose()  # the adapter cancels: it drops the connection
            await finished.wait()
    record = stub.requests[0]
    assert record.rule == "long"
    assert any("client went away" in note for note in record.notes), record.notes


async def test_slow_stream_is_bounded() -> None:
    script = Script([Rule(Match(), Reply((SlowText("tick ", interval=0.01, max_seconds=0.2),)), name="slow")])
    async with ModelStub("anthropic", script) as stub:
        resp = await call(stub, "POST", "/v1/messages", messages_body(user("x")))
    (text,) = blocks(check_anthropic_stream(resp))
    assert text["text"].startswith("tick tick ")
    assert any("slow stream ended" in note for note in stub.requests[0].notes)


# ----------------------------------------------------- OpenAI Responses
def check_responses_stream(resp: Resp) -> list[dict[str, Any]]:
    assert resp.status == 200 and resp.headers["content-type"].startswith("text/event-stream")
    events = [data for _, data in resp.events()]
    assert [name for name, _ in resp.events()] == [e["type"] for e in events]
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    assert [e["type"] for e in events[:2]] == ["response.created", "response.in_progress"]
    assert events[-1]["type"] == "response.completed"
    done = events[-1]["response"]
    assert done["status"] == "completed" and done["usage"]["total_tokens"] > 0
    added = [e["item"]["id"] for e in events if e["type"] == "response.output_item.added"]
    finished = [e["item"] for e in events if e["type"] == "response.output_item.done"]
    assert added == [i["id"] for i in finished] == [i["id"] for i in done["output"]]
    return events


async def test_responses_plain_text() -> None:
    async with ModelStub("openai") as stub:
        resp = await call(stub, "POST", "/v1/responses", responses_body(oa_user("Hello")))
    events = check_responses_stream(resp)
    kinds = [e["type"] for e in events[2:-1]]
    assert kinds[:2] == ["response.output_item.added", "response.content_part.added"]
    assert kinds[-3:] == ["response.output_text.done", "response.content_part.done", "response.output_item.done"]
    text = "".join(e["delta"] for e in events if e["type"] == "response.output_text.delta")
    assert text == "Hello from the scripted model."
    (item,) = events[-1]["response"]["output"]
    assert item["type"] == "message" and item["content"][0] == {"type": "output_text", "text": text, "annotations": []}


@pytest.mark.parametrize("escalation", [True, False])
async def test_responses_function_call_round_trip(escalation: bool) -> None:
    async with ModelStub("openai") as stub:
        first = await call(stub, "POST", "/v1/responses", responses_body(oa_user("acp:tool go"), escalation=escalation))
        events = check_responses_stream(first)
        (item,) = events[-1]["response"]["output"]
        assert item["type"] == "function_call" and item["name"] == "exec_command"
        streamed = "".join(e["delta"] for e in events if e["type"] == "response.function_call_arguments.delta")
        assert json.loads(streamed) == json.loads(item["arguments"])
        args = json.loads(item["arguments"])
        assert args["workdir"] == "/work/box" and "acp-probe.txt" in args["cmd"]
        assert ("sandbox_permissions" in args) is escalation
        output = {"type": "function_call_output", "call_id": item["call_id"], "output": "exit 0"}
        second = await call(
            stub, "POST", "/v1/responses", responses_body(oa_user("acp:tool go"), item, output, escalation=escalation)
        )
    (final,) = check_responses_stream(second)[-1]["response"]["output"]
    assert final["content"][0]["text"] == "Done. The tool reported: exit 0"
    assert stub.requests[1].rule == "after-tool"


async def test_responses_reasoning_error_and_models() -> None:
    script = Script(
        [
            Rule(Match(contains="think"), Reply((Thinking("hmm"), Text("ok"))), name="think"),
            Rule(Match(contains="boom"), Reply(error=Fail(400, "invalid_request_error", "no")), name="boom"),
        ]
    )
    async with ModelStub("openai", script) as stub:
        thought = await call(stub, "POST", "/v1/responses", responses_body(oa_user("think")))
        err = await call(stub, "POST", "/v1/responses", responses_body(oa_user("boom")))
        models = await call(stub, "GET", "/v1/models")
    events = check_responses_stream(thought)
    summary = "".join(e["delta"] for e in events if e["type"] == "response.reasoning_summary_text.delta")
    assert summary == "hmm"
    assert [i["type"] for i in events[-1]["response"]["output"]] == ["reasoning", "message"]
    assert err.status == 400 and err.json()["error"]["message"] == "no"
    assert models.json()["object"] == "list"


# ------------------------------------------------------- script model
def test_conversation_views() -> None:
    conv = anthropic_api.conversation(messages_body(user("acp:tool x")))
    assert conv.cwd == "/work/sandbox" and conv.tools == ("Write", "Bash") and not conv.after_tool_result
    assert conv.headline == "acp:tool x" and "acp:tool x" in conv.last_user_text
    oconv = openai_api.conversation(responses_body(oa_user("hi")))
    assert oconv.cwd == "/work/box" and oconv.last_user_text == "hi" and "require_escalated" in oconv.system_text


def test_script_from_toml_and_its_errors(tmp_path: Path) -> None:
    path = tmp_path / "script.toml"
    path.write_text(
        """
[[rule]]
name = "once"
contains = "acp:once"
times = 1
reply = [{type = "thinking", text = "t"}, {type = "tool_call", name = "Write", arguments = {file_path = "{cwd}/a"}}]

[[rule]]
name = "err"
contains = "acp:error"
error = {status = 400, type = "invalid_request_error", message = "scripted"}

[default]
reply = "plain default"
"""
    )
    script = Script.from_toml(path, base=default_script("anthropic"))
    assert [r.name for r in script.rules][:2] == ["once", "err"]
    assert "after-tool" in [r.name for r in script.rules]
    conv = anthropic_api.conversation(messages_body(user("acp:once")))
    assert script.decide(conv)[0] == "once"
    assert script.decide(conv)[0] == "default"  # times = 1
    assert script.default.parts == (Text("plain default"),)
    with pytest.raises(ScriptError, match="unknown part type"):
        Script.from_dict({"rule": [{"reply": [{"type": "video"}]}]})
    with pytest.raises(ScriptError, match="unknown keys"):
        Script.from_dict({"rule": [{"contain": "typo"}]})
    with pytest.raises(ScriptError, match="'times' must be a positive integer"):
        Script.from_dict({"rule": [{"times": 0}]})


# ----------------------------------------------------- profiles & setup
async def test_profile_setups_write_their_config(tmp_path: Path) -> None:
    async with profile_setup(CODEX_ACP)(tmp_path / "codex") as prepared:
        config = Path(prepared.env["CODEX_HOME"]) / "config.toml"
        text = config.read_text()
        assert f'base_url = "{prepared.stub.url}/v1"' in text and 'wire_api = "responses"' in text
        assert prepared.env["INITIAL_AGENT_MODE"] == "workspace-write"
        assert prepared.hints["permission_mode"] == "workspace-write"
        assert Path(prepared.env["HOME"]).is_dir()
    async with profile_setup(CLAUDE_AGENT_ACP)(tmp_path / "claude") as prepared:
        settings = json.loads((Path(prepared.env["HOME"]) / ".claude" / "settings.json").read_text())
        assert settings["permissions"]["defaultMode"] == "default"
        assert prepared.env["ANTHROPIC_BASE_URL"] == prepared.stub.url
        assert prepared.env.get("IS_SANDBOX") == ("1" if os.geteuid() == 0 else None)
        assert "profile=claude-agent-acp" in prepared.evidence()
    async with model_stub_setup("openai")(tmp_path / "plain") as plain:
        assert plain.env["OPENAI_BASE_URL"] == plain.stub.base_url


def test_resolve() -> None:
    assert resolve("python -m mock_agent", None) is None
    assert resolve("claude-agent-acp --flag", "none") is None
    command, _setup = resolve("python -m my_agent", "anthropic") or ("", None)
    assert command == "python -m my_agent"
    kept = resolve("claude-agent-acp --flag", None)
    assert kept is not None and kept[0] == "claude-agent-acp --flag"
    with pytest.raises(ProfileError, match="speaks the anthropic API"):
        resolve("claude-agent-acp --flag", "openai")
    with pytest.raises(ProfileError, match="say which API"):
        resolve("python -m my_agent", "script.toml")
    with pytest.raises(ProfileError, match="unknown model stub kind"):
        resolve("python -m my_agent", "gemini")


async def test_processes_of_one_test_reuse_the_stub_port(tmp_path: Path) -> None:
    setup = profile_setup(CODEX_ACP)
    async with setup(tmp_path) as first:
        port = first.stub.server.port
        async with setup(tmp_path) as concurrent:  # the port is taken: another one, its own config
            assert concurrent.stub.server.port != port
            assert f":{concurrent.stub.server.port}/v1" in (tmp_path / "codex-home" / "config.toml").read_text()
    async with setup(tmp_path) as later:  # consecutive processes (session/load) see the same base URL
        assert later.stub.server.port == port
        assert f":{port}/v1" in (tmp_path / "codex-home" / "config.toml").read_text()
    assert not (tmp_path / "model-requests.jsonl").exists()  # nothing was asked, nothing logged
