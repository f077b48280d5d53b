"""Fuzzing a live peer with schema-derived frames: what the agent and client campaigns share.

Both ``suite/agent/test_fuzz.py`` (the agent under test) and
``suite/client/test_fuzz.py`` (the client under test) run Hypothesis
campaigns of ``acp_conformance.strategies`` frames against a live peer.
Everything that decides *whether the peer did the right thing* lives here,
once, so both directions are judged by the same rules: a frame is written,
what the peer owes for it (``Frame.expect``: the answer, the error code, or
silence) is waited for and judged, then probe requests prove the peer still
serves; failures become clause results that carry the seed, the shrunk frame,
the replay line and the example-database key.

The role-specific parts (how a connection is opened and prepared, which
placeholders stand for which live values, what the probe request is) are the
hooks of ``FrameFuzzer``.

Budget and replay (``ACP_FUZZ_EXAMPLES``, ``ACP_FUZZ_SECONDS``, ``ACP_FUZZ_SEED``,
``ACP_FUZZ_REPLAY``, ``ACP_FUZZ_DATABASE``): ``FuzzBudget`` (``fuzz/_budget.py``).
Findings become clause results in ``record_findings`` (``fuzz/_findings.py``).
"""

from __future__ import annotations

import contextlib
import re
import time
from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from collections.abc import Set as AbstractSet
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any, Protocol

import orjson
from anyio.from_thread import BlockingPortal, start_blocking_portal
from hypothesis import given
from hypothesis import seed as hypothesis_seed
from hypothesis.errors import Flaky
from hypothesis.strategies import SearchStrategy

from acp_conformance.clauses import registry
from acp_conformance.core import jsonrpc
from acp_conformance.core.connection import idless_error
from acp_conformance.core.events import Event, Response, Violation
from acp_conformance.core.ids import id_key, rounded_echo, same_id
from acp_conformance.errors import AcpError, ConformanceFailure, PeerError, PeerTimeout
from acp_conformance.fuzz._budget import (
    ENV_DATABASE,
    ENV_EXAMPLES,
    ENV_REPLAY,
    ENV_SECONDS,
    ENV_SEED,
    FuzzBudget,
    hypothesis_settings,
    replay_blobs,
    shrink_time_limit,
    with_replay,
)
from acp_conformance.fuzz._expect import NO_ANSWER, Expect, Frame, Problem
from acp_conformance.fuzz._findings import Finding, FuzzFinding, Recorder, finding_type, record_findings
from acp_conformance.peer import Peer, stray_words, strays_in, unread_answer
from acp_conformance.results import Status, breach_status
from acp_conformance.transcript import Transcript

__all__ = [
    "AGENT_PROBE",
    "ENV_DATABASE",
    "ENV_EXAMPLES",
    "ENV_REPLAY",
    "ENV_SECONDS",
    "ENV_SEED",
    "Finding",
    "FrameFuzzer",
    "FuzzBudget",
    "FuzzFinding",
    "Judge",
    "Live",
    "Recorder",
    "database_key",
    "finding_type",
    "hypothesis_settings",
    "live_connection",
    "portal_for",
    "probe_unanswered",
    "record_findings",
    "replay_blobs",
    "run_campaign",
    "shrink_time_limit",
    "with_replay",
]


class _Conn(Protocol):
    """A live connection of either harness: its peer (our side) and its transcript."""

    @property
    def peer(self) -> Peer: ...

    transcript: Transcript


#: Where a finding provoked by input the spec forbids us to send lands (a robustness SHOULD).
#: Valid frames beyond the limits RFC 8259 § 9 lets an implementation set (depth, size, length).
LIMIT_MUTATIONS = frozenset({"huge-string", "huge-array", "nesting", "deep-nesting"})

#: Placeholders in generated frames, replaced by live values on the way out.
LIVE_SESSION = "acp-fuzz-live-session"
DEAD_SESSION = "acp-fuzz-no-such-session"
LIVE_CWD = "/acp-fuzz-live-cwd"
LIVE_MODE = "acp-fuzz-live-mode"
#: Violations the core charges to an answer that merely echoes an id we broke on purpose.
ID_ECHO_CLAUSES = frozenset(
    {"jsonrpc.response-id-echo", "jsonrpc.id-types", "jsonrpc.id-not-null", "jsonrpc.no-duplicate-response"}
)


# ------------------------------------------------------------- connections
@contextmanager
def live_connection(
    portal: BlockingPortal, harness: Any, stream_failures: list[ConformanceFailure], *args: Any, **kwargs: Any
) -> Iterator[Any]:
    """``harness.connect()`` (an ``AgentHarness`` or a ``ClientHarness``) held open from synchronous code
    (a Hypothesis test) through ``portal``.

    A stream-level failure found when the connection closes (the harness
    raises it on exit) is kept in ``stream_failures``: its result is
    already recorded, and the fuzzing goes on.
    """
    cm: AbstractContextManager[Any] = portal.wrap_async_context_manager(harness.connect(*args, **kwargs))
    conn = cm.__enter__()
    peer = getattr(conn, "peer", None)
    if isinstance(peer, Peer):
        peer.searching = True  # what a search meets gates no scripted test (``DeadlineMemory``)
    try:
        yield conn
    except BaseException as exc:
        if not cm.__exit__(type(exc), exc, exc.__traceback__):
            raise
    else:
        try:
            cm.__exit__(None, None, None)
        except ConformanceFailure as failure:
            stream_failures.append(failure)


# -------------------------------------------------------------- the fuzzer
#: The agent's liveness probe and round-trip barrier: an extension request (extensibility.mdx: custom
#: methods start with ``_``; every other name is reserved for the protocol, so a made-up name without
#: it is input we may not send). Any answer will do, an error included; silence is what counts.
AGENT_PROBE = "_acp_conformance/fuzz_probe"


async def probe_unanswered(peer: Peer) -> str | None:
    """Send ``AGENT_PROBE`` and wait for its answer without flagging the silence (its clause is
    ``ext.request.respond``, judged by its own test): None once answered, else why not (the request
    is forgotten, so teardown does not wait for it again)."""
    rid = await peer.send_request(AGENT_PROBE, {}, validate=False)
    try:
        await peer.wait_response(rid, method=AGENT_PROBE, flag=False)
    except PeerTimeout as exc:
        peer.conn.forget_outgoing(rid)
        return exc.message
    return None


@dataclass
class Live:
    """Live values standing in for the placeholders of one connection."""

    conn: Any  # a harness connection: ``.peer`` and ``.transcript`` (``_Conn``)
    #: Placeholder bytes -> the bytes they become on the wire.
    values: dict[bytes, bytes] = field(default_factory=dict)
    #: Methods the peer under test implements (by its advertised capabilities); -32601 is right for the others.
    implemented: frozenset[str] = frozenset()
    #: Methods seen to succeed on this connection without anything unusual (``baseline=True``).
    succeeded: frozenset[str] = frozenset()
    #: The request that proves the peer still serves: (method, params, validate outbound).
    probe: tuple[str, Any, bool] = ("", None, False)
    #: (clause, message) of the violations the connection showed before any example: the peer's
    #: own defects on valid traffic (a result missing a required member), not provoked by a frame.
    baseline: frozenset[tuple[str, str]] = frozenset()
    #: For each kind of id (``odd_id_kind``): how the peer answers its probe under such an id when
    #: that differs from the plain integer id's answer ("" when it does not), once asked
    #: (``_ids_refused``); a kind not in it has not been asked yet.
    refused_ids: dict[str, str] = field(default_factory=dict)


Judge = Callable[[Frame, Live], Expect]


class FrameFuzzer(ABC):
    """Runs frames against the peer under test, one connection at a time.

    Subclasses open and prepare a connection (``_connect``, ``_prepare``);
    everything else (budget, memo, restart after a failure, the exchange
    and its judgement) is the same for both roles.
    """

    #: Who is under test, for messages ("agent" / "client").
    role = "agent"

    def __init__(self, harness: Any, portal: BlockingPortal, budget: FuzzBudget) -> None:
        self.harness = harness
        self.portal = portal
        self.budget = budget
        self.timeout: float = harness.config.timeout
        self.stream_failures: list[ConformanceFailure] = []
        self.exercised: Counter[str] = Counter()
        self.ran = 0
        self.skipped = 0
        self._memo: dict[tuple[bytes, tuple[bytes, ...]], tuple[list[Problem], str]] = {}
        self._live: Live | None = None
        self._cm: Any = None
        self._dirty = False
        #: Examples run on the current connection (0: it is fresh).
        self._used = 0
        self._broken = False
        self._deadline = 0.0
        self.failed = False
        self.first_failures: dict[str, Finding] = {}
        #: The frame (and its judge) that raised each clause's finding last: Hypothesis raises the
        #: reported (shrunk) example last, so this is the frame ``confirm`` runs again.
        self._raised: dict[str, tuple[Frame, Judge | None]] = {}

    # ----------------------------------------------------------------- hooks
    @abstractmethod
    def _connect(self) -> AbstractContextManager[Any]:
        """A fresh connection to the peer under test (``live_connection(...)``)."""

    @abstractmethod
    async def _prepare(self, conn: Any) -> Live:
        """Set the connection up for fuzzing (a live session...) and say what the placeholders become."""

    def _applicable(self, frame: Frame, live: Live) -> bool:
        """False: this frame cannot be judged on this connection (it is not run, nor counted)."""
        return True

    def _gated(self, frame: Frame, live: Live) -> str | None:
        """Why a conforming sender may not send this frame on this connection although it is
        schema-valid (a capability the peer did not advertise), or None."""
        return None

    def forbidden(self, frame: Frame, live: Live) -> str | None:
        """Why the spec forbids us to send this frame here, or None.  Findings it provokes are
        robustness findings (``jsonrpc.survives-invalid-input``), never a MUST FAIL: transports.mdx
        forbids writing anything that is not a valid ACP message, and RFC 8259 § 9 lets a receiver
        set limits on depth, size and string length."""
        if not frame.valid:
            return f"that is not a valid ACP message ({frame.mutation or frame.kind})"
        if frame.mutation in LIMIT_MUTATIONS:
            return f"beyond the limits RFC 8259 § 9 lets an implementation set ({frame.mutation})"
        return self._gated(frame, live)

    def patience(self, why: str | None) -> float:
        """How long to wait for the answer to a frame while the peer writes nothing: the deadline
        for a frame we may send; ``--acp-fuzz-patience`` (at most the deadline) for one the spec
        forbids us to send (``why``).  What a peer says to such a frame is a robustness finding,
        a SHOULD at most, and a frame that is malformed, beyond the limits or not advertised asks
        for a rejection, not for work: the deadline, which real adapters need long for their model
        turns (``--acp-timeout=30``), would make each peer that drops such frames wait it out once
        per example, its replay and every shrinking step (20 minutes of a run, against one adapter)."""
        return self.timeout if why is None else min(self.timeout, self.budget.patience)

    async def _await_answer(
        self, peer: Peer, answered: Callable[[Event], bool], mark: int, why: str | None
    ) -> float | None:
        """Wait for the frame's answer: ``None`` when it came, else how long we waited.  The wait
        ends early only once a whole ``patience`` has passed since the peer's last frame: one that
        writes (updates of a turn a lenient peer runs for a prompt it could have refused) may be
        working on the frame, and gets up to the deadline.  Measured from the last frame, not in
        steps of ``patience``: a frame the peer wrote right after ours for its own reasons (a
        fresh session's ``available_commands_update``) would otherwise double the wait."""
        patience = self.patience(why)
        start = time.monotonic()
        quiet_since = start
        seen = peer.conn.inbound_frames

        def watch(ev: Event) -> bool:
            nonlocal quiet_since, seen
            if peer.conn.inbound_frames != seen:
                seen = peer.conn.inbound_frames
                quiet_since = time.monotonic()
            return answered(ev)

        while True:
            now = time.monotonic()
            step = min(quiet_since + patience, start + self.timeout) - now
            if step <= 0:
                return now - start
            try:
                await peer.wait_for(watch, start=mark, timeout=step, what="its answer")
                return None
            except PeerTimeout:
                pass

    def _impatient(self, problem: Problem, waited: float) -> Problem:
        """ "No answer", said with the window it was given (``patience``)."""
        if problem.message != NO_ANSWER:
            return problem
        return Problem(
            problem.clause,
            f"no answer within {waited:.1f} s, the last {self.budget.patience:g} s of it without a frame from the "
            "peer (the wait for the answer to a frame the spec forbids us to send: --acp-fuzz-patience; valid "
            "requests get --acp-timeout)",
        )

    def _attribute(self, frame: Frame, live: Live, problems: list[Problem]) -> list[Problem]:
        """Findings of a frame we were not allowed to send move to the robustness clause."""
        why = self.forbidden(frame, live)
        if why is None:
            return problems
        reg = registry()
        out = []
        for p in problems:
            if breach_status(reg.get(p.clause)) is Status.FAIL:
                p = Problem(
                    "jsonrpc.survives-invalid-input",
                    f"{p.message}, after a frame {why}: a robustness finding (for valid input it would be {p.clause})",
                    p.unawaited,
                )
            out.append(p)
        return out

    # ----------------------------------------------------------- lifecycle
    def start(self) -> None:
        self._deadline = time.monotonic() + self.budget.seconds
        self._open()

    def stop(self) -> None:
        if self._cm is not None:
            cm, self._cm, self._live = self._cm, None, None
            try:
                cm.__exit__(None, None, None)
            except StopIteration:
                pass
            except ConformanceFailure as failure:
                self.stream_failures.append(failure)

    def _open(self) -> None:
        cm = self._connect()
        conn = cm.__enter__()
        try:
            live = self.portal.call(self._prepare, conn)
        except BaseException as exc:
            # Closed at once: left open, its tasks (and its process) would outlive the campaign in
            # the loop the run's synchronous tests share (``ThreadHost``), whose end waits for them.
            with contextlib.suppress(Exception):
                cm.__exit__(type(exc), exc, exc.__traceback__)
            raise
        self._cm, self._live = cm, live
        live.baseline = frozenset((e.clause_id, e.message) for e in live.conn.peer.events if isinstance(e, Violation))
        self._dirty = False
        self._used = 0

    def _note(self, text: str) -> None:
        connections = getattr(self.harness, "connections", None)
        if connections:
            connections[-1].transcript.note(text)

    # -------------------------------------------------------------- examples
    def run(self, frame: Frame, judge: Judge | None = None) -> None:
        """Run one example; raise a ``FuzzFinding`` for the first problem."""
        key = (frame.data, frame.chunks)
        memo = self._memo.get(key)
        if memo is None:
            if not self.failed and time.monotonic() > self._deadline:
                # Generation budget spent: new frames count as not run.  Once something failed,
                # shrinking runs for real (bounded by ``shrink_time_limit``), so replays stay consistent.
                self.skipped += 1
                return
            if self._broken:
                self.skipped += 1
                return
            if (self._live is None or self._dirty) and not self._restart(""):
                return
            assert self._live is not None
            if not self._applicable(frame, self._live):
                return
            deadlines = self._live.conn.peer.deadlines
            if frame.method and deadlines is not None and deadlines.given_up(frame.method, search=True):
                # The peer already let this method's deadline pass twice in the run: not waited out again.
                self.skipped += 1
                return
            problems = self._judged(frame, judge)
            if problems and self._used > 1:
                # Earlier examples ran on this connection and may have changed its state (an idle
                # session/cancel that closed the live session...): a finding counts only when the frame
                # alone, on a fresh connection, provokes it again.
                if not self._restart(" to replay a finding"):
                    return
                assert self._live is not None
                if not self._applicable(frame, self._live):
                    return
                again = self._judged(frame, judge)
                if not again:
                    self._note(
                        f"(fuzz) {frame.describe()}: {problems[0].message}, but not when replayed alone on a fresh "
                        f"connection: earlier examples set it up, not judged"
                    )
                problems = again
            assert self._live is not None
            expect = judge(frame, self._live) if judge else frame.expect
            self.ran += 1
            survival = (
                "jsonrpc.every-request-answered"
                if self.forbidden(frame, self._live) is None
                else "jsonrpc.survives-invalid-input"
            )
            judged = {expect.clause, expect.missing_clause, survival}
            if frame.trackable_id:
                judged.add(expect.id_clause)
            for clause in judged:
                self.exercised[clause] += 1
            evidence = self.harness.evidence(self._live.conn) if problems else ""
            memo = self._memo[key] = (problems, evidence)
            for p in problems[:1]:
                self.first_failures.setdefault(p.clause, Finding(p.clause, p.message, frame.describe(), None, evidence))
            if problems:
                self._dirty = True  # a fresh peer for the next example, so failures shrink independently
                self.failed = True
        problems, evidence = memo
        if problems:
            p = problems[0]
            if p.unawaited:
                self._raised[p.clause] = (frame, judge)
            else:
                self._raised.pop(p.clause, None)
            raise finding_type(p.clause)(p.message, frame.describe(), evidence)

    def confirm(self, finding: Finding) -> Finding:
        """A finding of silence proven, or said to be unproven.

        "No answer" to a frame we did not wait for (one without an id we could track) means only
        that the requests we sent behind it were answered first; JSON-RPC lets a peer answer in
        any order, so the frame's answer may still have been coming.  The reported example is run
        once more on a fresh connection, this time waiting for that answer (``patience``): silence
        then is the finding, said with the wait; an answer that comes makes the silence unproven,
        or, if it is a wrong answer of the same clause, the finding instead."""
        raised = self._raised.get(finding.clause)
        if raised is None or not finding.recurred:
            return finding
        frame, judge = raised
        if not self._restart(" to confirm a silence"):
            return replace(finding, unproven="its silence could not be confirmed (the peer could not be started again)")
        assert self._live is not None
        expect = judge(frame, self._live) if judge else frame.expect
        problems = self._attribute(
            frame, self._live, self.portal.call(partial(self._exchange, patient=True), self._live, frame, expect)
        )
        self._dirty = True
        same = [p for p in problems if p.clause == finding.clause]
        if same:
            return replace(finding, message=same[0].message, evidence=self.harness.evidence(self._live.conn))
        return replace(
            finding,
            unproven=(
                "an answer came when the example was run again and its answer waited for, after the "
                "answers to the requests we sent behind it (JSON-RPC allows any order), so the silence "
                "below was none; the other examples' silences were not waited for"
            ),
        )

    def _restart(self, why: str) -> bool:
        """A fresh connection; False when the peer cannot be restarted (what was found is kept,
        nothing more is tried, the example counts as not run)."""
        self.stop()
        try:
            self._open()
        except AcpError as exc:
            self._broken = True
            self._note(f"(fuzz) could not restart the {self.role}{why}: {exc}")
            self.skipped += 1
            return False
        return True

    def _judged(self, frame: Frame, judge: Judge | None) -> list[Problem]:
        """Run ``frame`` on the current connection; its problems, attributed (``_attribute``)."""
        assert self._live is not None
        expect = judge(frame, self._live) if judge else frame.expect
        self._used += 1
        return self._attribute(frame, self._live, self.portal.call(self._exchange, self._live, frame, expect))

    def _writes(self, frame: Frame, live: Live) -> list[bytes]:
        data = frame.data
        for placeholder, value in live.values.items():
            data = data.replace(placeholder, value)
        if len(frame.writes) == 1 or data == frame.data:
            return [data] if len(frame.writes) == 1 else list(frame.writes)
        # Same cut points as drawn, shifted by the substitution (the last piece takes the rest).
        out, pos = [], 0
        for piece in frame.writes[:-1]:
            out.append(data[pos : pos + len(piece)])
            pos += len(piece)
        out.append(data[pos:])
        return [w for w in out if w]

    async def _exchange(self, live: Live, frame: Frame, expect: Expect, *, patient: bool = False) -> list[Problem]:
        """Send ``frame`` and two probes behind it; its problems.  ``patient``: an answer the frame
        did not get by the time the probes were answered is waited for (``confirm``)."""
        peer = live.conn.peer
        mark = len(peer.events)
        rid = frame.id
        tracked = (
            frame.trackable_id
            and frame.kind not in ("result", "error")
            and not (isinstance(rid, int) and not -(2**63) <= rid < 2**63)
            # Two requests under one id: the peer may answer them in any order, so no answer can be
            # paired with a method (judging one against the other's result schema was a false positive).
            and frame.mutation != "duplicate-id"
        )
        unpaired = frame.has_id and not tracked
        if tracked:
            # Tell our side of the connection the id is ours, so the answer is matched and validated.
            peer.expect_raw_answer(rid, frame.method or "?")
        elif unpaired:
            # An id we cannot pair (malformed, reused, out of range): its answers are judged here,
            # by the frame's expectation, not by the core as answers to nothing.
            peer.conn.allow_unpaired(rid)
        else:
            # Damaged bytes (invalid UTF-8, a cut frame...) may still carry a readable id, and a
            # peer that decodes leniently answers under it: not an answer to nothing either.
            for guess in _ids_in(frame.data):
                peer.conn.allow_unpaired(guess)
        #: Why the spec forbids us to send this frame here (None: it does not); fixed for the exchange.
        why = self.forbidden(frame, live)
        #: An error with a null id, or none, answers a frame whose id could not be read, and is the
        #: peer's rejection of one the spec forbids us to send: it ends the wait and is judged as the
        #: frame's answer.  After a valid frame it answers nothing of this example's (a late answer to
        #: an earlier one, say): the core judges it (``Connection._idless``).
        idless_ok = expect.null_id_ok or why is not None
        problems: list[Problem] = []
        probe_ids: list[Any] = []
        #: How long we waited for the frame's answer, when that was less than the deadline (``patience``).
        short: float | None = None
        #: Whether its answer was waited for (else its silence is read off the probes' answers).
        awaited = False
        method, params, validate = live.probe
        try:
            for chunk in self._writes(frame, live):
                await peer.send_raw(chunk)
            if (tracked or unpaired) and expect.answer == "required":
                # It may take a while (a prompt turn, a real agent loading a session): wait for
                # this answer itself, not only for the probes behind it. Silence is judged below
                # by the frame's expectation ("no answer").
                # An id past 2**53 comes back rounded from a JavaScript peer: answered, under a
                # mangled id (judged below as such), so no reason to wait out the deadline.
                answered = _answers_frame({id_key(rid)}, idless_ok, rounded_of=rid)
                waited = await self._await_answer(peer, answered, mark, why)
                awaited = True
                if waited is not None and waited < self.timeout:
                    short = waited
                elif waited is not None and why is None and peer.deadlines is not None and frame.method:
                    # A valid request unanswered (the example's finding is its FAIL): a miss for the
                    # run's campaigns (``DeadlineMemory``: a search's misses gate no scripted test).
                    peer.deadlines.missed(frame.method, peer.where or "an earlier test", search=True)
                if tracked and peer.conn.is_outstanding(rid):
                    # The wait ended before its answer (the patience, the deadline, or an error
                    # without an id taken as the peer's rejection): the answer may still come, and is
                    # then no answer "to nothing" (the example has judged what came in its window:
                    # a valid request past its deadline is jsonrpc.every-request-answered's, once).
                    peer.conn.allow_unpaired(rid)
            for _ in range(2):
                # Never under the frame's own id: its answer would be taken for the probe's.
                pid = peer.conn.next_request_id()
                while frame.has_id and id_key(pid) == id_key(rid):
                    pid = peer.conn.next_request_id()
                probe_ids.append(await peer.send_request(method, params, validate=validate, id=pid))
                # Not flagged on the transcript: this example judges it (a frame we were not
                # allowed to send makes it a robustness finding, see ``_attribute``).
                await peer.wait_response(probe_ids[-1], method=method, timeout=self.timeout, flag=False)
        except PeerError as exc:
            # The connection is replaced before the next example, so its teardown need not wait
            # for these answers all over again.
            for pid in probe_ids:
                peer.conn.forget_outgoing(pid)
            what = "closed its output" if peer.closed.is_set() else "stopped answering"
            window = peer.events[mark:]
            came = [_paired(e) for e in window if isinstance(e, Response) and isinstance(e.message, dict)]
            if idless_ok:
                came += _idless_errors(window)
            problems = [p for p in expect.check(frame.answers(came)) if p.clause != expect.missing_clause]
            if why is not None:
                _reattribute(live, frame, window, why, {id_key(p) for p in probe_ids})
            owed = (tracked or unpaired) and expect.answer == "required"
            if peer.closed.is_set() and why is None and not owed:
                # It died after a valid notification (or response): the probes behind it were never
                # read, so no request it received went unanswered.  Not a jsonrpc.every-request-
                # answered FAIL; what the frame means is judged by the tests of its own clause.
                self._note(
                    f"(fuzz) the {self.role} closed its output after a valid frame that asks no answer; the "
                    "probes behind it were never read: not judged here"
                )
                return problems
            what = f"{what} after the frame"
            if peer.closed.is_set() and owed:
                # The frame itself is a request it read (replaying the example kills it again).
                what += ", never answering that request"
            missing = Problem("jsonrpc.every-request-answered", f"the {self.role} {what} ({exc.message})")
            return [*problems, _unanswered(missing, window)]
        finally:
            if tracked:
                peer.conn.forget_outgoing(rid)
            # Unpaired ids stay allowed: a slow peer's late answer to a malformed frame is not
            # an answer "to nothing" (the frame's expectation has judged what came in time).
        probe_keys = {jsonrpc.id_key(p) for p in probe_ids}
        if patient and not awaited:
            # ``confirm``: this time the frame's own answer is waited for (at once if it came).
            short = await self._await_late_answer(peer, frame, probe_keys, idless_ok, mark, why)
        window = peer.events[mark:]
        responses, answers = _came(frame, window, probe_keys, idless_ok)
        found = _judged(expect, answers, unawaited=not (awaited or patient))
        if tracked and not answers:
            found = [_unanswered(p, responses) if p.clause == expect.missing_clause else p for p in found]
        if short is not None:
            found = [self._impatient(p, short) for p in found]
        problems += found
        _excuse(live, frame, window, responses)
        if why is not None:
            _reattribute(live, frame, window, why, probe_keys)
        if await self._refused_id(live, frame, problems, answers, window):
            return []
        return problems

    async def _await_late_answer(
        self, peer: Peer, frame: Frame, probe_keys: AbstractSet[Any], idless_ok: bool, mark: int, why: str | None
    ) -> float | None:
        """``_await_answer`` for a frame we did not wait for: an answer under its id (or an id read
        in its bytes), or an error without an id where that answers it."""
        ids = {id_key(i) for i in ([frame.id] if frame.has_id else _ids_in(frame.data))} - probe_keys
        return await self._await_answer(peer, _answers_frame(ids, idless_ok), mark, why)

    async def _refused_id(
        self, live: Live, frame: Frame, problems: list[Problem], answers: list[Any], window: list[Event]
    ) -> bool:
        """Whether what ``frame`` got is the peer's refusal of every id of its kind (``_ids_refused``):
        an error or no answer where it found problems, or an error without an id (on a malformed
        frame too, where that was taken as the frame's answer).  Then it is ``jsonrpc.id-types``'s,
        judged by its scripted test: the example's problems are dropped and that error set aside."""
        kind = odd_id_kind(frame.id) if frame.has_id else None
        # Not one the core attributed to a notification of ours: that finding stands.
        idless = [v for v in window if isinstance(v, Violation) and unread_answer(v)]
        if not kind or not (idless or (problems and (not answers or any("error" in a for a in answers)))):
            return False
        refusal = await self._ids_refused(live, kind)
        if not refusal:
            return False
        if problems:
            self._note(
                f"(fuzz) {frame.describe()}: {problems[0].message}, but the {self.role} refuses {kind} ids "
                f"whatever the request ({refusal}): jsonrpc.id-types, judged by its own test, not here"
            )
        live.conn.transcript.set_aside(
            idless, f"(fuzz) an error without an id answering {frame.describe()}: the {kind}-id refusal"
        )
        return True

    async def _ids_refused(self, live: Live, kind: str) -> str:
        """How the peer answers its probe under an id of ``kind`` (``odd_id_kind``), when that is
        an error, an error without any id, or silence, where the probe under a plain integer id is
        answered otherwise ("" if not; asked once a connection and kind, once a frame under such an
        id got an error or no answer).

        A peer that refuses or ignores string ids (or negative ones) does so to every frame under
        one: that is one breach, of ``jsonrpc.id-types`` (its scripted test sends one request under
        each kind of id), not one for each clause whose campaign drew such an id (a ``_meta``
        refused, a wrong error code, a request unanswered).  Silence with a response under an id
        matching nothing we sent is not refusal: the echo clause's breach (``Peer.strays_since``).
        The probe is the only request in flight, so an error without any id answers it."""
        if kind not in live.refused_ids:
            method, params, validate = live.probe
            peer = live.conn.peer
            probe_id = ODD_PROBE_IDS[kind]
            refusal = ""
            try:
                plain = await peer.call(method, params, validate=validate, timeout=self.timeout)
                got = await peer.answer_under_id(method, params, probe_id, timeout=self.timeout, validate=validate)
            except PeerError:
                pass
            else:
                if got.unread:
                    refusal = f"{got.unread} to its probe {method}"
                elif got.response is None:
                    if not got.exited and not got.unproven:
                        refusal = f"no answer to its probe {method} ({got.silence})"
                else:
                    came = got.response
                    code = came.code
                    same = plain.is_error and plain.code == code
                    refusal = f"error {code!r} to its probe {method}" if came.is_error and not same else ""
            if peer.conn.is_outstanding(probe_id):  # judged here: a late answer is no stray
                peer.conn.allow_unpaired(probe_id)
                peer.conn.forget_outgoing(probe_id)
            live.refused_ids[kind] = refusal
        return live.refused_ids[kind]


#: The probe ids of ``FrameFuzzer._ids_refused``, one per kind of id (``odd_id_kind``).
ODD_PROBE_IDS: dict[str, Any] = {"string": "acp-fuzz-id-probe", "negative": -4_242_001}


def odd_id_kind(rid: Any) -> str | None:
    """The kind of valid request id a peer might refuse wholesale (``jsonrpc.id-types``): a string,
    or a negative integer (the schema's ``RequestId`` is any int64); None for the others."""
    if isinstance(rid, str):
        return "string"
    if isinstance(rid, int) and not isinstance(rid, bool) and -(2**63) <= rid < 0:
        return "negative"
    return None


def _judged(expect: Expect, answers: Sequence[Mapping[str, Any]], *, unawaited: bool) -> list[Problem]:
    """``expect.check``; ``unawaited``: the frame's answer was not waited for, so a silence is only
    read off the answers to the probes behind it (``Problem.unawaited``)."""
    found = expect.check(answers)
    if not unawaited:
        return found
    return [replace(p, unawaited=True) if p.message == NO_ANSWER else p for p in found]


_NO_ID = object()


def _answers_frame(
    ids: AbstractSet[tuple[str, Any]], idless_ok: bool, *, rounded_of: Any = _NO_ID
) -> Callable[[Event], bool]:
    """Whether an event is the answer a wait for a frame's answer ends on: a response under one of
    ``ids`` (or, given ``rounded_of``, under that id rounded by a JavaScript peer), or, with
    ``idless_ok``, an error without an id."""

    def answered(ev: Event) -> bool:
        if isinstance(ev, Response):
            return (
                id_key(ev.id) in ids
                or (rounded_of is not _NO_ID and rounded_echo(ev.id, rounded_of))
                or (idless_ok and ev.id is None and ev.is_error)
            )
        return idless_ok and idless_error(ev) is not None

    return answered


def _came(
    frame: Frame, window: list[Event], probe_keys: AbstractSet[Any], idless_ok: bool
) -> tuple[list[Response], list[Mapping[str, Any]]]:
    """What answered ``frame`` in ``window`` (the events since it went out): the responses other
    than our probes' and, with ``idless_ok``, the errors without an id; and those as its answers."""
    responses = [
        e for e in window if isinstance(e, Response) and isinstance(e.message, dict) and id_key(e.id) not in probe_keys
    ]
    paired = [_paired(e) for e in responses] + (_idless_errors(window) if idless_ok else [])
    return responses, frame.answers(paired)


def _unanswered(missing: Problem, window: Sequence[Event]) -> Problem:
    """``missing`` (no answer under its id, to the example's frame or to a probe behind it), unless
    a stray came in ``window`` (a response under an id matching no request of ours, or an error
    without any id): perhaps its answer under the wrong id or with its id lost
    (``Peer.why_unproven``), the echo clause's breach (flagged on that response), not also a
    request left unanswered."""
    strays = strays_in(window)
    if not strays:
        return missing
    return Problem(
        "jsonrpc.response-id-echo",
        f"{missing.message}; no answer under its id, but {stray_words(strays[0])} came in its window (its answer "
        "under another id, or with its id lost, perhaps)",
    )


def _reattribute(
    live: Live,
    frame: Frame,
    window: list[Any],
    why: str,
    probe_keys: AbstractSet[tuple[str, Any]] = frozenset(),
) -> None:
    """The peer's answers to a frame we were not allowed to send broke a MUST on the wire (an
    error without an id for a line that is not JSON, say): on the transcript that becomes a
    robustness finding too, so the stream-level judge does not FAIL what the example excuses.

    Not a violation the connection already showed on valid traffic (``live.baseline``: the same
    result missing the same member): the frame did not provoke that one, it stays its own clause's
    (one defect, one clause), rather than becoming a second, robustness finding.  Likewise a
    violation on the answer to a probe of ours (``probe_keys``, a valid request) of a clause the
    connection broke on valid traffic before any example (an id echoed as a string, say): the
    probe's answer shows that same defect again, not one the frame provoked.  Any other finding on
    a probe's answer still moves: the frame may have left the peer in a state that broke it."""
    baseline_clauses = {clause for clause, _ in live.baseline}
    answers = {e.index for e in window if isinstance(e, Response)}
    probe_answers = {e.index for e in window if isinstance(e, Response) and id_key(e.id) in probe_keys}
    reg = registry()
    moved = 0
    transcript = live.conn.transcript
    for v in window:
        if not isinstance(v, Violation) or v.clause_id == "jsonrpc.survives-invalid-input" or v.clause_id not in reg:
            continue
        if breach_status(reg.get(v.clause_id)) is not Status.FAIL:
            continue
        if v.index is not None and v.index not in answers:
            continue  # a frame of the peer's own (an update, a request), not its answer to ours
        if (v.clause_id, v.message) in live.baseline:
            continue  # shown on valid traffic already: not provoked by this frame
        if v.index in probe_answers and v.clause_id in baseline_clauses:
            continue  # the answer to our valid probe, with a defect shown before any example
        new = Violation(
            "jsonrpc.survives-invalid-input",
            f"[{v.clause_id}] {v.message}, answering a frame {why}",
            v.severity,
            v.raw,
            v.index,
        )
        moved += _replace_violation(transcript, v, new)
    if moved:
        transcript.note(f"(fuzz) {moved} finding(s) on the answer to a frame {why} judged as robustness findings")


def _replace_violation(transcript: Any, old: Violation, new: Violation) -> int:
    n = 0
    for i, v in enumerate(transcript.violations):
        if v is old:
            transcript.violations[i] = new
            n = 1
    for entry in transcript.entries:
        for i, v in enumerate(entry.violations):
            if v is old:
                entry.violations[i] = new
    return n


def _excuse(live: Live, frame: Frame, window: list[Any], responses: list[Response]) -> None:
    """Drop core violations that only say the peer echoed an id we malformed on purpose."""
    if not frame.has_id:
        return
    echo = {
        r.index
        for r in responses
        # A request with a null id (discouraged, not forbidden) is rightly answered under null.
        if (r.id is not None or frame.id is None)
        and same_id(r.id, frame.id)
        and (not frame.trackable_id or frame.mutation)
    }
    if not echo:
        return
    live.conn.transcript.set_aside(
        [v for v in window if isinstance(v, Violation) and v.clause_id in ID_ECHO_CLAUSES and v.index in echo],
        f"(fuzz) an answer echoing the deliberately odd id {frame.id!r:.60}: the fuzz test judges that answer itself",
    )


def _idless_errors(window: Sequence[Any]) -> list[dict[str, Any]]:
    """The errors without an id in ``window``, one per frame (the core may flag a frame twice)."""
    out: list[dict[str, Any]] = []
    frames: set[int] = set()
    for ev in window:
        msg = idless_error(ev)
        if msg is None or ev.index in frames:
            continue
        if ev.index is not None:
            frames.add(ev.index)
        out.append(msg)
    return out


def _paired(resp: Response) -> dict[str, Any]:
    """An answer as the example judges it: under the id of the request it answers.  The core pairs
    an id echoed with the wrong JSON type ("1" for 1) with its request, and flags it on the echo
    clause once (``Connection._on_response``); judged here under the peer's spelling, it would also
    be "no answer"."""
    msg: dict[str, Any] = resp.message
    if "id" in msg and not same_id(msg["id"], resp.id):
        return {**msg, "id": resp.id}
    return msg


_ID_TEXT = re.compile(rb'"id"\s*:\s*("(?:[^"\\]|\\.){0,200}"|-?\d{1,30})')


def _ids_in(data: bytes) -> list[Any]:
    """Request ids written in raw bytes, as far as they can be read."""
    out = []
    for m in _ID_TEXT.finditer(data[:65536]):
        try:
            out.append(orjson.loads(m.group(1)))
        except orjson.JSONDecodeError:
            continue
    return out


# ------------------------------------------------------------- campaigns
def portal_for(harness: Any) -> AbstractContextManager[BlockingPortal]:
    """Where a synchronous test runs its connections: the loop the run's synchronous tests share
    (``harness.thread_host``: its processes are started ahead of the test), else one of its own."""
    host = getattr(harness, "thread_host", None)
    if host is not None and host.portal is not None:
        return nullcontext(host.portal)
    return start_blocking_portal("asyncio")


def run_campaign(
    harness: Any,
    name: str,
    clauses: Sequence[str],
    strategy: SearchStrategy[Frame],
    make_fuzzer: Callable[[BlockingPortal, FuzzBudget], FrameFuzzer],
    judge: Judge | None = None,
) -> None:
    """One Hypothesis campaign of ``strategy`` frames against the peer under test, turned into
    results for ``clauses`` (PASS when exercised and held, INCONCLUSIVE when never exercised)."""
    budget = FuzzBudget.from_env()
    findings: list[Finding] = []
    with portal_for(harness) as portal:
        fuzzer = make_fuzzer(portal, budget)
        try:
            fuzzer.start()

            @hypothesis_settings(budget)
            @hypothesis_seed(budget.seed)
            @given(strategy)
            def fuzz(frame: Frame) -> None:
                fuzzer.run(frame, judge)

            fuzz._hypothesis_internal_database_key = database_key(name)  # type: ignore[attr-defined]
            try:
                with shrink_time_limit(budget.shrink_seconds):
                    with_replay(fuzz, budget)()
            except Exception as exc:
                findings = [fuzzer.confirm(f) for f in _collect(exc, fuzzer.first_failures)]
        finally:
            fuzzer.stop()
    for failure in fuzzer.stream_failures:
        # Already recorded by the harness (passive clauses); say which campaign provoked it.
        harness.record(failure.clause_id, Status.FAIL, f"{failure.actual} (during {name} fuzzing, {budget.describe()})")
    record_findings(
        harness,
        budget,
        "frame",
        clauses,
        fuzzer.exercised,
        findings,
        fuzzer.ran,
        fuzzer.skipped,
        database_key(name).decode(),
        fuzzer.role,
    )


def database_key(campaign: str) -> bytes:
    """The Hypothesis example-database key of a campaign (stable across runs and versions of this file)."""
    return f"acp-conformance/fuzz/{campaign}".encode()


def _collect(exc: BaseException, seen: dict[str, Finding]) -> list[Finding]:
    out = []
    flaky = False
    for sub, blob in replay_blobs(exc):
        if isinstance(sub, FuzzFinding):
            out.append(Finding(sub.clause, sub.message, sub.example, blob, sub.evidence))
        elif isinstance(sub, Flaky):
            flaky = True
        elif isinstance(sub, AcpError):
            raise sub  # the peer could not be started or set up: the campaign could not run
        else:
            raise exc
    if flaky and not out:
        # Seen failing, but not again on replay (a timing-dependent defect): report what was seen.
        out = [replace(f, recurred=False) for f in seen.values()]
    return out
