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
"""

from __future__ import annotations

import fnmatch
import os
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import orjson

from acp_conformance._util import single_exception
from acp_conformance.clauses import registry
from acp_conformance.core import jsonrpc
from acp_conformance.core.events import Event, Notification, Request, Response, Violation
from acp_conformance.endpoints.client import ClientCapabilities, ClientEndpoint, PermissionPolicy
from acp_conformance.errors import LocalProtocolError, PeerExited, PeerTimeout
from acp_conformance.peer import NO_ANSWER, HandlerError, Peer
from acp_conformance.results import ClauseResult, Status, adjust, breach_status, combine
from acp_conformance.scenario.loader import default_seed
from acp_conformance.scenario.match import Mismatch, TemplateError, describe, lookup, match, parse_expr, render
from acp_conformance.scenario.model import (
    MODEL_STREAM,
    PERMISSION_POLICIES,
    AnswerStep,
    CallSpec,
    CallStep,
    CheckStep,
    CloseStep,
    ErrorPolicy,
    ExpectNothingStep,
    ExpectSpec,
    ExpectStep,
    IfStep,
    LetStep,
    NotApplicableStep,
    NoteStep,
    NothingSpec,
    ParallelStep,
    RawSpec,
    RawStep,
    ResultPolicy,
    Scenario,
    SendStep,
    WaitStep,
    iter_steps,
    step_clauses,
)
from acp_conformance.transcript import Entry

#: The round trip of ``while_pending``: an extension request no peer implements; any answer will do.
PING = "_acp-conformance/ping"

__all__ = ["BeforeWait", "Engine", "Outcome", "ScenarioResult", "Settings", "run_scenario", "settle"]

#: ``before_wait(path, spec)``, called before each step that waits for the peer (``expect``,
#: ``expect_nothing``, ``wait``) with the step's path and spec.  A runner whose peer acts only when its
#: *user* does (a client under test that must be made to cancel, or to prompt again) makes it act here.
#: It returns None, or a reason the step cannot be judged (the scenario then ends INCONCLUSIVE with it).
#: Its own waits need deadlines: the step's deadline starts after it returns.
BeforeWait = Callable[[str, Any], Awaitable[str | None]]

_DEFAULT_PROMPTS = {
    "prompt": "Hello! Please reply with a short greeting.",
    "tool_prompt": "acp:tool Please create a file named acp-probe.txt containing 'hello' using your tools.",
    "long_prompt": "acp:long Please count slowly from one to one thousand, one number per line.",
}


@dataclass
class Settings:
    """How a runner wants scenarios run."""

    #: Default deadline of every wait (a scenario's ``timeout`` and a step's ``within`` override it).
    timeout: float = 10.0
    #: Deadline of the first ``initialize`` answer.
    startup_timeout: float = 20.0
    #: Faker seed (overrides the scenario's).
    seed: int | None = None
    #: Texts for ``{{prompt}}``, ``{{tool_prompt}}``, ``{{long_prompt}}`` (steering real agents).
    prompts: dict[str, str] = field(default_factory=lambda: dict(_DEFAULT_PROMPTS))
    #: Transcript entries shown as evidence of a failure.
    evidence_lines: int = 30


@dataclass
class Outcome:
    """What one judged step found."""

    step: str
    line: int | None
    kind: str
    clauses: list[str]
    status: Status
    message: str
    evidence: str = ""

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "step": self.step,
            "line": self.line,
            "kind": self.kind,
            "clauses": self.clauses,
            "status": self.status.value,
            "message": self.message,
        }
        if self.evidence and self.status is not Status.PASS:
            out["evidence"] = self.evidence
        return out


@dataclass
class ScenarioResult:
    """A finished run: per-expectation outcomes, and per-clause results."""

    scenario: Scenario
    seed: int
    outcomes: list[Outcome] = field(default_factory=list)
    #: completed | failed | inconclusive | not_applicable | error
    end: str = "completed"
    reason: str = ""
    #: clause -> why it is NOT_APPLICABLE (its only expectations sat in a branch not taken)
    skipped: dict[str, str] = field(default_factory=dict)
    #: transcript-level (passive) results the runner added
    passive: list[ClauseResult] = field(default_factory=list)
    transcript: Any = None
    started: float = field(default_factory=time.monotonic)
    duration: float = 0.0

    def scenario_results(self) -> list[ClauseResult]:
        """One result per clause the scenario names."""
        out = []
        reg = registry()
        for cid in self.scenario.clauses():
            mine = [o for o in self.outcomes if cid in o.clauses]
            if mine:
                status = combine([_per_clause(o.status, cid, reg) for o in mine])
                worst = next(o for o in mine if _per_clause(o.status, cid, reg) is status)
                out.append(ClauseResult(cid, status, worst.message, worst.evidence))
            elif cid in self.skipped:
                out.append(ClauseResult(cid, Status.NOT_APPLICABLE, self.skipped[cid]))
            elif self.end == "not_applicable":
                out.append(ClauseResult(cid, Status.NOT_APPLICABLE, self.reason))
            else:
                why = f"not reached: {self.reason}" if self.reason else "not reached"
                out.append(ClauseResult(cid, Status.INCONCLUSIVE, why))
        return out

    def clause_results(self) -> list[ClauseResult]:
        """Scenario results plus the transcript-level (passive) ones."""
        return self.scenario_results() + list(self.passive)

    @property
    def failed(self) -> bool:
        reg = registry()
        return any(r.status is Status.FAIL and reg.get(r.clause).mandatory for r in self.clause_results())

    def verdict_word(self) -> str:
        if self.end == "error":
            return "error"
        if self.failed:
            return "fail"
        if self.end in ("inconclusive", "not_applicable"):
            return self.end
        if any(o.status is Status.INCONCLUSIVE for o in self.outcomes):
            return "inconclusive"  # an expectation could not be judged (e.g. a race nothing held)
        return "pass"

    def exit_status(self) -> int:
        """0 pass / not applicable, 1 fail, 2 error (bad scenario or setup), 3 inconclusive."""
        return {"pass": 0, "not_applicable": 0, "fail": 1, "error": 2, "inconclusive": 3}[self.verdict_word()]

    def verdict(self, *, command: str | None = None, transcript_path: str | None = None) -> dict[str, Any]:
        """The JSON verdict (what ``--verdict FILE`` writes)."""
        tested = "agent" if self.scenario.plays == "client" else "client"
        results = self.clause_results()
        counts: dict[str, int] = {}
        for r in results:
            counts[r.status.value] = counts.get(r.status.value, 0) + 1
        stderr = self.transcript.stderr()[-20:] if self.transcript is not None else []
        return {
            "scenario": self.scenario.scenario,
            "file": self.scenario.source,
            "plays": self.scenario.plays,
            "peer": {"role": tested, "command": command, "stderr_tail": stderr},
            "seed": self.seed,
            "verdict": self.verdict_word(),
            "exit_status": self.exit_status(),
            "end": self.end,
            "reason": self.reason,
            "duration_s": round(self.duration, 3),
            "counts": dict(sorted(counts.items())),
            "clauses": [r.to_json() for r in results],
            "expectations": [o.to_json() for o in self.outcomes],
            "transcript": transcript_path,
        }

    def summary(self) -> str:
        """Human-readable lines: one per expectation that did not pass, then the verdict."""
        lines = []
        for o in self.outcomes:
            if o.status is not Status.PASS:
                where = f"{self.scenario.source}:{o.line}" if o.line else self.scenario.source
                lines.append(f"{o.status.value:<12} {', '.join(o.clauses) or '-'} at {where} {o.step}: {o.message}")
        for r in self.passive:
            if r.status in (Status.FAIL, Status.WARN):
                lines.append(f"{r.status.value:<12} {r.clause} (transcript): {r.message}")
        lines.append(
            f"scenario {self.scenario.scenario}: {self.verdict_word().upper()} ({self.end}"
            + (f": {self.reason}" if self.reason and self.end != "completed" else "")
            + f"; seed {self.seed})"
        )
        return "\n".join(lines)


def _per_clause(status: Status, cid: str, reg: Any) -> Status:
    return adjust(reg.get(cid), status)


class _Stop(Exception):
    def __init__(self, end: str, reason: str) -> None:
        super().__init__(reason)
        self.end = end
        self.reason = reason


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
            **{k: self.settings.prompts.get(k, v) for k, v in _DEFAULT_PROMPTS.items()},
        }
        self.requests: dict[str, Any] = {}
        #: send name (with held_by) -> what held the peer's turn open when it went out (None: nothing)
        self.held: dict[str, str | None] = {}
        #: names an expectation should have captured but did not (it failed without stopping)
        self.missing: set[str] = set()
        self.request_methods: dict[str, str] = {}
        self.anchors: dict[str, int] = {}
        #: our request name -> number of events when it was sent (its response comes later)
        self.sent_at: dict[str, int] = {}
        self.inbound: dict[str, Request] = {}
        #: captured name -> the inbound event it was captured from
        self.frames: dict[str, Event] = {}
        self.result = ScenarioResult(scenario, self.seed)
        self._captured = anyio.Event()
        self._fake: Any = None
        self._orig: dict[str, Callable[[Request], Awaitable[Any]] | None] = {}
        self._initialized_sent = False
        self.reg = registry()

    # ================================================================ running
    async def run(self) -> ScenarioResult:
        self.values.update(self._render(self.s.vars))
        self._install()
        try:
            await self._steps(self.s.steps, "steps", _Branch(0))
        except _Stop as stop:
            self.result.end, self.result.reason = stop.end, stop.reason
        except BaseExceptionGroup as group:
            exc = single_exception(group)
            if isinstance(exc, _Stop):
                self.result.end, self.result.reason = exc.end, exc.reason
            else:
                raise exc from None
        finally:
            self._uninstall()
            self.result.duration = time.monotonic() - self.result.started
        return self.result

    async def _steps(self, steps: list[Any], prefix: str, br: _Branch) -> None:
        for i, step in enumerate(steps):
            path = f"{prefix}[{i}]"
            try:
                await self._step(step, path, br)
            except (TemplateError, LocalProtocolError) as exc:
                gone = [n for n in self.missing if repr(n) in str(exc) or f"{{{{{n}" in str(exc)]
                if gone:
                    where = self._where(path)
                    raise _Stop("inconclusive", f"{where}: not reached: {gone[0]!r} never arrived") from None
                raise _Stop("error", f"{self._where(path)}: {exc}") from None
            except PeerExited as exc:
                # We could not send: the peer is gone; nothing after this step can be judged.
                raise _Stop("inconclusive", f"{self._where(path)}: the peer is gone ({exc.message})") from None

    async def _step(self, step: Any, path: str, br: _Branch) -> None:
        if isinstance(step, SendStep):
            sp = step.send
            if sp.while_pending is not None:
                await self._still_pending(sp.while_pending, path, sp.round_trip)
            if sp.held_by is not None and sp.as_ is not None:
                self.held[sp.as_] = self._holding(sp.held_by)
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
            await self._answer(step, path)
        elif isinstance(step, WaitStep):
            await self._before_wait(path, step.wait)
            await self._wait(step, path)
        elif isinstance(step, IfStep):
            await self._if(step, path, br)
        elif isinstance(step, ParallelStep):
            await self._parallel(step, path, br)
        elif isinstance(step, RawStep):
            await self.peer.send_raw(self._raw_bytes(step.raw))
        elif isinstance(step, CloseStep):
            self.peer.transcript.note("scenario: closing our output (the peer sees EOF)")
            await self.peer.transport.close_output()
        elif isinstance(step, LetStep):
            self.values.update(self._render(step.let))
        elif isinstance(step, NoteStep):
            self.peer.transcript.note(f"scenario: {self._render(step.note)}")
        elif isinstance(step, NotApplicableStep):
            raise _Stop("not_applicable", self._render(step.not_applicable))
        else:  # pragma: no cover - the model admits nothing else
            raise AssertionError(step)

    async def _before_wait(self, path: str, spec: Any) -> None:
        if self.before_wait is None:
            return
        reason = await self.before_wait(path, spec)
        if reason:
            raise _Stop("inconclusive", f"{self._where(path)}: {reason}")

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
            self.endpoint.capabilities = _client_caps(params.get("clientCapabilities"))
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

    def _unheld(self, spec: Any, path: str, kind: str, message: str, near: list[Event]) -> bool:
        """A race expectation whose send nothing held: record it INCONCLUSIVE (True), or False to
        judge it (its turn was held open, so the order is proven)."""
        race = getattr(spec, "race", None)
        if race is None or self.held.get(race) is not None:
            return False
        self._record(
            list(spec.clause or []),
            path,
            kind,
            Status.INCONCLUSIVE,
            f"{self._where(path)}: {message} - not judged: nothing held the peer's turn open when {race!r} went "
            "out, so the turn may have ended before it reached the peer",
            self._evidence(near),
        )
        return True

    def _held_note(self, spec: Any) -> str:
        race = getattr(spec, "race", None)
        held = self.held.get(race) if race is not None else None
        return f" (the turn could not have ended by itself when {race!r} went out: {held})" if held else ""

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
            raise _Stop("error", f"{self._where(path)}: while_pending: {name!r} names no request sent yet")
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
            raise _Stop(
                "inconclusive",
                f"precondition not met at {self._where(path)}: {name} ({method}) was answered before this "
                "step went out, so the race could not be provoked (give a prompt that keeps the peer busy)",
            )

    def _raw_bytes(self, raw: str | RawSpec) -> bytes:
        if isinstance(raw, str):
            return str(self._render(raw)).encode("utf-8") + b"\n"
        if raw.text is not None:
            data = str(self._render(raw.text)).encode("utf-8")
        elif raw.hex is not None:
            data = bytes.fromhex(raw.hex)
        else:
            import base64

            data = base64.b64decode(raw.base64 or "")
        return data + (b"\n" if raw.newline else b"")

    def _set(self, name: str, value: Any) -> None:
        self.values[name] = value
        ev, self._captured = self._captured, anyio.Event()
        ev.set()

    # ============================================================ answering
    def _install(self) -> None:
        for method, policy in self.s.answers.items():
            if policy == "auto":
                continue
            self._orig[method] = self.peer.handlers.get(method)
            self.peer.handlers[method] = self._policy_handler(method, policy)

    def _uninstall(self) -> None:
        for method, orig in self._orig.items():
            if orig is None:
                self.peer.handlers.pop(method, None)
            else:
                self.peer.handlers[method] = orig

    def _policy_handler(self, method: str, policy: Any) -> Callable[[Request], Awaitable[Any]]:
        async def handler(req: Request) -> Any:
            if policy in ("hold", "never"):
                return NO_ANSWER
            if isinstance(policy, str) and policy in PERMISSION_POLICIES:
                return self._permission(policy, req)
            if isinstance(policy, ResultPolicy):
                return self._render_with(policy.result, {"request": req.message})
            if isinstance(policy, ErrorPolicy):
                err = self._render_with(policy.error.model_dump(), {"request": req.message})
                raise HandlerError(err["code"], err["message"], err.get("data"))
            raise AssertionError(policy)

        return handler

    @staticmethod
    def _permission(policy: str, req: Request) -> Any:
        options = req.params.get("options", []) if isinstance(req.params, dict) else []
        outcome = PermissionPolicy(policy).choose(options)
        return NO_ANSWER if outcome is None else {"outcome": outcome}

    async def _answer(self, step: AnswerStep, path: str) -> None:
        spec = step.answer
        req: Request | None = None
        if spec.request is not None:
            req = self.inbound.get(spec.request)
            if req is None:
                raise _Stop("error", f"{self._where(path)}: {spec.request!r} is not a captured request (yet)")
            rid = req.id
        else:
            rid = self._render(spec.id)
        result: Any = None
        error: dict[str, Any] | None = None
        if spec.policy is not None:
            assert req is not None
            if spec.policy == "auto":
                result, error = await self._auto_answer(req)
            else:
                result = self._permission(spec.policy, req)
                if result is NO_ANSWER:
                    return
        elif spec.error is not None:
            error = self._render(spec.error.model_dump(exclude_none=True))
        else:
            result = self._render(spec.result)
        outstanding = any(jsonrpc.id_key(i) == jsonrpc.id_key(rid) for i, _ in self.peer.conn.pending_incoming)
        if spec.again or not outstanding:
            frame: dict[str, Any] = {"jsonrpc": "2.0", "id": rid}
            if error is not None:
                frame["error"] = error
            else:
                frame["result"] = result
            self.peer.transcript.note(f"scenario: deliberately answering id {rid!r} (already answered or unknown)")
            await self.peer.send_raw(orjson.dumps(frame) + b"\n")
        elif error is not None:
            await self.peer.respond_error(rid, error["code"], error["message"], error.get("data"))
        else:
            method = req.method if req is not None else None
            await self.peer.respond(rid, result, method=method, validate=spec.validate_)

    async def _auto_answer(self, req: Request) -> tuple[Any, dict[str, Any] | None]:
        handler = self._orig.get(req.method, self.peer.handlers.get(req.method))
        if handler is None:
            return None, {"code": jsonrpc.ErrorCode.METHOD_NOT_FOUND, "message": f"method not found: {req.method}"}
        try:
            return await handler(req), None
        except HandlerError as exc:
            err: dict[str, Any] = {"code": exc.code, "message": exc.message}
            if exc.data is not None:
                err["data"] = exc.data
            return None, err

    # =========================================================== expecting
    def _kind_pred(self, spec: ExpectSpec | NothingSpec) -> Callable[[Event], bool]:
        kind = spec.frame_kind()
        if kind == "request":
            method = spec.request or ""
            return lambda ev: isinstance(ev, Request) and fnmatch.fnmatchcase(ev.method, method)
        if kind == "notification":
            method = spec.notification or ""
            return lambda ev: isinstance(ev, Notification) and fnmatch.fnmatchcase(ev.method, method)
        if kind == "violation":
            clause = spec.violation or ""
            return lambda ev: isinstance(ev, Violation) and fnmatch.fnmatchcase(ev.clause_id, clause)
        if kind == "response":
            name = spec.response or ""
            if name not in self.requests:
                raise TemplateError(f"response: {name!r} names no request we sent (yet)")
            key = jsonrpc.id_key(self.requests[name])
            return lambda ev: isinstance(ev, Response) and jsonrpc.id_key(ev.id) == key
        key = jsonrpc.id_key(self._render(spec.response_id))
        return lambda ev: isinstance(ev, Response) and jsonrpc.id_key(ev.id) == key

    def _content_miss(self, spec: ExpectSpec | NothingSpec | CallSpec, ev: Event, found: dict[str, Any]) -> Any:
        """``None`` when ``ev`` (of the right kind) matches the spec's patterns."""
        if isinstance(ev, (Request, Notification)):
            params = getattr(spec, "params", None)
            if params is None:
                return None
            value = ev.params if ev.has_params else _ABSENT_PARAMS
            if value is _ABSENT_PARAMS:
                return None if params == "$absent" else Mismatch("/params", describe(params), "no params")
            return match(self._render(params), value, found, "/params")
        if isinstance(ev, Response):
            if spec.result is not None:
                if ev.is_error:
                    return Mismatch("", "a result", f"error {describe(ev.error)}")
                return match(self._render(spec.result), ev.result, found, "/result")
            if spec.error is not None:
                if not ev.is_error:
                    return Mismatch("", "an error", f"result {describe(ev.result)}")
                return match(self._render(spec.error), ev.error, found, "/error")
            return None
        return None

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

        try:
            ev = await self.peer.wait_for(pred, timeout=timeout, start=start, what="scenario frame")
        except PeerTimeout:
            return -1, None, None
        except PeerExited:
            return -1, None, _EOF
        return start + calls - 1, ev, tag

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
            why = "the peer closed its output first" if tag == _EOF else f"nothing within {limit:g} s"
            self._fail(spec, path, what, why, pos, "response", None)
            return
        assert isinstance(ev, Response)
        if spec.result is None and spec.error is None and ev.is_error:
            miss: Any = Mismatch("", "a result", f"error {describe(ev.error)}")
        else:
            miss = self._content_miss(spec, ev, found)
        if miss is not None:
            self._fail(spec, path, what, f"frame #{idx} {miss}", pos, "response", None, [ev])
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
        self._pass(spec, path, f"{what}: frame #{idx}")

    async def _expect(self, spec: ExpectSpec, path: str, br: _Branch) -> None:
        kind_ok = self._kind_pred(spec)
        start = self._start(spec.after, br)
        before_pred, before_idx = self._before_pred(spec.before)
        is_init = spec.response is not None and self.request_methods.get(spec.response) == "initialize"
        limit = self._deadline(spec.within, is_init)
        what = self._describe(spec)
        if spec.response is not None:
            # A response is unique: if it came before the search start, the order is wrong.
            early = self._earlier(kind_ok, self.sent_at.get(spec.response, 0), start)
            if early is not None:
                self._fail(
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
            miss = self._content_miss(spec, ev, got)
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
            self._fail(spec, path, what, f"frame #{idx} {miss}", start, spec.frame_kind(), None, [ev])
            return
        if tag != "match" or ev is None:
            if tag == "before":
                why = f"{spec.before!r} arrived first"
            elif tag == _EOF:
                why = "the peer closed its output first"
            else:
                why = f"nothing matched within {limit:g} s"
            closest = [f"frame {_brief(e)} ({m})" for _, e, m in near[-3:]]
            if closest:
                why += "; closest: " + "; ".join(closest)
            self._fail(spec, path, what, why, start, spec.frame_kind(), _method_of(spec), [e for _, e, _ in near[-3:]])
            return
        self.values.update(found)
        if spec.as_:
            self.anchors[spec.as_] = idx + 1
            self.frames[spec.as_] = ev
            if isinstance(ev, Request):
                self.inbound[spec.as_] = ev
            self._set(spec.as_, _message_of(ev))
        elif found:
            self._set_many()
        br.cursor = max(br.cursor, idx + 1)
        self._pass(spec, path, f"{what}: frame #{idx}")

    def _set_many(self) -> None:
        ev, self._captured = self._captured, anyio.Event()
        ev.set()

    def _earlier(self, kind_ok: Callable[[Event], bool], lo: int, hi: int) -> int | None:
        for i in range(lo, min(hi, len(self.peer.events))):
            if kind_ok(self.peer.events[i]):
                return i
        return None

    async def _expect_nothing(self, spec: NothingSpec, path: str, br: _Branch) -> None:
        kind_ok = self._kind_pred(spec)
        start = self._start(spec.after, br)
        what = "no " + self._describe(spec).removeprefix("a ").removeprefix("an ")

        def hit(ev: Event) -> bool:
            return kind_ok(ev) and self._content_miss(spec, ev, {}) is None

        if spec.until is None:
            assert spec.within is not None
            got = await self.peer.quiet_for(spec.within, hit, start)
            if got is None:
                self._pass(spec, path, f"{what} within {spec.within:g} s")
            else:
                idx = _index_of(self.peer.events, got, start)
                self._fail(spec, path, what, f"frame #{idx} matched: {_brief(got)}", start, "", None, [got])
            return
        end = await self._until_index(spec.until, spec.within)
        if end is None:
            self._record(
                spec.clause,
                path,
                "expect_nothing",
                Status.INCONCLUSIVE,
                f"{what} until {spec.until!r}: that frame never arrived, so the window has no end",
                self._evidence([]),
            )
            return
        for i in range(start, end):
            ev = self.peer.events[i]
            if hit(ev):
                self._fail(spec, path, what, f"frame #{i} matched: {_brief(ev)}", start, "", None, [ev])
                return
        self._pass(spec, path, f"{what} between frame #{start} and {spec.until!r} (#{end})")

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
                self._record(spec.clause, path, "check", Status.PASS, what)
            return
        if spec.precondition is not None:
            raise _Stop("inconclusive", f"precondition not met at {self._where(path)}: {spec.precondition} ({miss})")
        frame = self.frames.get(root)
        broken = self._violations_on(frame) if frame is not None else []
        if broken:
            clauses = sorted({v.clause_id for v in broken})
            self._record(
                spec.clause,
                path,
                "check",
                Status.INCONCLUSIVE,
                f"expected {what}; observed {miss} - not judged: that frame broke {', '.join(clauses)} "
                "(reported by the transcript checks)",
                self._evidence([frame] if frame is not None else []),
            )
            raise _Stop("inconclusive", f"{self._where(path)}: the frame checked was garbled ({', '.join(clauses)})")
        near = [frame] if frame is not None else []
        message = f"expected {what}; observed {miss}"
        if self._unheld(spec, path, "check", message, near):
            return
        self._judge_failure(spec.clause or [], path, "check", message + self._held_note(spec), near, True)

    def _violations_on(self, frame: Event) -> list[Violation]:
        index = getattr(frame, "index", None)
        return [
            v
            for v in self.peer.events
            if isinstance(v, Violation) and v.severity == "error" and index is not None and v.index == index
        ]

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
                self._record(spec.clause, path, "wait", Status.PASS, f"waited for {what}")
            return
        if spec.clause:
            self._judge_failure(spec.clause, path, "wait", f"expected {what} within {limit:g} s", [], False)
            return
        raise _Stop("inconclusive", f"{self._where(path)}: waited {limit:g} s for {what} in vain")

    async def _if(self, step: IfStep, path: str, br: _Branch) -> None:
        cond = step.if_
        if cond.capability is not None:
            holds = _has(self._peer_capabilities(), cond.capability)
            why = f"the peer does not advertise {cond.capability}"
        elif cond.not_capability is not None:
            holds = not _has(self._peer_capabilities(), cond.not_capability)
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

    # =============================================================== judging
    def _peer_capabilities(self) -> dict[str, Any]:
        for ev in self.peer.events:
            if self.s.plays == "client" and isinstance(ev, Response) and ev.method == "initialize":
                caps = ev.result.get("agentCapabilities") if isinstance(ev.result, dict) else None
                return caps if isinstance(caps, dict) else {}
            if self.s.plays == "agent" and isinstance(ev, Request) and ev.method == "initialize":
                caps = ev.params.get("clientCapabilities") if isinstance(ev.params, dict) else None
                return caps if isinstance(caps, dict) else {}
        return {}

    def _describe(self, spec: ExpectSpec | NothingSpec) -> str:
        kind = spec.frame_kind()
        if kind == "response":
            text = f"a response to {spec.response!r}"
        elif kind == "response_id":
            text = f"a response with id {describe(self._render(spec.response_id))}"
        elif kind == "violation":
            text = f"a violation of {spec.violation}"
        else:
            text = f"a {kind} {getattr(spec, kind)}"
        for key in ("params", "result", "error"):
            pat = getattr(spec, key)
            if pat is not None:
                try:
                    pat = self._render(pat)
                except TemplateError:
                    pass
                text += f" with {key} {describe(pat, 200)}"
        return text

    def _where(self, path: str) -> str:
        line = self.s.line_of(path)
        return f"{self.s.source}:{line} {path}" if line else f"{self.s.source} {path}"

    def _pass(self, spec: ExpectSpec | NothingSpec | CallSpec, path: str, message: str) -> None:
        clauses = list(spec.clause or [])
        kind = _KIND_OF[type(spec)]
        if clauses:
            self._record(clauses, path, kind, Status.PASS, message)

    def _fail(
        self,
        spec: ExpectSpec | NothingSpec | CallSpec,
        path: str,
        what: str,
        why: str,
        start: int,
        kind: str,
        method: str | None,
        near: list[Event] | None = None,
    ) -> None:
        near = near or []
        message = f"expected {what}; observed {why}"
        as_ = getattr(spec, "as_", None)
        if as_:
            self.missing.add(as_)
        if self._unheld(spec, path, _KIND_OF[type(spec)], message, near):
            return
        message += self._held_note(spec)
        precondition = getattr(spec, "precondition", None)
        if precondition is not None:
            raise _Stop(
                "inconclusive",
                f"precondition not met at {self._where(path)}: {precondition} ({message})",
            )
        garbled = self._garbled(start, kind, method) if kind else []
        if garbled:
            clauses = sorted({v.clause_id for v in garbled})
            self._record(
                list(spec.clause or []),
                path,
                _KIND_OF[type(spec)],
                Status.INCONCLUSIVE,
                f"{message} - not judged: {len(garbled)} frame(s) in the window broke {', '.join(clauses)} "
                "(reported by the transcript checks) and may have been the one expected",
                self._evidence(near),
            )
            raise _Stop("inconclusive", f"{self._where(path)}: the peer's frames were garbled ({', '.join(clauses)})")
        self._judge_failure(list(spec.clause or []), path, _KIND_OF[type(spec)], message, near, True)

    def _judge_failure(
        self, clauses: list[str], path: str, kind: str, message: str, near: list[Event], stop: bool
    ) -> None:
        evidence = self._evidence(near)
        where = self._where(path)
        by_status: dict[Status, list[str]] = {}
        for c in clauses:
            by_status.setdefault(breach_status(self.reg.get(c)), []).append(c)
        mandatory = by_status.get(Status.FAIL, [])
        for status, group in by_status.items():
            self._record(group, path, kind, status, f"{where}: {message}", evidence)
        if mandatory and stop:
            raise _Stop("failed", f"[{mandatory[0]}] {where}: {message}")

    def _record(
        self, clauses: list[str] | None, path: str, kind: str, status: Status, message: str, evidence: str = ""
    ) -> None:
        self.result.outcomes.append(
            Outcome(path, self.s.line_of(path), kind, list(clauses or []), status, message, evidence)
        )

    def _garbled(self, start: int, kind: str, method: str | None) -> list[Violation]:
        """Violations on inbound frames from ``start`` on that could be the frame expected."""
        events = self.peer.events[start:]
        messages: dict[int, Event] = {
            e.index: e for e in events if isinstance(e, (Request, Notification, Response))
        }
        out = []
        for v in events:
            if not isinstance(v, Violation) or v.severity != "error":
                continue
            ev = messages.get(v.index) if v.index is not None else None
            if ev is None:
                out.append(v)  # a frame that decoded to no message at all
            elif kind in ("response", "response_id") and isinstance(ev, Response):
                out.append(v)
            elif kind == "request" and isinstance(ev, Request) and fnmatch.fnmatchcase(ev.method, method or "*"):
                out.append(v)
            elif (
                kind == "notification"
                and isinstance(ev, Notification)
                and fnmatch.fnmatchcase(ev.method, method or "*")
            ):
                out.append(v)
        return out

    def _evidence(self, near: list[Event]) -> str:
        t = self.peer.transcript
        raws = {id(e.raw) for e in near if e is not None and not isinstance(e, Violation)}
        around: list[Entry] = [e for e in t.entries if id(e.raw) in raws]
        text = t.excerpt(around, last=self.settings.evidence_lines)
        tail = self.peer.stderr_tail()
        if tail:
            text += "\n--- peer stderr (last lines) ---\n" + "\n".join(tail[-10:])
        return text


_KIND_OF: dict[type, str] = {ExpectSpec: "expect", NothingSpec: "expect_nothing", CallSpec: "call"}
_ABSENT_PARAMS: Any = object()


def _method_of(spec: ExpectSpec) -> str | None:
    return spec.request or spec.notification


def _message_of(ev: Event) -> Any:
    if isinstance(ev, Violation):
        return {"clause": ev.clause_id, "message": ev.message}
    return ev.message


def _index_of(events: Sequence[Event], ev: Event, start: int) -> int:
    for i in range(start, len(events)):
        if events[i] is ev:
            return i
    return -1


def _brief(ev: Event) -> str:
    if isinstance(ev, Violation):
        return f"violation [{ev.clause_id}] {ev.message}"
    raw = ev.raw.decode("utf-8", "replace")
    return raw if len(raw) <= 300 else raw[:297] + "..."


def _has(caps: dict[str, Any], path: str) -> bool:
    node: Any = caps
    for part in path.split("."):
        if not isinstance(node, dict) or node.get(part) in (None, False):
            return False
        node = node[part]
    return True


def _client_caps(wire: Any) -> ClientCapabilities:
    """What the endpoint serves, from the capabilities we announced on the wire."""
    caps: dict[str, Any] = wire if isinstance(wire, dict) else {}
    fs: dict[str, Any] = caps["fs"] if isinstance(caps.get("fs"), dict) else {}
    elicitation = caps.get("elicitation")
    return ClientCapabilities(
        fs_read=fs.get("readTextFile") is True,
        fs_write=fs.get("writeTextFile") is True,
        terminal=caps.get("terminal") is True,
        elicitation_form=isinstance(elicitation, dict) and isinstance(elicitation.get("form"), dict),
    )


async def settle(peer: Peer, scenario: Scenario | None = None, timeout: float = 2.0) -> bool:
    """Wait (bounded) until every request the peer sent us has been answered.

    Handlers answer in their own tasks; before closing the connection a runner
    lets them finish, so an answer is never cut off by our own EOF.  Requests
    the scenario holds or never answers are not waited for.
    """
    skip = {m for m, p in (scenario.answers if scenario else {}).items() if p in ("hold", "never")}
    with anyio.move_on_after(timeout):
        while any(method not in skip for _, method in peer.conn.pending_incoming):
            await anyio.sleep(0.005)  # our own handler tasks, not the peer: a bounded poll
        await peer.drain()  # every settled answer is on the wire
        return True
    return False


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

