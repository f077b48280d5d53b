"""How a test's outcome becomes clause results.

A suite helper ends a test that cannot judge its clauses with a typed skip (``NotApplicable``,
``Inconclusive``): subclasses of pytest's own skip exception, so pytest reports them as skips,
and the plugin reads the status from the type, never from the message.  ``test_results`` turns
the harness's recorded results plus the test's outcome into the results of every clause the
test is bound to: a clause a test did not judge is never a default PASS (a stream-level clause
it did not exercise is not exercised here, any other is INCONCLUSIVE), and a suite bug never
passes for a verdict.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from acp_conformance.results import NOT_EXERCISED_HERE, ClauseResult, Status

if TYPE_CHECKING:
    from acp_conformance.harness.base import HarnessLike

__all__ = ["Inconclusive", "NotApplicable", "describe", "is_suite_error", "test_results"]

#: How a result says the suite itself broke (never a verdict about the peer).
SUITE_ERROR = "suite error: "

#: A bound clause no check of a completed test recorded: never a PASS by default.
UNJUDGED = "the test ran to its end without judging this clause"

_Skip: Any = pytest.skip.Exception


class NotApplicable(_Skip):  # type: ignore[misc]
    """The clauses do not apply to this peer (a capability or feature it does not offer)."""

    status = Status.NOT_APPLICABLE
    prefix = "NOT_APPLICABLE: "

    def __init__(self, reason: str) -> None:
        super().__init__(self.prefix + reason)
        self.reason = reason


class Inconclusive(_Skip):  # type: ignore[misc]
    """The run could not judge the clauses (a race nothing proved, a peer that stalled...)."""

    status = Status.INCONCLUSIVE
    prefix = "INCONCLUSIVE: "

    def __init__(self, reason: str) -> None:
        super().__init__(self.prefix + reason)
        self.reason = reason


def cause(exc: BaseException | None) -> BaseException | None:
    """What ended a test, through exception groups: concurrent tasks of one test (a turn and a
    relay read) often fail together when the peer dies, and anyio raises both as a group.  A
    group made only of findings and peer errors is its first finding, else its first peer error;
    anything else in it is a suite bug and the group stays what it is."""
    from acp_conformance.errors import AcpError, ConformanceFailure

    if not isinstance(exc, BaseExceptionGroup):
        return exc
    leaves = _leaves(exc)
    if not leaves or not all(isinstance(e, (AcpError, ConformanceFailure)) for e in leaves):
        return exc
    return next((e for e in leaves if isinstance(e, ConformanceFailure)), leaves[0])


def test_results(
    marked: list[str], harness: HarnessLike, outcome: str, exc: BaseException | None, stream_level: set[str]
) -> list[ClauseResult]:
    """Every result of one test: what its harness recorded, its failure, and one result for each
    clause it is bound to (``marked``) that nothing recorded, from how the test ended."""
    from acp_conformance.errors import AcpError, ConformanceFailure

    exc = cause(exc)

    results = list(harness.results)
    explicit = {r.clause for r in results}
    evidence = harness.evidence()
    if isinstance(exc, ConformanceFailure):
        if not any(r.clause == exc.clause_id and r.status is Status.FAIL for r in results):
            results.append(
                ClauseResult(exc.clause_id, Status.FAIL, f"expected {exc.expected}; observed {exc.actual}", evidence)
            )
        explicit.add(exc.clause_id)
    why = describe(exc, harness.peer_word)
    for cid in marked:
        if cid in explicit:
            continue
        if outcome == "passed" or (isinstance(exc, ConformanceFailure) and harness.body_completed):
            if cid in stream_level:
                # Judged on the transcript, which records PASS where the traffic exercised it.
                results.append(ClauseResult(cid, Status.NOT_APPLICABLE, NOT_EXERCISED_HERE))
            else:
                # A PASS is a claim with its evidence, which the check records; a test that ran to
                # its end without judging a clause it is bound to proves nothing about it.
                results.append(ClauseResult(cid, Status.INCONCLUSIVE, UNJUDGED))
        elif isinstance(exc, (NotApplicable, Inconclusive)):
            results.append(ClauseResult(cid, exc.status, exc.reason))
        elif outcome == "skipped":
            msg = str(getattr(exc, "msg", exc) or "")
            results.append(ClauseResult(cid, Status.NOT_TESTED, msg or "skipped"))
        elif isinstance(exc, ConformanceFailure):
            results.append(ClauseResult(cid, Status.INCONCLUSIVE, f"not reached: the test stopped at {exc.clause_id}"))
        elif isinstance(exc, AcpError):
            # The peer died, stalled or refused a prerequisite: the clause was not judged.  The
            # breach itself (e.g. jsonrpc.every-request-answered) is recorded where it was seen.
            results.append(ClauseResult(cid, Status.INCONCLUSIVE, f"could not be judged: {why}", evidence))
        else:
            # A bug in the suite: never let it pass for a verdict.
            results.append(ClauseResult(cid, Status.NOT_TESTED, f"{SUITE_ERROR}{why}", evidence))
    return results


def is_suite_error(result: ClauseResult) -> bool:
    """The result of a test the suite itself broke (``test_results`` made it)."""
    return result.status is Status.NOT_TESTED and result.message.startswith(SUITE_ERROR)


def describe(exc: BaseException | None, peer: str = "agent") -> str:
    """One line for why a test ended (with the peer's stderr tail when it misbehaved)."""
    from acp_conformance.errors import AcpError, PeerError

    exc = cause(exc)
    if exc is None:
        return "the test did not complete"
    if isinstance(exc, PeerError):
        return exc.describe(peer)
    if isinstance(exc, AcpError):
        return str(exc)
    if isinstance(exc, BaseExceptionGroup):
        # Name what is inside: "2 sub-exceptions" tells whoever reads the report nothing.
        inner = "; ".join(f"{type(e).__name__}: {e}" for e in _leaves(exc)[:4])
        return f"{type(exc).__name__}: {exc} [{inner}]"
    return f"{type(exc).__name__}: {exc}"


def _leaves(group: BaseExceptionGroup[BaseException]) -> list[BaseException]:
    leaves: list[BaseException] = []
    stack: list[BaseException] = [group]
    while stack:
        e = stack.pop(0)
        if isinstance(e, BaseExceptionGroup):
            stack[:0] = list(e.exceptions)
        else:
            leaves.append(e)
    return leaves
