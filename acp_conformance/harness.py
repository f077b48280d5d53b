"""Running one agent under test: process, client endpoint, evidence.

The ``AgentHarness`` is what a conformance test holds.  Each
``connect()`` starts the agent afresh (its own process group, a sandbox
directory as session cwd), wires a ``ClientEndpoint`` to it, and on the
way out tears the process down and turns the transcript into clause
results.  MUST-level violations found in the transcript fail the test
there and then, naming the clause; SHOULD-level ones become warnings.

No pytest here: the plugin wraps this, and other tools (the mock client
CLI, the recording proxy) can drive it directly.
"""

from __future__ import annotations

import os
import tempfile
import warnings
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from acp_conformance.checks import passive_results
from acp_conformance.clauses import registry
from acp_conformance.client import ClientCapabilities, ClientEndpoint, PermissionPolicy, Sandbox, VirtualTerminals
from acp_conformance.core.connection import Role
from acp_conformance.core.framing import DEFAULT_MAX_FRAME_BYTES
from acp_conformance.errors import ConformanceFailure, PeerError, PeerExited, PeerTimeout, PeerUnavailable
from acp_conformance.peer import DeadlineMemory, Peer
from acp_conformance.results import ClauseResult, Status, adjust, judged
from acp_conformance.transcript import Transcript, redactor
from acp_conformance.transport.process import ProcessTransport, spawn
from acp_conformance.validation import SchemaValidator

__all__ = ["AcpSpecWarning", "AgentConfig", "AgentHarness", "Connection", "PreparedPeer", "judge_transcript"]

#: After this many handshakes in a row fail (no ``initialize`` answer, or the
#: process died first) without one ever succeeding, later tests in the same
#: process stop starting the agent: a dead agent then costs seconds, not one
#: startup timeout per test.  Two, not one, so a single cold start (npx
#: downloading, a JIT warming up) cannot write off the whole run.
DEAD_AFTER = 2


@dataclass
class _Liveness:
    """Per-process memory of how handshakes with each command went."""

    ok: bool = False
    failures: list[str] = field(default_factory=list)


_LIVENESS: dict[str, _Liveness] = {}
#: Per process and command: the methods whose deadline the peer let pass (``DeadlineMemory``).
_DEADLINES: dict[str, DeadlineMemory] = {}


def deadline_memory(command: str) -> DeadlineMemory:
    """The run's memory of missed deadlines for the peer started by ``command``."""
    return _DEADLINES.setdefault(command, DeadlineMemory())


class AcpSpecWarning(UserWarning):
    """A SHOULD-level recommendation the peer does not follow."""


@dataclass
class AgentConfig:
    """How to start and talk to the agent under test (from the CLI options)."""

    command: str
    env: dict[str, str] = field(default_factory=dict)
    cwd: str | None = None
    timeout: float = 10.0
    startup_timeout: float = 20.0
    max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES
    prompt: str = "Hello! Please reply with a short greeting."
    tool_prompt: str = "acp:tool Please create a file named acp-probe.txt containing 'hello' using your tools."
    long_prompt: str = "acp:long Please count slowly from one to one thousand, one number per line."
    auth_method: str | None = None
    #: Optional per-connection preparation (peer profiles): called with a fresh
    #: directory, entered around the agent process; its ``env`` is added to the
    #: agent's environment and its ``evidence()`` joins failure reports.
    setup: Callable[[Path], AbstractAsyncContextManager[PreparedPeer]] | None = None


class PreparedPeer(Protocol):
    """What a peer profile's setup yields for one connection."""

    env: dict[str, str]

    def evidence(self) -> str: ...


@dataclass
class Connection:
    """One started agent process and what we saw of it."""

    client: ClientEndpoint
    transport: ProcessTransport
    transcript: Transcript
    sandbox: Sandbox

    @property
    def peer(self) -> Peer:
        return self.client.peer

    def stderr_tail(self, n: int = 20) -> list[str]:
        return list(self.transport.stderr_tail)[-n:]


class AgentHarness:
    """One test's view of the agent under test."""

    def __init__(
        self, config: AgentConfig, validator: SchemaValidator, workdir: str | os.PathLike[str], label: str = ""
    ) -> None:
        self.config = config
        #: Which test this is (its node id), named when a later test gives up on a method it hung on.
        self.label = label
        self.validator = validator
        self.workdir = Path(workdir)
        self.results: list[ClauseResult] = []
        self.connections: list[Connection] = []
        self.peer_info: dict[str, Any] | None = None
        self.body_completed = False
        #: The first MUST failure recorded by a ``check(..., stop=False)``, raised when the
        #: connection closes (the test fails, after every independent check has had its say).
        self.pending_failure: ConformanceFailure | None = None
        self.setups: list[PreparedPeer] = []
        self._n = 0

    # -------------------------------------------------------------- results
    def record(self, clause: str, status: Status, message: str = "", evidence: str = "") -> None:
        """Record a result; a breach takes the status the clause's level gives it (``results.adjust``)."""
        self.results.append(ClauseResult(clause, adjust(registry().get(clause), status), message, evidence))

    def check(self, clause: str, ok: bool, expected: str, actual: str, *, stop: bool = True) -> bool:
        """Judge ``clause``: PASS, or for a MUST a ``ConformanceFailure`` that
        stops the test; for a SHOULD a WARN and an ``AcpSpecWarning``, for a MAY
        an INFO (the test goes on: a recommendation missed is not a failure).

        ``stop=False`` for a MUST whose failure must not hide the checks after it (independent
        judgements of the same traffic): the FAIL is recorded and the test fails once the
        connection closes (``pending_failure``)."""
        status = judged(registry().get(clause), ok)
        if status is Status.PASS:
            self.record(clause, Status.PASS, expected)
            return True
        if status is Status.FAIL and stop:
            raise ConformanceFailure(clause, expected, actual)
        message = f"expected {expected}; observed {actual}"
        self.record(clause, status, message, self.evidence())
        if status is Status.FAIL and self.pending_failure is None:
            self.pending_failure = ConformanceFailure(clause, expected, actual)
        if status is Status.WARN:
            warnings.warn(AcpSpecWarning(f"[{clause}] {message}"), stacklevel=2)
        return False

    def evidence(self, conn: Connection | None = None, last: int = 40) -> str:
        conn = conn or (self.connections[-1] if self.connections else None)
        if conn is None:
            return ""
        text = conn.transcript.excerpt(last=last)
        redact = redactor()
        tail = conn.stderr_tail()
        if tail:
            text += "\n--- agent stderr (last lines) ---\n" + "\n".join(redact(line) for line in tail)
        return text + self._setup_evidence()

    def _setup_evidence(self) -> str:
        """What the peer profile saw (the scripted model endpoint's requests), for failure reports."""
        for prepared in self.setups[-1:]:
            extra = prepared.evidence()
            if extra:
                return "\n--- peer profile (e.g. model endpoint requests) ---\n" + redactor()(extra)
        return ""

    # ------------------------------------------------------------ connecting
    @asynccontextmanager
    async def connect(
        self,
        *,
        capabilities: ClientCapabilities | None = None,
        permission: PermissionPolicy | str = "allow_once",
        initialize: bool = True,
        protocol_version: Any = 1,
        terminals: VirtualTerminals | None = None,
    ) -> AsyncIterator[Connection]:
        """Start the agent; yield a connected (by default initialized) client."""
        self._n += 1
        sandbox_dir = self.workdir / f"session-{self._n}"
        sandbox_dir.mkdir(parents=True, exist_ok=True)
        sandbox = Sandbox(sandbox_dir)
        transcript = Transcript(label=self.config.command)

        def on_stderr(line: str) -> None:
            transcript.add("stderr", line)

        cwd = self.config.cwd or tempfile.gettempdir()
        seen = _LIVENESS.setdefault(self.config.command, _Liveness())
        if initialize and not seen.ok and len(seen.failures) >= DEAD_AFTER:
            raise PeerUnavailable(
                f"not started again: the agent failed its first {len(seen.failures)} handshakes in this "
                f"run and never completed one (last: {seen.failures[-1]})"
            )
        async with AsyncExitStack() as stack:
            env = dict(self.config.env)
            if self.config.setup is not None:
                # A peer profile: per-connection HOME, config files, a scripted model endpoint...
                # One directory per test, shared by its connections: a second process must see
                # the first one's persisted sessions (session/load from a fresh process).
                prepared = await stack.enter_async_context(self.config.setup(self.workdir / "peer"))
                env.update(prepared.env)
                self.setups.append(prepared)
            async with self._connected(
                env,
                cwd,
                on_stderr,
                sandbox,
                transcript,
                capabilities,
                permission,
                initialize,
                protocol_version,
                terminals,
            ) as conn:
                yield conn

    @asynccontextmanager
    async def _connected(
        self,
        env: dict[str, str],
        cwd: str,
        on_stderr: Any,
        sandbox: Sandbox,
        transcript: Transcript,
        capabilities: ClientCapabilities | None,
        permission: PermissionPolicy | str,
        initialize: bool,
        protocol_version: Any,
        terminals: VirtualTerminals | None,
    ) -> AsyncIterator[Connection]:
        # Each teardown stage (stdin EOF, SIGTERM) waits at most this long: an agent that ignores
        # both must not cost more per connection than the deadline the user chose for a wait.
        grace = min(2.0, self.config.timeout)
        spawned: list[ProcessTransport] = []
        try:
            async with spawn(self.config.command, env=env, cwd=cwd, on_stderr=on_stderr, grace=grace) as transport:
                spawned.append(transport)
                peer = Peer(
                    transport,
                    Role.CLIENT,
                    validator=self.validator,
                    transcript=transcript,
                    timeout=self.config.timeout,
                    max_frame_bytes=self.config.max_frame_bytes,
                    stderr_tail=lambda: list(transport.stderr_tail),
                )
                peer.deadlines = deadline_memory(self.config.command)
                peer.where = self.label or "an earlier test"
                client = ClientEndpoint(
                    peer,
                    capabilities=capabilities,
                    sandbox=sandbox,
                    permission=permission,
                    terminals=terminals,
                )
                for prepared in self.setups[-1:]:
                    # A scripted model endpoint the suite controls can hold a turn open (a slow reply).
                    probe = getattr(prepared, "holding", None)
                    if callable(probe):
                        client.hold_probes.append(probe)
                conn = Connection(client, transport, transcript, sandbox)
                self.connections.append(conn)
                async with peer:
                    failed = True
                    try:
                        if initialize:
                            seen = _LIVENESS.setdefault(self.config.command, _Liveness())
                            try:
                                result = await peer.request(
                                    "initialize",
                                    {
                                        "protocolVersion": protocol_version,
                                        "clientCapabilities": client.capabilities.to_wire(),
                                        "clientInfo": client.client_info,
                                    },
                                    timeout=self.config.startup_timeout,
                                )
                            except (PeerTimeout, PeerExited) as exc:
                                seen.failures.append(exc.message)
                                raise
                            seen.ok = True
                            client.init_result = result if isinstance(result, dict) else {}
                            self._remember_peer(client.init_result)
                            if self.config.auth_method:
                                await peer.request("authenticate", {"methodId": self.config.auth_method})
                        yield conn
                        failed = False
                    finally:
                        # Judge the transcript even when the test body failed: the
                        # violations are evidence either way.  Half a line still in the
                        # decoder is shown first (its EOF violation would come too late).
                        peer.note_unterminated()
                        found = judge_transcript(transcript, "agent")
                        extra = self._setup_evidence()
                        for r in found:
                            if extra and r.evidence and r.status is not Status.PASS:
                                r.evidence += extra  # e.g. what the adapter asked the scripted model
                        self.results.extend(found)
                if not failed:
                    if self.pending_failure is not None:
                        # The body ran to its end; a MUST it judged without stopping failed.
                        self.body_completed = True
                        pending, self.pending_failure = self.pending_failure, None
                        raise pending
                    hard = [r for r in found if r.status is Status.FAIL]
                    if hard:
                        first = hard[0]
                        # The body's own checks all passed; only the stream-level
                        # clauses found here failed (see the plugin's bookkeeping).
                        self.body_completed = True
                        raise ConformanceFailure(first.clause, "a conforming stream", first.message)
        except PeerError as exc:
            # The agent may say why it stopped after closing its stdout (a crash report): the
            # message is made after teardown, which drained its stderr, from the final tail.
            if spawned and len(spawned[0].stderr_tail) > 0:
                exc.stderr_tail = list(spawned[0].stderr_tail)[-20:]
            raise

    def _remember_peer(self, init: dict[str, Any]) -> None:
        if self.peer_info is None:
            self.peer_info = {
                "info": init.get("agentInfo"),
                "capabilities": init.get("agentCapabilities"),
                "protocolVersion": init.get("protocolVersion"),
                "authMethods": init.get("authMethods"),
            }


def judge_transcript(transcript: Transcript, peer_role: str) -> list[ClauseResult]:
    """``passive_results``, saying in every result when a flood made the transcript drop frames
    (the report must tell that its evidence is partial, and how partial)."""
    found = passive_results(transcript, peer_role)
    dropped = transcript.dropped_summary
    if dropped and transcript.frames_dropped:
        for r in found:
            r.message = f"{r.message} [{dropped}]" if r.message else f"[{dropped}]"
    return found
