"""Broken clients for what a user asks a client to do: log in, list and continue sessions, attach.

Merged into ``BREAKAGES`` by ``broken_clients.py`` (run them through it).
"""

from __future__ import annotations

import os
import urllib.request
from pathlib import Path
from typing import Any
from urllib.parse import unquote_plus

import anyio
import anyio.to_thread

from mock_client import MockClient
from tests.peers._breakage import Breakage


# ------------------------------------------------------------------ authentication
class IgnoresTypelessAuthMethods(MockClient):
    """Reads a method without a type as unknown (it wants an explicit "agent"), so it never logs in."""

    def auth_method(self) -> str | None:
        for method in (self.endpoint.init_result or {}).get("authMethods") or []:
            if isinstance(method, dict) and method.get("type") == "agent":
                return str(method.get("id"))
        return None


class AuthenticatesWithOwnId(MockClient):
    """Logs in with the method id it was configured with ("login"), whatever the agent advertised."""

    def auth_method(self) -> str | None:
        return "login"


class AuthenticatesTerminalMethod(MockClient):
    """Takes the first advertised method, terminal ones included, and sends it in authenticate."""

    def initialize_params(self) -> dict[str, Any]:
        params = super().initialize_params()
        params["clientCapabilities"]["auth"] = {"terminal": True}
        return params

    def auth_method(self) -> str | None:
        methods = (self.endpoint.init_result or {}).get("authMethods") or []
        return str(methods[0].get("id")) if methods and isinstance(methods[0], dict) else None


# ------------------------------------------------------------------ sessions
class NormalizesCursor(MockClient):
    """Decodes the cursor as if it were form-encoded before sending it back ("+" becomes a space)."""

    async def authenticated(self, method: str, params: dict[str, Any]) -> Any:
        if method == "session/list" and isinstance(params.get("cursor"), str):
            params = {**params, "cursor": unquote_plus(params["cursor"])}
        return await super().authenticated(method, params)


class ListsPastTheEnd(MockClient):
    """After the page without nextCursor it asks once more with the last cursor it had."""

    last_cursor: str | None = None

    async def authenticated(self, method: str, params: dict[str, Any]) -> Any:
        if method == "session/list" and isinstance(params.get("cursor"), str):
            self.last_cursor = params["cursor"]
        return await super().authenticated(method, params)

    async def list_sessions(self) -> list[dict[str, Any]]:
        listed = await super().list_sessions()
        if self.last_cursor is not None:
            await self.authenticated("session/list", {"cwd": self.cwd, "cursor": self.last_cursor})
        return listed


class LoadWithoutMcpServers(MockClient):
    def continue_params(self, session_id: str) -> dict[str, Any]:
        params = super().continue_params(session_id)
        params.pop("mcpServers", None)
        return params


class ResumeWithoutCwd(MockClient):
    def continue_params(self, session_id: str) -> dict[str, Any]:
        params = super().continue_params(session_id)
        if not self.endpoint.agent_supports("loadSession"):
            params.pop("cwd", None)
        return params


class OmitsRootsWhenContinuing(MockClient):
    """Sends its additional roots in session/new only, trusting the agent to remember them."""

    def continue_params(self, session_id: str) -> dict[str, Any]:
        params = super().continue_params(session_id)
        params.pop("additionalDirectories", None)
        return params


# ------------------------------------------------------------------ prompt content
class HexImageData(MockClient):
    """Hex-encodes attached images (valid base64 alphabet, wrong bytes)."""

    def attachment(self, path: str) -> dict[str, Any]:
        block = super().attachment(path)
        if block.get("type") == "image":
            block["data"] = Path(path).read_bytes().hex()
        return block


class StripsCommandSlash(MockClient):
    """Sends a slash command without its slash (as if the command were a UI action, not text)."""

    def prompt_blocks(self, text: str) -> list[dict[str, Any]]:
        return super().prompt_blocks(text[1:] if text.startswith("/") else text)


class CrashesOnUnknownCategory(MockClient):
    """Looks every config option's category up in a table of the known ones, and dies on a miss."""

    async def new_session(self) -> str:
        sid = await super().new_session()
        for option in self.endpoint.sessions[sid].get("configOptions") or []:
            if option.get("category", "mode") not in ("mode", "model", "model_config", "thought_level"):
                os._exit(73)
        return sid


BREAKAGES: dict[str, Breakage[MockClient]] = {
    "normalizes-cursor": Breakage(NormalizesCursor, "session.list.cursor-opaque"),
    "lists-past-the-end": Breakage(ListsPastTheEnd, "session.list.cursor-end"),
    "load-without-mcp-servers": Breakage(LoadWithoutMcpServers, "session.load.params"),
    "resume-without-cwd": Breakage(ResumeWithoutCwd, "session.resume.params"),
    "omits-roots-when-continuing": Breakage(OmitsRootsWhenContinuing, "session.additional-dirs.resend", status="WARN"),
    "ignores-typeless-auth-methods": Breakage(IgnoresTypelessAuthMethods, "auth.method.default-type", status="WARN"),
    "authenticates-with-own-id": Breakage(AuthenticatesWithOwnId, "auth.authenticate.advertised-id", status="WARN"),
    "authenticates-terminal-method": Breakage(AuthenticatesTerminalMethod, "auth.authenticate.no-terminal"),
    "hex-image-data": Breakage(HexImageData, "content.base64", status="WARN"),
    "strips-command-slash": Breakage(StripsCommandSlash, "cmd.invoke-as-text", status="WARN"),
    "crashes-on-unknown-category": Breakage(CrashesOnUnknownCategory, "config.category.ux-only"),
}


# ------------------------------------------------------------------ modes and config
class SetsModeByName(MockClient):
    async def set_mode(self, session_id: str, mode: dict[str, Any]) -> None:
        await self.peer.request("session/set_mode", {"sessionId": session_id, "modeId": mode.get("name")})


class ConfigValueByName(MockClient):
    async def set_config(self, session_id: str, option: dict[str, Any], value: dict[str, Any]) -> None:
        params = {"sessionId": session_id, "configId": option.get("id"), "value": value.get("name")}
        await self.peer.request("session/set_config_option", params)


BREAKAGES["sets-mode-by-name"] = Breakage(SetsModeByName, "mode.set.valid", status="WARN")
BREAKAGES["config-value-by-name"] = Breakage(ConfigValueByName, "config.set.value", status="WARN")


class OpensUrlWithoutConsent(MockClient):
    """Fetches an elicited URL to show a preview, then answers decline: the page was opened without consent."""

    def initialize_params(self) -> dict[str, Any]:
        params = super().initialize_params()
        params["clientCapabilities"].setdefault("elicitation", {})["url"] = {}
        return params

    def install_handlers(self, peer: Any) -> None:
        super().install_handlers(peer)
        default = peer.handlers["elicitation/create"]

        async def elicit(req: Any) -> Any:
            params = req.params if isinstance(req.params, dict) else {}
            if params.get("mode") != "url":
                return await default(req)
            url = str(params.get("url"))
            await anyio.to_thread.run_sync(lambda: urllib.request.urlopen(url, timeout=5).read())
            return {"action": "decline"}

        peer.handlers["elicitation/create"] = elicit


BREAKAGES["opens-url-without-consent"] = Breakage(OpensUrlWithoutConsent, "elicit.url.safety")
