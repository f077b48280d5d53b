"""Broken agents for the clauses judged on every frame (acp_conformance/checks/wire.py and the
core's envelope findings): each is the reference agent with one thing it sends made wrong.

Most of them also break the schema, which says so under its own clause (the per-update shape
clause or schema.valid): that is declared as collateral, with the reason.  The wire check adds
the clause that names the requirement.

Merged into ``BREAKAGES`` by ``broken_agents.py`` (run them through it).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from acp_conformance.core import jsonrpc
from acp_conformance.core.events import Request
from acp_conformance.peer import HandlerError, Peer
from mock_agent import MockAgent, Session, Turn
from tests.peers._breakage import Breakage, Json, own_requests_answered

REQUEST_CANCELLED = -32800


class _ExtraUpdate(MockAgent):
    """The default turn sends one more (wrong) update after its thought chunk."""

    validate_outbound = False

    def extra(self) -> Json:
        raise NotImplementedError

    async def emit(self, turn: Turn, update: Json) -> None:
        await super().emit(turn, update)
        if update.get("sessionUpdate") == "agent_thought_chunk":
            await self.send_update(turn.session_id, self.extra())


# ------------------------------------------------------------------- envelope
class StringParamsRequest(MockAgent):
    """Asks the client something with ``params`` a string (JSON-RPC allows only an object or array,
    ACP only an object)."""

    async def turn_default(self, turn: Turn) -> str:
        await self.peer.send_raw(b'{"jsonrpc":"2.0","id":"x-1","method":"_mock/hint","params":"look here"}\n')
        return await super().turn_default(turn)


class NullIdRequest(MockAgent):
    """One request with a null id per connection (a second one would also reuse that id)."""

    sent_null_id = False

    async def turn_default(self, turn: Turn) -> str:
        if not self.sent_null_id:
            self.sent_null_id = True
            await self.peer.send_raw(b'{"jsonrpc":"2.0","id":null,"method":"_mock/hint","params":{}}\n')
        return await super().turn_default(turn)


# -------------------------------------------------------------- update kinds
class SendsNotices(_ExtraUpdate):
    def extra(self) -> Json:
        return {"sessionUpdate": "notice", "severity": "info", "title": "Heads up"}


class EmptyNoticeTitle(_ExtraUpdate):
    def extra(self) -> Json:
        return {"sessionUpdate": "notice", "severity": "warning", "title": ""}


class SendsCompaction(_ExtraUpdate):
    def extra(self) -> Json:
        return {"sessionUpdate": "compaction_update", "compactionId": "c1", "status": "completed"}


class CompactionWithoutId(_ExtraUpdate):
    def extra(self) -> Json:
        return {"sessionUpdate": "compaction_update", "status": "completed"}


class SendsPlanUpdate(_ExtraUpdate):
    def extra(self) -> Json:
        return {"sessionUpdate": "plan_update", "entries": []}


# ------------------------------------------------------------ content blocks
class ImageWithoutData(_ExtraUpdate):
    def extra(self) -> Json:
        return {"sessionUpdate": "agent_message_chunk", "content": {"type": "image", "mimeType": "image/png"}}


class ImageNotBase64(_ExtraUpdate):
    def extra(self) -> Json:
        return {
            "sessionUpdate": "agent_message_chunk",
            "content": {"type": "image", "mimeType": "image/png", "data": "<svg>not base64</svg>"},
        }


# ---------------------------------------------------------------- tool calls
class UnknownToolKind(MockAgent):
    validate_outbound = False

    def tool_call(self, turn: Turn, tool_call_id: str) -> Json:
        return {**super().tool_call(turn, tool_call_id), "kind": "write"}


class UnknownToolStatus(MockAgent):
    validate_outbound = False

    def tool_update(self, tool_call_id: str, status: str, content: list[Json] | None = None, **extra: Any) -> Json:
        return super().tool_update(tool_call_id, "done" if status == "completed" else status, content, **extra)


class BareToolContent(MockAgent):
    """Tool call content as a bare ContentBlock, as the session-modes.mdx example has it."""

    validate_outbound = False

    @staticmethod
    def text_content(text: str) -> Json:
        return {"type": "text", "text": text}


# ------------------------------------------------------------- config options
class UnnamedConfigOption(MockAgent):
    """session/new announces its first config option without the required name."""

    validate_outbound = False

    def new_session_result(self, session: Session) -> Json:
        result = super().new_session_result(session)
        first, *rest = result["configOptions"]
        result["configOptions"] = [{k: v for k, v in first.items() if k != "name"}, *rest]
        return result


# ---------------------------------------------------------- $/cancel_request
class MirrorsCancelRequest(MockAgent):
    """Answers our ``$/cancel_request`` with one of its own naming *our* request."""

    def on_cancel_request(self, params: Json) -> None:
        super().on_cancel_request(params)
        self.peer.start_soon(self.peer.notify, "$/cancel_request", {"requestId": params.get("requestId")})


class CancelledRequestAsInternalError(MockAgent):
    """Aborts the session/prompt named by ``$/cancel_request`` with -32603 instead of -32800."""

    def on_cancel_request(self, params: Json) -> None:
        super().on_cancel_request(params)
        self.cancelled_by_request = jsonrpc.id_key(params.get("requestId"))

    def prompt_result(self, turn: Turn, stop_reason: str) -> Json:
        if getattr(self, "cancelled_by_request", None) == jsonrpc.id_key(turn.request_id):
            raise HandlerError(-32603, "request aborted")
        return super().prompt_result(turn, stop_reason)


_SCHEMA = "the schema rejects the same frame, under {}"


class ConfusesIdSpaces(MockAgent):
    """Refuses a request whose id equals one of its own pending requests' ids ("id in use"):
    the mirror of broken_clients.ConfusesIdSpaces."""

    def install_handlers(self, peer: Peer) -> None:
        super().install_handlers(peer)

        async def unknown(req: Request) -> Any:
            if peer.conn.is_outstanding(req.id):
                raise HandlerError(-32600, f"id {req.id!r} is already in use")
            raise HandlerError(-32601, f"method not found: {req.method}")

        peer.default_handler = unknown


class V2UpdatesAfterV1(_ExtraUpdate):
    """Agrees on version 1, then speaks v2: a ``state_update`` (claude-agent-acp serves v1 and v2
    from one router)."""

    def extra(self) -> Json:
        return {"sessionUpdate": "state_update", "state": "idle"}


class ServesNothingWhileWaiting(MockAgent):
    """Serves one direction at a time: a request from the client waits until every request of
    its own has been answered (every request is still answered, only late)."""

    def install_handlers(self, peer: Peer) -> None:
        super().install_handlers(peer)

        def serial(fn: Callable[[Request], Awaitable[Any]]) -> Callable[[Request], Awaitable[Any]]:
            async def handler(req: Request) -> Any:
                await own_requests_answered(peer)
                return await fn(req)

            return handler

        async def unknown(req: Request) -> Any:
            raise HandlerError(-32601, f"method not found: {req.method}")

        for method, fn in list(peer.handlers.items()):
            peer.handlers[method] = serial(fn)
        peer.default_handler = serial(unknown)


BREAKAGES: dict[str, Breakage[MockAgent]] = {
    "serves-nothing-while-waiting": Breakage(
        ServesNothingWhileWaiting,
        "jsonrpc.bidirectional",
        status="WARN",
        also=frozenset({"mode.set.anytime", "config.set.anytime"}),
        why_also="a mode or config change sent during a turn waits for the agent's pending permission request (the "
        "SHOULDs: changeable at any point); the silences of tests that hold that request for their whole deadline "
        "(a ping, the stateful machine's session/new) are this clause's defect, not also requests left unanswered "
        "(Peer.why_unproven): jsonrpc.every-request-answered and ext.request.respond must stay quiet",
        quiet=frozenset({"jsonrpc.every-request-answered", "ext.request.respond"}),
    ),
    "v2-updates-after-v1": Breakage(V2UpdatesAfterV1, "init.version.agree"),
    "confuses-id-spaces": Breakage(ConfusesIdSpaces, "jsonrpc.id-spaces-independent"),
    "string-params-request": Breakage(StringParamsRequest, "jsonrpc.request-shape"),
    "null-id-request": Breakage(NullIdRequest, "jsonrpc.id-not-null", status="WARN"),
    "sends-notices": Breakage(SendsNotices, "update.notice.gated"),
    "empty-notice-title": Breakage(
        EmptyNoticeTitle,
        "update.notice.shape",
        also=frozenset({"update.notice.gated"}),
        why_also="the suite's client never advertises session.notices, so any notice is ungated too",
    ),
    "sends-compaction": Breakage(SendsCompaction, "update.compaction.gated"),
    "compaction-without-id": Breakage(
        CompactionWithoutId,
        "update.compaction.shape",
        also=frozenset({"update.compaction.gated"}),
        why_also="the suite's client never advertises session.compaction, so any compaction update is ungated too",
    ),
    "sends-plan-update": Breakage(
        SendsPlanUpdate,
        "update.no-unstable-variants",
        also=frozenset({"update.discriminator"}),
        why_also=_SCHEMA.format("update.discriminator (no such variant in the stable schema)"),
    ),
    "image-without-data": Breakage(
        ImageWithoutData,
        "content.block.shapes",
        also=frozenset({"update.chunk.shape"}),
        why_also=_SCHEMA.format("update.chunk.shape"),
    ),
    "image-not-base64": Breakage(ImageNotBase64, "content.base64", status="WARN"),
    "unknown-tool-kind": Breakage(
        UnknownToolKind,
        "tool.kind.enum",
        also=frozenset({"update.tool-call.shape"}),
        why_also=_SCHEMA.format("update.tool-call.shape"),
    ),
    "unknown-tool-status": Breakage(
        UnknownToolStatus,
        "tool.status.enum",
        also=frozenset({"update.tool-call-update.shape"}),
        why_also=_SCHEMA.format("update.tool-call-update.shape"),
    ),
    "bare-tool-content": Breakage(
        BareToolContent,
        "tool.content.shapes",
        also=frozenset({"update.tool-call-update.shape"}),
        why_also=_SCHEMA.format("update.tool-call-update.shape"),
    ),
    "unnamed-config-option": Breakage(
        UnnamedConfigOption,
        "config.shape",
        also=frozenset({"schema.valid"}),
        why_also=_SCHEMA.format("schema.valid (session/new result)"),
    ),
    "mirrors-cancel-request": Breakage(MirrorsCancelRequest, "cancelreq.shape", status="WARN"),
    "cancelled-request-as-internal-error": Breakage(CancelledRequestAsInternalError, "error.cancelled"),
}
