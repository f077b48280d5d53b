"""Warm agent connections, lent to one test at a time (``--acp-isolation=connection``).

Most agent tests need a fresh *session*, not a fresh *process*; starting a Node-based adapter
costs 1.5-2 s before ``initialize`` is answered, more than many tests take.  The pool keeps, per
pytest process, initialized agent connections keyed by what a test asks of ``initialize`` (the
client capabilities and the protocol version), and lends one to each test that has no reason to
need a process of its own.

A verdict must not depend on the mode, so a lent connection looks to its test exactly like a
fresh one (``AgentHarness._leased``): its own transcript and event log, seeded with the
handshake's frames, its own client endpoint, sandbox and handlers.  And a connection goes back to
the pool only when it shows nothing a fresh one would not (``refusal``): the test completed, it
left no request unanswered either way, no finding, no damage sent on purpose, no terminal, no
late frame, no output we had not read.  Anything else retires the process.  A frame an earlier
test's sessions or requests provoke, arriving in a later test, is kept out of that test's
evidence (``_late``): in process mode it would have gone to a process already torn down.

The pool's connections live in the pool's own task group (the session-long anyio runner, see
``plugin.fixtures``): each is one owner task holding the process, the ``Peer`` and the profile.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import anyio.abc
import orjson

from acp_conformance.core import jsonrpc
from acp_conformance.core.events import Event, Notification, Request, Response, Violation
from acp_conformance.endpoints.client import ClientCapabilities, ClientEndpoint
from acp_conformance.harness.agent import AgentConfig, PreparedPeer, client_peer, handshake
from acp_conformance.harness.processes import Held, ProcessHost
from acp_conformance.peer import Peer
from acp_conformance.results import ClauseResult, Status
from acp_conformance.transcript import Entry, Transcript
from acp_conformance.transport.process import ProcessTransport

if TYPE_CHECKING:
    from acp_conformance.schema.validator import SchemaValidator

__all__ = ["MAX_LEASES", "SESSION_SCOPED", "ConnectionPool", "Pooled", "hosted_pool", "pool_key"]

#: A connection is retired after this many tests, however clean: sessions pile up in the agent.
MAX_LEASES = 30

#: Statuses a lent connection may have given without being retired (anything else is a finding).
_CLEAN = (Status.PASS, Status.NOT_APPLICABLE)
#: Extension methods in the suite's own namespace (its ping, its probes): no agent implements them,
#: so they change nothing a fresh process would not show (an agent that misbehaves on them shows it).
OUR_EXTENSIONS = "_acp_conformance/"

#: What a test may send and still give the process back: requests and notifications whose effect
#: ends with the session (session-setup.mdx, prompt-turn.mdx, cancellation.mdx).  Anything else
#: (a second ``initialize``, ``authenticate``, ``logout``, a mode or configuration an adapter may
#: save in its settings, an extension method) retires it: a fresh process would not have seen it.
SESSION_SCOPED = frozenset(
    {
        "session/new",
        "session/load",
        "session/resume",
        "session/fork",
        "session/prompt",
        "session/cancel",
        "session/close",
        "$/cancel_request",
    }
)


def pool_key(capabilities: ClientCapabilities | None, protocol_version: Any) -> bytes:
    """What a test asks of ``initialize``: connections are lent only to tests that ask the same."""
    wire = (capabilities or ClientCapabilities()).to_wire()
    return orjson.dumps([wire, protocol_version], option=orjson.OPT_SORT_KEYS)


class Pooled:
    """One agent process the pool owns, initialized once and lent to one test at a time."""

    def __init__(self, key: bytes) -> None:
        self.key = key
        #: The peer profile's directory of its process (``None`` without a profile).
        self.peer_dir: Path | None = None
        self.retire = anyio.Event()
        self.done = anyio.Event()
        self.transport: ProcessTransport | None = None
        self.peer: Peer | None = None
        self.init_result: dict[str, Any] = {}
        self.prepared: PreparedPeer | None = None
        #: The handshake as a fresh connection's transcript and event log would hold it.
        self.seed_entries: list[Entry] = []
        self.seed_events: list[Event] = []
        self.leases = 0
        #: Session ids and request ids of earlier tests: their late frames are not evidence of later ones.
        self.sessions: set[str] = set()
        self.request_ids: set[tuple[str, Any]] = set()
        #: The sessions the agent gave the current test: never late, even if an earlier test had
        #: the same id (an agent reusing session ids: then ``session_reused`` retires the process).
        self.lease_sessions: set[str] = set()
        self.session_reused = False
        #: Called when the current test gets an earlier test's session in an answer to one of its
        #: own requests: what it goes on to see is not what a fresh process would show it.
        self.on_reuse: Callable[[], None] | None = None
        self.diverted = 0
        #: What ended the owner task after startup (a listener of the test raising, say): raised
        #: in the test, whose body ``on_crash`` cancels, as a fresh connection's task group would.
        self.error: BaseException | None = None
        self.on_crash: Callable[[], None] | None = None

    @property
    def live_peer(self) -> Peer:
        assert self.peer is not None, "a pooled connection is lent only once started"
        return self.peer

    def late_frames(self, events: list[Event]) -> list[Event]:
        """``Peer.inbound_filter``: drop the frames (with their violations) that answer or concern
        an earlier test's requests and sessions."""
        late = {ev.index for ev in events if not isinstance(ev, Violation) and self._is_late(ev)}
        if not late:
            return events
        self.diverted += len(late)
        return [ev for ev in events if ev.index not in late]

    def _is_late(self, ev: Event) -> bool:
        if isinstance(ev, Response):
            # An id an earlier test used that this one has not sent again (a duplicate or late answer).
            key = jsonrpc.id_key(ev.id)
            late = key in self.request_ids and not self.live_peer.sent(key)
            sid = ev.result.get("sessionId") if isinstance(ev.result, dict) else None
            if isinstance(sid, str) and not ev.is_error:
                if sid in self.sessions and sid not in self.lease_sessions:
                    self.session_reused = True
                    if not late and self.on_reuse is not None:
                        self.on_reuse()
                self.lease_sessions.add(sid)
            return late
        if isinstance(ev, (Request, Notification)) and isinstance(ev.params, dict):
            sid = ev.params.get("sessionId")
            return isinstance(sid, str) and sid in self.sessions and sid not in self.lease_sessions
        return False

    def remember(self, transcript: Transcript) -> None:
        """After a test: its sessions and request ids become "earlier" for the tests after it."""
        self.lease_sessions.clear()
        for entry in transcript.entries:
            msg = entry.message
            if not (entry.is_frame and isinstance(msg, dict)):
                continue
            if entry.direction == "out" and "method" in msg and "id" in msg and jsonrpc.is_valid_id(msg["id"]):
                self.request_ids.add(jsonrpc.id_key(msg["id"]))
            for part in (msg.get("params"), msg.get("result")):
                sid = part.get("sessionId") if isinstance(part, dict) else None
                if isinstance(sid, str):
                    self.sessions.add(sid)

    def unread_output(self) -> bool:
        """Whether the agent wrote anything since we last looked (or we cannot tell)."""
        peer = self.live_peer
        if peer.closed.is_set() or peer.transcript.frames_total or peer.conn.unterminated()[0]:
            return True
        return self.transport is None or self.transport.has_unread()


def refusal(pooled: Pooled, client: ClientEndpoint, results: list[ClauseResult]) -> str:
    """Why the connection a test used must not be lent again ("" when it may): anything in which
    it may differ from a freshly started and initialized one."""
    peer = pooled.live_peer
    transport = pooled.transport
    after_handshake = peer.transcript.entries[len(pooled.seed_entries) :]
    sent = {str(e.method) for e in after_handshake if e.direction == "out" and e.method is not None}
    beyond = sorted(m for m in sent - SESSION_SCOPED if not m.startswith(OUR_EXTENSIONS))
    reasons = [
        (peer.closed.is_set() or transport is None or transport.returncode is not None, "the agent exited"),
        (transport is not None and transport.output_closed, "we closed the agent's stdin"),
        (bool(peer.tainted), peer.tainted),
        (bool(beyond), f"the test sent {', '.join(beyond)} (its effect may outlive the session)"),
        (_chose_always(after_handshake), "an *_always permission option was chosen (it may be remembered)"),
        (pooled.session_reused, "the agent gave an earlier test's session id again"),
        (pooled.diverted > 0, "late frames of an earlier test arrived"),
        (any(r.status not in _CLEAN for r in results), "the test found something"),
        (any(isinstance(e, Violation) for e in peer.events), "a violation was recorded"),
        (bool(peer.conn.pending_outgoing), "a request of ours is unanswered"),
        (bool(peer.conn.pending_incoming), "a request of the agent is unanswered"),
        (peer.conn.unterminated()[0] > 0, "the agent left half a line"),
        (peer.outbox.queued_bytes > 0 or peer.outbox.lock.locked(), "answers of ours are still being written"),
        (bool(client.held), "a request was held"),
        (any(probe() is not None for probe in client.hold_probes), "the scripted model is still streaming"),
        (any(not t.released for t in client.terminals.terminals.values()), "a terminal is left"),
        (pooled.leases >= MAX_LEASES, f"lent {MAX_LEASES} times"),
    ]
    return next((why for bad, why in reasons if bad), "")


def _chose_always(entries: list[Entry]) -> bool:
    """Whether we answered a permission request with an ``allow_always`` / ``reject_always``
    option: an agent may remember it beyond the session (in its settings)."""
    always: set[str] = set()
    for e in entries:
        msg = e.message
        if e.direction == "in" and e.method == "session/request_permission" and isinstance(msg, dict):
            params = msg.get("params")
            options = params.get("options") if isinstance(params, dict) else None
            for o in options if isinstance(options, list) else []:
                if isinstance(o, dict) and str(o.get("kind", "")).endswith("_always"):
                    always.add(str(o.get("optionId")))
        elif e.direction == "out" and isinstance(msg, dict) and isinstance(msg.get("result"), dict):
            outcome = msg["result"].get("outcome")
            if isinstance(outcome, dict) and str(outcome.get("optionId")) in always:
                return True
    return False


class ConnectionPool:
    """The warm connections of one pytest process, for one agent command."""

    def __init__(
        self, tg: anyio.abc.TaskGroup, config: AgentConfig, validator: SchemaValidator, root: Path, cwd: str
    ) -> None:
        self.tg = tg
        self.config = config
        self.validator = validator
        self.root = root
        self.cwd = cwd
        self.idle: list[Pooled] = []
        self.owned: list[Pooled] = []
        self.started = 0
        self.lent = 0
        self.retired: dict[str, int] = {}
        #: Tests run again on processes of their own (``NotComparable``).
        self.rerun = 0
        #: The agent processes behind the connections, and behind tests that need one of their own.
        self.processes = ProcessHost(tg, config, root, cwd)
        #: The connection whose startup failed last: the leasing test judges its handshake.
        self.last_failed: Pooled | None = None

    async def lease(
        self, transcript: Transcript, capabilities: ClientCapabilities | None, protocol_version: Any
    ) -> Pooled:
        """An idle connection made for the same ``initialize`` that saw nothing since its last test,
        its handshake copied into ``transcript``; else a new one whose startup ``transcript``
        records (its startup errors are the caller's, as a fresh connection's would be)."""
        key = pool_key(capabilities, protocol_version)
        for pooled in list(self.idle):
            if pooled.key != key:
                continue
            self.idle.remove(pooled)
            if pooled.unread_output():
                self._retire(pooled, "the agent wrote between two tests")
                continue
            for e in pooled.seed_entries:
                copy = transcript.add(e.direction, e.raw, e.message)
                for v in e.violations:
                    transcript.violation(v, copy)
            begin = getattr(pooled.prepared, "begin_lease", None)
            if callable(begin):
                begin()  # a scripted model endpoint starts over, as for a new process
            pooled.leases += 1
            self.lent += 1
            return pooled
        self.owned = [p for p in self.owned if not p.done.is_set()]  # their transcripts can go
        self.started += 1
        pooled = Pooled(key)
        self.owned.append(pooled)
        try:
            await self.tg.start(self._own, pooled, transcript, capabilities, protocol_version)
        except BaseException:
            self.last_failed = pooled  # the leasing test judges its handshake and shows its stderr
            raise
        pooled.leases = 1
        self.lent += 1
        return pooled

    def give_back(self, pooled: Pooled, client: ClientEndpoint, results: list[ClauseResult], why_not: str) -> None:
        """After the test (its ``results``): keep the connection for the next one, or retire it
        (``why_not``, the harness's own reason, else ``refusal``'s)."""
        pooled.remember(pooled.live_peer.transcript)
        why_not = why_not or refusal(pooled, client, results)
        if why_not:
            self._retire(pooled, why_not)
            return
        peer = pooled.live_peer
        peer.rebind(Transcript(label="idle"), [])  # anything written now shows in ``unread_output``
        peer.inbound_filter = None
        if pooled.transport is not None:
            pooled.transport.on_stderr = None
        self.idle.append(pooled)

    def _retire(self, pooled: Pooled, why: str) -> None:
        self.retired[why] = self.retired.get(why, 0) + 1
        pooled.retire.set()

    async def retire_idle(self) -> None:
        """Retire every idle connection and wait until its process is gone: the next test judges
        what a process tree leaves behind, which only one live agent process can prove."""
        idle, self.idle = self.idle, []
        for pooled in idle:
            self._retire(pooled, "a test that needs the only agent process came")
        with anyio.fail_after(self.config.teardown_limit):
            for pooled in idle:
                await pooled.done.wait()
        await self.processes.drain()

    async def aclose(self) -> None:
        """Tear every process down (at the end of the run, or when it is interrupted)."""
        for pooled in self.owned:
            pooled.retire.set()
        with anyio.CancelScope(shield=True):
            for pooled in self.owned:
                await pooled.done.wait()
        await self.processes.aclose()

    def summary(self) -> str:
        why = ", ".join(f"{n}x {reason}" for reason, n in sorted(self.retired.items()))
        tests = "test" if self.rerun == 1 else "tests"
        again = f"; {self.rerun} {tests} run again on a process of their own" if self.rerun else ""
        host = self.processes
        started = f"{host.started} processes started ({host.ahead} of them ahead of need)"
        lent = f"{self.lent} agent connection{'' if self.lent == 1 else 's'} lent"
        return f"acp-conformance: {lent}, {started}" + (f"; retired: {why}" if why else "") + again

    async def _own(
        self,
        pooled: Pooled,
        transcript: Transcript,
        capabilities: ClientCapabilities | None,
        protocol_version: Any,
        *,
        task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
    ) -> None:
        """The owner task: take a process (``ProcessHost``), initialize, then hold the connection
        open until retired, and hand the process back (gone when ``done`` is set).  Errors
        before ``started`` are the leasing test's; after it, an error (a listener of the test
        raising in our reader) is the test's too (``Pooled.error``): nothing here may take the
        pool's task group down."""
        started = False
        held: Held | None = None
        try:
            async with AsyncExitStack() as stack:
                config = self.config
                held = await self.processes.acquire()
                stack.push_async_callback(self._hand_back, held)
                pooled.prepared = held.prepared
                pooled.peer_dir = held.peer_dir
                transport = pooled.transport = held.live_transport

                def on_stderr(line: str) -> None:
                    transcript.add("stderr", line)

                held.claim(on_stderr)
                peer = client_peer(transport, config, self.validator, transcript, "a pooled connection's handshake")
                pooled.peer = await stack.enter_async_context(peer)
                client = ClientEndpoint(peer, capabilities=capabilities)
                await handshake(peer, client, config, protocol_version)
                pooled.init_result = client.init_result or {}
                pooled.seed_entries = [
                    Entry(e.t, e.direction, e.raw, e.message, list(e.violations)) for e in transcript.entries
                ]
                pooled.seed_events = list(peer.events)
                peer.inbound_filter = pooled.late_frames
                started = True
                task_status.started()
                await pooled.retire.wait()
        except BaseException as exc:
            if not started or isinstance(exc, (anyio.get_cancelled_exc_class(), KeyboardInterrupt, SystemExit)):
                raise
            pooled.error = exc
            if pooled.on_crash is not None:
                pooled.on_crash()  # the test holding it stops, and raises ``exc`` (``AgentHarness._leased``)
            else:
                with contextlib.suppress(Exception):
                    print(f"acp-conformance: an idle pooled agent connection ended with {exc!r}", file=sys.stderr)
        finally:
            pooled.done.set()

    async def _hand_back(self, held: Held) -> None:
        """The connection's process goes, and is gone before the connection counts as done
        (``retire_idle`` proves the only live agent process by it)."""
        held.release.set()
        with anyio.CancelScope(shield=True):
            await held.done.wait()


@asynccontextmanager
async def hosted_pool(
    config: AgentConfig, validator: SchemaValidator, root: Path, cwd: str
) -> AsyncIterator[ConnectionPool]:
    """A pool whose task group lives in a task of its own.

    Not in the caller's: under anyio's pytest plugin the caller is the runner task that also runs
    every test, so an error in a connection's task would cancel whichever test is running, and an
    interrupt, after which anyio resumes fixtures in a new runner task, would leave the group's
    cancel scope to be exited from the wrong task."""
    loop = asyncio.get_running_loop()
    ready: asyncio.Future[ConnectionPool] = loop.create_future()
    stop = anyio.Event()

    async def host() -> None:
        async with anyio.create_task_group() as tg:
            pool = ConnectionPool(tg, config, validator, root, cwd)
            ready.set_result(pool)
            try:
                await stop.wait()
            finally:
                await pool.aclose()

    task = loop.create_task(host())
    waits: set[asyncio.Future[Any]] = {ready, task}
    await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
    if not ready.done():
        task.result()  # the host failed before the pool existed: its error
    try:
        yield ready.result()
    finally:
        stop.set()
        with anyio.CancelScope(shield=True):
            await task
