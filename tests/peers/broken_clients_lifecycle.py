"""Broken clients for the handshake and session setup: initialize, session/new, the session
methods the agent must advertise first, and the first prompt's params and content.

Merged into ``BREAKAGES`` by ``broken_clients.py`` (run them through it).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from acp_conformance.core.events import Request
from acp_conformance.peer import HandlerError
from mock_client import MockClient
from tests.peers._breakage import Breakage, FilteredClient, Json


# ----------------------------------------------------------------------- init
class ExtensionRequestFirst(MockClient):
    async def initialize(self) -> bool:
        await self.peer.call("_acme/hello", {})
        return await super().initialize()


class VersionZero(MockClient):
    def initialize_params(self) -> Json:
        return {**super().initialize_params(), "protocolVersion": 0}


class StringVersion(MockClient):
    def initialize_params(self) -> Json:
        return {**super().initialize_params(), "protocolVersion": "1"}


class ClaimsFsButRefuses(MockClient):
    async def handle_read(self, req: Request) -> Any:
        raise HandlerError(-32601, "fs/read_text_file is not implemented")

    async def handle_write(self, req: Request) -> Any:
        raise HandlerError(-32601, "fs/write_text_file is not implemented")


class NoClientInfo(MockClient):
    def initialize_params(self) -> Json:
        params = super().initialize_params()
        del params["clientInfo"]
        return params


class ClientInfoWithoutVersion(MockClient):
    def initialize_params(self) -> Json:
        params = super().initialize_params()
        params["clientInfo"] = {"name": "broken-client"}
        return params


class StringFsFlag(MockClient):
    def initialize_params(self) -> Json:
        params = super().initialize_params()
        params["clientCapabilities"]["fs"]["readTextFile"] = "yes"
        return params


class LoadsWhenCapabilityOmitted(MockClient):
    """Reads an absent loadSession as "supported" and reloads the session it remembers."""

    async def initialize(self) -> bool:
        ok = await super().initialize()
        caps = self.endpoint.init_result.get("agentCapabilities")
        if ok and isinstance(caps, dict) and "loadSession" not in caps:
            await self.peer.call("session/load", {"sessionId": "sess-remembered", "cwd": self.cwd, "mcpServers": []})
        return ok


class GivesUpWithoutPromptCapabilities(MockClient):
    """Refuses to work with an agent that declares no promptCapabilities (absent means all false)."""

    async def initialize(self) -> bool:
        ok = await super().initialize()
        caps = self.endpoint.init_result.get("agentCapabilities")
        if ok and isinstance(caps, dict) and "promptCapabilities" not in caps:
            self.fail("the agent declares no promptCapabilities: giving up")
            return False
        return ok


class IgnoresVersion(MockClient):
    async def initialize(self) -> bool:
        await super().initialize()
        self.report["errors"].clear()
        return True


# -------------------------------------------------------------------- session
class PipelinedSessionNew(MockClient):
    async def initialize(self) -> bool:
        init_id = await self.peer.send_request("initialize", self.initialize_params())
        new_id = await self.peer.send_request("session/new", self.session_params())
        init = await self.peer.wait_response(init_id, method="initialize")
        self.endpoint.init_result = init.result if isinstance(init.result, dict) else {}
        new = await self.peer.wait_response(new_id, method="session/new")
        self._pipelined = new.result["sessionId"] if isinstance(new.result, dict) else ""
        if self.endpoint.init_result.get("protocolVersion") != 1:
            self.fail("the agent answered another protocol version: disconnecting")
            return False
        return True

    async def new_session(self) -> str:
        self.session_id = self._pipelined
        self.endpoint.sessions[self._pipelined] = {}
        return self._pipelined


class NoMcpServers(MockClient):
    def session_params(self) -> Json:
        return {"cwd": self.cwd}


class RelativeCwd(MockClient):
    def session_params(self) -> Json:
        return {"cwd": ".", "mcpServers": []}


class HttpMcpServer(MockClient):
    def session_params(self) -> Json:
        server = {"type": "http", "name": "docs", "url": "http://127.0.0.1:9/mcp", "headers": []}
        return {"cwd": self.cwd, "mcpServers": [server]}


class RelativeMcpCommand(MockClient):
    def session_params(self) -> Json:
        server = {"name": "files", "command": "mcp-files", "args": [], "env": []}
        return {"cwd": self.cwd, "mcpServers": [server]}


class LoadsUnadvertisedSession(MockClient):
    async def new_session(self) -> str:
        await self.peer.call("session/load", {"sessionId": "sess-from-yesterday", "cwd": self.cwd, "mcpServers": []})
        return await super().new_session()


class CallsUnadvertised(MockClient):
    """Sends one session method the agent did not advertise, right after session/new."""

    method = ""

    def unadvertised_params(self, session_id: str) -> Json:
        return {"sessionId": session_id}

    async def new_session(self) -> str:
        sid = await super().new_session()
        await self.peer.call(self.method, self.unadvertised_params(sid))
        return sid


class ListsUnadvertised(CallsUnadvertised):
    method = "session/list"

    def unadvertised_params(self, session_id: str) -> Json:
        return {}


class ResumesUnadvertised(CallsUnadvertised):
    method = "session/resume"

    def unadvertised_params(self, session_id: str) -> Json:
        return {"sessionId": session_id, "cwd": self.cwd, "mcpServers": []}


class ClosesUnadvertised(CallsUnadvertised):
    method = "session/close"


class DeletesUnadvertised(CallsUnadvertised):
    method = "session/delete"


class LogsOutUnadvertised(CallsUnadvertised):
    method = "logout"

    def unadvertised_params(self, session_id: str) -> Json:
        return {}


class PromptsUnknownSession(MockClient):
    async def run_turn(self, session_id: str, text: str) -> dict[str, Any]:
        return await super().run_turn("sess-made-up", text)


class PromptNotArray(FilteredClient):
    def mangle(self, msg: Json) -> Any:
        if msg.get("method") == "session/prompt":
            msg["params"]["prompt"] = msg["params"]["prompt"][0]
        return msg


class ListsWhenListNull(MockClient):
    """Takes a present ``sessionCapabilities.list`` key for support, even when its value is null."""

    async def new_session(self) -> str:
        sid = await super().new_session()
        session = self.endpoint.agent_capabilities.get("sessionCapabilities")
        if isinstance(session, dict) and "list" in session and session["list"] is None:
            await self.peer.call("session/list", {})
        return sid


class ImageWhenFlagOmitted(MockClient):
    """Honours ``image: false`` but takes a prompt capability left out of the object for granted."""

    def prompt_blocks(self, text: str) -> list[Json]:
        prompt = self.endpoint.agent_capabilities.get("promptCapabilities")
        extra = []
        if isinstance(prompt, dict) and "image" not in prompt:
            extra = [{"type": "image", "mimeType": "image/png", "data": "iVBORw0KGgo="}]
        return [*super().prompt_blocks(text), *extra]


class DirsWithoutCapability(MockClient):
    """Offers its additional roots whether or not the agent advertised them."""

    def session_params(self) -> Json:
        return {**super().session_params(), "additionalDirectories": [str(Path(self.cwd).parent)]}


class RelativeAdditionalDir(MockClient):
    def session_params(self) -> Json:
        params = super().session_params()
        if "additionalDirectories" in params:
            params["additionalDirectories"] = ["shared/lib"]
        return params


class ImageWithoutCapability(MockClient):
    def prompt_blocks(self, text: str) -> list[Json]:
        return [*super().prompt_blocks(text), {"type": "image", "mimeType": "image/png", "data": "iVBORw0KGgo="}]


class AudioWithoutCapability(MockClient):
    def prompt_blocks(self, text: str) -> list[Json]:
        return [*super().prompt_blocks(text), {"type": "audio", "mimeType": "audio/wav", "data": "UklGRg=="}]


class ResourceWithoutCapability(MockClient):
    def prompt_blocks(self, text: str) -> list[Json]:
        resource = {"type": "resource", "resource": {"uri": "file:///tmp/notes.txt", "text": "notes"}}
        return [*super().prompt_blocks(text), resource]


#: Why a client that uses a capability the agent did not advertise also breaks cap.omitted-unsupported.
WHY_OMITTED = (
    "with agentCapabilities left out entirely it is also use of an absent capability (cap.omitted-unsupported)"
)
WHY_FLAG = "; with the flag left out of its object (false by default) too (cap.agent.defaults)"
WHY_NULL = "; with the capability declared null too (cap.object-presence)"


BREAKAGES: dict[str, Breakage[MockClient]] = {
    # init
    "extension-request-first": Breakage(ExtensionRequestFirst, "init.first", status="WARN"),
    "version-zero": Breakage(VersionZero, "init.request.protocol-version"),
    "string-version": Breakage(StringVersion, "init.request.protocol-version-type"),
    "claims-fs-but-refuses": Breakage(ClaimsFsButRefuses, "init.request.capabilities"),
    "no-client-info": Breakage(NoClientInfo, "init.request.client-info", status="WARN"),
    "client-info-without-version": Breakage(ClientInfoWithoutVersion, "init.implementation.shape"),
    "string-fs-flag": Breakage(
        StringFsFlag,
        "cap.client.fs-defaults",
        also=frozenset({"schema.valid"}),
        why_also="the schema types the flag as a boolean",
    ),
    "loads-when-capability-omitted": Breakage(
        LoadsWhenCapabilityOmitted,
        "cap.omitted-unsupported",
        also=frozenset({"cap.agent.defaults"}),
        why_also="with loadSession left out of agentCapabilities alone, absent is false by default "
        "(cap.agent.defaults)",
    ),
    "gives-up-without-prompt-capabilities": Breakage(
        GivesUpWithoutPromptCapabilities, "cap.all-combinations", status="WARN"
    ),
    "ignores-version": Breakage(IgnoresVersion, "init.version.client-disconnect", status="WARN"),
    # session
    "pipelined-session-new": Breakage(
        PipelinedSessionNew,
        "session.after-init",
        status="FAIL",
        also=frozenset({"init.version.client-disconnect", "prompt.after-setup"}),
        why_also="a session/new sent before the initialize answer cannot depend on the version in it (a WARN); "
        "an agent that requires authentication refuses that session/new, and the client prompts the session it "
        "never got",
    ),
    "no-mcp-servers": Breakage(
        NoMcpServers,
        "session.new.params",
        also=frozenset({"schema.valid"}),
        why_also="mcpServers is required by the schema",
    ),
    "relative-cwd": Breakage(RelativeCwd, "session.cwd.absolute"),
    "http-mcp-server": Breakage(
        HttpMcpServer,
        "session.mcp.transport-gated",
        also=frozenset({"cap.agent.defaults", "cap.omitted-unsupported"}),
        why_also="it names the http server also when the agent left mcpCapabilities.http out (false by default)"
        "; " + WHY_OMITTED,
    ),
    "relative-mcp-command": Breakage(RelativeMcpCommand, "session.mcp.shapes"),
    "loads-unadvertised-session": Breakage(
        LoadsUnadvertisedSession,
        "session.load.gated",
        also=frozenset({"cap.agent.defaults", "cap.omitted-unsupported"}),
        why_also=WHY_OMITTED + WHY_FLAG,
        scenario="client-load-gated",
    ),
    "lists-unadvertised": Breakage(
        ListsUnadvertised,
        "session.list.gated",
        also=frozenset({"cap.object-presence", "cap.omitted-unsupported"}),
        why_also=WHY_OMITTED + WHY_NULL,
    ),
    "resumes-unadvertised": Breakage(
        ResumesUnadvertised,
        "session.resume.gated",
        also=frozenset({"cap.object-presence", "cap.omitted-unsupported"}),
        why_also=WHY_OMITTED + WHY_NULL,
    ),
    "closes-unadvertised": Breakage(
        ClosesUnadvertised,
        "session.close.gated",
        also=frozenset({"cap.object-presence", "cap.omitted-unsupported"}),
        why_also=WHY_OMITTED + WHY_NULL,
    ),
    "deletes-unadvertised": Breakage(
        DeletesUnadvertised,
        "session.delete.gated",
        also=frozenset({"cap.object-presence", "cap.omitted-unsupported"}),
        why_also=WHY_OMITTED + WHY_NULL,
    ),
    "logs-out-unadvertised": Breakage(
        LogsOutUnadvertised,
        "auth.logout.gated",
        also=frozenset({"cap.object-presence", "cap.omitted-unsupported"}),
        why_also=WHY_OMITTED + WHY_NULL,
    ),
    "prompts-unknown-session": Breakage(PromptsUnknownSession, "prompt.after-setup"),
    "lists-when-list-null": Breakage(ListsWhenListNull, "cap.object-presence"),
    "dirs-without-capability": Breakage(
        DirsWithoutCapability,
        "session.additional-dirs.gated",
        also=frozenset({"cap.object-presence", "cap.omitted-unsupported"}),
        why_also="with additionalDirectories declared null it offers them too (cap.object-presence); " + WHY_OMITTED,
    ),
    "relative-additional-dir": Breakage(RelativeAdditionalDir, "session.additional-dirs.absolute"),
    "image-when-flag-omitted": Breakage(ImageWhenFlagOmitted, "cap.agent.defaults"),
    "prompt-not-array": Breakage(
        PromptNotArray,
        "prompt.params",
        also=frozenset({"schema.valid"}),
        why_also="prompt is an array in the schema",
    ),
    "image-without-capability": Breakage(
        ImageWithoutCapability,
        "content.image.gated",
        also=frozenset({"cap.agent.defaults", "cap.omitted-unsupported"}),
        why_also=WHY_OMITTED + WHY_FLAG,
    ),
    "audio-without-capability": Breakage(
        AudioWithoutCapability,
        "content.audio.gated",
        also=frozenset({"cap.agent.defaults", "cap.omitted-unsupported"}),
        why_also=WHY_OMITTED + WHY_FLAG,
    ),
    "resource-without-capability": Breakage(
        ResourceWithoutCapability,
        "content.resource.gated",
        also=frozenset({"cap.agent.defaults", "cap.omitted-unsupported"}),
        why_also=WHY_OMITTED + WHY_FLAG,
    ),
}
