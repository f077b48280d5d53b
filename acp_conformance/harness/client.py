"""Running one client under test: its process, the agent it launches, evidence.

The ``ClientHarness`` is what a client-certification test holds.  Each
``connect()`` opens a control socket, starts the client command with
``{agent}`` replaced by the relay agent's command line (see ``control``),
waits (with a deadline) for the relay the client launched to connect
back, and yields a ``ClientConnection`` whose ``agent`` is an
``AgentEndpoint``: the test plays the agent in-process and sees every
frame on the wire.  On the way out it ends open turns, closes the
client's stdin, kills the client's whole process tree (the relay
included) and judges the transcript on the passive clauses for the
client role.

Three modes (``ClientConfig.mode``):

``auto``
    a headless client is started per test and driven by its profile
    (``profiles``): prompt, cancel and permission policy.
``agent-initiated``
    nothing is started: a person launches the relay from an editor (a
    fixed control address) and sends one prompt per test; the agent side
    drives everything else.  Actions that need the person (cancel, a
    particular permission answer) are not available.
``manual``
    like agent-initiated, and the harness tells the person what to do
    (press stop, choose "Reject") and asks what they saw; results that
    depend on a person are marked "manually verified".

No pytest here; the plugin wraps this.
"""

from __future__ import annotations

import os
import shlex
import signal
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import anyio

from acp_conformance.core.connection import Role
from acp_conformance.core.framing import DEFAULT_MAX_FRAME_BYTES
from acp_conformance.endpoints.agent import AgentEndpoint, AgentSetup
from acp_conformance.errors import ConformanceFailure, PeerError, PeerExited, PeerTimeout, PeerUnavailable
from acp_conformance.harness.base import DEAD_AFTER, HarnessBase, deadline_memory, judge_transcript, liveness
from acp_conformance.harness.control import ControlServer, RelayConnection, open_control_server
from acp_conformance.peer import Peer
from acp_conformance.profiles import ClientProfile, default_profile
from acp_conformance.profiles.clients import USER_ACTIONS
from acp_conformance.results import ClauseResult, Status
from acp_conformance.schema.validator import SchemaValidator
from acp_conformance.transcript import Transcript, redactor
from acp_conformance.transport.process import ProcessTransport, spawn

__all__ = [
    "MANUAL_NOTE",
    "ClientConfig",
    "ClientConnection",
    "ClientHarness",
    "Human",
    "Unsupported",
]

#: How much of the client's own stdout is kept for evidence.
STDOUT_TAIL_BYTES = 8192
MANUAL_NOTE = " (manually verified)"

# Per-process memory of how handshakes with each client command went (as for agents:
# after ``DEAD_AFTER`` clients in a row never launched the agent or never sent
# ``initialize``, and none ever did, later tests do not start the client again):
# ``harness.base.liveness("client", command)``.


class Unsupported(Exception):
    """The driver cannot perform an action a test needs (the reason is the message)."""


class Human(Protocol):
    """How the harness talks to the person in agent-initiated and manual modes."""

    def say(self, text: str) -> None: ...

    async def ask(self, question: str, choices: tuple[str, ...]) -> str: ...


@dataclass
class ClientConfig:
    """How to start, drive and judge the client under test (from the CLI options)."""

    command: str
    profile: ClientProfile = field(default_factory=default_profile)
    env: dict[str, str] = field(default_factory=dict)
    cwd: str | None = None
    timeout: float = 10.0
    startup_timeout: float = 20.0
    max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES
    mode: str = "auto"
    #: Fixed control address (``unix:/path`` or ``tcp:127.0.0.1:PORT``); None = a fresh one per test.
    control: str | None = None
    #: Token the relay must present; None = a fresh random one, "" = none (fixed editor configs).
    token: str | None = None
    #: Deadline for a person to act (agent-initiated and manual modes).
    human_timeout: float = 300.0
    #: The Python that runs the relay agent.
    python: str | None = None
    #: Seconds the client gets to exit by itself after its stdin closes.
    exit_grace: float = 1.0


@dataclass
class ClientConnection:
    """One run of the client under test, seen from the agent it launched."""

    harness: ClientHarness
    agent: AgentEndpoint
    relay: RelayConnection
    transcript: Transcript
    sandbox: Path
    process: ProcessTransport | None
    permission: str | None
    argv: list[str]
    #: Behave like a well-mannered agent: exit as soon as the client closes our stdin.
    exit_on_eof: bool = True
    #: Files the test created or had the client create, removed at the end (the session directory
    #: may be the user's own, with --acp-client-cwd or in the editor modes).
    cleanup: list[Path] = field(default_factory=list)

    @property
    def peer(self) -> Peer:
        return self.agent.peer

    def stderr_tail(self, n: int = 20) -> list[str]:
        if self.process is None:
            return []
        return list(self.process.stderr_tail)[-n:]

    async def cancel(self) -> None:
        """Make the client cancel its running turn (the profile's cancel action)."""
        await self.harness.driver_cancel(self)

    async def prompt(self, text: str) -> None:
        """Make the client send another prompt (profiles with prompt via stdin)."""
        await self.harness.driver_prompt(self, text)

    async def wait_client_exit(self, timeout: float) -> bool:
        if self.process is None:
            return False
        return await self.process.wait_exit(timeout)


class ClientHarness(HarnessBase):
    """One test's view of the client under test."""

    peer_word = "client"

    def __init__(
        self,
        config: ClientConfig,
        validator: SchemaValidator,
        workdir: str | os.PathLike[str],
        human: Human | None = None,
        label: str = "",
    ) -> None:
        super().__init__(label)
        self.config = config
        self.validator = validator
        self.workdir = Path(workdir)
        self.human = human
        self.connections: list[ClientConnection] = []
        self.manual = False  # set when a result depended on a person
        self._n = 0
        self._stderr: list[str] = []
        self._stdout_tail = b""

    @property
    def mode(self) -> str:
        return self.config.mode

    @property
    def profile(self) -> ClientProfile:
        return self.config.profile

    # -------------------------------------------------------------- results
    def annotate(self, message: str) -> str:
        """Results that depended on a person say so ("manually verified")."""
        return message + MANUAL_NOTE if self.manual and MANUAL_NOTE not in message else message

    def evidence(self, conn: ClientConnection | None = None, last: int = 40) -> str:
        conn = conn or (self.connections[-1] if self.connections else None)
        text = ""
        if conn is not None:
            text = conn.transcript.excerpt(last=last)
            tail = conn.stderr_tail()
        else:
            tail = self._stderr[-20:]
        redact = redactor()
        if tail:
            text += "\n--- client stderr (last lines) ---\n" + "\n".join(redact(line) for line in tail)
        if self._stdout_tail:
            lines = self._stdout_tail.decode("utf-8", "replace").splitlines()[-10:]
            text += "\n--- client stdout (last lines) ---\n" + "\n".join(redact(line)[:500] for line in lines)
        return text

    # --------------------------------------------------------------- driver
    def unsupported(self, *actions: str) -> str | None:
        """Why the driver cannot do one of ``actions`` (None when it can do all)."""
        for action in actions:
            if self.mode == "auto":
                reason = self.profile.unsupported(action, self.config.command)
            elif self.mode == "agent-initiated":
                reason = (
                    None
                    if action == "prompt"
                    else (
                        f"needs a person to act ({action}); in agent-initiated mode only the first prompt comes "
                        "from a person: run with --acp-client-mode=manual"
                    )
                )
            else:
                reason = None  # manual: the person is told what to do
            if reason:
                return reason
        return None

    async def driver_cancel(self, conn: ClientConnection) -> None:
        if self.mode != "auto":
            await self._tell("Press the editor's stop / cancel button now, to cancel the running turn.")
            self.manual = True
            return
        p = self.profile
        why = p.unsupported("cancel")
        if why:
            raise Unsupported(why)
        proc = conn.process
        assert proc is not None
        conn.transcript.note(f"driver: cancel via {p.cancel_via}")
        if p.cancel_via == "signal":
            try:
                os.kill(proc.pid, p.signal_number())
            except ProcessLookupError:
                raise PeerExited(
                    "the client exited before it could be told to cancel", proc.returncode, list(proc.stderr_tail)
                ) from None
        elif p.cancel_via == "stdin":
            await proc.send(p.cancel_text.encode() + b"\n")
        elif p.cancel_via == "command":
            argv = shlex.split(p.cancel_command.replace("{pid}", str(proc.pid)))
            async with spawn(argv, cwd=str(conn.sandbox), env=p.environment(str(conn.sandbox.parent))) as helper:
                await helper.wait_exit(self.config.timeout)

    async def driver_prompt(self, conn: ClientConnection, text: str) -> None:
        if self.mode != "auto":
            await self._tell(f"Send another prompt in the same thread (any text, e.g. {text!r}).")
            self.manual = True
            return
        why = self.profile.unsupported("second-prompt")
        if why:
            raise Unsupported(why)
        assert conn.process is not None
        conn.transcript.note("driver: another prompt on stdin")
        await conn.process.send(text.replace("\n", " ").encode() + b"\n")

    async def _tell(self, text: str) -> None:
        if self.human is None:
            raise Unsupported("no person to tell what to do (no terminal)")
        self.human.say(text)

    async def ask(self, question: str, choices: tuple[str, ...] = ("y", "n")) -> str | None:
        """Ask the person (manual mode only); None in the other modes."""
        if self.mode != "manual" or self.human is None:
            return None
        self.manual = True
        with anyio.fail_after(self.config.human_timeout):
            return await self.human.ask(question, choices)

    # ------------------------------------------------------------ connecting
    @asynccontextmanager
    async def connect(
        self,
        agent: AgentSetup | None = None,
        *,
        permission: str | None = None,
        prompt: str | None = None,
        wait_initialize: bool = True,
        actions: Mapping[str, str | None] | None = None,
    ) -> AsyncIterator[ClientConnection]:
        """Start the client (or wait for a person to) and yield the connection to its agent.

        ``actions``: user actions this run performs (``profiles.USER_ACTIONS``), with their values."""
        __tracebackhide__ = True  # a finding's traceback shows the test, not the harness
        setup = agent or AgentSetup()
        actions = dict(actions or {})
        if permission is not None:
            why = self.unsupported(f"permission:{permission}")
            if why:
                raise Unsupported(why)
        why = self.unsupported(*actions)
        if why:
            raise Unsupported(why)
        self._n += 1
        sandbox = (self.workdir / f"client-{self._n}").resolve()
        sandbox.mkdir(parents=True, exist_ok=True)
        transcript = Transcript(label=self.config.command)
        if self.mode == "auto":
            seen = liveness("client", self.config.command)
            if not seen.ok and len(seen.failures) >= DEAD_AFTER:
                raise PeerUnavailable(
                    f"not started again: the client failed its first {len(seen.failures)} handshakes in this run "
                    f"(launch the agent, send initialize) and never completed one (last: {seen.last_failure('client')})"
                )
            kind = "unix"
            async with open_control_server(kind, address=self.config.control, token=self.config.token) as server:
                async with self._start_client(server, sandbox, transcript, permission, prompt, actions) as (
                    proc,
                    argv,
                ):
                    relay = await self._await_relay(server, proc, transcript)
                    async with self._session(
                        setup, relay, transcript, sandbox, proc, permission, argv, wait_initialize
                    ) as conn:
                        yield conn
        else:
            async with open_control_server(address=self.config.control, token=self.config.token or "") as server:
                relay = await self._await_person(server, setup, permission, actions)
                async with self._session(
                    setup, relay, transcript, sandbox, None, permission, [], wait_initialize
                ) as conn:
                    yield conn

    @asynccontextmanager
    async def _start_client(
        self,
        server: ControlServer,
        sandbox: Path,
        transcript: Transcript,
        permission: str | None,
        prompt: str | None,
        actions: Mapping[str, str | None],
    ) -> AsyncIterator[tuple[ProcessTransport, list[str]]]:
        p = self.profile
        argv = p.build_argv(
            self.config.command,
            agent_argv=server.relay_argv(self.config.python),
            prompt=prompt,
            permission=permission,
            tmp=str(sandbox.parent),
            actions=actions,
        )
        env = {**p.environment(str(sandbox.parent), actions), **self.config.env}
        for name, value in actions.items():
            transcript.note(f"driver: user action {name}" + (f" ({value})" if value is not None else ""))
        transcript.note(f"client command: {shlex.join(argv)}")

        def on_stderr(line: str) -> None:
            transcript.add("stderr", line)

        cwd = self.config.cwd or str(sandbox)
        async with spawn(argv, env=env, cwd=cwd, on_stderr=on_stderr, grace=self.config.exit_grace) as proc:
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._drain_stdout, proc)
                try:
                    if p.prompt_via == "stdin":
                        text = prompt if prompt is not None else p.prompt_text
                        await proc.send(text.replace("\n", " ").encode() + b"\n")
                    yield proc, argv
                finally:
                    self._stderr = list(proc.stderr_tail)
                    tg.cancel_scope.cancel()

    async def _drain_stdout(self, proc: ProcessTransport) -> None:
        """Read the client's own stdout (its user-facing output) for as long as it runs.

        Nobody else reads it: a client printing every streamed update (``acpx
        --format json`` does) would otherwise fill the pipe, block, and look
        like a client that stopped answering its agent.  The tail is kept as
        evidence.
        """
        while True:
            data = await proc.receive()
            if not data:
                return
            self._stdout_tail = (self._stdout_tail + data)[-STDOUT_TAIL_BYTES:]

    async def _await_relay(self, server: ControlServer, proc: ProcessTransport, transcript: Transcript) -> Any:
        """The relay the client launched; a clear FAIL if it never comes."""
        limit = self.config.startup_timeout
        relay: RelayConnection | None = None
        exited = False

        async def wait_relay(scope: anyio.CancelScope) -> None:
            nonlocal relay
            try:
                relay = await server.accept(limit)
            except PeerTimeout:
                pass
            scope.cancel()

        async def wait_exit(scope: anyio.CancelScope) -> None:
            nonlocal exited
            exited = await proc.wait_exit(limit)
            if exited:
                # Let a relay that raced the exit still register.
                try:
                    await server.accept(0.2, index=0)
                except PeerTimeout:
                    pass
                scope.cancel()

        async with anyio.create_task_group() as tg:
            tg.start_soon(wait_relay, tg.cancel_scope)
            tg.start_soon(wait_exit, tg.cancel_scope)
        if relay is None and server.connections:
            relay = server.connections[0]
        if relay is not None:
            transcript.note(f"agent launched by the client: pid {relay.hello.pid}, cwd {relay.hello.cwd}")
            return relay
        for why in server.rejected:
            transcript.note(f"control: rejected a connection ({why})")
        self._stderr = list(proc.stderr_tail)
        # Not init.first's FAIL: a client that never launched its agent created no session
        # without initializing one (initialization.mdx); nothing was judged (a missing key, a
        # wrong command line, {agent} where the client does not take it).
        launch = "the client did not launch the agent ({agent} in its command line)"
        exc: PeerError = (
            PeerExited(f"{launch} before its process ended", proc.returncode)
            if exited
            else PeerTimeout(f"{launch} within {limit:g} s")
        )
        raise self._gave_up(exc, proc)

    async def _await_person(
        self, server: ControlServer, setup: AgentSetup, permission: str | None, actions: Mapping[str, str | None]
    ) -> Any:
        lines = [
            f"Test {self._n}: start a NEW agent thread in your editor with the ACP conformance agent "
            f"(command: {server.relay_command_line(self.config.python)}), then send any prompt.",
        ]
        for name, value in actions.items():
            lines.append("In that thread, " + USER_ACTIONS[name].replace("{value}", value or "") + ".")
            self.manual = True
        if permission == "reject" and self.mode == "manual":
            lines.append("When the editor asks for permission, choose the REJECT option.")
        elif permission == "allow" and self.mode == "manual":
            lines.append("When the editor asks for permission, choose the ALLOW option.")
        elif permission == "hold" and self.mode == "manual":
            lines.append("When the editor asks for permission, do NOT answer; wait for the next instruction.")
        await self._tell("\n".join(lines))
        if permission is not None:
            self.manual = True
        return await server.accept(self.config.human_timeout)

    @asynccontextmanager
    async def _session(
        self,
        setup: AgentSetup,
        relay: RelayConnection,
        transcript: Transcript,
        sandbox: Path,
        proc: ProcessTransport | None,
        permission: str | None,
        argv: list[str],
        wait_initialize: bool,
    ) -> AsyncIterator[ClientConnection]:
        peer = Peer(
            relay,
            Role.AGENT,
            validator=self.validator,
            transcript=transcript,
            timeout=self.config.timeout if self.mode == "auto" else self.config.human_timeout,
            max_frame_bytes=self.config.max_frame_bytes,
            stderr_tail=(lambda: list(proc.stderr_tail)) if proc is not None else None,
        )
        peer.deadlines = deadline_memory(self.config.command)
        peer.where = self.label or "an earlier test"
        endpoint = AgentEndpoint(peer, setup)
        conn = ClientConnection(self, endpoint, relay, transcript, sandbox, proc, permission, argv)
        self.connections.append(conn)
        failed = True
        found: list[ClauseResult] = []
        try:
            async with peer:
                peer.start_soon(endpoint.watch_closed)
                peer.start_soon(self._exit_on_eof, conn)
                try:
                    if wait_initialize:
                        await self._await_initialize(conn)
                    yield conn
                    failed = False
                finally:
                    with anyio.CancelScope(shield=True):
                        await self._shutdown(conn, judge_pending=not failed)
        except PeerError as exc:
            # The client may say why it stopped after closing the agent's stdin: the message is
            # made after the shutdown, from the final stderr tail.
            if proc is not None and len(proc.stderr_tail) > 0:
                exc.stderr_tail = list(proc.stderr_tail)[-20:]
            raise
        finally:
            if proc is not None:
                self._stderr = list(proc.stderr_tail)
            peer.note_unterminated()
            found = judge_transcript(transcript, "client")
            self.results.extend(found)
        if not failed:
            hard = [r for r in found if r.status is Status.FAIL]
            if hard:
                self.body_completed = True
                raise ConformanceFailure(hard[0].clause, "a conforming stream", hard[0].message)

    async def _exit_on_eof(self, conn: ClientConnection) -> None:
        await conn.peer.closed.wait()
        if conn.exit_on_eof:
            conn.transcript.note("the client closed the agent's stdin; the agent exits")
            await conn.relay.exit(0)

    def _gave_up(self, exc: PeerError, proc: ProcessTransport | None) -> PeerError:
        """``exc``, for a client that did not get as far as ``initialize``: what it said on stderr
        joins it, and the run remembers the failure (``liveness``: not started again after two)."""
        tail = [line for line in (proc.stderr_tail if proc is not None else ()) if line.strip()]
        exc.stderr_tail = tail[-20:]
        if proc is not None and not tail:
            exc.message += " (its stderr was empty)"
            exc.args = (exc.message,)
        liveness("client", self.config.command).failures.append(exc)
        return exc

    async def _await_initialize(self, conn: ClientConnection) -> None:
        __tracebackhide__ = True  # a finding's traceback shows the test, not the harness
        limit = self.config.startup_timeout if self.mode == "auto" else self.config.human_timeout
        seen = liveness("client", self.config.command)
        try:
            req = await conn.agent.wait_initialize(limit)
        except (PeerExited, PeerTimeout) as exc:
            # Not init.first's FAIL either: no session without initialize, only nothing at all (a
            # request other than initialize first is flagged on init.first by the agent endpoint).
            conn.peer.note_unterminated()  # half an initialize line, say: shown in the evidence
            if isinstance(exc, PeerExited):
                gave_up: PeerError = PeerExited("the client closed the agent's stdin without sending initialize")
            else:
                gave_up = PeerTimeout(f"the client launched the agent but sent no initialize within {limit:g} s")
            raise self._gave_up(gave_up, conn.process) from None
        seen.ok = True
        params = req.params if isinstance(req.params, dict) else {}
        if self.peer_info is None:
            self.peer_info = {
                "info": params.get("clientInfo"),
                "capabilities": params.get("clientCapabilities"),
                "protocolVersion": params.get("protocolVersion"),
                "profile": self.profile.name,
                "mode": self.mode,
            }

    async def _shutdown(self, conn: ClientConnection, *, judge_pending: bool) -> None:
        peer, endpoint, proc = conn.peer, conn.agent, conn.process
        if not peer.closed.is_set():

            async def end_at_once(turn: Any) -> None:
                await turn.end()

            endpoint.turn_script = end_at_once  # turns arriving from now on end at once
            # A relay stuck behind a client that stopped reading must not stall teardown.
            with anyio.move_on_after(self.config.timeout):
                try:
                    await endpoint.end_open_turns()
                except PeerExited:
                    pass
            if judge_pending:
                # Every request the agent sent gets exactly one response: give late
                # answers a deadline, then each missing one is a finding.
                for rid, method in peer.conn.pending_outgoing:
                    if peer.closed.is_set():
                        break
                    try:
                        await peer.wait_response(rid, method=method)
                    except (PeerTimeout, PeerExited):
                        pass
        if proc is not None:
            await proc.close_output()
            if not await proc.wait_exit(self.config.exit_grace):
                conn.transcript.note("the client was still running after its stdin closed; it is being stopped")
                await proc.terminate(0.5)
        else:
            await conn.relay.exit(0)
        await conn.relay.aclose()
        _kill_relay(conn.relay.pid)
        for path in conn.cleanup:
            try:
                path.unlink(missing_ok=True)
            except OSError:
                pass


def _kill_relay(pid: int) -> None:
    """The relay normally exits with its control socket; make sure (by pid, never by name)."""
    if pid <= 0:
        return
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return
    if b"acp_conformance.harness.relay" in cmdline or b"mock_agent.relay" in cmdline:
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
