"""Broken agents for sessions, modes/config, extensibility/errors and authentication.

Each is the reference agent with one method overridden (see broken_agents.py,
which merges ``BREAKAGES``), except for features the reference agent lacks:
``AdditionalDirectories`` is a conforming extension of it (additionalDirectories)
and ``RequiresAuth`` is it with ``--require-auth``; their breakages override
one method of theirs.  ``AGENTS`` holds those bases;
tests/unit/test_checks_sessions.py runs them.  Breakages of ``RequiresAuth``
carry ``suite_args`` (``--acp-auth-method=token``), which the proofs pass.

``python tests/peers/broken_agents_sessions.py NAME`` runs one of ``AGENTS``.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

if __name__ == "__main__":  # run as a file: make the repository root importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from acp_conformance.core.events import Request
from acp_conformance.peer import NO_ANSWER, HandlerError
from mock_agent import PROBE_FILE, MockAgent, Session
from mock_agent.cli import run
from tests.peers._breakage import Breakage, Json

INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
#: How the proofs certify the agents that require authentication (``MockAgent.AUTH_METHOD_ID``).
AUTH = f"--acp-auth-method={MockAgent.AUTH_METHOD_ID}"


# ---------------------------------------------------------------- session/new
class AcceptsRelativeCwd(MockAgent):
    def _absolute_cwd(self, params: Json, method: str) -> str:
        return self._string(params, "cwd", method)


class RejectsStdioMcp(MockAgent):
    def create_session(self, cwd: str, mcp_servers: list[Any], params: Json) -> Session:
        if mcp_servers:
            raise HandlerError(INVALID_PARAMS, "session/new: MCP servers are not supported")
        return super().create_session(cwd, mcp_servers, params)


class ProcessCwdPaths(MockAgent):
    def probe_path(self, session: Session) -> str:
        return os.path.join(os.getcwd(), PROBE_FILE)  # the process directory, not the session cwd


class PathsOutsideRoots(MockAgent):
    def probe_path(self, session: Session) -> str:
        return os.path.join(os.sep, "acp-conformance-outside-the-roots", PROBE_FILE)


# --------------------------------------------------------------- session/load
class LateReplay(MockAgent):
    async def handle_load_session(self, req: Request) -> Any:
        params = self.params_of(req)
        session = self.find_session(params, "session/load")
        session.cwd = self._absolute_cwd(params, "session/load")
        self._mcp_servers(params, "session/load")
        await self.peer.respond(req.id, self.load_session_result(session), method="session/load")
        await self.replay_history(session)  # after the answer
        return NO_ANSWER


class ReplayWrongSessionId(MockAgent):
    async def replay_history(self, session: Session) -> None:
        for update in list(session.history):
            await self.send_update(session.id + "-replay", update)


class ReplayWithoutPrompts(MockAgent):
    async def replay_history(self, session: Session) -> None:
        for update in list(session.history):
            if update.get("sessionUpdate") != "user_message_chunk":
                await self.send_update(session.id, update)


class LoadResultArray(MockAgent):
    validate_outbound = False

    def load_session_result(self, session: Session) -> Any:
        return []


class LoadResultNull(MockAgent):
    validate_outbound = False

    def load_session_result(self, session: Session) -> Any:
        return None


def _load_params(agent: MockAgent, req: Request) -> Json:
    """session/load's params, checked as the reference agent checks them (-32602)."""
    params = agent.params_of(req)
    agent._string(params, "sessionId", "session/load")
    agent._absolute_cwd(params, "session/load")
    agent._mcp_servers(params, "session/load")
    return params


class LoadAlwaysFails(MockAgent):
    async def handle_load_session(self, req: Request) -> Any:
        if _load_params(self, req)["sessionId"] in self.sessions:
            raise HandlerError(INTERNAL_ERROR, "cannot load sessions today")
        return await super().handle_load_session(req)


class SharedUserMessageId(MockAgent):
    def record_user_message(self, session: Session, prompt: list[Json]) -> None:
        for block in prompt:
            session.history.append(
                {"sessionUpdate": "user_message_chunk", "content": self._clean_block(block), "messageId": "user"}
            )


class LoadedSessionUnusable(MockAgent):
    async def handle_load_session(self, req: Request) -> Any:
        result = await super().handle_load_session(req)
        self.sessions.pop(self.params_of(req)["sessionId"], None)
        return result


class LoadWithoutCapability(MockAgent):
    def agent_capabilities(self) -> Json:
        caps = super().agent_capabilities()
        del caps["loadSession"]
        return caps


class HangsOnUnadvertisedLoad(MockAgent):
    """Advertises no loadSession and never answers a session/load: a request no conforming client
    sends (session-setup.mdx: "Clients MUST NOT attempt to call session/load"), so its silence is a
    robustness WARN, not jsonrpc.every-request-answered."""

    def agent_capabilities(self) -> Json:
        caps = super().agent_capabilities()
        del caps["loadSession"]
        return caps

    async def handle_load_session(self, req: Request) -> Any:
        return NO_ANSWER


class LoadsUnknownSessions(MockAgent):
    async def handle_load_session(self, req: Request) -> Any:
        if _load_params(self, req)["sessionId"] not in self.sessions:
            return {}
        return await super().handle_load_session(req)


# ------------------------------------------------------------- session/resume
class ResumeReplays(MockAgent):
    async def handle_resume_session(self, req: Request) -> Any:
        session = self.find_session(self.params_of(req), "session/resume")
        await self.replay_history(session)
        return await super().handle_resume_session(req)


class ResumeResultArray(MockAgent):
    validate_outbound = False

    def resume_session_result(self, session: Session) -> Any:
        return []


# -------------------------------------------------------------- session/close
class CloseErrorsRunningPrompt(MockAgent):
    async def close_session(self, session: Session, reason: str) -> None:
        turn = session.turn
        if turn is not None:  # answered with an error, not stopReason cancelled
            await self.peer.respond_error(turn.request_id, INTERNAL_ERROR, "the session was closed")
        self.sessions.pop(session.id, None)


class CloseResultExtra(MockAgent):
    async def handle_close_session(self, req: Request) -> Any:
        await super().handle_close_session(req)
        return {"closed": True}


class CloseUnknownHangs(MockAgent):
    async def handle_close_session(self, req: Request) -> Any:
        if self._string(self.params_of(req), "sessionId", "session/close") not in self.sessions:
            return NO_ANSWER
        return await super().handle_close_session(req)


# --------------------------------------------------------------- session/list
class ListRequiresCwd(MockAgent):
    async def handle_list_sessions(self, req: Request) -> Any:
        if not isinstance(req.params, dict) or "cwd" not in req.params:
            raise HandlerError(INVALID_PARAMS, "session/list: cwd is required")
        return await super().handle_list_sessions(req)


class ListRelativeCwd(MockAgent):
    def session_info(self, session: Session) -> Json:
        return {**super().session_info(session), "cwd": os.path.basename(session.cwd)}


class ListEmptyIsError(MockAgent):
    async def handle_list_sessions(self, req: Request) -> Any:
        result = await super().handle_list_sessions(req)
        if not result["sessions"]:
            raise HandlerError(-32002, "no sessions found")
        return result


class ListIgnoresCwd(MockAgent):
    async def handle_list_sessions(self, req: Request) -> Any:
        params = {k: v for k, v in self.params_of(req, optional=True).items() if k != "cwd"}
        return await super().handle_list_sessions(Request(req.id, req.method, params))


class ListAcceptsAnyCursor(MockAgent):
    async def handle_list_sessions(self, req: Request) -> Any:
        params = {k: v for k, v in self.params_of(req, optional=True).items() if k != "cursor"}
        return await super().handle_list_sessions(Request(req.id, req.method, params))


class ListPagesForever(MockAgent):
    async def handle_list_sessions(self, req: Request) -> Any:
        params = self.params_of(req, optional=True)
        if params.get("cursor") not in (None, "next"):
            raise HandlerError(INVALID_PARAMS, "session/list: invalid cursor")
        result = await super().handle_list_sessions(Request(req.id, req.method, {**params, "cursor": None}))
        return {**result, "nextCursor": "next"}  # every page says there is another: the same sessions again


class ListReplaysHistory(MockAgent):
    async def handle_list_sessions(self, req: Request) -> Any:
        for session in list(self.sessions.values()):
            await self.replay_history(session)
        return await super().handle_list_sessions(req)


# ------------------------------------------------------------- session/delete
class DeleteKeepsSession(MockAgent):
    async def handle_delete_session(self, req: Request) -> Any:
        self._string(self.params_of(req), "sessionId", "session/delete")
        return {}


class DeleteResultExtra(MockAgent):
    async def handle_delete_session(self, req: Request) -> Any:
        await super().handle_delete_session(req)
        return {"deleted": True}


class DeleteUnknownErrors(MockAgent):
    async def handle_delete_session(self, req: Request) -> Any:
        self.find_session(self.params_of(req), "session/delete")
        return await super().handle_delete_session(req)


# ---------------------------------------------------------------- modes/config
class SetModeIgnored(MockAgent):
    async def handle_set_mode(self, req: Request) -> Any:
        params = self.params_of(req)
        session = self.find_session(params, "session/set_mode", INVALID_PARAMS)
        if params.get("modeId") not in {m[0] for m in self.MODES}:
            raise HandlerError(INVALID_PARAMS, "session/set_mode: unknown modeId")
        await self.send_update(session.id, self.mode_update(session))  # the unchanged mode
        await self.send_update(session.id, self.config_option_update(session))
        return {}


class RefusesAdvertisedMode(MockAgent):
    """codex-acp: a mode it advertises is refused with a policy reason (no MUST requires the switch)."""

    async def handle_set_mode(self, req: Request) -> Any:
        params = self.params_of(req)
        self.find_session(params, "session/set_mode", INVALID_PARAMS)
        if params.get("modeId") == "code":
            raise HandlerError(INVALID_PARAMS, "cannot enable privileged approval modes in an untrusted folder")
        return await super().handle_set_mode(req)


class SetModeAcceptsUnknown(MockAgent):
    async def handle_set_mode(self, req: Request) -> Any:
        params = self.params_of(req)
        self.find_session(params, "session/set_mode", INVALID_PARAMS)
        if self._string(params, "modeId", "session/set_mode") not in {m[0] for m in self.MODES}:
            return {}
        return await super().handle_set_mode(req)


class SetModeWaitsForTurn(MockAgent):
    async def handle_set_mode(self, req: Request) -> Any:
        session = self.find_session(self.params_of(req), "session/set_mode", INVALID_PARAMS)
        if session.turn is not None:
            await session.turn.done.wait()
        return await super().handle_set_mode(req)


class SetConfigWaitsForTurn(MockAgent):
    async def handle_set_config_option(self, req: Request) -> Any:
        session = self.find_session(self.params_of(req), "session/set_config_option", INVALID_PARAMS)
        if session.turn is not None:
            await session.turn.done.wait()
        return await super().handle_set_config_option(req)


class SetConfigPartialResult(MockAgent):
    async def handle_set_config_option(self, req: Request) -> Any:
        result = await super().handle_set_config_option(req)
        changed = self.params_of(req).get("configId")
        return {"configOptions": [o for o in result["configOptions"] if o["id"] == changed]}


class SetConfigAcceptsUnknown(MockAgent):
    async def handle_set_config_option(self, req: Request) -> Any:
        params = self.params_of(req)
        session = self.find_session(params, "session/set_config_option", INVALID_PARAMS)
        config_id = self._string(params, "configId", "session/set_config_option")
        if "value" not in params:
            raise HandlerError(INVALID_PARAMS, "session/set_config_option: value is required")
        if config_id not in {o["id"] for o in self.config_options(session)}:
            return {"configOptions": self.config_options(session)}
        return await super().handle_set_config_option(req)


class PartialConfigUpdate(MockAgent):
    def config_option_update(self, session: Session) -> Json:
        options = [o for o in self.config_options(session) if o["id"] == "mode"]
        return {"sessionUpdate": "config_option_update", "configOptions": options}


class ConfigValueNotListed(MockAgent):
    def config_options(self, session: Session) -> list[Json]:
        options = super().config_options(session)
        options[0] = {**options[0], "currentValue": "turbo"}  # model: not one of fast, smart
        return options


class UnreservedCategory(MockAgent):
    def config_options(self, session: Session) -> list[Json]:
        options = super().config_options(session)
        options[0] = {**options[0], "category": "speed"}  # neither spec-defined nor "_speed"
        return options


class UnreservedCategoryAndBoolean(UnreservedCategory):
    """Both at once: the SHOULD NOT (category) must not stop the test before the MUST NOT (boolean)."""

    def config_options(self, session: Session) -> list[Json]:
        brave = {"id": "brave", "name": "Brave mode", "type": "boolean", "currentValue": False}
        return [*super().config_options(session), brave]


class UngatedBooleanOption(MockAgent):
    def config_options(self, session: Session) -> list[Json]:
        brave = {"id": "brave", "name": "Brave mode", "type": "boolean", "currentValue": False}
        return [*super().config_options(session), brave]


class NoModeConfigOption(MockAgent):
    def config_options(self, session: Session) -> list[Json]:
        return [o for o in super().config_options(session) if o["id"] != "mode"]


# ------------------------------------------------------- extensibility/errors
class RejectsMetaInSessionNew(MockAgent):
    async def handle_new_session(self, req: Request) -> Any:
        if isinstance(req.params, dict) and "_meta" in req.params:
            raise HandlerError(INVALID_PARAMS, "session/new: unknown field _meta")
        return await super().handle_new_session(req)


class RejectsCapabilityMeta(MockAgent):
    async def handle_initialize(self, req: Request) -> Any:
        caps = req.params.get("clientCapabilities") if isinstance(req.params, dict) else None
        if isinstance(caps, dict) and "_meta" in caps:
            raise HandlerError(INVALID_PARAMS, "initialize: unknown capability _meta")
        return await super().handle_initialize(req)


class AssumesMetaStrings(MockAgent):
    def _check_prompt(self, prompt: Any) -> list[Json]:
        for block in prompt if isinstance(prompt, list) else []:
            meta = block.get("_meta") if isinstance(block, dict) else None
            if isinstance(meta, dict) and not all(isinstance(v, str) for v in meta.values()):
                raise HandlerError(INTERNAL_ERROR, "internal error: _meta value is not a string")
        return super()._check_prompt(prompt)


class InvalidParamsAsInternalError(MockAgent):
    async def handle_new_session(self, req: Request) -> Any:
        if isinstance(req.params, dict) and "cwd" not in req.params:
            raise HandlerError(INTERNAL_ERROR, "internal error: KeyError('cwd')")
        return await super().handle_new_session(req)


class PromptToUnknownSessionSucceeds(MockAgent):
    async def handle_prompt(self, req: Request) -> Any:
        params = self.params_of(req)
        sid = self._string(params, "sessionId", "session/prompt")
        self._check_prompt(params.get("prompt"))
        if sid not in self.sessions:
            return {"stopReason": "end_turn"}
        return await super().handle_prompt(req)


class HangsOnPromptsToUnknownSessions(MockAgent):
    async def handle_prompt(self, req: Request) -> Any:
        sid = self.params_of(req).get("sessionId")
        if sid not in self.sessions:
            return NO_ANSWER
        return await super().handle_prompt(req)


class HangsOnLoadsOfUnknownSessions(MockAgent):
    async def handle_load_session(self, req: Request) -> Any:
        if self.params_of(req).get("sessionId") not in self.sessions:
            return NO_ANSWER
        return await super().handle_load_session(req)


class UnknownSessionInvalidParams(MockAgent):
    def unknown_session(self, session_id: Any, code: int = INVALID_PARAMS) -> HandlerError:
        return HandlerError(INVALID_PARAMS, f"invalid sessionId {session_id!r}")


class CustomRootField(MockAgent):
    def new_session_result(self, session: Session) -> Json:
        return {**super().new_session_result(session), "sessionTitle": "New session"}


class WithdrawnModelsField(MockAgent):
    """codex-acp 2.6.0: the withdrawn unstable session-model draft's models on session/new."""

    def new_session_result(self, session: Session) -> Json:
        models = {"currentModelId": "fast", "availableModels": [{"modelId": "fast", "name": "Fast"}]}
        return {**super().new_session_result(session), "models": models}


class WithdrawnEnvVarAuthMethod(MockAgent):
    """zed codex-acp 0.16.0: an auth method of the withdrawn env_var draft variant."""

    def auth_methods(self) -> list[Json]:
        env = {"id": "api-key", "name": "API key", "type": "env_var", "vars": [{"name": "OPENAI_API_KEY"}]}
        return [*super().auth_methods(), env]


class NonTraceDataInTraceparent(MockAgent):
    def new_session_result(self, session: Session) -> Json:
        return {**super().new_session_result(session), "_meta": {"traceparent": "session-42"}}


class SessionInfoUpdateWithSessionId(MockAgent):
    async def send_update(self, session_id: str, update: Json) -> None:
        if update.get("sessionUpdate") == "plan":
            info = {"sessionUpdate": "session_info_update", "title": "A title", "sessionId": session_id}
            await super().send_update(session_id, info)
        await super().send_update(session_id, update)


class NonUnderscoreExtension(MockAgent):
    async def on_start(self) -> None:
        await self.peer.send_raw(b'{"jsonrpc":"2.0","method":"acme/hello","params":{}}\n')


# ------------------------------------------------------ additionalDirectories
class AdditionalDirectories(MockAgent):
    """A conforming agent: the reference plus sessionCapabilities.additionalDirectories,
    which it reports in session/list and replaces on every load and resume."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.roots: dict[str, list[str]] = {}

    def agent_capabilities(self) -> Json:
        caps = super().agent_capabilities()
        caps["sessionCapabilities"] = {**caps["sessionCapabilities"], "additionalDirectories": {}}
        return caps

    @staticmethod
    def additional_dirs(params: Json) -> list[str]:
        dirs = params.get("additionalDirectories") or []
        if not isinstance(dirs, list) or not all(isinstance(d, str) and os.path.isabs(d) for d in dirs):
            raise HandlerError(INVALID_PARAMS, "additionalDirectories must be absolute paths")
        return list(dirs)

    def create_session(self, cwd: str, mcp_servers: list[Any], params: Json) -> Session:
        dirs = self.additional_dirs(params)
        session = super().create_session(cwd, mcp_servers, params)
        self.roots[session.id] = dirs
        return session

    def session_info(self, session: Session) -> Json:
        info = super().session_info(session)
        if self.roots.get(session.id):
            info["additionalDirectories"] = list(self.roots[session.id])
        return info

    async def handle_load_session(self, req: Request) -> Any:
        dirs = self.additional_dirs(self.params_of(req))
        result = await super().handle_load_session(req)
        self.roots[self.params_of(req)["sessionId"]] = dirs
        return result

    async def handle_resume_session(self, req: Request) -> Any:
        dirs = self.additional_dirs(self.params_of(req))
        result = await super().handle_resume_session(req)
        self.roots[self.params_of(req)["sessionId"]] = dirs
        return result


class RestoresAdditionalDirectories(AdditionalDirectories):
    async def handle_resume_session(self, req: Request) -> Any:
        if "additionalDirectories" not in self.params_of(req):
            return await MockAgent.handle_resume_session(self, req)  # keeps the remembered roots
        return await super().handle_resume_session(req)


# ------------------------------------------------------------- authentication
class AcceptsUnknownAuthMethod(MockAgent):
    async def handle_authenticate(self, req: Request) -> Any:
        self._string(self.params_of(req), "methodId", "authenticate")  # still -32602 without one
        return {}


class HangsOnUnknownAuthMethods(MockAgent):
    async def handle_authenticate(self, req: Request) -> Any:
        if self.params_of(req).get("methodId") not in {m.get("id") for m in self.auth_methods()}:
            return NO_ANSWER
        return await super().handle_authenticate(req)


class UngatedTerminalAuth(MockAgent):
    def auth_methods(self) -> list[Json]:
        return [{"id": "terminal-login", "name": "Log in from the terminal", "type": "terminal", "args": ["--login"]}]


class RequiresAuth(MockAgent):
    """The reference agent as ``python -m mock_agent --require-auth`` runs it: session/new (load,
    resume, list) gated on authenticate("token"), and logout."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**{**kwargs, "require_auth": True})


class AuthenticateAnswersArray(RequiresAuth):
    validate_outbound = False

    async def handle_authenticate(self, req: Request) -> Any:
        await super().handle_authenticate(req)
        return []


class LogoutKeepsAuth(RequiresAuth):
    async def handle_logout(self, req: Request) -> Any:
        return {}  # still authenticated


class AuthRequiredAsInternalError(RequiresAuth):
    """Refuses unauthenticated requests, but with -32603 instead of -32000 (auth_required)."""

    def _guarded(self, method: str, fn: Any) -> Any:
        inner = super()._guarded(method, fn)

        async def handler(req: Request) -> Any:
            try:
                return await inner(req)
            except HandlerError as exc:
                if exc.code == -32000:
                    raise HandlerError(INTERNAL_ERROR, "please log in first") from None
                raise

        return handler


class LogoutUnimplemented(RequiresAuth):
    async def handle_logout(self, req: Request) -> Any:
        raise HandlerError(-32601, "method not found: logout")


def _b(
    agent: type[MockAgent], breaks: str, status: str = "FAIL", also: set[str] | None = None, why: str = ""
) -> Breakage:
    return Breakage(agent, breaks, status, frozenset(also or ()), why)


_SCHEMA = "the result is not an object, which the schema check reports too"

BREAKAGES: dict[str, Breakage[MockAgent]] = {
    "relative-cwd-accepted": _b(AcceptsRelativeCwd, "session.cwd.relative-rejected", "INFO"),
    "rejects-stdio-mcp": _b(RejectsStdioMcp, "session.mcp.stdio"),
    "process-cwd-paths": _b(
        ProcessCwdPaths,
        "session.cwd.authoritative",
        also={"session.roots.boundary"},
        why="a path under the process directory is also outside the session's root set (a WARN)",
    ),
    "paths-outside-roots": _b(PathsOutsideRoots, "session.roots.boundary", "WARN"),
    "late-replay": _b(LateReplay, "session.load.replay-before-response"),
    "replay-wrong-session-id": _b(ReplayWrongSessionId, "session.load.replay-session-id"),
    "replay-without-prompts": _b(ReplayWithoutPrompts, "session.load.replay-all"),
    "load-always-fails": _b(LoadAlwaysFails, "session.load.replay-all"),
    "load-result-array": _b(LoadResultArray, "session.load.response", also={"schema.valid"}, why=_SCHEMA),
    "load-result-null": _b(LoadResultNull, "schema.null-result", "WARN"),
    "shared-user-message-id": _b(SharedUserMessageId, "session.load.message-ids", "WARN"),
    "loaded-session-unusable": _b(LoadedSessionUnusable, "session.load.continue", "WARN"),
    "load-without-capability": _b(LoadWithoutCapability, "session.load.unsupported", "INFO"),
    # session/load sent to an agent that did not advertise it, on purpose: its silence is robustness, once
    # (session.load.unsupported judges what the answer is, and has none: INCONCLUSIVE).
    "hangs-on-unadvertised-load": Breakage(
        HangsOnUnadvertisedLoad,
        "jsonrpc.survives-invalid-input",
        "WARN",
        quiet=frozenset({"jsonrpc.every-request-answered", "session.load.unsupported"}),
    ),
    "loads-unknown-sessions": _b(
        LoadsUnknownSessions,
        "error.resource-not-found",
        "INFO",
        also={"session.load.replay-all"},
        why="a fresh agent process then 'loads' the conversation it does not know with an empty replay",
    ),
    "resume-replays": _b(ResumeReplays, "session.resume.no-replay"),
    "resume-result-array": _b(ResumeResultArray, "session.resume.response", also={"schema.valid"}, why=_SCHEMA),
    "close-errors-running-prompt": _b(CloseErrorsRunningPrompt, "session.close.cancels-work"),
    "close-result-extra": _b(CloseResultExtra, "session.close.response"),
    "close-unknown-hangs": _b(
        CloseUnknownHangs,
        "session.close.unknown",
        "INFO",
        also={"jsonrpc.every-request-answered", "jsonrpc.survives-invalid-input"},
        why="the session/close left unanswered is a request never answered (the MUST, jsonrpc.every-request-"
        "answered; the MAY only notes it); the fuzzer's session/close with a fractional id (to an unknown "
        "session) is no valid ACP request, so its silence is the robustness finding",
    ),
    "list-requires-cwd": _b(ListRequiresCwd, "session.list.params-optional"),
    "list-relative-cwd": _b(ListRelativeCwd, "session.list.response"),
    "list-empty-is-error": _b(ListEmptyIsError, "session.list.empty"),
    "list-ignores-cwd": _b(
        ListIgnoresCwd,
        "session.list.cwd-filter",
        "WARN",
        also={"session.list.empty"},
        why="ignoring the filter also lists, for a directory no session uses, the session opened elsewhere",
    ),
    "list-accepts-any-cursor": _b(ListAcceptsAnyCursor, "session.list.invalid-cursor", "WARN"),
    "list-pages-forever": _b(ListPagesForever, "session.list.page-size", "WARN"),
    "list-replays-history": _b(ListReplaysHistory, "session.list.discovery-only", "WARN"),
    "delete-keeps-session": _b(DeleteKeepsSession, "session.delete.removes", "WARN"),
    "delete-result-extra": _b(DeleteResultExtra, "session.delete.response"),
    "delete-unknown-errors": _b(DeleteUnknownErrors, "session.delete.idempotent", "WARN"),
    "set-mode-ignored": _b(SetModeIgnored, "mode.set.response", "WARN"),
    "refuses-advertised-mode": _b(RefusesAdvertisedMode, "mode.set.anytime", "WARN"),
    "set-mode-accepts-unknown": _b(SetModeAcceptsUnknown, "mode.set.invalid", "INFO"),
    "set-mode-waits-for-turn": _b(SetModeWaitsForTurn, "mode.set.anytime", "WARN"),
    "set-config-waits-for-turn": _b(SetConfigWaitsForTurn, "config.set.anytime", "WARN"),
    "set-config-partial-result": _b(SetConfigPartialResult, "config.set.response-complete"),
    "set-config-accepts-unknown": _b(SetConfigAcceptsUnknown, "config.set.invalid", "INFO"),
    "partial-config-update": _b(PartialConfigUpdate, "config.update.complete", "WARN"),
    "config-value-not-listed": _b(ConfigValueNotListed, "config.default-value"),
    "unreserved-category": _b(UnreservedCategory, "config.category.reserved", "WARN"),
    "unreserved-category-and-boolean": _b(
        UnreservedCategoryAndBoolean,
        "config.boolean.gated",
        also={"config.category.reserved"},
        why="the unreserved category is judged too (a WARN), and no longer hides the boolean option",
    ),
    "ungated-boolean-option": _b(UngatedBooleanOption, "config.boolean.gated"),
    "no-mode-config-option": _b(NoModeConfigOption, "mode.dual-advertise", "WARN"),
    "rejects-meta-in-session-new": _b(RejectsMetaInSessionNew, "ext.meta.everywhere", "WARN"),
    "rejects-capability-meta": _b(
        RejectsCapabilityMeta,
        "cap.custom-meta",
        "WARN",
        also={"ext.meta.everywhere"},
        why="capability objects are among the places _meta must be accepted (a MUST there)",
    ),
    "assumes-meta-strings": _b(AssumesMetaStrings, "ext.meta.no-assumptions"),
    "invalid-params-as-internal-error": _b(InvalidParamsAsInternalError, "jsonrpc.invalid-params", "WARN"),
    "prompt-to-unknown-session-succeeds": _b(
        PromptToUnknownSessionSucceeds,
        "prompt.unknown-session",
        "INFO",
        also={"error.resource-not-found"},
        why="a success is also not the -32002 an unknown session is expected to get (an INFO)",
    ),
    "unknown-session-invalid-params": _b(UnknownSessionInvalidParams, "error.resource-not-found", "INFO"),
    # A silence to a request naming what the agent does not know is one finding, the unanswered
    # request's: the clauses about which error it should have been stay quiet (INCONCLUSIVE where
    # judged, ``silence_judged_once``), never a second FAIL or WARN for the same silence.
    "hangs-on-prompts-to-unknown-sessions": Breakage(
        HangsOnPromptsToUnknownSessions,
        "jsonrpc.every-request-answered",
        also=frozenset({"jsonrpc.survives-invalid-input", "jsonrpc.parse-error"}),
        why_also="the fuzz campaigns' prompts name an unknown session: those the schema rejects go unanswered too "
        "(a robustness finding), and so does one nested 600 deep, which a receiver may refuse to parse: its "
        "silence is taken for a missing -32700 (a SHOULD), the campaign cannot tell why it came",
        says="no response to session/prompt",
        quiet=frozenset({"prompt.unknown-session", "error.resource-not-found"}),
    ),
    "hangs-on-loads-of-unknown-sessions": Breakage(
        HangsOnLoadsOfUnknownSessions,
        "jsonrpc.every-request-answered",
        also=frozenset({"jsonrpc.survives-invalid-input"}),
        why_also="the fuzz campaigns' session/load frames the schema rejects name unknown sessions and go "
        "unanswered too: a robustness finding",
        says="no response to session/load",
        quiet=frozenset({"error.resource-not-found"}),
    ),
    "hangs-on-unknown-auth-methods": Breakage(
        HangsOnUnknownAuthMethods,
        "jsonrpc.every-request-answered",
        says="no response to authenticate",
        quiet=frozenset({"auth.authenticate.unknown-id"}),
    ),
    "non-underscore-extension": _b(NonUnderscoreExtension, "ext.method.underscore", "WARN"),
    "custom-root-field": _b(CustomRootField, "ext.no-root-fields"),
    "withdrawn-models-field": _b(WithdrawnModelsField, "ext.withdrawn-draft-field", "WARN"),
    "withdrawn-env-var-auth-method": _b(WithdrawnEnvVarAuthMethod, "ext.withdrawn-draft-field", "WARN"),
    "session-info-update-with-session-id": _b(SessionInfoUpdateWithSessionId, "session.info-update.fields"),
    "non-trace-data-in-traceparent": _b(NonTraceDataInTraceparent, "ext.meta.trace-keys", "WARN"),
    "accepts-unknown-auth-method": _b(AcceptsUnknownAuthMethod, "auth.authenticate.unknown-id", "INFO"),
    "ungated-terminal-auth": _b(UngatedTerminalAuth, "auth.terminal.gated"),
    "restores-additional-directories": _b(
        RestoresAdditionalDirectories, "session.additional-dirs.no-implicit-restore", "WARN"
    ),
    # The reference agent with --require-auth, certified with --acp-auth-method=token, one thing broken.
    "authenticate-answers-array": Breakage(
        AuthenticateAnswersArray,
        "auth.authenticate.success",
        also=frozenset({"schema.valid"}),
        why_also="an array is no AuthenticateResponse object, which the schema says too",
        suite_args=(AUTH,),
    ),
    "logout-unimplemented": Breakage(LogoutUnimplemented, "auth.logout.success", suite_args=(AUTH,)),
    "logout-keeps-auth": Breakage(LogoutKeepsAuth, "auth.logout.reauth", "WARN", suite_args=(AUTH,)),
    "auth-required-as-internal-error": Breakage(
        AuthRequiredAsInternalError,
        "error.auth-required",
        "WARN",
        also=frozenset(
            {
                "auth.logout.reauth",
                "jsonrpc.every-request-answered",
                "error.resource-not-found",
                "jsonrpc.survives-invalid-input",
            }
        ),
        why_also="after logout session/new is refused with -32603, not the -32000 auth.logout.reauth expects; the "
        "scenario library never authenticates and, with no -32000 to recognise, its scenarios judge the refusals "
        "(an error where a session/new result is expected, -32603 where -32002 is; in malformed-input.yaml the "
        "refused session/new after its malformed frames is judged as survival, a robustness WARN)",
        suite_args=(AUTH,),
    ),
}

#: Runnable agents that are no breakage (run by tests/unit/test_checks_sessions.py): the
#: conforming bases of some breakages.
AGENTS: dict[str, type[MockAgent]] = {
    "additional-directories": AdditionalDirectories,
    "requires-auth": RequiresAuth,
}


if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] not in AGENTS:
        print(f"usage: {sys.argv[0]} NAME [mock_agent options]; NAME one of: {', '.join(AGENTS)}", file=sys.stderr)
        sys.exit(2)
    run(sys.argv[2:], agent_cls=AGENTS[sys.argv[1]])
