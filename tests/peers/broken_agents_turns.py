"""Broken agents for prompt turns: tool calls, permission, cancellation, capability gating,
fs / terminal use and prompt content.  Each is the reference agent with one method overridden.

Merged into ``BREAKAGES`` by ``broken_agents.py`` (run them through it).
"""

from __future__ import annotations

import os
from typing import Any, ClassVar

import anyio

from acp_conformance.core import jsonrpc
from acp_conformance.core.events import Response
from acp_conformance.peer import NO_ANSWER, HandlerError
from mock_agent import MockAgent, Session, Turn
from mock_agent.agent import CANCELLED
from tests.peers._breakage import Breakage, Json

END_TURN = "end_turn"


# ----------------------------------------------------------------- tool calls
class RelativeToolLocation(MockAgent):
    def tool_call(self, turn: Turn, tool_call_id: str) -> Json:
        update = super().tool_call(turn, tool_call_id)
        update["locations"] = [{"path": os.path.basename(loc["path"]), "line": 1} for loc in update["locations"]]
        return update


class ToolLocationLineZero(MockAgent):
    def tool_call(self, turn: Turn, tool_call_id: str) -> Json:
        update = super().tool_call(turn, tool_call_id)
        update["locations"] = [{**loc, "line": 0} for loc in update["locations"]]
        return update


class DiffOldTextForNewFile(MockAgent):
    async def emit(self, turn: Turn, update: Json) -> None:
        content = update.get("content")
        if isinstance(content, list):
            # The probe file did not exist before: a diff of it has no old text ("null for new files").
            content = [{**c, "oldText": ""} if c.get("type") == "diff" else c for c in content]
            update = {**update, "content": content}
        await super().emit(turn, update)


class DiffNewTextPartial(MockAgent):
    async def emit(self, turn: Turn, update: Json) -> None:
        content = update.get("content")
        if isinstance(content, list):
            # Only the first line of what it wrote: not "the new content after modification".
            content = [
                {**c, "newText": str(c["newText"]).split("\n")[0]} if c.get("type") == "diff" else c for c in content
            ]
            update = {**update, "content": content}
        await super().emit(turn, update)


class RelativeDiffPath(MockAgent):
    async def emit(self, turn: Turn, update: Json) -> None:
        content = update.get("content")
        if isinstance(content, list):
            update = {
                **update,
                "content": [
                    {**c, "path": os.path.basename(c["path"])} if c.get("type") == "diff" else c for c in content
                ],
            }
        await super().emit(turn, update)


class _OneToolCallId(Session):
    def next_tool_call_id(self) -> str:
        return "call_001"


class ReusedToolCallId(MockAgent):
    def create_session(self, cwd: str, mcp_servers: list[Any], params: Json) -> Session:
        session = _OneToolCallId(id=self.new_session_id(), cwd=cwd, mcp_servers=mcp_servers, updated_at=self.now())
        self.sessions[session.id] = session
        return session


class UpdateForUnknownToolCall(MockAgent):
    def tool_update(self, tool_call_id: str, status: str, content: list[Json] | None = None, **extra: Any) -> Json:
        if status in ("completed", "failed"):
            tool_call_id += "-final"  # a tool call it never announced
        return super().tool_update(tool_call_id, status, content, **extra)


class StatusAfterCompleted(MockAgent):
    async def run_tool(self, turn: Turn, tool_call_id: str) -> str:
        outcome = await super().run_tool(turn, tool_call_id)
        if outcome == END_TURN:
            await self.emit(turn, self.tool_update(tool_call_id, "in_progress"))
        return outcome


class UnannouncedToolCall(MockAgent):
    async def send_update(self, session_id: str, update: Json) -> None:
        if update.get("sessionUpdate") == "tool_call":
            return  # runs the tool (asks permission for it) but never announces it
        await super().send_update(session_id, update)


class NoInProgress(MockAgent):
    def tool_update(self, tool_call_id: str, status: str, content: list[Json] | None = None, **extra: Any) -> Json:
        return super().tool_update(tool_call_id, "pending" if status == "in_progress" else status, content, **extra)


class TerminalEmbeddedAfterRelease(MockAgent):
    async def release_terminal(self, turn: Turn, terminal_id: str) -> None:
        await super().release_terminal(turn, terminal_id)
        await self.emit(
            turn,
            {
                "sessionUpdate": "tool_call_update",
                "toolCallId": f"call_{turn.session.tool_seq:03d}",
                "content": [{"type": "terminal", "terminalId": terminal_id}],
            },
        )


# ----------------------------------------------------------------- permission
class IgnoresRejection(MockAgent):
    async def request_permission(self, turn: Turn, tool_call_id: str) -> str:
        decision = await super().request_permission(turn, tool_call_id)
        return "allow_once" if decision in ("reject_once", "reject_always") else decision


class RemembersAllowOnce(MockAgent):
    async def request_permission(self, turn: Turn, tool_call_id: str) -> str:
        decision = await super().request_permission(turn, tool_call_id)
        if decision == "allow_once":
            turn.session.allow_always = True
        return decision


class DuplicateOptionIds(MockAgent):
    def permission_options(self) -> list[Json]:
        options = super().permission_options()
        # Same behaviour for either: both ids mean "reject" to this agent.
        return [*options[:3], {**options[3], "optionId": options[2]["optionId"]}]


# --------------------------------------------------------------- cancellation
class EndsCancelledTurnsWithEndTurn(MockAgent):
    def stop_reason(self, turn: Turn, proposed: str) -> str:
        return END_TURN if turn.cancelled and turn.reason == "session/cancel" else super().stop_reason(turn, proposed)


class ErrorOnCancel(MockAgent):
    async def prompt_turn(self, turn: Turn) -> str:
        outcome = await super().prompt_turn(turn)
        if turn.cancelled and turn.reason == "session/cancel":
            raise HandlerError(jsonrpc.ErrorCode.REQUEST_CANCELLED, "aborted")
        return outcome


class LateUpdateAfterCancel(MockAgent):
    """One more chunk right behind every turn it answered ``cancelled`` (whether our session/cancel or a
    cancelled permission outcome ended it: which one comes first is a race the suite does not decide)."""

    answered_cancelled: ClassVar[set[int]] = set()  # id() of the turns answered cancelled

    def stop_reason(self, turn: Turn, proposed: str) -> str:
        reason = super().stop_reason(turn, proposed)
        if reason == "cancelled":
            self.answered_cancelled.add(id(turn))
        return reason

    async def after_prompt_response(self, turn: Turn) -> None:
        if id(turn) in self.answered_cancelled:
            self.answered_cancelled.discard(id(turn))
            await self.send_update(turn.session_id, self.message_chunk("agent_message_chunk", "(aborted)", None))


class IgnoresCancel(MockAgent):
    def on_cancel(self, params: Json) -> None:
        pass  # the turn runs on as if nothing had been asked


class ForgetsCancelOnCancelledPermission(MockAgent):
    async def request_permission(self, turn: Turn, tool_call_id: str) -> str:
        decision = await super().request_permission(turn, tool_call_id)
        if decision == "cancelled":
            # Reads the cancelled outcome as a plain "no" and drops the turn's cancellation with it.
            turn.cancel_event = anyio.Event()
            return "reject_once"
        return decision


class IdleCancelClosesSession(MockAgent):
    def on_cancel(self, params: Json) -> None:
        sid = params.get("sessionId")
        session = self.sessions.get(sid) if isinstance(sid, str) else None
        if session is not None and session.turn is None:
            del self.sessions[session.id]  # "cancelled" the whole session
        super().on_cancel(params)


class SwallowsCancelledRequest(MockAgent):
    def on_cancel_request(self, params: Json) -> None:
        rid = params.get("requestId")
        super().on_cancel_request(params)

        def drop(data: bytes) -> bytes:
            msg = jsonrpc.decode(data.rstrip(b"\n"))[0]
            return b"" if "method" not in msg and msg.get("id") == rid else data

        self.peer.wire_filter = drop  # the cancelled request's answer never leaves


# ------------------------------------------------------------ capability gating
class ReadsWithoutCapability(MockAgent):
    def can_read_files(self) -> bool:
        return True


class ReadsWhenFsOmitted(MockAgent):
    """Honours ``readTextFile: false`` but takes a capability the client left out for granted."""

    def can_read_files(self) -> bool:
        fs = self.client_caps.raw.get("fs")
        return super().can_read_files() or not (isinstance(fs, dict) and "readTextFile" in fs)


class ReadsWhenFlagOmitted(MockAgent):
    """Honours ``readTextFile: false`` and an absent ``fs``, but reads ``fs: {}`` as "all of fs"
    (the flag's schema default is false)."""

    def can_read_files(self) -> bool:
        fs = self.client_caps.raw.get("fs")
        return super().can_read_files() or (isinstance(fs, dict) and "readTextFile" not in fs)


# ---------------------------------------------------------------- elicitation
class ElicitationWithoutMessage(MockAgent):
    validate_outbound = False

    def elicitation_params(self, turn: Turn) -> Json:
        params = super().elicitation_params(turn)
        del params["message"]
        return params


class AsksApiKeyInForm(MockAgent):
    """Asks for a credential in a form (elicitation.mdx § Form mode: URL mode is for those)."""

    def elicitation_params(self, turn: Turn) -> Json:
        params = super().elicitation_params(turn)
        params["requestedSchema"]["properties"]["api_key"] = {"type": "string", "title": "Your API key"}
        return params


class AssumesElicitationSucceeds(MockAgent):
    """Waits for the greeting it assumes the user gave: after a decline or cancel the turn hangs
    until it is cancelled (or the connection ends)."""

    async def turn_elicit(self, turn: Turn) -> str:
        if not self.can_elicit_form():
            return await super().turn_elicit(turn)
        response = await self.client_request(turn, "elicitation/create", self.elicitation_params(turn))
        if self.elicited_choice(response) is None:
            await turn.cancel_event.wait()
            return CANCELLED
        return await super().turn_default(turn)


class UnknownActionAsAccept(MockAgent):
    """Reads any action but decline and cancel as accept, and uses the content it carries."""

    def elicited_choice(self, response: Response | None) -> str | None:
        result = response.result if response is not None and isinstance(response.result, dict) else {}
        content = result.get("content")
        if result.get("action") in ("decline", "cancel") or not isinstance(content, dict):
            return None
        return str(content.get("greeting"))


class ReusesOutstandingElicitationId(MockAgent):
    """One elicitationId for every URL elicitation, and no completion: the second reuses the id of
    the first while it is still outstanding (accepted, never completed)."""

    def new_elicitation_id(self) -> str:
        return "acp-mock-elicitation-1"

    async def turn_elicit_url(self, turn: Turn) -> str:
        if self.can_elicit_url():
            params = self.url_elicitation_params(turn, self.new_elicitation_id())
            await self.client_request(turn, "elicitation/create", params)
        return await super().turn_default(turn)


class TokenInElicitationUrl(MockAgent):
    """Puts an access token in the URL it asks the user to open."""

    def url_elicitation_params(self, turn: Turn, elicitation_id: str) -> Json:
        params = super().url_elicitation_params(turn, elicitation_id)
        params["url"] += "&access_token=acp-broken-secret-1234"
        return params


class CompletesUnknownElicitation(MockAgent):
    def completion_params(self, elicitation_id: str) -> Json:
        return {"elicitationId": f"{elicitation_id}-other"}


class PartialPlanUpdates(MockAgent):
    """After the first plan, each update lists only the entry whose status changed."""

    def plan_update(self, entries: list[Json]) -> Json:
        self._plans = getattr(self, "_plans", 0) + 1
        if self._plans == 1:
            return super().plan_update(entries)
        changed = [e for e in entries if e["status"] != "pending"][-1:]
        return super().plan_update(changed)


class WritesWithoutCapability(MockAgent):
    def can_write_files(self) -> bool:
        return True


class TerminalWithoutCapability(MockAgent):
    def can_use_terminal(self) -> bool:
        return True


class ElicitsWithoutCapability(MockAgent):
    async def run_tool(self, turn: Turn, tool_call_id: str) -> str:
        await self.client_request(
            turn,
            "elicitation/create",
            {
                "sessionId": turn.session_id,
                "toolCallId": tool_call_id,
                "mode": "form",
                "message": "Which greeting should the file contain?",
                "requestedSchema": {"type": "object", "properties": {"greeting": {"type": "string"}}},
            },
        )
        return await super().run_tool(turn, tool_call_id)


class ElicitsWhenElicitationPresent(MockAgent):
    """Takes the mere presence of clientCapabilities.elicitation for form support (MCP's rule)."""

    async def run_tool(self, turn: Turn, tool_call_id: str) -> str:
        if "elicitation" in self.client_caps.raw:
            await self.client_request(
                turn,
                "elicitation/create",
                {
                    "sessionId": turn.session_id,
                    "toolCallId": tool_call_id,
                    "mode": "form",
                    "message": "Which greeting should the file contain?",
                    "requestedSchema": {"type": "object", "properties": {"greeting": {"type": "string"}}},
                },
            )
        return await super().run_tool(turn, tool_call_id)


class FailsWithoutFs(MockAgent):
    async def run_tool(self, turn: Turn, tool_call_id: str) -> str:
        if not self.can_write_files():
            raise HandlerError(jsonrpc.ErrorCode.INTERNAL_ERROR, "internal error: no file system to write to")
        return await super().run_tool(turn, tool_call_id)


# ------------------------------------------------------------ fs and terminals
class RelativeReadPath(MockAgent):
    async def read_probe(self, turn: Turn) -> tuple[str, str | None]:
        params = {"sessionId": turn.session_id, "path": "acp-probe.txt", "line": 1, "limit": 1}
        response = await self.client_request(turn, "fs/read_text_file", params)
        return "", self._failure("fs/read_text_file", response, turn)


class ReadLineZero(MockAgent):
    async def read_probe(self, turn: Turn) -> tuple[str, str | None]:
        params = {"sessionId": turn.session_id, "path": self.probe_path(turn.session), "line": 0, "limit": 1}
        response = await self.client_request(turn, "fs/read_text_file", params)
        failure = self._failure("fs/read_text_file", response, turn)
        return (str(response.result.get("content")) if failure is None and response else ""), failure


class RelativeWritePath(MockAgent):
    async def write_probe(self, turn: Turn) -> str | None:
        params = {"sessionId": turn.session_id, "path": "acp-probe.txt", "content": "hello\n"}
        return self._failure("fs/write_text_file", await self.client_request(turn, "fs/write_text_file", params), turn)


class RelativeTerminalCwd(MockAgent):
    async def client_request(self, turn: Turn | None, method: str, params: Json, **kw: Any) -> Any:
        if method == "terminal/create":
            params = {**params, "cwd": "."}
        return await super().client_request(turn, method, params, **kw)


class NeverReleasesTerminals(MockAgent):
    async def release_terminal(self, turn: Turn, terminal_id: str) -> None:
        if terminal_id in turn.terminals:
            turn.terminals.remove(terminal_id)  # forgets it without terminal/release


# -------------------------------------------------------------------- content
class RejectsResourceLinks(MockAgent):
    async def prompt_turn(self, turn: Turn) -> str:
        if any(b.get("type") == "resource_link" for b in turn.prompt):
            raise HandlerError(jsonrpc.ErrorCode.INVALID_PARAMS, "resource_link blocks are not supported")
        return await super().prompt_turn(turn)


class RejectsAnnotations(MockAgent):
    async def prompt_turn(self, turn: Turn) -> str:
        if any("annotations" in b for b in turn.prompt):
            raise HandlerError(jsonrpc.ErrorCode.INVALID_PARAMS, "annotations are not supported")
        return await super().prompt_turn(turn)


class TalksAfterCrossingCancel(MockAgent):
    """A session/cancel for a session whose turn has just ended makes it say something more.

    Only a cancel that crossed an answer already sent: not one read behind a prompt whose handler
    has not started yet (that prompt ends ``cancelled``, and talking after *that* answer would also
    break cancel.updates-before-response, depending on when the cancel was read)."""

    def on_cancel(self, params: Json) -> None:
        super().on_cancel(params)
        sid = params.get("sessionId")
        session = self.sessions.get(sid) if isinstance(sid, str) else None
        queued = any(method == "session/prompt" for _, method in self.peer.conn.pending_incoming)
        if session is not None and session.turn is None and session.history and not queued:
            update = self.message_chunk("agent_message_chunk", "(stopping)", None)
            self.peer.start_soon(self.send_update, session.id, update)


class AnswersConcurrentPromptsTwice(MockAgent):
    """A prompt for a session whose turn is still running is refused twice (two error answers)."""

    async def handle_prompt(self, req: Any) -> Any:
        params = req.params if isinstance(req.params, dict) else {}
        session = self.sessions.get(params.get("sessionId", ""))
        if session is not None and session.turn is not None:
            error = {"code": jsonrpc.ErrorCode.INVALID_PARAMS, "message": "busy"}
            await self.peer.send_raw(jsonrpc.dumps({"jsonrpc": "2.0", "id": req.id, "error": error}) + b"\n")
        return await super().handle_prompt(req)  # refuses it (again)


class NeverAnswersOverlappingPrompt(MockAgent):
    """zed codex-acp 0.16.0: a second session/prompt while one runs is never answered."""

    async def handle_prompt(self, req: Any) -> Any:
        params = req.params if isinstance(req.params, dict) else {}
        session = self.sessions.get(params.get("sessionId", ""))
        if session is not None and session.turn is not None:
            return NO_ANSWER
        return await super().handle_prompt(req)


class RejectsDeclaredImages(MockAgent):
    async def prompt_turn(self, turn: Turn) -> str:
        if any(b.get("type") == "image" for b in turn.prompt):
            raise HandlerError(jsonrpc.ErrorCode.INVALID_PARAMS, "image blocks are not supported")
        return await super().prompt_turn(turn)


class AcceptsUndeclaredImages(MockAgent):
    def agent_capabilities(self) -> Json:
        caps = super().agent_capabilities()
        caps["promptCapabilities"] = {**caps["promptCapabilities"], "image": False}
        return caps  # ...and still takes image blocks like the reference does


_OMITTED = frozenset({"cap.omitted-unsupported", "cap.client.fs-defaults"})
_WHY = (
    "the scenario library's capability-gating turn declares no capabilities at all (clientCapabilities: {}): "
    "there its ungated call takes omitted capabilities for supported; and in the flags-omitted gating cell "
    "(fs: {}, terminal left out) it takes the flags' false defaults for true: each test's one clause"
)

BREAKAGES: dict[str, Breakage[MockAgent]] = {
    # tool calls
    "relative-tool-location": Breakage(RelativeToolLocation, "tool.location.shape"),
    "tool-location-line-zero": Breakage(ToolLocationLineZero, "session.lines.one-based", status="WARN"),
    "relative-diff-path": Breakage(RelativeDiffPath, "session.paths.absolute"),
    "diff-old-text-for-new-file": Breakage(DiffOldTextForNewFile, "tool.diff.semantics", status="WARN"),
    "diff-new-text-partial": Breakage(DiffNewTextPartial, "tool.diff.semantics", status="WARN"),
    "reused-tool-call-id": Breakage(ReusedToolCallId, "tool.id.unique", status="WARN"),
    "update-for-unknown-tool-call": Breakage(UpdateForUnknownToolCall, "tool.update.known-id", status="WARN"),
    "status-after-completed": Breakage(StatusAfterCompleted, "tool.status.terminal-final", status="WARN"),
    "unannounced-tool-call": Breakage(
        UnannouncedToolCall,
        "tool.report",
        status="WARN",
        also=frozenset({"tool.update.known-id"}),
        why_also="the scenario library and the stateful fuzzer count only a tool_call as introducing an id; "
        "test_tool_calls also accepts the permission request that carried it (as clients display it)",
    ),
    "no-in-progress": Breakage(NoInProgress, "prompt.tool-in-progress", status="WARN"),
    "terminal-embedded-after-release": Breakage(
        TerminalEmbeddedAfterRelease, "tool.terminal.embed-before-release", status="WARN"
    ),
    # permission
    "ignores-rejection": Breakage(IgnoresRejection, "perm.agent-honours-outcome", status="WARN"),
    "remembers-allow-once": Breakage(RemembersAllowOnce, "perm.agent-honours-outcome", status="WARN"),
    "duplicate-option-ids": Breakage(DuplicateOptionIds, "perm.option.shape", status="WARN"),
    # cancellation
    "ends-cancelled-turns-with-end-turn": Breakage(
        EndsCancelledTurnsWithEndTurn,
        "cancel.stop-reason",
        also=frozenset({"perm.agent-cancel-race"}),
        why_also="a turn cancelled while its permission request is pending is a cancelled turn too",
    ),
    "error-on-cancel": Breakage(ErrorOnCancel, "cancel.no-error"),
    "late-update-after-cancel": Breakage(
        LateUpdateAfterCancel,
        "cancel.updates-before-response",
        also=frozenset({"prompt.updates.before-response"}),
        why_also="the permission-after-cancel scenario judges output after the answer on the SHOULD: when the "
        "permission request beats our cancel, the agent may end the turn on its cancelled outcome before "
        "reading the cancel, so the MUST is not provable there",
    ),
    "ignores-cancel": Breakage(
        IgnoresCancel,
        "cancel.stop-asap",
        status="WARN",
        also=frozenset({"cancel.stop-reason"}),
        why_also="a turn held open by a client request we had not answered, then cancelled, ends end_turn "
        "once we answer: provably a cancelled turn not answered cancelled (a MUST). The long turns it "
        "streams on after the cancel are waited for in vain, but while it streams they are work in progress, "
        "not requests left unanswered (no jsonrpc.every-request-answered, and no deadline miss that would "
        "leave the later cancel tests unrun)",
    ),
    "forgets-cancel-on-cancelled-permission": Breakage(
        ForgetsCancelOnCancelledPermission,
        "perm.agent-cancel-race",
        also=frozenset({"session.close.cancels-work"}),
        why_also="session/close cancels a turn 'as if session/cancel had been called'; closed while its permission "
        "request is held, the turn gets the cancelled outcome, forgets the close's cancellation the same way and "
        "ends end_turn: provably (we held it) a closed turn not ended cancelled",
    ),
    "idle-cancel-closes-session": Breakage(IdleCancelClosesSession, "cancel.idle", status="INFO"),
    "swallows-cancelled-request": Breakage(SwallowsCancelledRequest, "cancelreq.must-answer"),
    # capability gating
    "reads-without-capability": Breakage(ReadsWithoutCapability, "fs.read.gated", also=_OMITTED, why_also=_WHY),
    "reads-when-fs-omitted": Breakage(
        ReadsWhenFsOmitted,
        "cap.omitted-unsupported",
        also=frozenset({"cap.client.fs-defaults"}),
        why_also="with fs: {} (the flags-omitted gating cell) it takes the flag's false default for true",
    ),
    "reads-when-flag-omitted": Breakage(ReadsWhenFlagOmitted, "cap.client.fs-defaults"),
    "elicitation-without-message": Breakage(ElicitationWithoutMessage, "elicit.request.shape"),
    "asks-api-key-in-form": Breakage(AsksApiKeyInForm, "elicit.form.no-secrets"),
    "assumes-elicitation-succeeds": Breakage(AssumesElicitationSucceeds, "elicit.agent-handles-failure"),
    "unknown-action-as-accept": Breakage(UnknownActionAsAccept, "elicit.response.unknown-action"),
    "reuses-outstanding-elicitation-id": Breakage(ReusesOutstandingElicitationId, "elicit.url.id-unique"),
    "completes-unknown-elicitation": Breakage(CompletesUnknownElicitation, "elicit.complete.routing"),
    "token-in-elicitation-url": Breakage(TokenInElicitationUrl, "elicit.url.safety"),
    "partial-plan-updates": Breakage(PartialPlanUpdates, "plan.full-list", suite_args=("--acp-dictated-plans",)),
    "writes-without-capability": Breakage(WritesWithoutCapability, "fs.write.gated", also=_OMITTED, why_also=_WHY),
    "terminal-without-capability": Breakage(TerminalWithoutCapability, "term.gated", also=_OMITTED, why_also=_WHY),
    "elicits-without-capability": Breakage(
        ElicitsWithoutCapability,
        "elicit.mode.gated",
        also=frozenset({"elicit.capability.explicit"}),
        why_also="it elicits whatever the client advertised, the all-null elicitation object included",
    ),
    "elicits-when-elicitation-present": Breakage(ElicitsWhenElicitationPresent, "elicit.capability.explicit"),
    "fails-without-fs": Breakage(
        FailsWithoutFs,
        "cap.all-combinations",
        status="WARN",
        also=frozenset({"prompt.response.stop-reason"}),
        why_also="the failure is an error answer to session/prompt, a turn that ends without a stopReason",
    ),
    # fs and terminals
    "relative-read-path": Breakage(RelativeReadPath, "fs.read.shape"),
    "read-line-zero": Breakage(ReadLineZero, "session.lines.one-based", status="WARN"),
    "relative-write-path": Breakage(RelativeWritePath, "fs.write.shape"),
    "relative-terminal-cwd": Breakage(RelativeTerminalCwd, "term.create.shape"),
    "never-releases-terminals": Breakage(NeverReleasesTerminals, "term.agent-releases"),
    # content
    "rejects-resource-links": Breakage(RejectsResourceLinks, "content.resource-link.baseline"),
    "rejects-annotations": Breakage(RejectsAnnotations, "content.annotations", status="INFO"),
    "answers-concurrent-prompts-twice": Breakage(
        AnswersConcurrentPromptsTwice,
        "prompt.concurrent-same-session",
        status="INFO",
        also=frozenset({"jsonrpc.no-duplicate-response"}),
        why_also="the second answer to the overlapping prompt is a duplicate response",
    ),
    "never-answers-overlapping-prompt": Breakage(NeverAnswersOverlappingPrompt, "jsonrpc.every-request-answered"),
    "talks-after-crossing-cancel": Breakage(
        TalksAfterCrossingCancel,
        "cancel.after-response",
        status="INFO",
        also=frozenset({"prompt.updates.before-response"}),
        why_also="the output a crossing cancel provokes comes after the turn's answer: the SHOULD that judges it",
    ),
    "rejects-declared-images": Breakage(RejectsDeclaredImages, "content.gated.agent-accepts"),
    "accepts-undeclared-images": Breakage(AcceptsUndeclaredImages, "content.gated.agent-undeclared", status="INFO"),
}
