"""A scripted model endpoint: server + API + script + evidence, and a generic setup hook.

``async with ModelStub("anthropic") as stub:`` serves on ``stub.url``
(127.0.0.1, a free port) until the block ends.  ``stub.env`` is the
environment that points a client library at it (base URL, a dummy key,
proxy variables that route any other host to the stub, where the attempt
is recorded and refused).  ``stub.evidence()`` is one line per request,
for failure reports; with ``log`` every request is also appended to a
JSONL file as it finishes.

``model_stub_setup(kind)`` returns a callable matching
``AgentConfig.setup``: a scripted endpoint per agent process, with no
other preparation (agent profiles add HOME, config files and so on).
"""

from __future__ import annotations

import copy
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any, Literal

import orjson

from acp_conformance.model_stub.anthropic import AnthropicApi
from acp_conformance.model_stub.openai import OpenAIResponsesApi
from acp_conformance.model_stub.script import Script, default_script
from acp_conformance.model_stub.server import RecordedRequest, StubServer

__all__ = ["DUMMY_KEY", "KINDS", "ModelStub", "PreparedStub", "model_stub_setup", "normalize_kind", "stable_port"]

Kind = Literal["anthropic", "openai"]
KINDS: dict[str, Kind] = {
    "anthropic": "anthropic",
    "claude": "anthropic",
    "messages": "anthropic",
    "openai": "openai",
    "responses": "openai",
    "codex": "openai",
}
#: Not a secret: the stub ignores credentials; clients merely insist on having one.
DUMMY_KEY = "sk-acp-conformance-model-stub"
LOOPBACK = "127.0.0.1,localhost,::1"


def normalize_kind(kind: str) -> Kind:
    try:
        return KINDS[kind.strip().lower()]
    except KeyError:
        raise ValueError(f"unknown model stub kind {kind!r}; use one of: {', '.join(sorted(KINDS))}") from None


class ModelStub:
    """One scripted model API on 127.0.0.1."""

    def __init__(self, kind: str, script: Script | None = None, *, log: Path | None = None, port: int = 0) -> None:
        self.kind: Kind = normalize_kind(kind)
        # Rules count their uses (``times``): every endpoint gets its own copy.
        self.script = copy.deepcopy(script) if script is not None else default_script(self.kind)
        api = AnthropicApi(self.script) if self.kind == "anthropic" else OpenAIResponsesApi(self.script)
        self.api = api
        self.server = StubServer(api, port=port)
        self.log = log
        if log is not None:
            self.server.on_record = self._append

    def begin_lease(self) -> None:
        """The agent process this endpoint serves passes to another test (``--acp-isolation=
        connection``): rules count their uses afresh, as for a new process, and the requests
        shown as evidence are the new test's own."""
        for rule in self.script.rules:
            rule.used = 0
        self.server.requests.clear()

    @property
    def url(self) -> str:
        return self.server.url

    @property
    def base_url(self) -> str:
        """What a client library takes as its base URL (OpenAI's includes ``/v1``)."""
        return self.url + ("/v1" if self.kind == "openai" else "")

    @property
    def requests(self) -> list[RecordedRequest]:
        return self.server.requests

    @property
    def egress(self) -> list[RecordedRequest]:
        """Requests that tried to reach another host through the stub as proxy."""
        return self.server.egress

    def model_requests(self) -> list[RecordedRequest]:
        """The requests that asked the model for an answer (messages / responses)."""
        tail = "/v1/messages" if self.kind == "anthropic" else "/responses"
        return [r for r in self.requests if r.method == "POST" and r.target.split("?")[0].rstrip("/").endswith(tail)]

    @property
    def env(self) -> dict[str, str]:
        env = {
            # Anything that honours proxy variables and wants another host ends up here, recorded.
            "HTTP_PROXY": self.url,
            "HTTPS_PROXY": self.url,
            "ALL_PROXY": self.url,
            "http_proxy": self.url,
            "https_proxy": self.url,
            "all_proxy": self.url,
            "NO_PROXY": LOOPBACK,
            "no_proxy": LOOPBACK,
        }
        if self.kind == "anthropic":
            env.update(ANTHROPIC_BASE_URL=self.url, ANTHROPIC_API_KEY=DUMMY_KEY)
        else:
            env.update(OPENAI_BASE_URL=self.base_url, OPENAI_API_KEY=DUMMY_KEY)
        return env

    def holding(self) -> str | None:
        """Why a turn of the agent cannot have ended by itself right now, or None: the stub is
        streaming a slow reply (``acp:long``) it ends only when the agent goes away."""
        if self.api.slow_open:
            return (
                f"the scripted model endpoint was still streaming {self.api.slow_open} slow reply(ies) to the agent "
                "(held by the suite: a slow reply ends only when the agent disconnects)"
            )
        return None

    def evidence(self, last: int = 40) -> str:
        reqs = self.requests
        head = f"model stub ({self.kind}) at {self.url}: {len(reqs)} request(s)"
        if self.log is not None:
            head += f", full bodies in {self.log}"
        if self.egress:
            head += f"; {len(self.egress)} EGRESS ATTEMPT(S) refused"
        shown = reqs[-last:]
        lines = [head]
        if len(shown) < len(reqs):
            lines.append(f"  ... {len(reqs) - len(shown)} earlier request(s) not shown")
        lines += ["  " + r.line() for r in shown]
        return "\n".join(lines)

    def _append(self, record: RecordedRequest) -> None:
        assert self.log is not None
        try:
            with self.log.open("ab") as f:
                f.write(orjson.dumps({"stub": self.url, **record.to_json()}) + b"\n")
        except OSError:
            pass

    async def __aenter__(self) -> ModelStub:
        await self.server.__aenter__()
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.server.__aexit__(*exc)


@asynccontextmanager
async def stable_port(directory: Path, kind: str, script: Script | None) -> AsyncIterator[ModelStub]:
    """A stub for one agent process of a test, on the port the test's earlier processes used.

    Consecutive processes of one test (session/load from a fresh process) then see the same
    base URL, so config files naming it stay valid; a process started while another one of
    the test still holds the port gets a new one (and its own config)."""
    directory.mkdir(parents=True, exist_ok=True)
    marker = directory / "model-stub-port"
    try:
        wanted = int(marker.read_text("utf-8").strip())
    except (OSError, ValueError):
        wanted = 0
    async with ModelStub(kind, script, log=directory / "model-requests.jsonl", port=wanted) as stub:
        if not wanted:
            marker.write_text(f"{stub.server.port}\n", "utf-8")
        yield stub


class PreparedStub:
    """What ``model_stub_setup`` yields per connection (``AgentConfig.setup`` protocol)."""

    def __init__(self, stub: ModelStub, env: dict[str, str], hints: dict[str, str] | None = None) -> None:
        self.stub = stub
        self.env = env
        #: What a suite may want to know about the peer (e.g. ``permission_mode``).
        self.hints: dict[str, str] = dict(hints or {})

    def evidence(self) -> str:
        return self.stub.evidence()

    def holding(self) -> str | None:
        return self.stub.holding()

    def begin_lease(self) -> None:
        self.stub.begin_lease()


def model_stub_setup(
    kind: str, script: Script | None = None
) -> Callable[[Path], AbstractAsyncContextManager[PreparedStub]]:
    """A setup hook that serves a scripted ``kind`` endpoint to each agent process."""
    normalize_kind(kind)

    @asynccontextmanager
    async def setup(directory: Path) -> AsyncIterator[PreparedStub]:
        async with stable_port(directory, kind, script) as stub:
            yield PreparedStub(stub, stub.env)

    return setup
