"""A prompt turn as the suite's agent plays it: what a test scripts from the agent side.

``AgentEndpoint`` (``endpoints.agent``) hands every ``session/prompt`` to the test as a
``PromptTurn``: updates, permission requests and their answers (``PermissionAnswer``), fs and
terminal calls, the final stop reason.  Kept apart from the endpoint's lifecycle handling, which
is the other half of the agent the suite plays.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from acp_conformance.core.events import Notification, Request, Response
from acp_conformance.core.jsonrpc import ErrorCode
from acp_conformance.errors import PeerExited
from acp_conformance.peer import Peer

if TYPE_CHECKING:
    from acp_conformance.endpoints.agent import AgentEndpoint

__all__ = ["ALLOW_ONCE", "DEFAULT_OPTIONS", "PermissionAnswer", "PromptTurn"]

ALLOW_ONCE = {"optionId": "allow-once", "name": "Allow once", "kind": "allow_once"}
DEFAULT_OPTIONS: list[dict[str, Any]] = [
    ALLOW_ONCE,
    {"optionId": "allow-always", "name": "Always allow", "kind": "allow_always"},
    {"optionId": "reject-once", "name": "Reject", "kind": "reject_once"},
    {"optionId": "reject-always", "name": "Always reject", "kind": "reject_always"},
]

@dataclass
class PermissionAnswer:
    """One ``session/request_permission`` the agent sent and what came back."""

    request_id: Any
    session_id: str
    options: list[dict[str, Any]]
    response: Response | None = None

    @property
    def outcome(self) -> dict[str, Any] | None:
        r = self.response
        if r is None or r.is_error or not isinstance(r.result, dict):
            return None
        o = r.result.get("outcome")
        return o if isinstance(o, dict) else None

    @property
    def kind(self) -> str | None:
        """``selected`` / ``cancelled`` / ``error`` / ``None`` (not answered)."""
        if self.response is None:
            return None
        if self.response.is_error:
            return "error"
        o = self.outcome
        return o.get("outcome") if o is not None and isinstance(o.get("outcome"), str) else "malformed"

    @property
    def option_id(self) -> Any:
        o = self.outcome
        return o.get("optionId") if o else None

    @property
    def unimplemented(self) -> bool:
        """The client answered -32601: it does not implement its baseline method (overview.mdx),
        ``perm.client-baseline``'s WARN; its outcome clauses then have nothing to judge."""
        return self.response is not None and self.response.code == ErrorCode.METHOD_NOT_FOUND

    def describe(self) -> str:
        """For messages: the error, the outcome, or that nothing came."""
        if self.response is None:
            return "no answer"
        if self.response.is_error:
            return f"error {self.response.error!r}"
        return f"result {self.response.result!r}"

    @property
    def option_kind(self) -> str | None:
        for opt in self.options:
            if opt.get("optionId") == self.option_id:
                k = opt.get("kind")
                return k if isinstance(k, str) else None
        return None


class PromptTurn:
    """One ``session/prompt`` from the client, scripted from the agent side."""

    def __init__(self, endpoint: AgentEndpoint, request: Request) -> None:
        self.endpoint = endpoint
        self.request = request
        params = request.params if isinstance(request.params, dict) else {}
        sid, prompt = params.get("sessionId"), params.get("prompt")
        self.session_id: str = sid if isinstance(sid, str) else ""
        self.prompt: list[Any] = prompt if isinstance(prompt, list) else []
        self.answered = False
        self._tool_seq = 0

    @property
    def peer(self) -> Peer:
        return self.endpoint.peer

    @property
    def text(self) -> str:
        return " ".join(b.get("text", "") for b in self.prompt if isinstance(b, dict) and b.get("type") == "text")

    def new_tool_call_id(self) -> str:
        self._tool_seq += 1
        return f"call-{self._tool_seq}-{secrets.token_hex(3)}"

    # -------------------------------------------------------------- updates
    async def update(self, update: dict[str, Any], *, validate: bool = True, session_id: str | None = None) -> None:
        params: dict[str, Any] = {"sessionId": session_id or self.session_id, "update": update}
        if self.endpoint.setup.meta:
            params["_meta"] = {"acp-conformance": {"seq": self._tool_seq}}
        await self.peer.notify("session/update", params, validate=validate)

    async def say(self, text: str) -> None:
        content: dict[str, Any] = {"type": "text", "text": text}
        if self.endpoint.setup.meta:
            content["_meta"] = {"acp-conformance": "chunk"}
        await self.update({"sessionUpdate": "agent_message_chunk", "content": content})

    async def tool_call(
        self, title: str = "Edit a file", *, kind: str = "edit", status: str = "pending", **extra: Any
    ) -> str:
        tcid = self.new_tool_call_id()
        await self.update(
            {"sessionUpdate": "tool_call", "toolCallId": tcid, "title": title, "kind": kind, "status": status, **extra}
        )
        return tcid

    async def tool_update(self, tool_call_id: str, status: str, **extra: Any) -> None:
        await self.update({"sessionUpdate": "tool_call_update", "toolCallId": tool_call_id, "status": status, **extra})

    # ----------------------------------------------------------- permission
    async def send_permission(
        self,
        tool_call_id: str | None = None,
        options: list[dict[str, Any]] | None = None,
        *,
        title: str = "Write a file",
    ) -> PermissionAnswer:
        """Send ``session/request_permission`` without waiting for the answer."""
        opts = [dict(o) for o in (options or DEFAULT_OPTIONS)]
        tcid = tool_call_id or self.new_tool_call_id()
        tool_call: dict[str, Any] = {"toolCallId": tcid, "title": title, "kind": "edit", "status": "pending"}
        params: dict[str, Any] = {"sessionId": self.session_id, "toolCall": tool_call, "options": opts}
        if self.endpoint.setup.meta:
            params["_meta"] = {"acp-conformance": "permission"}
        rid = await self.peer.send_request("session/request_permission", params)
        answer = PermissionAnswer(rid, self.session_id, opts)
        self.endpoint.permissions.append(answer)
        return answer

    async def wait_permission(
        self, answer: PermissionAnswer, timeout: float | None = None, *, flag: bool = True
    ) -> PermissionAnswer:
        """Wait for the client's answer and judge it (shape, offered option, cancelled).
        ``flag``: as ``Peer.wait_response``'s (false: the caller judges a silence itself)."""
        resp = await self.peer.wait_response(
            answer.request_id, method="session/request_permission", timeout=timeout, flag=flag
        )
        answer.response = resp
        await self.endpoint.judge_permission(answer)
        return answer

    async def withdraw(self, request_id: Any) -> None:
        """``$/cancel_request`` for one of our pending requests (cancellation.mdx): the client may
        act on it; if it does, the request still gets one answer, a result or error -32800."""
        self.endpoint.cancel_requested_ids.add(request_id)
        await self.peer.notify("$/cancel_request", {"requestId": request_id})

    async def request_permission(
        self,
        tool_call_id: str | None = None,
        options: list[dict[str, Any]] | None = None,
        timeout: float | None = None,
    ) -> PermissionAnswer:
        return await self.wait_permission(await self.send_permission(tool_call_id, options), timeout)

    # ---------------------------------------------------------- fs/terminal
    async def call(
        self, method: str, params: dict[str, Any], *, timeout: float | None = None, validate: bool = True
    ) -> Response:
        full = {"sessionId": self.session_id, **params}
        if self.endpoint.setup.meta:
            full.setdefault("_meta", {"acp-conformance": method})
        return await self.peer.call(method, full, timeout=timeout, validate=validate)

    async def read_text_file(self, path: str, line: int | None = None, limit: int | None = None) -> Response:
        params: dict[str, Any] = {"path": path}
        if line is not None:
            params["line"] = line
        if limit is not None:
            params["limit"] = limit
        return await self.call("fs/read_text_file", params)

    async def write_text_file(self, path: str, content: str) -> Response:
        return await self.call("fs/write_text_file", {"path": path, "content": content})

    async def create_terminal(
        self,
        command: str,
        args: list[str] | None = None,
        *,
        cwd: str | None = None,
        output_byte_limit: int | None = None,
        timeout: float | None = None,
    ) -> Response:
        params: dict[str, Any] = {"command": command, "args": list(args or [])}
        if cwd is not None:
            params["cwd"] = cwd
        if output_byte_limit is not None:
            params["outputByteLimit"] = output_byte_limit
        return await self.call("terminal/create", params, timeout=timeout)

    async def terminal(self, method: str, terminal_id: Any, timeout: float | None = None) -> Response:
        return await self.call(f"terminal/{method}", {"terminalId": terminal_id}, timeout=timeout, validate=False)

    # ------------------------------------------------------------------ end
    async def end(self, stop_reason: str = "end_turn") -> None:
        """Answer the ``session/prompt`` request (once)."""
        if self.answered:
            return
        self.answered = True
        result: dict[str, Any] = {"stopReason": stop_reason}
        if self.endpoint.setup.meta:
            result["_meta"] = {"acp-conformance": "end"}
        try:
            await self.peer.respond(self.request.id, result, method="session/prompt")
        except PeerExited:
            pass

    async def wait_cancel(self, timeout: float | None = None) -> Notification | Request:
        """The client's ``session/cancel`` for this turn's session."""
        return await self.endpoint.wait_cancel(self.session_id, timeout)
