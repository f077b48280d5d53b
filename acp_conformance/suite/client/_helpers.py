"""Helpers shared by the client-certification tests (pytest-facing)."""

from __future__ import annotations

import os
from pathlib import Path

from acp_conformance.checks import gating
from acp_conformance.clauses import registry
from acp_conformance.endpoints.agent import PermissionAnswer, PromptTurn
from acp_conformance.errors import PeerError, PeerExited
from acp_conformance.harness.client import ClientConnection, ClientHarness
from acp_conformance.results import Status, breach_status
from acp_conformance.suite._support import inconclusive, not_applicable, unless_answered_elsewhere

__all__ = [
    "advertised",
    "end_session",
    "first_turn",
    "inconclusive",
    "manual_check",
    "not_applicable",
    "probe_path",
    "require",
    "session_dir",
]


def require(acp: ClientHarness, *actions: str) -> None:
    """NOT_APPLICABLE (with the reason) unless the driver can perform every action."""
    reason = acp.unsupported(*actions)
    if reason:
        not_applicable(reason)


async def first_turn(acp: ClientHarness, conn: ClientConnection) -> PromptTurn:
    """The client's first prompt turn (the driver made it send one)."""
    limit = acp.config.startup_timeout if acp.mode == "auto" else acp.config.human_timeout
    await conn.agent.wait_session(limit)
    return await conn.agent.next_turn(limit)


async def one_turn(acp: ClientHarness, conn: ClientConnection, reply: str = "Done.") -> str | None:
    """Play the client's first prompt turn to its end (one reply, ``end_turn``): None, or why no
    turn came (the client stopped, or sent none in time)."""
    try:
        turn = await first_turn(acp, conn)
    except PeerError as exc:
        return exc.message
    await turn.say(reply)
    await turn.end()
    return None


async def end_session(acp: ClientHarness, conn: ClientConnection) -> bool:
    """End the client's session the way its user would: close its stdin, give it the startup deadline
    to finish what it is doing and exit (its agent then sees EOF), else stop it as teardown would.

    For tests that judge a whole connection (the agent sees the client's EOF).  True when the client
    exited by itself.  Only for a client the harness started (``auto`` mode).
    """
    proc = conn.process
    assert proc is not None, "end_session needs a client the harness started (auto mode)"
    conn.transcript.note("driver: the user ends the session (the client's stdin is closed)")
    await proc.close_output()
    if await proc.wait_exit(acp.config.startup_timeout):
        return True
    conn.transcript.note(
        f"the client was still running {acp.config.startup_timeout:g} s after its stdin closed; it is being stopped"
    )
    await proc.terminate(0.5)
    return False


def advertised(conn: ClientConnection, path: str) -> bool:
    """True when the client's initialize advertised the dotted capability (``checks.gating``)."""
    return gating.advertised(conn.agent.client_capabilities, path)


def session_dir(conn: ClientConnection, turn: PromptTurn) -> Path:
    """The directory the client declared as the session cwd (fs tests work there)."""
    info = conn.agent.sessions.get(turn.session_id, {})
    cwd = info.get("cwd")
    if isinstance(cwd, str) and os.path.isabs(cwd) and Path(cwd).is_dir():
        return Path(cwd)
    return conn.sandbox


def probe_path(conn: ClientConnection, turn: PromptTurn, name: str) -> Path:
    """A file in the session directory for this test, removed when the connection ends."""
    path = session_dir(conn, turn) / name
    conn.cleanup.append(path)
    return path


async def manual_check(acp: ClientHarness, clause: str, question: str) -> None:
    """A clause only a person can see (what the editor shows): asked in manual mode, recorded as
    "(manually verified)"; in the other modes recorded as not applicable, with the reason."""
    answer = await acp.ask(question)
    if answer is None:
        acp.record(clause, Status.NOT_APPLICABLE, "observable only by a person: run with --acp-client-mode=manual")
        return
    if answer == "y":
        acp.record(clause, Status.PASS, f"{question} yes")
    else:
        acp.record(clause, breach_status(registry().get(clause)), f"{question} no")


async def permission_baseline(turn: PromptTurn) -> PermissionAnswer:
    """A permission round trip before the provocation.  It sets what "answering normally" means for this
    client (a valid outcome, or, for a client that does not implement permission at all, the same error;
    that is judged on perm.response.shape, not here).  A client that never answers even this is judged on
    jsonrpc.every-request-answered by the wait itself."""
    return await turn.request_permission(await turn.tool_call("Edit before.txt"))


def same_kind(before: PermissionAnswer, after: PermissionAnswer) -> bool:
    return after.response is not None and (after.kind == "error") == (before.kind == "error")


async def ask_again(turn: PromptTurn, file: str) -> PermissionAnswer | PeerError:
    """A permission round trip after a provocation: its answer, or the failure that stands for none.

    The caller decides what a failure means: a finding of the provocation's clause
    (``still_answers``), or a precondition that did not hold (INCONCLUSIVE)."""
    try:
        return await turn.request_permission(await turn.tool_call(f"Edit {file}"))
    except PeerError as exc:  # PeerExited among them
        return exc


async def still_answers(
    acp: ClientHarness, turn: PromptTurn, clause: str, after: str, baseline: PermissionAnswer
) -> PermissionAnswer | None:
    """Ask for permission again; judge ``clause`` on whether it is answered as the baseline was.

    A client that exits instead stopped after the provocation, which is the provocation's clause's
    finding; but when the clause is the request's own (jsonrpc.every-request-answered), whether it
    ever read our request is what its exit leaves unknown (``Peer.wait_response``)."""
    answer = await ask_again(turn, "after.txt")
    if isinstance(answer, PeerExited):
        if clause == "jsonrpc.every-request-answered":
            inconclusive(f"the client exited after {after}: {answer.message}")
    elif isinstance(answer, PeerError):
        unless_answered_elsewhere(answer)
    if isinstance(answer, PeerError):
        acp.check(clause, False, f"the client to keep answering requests after {after}", answer.message)
        return None
    acp.check(
        clause,
        same_kind(baseline, answer),
        f"the client to keep answering requests after {after} as before ({baseline.describe()})",
        answer.describe(),
    )
    return answer
