"""A transparent recording proxy: ``<proxy> -- <agent command>``.

Put it wherever a client expects an agent command::

    acpx --agent "python -m acp_conformance.scenario proxy --transcript t.jsonl -- python -m mock_agent" exec "hi"

It starts the agent, forwards bytes both ways untouched and at once (no
re-framing, no buffering beyond one read), passes the agent's stderr
through, and meanwhile judges every frame in both directions: framing and
JSON-RPC rules by the sans-IO core, schema validity by the strict
per-method validator, each side from the point of view of the other.
Violations are reported live on stderr (``acp-proxy: [agent] ...``).  On
exit it writes the transcript (JSONL, the client's point of view: ``out``
= client -> agent, ``in`` = agent -> client) and, if asked, a JSON verdict
with the transcript-level clause results of both peers.

``WireTap`` is the judging half on its own: the offline checker feeds a
saved transcript through it, so a trace recorded by any tool can be
re-judged (``python -m acp_conformance.scenario check FILE``).
"""

from __future__ import annotations

import signal
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import anyio
import orjson

from acp_conformance.checks import passive_results
from acp_conformance.core.connection import Connection, Role
from acp_conformance.core.events import Event, Notification, Request, Response, Unjudged, Violation
from acp_conformance.errors import LocalProtocolError, PeerExited
from acp_conformance.results import ClauseResult, Status
from acp_conformance.schema.rules import judge_frame
from acp_conformance.transcript import Entry, Transcript

__all__ = ["ProxyOptions", "WireTap", "judge_transcript", "run_proxy"]

Side = Literal["client", "agent"]


class _Judge:
    """The frames of one side, judged as the other side's ``Peer`` would, without serving them:
    the same sans-IO ``Connection`` and the same per-frame rules (``schema.rules.judge_frame``)."""

    def __init__(self, judged: Side, validator: Any, transcript: Transcript, direction: Literal["in", "out"]) -> None:
        # The judge stands where the *other* side stands: agent frames are judged in the client role.
        self.role = Role.CLIENT if judged == "agent" else Role.AGENT
        self.conn = Connection(self.role)
        self.validator = validator
        self.transcript = transcript
        self.judged = judged
        self.direction = direction
        self.found: list[Violation] = []
        self.other: _Judge | None = None

    def feed(self, data: bytes) -> list[Violation]:
        return self._record(self.conn.receive_data(data))

    def eof(self) -> list[Violation]:
        return self._record(self.conn.receive_eof())

    def _record(self, events: list[Event]) -> list[Violation]:
        before = len(self.transcript.violations)
        pending: list[Violation] = []
        for ev in events:
            if isinstance(ev, Violation):
                pending.append(ev)
                continue
            # The core emits a frame's violations just before its message (same index); any
            # others belong to lines that decoded to no message at all (a banner, a batch).
            self._orphans([v for v in pending if v.index != ev.index])
            entry = self.transcript.add(self.direction, ev.raw, ev.message)
            for v in pending:
                if v.index == ev.index:
                    self.transcript.violation(v, entry)
            pending = []
            if isinstance(ev, Unjudged):
                self.transcript.note(f"{self.judged}: {ev.reason}")
                continue
            for v in judge_frame(self.validator, self.role, ev):
                self.transcript.violation(v, entry)
            self._mirror(ev)
        self._orphans(pending)
        out = self.transcript.violations[before:]
        self.found.extend(out)
        return out

    def _orphans(self, violations: list[Violation]) -> None:
        entries: dict[int, Entry] = {}
        for v in violations:
            if v.index is None:
                self.transcript.violation(v, self.transcript.add("note", f"{self.judged} framing: {v.message}"))
                continue
            known = entries.get(v.index)
            if known is None:
                known = entries[v.index] = self.transcript.add(self.direction, v.raw or b"")
            self.transcript.violation(v, known)

    def _mirror(self, ev: Request | Notification | Response) -> None:
        """Tell the other judge what this side sent, so it can pair responses with requests.

        Only the id and the method matter for pairing; the params are left
        out, so nothing this side sent (however deep or odd) is serialized again.
        """
        other = self.other
        if other is None:
            return
        try:
            if isinstance(ev, Request):
                other.conn.send_request(ev.method, None, id=ev.id)
            elif isinstance(ev, Response) and ev.id is not None:
                if ev.is_error:
                    other.conn.send_error(ev.id, -32603, "mirror")
                else:
                    other.conn.send_result(ev.id, None)
        except LocalProtocolError:
            pass  # an id reused or a stray answer: this side's own judge already flagged it


class WireTap:
    """Judges both directions of one connection from the outside."""

    def __init__(self, validator: Any, *, on_violation: Callable[[Side, Violation], None] | None = None) -> None:
        self.transcript = Transcript(label="acp proxy (client point of view: out = client -> agent)")
        self.agent = _Judge("agent", validator, self.transcript, "in")
        self.client = _Judge("client", validator, self.transcript, "out")
        self.agent.other, self.client.other = self.client, self.agent
        self.on_violation = on_violation

    def from_client(self, data: bytes) -> None:
        self._report("client", self.client.feed(data))

    def from_agent(self, data: bytes) -> None:
        self._report("agent", self.agent.feed(data))

    def client_eof(self) -> None:
        self.transcript.note("the client closed its output (agent stdin EOF)")
        self._report("client", self.client.eof())

    def agent_eof(self) -> None:
        self.transcript.note("the agent closed its output (EOF)")
        self._report("agent", self.agent.eof())

    def stderr(self, line: str) -> None:
        self.transcript.add("stderr", line)

    def _report(self, side: Side, found: list[Violation]) -> None:
        if self.on_violation is not None:
            for v in found:
                self.on_violation(side, v)

    def results(self, side: Side) -> list[ClauseResult]:
        """Transcript-level clause results of ``side``."""
        return judge_view(self.transcript, self.agent.found if side == "agent" else self.client.found, side)


def judge_view(transcript: Transcript, found: list[Violation], side: Side) -> list[ClauseResult]:
    """``passive_results`` for one side of a two-sided (client point of view) transcript."""
    mine = {id(v) for v in found}
    view = Transcript(transcript.label)
    flip = side == "client"
    for e in transcript.entries:
        direction = e.direction
        if flip and direction in ("in", "out"):
            direction = "out" if direction == "in" else "in"
        entry = Entry(e.t, direction, e.raw, e.message, [v for v in e.violations if id(v) in mine])
        view.entries.append(entry)
    view.violations = [v for v in transcript.violations if id(v) in mine]
    return passive_results(view, side)


def judge_transcript(saved: Transcript, *, sent_by: Side = "client", validator: Any = None) -> WireTap:
    """Re-judge a saved transcript from its raw frames (any tool's trace works): the one offline judge.

    ``sent_by`` is the side that sent its ``out`` frames (the suite's and the proxy's
    transcripts: the client).  Every frame is decoded and validated again; the violations a
    file records are not believed, with one exception: a frame whose saved text is lossy (bytes
    that were not UTF-8, saved with U+FFFD in their place) cannot be judged again, so what the
    recording tool found on it is kept, and says so.
    """
    tap = WireTap(validator)
    for e in saved.entries:
        if e.direction not in ("in", "out"):
            if e.direction == "stderr":
                tap.stderr(e.text())
            continue
        raw = e.raw if isinstance(e.raw, bytes) else e.raw.encode("utf-8")
        if not raw.endswith(b"\n"):
            raw += b"\n"
        from_client = (e.direction == "out") == (sent_by == "client")
        before = len(tap.transcript.entries)
        (tap.from_client if from_client else tap.from_agent)(raw)
        if "\ufffd" not in e.text() or not tap.transcript.entries[before:]:
            continue
        seen = {v.clause_id for x in tap.transcript.entries[before:] for v in x.violations}
        judge = tap.client if from_client else tap.agent
        for v in e.violations:
            if v.clause_id not in seen:
                kept = Violation(v.clause_id, f"{v.message} (as recorded: the saved frame is lossy)", v.severity)
                tap.transcript.violation(kept, tap.transcript.entries[-1])
                judge.found.append(kept)
    return tap


# ------------------------------------------------------------------- the proxy
@dataclass
class ProxyOptions:
    command: list[str]
    transcript: str | None = None
    verdict: str | None = None
    quiet: bool = False
    schema: str | None = None
    #: After the client's EOF, how long the agent may take to end its output before it is stopped.
    grace: float = 5.0
    env: dict[str, str] = field(default_factory=dict)


async def run_proxy(opts: ProxyOptions, *, stdin: Any = None, stdout: Any = None) -> int:
    """Relay our stdio to the agent's, judging and recording; returns the exit status."""
    from acp_conformance.transport.process import spawn
    from acp_conformance.transport.stdio import StdioTransport

    validator = _validator(opts.schema)
    err = sys.stderr

    def live(side: Side, v: Violation) -> None:
        if not opts.quiet:
            err.write(f"acp-proxy: [{side}] {v.severity} [{v.clause_id}] {v.message}\n")
            err.flush()

    tap = WireTap(validator, on_violation=live)

    def on_stderr(line: str) -> None:
        tap.stderr(line)
        err.write(line + "\n")
        err.flush()

    own = StdioTransport(stdin=stdin or sys.stdin.buffer, stdout=stdout or sys.stdout.buffer)
    status = 0
    try:
        async with spawn(opts.command, env=opts.env or None, on_stderr=on_stderr, grace=2.0) as agent:
            client_done = anyio.Event()
            agent_done = anyio.Event()

            async def client_to_agent() -> None:
                try:
                    while True:
                        data = await own.receive()
                        if not data:
                            break
                        tap.from_client(data)
                        await agent.send(data)
                except PeerExited:
                    pass
                finally:
                    tap.client_eof()
                    await agent.close_output()
                    client_done.set()

            async def agent_to_client() -> None:
                try:
                    while True:
                        data = await agent.receive()
                        if not data:
                            break
                        tap.from_agent(data)
                        await own.send(data)
                except PeerExited:
                    pass
                finally:
                    tap.agent_eof()
                    agent_done.set()
                    await own.close_output()

            async def signals(scope: anyio.CancelScope) -> None:
                with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT, signal.SIGHUP) as received:
                    async for signum in received:
                        tap.transcript.note(f"proxy received signal {signum}; stopping the agent")
                        scope.cancel()
                        return

            async with anyio.create_task_group() as tg:
                tg.start_soon(signals, tg.cancel_scope)
                tg.start_soon(client_to_agent)
                tg.start_soon(agent_to_client)
                # Done when the agent ends its output, or the client's EOF plus a grace period.
                async with anyio.create_task_group() as waiters:

                    async def after_client() -> None:
                        await client_done.wait()
                        with anyio.move_on_after(opts.grace):
                            await agent_done.wait()
                        waiters.cancel_scope.cancel()

                    async def after_agent() -> None:
                        await agent_done.wait()
                        waiters.cancel_scope.cancel()

                    waiters.start_soon(after_client)
                    waiters.start_soon(after_agent)
                tg.cancel_scope.cancel()
        code = agent.returncode
        status = code if code is not None and code >= 0 else (128 - code if code is not None else 0)
    finally:
        _finish(tap, opts)
    return status


def _validator(schema: str | None) -> Any:
    from acp_conformance.schema import load_validator

    return load_validator(schema, warn=lambda m: sys.stderr.write(f"acp-proxy: WARNING {m}\n"))


def _finish(tap: WireTap, opts: ProxyOptions) -> None:
    if opts.transcript:
        path = Path(opts.transcript)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(tap.transcript.to_jsonl())
    verdict = proxy_verdict(tap, opts.command)
    if opts.verdict:
        path = Path(opts.verdict)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(orjson.dumps(verdict, option=orjson.OPT_INDENT_2) + b"\n")
    if not opts.quiet:
        for side in ("agent", "client"):
            bad = verdict[side]["failed"]
            sys.stderr.write(f"acp-proxy: {side}: {len(bad)} clause(s) FAIL{': ' + ', '.join(bad) if bad else ''}\n")


def proxy_verdict(tap: WireTap, command: list[str] | str) -> dict[str, Any]:
    """Both peers' transcript-level results, as JSON."""
    out: dict[str, Any] = {"command": command if isinstance(command, str) else " ".join(command)}
    sides: tuple[Side, Side] = ("agent", "client")
    for side in sides:
        results = tap.results(side)
        out[side] = {
            "failed": sorted({r.clause for r in results if r.status is Status.FAIL}),
            "warned": sorted({r.clause for r in results if r.status is Status.WARN}),
            "clauses": [r.to_json() for r in results],
        }
    return out
