"""Broken clients for the terminal/* methods.

Merged into ``BREAKAGES`` by ``broken_clients.py`` (run them through it).
"""

from __future__ import annotations

from typing import Any

import anyio

from acp_conformance.peer import NO_ANSWER
from acp_conformance.suite.client.test_terminal import RELEASE_FILE
from mock_client import MockClient
from tests.peers._breakage import Breakage


def _held_create(name: str, params: dict[str, Any]) -> bool:
    """Whether this is terminal/create of the suite's held command (it runs until RELEASE_FILE)."""
    return name == "create" and any(RELEASE_FILE in str(a) for a in params.get("args") or [])


class NoTerminalExitCode(MockClient):
    async def terminal_call(self, name: str, params: dict[str, Any]) -> Any:
        result = await super().terminal_call(name, params)
        if name == "wait_for_exit":
            return {"exitCode": None, "signal": None}
        return result


class NegativeExitCode(MockClient):
    async def terminal_call(self, name: str, params: dict[str, Any]) -> Any:
        result = await super().terminal_call(name, params)
        if name == "wait_for_exit" and isinstance(result.get("exitCode"), int):
            return {"exitCode": -result["exitCode"] or -1, "signal": None}
        return result


class ExitStatusWhileRunning(MockClient):
    async def terminal_call(self, name: str, params: dict[str, Any]) -> Any:
        result = await super().terminal_call(name, params)
        if name == "output" and "exitStatus" not in result:
            result["exitStatus"] = {"exitCode": 0, "signal": None}
        return result


class CreateWaitsForExit(MockClient):
    async def terminal_call(self, name: str, params: dict[str, Any]) -> Any:
        result = await super().terminal_call(name, params)
        if name == "create":
            assert self.terminals is not None
            await self.terminals.wait_for_exit(result["terminalId"])
        return result


class SlowToAnswerAHeldCreate(MockClient):
    """Conforming but slow: answers terminal/create for the suite's held command (the one that
    runs until a release file appears) 4.5 s after starting it, while it still runs, between the
    proofs' deadline (``--acp-timeout=3``) and twice that.  ``term.create.immediate`` must PASS:
    a slow answer is not a create that waits for the command."""

    async def terminal_call(self, name: str, params: dict[str, Any]) -> Any:
        result = await super().terminal_call(name, params)
        if _held_create(name, params):
            await anyio.sleep(4.5)
        return result


class NeverAnswersAHeldCreate(MockClient):
    """Never answers terminal/create for the suite's held command (the one that runs until a
    release file appears), nor runs it: a request left unanswered, not a create that waits."""

    async def terminal_call(self, name: str, params: dict[str, Any]) -> Any:
        if _held_create(name, params):
            return NO_ANSWER
        return await super().terminal_call(name, params)


class KillReleases(MockClient):
    async def terminal_call(self, name: str, params: dict[str, Any]) -> Any:
        if name == "kill":
            return await super().terminal_call("release", params)
        return await super().terminal_call(name, params)


class ReleaseLeavesRunning(MockClient):
    async def terminal_call(self, name: str, params: dict[str, Any]) -> Any:
        if name == "release":
            assert self.terminals is not None
            self.terminals.get(params.get("terminalId")).released = True
            return {}
        return await super().terminal_call(name, params)


class ReleasedIdStillWorks(MockClient):
    async def terminal_call(self, name: str, params: dict[str, Any]) -> Any:
        if name == "release":
            assert self.terminals is not None
            self.terminals.get(params.get("terminalId"))
            return {}  # "released", but the id keeps working
        return await super().terminal_call(name, params)


class _TruncatesOutputItself(MockClient):
    """Creates each terminal without its outputByteLimit and truncates the output itself, with ``cut``,
    when it exceeds the limit the agent asked for."""

    def cut(self, data: bytes, limit: int) -> str:
        raise NotImplementedError

    async def terminal_call(self, name: str, params: dict[str, Any]) -> Any:
        if name == "create":
            self._limits = getattr(self, "_limits", {})
            limit = params.get("outputByteLimit")
            params = {**params}
            params.pop("outputByteLimit", None)
            result = await super().terminal_call(name, params)
            self._limits[result["terminalId"]] = limit
            return result
        result = await super().terminal_call(name, params)
        limit = getattr(self, "_limits", {}).get(params.get("terminalId"))
        if name == "output" and isinstance(limit, int):
            data = result["output"].encode()
            if len(data) > limit:
                result["output"] = self.cut(data, limit)
                result["truncated"] = True
        return result


class KeepsTheHead(_TruncatesOutputItself):
    def cut(self, data: bytes, limit: int) -> str:
        return data[:limit].decode("utf-8", "ignore")


class SplitsCharacters(_TruncatesOutputItself):
    def cut(self, data: bytes, limit: int) -> str:
        return data[-limit:].decode("utf-8", "replace")  # cuts inside a character


class IgnoresTheLimit(_TruncatesOutputItself):
    """Keeps the whole output: it cuts nothing, so no character is split."""

    def cut(self, data: bytes, limit: int) -> str:
        return data.decode()


BREAKAGES: dict[str, Breakage[MockClient]] = {
    "no-terminal-exit-code": Breakage(NoTerminalExitCode, "term.wait", status="WARN"),
    "negative-exit-code": Breakage(
        NegativeExitCode,
        "term.exit-status.shape",
        also=frozenset({"schema.valid"}),
        why_also="the schema gives exitCode a minimum of 0",
    ),
    "exit-status-while-running": Breakage(ExitStatusWhileRunning, "term.output.shape", status="WARN"),
    "create-waits-for-exit": Breakage(CreateWaitsForExit, "term.create.immediate", status="WARN"),
    "slow-to-answer-a-held-create": Breakage(SlowToAnswerAHeldCreate, "term.create.immediate", status="PASS"),
    # term.create.immediate INCONCLUSIVE (not shown to wait): the silence is the request's own clause's.
    "never-answers-a-held-create": Breakage(
        NeverAnswersAHeldCreate, "jsonrpc.every-request-answered", says="no response to terminal/create"
    ),
    "kill-releases": Breakage(KillReleases, "term.kill.keeps-id", status="WARN"),
    "release-leaves-running": Breakage(ReleaseLeavesRunning, "term.release.kills", status="WARN"),
    "released-id-still-works": Breakage(
        ReleasedIdStillWorks,
        "term.release.invalidates",
        status="WARN",
        also=frozenset({"term.release.kills"}),
        why_also="a terminal that is not really released is not killed either",
    ),
    "keeps-the-head": Breakage(KeepsTheHead, "term.output.truncate-head", status="WARN"),
    "splits-characters": Breakage(SplitsCharacters, "term.output.char-boundary"),
    # Nothing cut, nothing split: char-boundary has no cut to judge (it FAILed a client that kept it all).
    "ignores-the-limit": Breakage(
        IgnoresTheLimit, "term.output.truncate-head", status="WARN", quiet=frozenset({"term.output.char-boundary"})
    ),
}
