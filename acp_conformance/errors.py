"""Every exception the toolkit raises, in one place.

The split follows h11: a *local* error means our own code (or a test author)
asked for something the protocol forbids; what the peer does wrong is not an
exception at all but a recorded violation (``core.events.Violation``), judged on
its clause, so one breach never stops the reading of the frames after it.
Conformance checks never see local errors as peer failures, and peer failures
never escape as tracebacks::

    AcpError
    ├── LocalProtocolError        we tried to send something illegal
    ├── PeerError                 the peer process itself misbehaved
    │   ├── PeerExited            it exited / closed stdout while we waited
    │   ├── PeerTimeout           a deadline passed while we waited
    │   └── PeerUnavailable       not started: its earlier handshakes all failed
    ├── RpcError                  the peer answered a request with an error
    ├── ConfigurationError        bad user input: option, command, schema
    │   └── SchemaNotFound        the official schema could not be located
    ├── ScenarioError             a scenario file is invalid
    └── NotComparable             a borrowed connection showed what a fresh one would not

``ConformanceFailure`` is an ``AssertionError`` (so pytest renders it as a
test failure, not an error) carrying the clause, expectation and
observation.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "AcpError",
    "ConfigurationError",
    "ConformanceFailure",
    "LocalProtocolError",
    "NotComparable",
    "PeerError",
    "PeerExited",
    "PeerTimeout",
    "PeerUnavailable",
    "RpcError",
    "ScenarioError",
    "SchemaNotFound",
]


class AcpError(Exception):
    """Base class of every exception raised on purpose by acp-conformance."""


class LocalProtocolError(AcpError):
    """Our side was asked to send something the protocol forbids.

    Raised before anything reaches the wire; negative tests that *want* to
    send a broken frame use the raw-send API instead.
    """


class PeerError(AcpError):
    """The peer process misbehaved at the process level."""

    def __init__(self, message: str, stderr_tail: list[str] | None = None, *, unproven: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.stderr_tail = list(stderr_tail or [])
        #: Why the failed wait proves no request left unanswered (``jsonrpc.every-request-answered``),
        #: or "" when it does: decided where the wait failed (``Peer.wait_response``), so that every
        #: judge that catches the error (a scripted test, the stateful machine) reads one answer.
        self.unproven = unproven
        #: The clause the connection charged the silence to (``Peer._unanswered``), or "" when it
        #: charged none (not proven, or the caller judges the silence itself).
        self.charged = ""

    def describe(self, peer: str = "agent", message: str | None = None) -> str:
        """One line for a report: the message (``message`` instead, when the caller words what
        failed itself), how the process ended when known, its last stderr lines (what a dead or
        stalled peer said is most often why)."""
        ended = self.exit_words() if isinstance(self, PeerExited) else ""
        tail = "; ".join(self.stderr_tail[-5:])
        said = self.message if message is None else message
        return said + (f"; {ended}" if ended else "") + (f" ({peer} stderr: {tail})" if tail else "")


class PeerExited(PeerError):
    """The peer exited or closed its stdout while we were waiting for it."""

    def __init__(
        self,
        message: str,
        returncode: int | None = None,
        stderr_tail: list[str] | None = None,
        *,
        read_proven: bool = False,
        unproven: str = "",
    ) -> None:
        super().__init__(message, stderr_tail, unproven=unproven)
        #: Its exit status when known to be its own (it exited before teardown signalled it).
        self.returncode = returncode
        #: Raised while we waited for an answer: the peer had provably read our request (it answered
        #: one we sent after it, ``Peer.wait_response``).  False: it may never have read it.
        self.read_proven = read_proven

    def exit_words(self) -> str:
        """How the process ended, for a message ("" when unknown): a peer that dies on start
        (a missing key, a bad argument) is told apart from one that closed its stdout cleanly."""
        code = self.returncode
        if code is None:
            return ""
        if code < 0:
            import signal

            try:
                return f"it was killed by {signal.Signals(-code).name}"
            except ValueError:
                return f"it was killed by signal {-code}"
        return f"it exited with status {code}"


class PeerTimeout(PeerError):
    """A deadline passed while waiting for the peer; names what we waited for."""


class RpcError(AcpError):
    """The peer answered one of our requests with a JSON-RPC error object."""

    def __init__(self, method: str, code: Any, message: Any, data: Any = None) -> None:
        super().__init__(f"{method} failed with error {code}: {message}")
        self.method = method
        self.code = code
        self.error_message = message
        self.data = data


class ConfigurationError(AcpError):
    """Bad user input (option value, command line, clause id, file)."""


class SchemaNotFound(ConfigurationError):
    """The official ACP JSON Schema could not be located anywhere we look."""


class ScenarioError(ConfigurationError):
    """A scenario file is invalid; the message names file, line and problem."""


class ConformanceFailure(AssertionError):
    """A check found the peer in breach of ``clause_id``.

    It subclasses ``AssertionError`` so pytest shows it as a test failure.
    ``expected`` and ``actual`` are short human-readable strings.
    """

    def __init__(self, clause_id: str, expected: str, actual: str) -> None:
        super().__init__(f"[{clause_id}] expected {expected}; observed {actual}")
        self.clause_id = clause_id
        self.expected = expected
        self.actual = actual


class PeerUnavailable(PeerError):
    """The agent was not started for this test: every earlier handshake in this
    run failed, so starting it again would only wait out another timeout."""


class PeerGaveUp(AcpError):
    """A request was not sent: the peer has already let this method's deadline pass twice in
    this run, so waiting once more would only cost another deadline (the earlier misses are the
    evidence, and were judged where they happened).  Not a ``PeerError``: nothing happened on
    this connection, and a check that catches ``PeerError`` as "the peer stopped answering" must
    not read it as evidence; it ends the test INCONCLUSIVE."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class NotComparable(AcpError):
    """A test on a borrowed agent connection (``--acp-isolation=connection``) saw something a
    freshly started process could not have shown it: the agent gave it an earlier test's session.
    Its findings would not be the ones of the default mode, so they are not findings: the plugin
    forgets the attempt and runs the test again on processes of its own (``AgentHarness.start_over``)."""
