"""The stateful session machine: random session lifecycles of a live agent, checked step by step.

``AgentSessions`` is a Hypothesis ``RuleBasedStateMachine`` that drives a live
agent through ``session/new``, ``session/load``, ``session/prompt`` (an
ordinary turn, a long one that only ends when cancelled, a tool turn that asks
permission), permission answers, ``session/cancel``, ``session/set_mode`` and
``session/close``, in any order, several sessions at once.  After every step
it checks the session invariants:

* one response per request (``jsonrpc.no-duplicate-response``), and every
  request answered in the end (``jsonrpc.every-request-answered``);
* no turn output for a turn that has already ended
  (``prompt.updates.before-response``);
* every ``tool_call_update`` names a tool call the session introduced
  (``tool.update.known-id``);
* a turn that cannot end by itself because the suite holds it (a permission
  request of the agent we have not answered, or a slow reply of the scripted
  model endpoint) ends with stopReason ``cancelled`` once cancelled
  (``perm.agent-cancel-race`` when the permission was pending, else
  ``cancel.stop-reason``); a turn nothing held is not judged on its stop
  reason (it may have ended before the cancel reached the agent).  The
  client's pending permission requests are answered ``cancelled`` by the
  suite's client, as the protocol requires.

Hypothesis builds a machine without arguments, so the test binds the harness,
portal and budget (a ``StatefulContext``) to a subclass: ``machine_for(ctx)``.
Each example runs on a fresh agent process.  ``write_scenario`` turns the
transcript of a failing replay into a scenario file
(``acp_conformance.scenario`` format; a JSONL transcript beside it).  The
pytest test is ``suite/agent/test_stateful.py``.
"""

from __future__ import annotations

import copy
import os
import re
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from anyio.from_thread import BlockingPortal
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from acp_conformance.core.events import Event, Notification, Request, Response, Violation
from acp_conformance.core.ids import same_id
from acp_conformance.core.vocabulary import TURN_OUTPUT
from acp_conformance.errors import AcpError, ConformanceFailure, PeerError, PeerTimeout
from acp_conformance.fuzz._budget import FuzzBudget
from acp_conformance.fuzz._findings import Finding, finding_type
from acp_conformance.fuzz.campaign import live_connection, probe_unanswered
from acp_conformance.harness import AgentHarness, Connection
from acp_conformance.peer import Peer
from acp_conformance.redaction import machine_paths

__all__ = [
    "CLAUSES",
    "STEPS",
    "AgentSessions",
    "StatefulContext",
    "machine_for",
    "write_scenario",
]

CLAUSES = (
    "jsonrpc.every-request-answered",
    "jsonrpc.no-duplicate-response",
    "prompt.updates.before-response",
    "tool.update.known-id",
    "cancel.stop-reason",
    "perm.agent-cancel-race",
)
#: Other clauses a step may find broken on the way (bound to their own tests).

STEPS = 15
PERMISSION_KINDS = ("allow_once", "allow_always", "reject_once", "reject_always")


@dataclass
class _Turn:
    sid: str
    rid: Any
    kind: str  # plain | long | tool
    start: int  # position in peer.events when the prompt went out
    done_at: int | None = None  # position of its response
    response: Response | None = None
    cancelled: bool = False
    #: Cancelled (or its session closed) and still unanswered at our deadline: left to run.
    left_running: bool = False


@dataclass
class StatefulContext:
    """What the machine needs from the test, and what the runs leave behind."""

    acp: AgentHarness
    portal: BlockingPortal
    budget: FuzzBudget
    deadline: float = 0.0
    failed: bool = False
    #: The flush round trip went unanswered once (``AgentSessions._flush``): not tried again.
    no_flush: bool = False
    runs: int = 0
    skipped: int = 0
    exercised: Counter[str] = field(default_factory=Counter)
    stream_failures: list[ConformanceFailure] = field(default_factory=list)
    #: clause -> (transcript of the last failing run, its steps); the last one is Hypothesis's final replay.
    failing: dict[str, tuple[Any, list[str], str, str]] = field(default_factory=dict)


class AgentSessions(RuleBasedStateMachine):
    """One agent process, several sessions, random steps; invariants after each.

    Unbound: ``machine_for(ctx)`` gives the subclass Hypothesis runs, with ``ctx`` set.
    """

    #: What the machine needs from the test, and what the runs leave behind (set by ``machine_for``).
    ctx: ClassVar[StatefulContext]

    def __init__(self) -> None:
        super().__init__()
        self.steps: list[str] = []
        self.idle = not self.ctx.failed and time.monotonic() > self.ctx.deadline
        self.cm: Any = None
        self.conn: Connection | None = None
        self.turns: dict[str, _Turn] = {}
        self.ended: dict[str, int] = {}  # sid -> position of its last turn's response
        #: sid -> whether its last turn was answered ``cancelled`` after we cancelled it.
        self.ended_cancelled: dict[str, bool] = {}
        #: sid -> position (inbound events logged) when our last session/cancel for it went out.
        self.cancel_sent: dict[str, int] = {}
        self.tool_ids: dict[str, set[str]] = {}
        self.replays: list[tuple[str, int, int]] = []  # (sid, from, to): session/load replay windows
        self.closed: set[str] = set()
        self.scan = 0
        self.modes: dict[str, list[str]] = {}
        self.sessions: list[str] = []
        self.raised = False
        if self.idle:
            self.ctx.skipped += 1
            return
        self.ctx.runs += 1
        self.cm = live_connection(self.ctx.portal, self.ctx.acp, self.ctx.stream_failures, permission="hold")
        self.conn = self.cm.__enter__()

    # ------------------------------------------------------------ helpers
    @property
    def peer(self) -> Peer:
        assert self.conn is not None
        return self.conn.peer

    def call(self, fn: Any, *args: Any) -> Any:
        return self.ctx.portal.call(fn, *args)

    def fail(self, clause: str, message: str, unproven: str = "") -> None:
        self.ctx.failed = True
        self.raised = True
        assert self.conn is not None
        evidence = self.ctx.acp.evidence(self.conn)
        self.ctx.failing[clause] = (self.conn.transcript, list(self.steps), message, evidence)
        steps = "; ".join(self.steps) or "(no steps)"
        raise finding_type(clause)(message, f"steps: {steps}", evidence, unproven)

    def wait(self, rid: Any, what: str) -> Response | None:
        try:
            resp: Response = self.call(self._wait, rid, what)
            return resp
        except PeerError as exc:
            # The wait's own reason first (a turn still streaming at the deadline), then the rule's.
            unproven = exc.unproven or self.why_unproven(rid)
            self.fail("jsonrpc.every-request-answered", f"{what} was not answered ({exc.message})", unproven)
            return None

    def wait_cancelled(self, turn: _Turn) -> Response | None:
        """The answer to a turn we cancelled or closed, or None: its silence under our deadline is
        ``cancel.stop-asap``'s (judged by the cancel tests), not a request left unanswered (the
        spec sets no deadline); the turn is left to run and ``_settle`` does not count it."""
        try:
            resp: Response = self.call(self._wait, turn.rid, "session/prompt", False)
            return resp
        except PeerTimeout as exc:
            turn.left_running = True
            self.peer.transcript.note(f"(stateful) {exc.message}: the cancelled turn is left running, not judged")
            return None
        except PeerError as exc:
            self.fail(
                "jsonrpc.every-request-answered",
                f"session/prompt was not answered ({exc.message})",
                self.why_unproven(turn.rid),
            )
            return None

    def why_unproven(self, rid: Any) -> str:
        """``Peer.why_unproven``, asked in the peer's own event loop (its reader may be adding an
        answer meanwhile: the tables it reads are the loop's)."""
        why: str = self.call(self._why_unproven, rid)
        return why

    async def _why_unproven(self, rid: Any) -> str:
        return self.peer.why_unproven(rid)

    async def _wait(self, rid: Any, what: str, flag: bool = True) -> Response:
        return await self.peer.wait_response(rid, method=what, timeout=self.ctx.acp.config.timeout, flag=flag)

    def request(self, method: str, params: dict[str, Any]) -> Response | None:
        rid = self.call(self._send, method, params)
        return self.wait(rid, method)

    async def _send(self, method: str, params: dict[str, Any]) -> Any:
        return await self.peer.send_request(method, params, validate=False)

    def pending_permission(self, sid: str) -> Any:
        assert self.conn is not None
        for call in self.conn.client.permission_calls:
            if call.session_id == sid and call.outcome is None:
                return call
        return None

    def held(self, turn: _Turn) -> str | None:
        """What the suite holds that keeps the unanswered turn from ending by itself, or None
        (``ClientEndpoint.holding``: a pending permission request, a slow model stream)."""
        assert self.conn is not None
        if turn.done_at is not None or not self.peer.conn.is_outstanding(turn.rid):
            return None
        return self.conn.client.holding(turn.sid)

    # -------------------------------------------------------------- rules
    # Every rule picks what it acts on by index (modulo what exists), so every step does something.
    @initialize()
    def start(self) -> None:
        self._new_session()

    @rule(
        op=st.sampled_from(["new", "set_mode", "load", "cancel_idle"]),
        pick=st.integers(0, 7),
        arg=st.integers(0, 7),
    )
    def session_op(self, op: str, pick: int, arg: int) -> None:
        """A new session, a mode change, a load, or a cancel with nothing running."""
        if self.idle:
            return
        if op == "new":
            self._new_session()
        elif op == "set_mode":
            self._set_mode(pick, arg)
        elif op == "load":
            self._load(pick)
        else:
            sid = self._idle_session(pick)
            if sid is not None:
                self._cancel(sid)

    def _new_session(self) -> str | None:
        if self.idle or self.conn is None:
            return None
        resp = self.request("session/new", {"cwd": str(self.conn.sandbox.root), "mcpServers": []})
        result = resp.result if resp is not None and not resp.is_error else None
        sid = result.get("sessionId") if isinstance(result, dict) else None
        if not isinstance(sid, str):
            self.steps.append("new_session() -> refused")
            return None
        modes = result.get("modes") if isinstance(result, dict) else None
        if isinstance(modes, dict):
            ids = [m.get("id") for m in modes.get("availableModes", []) if isinstance(m, dict)]
            self.modes[sid] = [i for i in ids if isinstance(i, str)]
        self.sessions.append(sid)
        self.steps.append(f"new_session() -> {sid!r}")
        return sid

    def _idle_session(self, pick: int) -> str | None:
        idle = [s for s in self.sessions if s not in self.closed and s not in self.turns]
        return idle[pick % len(idle)] if idle else self._new_session()

    @rule(kind=st.sampled_from(["plain", "long", "tool", "tool"]), pick=st.integers(0, 7))
    def prompt(self, kind: str, pick: int) -> None:
        sid = None if self.idle else self._idle_session(pick)
        if sid is None:
            return
        text = {
            "plain": self.ctx.acp.config.prompt,
            "long": self.ctx.acp.config.long_prompt,
            "tool": self.ctx.acp.config.tool_prompt,
        }[kind]
        start = len(self.peer.events)
        params = {"sessionId": sid, "prompt": [{"type": "text", "text": text}]}
        rid = self.call(self._send, "session/prompt", params)
        turn = self.turns[sid] = _Turn(sid, rid, kind, start)
        self.ended.pop(sid, None)
        self.steps.append(f"prompt({sid!r}, {kind})")
        if kind == "tool":
            self._advance(turn)  # until it asks permission (or ends): the state later steps act on

    @rule(
        action=st.sampled_from(
            ["wait", "allow_once", "allow_always", "reject_once", "reject_always", "cancelled", "cancel", "close"]
        ),
        pick=st.integers(0, 7),
    )
    def act_on_turn(self, action: str, pick: int) -> None:
        """Answer the permission a turn waits for, let it run, cancel it, or close its session."""
        running = [t for t in self.turns.values() if t.done_at is None]
        if self.idle or not running:
            return
        turn = running[pick % len(running)]
        call = self.pending_permission(turn.sid)
        if action == "close" and self.can("sessionCapabilities.close"):
            self._close(turn.sid)
        elif action in ("cancel", "close") or (turn.kind == "long" and call is None):
            self._cancel(turn.sid)
        elif call is not None and action != "wait":
            self._answer(turn, call, action)
        elif call is None:
            self.steps.append(f"run_turn({turn.sid!r})")
            self._advance(turn)

    def _set_mode(self, pick: int, mode: int) -> None:
        live = [s for s in self.sessions if s not in self.closed and self.modes.get(s)]
        if not live:
            return
        sid = live[pick % len(live)]
        mode_id = self.modes[sid][mode % len(self.modes[sid])]
        self.steps.append(f"set_mode({sid!r}, {mode_id!r})")
        self.request("session/set_mode", {"sessionId": sid, "modeId": mode_id})

    def _load(self, pick: int) -> None:
        if self.conn is None or not self.can("loadSession"):
            return
        sid = self._idle_session(pick)
        if sid is None:
            return
        self.steps.append(f"load({sid!r})")
        start = len(self.peer.events)
        self.request("session/load", {"sessionId": sid, "cwd": str(self.conn.sandbox.root), "mcpServers": []})
        self.replays.append((sid, start, len(self.peer.events)))

    # ------------------------------------------------------------- actions
    def can(self, capability: str) -> bool:
        return self.conn is not None and self.conn.client.agent_supports(capability)

    def _advance(self, turn: _Turn) -> None:
        try:
            self.call(self._until_answer_or_permission, turn)
        except PeerError as exc:
            what = f"the {turn.kind} turn of {turn.sid!r}"
            self.fail(
                "jsonrpc.every-request-answered",
                f"{what} neither ended nor asked anything ({exc.message})",
                self.why_unproven(turn.rid),
            )

    async def _until_answer_or_permission(self, turn: _Turn) -> None:
        def done(ev: Event) -> bool:
            if isinstance(ev, Response) and same_id(ev.id, turn.rid):
                return True
            return (
                isinstance(ev, Request)
                and ev.method == "session/request_permission"
                and isinstance(ev.params, dict)
                and ev.params.get("sessionId") == turn.sid
            )

        what = f"the end of the turn of {turn.sid!r}"
        await self.peer.wait_for(done, timeout=self.ctx.acp.config.timeout, what=what, start=turn.start)

    def _answer(self, turn: _Turn, call: Any, outcome: str) -> None:
        if outcome == "cancelled":
            answer: dict[str, Any] = {"outcome": "cancelled"}
        else:
            params = call.request.params if isinstance(call.request.params, dict) else {}
            options = params.get("options", [])
            chosen = [o.get("optionId") for o in options if isinstance(o, dict) and o.get("kind") == outcome]
            answer = {"outcome": "selected", "optionId": chosen[0]} if chosen else {"outcome": "cancelled"}
        assert self.conn is not None
        turn.start = len(self.peer.events)  # before answering: the turn may end at once
        self.call(self.conn.client.answer_permission, call, answer)
        self.steps.append(f"answer_permission({turn.sid!r}, {outcome})")
        self._advance(turn)

    def _cancel(self, sid: str) -> None:
        turn = self.turns.get(sid)
        # No waiting for the turn to show output first: a cancel right behind its prompt must
        # cancel it too (the mock agent once lost exactly that one).
        held = self.held(turn) if turn is not None else None
        clause = (
            "perm.agent-cancel-race"
            if held is not None and self.pending_permission(sid) is not None
            else "cancel.stop-reason"
        )
        if turn is not None:
            turn.cancelled = True
        assert self.conn is not None
        sent_at = self.cancel_sent[sid] = len(self.peer.events)
        self.call(self.conn.client.cancel, sid)  # also answers its pending permissions "cancelled"
        self.steps.append(f"cancel({sid!r})")
        if turn is not None:
            self._judge_cancelled(turn, held, clause, "a cancelled", sent_at)

    def _close(self, sid: str) -> None:
        turn = self.turns.get(sid)
        if turn is not None and self.peer.conn.is_outstanding(turn.rid):
            # A close right behind the prompt may legitimately refuse that prompt (the session is
            # gone by the time it runs); judge the close of a turn seen running.
            self.call(self._started, turn)
        held = self.held(turn) if turn is not None else None
        if turn is not None:
            turn.cancelled = True
        self.steps.append(f"close({sid!r})")
        sent_at = len(self.peer.events)
        assert self.conn is not None
        # Our held permission requests of the session are answered cancelled, as after a cancel:
        # an agent blocked on them may finish the close only then (we would be holding it).
        rid = self.call(self.conn.client.send_close, sid)
        self.wait(rid, "session/close")
        self.closed.add(sid)
        if turn is not None:
            self._judge_cancelled(turn, held, "session.close.cancels-work", "session/close left a", sent_at)

    async def _started(self, turn: _Turn) -> None:
        """Wait (bounded) until the turn shows it runs: an update for its session, a request, or its answer."""

        def begun(ev: Event) -> bool:
            if isinstance(ev, Response):
                return same_id(ev.id, turn.rid)
            return (
                isinstance(ev, Notification | Request)
                and isinstance(ev.params, dict)
                and (ev.params.get("sessionId") == turn.sid)
            )

        try:
            await self.peer.wait_for(
                begun, timeout=self.ctx.acp.config.timeout, what="the turn to start", start=turn.start
            )
        except PeerError:
            pass  # judged by the wait for the answer that follows

    def _judge_cancelled(self, turn: _Turn, held: str | None, clause: str, what: str, sent_at: int) -> None:
        """Judge the stop reason of a turn the suite held open when the cancel (or close) went out.

        ``held`` says what held it (None: nothing, and the turn is not judged: it may have
        ended before the cancel reached the agent).  ``sent_at`` is the length of the event
        list just before the cancel went out: a response already received by then precedes it.
        """
        resp = self.wait_cancelled(turn)
        if held is None or resp is None:
            return
        if any(e is resp for e in self.peer.events[:sent_at]):
            return  # answered before the cancel was sent: no race to judge
        self.ctx.exercised[clause] += 1
        reason = resp.result.get("stopReason") if isinstance(resp.result, dict) else None
        if resp.is_error and clause in ("cancel.stop-reason", "perm.agent-cancel-race"):
            self.fail("cancel.no-error", f"a cancelled {turn.kind} turn ended with error {resp.error!r} ({held})")
        if resp.is_error or reason != "cancelled":
            got = f"error {resp.error!r}" if resp.is_error else f"stopReason {reason!r}"
            self.fail(
                clause,
                f"{what} {turn.kind} turn of session {turn.sid!r} (prompt id {turn.rid!r}) ended with {got}, not "
                f"stopReason 'cancelled', although it could not have ended by itself: {held}",
            )

    # --------------------------------------------------------- invariants
    @invariant()
    def sessions_are_consistent(self) -> None:
        if self.idle or self.conn is None:
            return
        events = self.peer.events
        for pos in range(self.scan, len(events)):
            self.scan = pos + 1
            self._check(pos, events[pos])

    def _check(self, pos: int, ev: Event) -> None:
        if isinstance(ev, Violation) and ev.clause_id == "jsonrpc.no-duplicate-response":
            self.fail("jsonrpc.no-duplicate-response", ev.message)
        if isinstance(ev, Response):
            for turn in self.turns.values():
                if turn.done_at is None and same_id(ev.id, turn.rid):
                    turn.done_at, turn.response = pos, ev
                    self.ended[turn.sid] = pos
                    # The agent's own word: a turn it answered end_turn had ended before it read
                    # our cancel (a crossing), and its later output is no cancelled turn's.
                    result = ev.result if isinstance(ev.result, dict) else {}
                    self.ended_cancelled[turn.sid] = turn.cancelled and result.get("stopReason") == "cancelled"
                    del self.turns[turn.sid]
                    self.ctx.exercised["prompt.updates.before-response"] += 1
                    break
            return
        if not (isinstance(ev, Notification) and ev.method == "session/update" and isinstance(ev.params, dict)):
            return
        sid, update = ev.params.get("sessionId"), ev.params.get("update")
        if not isinstance(sid, str) or not isinstance(update, dict):
            return
        kind = update.get("sessionUpdate")
        if any(s == sid and a <= pos < b for s, a, b in self.replays):
            return  # history replayed by session/load
        if kind == "tool_call":
            self.tool_ids.setdefault(sid, set()).add(str(update.get("toolCallId")))
        elif kind == "tool_call_update":
            self.ctx.exercised["tool.update.known-id"] += 1
            if str(update.get("toolCallId")) not in self.tool_ids.get(sid, set()):
                self.fail(
                    "tool.update.known-id",
                    f"tool_call_update for {update.get('toolCallId')!r}, never introduced in {sid!r}",
                )
        if kind in TURN_OUTPUT and sid in self.ended and sid not in self.turns:
            if self.cancel_sent.get(sid, -1) > self.ended[sid]:
                # Our session/cancel went out after the turn's answer: this may be the agent's
                # reaction to that cancel (cancel.after-response, judged by its own test), not
                # output of the ended turn; the order proves nothing here.
                return
            if self.ended_cancelled.get(sid):
                self.fail(
                    "cancel.updates-before-response", f"{kind} for {sid!r} after its cancelled turn had been answered"
                )
            self.fail("prompt.updates.before-response", f"{kind} for {sid!r} after its turn had ended")

    def teardown(self) -> None:
        if os.environ.get("ACP_FUZZ_DEBUG"):
            print("RUN", self.idle, self.steps)
        if self.cm is None:
            return
        try:
            if not self.raised:  # after a failure, only clean up: one finding per run
                self._settle()
        finally:
            cm, self.cm = self.cm, None
            try:
                cm.__exit__(None, None, None)
            except AcpError:
                pass

    def _settle(self) -> None:
        """Cancel what still runs, then every request of ours must have its one answer."""
        assert self.conn is not None
        for sid in list(self.turns):
            self._cancel(sid)
        self.call(self._flush)
        self.sessions_are_consistent()
        self.ctx.exercised["jsonrpc.every-request-answered"] += 1
        self.ctx.exercised["jsonrpc.no-duplicate-response"] += 1
        running = [t.rid for t in self.turns.values() if t.left_running]
        pending = [(rid, m) for rid, m in self.peer.conn.pending_outgoing if not any(same_id(rid, r) for r in running)]
        if pending:
            why = [self.why_unproven(rid) for rid, _ in pending]
            proven = [p for p, w in zip(pending, why, strict=True) if not w]
            # One request proven unanswered is the finding; only when none is, it is not a verdict.
            unproven = "" if proven else "; ".join(sorted(set(why)))
            self.fail("jsonrpc.every-request-answered", f"requests never answered: {proven or pending}", unproven)

    async def _flush(self) -> None:
        """One more round trip: a late duplicate or a stray update lands before we judge.

        The round trip is an extension request (``AGENT_PROBE``), which the agent must answer; its
        silence is ``ext.request.respond``'s business (its own tests), not this machine's: once it
        went unanswered, later runs judge without the flush instead of waiting it out every time."""
        if self.ctx.no_flush:
            return
        try:
            silent = await probe_unanswered(self.peer)
        except PeerError:
            return
        if silent is not None:
            self.ctx.no_flush = True
            self.peer.transcript.note(
                f"(stateful) {silent}: the agent does not answer extension requests, so later runs judge "
                "without this last round trip"
            )


def machine_for(ctx: StatefulContext) -> type[AgentSessions]:
    """The machine class bound to ``ctx`` (a fresh subclass per test run, named like its base)."""
    bound = ctx

    class Bound(AgentSessions):
        ctx = bound

    Bound.__name__ = Bound.__qualname__ = AgentSessions.__name__
    return Bound


def write_scenario(out: Path, finding: Finding, transcript: Any, steps: list[str], note: str) -> str:
    """The failing replay as a scenario file (and its raw transcript); returns where."""
    out.mkdir(parents=True, exist_ok=True)
    clause = finding.clause
    stem = f"stateful-{re.sub(r'[^A-Za-z0-9]+', '-', clause)}"
    jsonl = out / f"{stem}.transcript.jsonl"
    # A report like any other (it lands under reports/): no path of this machine. The scenario
    # file replays with {{sandbox}} in place of the sandbox path; the raw transcript is evidence.
    jsonl.write_text(machine_paths(transcript.to_jsonl().decode("utf-8")), "utf-8")
    header = machine_paths(
        f"Shrunk failure of {clause} found by stateful fuzzing: {finding.message}\nSteps: {'; '.join(steps)}\n{note}"
    )
    try:
        from acp_conformance.scenario.convert import dump_scenario, transcript_to_scenario
        from acp_conformance.scenario.loader import load_text
    except ImportError:  # the scenario package is optional here: the transcript replays too
        return str(jsonl)
    data = transcript_to_scenario(
        transcript, name=stem, play="client", sent_by="client", description=f"Shrunk failure of {clause}"
    )
    plain = copy.deepcopy(data)
    data["steps"] = _expect_the_right_thing(list(data["steps"]), clause, finding.message)
    path = out / f"{stem}.yaml"
    text = dump_scenario(data, header=header)
    try:
        load_text(text, str(path))
    except Exception:  # any rejection: keep the plain recording, which replays the steps
        text = dump_scenario(plain, header=header)
    path.write_text(text, "utf-8")
    return f"{path} (transcript: {jsonl})"


def _expect_the_right_thing(steps: list[dict[str, Any]], clause: str, message: str) -> list[dict[str, Any]]:
    """Turn a recording into a regression test: expect what a conforming agent does where this one did not."""
    sends = {s["send"]["as"]: s["send"] for s in steps if "send" in s and "as" in s["send"]}
    answered = {s["expect"]["response"] for s in steps if "expect" in s and "response" in s["expect"]}
    prompts = [alias for alias, send in sends.items() if send.get("request") == "session/prompt"]
    if clause == "jsonrpc.every-request-answered":
        steps += [{"expect": {"response": a, "clause": clause}} for a in sends if a not in answered]
    elif clause in ("cancel.stop-reason", "session.close.cancels-work"):
        # The last prompt is the one cancelled: it must end cancelled (its recorded answer did not).
        target = prompts[-1] if prompts else None
        for s in steps:
            exp = s.get("expect", {})
            if target and exp.get("response") == target:
                exp.pop("error", None)
                exp["result"] = {"stopReason": "cancelled"}
                exp["clause"] = clause
                target = None
        if target:
            steps.append({"expect": {"response": target, "result": {"stopReason": "cancelled"}, "clause": clause}})
    elif clause in ("prompt.updates.before-response", "cancel.updates-before-response") and prompts:
        sid = sends[prompts[-1]].get("params", {}).get("sessionId")
        at = next(
            (i for i, s in enumerate(steps) if s.get("expect", {}).get("response") == prompts[-1]), len(steps) - 1
        )
        nothing: dict[str, Any] = {"notification": "session/update", "within": "500ms", "after": prompts[-1]}
        if sid:
            nothing["params"] = {"sessionId": sid}
        nothing["clause"] = clause
        steps.insert(at + 1, {"expect_nothing": nothing})
    else:
        steps.append({"note": f"the recording above breaks {clause}: {message}"})
    return steps
