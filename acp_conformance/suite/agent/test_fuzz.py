"""Fuzzing the agent under test with schema-derived frames (acp_conformance.strategies).

Each test is one Hypothesis campaign on a live agent: every example writes
one frame (invalid, or valid but unusual), waits for what the agent owes
(an answer with the applicable error code, or silence for a notification),
then proves the agent still serves requests with two probe round trips.
A frame that kills the agent, wedges it or makes it stop answering is a
``jsonrpc.every-request-answered`` failure; a wrong or missing error code
is judged on the clause for that kind of frame.  After a failing example
the agent is restarted, so Hypothesis can shrink the failure to a minimal
frame against a fresh process.

Budget and replay (the plugin options ``--acp-fuzz-examples``,
``--acp-fuzz-seconds`` and ``--acp-fuzz-seed`` set the first three variables;
the plugin resolves ``random`` once, before xdist workers start):

* ``ACP_FUZZ_EXAMPLES`` examples per campaign (default 25);
* ``ACP_FUZZ_SECONDS`` wall-clock budget for generating examples, per
  campaign (default 20); once spent, frames not yet tried count as not
  run; shrinking a failure gets a third of it more (at least 2 s);
* ``ACP_FUZZ_SEED`` an integer (default 0: every run fuzzes the same
  frames, so results are reproducible and equal under xdist), or ``random``;
* ``ACP_FUZZ_REPLAY`` the ``reproduce_failure`` blob a report names, to
  replay exactly that failing example;
* ``ACP_FUZZ_DATABASE`` a directory for Hypothesis's example database
  (default: none, nothing is written).

Every result message carries the seed; every failure also names the frame,
its replay blob and the database key.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import time
import warnings
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field, replace
from typing import Any

import hypothesis
import orjson
import pytest
from anyio.from_thread import BlockingPortal, start_blocking_portal
from hypothesis import HealthCheck, Phase, given, reproduce_failure, settings
from hypothesis import seed as hypothesis_seed
from hypothesis import strategies as st
from hypothesis.database import DirectoryBasedExampleDatabase, ExampleDatabase
from hypothesis.errors import Flaky
from hypothesis.strategies import SearchStrategy

from acp_conformance import strategies as acp
from acp_conformance.clauses import registry
from acp_conformance.core import jsonrpc
from acp_conformance.core.events import Event, Response, Violation
from acp_conformance.errors import AcpError, ConfigurationError, ConformanceFailure, PeerError, PeerTimeout
from acp_conformance.harness import AcpSpecWarning, AgentHarness, Connection
from acp_conformance.results import Status

__all__ = [
    "ENV_DATABASE",
    "ENV_EXAMPLES",
    "ENV_REPLAY",
    "ENV_SECONDS",
    "ENV_SEED",
    "FuzzBudget",
    "Finding",
    "live_connection",
    "hypothesis_settings",
    "record_findings",
    "replay_blobs",
    "shrink_time_limit",
    "with_replay",
]

ENV_EXAMPLES = "ACP_FUZZ_EXAMPLES"
ENV_SECONDS = "ACP_FUZZ_SECONDS"
ENV_SEED = "ACP_FUZZ_SEED"
ENV_REPLAY = "ACP_FUZZ_REPLAY"
ENV_DATABASE = "ACP_FUZZ_DATABASE"

C_ANSWERED = "jsonrpc.every-request-answered"
C_PARSE = "jsonrpc.parse-error"
C_INVALID_REQUEST = "jsonrpc.invalid-request"
C_INVALID_PARAMS = "jsonrpc.invalid-params"
C_UNKNOWN = "jsonrpc.unknown-method"
C_NOTIFICATION = "jsonrpc.notification-no-response"
C_ID_TYPES = "jsonrpc.id-types"
C_META = "ext.meta.everywhere"

#: A method no agent implements: the probe that proves the agent still answers.
PROBE = "session/acp_conformance_fuzz_probe"
#: Placeholders in generated frames, replaced by live values on the way out.
LIVE_SESSION = "acp-fuzz-live-session"
DEAD_SESSION = "acp-fuzz-no-such-session"
LIVE_CWD = "/acp-fuzz-live-cwd"
LIVE_MODE = "acp-fuzz-live-mode"
#: Violations the core charges to an answer that merely echoes an id we broke on purpose.
ID_ECHO_CLAUSES = frozenset(
    {"jsonrpc.response-id-echo", "jsonrpc.id-types", "jsonrpc.id-not-null", "jsonrpc.no-duplicate-response"}
)


# ------------------------------------------------------------------- budget
@dataclass(frozen=True)
class FuzzBudget:
    """How much to fuzz, and from which seed (see the module docstring)."""

    examples: int = 25
    seconds: float = 20.0
    seed: int = 0
    replay: str | None = None
    database: str | None = None

    @classmethod
    def from_env(cls, environ: Any = None) -> FuzzBudget:
        env = os.environ if environ is None else environ
        examples = _int(env, ENV_EXAMPLES, cls.examples, minimum=1)
        seconds = _float(env, ENV_SECONDS, cls.seconds)
        raw_seed = env.get(ENV_SEED, "").strip()
        if raw_seed.lower() == "random":
            seed = secrets.randbits(32)
        else:
            seed = _int(env, ENV_SEED, cls.seed, minimum=0)
        return cls(examples, seconds, seed, env.get(ENV_REPLAY) or None, env.get(ENV_DATABASE) or None)

    @property
    def shrink_seconds(self) -> float:
        """Time allowed for shrinking one failure (a third of the generation budget, at least 2 s)."""
        return max(2.0, self.seconds / 3)

    def describe(self) -> str:
        return f"seed {self.seed}, up to {self.examples} examples in {self.seconds:g} s"

    def replay_hint(self, blob: str | None, clause: str, key: str = "") -> str:
        line = f"{ENV_SEED}={self.seed}"
        if blob:
            line += f" {ENV_REPLAY}={blob}"
        hint = f"replay: {line} pytest --acp-agent=... --acp-clause={clause}"
        if self.database:
            hint += f"; saved in the example database {self.database}" + (f" under key {key!r}" if key else "")
        return hint

    def database_obj(self) -> ExampleDatabase | None:
        return DirectoryBasedExampleDatabase(self.database) if self.database else None


def _int(env: Any, name: str, default: int, *, minimum: int) -> int:
    raw = env.get(name, "").strip()
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ConfigurationError(f"{name} must be an integer, got {raw!r}") from None
    if value < minimum:
        raise ConfigurationError(f"{name} must be at least {minimum}, got {value}")
    return value


def _float(env: Any, name: str, default: float) -> float:
    raw = env.get(name, "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ConfigurationError(f"{name} must be a number of seconds, got {raw!r}") from None
    if not value > 0:
        raise ConfigurationError(f"{name} must be positive, got {raw!r}")
    return value


@contextmanager
def shrink_time_limit(seconds: float) -> Iterator[None]:
    """Bound the time Hypothesis spends shrinking a failure (against a live peer each try is costly).

    Hypothesis stops shrinking after ``MAX_SHRINKING_SECONDS`` (300 s) and
    reports the smallest failure found so far; this lowers that limit for
    the duration of one campaign.
    """
    from hypothesis.internal.conjecture import engine

    old = getattr(engine, "MAX_SHRINKING_SECONDS", None)
    if old is None:  # pragma: no cover - a Hypothesis without the knob: shrink as it likes
        yield
        return
    engine.MAX_SHRINKING_SECONDS = max(1, int(seconds))
    try:
        yield
    finally:
        engine.MAX_SHRINKING_SECONDS = old


def hypothesis_settings(budget: FuzzBudget, **overrides: Any) -> settings:
    """Settings for a campaign against a live peer: no deadline, the blob printed, the budget's database."""
    options: dict[str, Any] = {
        "max_examples": budget.examples,
        "deadline": None,
        "database": budget.database_obj(),
        "derandomize": False,
        "print_blob": True,
        "report_multiple_bugs": True,
        "suppress_health_check": list(HealthCheck),
        "phases": (Phase.explicit, Phase.reuse, Phase.generate, Phase.shrink),
    }
    options.update(overrides)
    return settings(**options)


def replay_blobs(exc: BaseException) -> Iterator[tuple[BaseException, str | None]]:
    """Each failure Hypothesis raised, with its ``reproduce_failure`` blob."""
    if isinstance(exc, BaseExceptionGroup):
        for sub in exc.exceptions:
            yield from replay_blobs(sub)
        return
    blob = None
    for note in getattr(exc, "__notes__", ()):
        m = re.search(r"@reproduce_failure\([^,]+, (b'[^']*'|b\"[^\"]*\")\)", note)
        if m:
            blob = m.group(1)[2:-1]
    yield exc, blob


def with_replay(test: Any, budget: FuzzBudget) -> Any:
    """Apply ``ACP_FUZZ_REPLAY`` (a blob, as the report prints it) to a ``@given`` test."""
    if not budget.replay:
        return test
    blob = budget.replay.strip()
    if blob.startswith(("b'", 'b"')):
        blob = blob[2:-1]
    return reproduce_failure(hypothesis.__version__, blob.encode())(test)


# ------------------------------------------------------------- connections
@contextmanager
def live_connection(
    portal: BlockingPortal, acp_agent: AgentHarness, stream_failures: list[ConformanceFailure], **kwargs: Any
) -> Iterator[Connection]:
    """``acp_agent.connect()`` held open from synchronous code (a Hypothesis test) through ``portal``.

    A stream-level failure found when the connection closes (the harness
    raises it on exit) is kept in ``stream_failures``: its result is
    already recorded, and the fuzzing goes on.
    """
    cm: AbstractContextManager[Connection] = portal.wrap_async_context_manager(acp_agent.connect(**kwargs))
    conn = cm.__enter__()
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


# ---------------------------------------------------------------- findings
@dataclass
class Finding:
    """A clause broken by one (shrunk) example."""

    clause: str
    message: str
    example: str
    blob: str | None = None
    evidence: str = ""


class FuzzFinding(AssertionError):
    """Raised inside a Hypothesis example; one subclass per clause keeps distinct bugs apart."""

    clause = ""

    def __init__(self, message: str, example: str, evidence: str) -> None:
        super().__init__(f"[{self.clause}] {message}: {example}")
        self.message = message
        self.example = example
        self.evidence = evidence


_FINDING_TYPES: dict[str, type[FuzzFinding]] = {}


def finding_type(clause: str) -> type[FuzzFinding]:
    t = _FINDING_TYPES.get(clause)
    if t is None:
        name = "Fuzz_" + re.sub(r"\W", "_", clause)
        t = _FINDING_TYPES[clause] = type(name, (FuzzFinding,), {"clause": clause})
    return t


def record_findings(
    acp_agent: AgentHarness,
    budget: FuzzBudget,
    what: str,
    clauses: Sequence[str],
    exercised: Counter[str],
    findings: list[Finding],
    ran: int,
    skipped: int,
    key: str = "",
) -> None:
    """Turn a campaign into clause results; raise ``ConformanceFailure`` for a MUST broken."""
    reg = registry()
    seen: dict[str, Finding] = {}
    for f in findings:
        seen.setdefault(f.clause, f)
    tail = f" ({budget.describe()}; {ran} run" + (f", {skipped} not run: budget spent" if skipped else "") + ")"
    first_must: Finding | None = None
    for clause, f in seen.items():
        mandatory = reg.get(clause).mandatory
        msg = f"{f.message}; {what}: {f.example}; {budget.replay_hint(f.blob, clause, key)}{tail}"
        acp_agent.record(clause, Status.FAIL if mandatory else Status.WARN, msg, f.evidence)
        if mandatory and first_must is None:
            first_must = f
        elif not mandatory:
            warnings.warn(AcpSpecWarning(f"[{clause}] {msg}"), stacklevel=2)
    for clause in clauses:
        if clause in seen:
            continue
        if exercised[clause]:
            acp_agent.record(clause, Status.PASS, f"{exercised[clause]} judgement(s) over {ran} {what}(s){tail}")
        else:
            acp_agent.record(clause, Status.INCONCLUSIVE, f"no {what} exercised it{tail}")
    if first_must is not None:
        raise ConformanceFailure(
            first_must.clause, f"no finding in {what}s", f"{first_must.message}: {first_must.example}"
        )


# -------------------------------------------------------------- the fuzzer
@dataclass
class _Live:
    """Live values standing in for the placeholders of one connection."""

    conn: Connection
    values: dict[bytes, bytes] = field(default_factory=dict)
    implemented: frozenset[str] = frozenset()
    #: Methods seen to succeed on this connection without anything unusual (``baseline=True``).
    succeeded: frozenset[str] = frozenset()


class FrameFuzzer:
    """Runs frames against the agent under test, one connection at a time."""

    def __init__(
        self, acp_agent: AgentHarness, portal: BlockingPortal, budget: FuzzBudget, *, baseline: bool = False
    ) -> None:
        self.acp = acp_agent
        self.baseline = baseline
        self.portal = portal
        self.budget = budget
        self.timeout = acp_agent.config.timeout
        self.stream_failures: list[ConformanceFailure] = []
        self.exercised: Counter[str] = Counter()
        self.ran = 0
        self.skipped = 0
        self._memo: dict[tuple[bytes, tuple[bytes, ...]], tuple[list[acp.Problem], str]] = {}
        self._live: _Live | None = None
        self._cm: Any = None
        self._dirty = False
        self._broken = False
        self._deadline = 0.0
        self.failed = False
        self.first_failures: dict[str, Finding] = {}

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
        self._cm = live_connection(self.portal, self.acp, self.stream_failures)
        conn = self._cm.__enter__()
        self._live = self.portal.call(self._prepare, conn)
        self._dirty = False

    async def _prepare(self, conn: Connection) -> _Live:
        peer = conn.peer
        root = str(conn.sandbox.root)
        result = await peer.request("session/new", {"cwd": root, "mcpServers": []})
        sid = result.get("sessionId") if isinstance(result, dict) else None
        if not isinstance(sid, str):
            raise PeerError(f"session/new gave no sessionId ({result!r}); cannot aim frames at a live session")
        modes = result.get("modes") if isinstance(result, dict) else None
        mode_ids = [m.get("id") for m in (modes or {}).get("availableModes", []) if isinstance(m, dict)]
        live = _Live(conn)
        live.values = {
            orjson.dumps(LIVE_SESSION): orjson.dumps(sid),
            orjson.dumps(LIVE_CWD): orjson.dumps(root),
        }
        if mode_ids and isinstance(mode_ids[0], str):
            live.values[orjson.dumps(LIVE_MODE)] = orjson.dumps(mode_ids[-1])
        caps = conn.client.agent_capabilities
        implemented = set(acp.BASELINE)
        if caps.get("loadSession") is True:
            implemented.add("session/load")
        session_caps = caps.get("sessionCapabilities")
        for name in ("list", "close", "resume", "delete"):
            if isinstance(session_caps, dict) and isinstance(session_caps.get(name), dict):
                implemented.add(f"session/{name}")
        if modes:
            implemented.add("session/set_mode")
        if isinstance(result, dict) and result.get("configOptions"):
            implemented.add("session/set_config_option")
        live.implemented = frozenset(implemented)
        if self.baseline:
            live.succeeded = await self._baseline(conn, sid, live)
        return live

    async def _baseline(self, conn: Connection, sid: str, live: _Live) -> frozenset[str]:
        """Plain requests the agent serves: a frame that fails only with something unusual added is then telling."""
        ok = {"session/new"}
        turn = await conn.client.prompt(sid, self.acp.config.prompt)
        if turn.response is not None and not turn.response.is_error:
            ok.add("session/prompt")
        mode = live.values.get(orjson.dumps(LIVE_MODE))
        if mode is not None:
            resp = await conn.peer.call("session/set_mode", {"sessionId": sid, "modeId": orjson.loads(mode)})
            if not resp.is_error:
                ok.add("session/set_mode")
        return frozenset(ok)

    # -------------------------------------------------------------- examples
    def run(self, frame: acp.Frame, judge: Callable[[acp.Frame, _Live], acp.Expect] | None = None) -> None:
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
            if self._live is None or self._dirty:
                self.stop()
                try:
                    self._open()
                except AcpError as exc:
                    # Could not restart the agent: keep what was found, try nothing more.
                    self._broken = True
                    self.acp.connections[-1].transcript.note(f"(fuzz) could not restart the agent: {exc}")
                    self.skipped += 1
                    return
            assert self._live is not None
            if not self._applicable(frame, self._live):
                return
            expect = judge(frame, self._live) if judge else frame.expect
            problems = self.portal.call(self._exchange, self._live, frame, expect)
            self.ran += 1
            judged = {expect.clause, expect.missing_clause, C_ANSWERED}
            if frame.trackable_id:
                judged.add(expect.id_clause)
            for clause in judged:
                self.exercised[clause] += 1
            evidence = self.acp.evidence(self._live.conn) if problems else ""
            memo = self._memo[key] = (problems, evidence)
            for p in problems[:1]:
                self.first_failures.setdefault(p.clause, Finding(p.clause, p.message, frame.describe(), None, evidence))
            if problems:
                self._dirty = True  # a fresh agent for the next example, so failures shrink independently
                self.failed = True
        problems, evidence = memo
        if problems:
            p = problems[0]
            raise finding_type(p.clause)(p.message, frame.describe(), evidence)

    def _applicable(self, frame: acp.Frame, live: _Live) -> bool:
        return orjson.dumps(LIVE_MODE) not in frame.data or orjson.dumps(LIVE_MODE) in live.values

    def _writes(self, frame: acp.Frame, live: _Live) -> list[bytes]:
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

    async def _exchange(self, live: _Live, frame: acp.Frame, expect: acp.Expect) -> list[acp.Problem]:
        peer = live.conn.peer
        mark = len(peer.events)
        rid = frame.id
        tracked = (
            frame.trackable_id
            and frame.kind not in ("result", "error")
            and not (isinstance(rid, int) and not -(2**63) <= rid < 2**63)
            # Two requests under one id: the agent may answer them in any order, so no answer can be
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
            # Damaged bytes (invalid UTF-8, a cut frame...) may still carry a readable id, and an
            # agent that decodes leniently answers under it: not an answer to nothing either.
            for guess in _ids_in(frame.data):
                peer.conn.allow_unpaired(guess)
        problems: list[acp.Problem] = []
        probe_ids: list[Any] = []
        try:
            for chunk in self._writes(frame, live):
                await peer.send_raw(chunk)
            if (tracked or unpaired) and expect.answer == "required":
                # It may take a while (a prompt turn, a real agent loading a session): wait for
                # this answer itself, not only for the probes behind it. Silence is judged below
                # by the frame's expectation ("no answer").
                key = _key(rid)

                def answered(ev: Event) -> bool:
                    return isinstance(ev, Response) and (
                        _key(ev.id) == key or (expect.null_id_ok and ev.id is None and ev.is_error)
                    )

                with contextlib.suppress(PeerTimeout):
                    await peer.wait_for(answered, start=mark, timeout=self.timeout, what="its answer")
            for _ in range(2):
                # Never under the frame's own id: its answer would be taken for the probe's.
                pid = peer.conn.next_request_id()
                while frame.has_id and _key(pid) == _key(rid):
                    pid = peer.conn.next_request_id()
                probe_ids.append(await peer.send_request(PROBE, {}, validate=False, id=pid))
                await peer.wait_response(probe_ids[-1], method=PROBE, timeout=self.timeout)
        except PeerError as exc:
            what = "closed its output" if peer.closed.is_set() else "stopped answering"
            return [acp.Problem(C_ANSWERED, f"the agent {what} after the frame ({exc.message})")]
        finally:
            if tracked:
                peer.conn.forget_outgoing(rid)
            # Unpaired ids stay allowed: a slow agent's late answer to a malformed frame is not
            # an answer "to nothing" (the frame's expectation has judged what came in time).
        probe_keys = {jsonrpc.id_key(p) for p in probe_ids}
        window = peer.events[mark:]
        responses = [
            e
            for e in window
            if isinstance(e, Response) and isinstance(e.message, dict) and _key(e.id) not in probe_keys
        ]
        answers = frame.answers([e.message for e in responses])
        problems += expect.check(answers)
        self._excuse(live, frame, window, responses)
        return problems

    def _excuse(self, live: _Live, frame: acp.Frame, window: list[Any], responses: list[Response]) -> None:
        """Drop core violations that only say the agent echoed an id we malformed on purpose."""
        if not frame.has_id:
            return
        echo = {
            r.index
            for r in responses
            # A request with a null id (discouraged, not forbidden) is rightly answered under null.
            if (r.id is not None or frame.id is None)
            and _same(r.id, frame.id)
            and (not frame.trackable_id or frame.mutation)
        }
        if not echo:
            return
        transcript = live.conn.transcript
        gone = [v for v in window if isinstance(v, Violation) and v.clause_id in ID_ECHO_CLAUSES and v.index in echo]
        for v in gone:
            if v in transcript.violations:
                transcript.violations.remove(v)
            for entry in transcript.entries:
                if v in entry.violations:
                    entry.violations.remove(v)
        if gone:
            transcript.note(
                f"(fuzz) {len(gone)} finding(s) on an answer echoing the deliberately odd id {frame.id!r:.60} "
                "set aside: the fuzz test judges that answer itself"
            )


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


def _key(rid: Any) -> tuple[str, Any]:
    try:
        return jsonrpc.id_key(rid)
    except TypeError:
        return ("o", repr(rid))


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        # An integer beyond 2**53 comes back as the nearest double from a JavaScript peer: the
        # same number as far as JSON interoperability goes (RFC 8259 § 6).
        try:
            return a == b or float(a) == float(b)
        except OverflowError:
            return False
    return type(a) is type(b) and bool(a == b)


# ------------------------------------------------------------- campaigns
def run_campaign(
    acp_agent: AgentHarness,
    name: str,
    clauses: Sequence[str],
    strategy: SearchStrategy[acp.Frame],
    judge: Callable[[acp.Frame, _Live], acp.Expect] | None = None,
    *,
    baseline: bool = False,
) -> None:
    budget = FuzzBudget.from_env()
    findings: list[Finding] = []
    strategy = strategy.filter(_harmless)
    with start_blocking_portal("asyncio") as portal:
        fuzzer = FrameFuzzer(acp_agent, portal, budget, baseline=baseline)
        fuzzer.start()
        try:

            @hypothesis_settings(budget)
            @hypothesis_seed(budget.seed)
            @given(strategy)
            def fuzz(frame: acp.Frame) -> None:
                fuzzer.run(frame, judge)

            fuzz._hypothesis_internal_database_key = database_key(name)  # type: ignore[attr-defined]
            try:
                with shrink_time_limit(budget.shrink_seconds):
                    with_replay(fuzz, budget)()
            except Exception as exc:
                findings = _collect(exc, fuzzer.first_failures)
        finally:
            fuzzer.stop()
    for failure in fuzzer.stream_failures:
        # Already recorded by the harness (passive clauses); say which campaign provoked it.
        acp_agent.record(
            failure.clause_id, Status.FAIL, f"{failure.actual} (during {name} fuzzing, {budget.describe()})"
        )
    record_findings(
        acp_agent,
        budget,
        "frame",
        clauses,
        fuzzer.exercised,
        findings,
        fuzzer.ran,
        fuzzer.skipped,
        database_key(name).decode(),
    )


#: Methods with effects beyond the connection: a real agent may start an interactive login for
#: ``authenticate`` or end the user's signed-in state for ``logout``. The auth tests send them only
#: when the user asked (--acp-auth-method); the fuzzer never does.
UNSAFE_METHODS = frozenset({"authenticate", "logout"})


def _harmless(frame: acp.Frame) -> bool:
    if frame.method in UNSAFE_METHODS:
        return False
    return not any(m in frame.data for m in (b'"authenticate"', b'"logout"'))


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
            raise sub  # the agent could not be started or set up: the campaign could not run
        else:
            raise exc
    if flaky and not out:
        # Seen failing, but not again on replay (a timing-dependent defect): report what was seen.
        out = [replace(f, message=f"{f.message} (did not recur on replay)") for f in seen.values()]
    return out


def _frames(**kwargs: Any) -> SearchStrategy[acp.Frame]:
    return acp.frames(sender="client", **kwargs)


_SAFE = {
    # Aim at the live session, in the sandbox, with no MCP server to launch.
    "cwd": st.just(LIVE_CWD),
    "mcpServers": st.just([]),
    "additionalDirectories": st.just([]),
}


# ------------------------------------------------------------------ tests
@pytest.mark.clause(C_PARSE, C_ANSWERED)
def test_fuzz_unparseable_lines(acp_agent: AgentHarness) -> None:
    """Lines that are not JSON (garbage, NUL, invalid UTF-8, cut frames, banners, 1 MiB lines)
    get -32700 with a null id; oddly framed JSON (CRLF, BOM, split writes) is still served."""
    base = _frames(kinds=["request"], overrides={"SessionId": st.just(DEAD_SESSION), **_SAFE})
    strategy = acp.byte_damage(base, huge_bytes=1024 * 1024)
    run_campaign(acp_agent, "unparseable-lines", [C_PARSE, C_ANSWERED], strategy)


@pytest.mark.clause(C_INVALID_REQUEST, C_ANSWERED)
def test_fuzz_invalid_requests(acp_agent: AgentHarness) -> None:
    """JSON that is no request object ({}, scalars, null, no method, a non-string method, ids of
    the wrong type, a broken envelope) gets -32600, and the agent keeps serving."""
    strategy = acp.invalid_frames(
        sender="client",
        mutations=["not-a-request", "invalid-id", "envelope"],
        overrides={"SessionId": st.just(DEAD_SESSION), **_SAFE},
    )
    run_campaign(acp_agent, "invalid-requests", [C_INVALID_REQUEST, C_ANSWERED], strategy)


@pytest.mark.clause(C_INVALID_PARAMS, C_ANSWERED)
def test_fuzz_invalid_params(acp_agent: AgentHarness) -> None:
    """A request missing a required member, or with a member (or params) of the wrong type,
    gets -32602 (or -32601 for a method the agent does not implement), aimed at a live session."""
    strategy = acp.invalid_frames(
        sender="client",
        kinds=["request"],
        mutations=["missing-required", "wrong-type", "params-not-object"],
        overrides={"SessionId": st.just(LIVE_SESSION), **_SAFE},
    ).filter(lambda f: f.expect.clause == C_INVALID_PARAMS)

    def judge(frame: acp.Frame, live: _Live) -> acp.Expect:
        codes = set(frame.expect.codes or ())
        codes.discard(acp.METHOD_NOT_FOUND)
        if frame.method not in live.implemented:
            codes.add(acp.METHOD_NOT_FOUND)
        return acp.Expect("required", frozenset(codes), result_ok=False, clause=C_INVALID_PARAMS)

    run_campaign(acp_agent, "invalid-params", [C_INVALID_PARAMS, C_ANSWERED], strategy, judge)


@pytest.mark.clause(C_UNKNOWN, C_NOTIFICATION, C_ANSWERED)
def test_fuzz_methods_and_notifications(acp_agent: AgentHarness) -> None:
    """Unknown methods (near misses, unicode, reserved prefixes) get -32601; no notification,
    valid or broken, known or unknown, is ever answered."""
    safe = {"SessionId": st.sampled_from([DEAD_SESSION, LIVE_SESSION]), **_SAFE}
    unknown = acp.invalid_frames(sender="client", mutations=["unknown-method"], overrides=safe)
    notes = acp.frames(sender="client", kinds=["notification"], valid=None, unusual=True, overrides=safe)
    strategy = acp.evenly(unknown, notes)
    run_campaign(acp_agent, "methods-and-notifications", [C_UNKNOWN, C_NOTIFICATION, C_ANSWERED], strategy)


@pytest.mark.clause(C_ID_TYPES, C_ANSWERED)
def test_fuzz_odd_ids(acp_agent: AgentHarness) -> None:
    """Requests with odd but valid ids (0, negative, int64 extremes, "", numeric-looking, unicode,
    64 KiB strings) are answered with exactly that id; a reused id does not wedge the agent."""
    safe = {"SessionId": st.just(DEAD_SESSION), **_SAFE}
    odd = acp.frames(sender="client", kinds=["request"], mutations=["odd-id"], overrides=safe)
    dup = acp.invalid_frames(sender="client", mutations=["duplicate-id"], overrides=safe)
    strategy = acp.evenly(odd, odd, odd, dup)
    run_campaign(acp_agent, "odd-ids", [C_ID_TYPES, C_ANSWERED], strategy)


@pytest.mark.clause(C_ANSWERED)
def test_fuzz_survives_unusual_frames(acp_agent: AgentHarness) -> None:
    """Valid but unusual frames (1 MiB strings, long arrays, deep nesting, RTL / zero-width /
    combining text, extension methods) and odd invalid ones (lone surrogates, unknown enum values,
    nested wrong types, stray responses) are answered as owed, and the agent keeps answering."""
    safe = {"SessionId": st.just(DEAD_SESSION), **_SAFE}
    valid = acp.frames(
        sender="client",
        kinds=["request"],
        mutations=["unicode", "huge-string", "huge-array", "nesting", "extension"],
        overrides=safe,
    )
    odd = acp.invalid_frames(
        sender="client",
        mutations=["deep-nesting", "surrogates", "stray-response", "unknown-enum", "wrong-type"],
        overrides=safe,
    )
    strategy = acp.evenly(valid, odd)
    run_campaign(acp_agent, "unusual-frames", [C_ANSWERED], strategy)


@pytest.mark.clause(C_META)
def test_fuzz_meta_is_accepted_everywhere(acp_agent: AgentHarness) -> None:
    """Requests that succeed without _meta still succeed with _meta on every object that allows it
    (params, content blocks, annotations...), whatever it holds; notifications carrying it are not answered."""
    prompt_text = acp_agent.config.prompt
    text_block = acp.from_definition("ContentBlock", meta="always", overrides={"text": st.just(prompt_text)}).filter(
        lambda b: b.get("type") == "text"
    )
    live = {"SessionId": st.just(LIVE_SESSION), **_SAFE}
    new = acp.frames(method="session/new", sender="client", kinds=["request"], meta="always", overrides=live)
    prompt = acp.frames(
        method="session/prompt",
        sender="client",
        kinds=["request"],
        meta="always",
        overrides={**live, "prompt": st.lists(text_block, min_size=1, max_size=2)},
    )
    mode = acp.frames(
        method="session/set_mode",
        sender="client",
        kinds=["request"],
        meta="always",
        overrides={**live, "SessionModeId": st.just(LIVE_MODE)},
    )
    cancel = acp.frames(method="session/cancel", sender="client", kinds=["notification"], meta="always", overrides=live)
    strategy = acp.evenly(new, new, mode, cancel, prompt)

    def judge(frame: acp.Frame, live: _Live) -> acp.Expect:
        if frame.kind == "notification":
            return frame.expect
        if frame.method not in live.succeeded:
            return acp.Expect("required")  # it fails without _meta too: not a _meta matter
        return acp.Expect("required", frozenset(), result_ok=True, clause=C_META)

    run_campaign(acp_agent, "meta-everywhere", [C_META], strategy, judge, baseline=True)
