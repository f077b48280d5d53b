"""Helpers shared by the bundled suites (pytest-facing)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import pytest

from acp_conformance.core.events import Response
from acp_conformance.core.jsonrpc import ErrorCode
from acp_conformance.endpoints.client import Turn
from acp_conformance.errors import PeerError, PeerExited, PeerTimeout
from acp_conformance.harness import AgentHarness, Connection
from acp_conformance.harness.base import HarnessBase
from acp_conformance.plugin.keys import STATE
from acp_conformance.plugin.outcomes import Inconclusive, NotApplicable
from acp_conformance.results import Status

AUTH_REQUIRED = ErrorCode.AUTH_REQUIRED

if TYPE_CHECKING:  # the scenario models (pydantic) load only in the tests that play scenario files
    from acp_conformance.scenario.result import ScenarioResult

__all__ = [
    "blocked_by_auth",
    "check_auth",
    "check_or_stop",
    "conclude",
    "inconclusive",
    "new_session",
    "not_applicable",
    "run_turn",
    "silence_judged_once",
    "unless_answered_elsewhere",
]


def not_applicable(reason: str) -> NoReturn:
    """The clause does not apply to this peer (capability or feature not offered)."""
    raise NotApplicable(reason)


def inconclusive(reason: str) -> NoReturn:
    """The run could not judge the clause (e.g. a race it could not provoke)."""
    raise Inconclusive(reason)


def check_or_stop(h: HarnessBase, clause: str, ok: bool, expected: str, actual: str) -> None:
    """``check`` for a judgement the rest of the test builds on (a terminal id, an answered
    initialize).  A MUST breach stops the test as ``check`` does; a SHOULD's WARN or a MAY's INFO
    lets it go on, which here would mean building on what is not there: the rest is INCONCLUSIVE."""
    __tracebackhide__ = True
    if not h.check(clause, ok, expected, actual):
        inconclusive(f"stopped after {clause} (expected {expected}; observed {actual}): the rest builds on it")


def silence_judged_once(h: HarnessBase, clause: str, expected: str, exc: PeerTimeout) -> None:
    """One silence, one finding.  A request of ours left unanswered is charged once, by the
    connection (``Peer._unanswered``, which names the clause in ``exc.charged``):
    ``jsonrpc.every-request-answered``; ``ext.request.respond`` for an extension request; or, for
    one we send on purpose against the spec (params the schema rejects, a method or mode the peer
    did not advertise), ``jsonrpc.survives-invalid-input``, as the fuzz campaigns charge theirs
    (``Expect.missing_clause``).  Nothing at all when the silence is not proven (``exc.unproven``).
    ``clause``, about what the answer says (an error, its code), has no answer to judge:
    INCONCLUSIVE, not a second finding for the same silence."""
    if exc.unproven:
        whose = "not proven unanswered, so no clause is charged with it"
    elif exc.charged:
        whose = f"which is {exc.charged}'s finding"
    else:
        whose = "which this wait charged to no clause"
    h.record(
        clause, Status.INCONCLUSIVE, f"expected {expected}; {exc.message}, {whose}: this clause judges answers only"
    )


def unless_answered_elsewhere(exc: PeerError, *, own_answer: bool = False) -> None:
    """For a check about to judge the silence ``exc`` of one of our requests: INCONCLUSIVE when the
    silence is not proven (``Peer.why_unproven``).  A response under an id matching nothing we sent
    came meanwhile (perhaps its answer, under the wrong id: the echo clause's breach) always counts;
    a peer that exited without anything showing it had read the request counts only for a clause
    about that request's own answer (``own_answer``, e.g. ``cancelreq.must-answer``), since for
    another clause the exit itself may be the finding."""
    # An exit's reason is the stray when the peer had provably read the request (``read_proven``).
    stray = isinstance(exc, PeerTimeout) or (isinstance(exc, PeerExited) and exc.read_proven)
    if exc.unproven and (own_answer or stray):
        inconclusive(f"no answer under its id, but not proven unanswered: {exc.message}")


def blocked_by_auth(acp: AgentHarness, conn: Connection) -> NoReturn:
    """The agent refuses with auth_required: nothing here can be judged."""
    methods = (conn.client.init_result or {}).get("authMethods") or []
    ids = ", ".join(str(m.get("id")) for m in methods if isinstance(m, dict)) or "none"
    if acp.config.auth_method is None:
        inconclusive(f"agent requires authentication; pass --acp-auth-method ID (advertised: {ids})")
    inconclusive(
        f"agent still answers -32000 (auth_required) after authenticate with {acp.config.auth_method!r} "
        f"(advertised: {ids})"
    )


def auth_required(resp: Response | None) -> bool:
    """The answer is -32000 (auth_required): the agent wants ``authenticate`` first."""
    return resp is not None and resp.code == AUTH_REQUIRED


def check_auth(acp: AgentHarness, conn: Connection, resp: Response | None) -> None:
    """An agent that answers -32000 (auth_required) before it is authenticated does what
    authentication.mdx describes: nothing the test meant to judge can be, so it is INCONCLUSIVE
    (naming ``--acp-auth-method``), never the FAIL of the clause the answer was awaited for."""
    if auth_required(resp):
        blocked_by_auth(acp, conn)


async def new_session(acp: AgentHarness, conn: Connection) -> str:
    """``session/new`` in the sandbox; a failure here is judged on ``session.new.unique-id``."""
    resp = await conn.peer.call("session/new", {"cwd": str(conn.sandbox.root), "mcpServers": []})
    check_auth(acp, conn, resp)
    ok = not resp.is_error and isinstance(resp.result, dict) and isinstance(resp.result.get("sessionId"), str)
    acp.check(
        "session.new.unique-id",
        ok,
        "session/new to succeed with a string sessionId",
        f"error {resp.error!r}" if resp.is_error else f"result {resp.result!r}",
    )
    assert isinstance(resp.result, dict)
    sid: str = resp.result["sessionId"]
    conn.client.sessions[sid] = resp.result
    return sid


async def run_turn(acp: AgentHarness, conn: Connection, sid: str, prompt: Any) -> Turn:
    """One prompt turn, with the stop-reason clauses judged on its answer."""
    turn = await conn.client.prompt(sid, prompt)
    resp = turn.response
    assert resp is not None
    check_auth(acp, conn, resp)
    acp.check(
        "prompt.response.stop-reason",
        not resp.is_error and isinstance(resp.result, dict) and "stopReason" in resp.result,
        "session/prompt to end with a result carrying stopReason",
        f"error {resp.error!r}" if resp.is_error else f"result {resp.result!r}",
    )
    return turn


def conclude(result: ScenarioResult) -> None:
    """End a scenario test as its run ended: it fails when the scenario could not run or an
    expectation FAILed (the first one, with its evidence), is NOT_APPLICABLE or INCONCLUSIVE when
    the run ended so (``result.end``), and returns when it completed."""
    if result.end == "error":
        pytest.fail(f"the scenario could not run: {result.reason}", pytrace=False)
    failures = [o for o in result.outcomes if o.status is Status.FAIL]
    if failures:
        first = failures[0]
        pytest.fail(f"[{', '.join(first.clauses)}] {first.message}\n{first.evidence}", pytrace=False)
    if result.end == "not_applicable":
        not_applicable(result.reason)
    if result.end == "inconclusive":
        inconclusive(result.reason)


def draft_defs(request: pytest.FixtureRequest) -> dict[str, Any] | None:
    """``$defs`` of the unstable schema shipped beside the stable one, if any.

    A field the stable schema lacks but the unstable one defines at the same place (e.g.
    ``sessionCapabilities.fork``) is the protocol's own name for a draft feature, not custom
    data: the extensibility page reserves root names *for future protocol versions*, and
    that is what the unstable schema is.  Such fields are named, never failed.
    """
    state = request.config.stash.get(STATE, None)
    if state is None or state.schema.unstable:
        return None
    draft = Path(state.schema.path).with_name("schema.unstable.json")
    try:
        defs = json.loads(draft.read_text(encoding="utf-8")).get("$defs")
    except (OSError, ValueError):
        return None
    return defs if isinstance(defs, dict) else None
