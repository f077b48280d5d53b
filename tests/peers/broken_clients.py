"""Broken clients: each one is the reference client with exactly one clause broken.

``python tests/peers/broken_clients.py NAME [mock_client options]`` runs one
(it takes the same options as ``python -m mock_client``).  ``BREAKAGES``
says, for each, which clause it breaks, the status the suite must give that
clause, and any *collateral* clauses the same defect necessarily breaks too
(with the reason).  ``tests/e2e/test_broken_clients.py`` runs the whole
client suite against each and asserts that the FAIL and WARN set is exactly
``{breaks} | also``, so a check that cannot fail, or that fires on the wrong
clause, is caught.

Breakages live in this file (transport, jsonrpc, robustness) and in
``broken_clients_*.py`` beside it, one module per area (lifecycle: initialize
and session setup; fs; permission; terminal; fuzz); this file merges them.
"""

from __future__ import annotations

import dataclasses
import importlib
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import orjson

if __name__ == "__main__":  # run as a file: make the repository root importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from acp_conformance.core.events import Notification, Request, Response
from acp_conformance.peer import NO_ANSWER, HandlerError, Peer
from acp_conformance.schema.validator import SchemaValidator
from acp_conformance.transport.process import ProcessTransport
from mock_client import MockClient
from mock_client.cli import main
from mock_client.client import ClientOptions
from tests.peers._breakage import Breakage, FilteredClient, Json, own_requests_answered
from tests.peers._quirks import answer_extensions


def _is_ext_request(msg: Json) -> bool:
    """Our answer to one of the suite's extension requests (-32601, message names the method)."""
    err = msg.get("error")
    return "method" not in msg and isinstance(err, dict) and "method not found: _" in str(err.get("message"))


# ------------------------------------------------------------------ transport
class KeepaliveText(MockClient):
    async def new_session(self) -> str:
        await self.peer.send_raw(b"keepalive\n")
        return await super().new_session()


class BadUtf8(MockClient):
    async def new_session(self) -> str:
        await self.peer.send_raw(b'{"jsonrpc":"2.0","method":"_log","params":{"t":"\xff\xfe"}}\n')
        return await super().new_session()


class Batch(MockClient):
    async def new_session(self) -> str:
        await self.peer.send_raw(b'[{"jsonrpc":"2.0","method":"_log","params":{}}]\n')
        return await super().new_session()


class PartialLineAtExit(MockClient):
    async def run_turn(self, session_id: str, text: str) -> dict[str, Any]:
        record = await super().run_turn(session_id, text)
        await self.peer.send_raw(b'{"jsonrpc":"2.0","method":"_bye","params":{}}')
        return record


class WrongJsonrpcVersion(FilteredClient):
    def mangle(self, msg: Json) -> Any:
        if msg.get("method") == "session/new":
            msg["jsonrpc"] = "1.0"
        return msg


class InvalidContentBlock(MockClient):
    def prompt_blocks(self, text: str) -> list[Json]:
        return [{"type": "text", "text": text, "annotations": {"priority": "high"}}]


# -------------------------------------------------------------------- jsonrpc
class StringifiedResponseIds(FilteredClient):
    def mangle(self, msg: Json) -> Any:
        if "method" not in msg and isinstance(msg.get("id"), int):
            msg["id"] = str(msg["id"])
        return msg


class MisaddressesStringIdAnswers(FilteredClient):
    """Answers a request under a string id under an id of its own making (``"re:"`` + the id), and
    every other request correctly: each such answer is a response matching no request of ours (the
    echo clause's breach), and the string-id request is then without an answer under its id, which
    proves nothing about ``jsonrpc.id-types`` or ``jsonrpc.every-request-answered``
    (``Peer.why_unproven``: perhaps that was its answer)."""

    def mangle(self, msg: Json) -> Any:
        if "method" not in msg and isinstance(msg.get("id"), str):
            msg["id"] = f"re:{msg['id']}"
        return msg


class ResultAndError(FilteredClient):
    def mangle(self, msg: Json) -> Any:
        result = msg.get("result")
        if "method" not in msg and isinstance(result, dict) and "outcome" in result:
            msg["error"] = {"code": -32603, "message": "also an error"}
        return msg


class BadErrorObject(FilteredClient):
    def mangle(self, msg: Json) -> Any:
        if _is_ext_request(msg):
            msg["error"] = {"code": -32601, "message": 42}
        return msg


class StringErrorCode(FilteredClient):
    """The right code, as a string: ``"-32601"`` (the schema's ErrorCode is an integer)."""

    def mangle(self, msg: Json) -> Any:
        if _is_ext_request(msg):
            msg["error"]["code"] = str(msg["error"]["code"])
        return msg


class MalformedExtensionRequest(MockClient):
    """Sends a ``_`` request whose params are a string (params must be an object or an array)."""

    async def new_session(self) -> str:
        await self.peer.send_raw(b'{"jsonrpc":"2.0","id":"acp-broken-1","method":"_acp_broken/log","params":"x"}\n')
        return await super().new_session()


class CancelsForeignRequest(MockClient):
    """Sends ``$/cancel_request`` naming a request it never sent."""

    async def new_session(self) -> str:
        frame = b'{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":"acp-never-sent"}}\n'
        await self.peer.send_raw(frame)
        return await super().new_session()


class V2MethodAfterV1(MockClient):
    """Agrees on version 1, then sends ``auth/logout``, a method only ACP v2 defines."""

    async def new_session(self) -> str:
        await self.peer.send_raw(b'{"jsonrpc":"2.0","id":"acp-broken-2","method":"auth/logout","params":{}}\n')
        return await super().new_session()


class CustomRootField(MockClient):
    """Puts custom data at the root of its ``session/new`` params, not under ``_meta``."""

    def session_params(self) -> Json:
        return {**super().session_params(), "acpBrokenWorkspace": "main"}


class ResourceLinkWithoutName(MockClient):
    def prompt_blocks(self, text: str) -> list[Json]:
        return [{"type": "text", "text": text}, {"type": "resource_link", "uri": "file:///tmp/acp-notes.txt"}]


class InternalErrorForUnknownRequests(MockClient):
    def install_handlers(self, peer: Peer) -> None:
        super().install_handlers(peer)

        async def anything(req: Request) -> Any:
            raise HandlerError(-32603, f"cannot handle {req.method}")  # not implemented, the wrong code

        peer.default_handler = anything


class IgnoresExtensionRequests(MockClient):
    def install_handlers(self, peer: Peer) -> None:
        super().install_handlers(peer)

        async def ignore(req: Request) -> Any:
            return NO_ANSWER

        answer_extensions(peer, ignore)


class IgnoresStringIds(FilteredClient):
    def mangle(self, msg: Json) -> Any:
        if "method" not in msg and isinstance(msg.get("id"), str):
            return None  # every answer to a string-id request is lost
        return msg


class RefusesNegativeIds(FilteredClient):
    """Reads request ids as unsigned integers: its answer to a request under a negative id is an
    error without any id, as for a line it cannot parse (what zed's codex-acp does as an agent)."""

    def mangle(self, msg: Json) -> Any:
        rid = msg.get("id")
        if "method" not in msg and isinstance(rid, int) and not isinstance(rid, bool) and rid < 0:
            return {"jsonrpc": "2.0", "error": {"code": -32700, "message": "Parse error"}}
        return msg


class DuplicatePermissionAnswer(FilteredClient):
    def mangle(self, msg: Json) -> Any:
        result = msg.get("result")
        if "method" not in msg and isinstance(result, dict) and "outcome" in result:
            return orjson.dumps(msg) + b"\n" + orjson.dumps(msg) + b"\n"
        return msg


class ServesNothingWhilePrompting(MockClient):
    """Answers a permission request only once its own session/prompt has been answered (then
    with the policy's option, as the reference client does), and before it goes on: the client
    half of jsonrpc.bidirectional broken, for the one request every turn-taking client serves."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._deferred: list[anyio.Event] = []

    async def handle_permission(self, req: Request, default: Any) -> Any:
        done = anyio.Event()
        self._deferred.append(done)
        try:
            await own_requests_answered(self.peer)
            return await default(req)  # the endpoint has handed its answer to the writer
        finally:
            done.set()

    async def run_turn(self, session_id: str, text: str) -> dict[str, Any]:
        record = await super().run_turn(session_id, text)
        with anyio.move_on_after(self.options.timeout):
            for done in self._deferred:
                await done.wait()
        await self.peer.drain()
        return record


class NeverAnswersPermission(MockClient):
    async def handle_permission(self, req: Request, default: Any) -> Any:
        return NO_ANSWER


class ConfusedByDuplicatePromptResponse(MockClient):
    """A second response to a finished session/prompt upsets its turn bookkeeping: from then on it
    believes no turn is running and leaves the agent's permission requests unanswered."""

    async def handle_permission(self, req: Request, default: Any) -> Any:
        if any(isinstance(e, Response) and e.duplicate and e.method == "session/prompt" for e in self.peer.events):
            return NO_ANSWER
        return await default(req)


# ---------------------------------------------------------------- robustness
class CrashesOnUnknownUpdate(MockClient):
    def on_notification(self, note: Notification) -> None:
        update = note.params.get("update") if isinstance(note.params, dict) else None
        if isinstance(update, dict) and update.get("sessionUpdate") not in (
            "agent_message_chunk",
            "agent_thought_chunk",
            "user_message_chunk",
            "tool_call",
            "tool_call_update",
            "plan",
            "available_commands_update",
            "current_mode_update",
            "config_option_update",
            "session_info_update",
            "usage_update",
        ):
            os._exit(70)  # an unhandled "unknown variant" error takes the client down
        super().on_notification(note)


class AnswersNotifications(MockClient):
    def on_notification(self, note: Notification) -> None:
        if note.method.startswith("_"):
            self.peer.start_soon(
                self.peer.send_raw, b'{"jsonrpc":"2.0","id":null,"error":{"code":-32601,"message":"unknown"}}\n'
            )
        super().on_notification(note)


class CustomNotificationWithoutUnderscore(MockClient):
    """Sends a custom notification whose method does not start with ``_`` (extensibility.mdx: custom
    methods are prefixed with ``_``); the client report once said CONFORMANT beside that FAIL."""

    async def new_session(self) -> str:
        # Before session/new: the agent reads frames in order, so every test with a session sees it.
        await self.peer.notify("acme/status", {"state": "ready"}, validate=False)
        return await super().new_session()


class ExitsOnUnknownNotification(MockClient):
    def on_notification(self, note: Notification) -> None:
        if note.method.startswith("_acp_conformance/unknown_notification"):
            os._exit(71)
        super().on_notification(note)


class ExitsOnAStrayResponse(MockClient):
    """Exits when a response answers nothing it asked (an id it never used, a second answer):
    input no conforming agent sends, so a robustness WARN, not the MUST of any request."""

    def make_peer(self, transport: Any) -> Peer:
        peer = super().make_peer(transport)

        def watch(events: list[Any]) -> list[Any]:
            if any(isinstance(e, Response) and (e.stray or e.duplicate) for e in events):
                os._exit(72)
            return events

        peer.inbound_filter = watch
        return peer


# ---------------------------------------------------------------- elicitation
class _ElicitationOverride(MockClient):
    """Answers elicitation/create with ``answer`` where it returns a value (else as the reference)."""

    def answer(self, params: Json) -> Json | None:
        return None

    def install_handlers(self, peer: Peer) -> None:
        super().install_handlers(peer)
        default = peer.handlers["elicitation/create"]

        async def elicit(req: Request) -> Any:
            own = self.answer(req.params if isinstance(req.params, dict) else {})
            return own if own is not None else await default(req)

        peer.handlers["elicitation/create"] = elicit


class CancelsUnadvertisedUrl(_ElicitationOverride):
    """A URL elicitation it never advertised is answered ``cancel``, not refused with -32602."""

    def initialize_params(self) -> Json:
        params = super().initialize_params()
        params["clientCapabilities"].get("elicitation", {}).pop("url", None)  # form only, whatever --caps says
        return params

    def answer(self, params: Json) -> Json | None:
        return {"action": "cancel"} if params.get("mode") == "url" else None


class HangsOnUnadvertisedUrl(CancelsUnadvertisedUrl):
    """A URL elicitation it never advertised is never answered: no conforming agent sends one, so
    the silence is a robustness WARN, not jsonrpc.every-request-answered."""

    def answer(self, params: Json) -> Json | None:
        return NO_ANSWER if params.get("mode") == "url" else None


class EmptyElicitationMeansForm(_ElicitationOverride):
    """Advertises ``elicitation: {}`` and, by MCP's rule, takes it for form support."""

    def initialize_params(self) -> Json:
        params = super().initialize_params()
        params["clientCapabilities"]["elicitation"] = {}
        return params

    def answer(self, params: Json) -> Json | None:
        return {"action": "accept", "content": {"greeting": "hello"}} if params.get("mode") == "form" else None


class FormAnswerWithoutAction(_ElicitationOverride):
    def answer(self, params: Json) -> Json | None:
        return {"content": {"greeting": "hello"}} if params.get("mode") == "form" else None


class RendersUnknownModeAsForm(_ElicitationOverride):
    def answer(self, params: Json) -> Json | None:
        if params.get("mode") in ("form", "url"):
            return None
        return {"action": "accept", "content": {"greeting": "hello"}}


class ExitsOnUnknownCompletion(MockClient):
    """Exits on an ``elicitation/complete`` for an id it does not know: one it never saw, or one
    completed already (elicitation.mdx: "Clients MUST ignore unknown or already-completed IDs")."""

    def __init__(self, options: ClientOptions, validator: SchemaValidator | None = None) -> None:
        super().__init__(options, validator)
        self._completed: set[Any] = set()

    def on_notification(self, note: Notification) -> None:
        if note.method == "elicitation/complete":
            eid = note.params.get("elicitationId") if isinstance(note.params, dict) else None
            issued = {
                c.request.params.get("elicitationId")
                for c in self.endpoint.elicitation_calls
                if isinstance(c.request.params, dict)
            }
            if eid not in issued or eid in self._completed:
                os._exit(72)
            self._completed.add(eid)
        super().on_notification(note)


class ExitsOnRepeatedCompletion(ExitsOnUnknownCompletion):
    """The same, advertising URL elicitation, so that an agent may complete an id it knows."""

    def __init__(self, options: ClientOptions, validator: SchemaValidator | None = None) -> None:
        caps = dataclasses.replace(options.capabilities, elicitation_url=True)
        super().__init__(dataclasses.replace(options, capabilities=caps), validator)


class SwallowsCancelledRequest(MockClient):
    """Holds its answer to extension requests briefly; one that a $/cancel_request names in the
    meantime is dropped without any response."""

    def install_handlers(self, peer: Peer) -> None:
        super().install_handlers(peer)
        cancelled: dict[Any, anyio.Event] = {}

        def on_cancel(note: Notification) -> None:
            if note.method == "$/cancel_request" and isinstance(note.params, dict):
                cancelled.setdefault(str(note.params.get("requestId")), anyio.Event()).set()

        async def unknown(req: Request) -> Any:
            event = cancelled.setdefault(str(req.id), anyio.Event())
            with anyio.move_on_after(1.0):
                await event.wait()
                return NO_ANSWER
            raise HandlerError(-32601, f"method not found: {req.method}")

        peer.listeners.append(on_cancel)
        peer.default_handler = unknown


class ConfusesIdSpaces(MockClient):
    async def handle_permission(self, req: Request, default: Any) -> Any:
        tool_call = req.params.get("toolCall", {}) if isinstance(req.params, dict) else {}
        if req.id == self.current_turn and tool_call.get("toolCallId") == "shared-id":
            # "That id is my session/prompt": treats the agent's request as the turn's end.
            raise HandlerError(-32600, f"id {req.id!r} is already in use")
        return await default(req)


class RejectsMeta(MockClient):
    async def handle_read(self, req: Request) -> Any:
        if isinstance(req.params, dict) and "_meta" in req.params:
            raise HandlerError(-32602, "unexpected field: _meta")
        return await super().handle_read(req)


class StderrNotDrained(MockClient):
    """Pipes the agent's stderr and never reads it: a chatty agent blocks."""

    def spawn_agent(self) -> AbstractAsyncContextManager[ProcessTransport]:
        return _spawn_without_stderr_drain(self.options.agent, self.cwd)


@asynccontextmanager
async def _spawn_without_stderr_drain(command: str, cwd: str) -> AsyncIterator[ProcessTransport]:
    import shlex

    process = await anyio.open_process(
        shlex.split(command),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=cwd,
        start_new_session=True,
    )
    transport = ProcessTransport(process, shlex.split(command), 50)
    try:
        yield transport
    finally:
        with anyio.CancelScope(shield=True):
            await transport.terminate(1.0)
            await process.aclose()


BREAKAGES: dict[str, Breakage[MockClient]] = {
    # transport
    "keepalive-text": Breakage(KeepaliveText, "transport.stdio.stdin-clean"),
    "bad-utf8": Breakage(BadUtf8, "transport.utf8"),
    "batch": Breakage(Batch, "transport.stdio.one-message-per-line"),
    "partial-line-at-exit": Breakage(PartialLineAtExit, "transport.stdio.newline-delimited"),
    "wrong-jsonrpc-version": Breakage(WrongJsonrpcVersion, "jsonrpc.version-field"),
    "invalid-content-block": Breakage(InvalidContentBlock, "schema.valid"),
    # jsonrpc
    # "5" for our 5: flagged once on the echo clause and paired (no request is left unanswered).
    "stringified-response-ids": Breakage(
        StringifiedResponseIds,
        "jsonrpc.response-id-echo",
        also=frozenset({"jsonrpc.survives-invalid-input"}),
        why_also="the fuzzer's request with an id beyond 64 bits (which the spec forbids us to send) is "
        "answered under the id as a string, too: a robustness finding",
    ),
    # A string id's answer under another id: the echo clause FAILs; jsonrpc.id-types and
    # jsonrpc.every-request-answered are not proven (INCONCLUSIVE where judged), so no finding.
    "misaddresses-string-id-answers": Breakage(
        MisaddressesStringIdAnswers,
        "jsonrpc.response-id-echo",
        also=frozenset({"jsonrpc.survives-invalid-input"}),
        why_also="its answers to the fuzz campaigns' malformed frames under string ids (which the spec forbids "
        "us to send) go under its own ids too: robustness findings, as for stringified-response-ids",
    ),
    "result-and-error": Breakage(ResultAndError, "jsonrpc.result-xor-error"),
    "bad-error-object": Breakage(BadErrorObject, "jsonrpc.error-object"),
    "string-error-code": Breakage(
        StringErrorCode,
        "error.codes",
        also=frozenset({"ext.request.unknown", "jsonrpc.unknown-method"}),
        why_also="the string '-32601' is not the integer -32601 an unknown request must get",
    ),
    "malformed-extension-request": Breakage(MalformedExtensionRequest, "jsonrpc.request-shape"),
    "cancels-foreign-request": Breakage(CancelsForeignRequest, "cancelreq.shape", status="WARN"),
    "v2-method-after-v1": Breakage(V2MethodAfterV1, "init.version.agree"),
    "custom-root-field": Breakage(CustomRootField, "ext.no-root-fields"),
    # elicitation
    "cancels-unadvertised-url": Breakage(CancelsUnadvertisedUrl, "elicit.mode.unadvertised-error", status="WARN"),
    # Its silence is robustness, once: elicit.mode.unadvertised-error judges the answer's code, and has
    # none (INCONCLUSIVE).
    "hangs-on-unadvertised-url": Breakage(
        HangsOnUnadvertisedUrl,
        "jsonrpc.survives-invalid-input",
        status="WARN",
        quiet=frozenset({"elicit.mode.unadvertised-error"}),
    ),
    "form-answer-without-action": Breakage(
        FormAnswerWithoutAction, "elicit.response.shape", scenario="client-elicit-form"
    ),
    # The form it accepts is one it did not advertise, which should get -32602: a WARN, provoked by a
    # request the agent MUST NOT send, so elicit.capability.explicit's client half is INCONCLUSIVE.
    "empty-elicitation-means-form": Breakage(
        EmptyElicitationMeansForm,
        "elicit.mode.unadvertised-error",
        status="WARN",
        quiet=frozenset({"elicit.capability.explicit"}),
    ),
    "renders-unknown-mode-as-form": Breakage(RendersUnknownModeAsForm, "elicit.unknown-mode"),
    # An id no agent issued is input agents MUST NOT send: its finding is robustness, and without URL
    # elicitation advertised the MUST (gated on it) does not apply.
    "exits-on-unknown-completion": Breakage(
        ExitsOnUnknownCompletion,
        "jsonrpc.survives-invalid-input",
        status="WARN",
        quiet=frozenset({"elicit.complete.ignore-unknown"}),
    ),
    "exits-on-repeated-completion": Breakage(
        ExitsOnRepeatedCompletion,
        "elicit.complete.ignore-unknown",
        also=frozenset({"jsonrpc.survives-invalid-input"}),
        why_also="it exits on the completion it already had, so the later probe with an id never issued "
        "finds it gone (a robustness WARN); the fuzz campaigns' malformed completions make it exit too",
    ),
    "resource-link-without-name": Breakage(
        ResourceLinkWithoutName,
        "content.block.shapes",
        also=frozenset({"schema.valid"}),
        why_also="the schema's ResourceLink requires name too (the schema clause names no block)",
    ),
    "internal-error-for-unknown-requests": Breakage(
        InternalErrorForUnknownRequests,
        "jsonrpc.unknown-method",
        status="WARN",
        also=frozenset({"ext.request.unknown"}),
        why_also="an unknown extension request is an unknown method: -32601 is both clauses' SHOULD (the "
        "fuzzer's unknown method without a leading underscore, which we may not send, gets the same wrong code: "
        "a SHOULD's finding stays on its clause, only a MUST's moves to jsonrpc.survives-invalid-input)",
    ),
    "ignores-extension-requests": Breakage(
        IgnoresExtensionRequests,
        "ext.request.respond",
        # Its silence is charged once, to the narrower clause (Peer._unanswered).
        quiet=frozenset({"jsonrpc.every-request-answered"}),
    ),
    # Its silence to string ids is judged once, as jsonrpc.id-types: the scripted test does not also
    # charge the request as unanswered, and the fuzz campaigns leave frames under a string id to it
    # once the client left their probe under one unanswered too.
    "ignores-string-ids": Breakage(IgnoresStringIds, "jsonrpc.id-types"),
    # jsonrpc.id-types, not also the echo clause for the answer's missing id.
    "refuses-negative-ids": Breakage(
        RefusesNegativeIds,
        "jsonrpc.id-types",
        also=frozenset({"jsonrpc.survives-invalid-input"}),
        why_also="it answers a malformed frame under an id below int64's range (the fuzz campaigns') with an "
        "error without any id too, where JSON-RPC wants id null: a robustness WARN (zed's codex-acp does the same)",
    ),
    "duplicate-permission-answer": Breakage(DuplicatePermissionAnswer, "jsonrpc.no-duplicate-response"),
    # The permission test answers the client's prompt when no answer came within the deadline: the
    # answer that follows proves the client waited for us (jsonrpc.bidirectional).  The other tests
    # that ask permission during a turn do not: their silences are charged as unanswered.  The suite
    # plays the agent there, and the client's prompt pending with us is every turn's normal state,
    # not a request we hold on purpose (``Peer.holding`` is the agent-side rule).
    "serves-nothing-while-prompting": Breakage(
        ServesNothingWhilePrompting,
        "jsonrpc.bidirectional",
        status="WARN",
        also=frozenset({"jsonrpc.every-request-answered"}),
        why_also="the other tests that ask permission during a turn wait for the answer only within the "
        "deadline, with the client's prompt still pending: that silence is charged as unanswered",
    ),
    "never-answers-permission": Breakage(NeverAnswersPermission, "jsonrpc.every-request-answered"),
    # Only after our deliberate duplicate (a frame no conforming agent sends): robustness.
    "confused-by-duplicate-prompt-response": Breakage(
        ConfusedByDuplicatePromptResponse,
        "jsonrpc.survives-invalid-input",
        status="WARN",
        scenario="client-duplicate-and-stray-responses",
        prompts_on_stdin=True,
    ),
    # robustness
    "crashes-on-unknown-update": Breakage(CrashesOnUnknownUpdate, "jsonrpc.survives-invalid-input", status="WARN"),
    "answers-notifications": Breakage(
        AnswersNotifications,
        "jsonrpc.notification-no-response",
    ),
    "custom-notification-without-underscore": Breakage(
        CustomNotificationWithoutUnderscore, "ext.method.underscore", status="WARN"
    ),
    # Once it has exited, the request that follows goes unanswered, but nothing shows it had read it:
    # no jsonrpc.every-request-answered FAIL (Peer.wait_response).
    "exits-on-unknown-notification": Breakage(ExitsOnUnknownNotification, "ext.notification.ignore", status="WARN"),
    "confuses-id-spaces": Breakage(ConfusesIdSpaces, "jsonrpc.id-spaces-independent"),
    # Stray responses are input no conforming agent sends: dying of them is not id-spaces' MUST.
    "exits-on-a-stray-response": Breakage(ExitsOnAStrayResponse, "jsonrpc.survives-invalid-input", status="WARN"),
    "swallows-cancelled-request": Breakage(SwallowsCancelledRequest, "cancelreq.must-answer"),
    "rejects-meta": Breakage(RejectsMeta, "ext.meta.everywhere", status="WARN"),
    "stderr-not-drained": Breakage(StderrNotDrained, "transport.stdio.stderr-logs", status="INFO"),
}


for _path in sorted(Path(__file__).resolve().parent.glob("broken_clients_*.py")):
    _extra: dict[str, Breakage[MockClient]] = importlib.import_module(f"tests.peers.{_path.stem}").BREAKAGES
    _clash = set(_extra) & set(BREAKAGES)
    if _clash:
        raise SystemExit(f"{_path.name}: breakage names already used: {sorted(_clash)}")
    BREAKAGES.update(_extra)


if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] not in BREAKAGES:
        print(f"usage: {sys.argv[0]} NAME [mock_client options]; NAME one of: {', '.join(BREAKAGES)}", file=sys.stderr)
        sys.exit(2)
    sys.exit(main(sys.argv[2:], client_cls=BREAKAGES[sys.argv[1]].peer))
