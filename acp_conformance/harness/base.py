"""What every harness (agent under test, client under test) shares: the test's results.

A harness is what a conformance test holds.  Whatever the role, it records clause results
(``record``: a breach takes the status its clause's level gives it, ``results.adjust``),
judges checks (``check``: a MUST failure stops the test, or is kept for the end with
``stop=False``; a SHOULD warns; a MAY notes), and remembers, per process, how handshakes with
each command went and which methods' deadlines the peer let pass (so a dead or hanging peer
costs two deadlines, not one per test).  No pytest here: the plugin reads ``results``,
``evidence()``, ``peer_info``, ``body_completed`` and ``pending_failure``.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import Any, Protocol

from acp_conformance.clauses import registry
from acp_conformance.errors import ConformanceFailure, PeerError
from acp_conformance.peer import DeadlineMemory
from acp_conformance.redaction import redactor
from acp_conformance.results import ClauseResult, Status, adjust, judged
from acp_conformance.transcript import Transcript

__all__ = [
    "DEAD_AFTER",
    "AcpSpecWarning",
    "ExitMemory",
    "HarnessBase",
    "HarnessLike",
    "Liveness",
    "deadline_memory",
    "exit_memory",
    "judge_transcript",
    "liveness",
]

#: After this many handshakes in a row fail (no ``initialize`` answer, or the
#: process died first) without one ever succeeding, later tests in the same
#: process stop starting the peer: a dead peer then costs seconds, not one
#: startup timeout per test.  Two, not one, so a single cold start (npx
#: downloading, a JIT warming up) cannot write off the whole run.
DEAD_AFTER = 2


class AcpSpecWarning(UserWarning):
    """A SHOULD-level recommendation the peer does not follow.

    Its message quotes what the peer sent and pytest prints it in the warnings summary, outside
    the reports' redaction: it is redacted here, the one place every such warning is made."""

    def __init__(self, message: str) -> None:
        super().__init__(redactor()(message))


@dataclass
class Liveness:
    """Per-process memory of how handshakes with one command went."""

    ok: bool = False
    #: Why each failed: the peer's error, read only when a later test gives up on the peer; by
    #: then its teardown has added what the peer said on its way out and how it ended.
    failures: list[PeerError] = field(default_factory=list)

    def last_failure(self, peer: str) -> str:
        return self.failures[-1].describe(peer)


@dataclass
class ExitMemory:
    """Per-process memory of how often the peer started by one command ignored stdin EOF at teardown.

    Teardown closes stdin, waits, then signals.  A peer that never exits on EOF (a MAY:
    ``transport.stdio.exit-on-stdin-close``, judged by its own test with its own wait) would
    cost that whole wait in every test; after ``limit`` teardowns in which it outlived it, later
    ones wait only ``short`` before SIGTERM.  Nothing is judged on that wait: our reader has
    stopped before teardown, so no evidence is lost, only time."""

    limit: int = 2
    short: float = 0.2
    outlived: int = 0

    def eof_grace(self, grace: float) -> float:
        return min(grace, self.short) if self.outlived >= self.limit else grace

    def note(self, outlived_eof: bool) -> None:
        if outlived_eof:
            self.outlived += 1


_LIVENESS: dict[tuple[str, str], Liveness] = {}
_DEADLINES: dict[str, DeadlineMemory] = {}
_EXITS: dict[str, ExitMemory] = {}


def liveness(role: str, command: str) -> Liveness:
    """The run's memory of handshakes with the ``role`` peer started by ``command``."""
    return _LIVENESS.setdefault((role, command), Liveness())


def deadline_memory(command: str) -> DeadlineMemory:
    """The run's memory of missed deadlines for the peer started by ``command``."""
    return _DEADLINES.setdefault(command, DeadlineMemory())


def exit_memory(command: str) -> ExitMemory:
    """The run's memory of teardowns the peer started by ``command`` outlived stdin EOF."""
    return _EXITS.setdefault(command, ExitMemory())


class HarnessLike(Protocol):
    """What the plugin needs of a harness, whatever the role."""

    results: list[ClauseResult]
    peer_info: dict[str, Any] | None
    body_completed: bool
    pending_failure: ConformanceFailure | None
    label: str
    peer_word: str

    def evidence(self) -> str: ...


class HarnessBase:
    """Results, checks and warnings of one test; subclasses add the peer and ``evidence``."""

    #: Whose stderr a report quotes ("agent" or "client").
    peer_word = "peer"

    def __init__(self, label: str = "") -> None:
        #: Which test this is (its node id), named when a later test gives up on a method it hung on.
        self.label = label
        self.results: list[ClauseResult] = []
        self.peer_info: dict[str, Any] | None = None
        self.body_completed = False
        #: The first MUST failure recorded by a ``check(..., stop=False)``, raised when the
        #: connection closes (the test fails, after every independent check has had its say).
        self.pending_failure: ConformanceFailure | None = None

    def evidence(self) -> str:
        return ""

    def annotate(self, message: str) -> str:
        """A hook for every recorded message (the client harness marks manual verdicts)."""
        return message

    def record(self, clause: str, status: Status, message: str = "", evidence: str = "") -> None:
        """Record a result; a breach takes the status the clause's level gives it (``results.adjust``)."""
        self.results.append(
            ClauseResult(clause, adjust(registry().get(clause), status), self.annotate(message), evidence)
        )

    def check(self, clause: str, ok: bool, expected: str, actual: str, *, stop: bool = True) -> bool:
        """Judge ``clause``: PASS, or for a MUST a ``ConformanceFailure`` that
        stops the test; for a SHOULD a WARN and an ``AcpSpecWarning``, for a MAY
        an INFO (the test goes on: a recommendation missed is not a failure).

        ``stop=False`` for a MUST whose failure must not hide the checks after it (independent
        judgements of the same traffic): the FAIL is recorded and the test fails once the body
        is over (``pending_failure``)."""
        __tracebackhide__ = True  # a finding's traceback shows the test, not the harness
        status = judged(registry().get(clause), ok)
        if status is Status.PASS:
            self.record(clause, Status.PASS, expected)
            return True
        if status is Status.FAIL and stop:
            raise ConformanceFailure(clause, expected, self.annotate(actual))
        message = f"expected {expected}; observed {actual}"
        self.record(clause, status, message, self.evidence())
        if status is Status.FAIL and self.pending_failure is None:
            self.pending_failure = ConformanceFailure(clause, expected, self.annotate(actual))
        if status is Status.WARN:
            warnings.warn(AcpSpecWarning(f"[{clause}] {message}"), stacklevel=2)
        return False


def judge_transcript(transcript: Transcript, peer_role: str) -> list[ClauseResult]:
    """``passive_results``, saying in every result when a flood made the transcript drop frames
    (the report must tell that its evidence is partial, and how partial)."""
    from acp_conformance.checks import passive_results

    found = passive_results(transcript, peer_role)
    dropped = transcript.dropped_summary
    if dropped and transcript.frames_dropped:
        for r in found:
            r.message = f"{r.message} [{dropped}]" if r.message else f"[{dropped}]"
    return found
