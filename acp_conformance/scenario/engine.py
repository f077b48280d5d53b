"""Running a scenario on a ``Peer`` of either role.

The engine is role-agnostic: it sends what the steps say, matches what the
peer sends against the expectations, answers the peer's requests by the
scenario's policies (or leaves them to the endpoint underneath: the
``ClientEndpoint`` when we play the client, the reference agent's handlers
when the mock agent plays a scenario), and turns every expectation into a
clause outcome.

Semantics, in short:

* Each branch has a *cursor*: ``expect`` looks for the first matching
  inbound frame after the previous match (frames in between are skipped),
  so the steps' order is the order asserted.  ``after:`` moves the search
  start to a named frame; ``before:`` bounds it (and fails at once when the
  bounding frame arrives first).
* Every wait has a deadline (``within``, else the scenario's ``timeout``,
  else the runner's); nothing sleeps to synchronise.
* A failed expectation of a MUST clause is FAIL and stops the scenario; of
  a SHOULD/MAY clause it is WARN and the scenario goes on.  A failed
  ``precondition`` makes the rest INCONCLUSIVE.  A failed expectation whose
  search window holds frames the peer garbled (a framing, JSON-RPC or
  schema violation on a frame that could have been the expected one) is
  INCONCLUSIVE: the passive checks report that breach, and the expectation
  cannot tell what the garbled frame would have said.

This module steps through the scenario; beside it, ``result`` (settings,
outcomes, the verdict), ``judge`` (how a finding becomes an outcome),
``answers`` (the answer policies) and ``frames`` (what an expectation matches).
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio

from acp_conformance._util import single_exception
from acp_conformance.core import jsonrpc
from acp_conformance.core.events import Event, Request, Response
from acp_conformance.endpoints.client import ClientEndpoint
from acp_conformance.errors import LocalProtocolError, PeerExited, PeerTimeout
from acp_conformance.peer import Peer
from acp_conformance.results import Status
from acp_conformance.scenario.answers import Answers, settle
from acp_conformance.scenario.frames import (
    brief,
    client_caps,
    content_miss,
    describe_spec,
    has_capability,
    index_of,
    kind_pred,
    message_of,
    method_of,
    peer_capabilities,
    raw_bytes,
)
from acp_conformance.scenario.judge import Judge
from acp_conformance.scenario.loader import default_seed
from acp_conformance.scenario.match import Mismatch, TemplateError, describe, lookup, match, parse_expr, render
from acp_conformance.scenario.model import (
    MODEL_STREAM,
    AnswerStep,
    CallSpec,
    CallStep,
    CheckStep,
    CloseStep,
    ExpectNothingStep,
    ExpectSpec,
    ExpectStep,
    IfStep,
    LetStep,
    NotApplicableStep,
    NoteStep,
    NothingSpec,
    ParallelStep,
    RawStep,
    Scenario,
    SendStep,
    WaitStep,
    iter_steps,
    step_clauses,
)
from acp_conformance.scenario.result import DEFAULT_PROMPTS, Outcome, ScenarioResult, Settings, Stop

#: The round trip of ``while_pending``: an extension request no peer implements; any answer will do.
PING = "_acp-conformance/ping"

__all__ = ["BeforeWait", "Engine", "Outcome", "ScenarioResult", "Settings", "run_scenario", "settle"]

#: ``before_wait(path, spec)``, called before each step that waits for the peer (``expect``,
#: ``expect_nothing``, ``wait``) with the step's path and spec.  A runner whose peer acts only when its
#: *user* does (a client under test that must be made to cancel, or to prompt again) makes it act here.
#: It returns None, or a reason the step cannot be judged (the scenario then ends INCONCLUSIVE with it).
#: Its own waits need deadlines: the step's deadline starts after it returns.
BeforeWait = Callable[[str, Any], Awaitable[str | None]]


@dataclass
class _Branch:
    cursor: int


_EOF = "eof"


class Engine:
    """One run of one scenario on one peer."""

    def __init__(
        self,
        scenario: Scenario,
        peer: Peer,
        *,
        endpoint: ClientEndpoint | None = None,
        sandbox: str | os.PathLike[str] | None = None,
        settings: Settings | None = None,
        before_wait: BeforeWait | None = None,
    ) -> None:
        self.s = scenario
        self.peer = peer
        self.endpoint = endpoint
        self.before_wait = before_wait
        self.settings = settings or Settings()
        self.seed = (
            self.settings.seed
            if self.settings.seed is not None
            else scenario.seed
            if scenario.seed is not None
            else default_seed(scenario.scenario)
        )
        self.timeout = scenario.timeout if scenario.timeout is not None else self.settings.timeout
        self.values: dict[str, Any] = {
            "sandbox": str(Path(sandbox).resolve()) if sandbox is not None else os.getcwd(),
            "seed": self.seed,
            "scenario": scenario.scenario,
            **{k: self.settings.prompts.get(k, v) for k, v in DEFAULT_PROMPTS.items()},
        }
        self.requests: dict[str, Any] = {}
        self.request_methods: dict[str, str] = {}
        self.anchors: dict[str, int] = {}
        #: our request name -> number of events when it was sent (its response comes later)
        self.sent_at: dict[str, int] = {}
        self.inbound: dict[str, Request] = {}
        #: captured name -> the inbound event it was captured from
        self.frames: dict[str, Event] = {}
        self.result = ScenarioResult(scenario, self.seed)
        self.judge = Judge(scenario, peer, self.result, self.settings)
        self.answers = Answers(
            scenario,
            peer,
            render=self._render,
            render_with=self._render_with,
            inbound=self.inbound,
            where=self.judge.where,
        )
        self._captured = anyio.Event()
        self._fake: Any = None
        self._initialized_sent = False
        #: How the peer ended, once a wait met its closed output (``_closed_first`` words it).
        self._exited: PeerExited | None = None
        #: The log's position half way through the last step wait that timed out (``_scan``).
        self._halfway: int | None = None

    # ================================================================ running
    async def run(self) -> ScenarioResult:
        self.values.update(self._render(self.s.vars))
        self.answers.install()
        try:
            await self._steps(self.s.steps, "steps", _Branch(0))
        except Stop as stop:
            self.result.end, self.result.reason = stop.end, stop.reason
        except BaseExceptionGroup as group:
            exc = single_exception(group)
            if isinstance(exc, Stop):
                self.result.end, self.result.reason = exc.end, exc.reason
            else:
                raise exc from None
        finally:
            self.answers.uninstall()
            self.result.duration = time.monotonic() - self.result.started
        return self.result

    async def _steps(self, steps: list[Any], prefix: str, br: _Branch) -> None:
        for i, step in enumerate(steps):
            path = f"{prefix}[{i}]"
            try:
                await self._step(step, path, br)
            except (TemplateError, LocalProtocolError) as exc:
                gone = [n for n in self.judge.missing if repr(n) in str(exc) or f"{{{{{n}" in str(exc)]
                if gone:
                    where = self.judge.where(path)
                    raise Stop("inconclusive", f"{where}: not reached: {gone[0]!r} never arrived") from None
                raise Stop("error", f"{self.judge.where(path)}: {exc}") from None
            except PeerExited as exc:
                # We could not send: the peer is gone; nothing after this step can be judged.
                raise Stop("inconclusive", f"{self.judge.where(path)}: the peer is gone ({exc.message})") from None

    async def _step(self, step: Any, path: str, br: _Branch) -> None:
        if isinstance(step, SendStep):
            sp = step.send
            if sp.while_pending is not None:
                await self._still_pending(sp.while_pending, path, sp.round_trip)
            if sp.held_by is not None and sp.as_ is not None:
                self.judge.held[sp.as_] = self._holding(sp.held_by)
            if sp.request is not None:
                await self._send_request(sp.request, sp.params, sp.id, sp.as_, sp.validate_)
            else:
                assert sp.notification is not None
                params = self._render(sp.params)
                sid = params.get("sessionId") if isinstance(params, dict) else None
                if sp.notification == "session/cancel" and self.endpoint is not None and isinstance(sid, str):
                    # The endpoint then answers permission requests arriving later with cancelled,
                    # as a conforming client does (unless the scenario holds them), until that turn ends.
                    self.endpoint.mark_cancelled(sid)
                await self.peer.notify(sp.notification, params, validate=sp.validate_)
        elif isinstance(step, CallStep):
            await self._call(step.call, path, br)
        elif isinstance(step, ExpectStep):
            await self._before_wait(path, step.expect)
            await self._expect(step.expect, path, br)
        elif isinstance(step, ExpectNothingStep):
            await self._before_wait(path, step.expect_nothing)
            await self._expect_nothing(step.expect_nothing, path, br)
        elif isinstance(step, CheckStep):
            self._check(step, path)
        elif isinstance(step, AnswerStep):
            await self.answers.answer(step, path)
        elif isinstance(step, WaitStep):
            await self._before_wait(path, step.wait)
            await self._wait(step, path)
        elif isinstance(step, IfStep):
            await self._if(step, path, br)
        elif isinstance(step, ParallelStep):
            await self._parallel(step, path, br)
        elif isinstance(step, RawStep):
            await self.peer.send_raw(raw_bytes(step.raw, self._render))
        elif isinstance(step, CloseStep):
            self.peer.transcript.note("scenario: closing our output (the peer sees EOF)")
            await self.peer.transport.close_output()
        elif isinstance(step, LetStep):
            self.values.update(self._render(step.let))
        elif isinstance(step, NoteStep):
            self.peer.transcript.note(f"scenario: {self._render(step.note)}")
        elif isinstance(step, NotApplicableStep):
            raise Stop("not_applicable", self._render(step.not_applicable))
        else:  # pragma: no cover - the model admits nothing else
            raise AssertionError(step)

    async def _before_wait(self, path: str, spec: Any) -> None:
        if self.before_wait is None:
            return
        reason = await self.before_wait(path, spec)
        if reason:
            raise Stop("inconclusive", f"{self.judge.where(path)}: {reason}")

    # ============================================================ templates
    def _resolve(self, root: str, path: list[str | int], expr: str) -> Any:
        if root == "fake":
            return self._faker(path, expr)
        if root not in self.values:
            raise TemplateError(f"{{{{{expr}}}}}: {root!r} is not set (yet)")
        return lookup(self.values[root], path, expr)

    def _faker(self, path: list[str | int], expr: str) -> Any:
        if self._fake is None:
            from faker import Faker

            self._fake = Faker()
            self._fake.seed_instance(self.seed)
        provider = getattr(self._fake, str(path[0]), None) if path else None
        if provider is None or not callable(provider):
            raise TemplateError(f"{{{{{expr}}}}}: no such Faker provider")
        value = provider()
        return value if isinstance(value, (str, int, float, bool)) or value is None else str(value)

    def _render(self, value: Any) -> Any:
        return render(value, self._resolve)

    def _render_with(self, value: Any, extra: dict[str, Any]) -> Any:
        def resolve(root: str, path: list[str | int], expr: str) -> Any:
            if root in extra:
                return lookup(extra[root], path, expr)
            return self._resolve(root, path, expr)

        return render(value, resolve)

    # ============================================================== sending
    async def _send_request(self, method: str, params: Any, rid: Any, name: str | None, validate: bool) -> Any:
        params = self._render(params)
        explicit = self._render(rid) if rid is not None else None
        pos = len(self.peer.events)
        if method == "initialize" and self.endpoint is not None and isinstance(params, dict):
            self.endpoint.capabilities = client_caps(params.get("clientCapabilities"))
        sent = await self.peer.send_request(method, params, id=explicit, validate=validate)
        if method == "session/prompt" and self.endpoint is not None and isinstance(params, dict):
            sid = params.get("sessionId")
            if isinstance(sid, str):
                self.endpoint.note_prompt(sid, sent)  # a new turn: an earlier cancel no longer applies
        if name:
            self.requests[name] = sent
            self.request_methods[name] = method
            self.anchors[name] = pos
            self.sent_at[name] = pos
            message: dict[str, Any] = {"jsonrpc": "2.0", "id": sent, "method": method}
            if params is not None:
                message["params"] = params
            self._set(name, message)
        return sent

    def _holding(self, names: list[str]) -> str | None:
        """What of ``names`` holds the peer's turn open right now (the first that does), or None:
        a captured request of the peer we have not answered, or (``model_stream``) a hold probe
        of the runner (a slow reply of its scripted model endpoint)."""
        pending = {jsonrpc.id_key(rid) for rid, _ in self.peer.conn.pending_incoming}
        for name in names:
            if name == MODEL_STREAM:
                probes = self.endpoint.hold_probes if self.endpoint is not None else []
                for probe in probes:
                    reason = probe()
                    if reason:
                        return reason
                continue
            req = self.inbound.get(name)
            if req is not None and jsonrpc.id_key(req.id) in pending:
                return f"the peer's {req.method} (id {req.id!r}, captured as {name}) was unanswered, held by us"
        return None

    async def _still_pending(self, name: str, path: str, round_trip: bool = True) -> None:
        """The race precondition of ``while_pending``: OUR request ``name`` is still unanswered.

        A response that precedes what we send next owes nothing to it (a turn that
        ended before our cancel went out cannot be judged on the cancel).  Frames
        the peer wrote before a response may still be in the pipe, so a round trip
        comes first: an ``_``-prefixed request every peer answers somehow (an error
        is fine), whose answer arrives after all the peer wrote before it.  That
        narrows the crossing window to the time the peer takes to read our frame.
        ``round_trip=False`` skips it, where any delay would let the peer move on.
        """
        if name not in self.requests:
            raise Stop("error", f"{self.judge.where(path)}: while_pending: {name!r} names no request sent yet")
        key = jsonrpc.id_key(self.requests[name])
        method = self.request_methods.get(name, "request")

        def answered() -> bool:
            return any(
                isinstance(e, Response) and e.id is not None and jsonrpc.id_key(e.id) == key for e in self.peer.events
            )

        if round_trip and not answered():
            ping = await self.peer.send_request(PING, {}, validate=False)
            try:
                await self.peer.wait_response(ping, method=PING, timeout=self.timeout)
            except PeerTimeout:
                pass  # a peer that ignores unknown requests: judge on what has arrived
        if answered():
            raise Stop(
                "inconclusive",
                f"precondition not met at {self.judge.where(path)}: {name} ({method}) was answered before this "
                "step went out, so the race could not be provoked (give a prompt that keeps the peer busy)",
            )

    def _set(self, name: str, value: Any) -> None:
        self.values[name] = value
        ev, self._captured = self._captured, anyio.Event()
        ev.set()

    # =========================================================== expecting
    def _start(self, after: str | None, br: _Branch) -> int:
        if after is None:
            return br.cursor
        if after not in self.anchors:
            raise TemplateError(f"after: {after!r} has not happened (yet)")
        return self.anchors[after]

    def _before_pred(self, before: str | None) -> tuple[Callable[[Event], bool] | None, int | None]:
        """(predicate for the bounding frame, or its index when it is already known)."""
        if before is None:
            return None, None
        if before in self.requests:
            key = jsonrpc.id_key(self.requests[before])
            return (lambda ev: isinstance(ev, Response) and jsonrpc.id_key(ev.id) == key), None
        if before in self.anchors:
            return None, self.anchors[before] - 1
        raise TemplateError(f"before: {before!r} has not happened (yet)")

    async def _scan(
        self, start: int, accept: Callable[[Event], str | None], timeout: float
    ) -> tuple[int, Event | None, str | None]:
        """First event at index >= start that ``accept`` tags; ``(-1, None, None)`` on timeout.

        ``Peer.wait_for`` offers each event to the predicate exactly once, in order, from
        ``start`` on; counting the calls therefore gives the index of the event it returns.
        """
        calls = 0
        tag: str | None = None

        def pred(ev: Event) -> bool:
            nonlocal calls, tag
            calls += 1
            tag = accept(ev)
            return tag is not None

        # The log's position half way through the wait: a turn streaming after it is still at work
        # (``Peer.turn_in_progress``), kept for the step that judges a missing answer (``_unproven``).
        self._halfway = None
        halfway: list[int] = []
        mark = asyncio.get_running_loop().call_later(timeout / 2, lambda: halfway.append(len(self.peer.events)))
        try:
            ev = await self.peer.wait_for(pred, timeout=timeout, start=start, what="scenario frame")
        except PeerTimeout:
            self._halfway = halfway[0] if halfway else None
            return -1, None, None
        except PeerExited as exc:
            self._exited = exc
            return -1, None, _EOF
        finally:
            mark.cancel()
        return start + calls - 1, ev, tag

    def _closed_first(self) -> str:
        """Why a step saw nothing when the peer closed its output: how it ended and what it said
        last on stderr, when known, so a reader tells a crash from a clean close without a rerun."""
        other = "agent" if self.s.plays == "client" else "client"
        said = f"the {other} closed its output first"
        return said if self._exited is None else self._exited.describe(other, message=said)

    def _unproven(self, rid: Any, method: str | None) -> str:
        """Why our ``method`` request ``rid``, still without its answer, is not proven unanswered,
        or "": the rules the suite's own tests judge a silence by.  A turn the peer kept streaming
        in the second half of the step's wait (``Peer.turn_in_progress``) is at work, not silent;
        otherwise ``Peer.why_unproven`` (the peer exited and nothing shows it had read it; an
        answer under a wrong id came meanwhile; we held a request of the peer's)."""
        if rid is None or not self.peer.conn.is_outstanding(rid):
            return ""
        working = self.peer.turn_in_progress(method or "", self._halfway)
        if working:
            return (
                f"{method} (id {rid!r}) is still being worked on: the peer kept streaming turn output in the "
                f"second half of the wait ({working}), and the spec sets no time for a turn"
            )
        return self.peer.why_unproven(rid)

    def _deadline(self, within: float | None, is_initialize: bool = False) -> float:
        limit = within if within is not None else self.timeout
        if is_initialize and not self._initialized_sent:
            limit = max(limit, self.settings.startup_timeout)
        return limit

    async def _call(self, spec: CallSpec, path: str, br: _Branch) -> None:
        pos = len(self.peer.events)
        rid = await self._send_request(spec.request, spec.params, spec.id, None, spec.validate_)
        key = jsonrpc.id_key(rid)
        is_response: Callable[[Event], bool] = lambda ev: isinstance(ev, Response) and jsonrpc.id_key(ev.id) == key  # noqa: E731
        limit = self._deadline(spec.within, spec.request == "initialize")
        self._initialized_sent = self._initialized_sent or spec.request == "initialize"
        idx, ev, tag = await self._scan(pos, lambda e: "match" if is_response(e) else None, limit)
        found: dict[str, Any] = {}
        what = f"call {spec.request}: a response" + (
            f" with result {describe(spec.result)}"
            if spec.result is not None
            else f" with error {describe(spec.error)}"
            if spec.error is not None
            else ""
        )
        if ev is None:
            why = self._closed_first() if tag == _EOF else f"nothing within {limit:g} s"
            self.judge.fail(spec, path, what, why, pos, "response", None, unproven=self._unproven(rid, spec.request))
            return
        assert isinstance(ev, Response)
        if spec.result is None and spec.error is None and ev.is_error:
            miss: Any = Mismatch("", "a result", f"error {describe(ev.error)}")
        else:
            miss = content_miss(spec, ev, found, self._render)
        if miss is not None:
            self.judge.fail(spec, path, what, f"frame #{idx} {miss}", pos, "response", None, [ev])
            return
        self.values.update(found)
        if spec.as_:
            self.requests[spec.as_] = rid
            self.request_methods[spec.as_] = spec.request
            self.anchors[spec.as_] = idx + 1
            self.sent_at[spec.as_] = pos
            self.frames[spec.as_] = ev
            self._set(spec.as_, ev.message)
        br.cursor = max(br.cursor, idx + 1)
        self.judge.passed(spec, path, f"{what}: frame #{idx}")

    async def _expect(self, spec: ExpectSpec, path: str, br: _Branch) -> None:
        kind_ok = kind_pred(spec, self.requests, self._render)
        start = self._start(spec.after, br)
        before_pred, before_idx = self._before_pred(spec.before)
        is_init = spec.response is not None and self.request_methods.get(spec.response) == "initialize"
        limit = self._deadline(spec.within, is_init)
        what = describe_spec(spec, self._render)
        if spec.response is not None:
            # A response is unique: if it came before the search start, the order is wrong.
            early = self._earlier(kind_ok, self.sent_at.get(spec.response, 0), start)
            if early is not None:
                self.judge.fail(
                    spec,
                    path,
                    what,
                    f"it arrived as frame #{early}, before the frame the previous step matched (#{start - 1}): "
                    "the order is wrong",
                    start,
                    "response",
                    None,
                    [self.peer.events[early]],
                )
                return
        found: dict[str, Any] = {}
        near: list[tuple[int, Event, Any]] = []

        def accept(ev: Event) -> str | None:
            if before_pred is not None and before_pred(ev):
                return "before"
            if not kind_ok(ev):
                return None
            got: dict[str, Any] = {}
            miss = content_miss(spec, ev, got, self._render)
            if miss is None:
                found.clear()
                found.update(got)
                return "match"
            near.append((len(near), ev, miss))
            # A response to our request is unique: once it is here and wrong, stop waiting.
            return "mismatch" if spec.response is not None else None

        if before_idx is not None:
            idx, ev, tag = -1, None, None
            for i in range(start, min(before_idx, len(self.peer.events))):
                if accept(self.peer.events[i]) == "match":
                    idx, ev, tag = i, self.peer.events[i], "match"
                    break
            if ev is None:
                tag = "before"
        else:
            idx, ev, tag = await self._scan(start, accept, limit)
        if tag == "mismatch" and ev is not None:
            miss = near[-1][2]
            self.judge.fail(spec, path, what, f"frame #{idx} {miss}", start, spec.frame_kind(), None, [ev])
            return
        if tag != "match" or ev is None:
            if tag == "before":
                why = f"{spec.before!r} arrived first"
            elif tag == _EOF:
                why = self._closed_first()
            else:
                why = f"nothing matched within {limit:g} s"
            closest = [f"frame {brief(e)} ({m})" for _, e, m in near[-3:]]
            if closest:
                why += "; closest: " + "; ".join(closest)
            closest_frames = [e for _, e, _ in near[-3:]]
            # No answer to our request at all (not a wrong one): judged only where proven.
            unproven = ""
            if spec.response and tag != "before" and not near:
                unproven = self._unproven(self.requests.get(spec.response), self.request_methods.get(spec.response))
            self.judge.fail(
                spec, path, what, why, start, spec.frame_kind(), method_of(spec), closest_frames, unproven=unproven
            )
            return
        self.values.update(found)
        if spec.as_:
            self.anchors[spec.as_] = idx + 1
            self.frames[spec.as_] = ev
            if isinstance(ev, Request):
                self.inbound[spec.as_] = ev
            self._set(spec.as_, message_of(ev))
        elif found:
            self._set_many()
        br.cursor = max(br.cursor, idx + 1)
        self.judge.passed(spec, path, f"{what}: frame #{idx}")

    def _set_many(self) -> None:
        ev, self._captured = self._captured, anyio.Event()
        ev.set()

    def _earlier(self, kind_ok: Callable[[Event], bool], lo: int, hi: int) -> int | None:
        for i in range(lo, min(hi, len(self.peer.events))):
            if kind_ok(self.peer.events[i]):
                return i
        return None

    async def _expect_nothing(self, spec: NothingSpec, path: str, br: _Branch) -> None:
        kind_ok = kind_pred(spec, self.requests, self._render)
        start = self._start(spec.after, br)
        what = "no " + describe_spec(spec, self._render).removeprefix("a ").removeprefix("an ")

        def hit(ev: Event) -> bool:
            return kind_ok(ev) and content_miss(spec, ev, {}, self._render) is None

        if spec.until is None:
            assert spec.within is not None
            got = await self.peer.quiet_for(spec.within, hit, start)
            if got is None:
                self.judge.passed(spec, path, f"{what} within {spec.within:g} s")
            else:
                idx = index_of(self.peer.events, got, start)
                self.judge.fail(spec, path, what, f"frame #{idx} matched: {brief(got)}", start, "", None, [got])
            return
        end = await self._until_index(spec.until, spec.within)
        if end is None:
            if spec.precondition is not None:
                raise Stop(
                    "inconclusive",
                    f"precondition not established at {self.judge.where(path)}: {spec.precondition} "
                    f"({spec.until!r} never arrived, so the window has no end)",
                )
            self.judge.record(
                spec.clause,
                path,
                "expect_nothing",
                Status.INCONCLUSIVE,
                f"{what} until {spec.until!r}: that frame never arrived, so the window has no end",
                self.judge.evidence([]),
            )
            return
        for i in range(start, end):
            ev = self.peer.events[i]
            if hit(ev):
                self.judge.fail(spec, path, what, f"frame #{i} matched: {brief(ev)}", start, "", None, [ev])
                return
        self.judge.passed(spec, path, f"{what} between frame #{start} and {spec.until!r} (#{end})")

    async def _until_index(self, name: str, within: float | None = None) -> int | None:
        limit = within if within is not None else self.timeout
        if name == "eof" and "eof" not in self.requests and "eof" not in self.anchors:
            closed = await self.peer.wait_closed(limit)
            return len(self.peer.events) if closed else None
        if name in self.requests:
            key = jsonrpc.id_key(self.requests[name])
            idx, ev, _ = await self._scan(
                self.sent_at.get(name, 0),
                lambda e: "x" if isinstance(e, Response) and jsonrpc.id_key(e.id) == key else None,
                limit,
            )
            return idx if ev is not None else None
        if name in self.anchors:
            return self.anchors[name] - 1
        raise TemplateError(f"until: {name!r} has not happened (yet)")

    def _check(self, step: CheckStep, path: str) -> None:
        spec = step.check
        root, sub = parse_expr(spec.ref)
        value = self._resolve(root, sub, spec.ref)
        found: dict[str, Any] = {}
        miss = match(self._render(spec.matches), value, found)
        what = f"{spec.ref} to match {describe(spec.matches)}"
        if miss is None:
            self.values.update(found)
            if found:
                self._set_many()
            if spec.clause:
                self.judge.record(spec.clause, path, "check", Status.PASS, what)
            return
        if spec.precondition is not None:
            where = self.judge.where(path)
            raise Stop("inconclusive", f"precondition not met at {where}: {spec.precondition} ({miss})")
        frame = self.frames.get(root)
        broken = self.judge.violations_on(frame) if frame is not None else []
        if broken:
            clauses = sorted({v.clause_id for v in broken})
            self.judge.record(
                spec.clause,
                path,
                "check",
                Status.INCONCLUSIVE,
                f"expected {what}; observed {miss} - not judged: that frame broke {', '.join(clauses)} "
                "(reported by the transcript checks)",
                self.judge.evidence([frame] if frame is not None else []),
            )
            where = self.judge.where(path)
            raise Stop("inconclusive", f"{where}: the frame checked was garbled ({', '.join(clauses)})")
        near = [frame] if frame is not None else []
        message = f"expected {what}; observed {miss}"
        if self.judge.unheld(spec, path, "check", message, near):
            return
        self.judge.failure(spec.clause or [], path, "check", message + self.judge.held_note(spec), near, True)

    async def _wait(self, step: WaitStep, path: str) -> None:
        spec = step.wait
        limit = spec.within if spec.within is not None else self.timeout
        ok = False
        what = ""
        if spec.captured is not None:
            what = f"{spec.captured!r} to be captured"
            with anyio.move_on_after(limit):
                while spec.captured not in self.values:
                    await self._captured.wait()
                ok = True
        elif spec.eof:
            what = "the peer to close its output"
            ok = await self.peer.wait_closed(limit)
        elif spec.quiet is not None:
            what = f"{spec.quiet:g} s without a frame from the peer"
            with anyio.move_on_after(limit):
                while True:
                    got = await self.peer.quiet_for(spec.quiet, lambda ev: True, len(self.peer.events))
                    if got is None:
                        ok = True
                        break
        if ok:
            if spec.clause:
                self.judge.record(spec.clause, path, "wait", Status.PASS, f"waited for {what}")
            return
        if spec.clause:
            self.judge.failure(spec.clause, path, "wait", f"expected {what} within {limit:g} s", [], False)
            return
        raise Stop("inconclusive", f"{self.judge.where(path)}: waited {limit:g} s for {what} in vain")

    async def _if(self, step: IfStep, path: str, br: _Branch) -> None:
        cond = step.if_
        if cond.capability is not None:
            holds = has_capability(peer_capabilities(self.peer.events, self.s.plays), cond.capability)
            why = f"the peer does not advertise {cond.capability}"
        elif cond.not_capability is not None:
            holds = not has_capability(peer_capabilities(self.peer.events, self.s.plays), cond.not_capability)
            why = f"the peer advertises {cond.not_capability}"
        else:
            holds = cond.captured in self.values
            why = f"nothing captured {cond.captured!r}"
        if holds:
            taken, untaken = step.then, step.else_
            taken_path = f"{path}.then"
        else:
            taken, untaken = step.else_, step.then
            taken_path = f"{path}.else"
        if not holds:
            for _, sub in iter_steps(untaken):
                for cid in step_clauses(sub):
                    self.result.skipped.setdefault(cid, why)
        await self._steps(taken, taken_path, br)

    async def _parallel(self, step: ParallelStep, path: str, br: _Branch) -> None:
        branches = [_Branch(br.cursor) for _ in step.parallel]
        try:
            async with anyio.create_task_group() as tg:
                for b, steps in enumerate(step.parallel):
                    tg.start_soon(self._steps, steps, f"{path}.parallel[{b}]", branches[b])
        except BaseExceptionGroup as group:
            raise single_exception(group) from None
        br.cursor = max(b.cursor for b in branches)


async def run_scenario(
    scenario: Scenario,
    peer: Peer,
    *,
    endpoint: ClientEndpoint | None = None,
    sandbox: str | os.PathLike[str] | None = None,
    settings: Settings | None = None,
    before_wait: BeforeWait | None = None,
) -> ScenarioResult:
    """Run ``scenario`` on an open ``peer`` (inside ``async with peer``); ``before_wait``: see ``BeforeWait``."""
    if scenario.plays == "client" and peer.role.value != "client":
        raise ValueError(f"scenario {scenario.scenario} plays the client, but the peer plays the {peer.role.value}")
    if scenario.plays == "agent" and peer.role.value != "agent":
        raise ValueError(f"scenario {scenario.scenario} plays the agent, but the peer plays the {peer.role.value}")
    engine = Engine(scenario, peer, endpoint=endpoint, sandbox=sandbox, settings=settings, before_wait=before_wait)
    result = await engine.run()
    await settle(peer, scenario)
    result.transcript = peer.transcript
    return result
