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
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import anyio

from acp_conformance.core.connection import Role
from acp_conformance.core.events import Response
from acp_conformance.core.framing import DEFAULT_MAX_FRAME_BYTES
from acp_conformance.endpoints.client import (
    ClientCapabilities,
    ClientEndpoint,
    PermissionPolicy,
    Sandbox,
    VirtualTerminals,
)
from acp_conformance.errors import (
    ConformanceFailure,
    NotComparable,
    PeerError,
    PeerExited,
    PeerTimeout,
    PeerUnavailable,
)
from acp_conformance.harness.base import (
    DEAD_AFTER,
    AcpSpecWarning,
    HarnessBase,
    deadline_memory,
    exit_memory,
    judge_transcript,
    liveness,
)
from acp_conformance.peer import Peer
from acp_conformance.prompts import (
    DEFAULT_ELICIT_PROMPT,
    DEFAULT_ELICIT_URL_PROMPT,
    DEFAULT_LONG_PROMPT,
    DEFAULT_PLAN_PROMPT,
    DEFAULT_PROMPT,
    DEFAULT_TOOL_PROMPT,
)
from acp_conformance.results import ClauseResult, Status
from acp_conformance.schema.validator import SchemaValidator
from acp_conformance.transcript import Transcript, redactor
from acp_conformance.transport.process import ProcessTransport, spawn

if TYPE_CHECKING:
    from acp_conformance.harness.pool import ConnectionPool, Pooled
    from acp_conformance.harness.processes import Held, ProcessHost, ThreadHost

__all__ = [
    "AcpSpecWarning",
    "AgentConfig",
    "AgentHarness",
    "Connection",
    "PreparedPeer",
    "client_peer",
    "handshake",
    "judge_transcript",
    "spawn_agent",
]
# AcpSpecWarning and judge_transcript live in harness.base; re-exported here for the suites.


@dataclass
class AgentConfig:
    """How to start and talk to the agent under test (from the CLI options)."""

    command: str
    env: dict[str, str] = field(default_factory=dict)
    cwd: str | None = None
    timeout: float = 10.0
    startup_timeout: float = 20.0
    max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES
    prompt: str = DEFAULT_PROMPT
    tool_prompt: str = DEFAULT_TOOL_PROMPT
    long_prompt: str = DEFAULT_LONG_PROMPT
    elicit_prompt: str = DEFAULT_ELICIT_PROMPT
    elicit_url_prompt: str = DEFAULT_ELICIT_URL_PROMPT
    plan_prompt: str = DEFAULT_PLAN_PROMPT
    #: The agent plans exactly the steps ``plan_prompt`` dictates (``--acp-dictated-plans``).
    dictated_plans: bool = False
    auth_method: str | None = None
    #: Optional per-connection preparation (peer profiles): called with a fresh
    #: directory, entered around the agent process; its ``env`` is added to the
    #: agent's environment and its ``evidence()`` joins failure reports.
    setup: Callable[[Path], AbstractAsyncContextManager[PreparedPeer]] | None = None

    @property
    def teardown_limit(self) -> float:
        """How long waiting for a process's teardown may take (its stages are bounded in turn)."""
        return 4 * max(self.timeout, 2.0)


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


@asynccontextmanager
async def spawn_agent(
    config: AgentConfig, env: dict[str, str], cwd: str, on_stderr: Callable[[str], None]
) -> AsyncIterator[ProcessTransport]:
    """Start the agent under test, for a fresh connection and a pooled one alike: each teardown
    stage (stdin EOF, SIGTERM) waits at most ``min(2, timeout)``, since an agent that ignores both
    must not cost more per connection than the deadline the user chose for a wait; the first
    stage shorter once the agent is known to outlive EOF (``ExitMemory``)."""
    grace = min(2.0, config.timeout)
    exits = exit_memory(config.command)
    spawned: list[ProcessTransport] = []
    try:
        async with spawn(
            config.command, env=env, cwd=cwd, on_stderr=on_stderr, grace=grace, eof_grace=exits.eof_grace(grace)
        ) as transport:
            spawned.append(transport)
            yield transport
    finally:
        if spawned:
            exits.note(spawned[0].outlived_eof)


def client_peer(
    transport: ProcessTransport, config: AgentConfig, validator: SchemaValidator, transcript: Transcript, where: str
) -> Peer:
    """Our client side of the agent's connection (entered by the caller), with the run's memory of
    missed deadlines; ``where`` names the connection in messages about them."""
    peer = Peer(
        transport,
        Role.CLIENT,
        validator=validator,
        transcript=transcript,
        timeout=config.timeout,
        max_frame_bytes=config.max_frame_bytes,
        stderr_tail=lambda: list(transport.stderr_tail),
    )
    peer.deadlines = deadline_memory(config.command)
    peer.where = where
    return peer


async def handshake(peer: Peer, client: ClientEndpoint, config: AgentConfig, protocol_version: Any) -> None:
    """``initialize`` (and ``authenticate`` when configured), remembering per run how handshakes
    with this command went (``liveness``): the one handshake of a fresh and of a pooled connection."""
    seen = liveness("agent", config.command)
    try:
        result = await peer.request(
            "initialize",
            {
                "protocolVersion": protocol_version,
                "clientCapabilities": client.capabilities.to_wire(),
                "clientInfo": client.client_info,
            },
            timeout=config.startup_timeout,
        )
    except (PeerTimeout, PeerExited) as exc:
        seen.failures.append(exc)
        raise
    seen.ok = True
    client.init_result = result if isinstance(result, dict) else {}
    if config.auth_method:
        await peer.request("authenticate", {"methodId": config.auth_method})


class AgentHarness(HarnessBase):
    """One test's view of the agent under test."""

    peer_word = "agent"

    def __init__(
        self,
        config: AgentConfig,
        validator: SchemaValidator,
        workdir: str | os.PathLike[str],
        label: str = "",
        pool: ConnectionPool | None = None,
        drain: ConnectionPool | None = None,
        processes: ProcessHost | None = None,
        thread_host: ThreadHost | None = None,
    ) -> None:
        super().__init__(label)
        self.config = config
        self.validator = validator
        self.workdir = Path(workdir)
        self.connections: list[Connection] = []
        self.setups: list[PreparedPeer] = []
        self._n = 0
        #: Warm connections to borrow from (``--acp-isolation=connection``); ``None`` starts a
        #: process per connection.  A test borrows for its first connection only, and gives it
        #: back in ``release`` when the test is over (``harness.pool`` decides whether it is kept).
        self.pool = pool
        #: A pool whose idle processes must be gone before this test starts one (``acp_sole_process``).
        self._drain = drain
        #: Where a connection that borrows nothing gets its process (``harness.processes``), under
        #: ``--acp-isolation=connection``: started ahead of the test, torn down behind it.
        self.processes = processes if processes is not None else (pool.processes if pool is not None else None)
        #: The loop in a thread the run's synchronous tests share (``ThreadHost``): a synchronous test
        #: connects through its ``portal`` (``processes`` is then its host); an ``acp_sole_process``
        #: test empties it too.
        self.thread_host = thread_host
        self._held: list[Held] = []
        self._lease: tuple[Pooled, ClientEndpoint] | None = None
        self._lease_open = False
        self._why_not = ""
        self._peer_dir = self.workdir / "peer"

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
        __tracebackhide__ = True  # a finding's traceback shows the test, not the harness
        self._n += 1
        sandbox_dir = self.workdir / f"session-{self._n}"
        sandbox_dir.mkdir(parents=True, exist_ok=True)
        sandbox = Sandbox(sandbox_dir)
        transcript = Transcript(label=self.config.command)

        def on_stderr(line: str) -> None:
            transcript.add("stderr", line)

        cwd = self.config.cwd or tempfile.gettempdir()
        seen = liveness("agent", self.config.command)
        if initialize and not seen.ok and len(seen.failures) >= DEAD_AFTER:
            raise PeerUnavailable(
                f"not started again: the agent failed its first {len(seen.failures)} handshakes in this "
                f"run and never completed one (last: {seen.last_failure('agent')})"
            )
        if self.pool is not None and initialize and not self.connections:
            async with self._leased(sandbox, transcript, capabilities, permission, protocol_version, terminals) as conn:
                yield conn
            return
        if self._lease is not None:
            self._why_not = self._why_not or "the test started another agent process beside it"
            if not self._lease_open:
                # In process mode the first process has exited (stdin EOF) before the next starts:
                # an agent that saves its sessions on exit must have done so (session/load by a
                # fresh process).  The borrowed one is retired now, and awaited.
                await self._give_back()
        if self._drain is not None:
            drain, self._drain = self._drain, None
            await drain.retire_idle()
            if self.thread_host is not None:
                await self.thread_host.drain()
        async with self._connected(
            cwd, on_stderr, sandbox, transcript, capabilities, permission, initialize, protocol_version, terminals
        ) as conn:
            yield conn

    @asynccontextmanager
    async def _leased(
        self,
        sandbox: Sandbox,
        transcript: Transcript,
        capabilities: ClientCapabilities | None,
        permission: PermissionPolicy | str,
        protocol_version: Any,
        terminals: VirtualTerminals | None,
    ) -> AsyncIterator[Connection]:
        """A warm connection from the pool, made to look like a fresh one: its handshake heads
        ``transcript``, and the peer's log, handlers and damage start over (``Peer.rebind``)."""
        __tracebackhide__ = True
        assert self.pool is not None
        try:
            pooled = await self.pool.lease(transcript, capabilities, protocol_version)
        except BaseException as exc:
            # The handshake, judged as a fresh connection's would be, whatever ended it.
            broken = self.pool.last_failed
            if broken is not None and broken.peer is not None:
                if broken.prepared is not None:
                    self.setups.append(broken.prepared)
                self._judge(broken.peer, transcript)
            else:
                self.results.extend(judge_transcript(transcript, "agent"))
            if isinstance(exc, PeerError):
                self._stderr_into(exc, broken.transport if broken is not None else None)
            raise
        peer = pooled.live_peer
        # A new process keeps what came after its handshake too (the lease began as it started).
        peer.rebind(transcript, pooled.seed_events if pooled.leases > 1 else list(peer.events))
        peer.inbound_filter = pooled.late_frames
        peer.deadlines = deadline_memory(self.config.command)
        peer.where = self.label or "an earlier test"
        transport = pooled.transport
        assert transport is not None

        def on_stderr(line: str) -> None:
            transcript.add("stderr", line)

        transport.on_stderr = on_stderr
        client = ClientEndpoint(
            peer, capabilities=capabilities, sandbox=sandbox, permission=permission, terminals=terminals
        )
        client.init_result = dict(pooled.init_result)
        self._remember_peer(client.init_result)
        if pooled.prepared is not None:
            self.setups.append(pooled.prepared)
            self._peer_dir = pooled.peer_dir or self._peer_dir
            probe = getattr(pooled.prepared, "holding", None)
            if callable(probe):
                client.hold_probes.append(probe)
        conn = Connection(client, transport, transcript, sandbox)
        self.connections.append(conn)
        self._lease = (pooled, client)
        self._lease_open = True
        failed = True
        reused: list[bool] = []

        def on_reuse() -> None:
            reused.append(True)
            body.cancel()

        try:
            # The owner task's error (a listener of ours raising in its reader) stops the body,
            # as a fresh connection's task group would, and is raised as itself.  So does an
            # earlier test's session handed to this one: the test runs again (``NotComparable``).
            with anyio.CancelScope() as body:
                pooled.on_crash = body.cancel
                pooled.on_reuse = on_reuse
                try:
                    yield conn
                    failed = False
                finally:
                    pooled.on_crash = pooled.on_reuse = None
                    self._lease_open = False
                    found = self._judge(peer, transcript)
                    if failed:
                        self._why_not = "the test did not complete"
            if reused:
                self._why_not = "the agent gave an earlier test's session id again"
                self.pool.rerun += 1
                await self._give_back()
                raise NotComparable(
                    "on a borrowed connection the agent answered with an earlier test's session id: "
                    "what the test saw next is not what a fresh process would have shown it"
                )
            if pooled.error is not None:
                self._why_not = "the connection's task failed"
                raise pooled.error
            self._raise_findings(found)
        except PeerError as exc:
            # The test is over, as a fresh connection's would be: tear the process down now, so
            # that what it wrote on stderr on its way out (a crash report) is in the message.
            self._why_not = self._why_not or "the test did not complete"
            if self._lease is not None:
                await self._give_back()
            self._stderr_into(exc, transport)
            raise

    def start_over(self) -> None:
        """After ``NotComparable``: forget the attempt on the borrowed connection (already retired),
        its results and its evidence, so that the test runs again exactly as in process mode.
        Sandboxes go on counting: the first attempt's files stay where they were."""
        assert self._lease is None, "the borrowed connection is given back before the test starts over"
        self.pool = None
        self.processes = None
        self.results = []
        self.connections = []
        self.setups = []
        self.peer_info = None
        self.body_completed = False
        self.pending_failure = None
        self._why_not = ""
        self._peer_dir = self.workdir / "peer"

    def release(self) -> None:
        """The test is over: the borrowed connection goes back to the pool, or is retired."""
        if self.pool is None or self._lease is None:
            return
        pooled, client = self._lease
        self._lease = None
        self.pool.give_back(pooled, client, self.results, self._why_not)

    async def _give_back(self) -> None:
        """Retire the borrowed connection now (before the test's next one, or as its test ends
        on a peer error), and wait until it is gone."""
        assert self._lease is not None
        pooled = self._lease[0]
        self.release()
        with anyio.fail_after(self.config.teardown_limit):
            await pooled.done.wait()

    @asynccontextmanager
    async def _process(self, cwd: str, on_stderr: Callable[[str], None]) -> AsyncIterator[ProcessTransport]:
        """A started agent process for one connection, torn down after it.

        Under ``--acp-isolation=connection`` the pool's ``ProcessHost`` has it started already
        (``harness.processes``), and tears it down behind the test when the body completed; the
        test's next connection waits for that, as it would for an inline teardown.  Otherwise it
        is started here, after the peer profile's setup in the test's directory, which every
        connection of the test shares (a second process must see the first one's saved sessions)."""
        host = self.processes if self.processes is not None and self.processes.serves() else None
        if host is None:
            async with AsyncExitStack() as stack:
                env = dict(self.config.env)
                if self.config.setup is not None:
                    # A peer profile: per-connection HOME, config files, a scripted model endpoint...
                    prepared = await stack.enter_async_context(self.config.setup(self._peer_dir))
                    env.update(prepared.env)
                    self.setups.append(prepared)
                yield await stack.enter_async_context(spawn_agent(self.config, env, cwd, on_stderr))
            return
        await host.settle(self._held)
        # The first connection takes any process (a spare has a profile directory of its own);
        # a later one is started in the directory the first one used.
        later = bool(self.connections) and self.config.setup is not None
        held = await host.acquire(self._peer_dir if later else None)
        self._held.append(held)
        if held.prepared is not None:
            self.setups.append(held.prepared)
        if held.peer_dir is not None:
            self._peer_dir = held.peer_dir
        held.claim(on_stderr)
        completed = False
        try:
            yield held.live_transport
            completed = True
        finally:
            held.release.set()
            if not completed:
                # What the agent says on stderr on its way out belongs in the failure's message.
                with anyio.CancelScope(shield=True):
                    await host.settle([held])

    @asynccontextmanager
    async def _connected(
        self,
        cwd: str,
        on_stderr: Callable[[str], None],
        sandbox: Sandbox,
        transcript: Transcript,
        capabilities: ClientCapabilities | None,
        permission: PermissionPolicy | str,
        initialize: bool,
        protocol_version: Any,
        terminals: VirtualTerminals | None,
    ) -> AsyncIterator[Connection]:
        __tracebackhide__ = True  # a finding's traceback shows the test, not the harness
        spawned: list[ProcessTransport] = []
        try:
            async with self._process(cwd, on_stderr) as transport:
                spawned.append(transport)
                peer = client_peer(transport, self.config, self.validator, transcript, self.label or "an earlier test")
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
                            await handshake(peer, client, self.config, protocol_version)
                            self._remember_peer(client.init_result or {})
                        yield conn
                        failed = False
                    finally:
                        found = self._judge(peer, transcript)
                if not failed:
                    self._raise_findings(found)
        except PeerError as exc:
            self._stderr_into(exc, spawned[0] if spawned else None)
            raise

    def _judge(self, peer: Peer, transcript: Transcript) -> list[ClauseResult]:
        """Judge the transcript even when the test body failed: the violations are evidence either
        way.  Half a line still in the decoder is shown first (its EOF violation would come too late)."""
        peer.note_unterminated()
        if self.peer_info is None:
            self._remember_peer_from(peer)
        found = judge_transcript(transcript, "agent")
        extra = self._setup_evidence()
        for r in found:
            if extra and r.evidence and r.status is not Status.PASS:
                r.evidence += extra  # e.g. what the adapter asked the scripted model
        self.results.extend(found)
        return found

    def _raise_findings(self, found: list[ClauseResult]) -> None:
        """After a body that ran to its end: a MUST it judged without stopping, else the first
        stream-level FAIL, fails the test (see the plugin's bookkeeping)."""
        __tracebackhide__ = True
        if self.pending_failure is not None:
            self.body_completed = True
            pending, self.pending_failure = self.pending_failure, None
            raise pending
        hard = [r for r in found if r.status is Status.FAIL]
        if hard:
            self.body_completed = True
            raise ConformanceFailure(hard[0].clause, "a conforming stream", hard[0].message)

    @staticmethod
    def _stderr_into(exc: PeerError, transport: ProcessTransport | None) -> None:
        """The agent may say why it stopped after closing its stdout (a crash report): the
        message is made after teardown, which drained its stderr, from the final tail, and knows
        how the process ended, when it ended by itself (before teardown had to signal it)."""
        if transport is None:
            return
        if len(transport.stderr_tail) > 0:
            exc.stderr_tail = list(transport.stderr_tail)[-20:]
        if isinstance(exc, PeerExited) and exc.returncode is None and not transport.outlived_eof:
            exc.returncode = transport.returncode

    def _remember_peer_from(self, peer: Peer) -> None:
        """Tests that send their own ``initialize`` (the initialization tests, often all a partial run
        selects) still tell the report who the agent is: from the answers they got."""
        answers = [
            e.result
            for e in peer.events
            if isinstance(e, Response) and e.method == "initialize" and not e.is_error and isinstance(e.result, dict)
        ]
        # A v1 answer first; else any answer naming the agent (one to version 999 may echo 999).
        best = next((a for a in answers if a.get("protocolVersion") == 1), None)
        best = best or next((a for a in answers if isinstance(a.get("agentInfo"), dict)), None)
        if best is not None:
            self._remember_peer(best)

    def _remember_peer(self, init: dict[str, Any]) -> None:
        if self.peer_info is None:
            self.peer_info = {
                "info": init.get("agentInfo"),
                "capabilities": init.get("agentCapabilities"),
                "protocolVersion": init.get("protocolVersion"),
                "authMethods": init.get("authMethods"),
            }
