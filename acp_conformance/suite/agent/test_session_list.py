"""Sessions, continued: session/list (paging, the cwd filter, cursors), session/delete, and
additionalDirectories across session lifecycle requests (split from ``test_sessions``, which keeps
session/new, load, resume and close)."""

from __future__ import annotations

import os
import uuid
from collections.abc import Sequence
from typing import Any

import pytest

from acp_conformance.checks.sessions import (
    extra_result_keys,
    history,
    session_updates,
)
from acp_conformance.core.events import Response
from acp_conformance.harness import AgentHarness, Connection
from acp_conformance.results import Status
from acp_conformance.suite._support import inconclusive, not_applicable
from acp_conformance.suite.agent._helpers import (
    Json,
    describe,
    open_session,
    prompt_turn,
    require,
    short,
)

# Own process under --acp-isolation=connection: session/list would show the sessions of earlier tests.
pytestmark = [pytest.mark.anyio, pytest.mark.acp_own_process]

#: Longest session/list paging the suite follows before calling it endless.
MAX_PAGES = 20


# ------------------------------------------------------------- session/list
async def list_pages(conn: Connection, params: Json) -> tuple[list[Response], bool]:
    """Follow nextCursor; returns the pages and whether the paging ended."""
    pages: list[Response] = []
    cursor: Any = None
    for _ in range(MAX_PAGES):
        resp = await conn.peer.call("session/list", {**params, "cursor": cursor} if cursor is not None else params)
        pages.append(resp)
        if resp.is_error or not isinstance(resp.result, dict):
            return pages, True
        cursor = resp.result.get("nextCursor")
        if not isinstance(cursor, str):
            return pages, True
    return pages, False


def listed(pages: Sequence[Response]) -> list[Json]:
    out: list[Json] = []
    for resp in pages:
        sessions = resp.result.get("sessions") if isinstance(resp.result, dict) else None
        out.extend(s for s in sessions or [] if isinstance(s, dict))
    return out


def listed_ids(pages: Sequence[Response]) -> list[Any]:
    return [s.get("sessionId") for s in listed(pages)]


async def listed_session(
    acp: AgentHarness, conn: Connection, cwd: str | os.PathLike[str], extra: Json | None = None
) -> str | None:
    """A new session in ``cwd`` that session/list shows (after one prompt if
    the agent lists only sessions with history), or None."""
    sid = await open_session(acp, conn, cwd=cwd, extra=extra)
    for attempt in range(2):
        pages, _ = await list_pages(conn, {"cwd": str(cwd)})
        if sid in listed_ids(pages):
            return sid
        if attempt == 0:
            await prompt_turn(acp, conn, sid, acp.config.prompt)
    return None


def _session_info_problems(result: Any) -> list[str]:
    if not isinstance(result, dict) or not isinstance(result.get("sessions"), list):
        return [f"no sessions array in {short(result)}"]
    problems = []
    for info in result["sessions"]:
        if not isinstance(info, dict) or not isinstance(info.get("sessionId"), str):
            problems.append(f"entry without a string sessionId: {short(info)}")
        elif not (isinstance(info.get("cwd"), str) and os.path.isabs(info["cwd"])):
            problems.append(f"session {info['sessionId']!r} has cwd {info.get('cwd')!r}, not an absolute path")
    cursor = result.get("nextCursor")
    if cursor is not None and not isinstance(cursor, str):
        problems.append(f"nextCursor {cursor!r} is not a string")
    return problems


@pytest.mark.acp_clause("session.list.params-optional", "session.list.response", "session.list.discovery-only")
async def test_list_sessions(acp_agent: AgentHarness) -> None:
    async with acp_agent.connect() as conn:
        require(conn, "sessionCapabilities.list", "sessionCapabilities.list")
        sid = await open_session(acp_agent, conn)
        await prompt_turn(acp_agent, conn, sid, acp_agent.config.prompt)
        await open_session(acp_agent, conn)  # a round trip: output trailing the turn is not taken for the list's
        start = len(conn.peer.events)
        resp = await conn.peer.call("session/list", {})
        acp_agent.check(
            "session.list.params-optional",
            not resp.is_error and isinstance(resp.result, dict) and isinstance(resp.result.get("sessions"), list),
            "session/list with empty params to answer the first page (a sessions array)",
            describe(resp),
        )
        problems = _session_info_problems(resp.result)
        acp_agent.check(
            "session.list.response",
            not problems,
            "a sessions array of SessionInfo (string sessionId, absolute cwd) and a string nextCursor if any",
            "; ".join(problems[:5]),
        )
        await open_session(acp_agent, conn)  # a round trip after the list answer
        traffic = history(session_updates(conn.peer.events, start))
        acp_agent.check(
            "session.list.discovery-only",
            not traffic,
            "no session history (chunks, tool calls, plans) sent because of session/list",
            f"{len(traffic)} update(s), first: {short(traffic[:1])}",
        )


@pytest.mark.acp_clause("session.list.cwd-filter")
async def test_list_cwd_filter(acp_agent: AgentHarness) -> None:
    async with acp_agent.connect() as conn:
        require(conn, "sessionCapabilities.list", "sessionCapabilities.list")
        dir_a, dir_b = conn.sandbox.root / "a", conn.sandbox.root / "b"
        dir_a.mkdir(exist_ok=True)
        dir_b.mkdir(exist_ok=True)
        if await listed_session(acp_agent, conn, dir_a) is None:
            inconclusive(f"a session created in {dir_a} (and prompted once) is not listed by session/list")
        other = await listed_session(acp_agent, conn, dir_b)
        pages, _ = await list_pages(conn, {"cwd": str(dir_a)})
        # Entries without an absolute cwd are session.list.response's concern.
        wrong = [s for s in listed(pages) if _absolute(s.get("cwd")) and not _same_dir(s["cwd"], dir_a)]
        if not wrong and other is None:
            inconclusive(f"no session outside {dir_a} is listed, so the filter could not be seen at work")
        acp_agent.check(
            "session.list.cwd-filter",
            not wrong and not any(p.is_error for p in pages),
            f"session/list with cwd {str(dir_a)!r} to list only sessions with that cwd",
            f"also listed: {short([(s.get('sessionId'), s.get('cwd')) for s in wrong][:5])}"
            if wrong
            else describe(pages[-1]),
        )


def _absolute(path: Any) -> bool:
    return isinstance(path, str) and os.path.isabs(path)


def _same_dir(a: str, b: str | os.PathLike[str]) -> bool:
    return os.path.realpath(a) == os.path.realpath(b)


@pytest.mark.acp_clause("session.list.empty")
async def test_list_with_no_match_is_empty(acp_agent: AgentHarness) -> None:
    empty = acp_agent.workdir / f"acp-conformance-no-sessions-{uuid.uuid4().hex[:8]}"
    empty.mkdir()
    async with acp_agent.connect() as conn:
        require(conn, "sessionCapabilities.list", "sessionCapabilities.list")
        await open_session(acp_agent, conn)  # elsewhere; an auth-gated agent is reported as blocked
        resp = await conn.peer.call("session/list", {"cwd": str(empty)})
        sessions = resp.result.get("sessions", "(absent)") if isinstance(resp.result, dict) else None
        acp_agent.check(
            "session.list.empty",
            not resp.is_error and sessions == [],
            f"a result with sessions [] for the cwd {str(empty)!r} that no session uses",
            describe(resp),
        )


@pytest.mark.acp_clause("session.list.invalid-cursor")
async def test_list_with_an_invalid_cursor_is_an_error(acp_agent: AgentHarness) -> None:
    async with acp_agent.connect() as conn:
        require(conn, "sessionCapabilities.list", "sessionCapabilities.list")
        await open_session(acp_agent, conn)
        cursor = f"acp-conformance-invalid-cursor-{uuid.uuid4().hex[:8]}"
        resp = await conn.peer.call("session/list", {"cursor": cursor})
        acp_agent.check(
            "session.list.invalid-cursor",
            resp.is_error,
            f"an error for session/list with the cursor {cursor!r}, which the agent never issued",
            describe(resp),
        )


@pytest.mark.acp_clause("session.list.page-size")
async def test_list_paging_terminates(acp_agent: AgentHarness) -> None:
    async with acp_agent.connect() as conn:
        require(conn, "sessionCapabilities.list", "sessionCapabilities.list")
        if await listed_session(acp_agent, conn, conn.sandbox.root) is None:
            inconclusive("a session created (and prompted once) is not listed by session/list")
        pages, ended = await list_pages(conn, {"cwd": str(conn.sandbox.root)})
        ids = listed_ids(pages)
        twice = sorted({str(i) for i in ids if ids.count(i) > 1})
        acp_agent.check(
            "session.list.page-size",
            ended and not twice and not pages[-1].is_error,
            f"paging through nextCursor to end within {MAX_PAGES} pages, listing each session once",
            f"{len(pages)} page(s), ended: {ended}, listed more than once: {twice[:5]}, last page: "
            f"{describe(pages[-1])[:200]}",
        )


# ----------------------------------------------------------- session/delete
@pytest.mark.acp_clause("session.delete.response", "session.delete.removes", "session.delete.idempotent")
async def test_delete_removes_the_session(acp_agent: AgentHarness) -> None:
    async with acp_agent.connect() as conn:
        require(conn, "sessionCapabilities.delete", "sessionCapabilities.delete")
        can_list = conn.client.agent_supports("sessionCapabilities.list")
        sid = await listed_session(acp_agent, conn, conn.sandbox.root) if can_list else None
        sid = sid or await open_session(acp_agent, conn)
        was_listed = _was_listed(conn, sid)
        resp = await conn.peer.call("session/delete", {"sessionId": sid})
        # session-delete.mdx: "Behavior for deleting an active session is implementation-defined."
        # Refused, the session is closed (where the agent offers session/close) and deleted again.
        closed = resp.is_error and conn.client.agent_supports("sessionCapabilities.close")
        gone_by_close = False
        if closed:
            await conn.peer.call("session/close", {"sessionId": sid})
            if can_list and was_listed:
                after_close, _ = await list_pages(conn, {"cwd": str(conn.sandbox.root)})
                gone_by_close = not any(p.is_error for p in after_close) and sid not in listed_ids(after_close)
            resp = await conn.peer.call("session/delete", {"sessionId": sid})
        if resp.is_error:
            # No sentence makes a delete succeed: the clauses judge a success's result and what
            # follows it.  A refusal leaves nothing of theirs to judge (an active session's above all).
            active = " even once closed" if closed else " while it was open (the agent offers no session/close)"
            why = f"the agent refused to delete the session{active}: {describe(resp)}"
            acp_agent.record("session.delete.response", Status.INCONCLUSIVE, why)
            acp_agent.record("session.delete.removes", Status.INCONCLUSIVE, why)
            bogus = f"acp-conformance-unknown-{uuid.uuid4().hex}"
            never = await conn.peer.call("session/delete", {"sessionId": bogus})
            acp_agent.check(
                "session.delete.idempotent",
                not never.is_error,
                "success for deleting a session that never existed",
                f"never existed: {describe(never)}",
            )
            return
        acp_agent.check(
            "session.delete.response",
            isinstance(resp.result, dict) and not extra_result_keys(resp.result),
            "result {} (only _meta allowed) for session/delete",
            describe(resp),
        )
        pages, _ = await list_pages(conn, {"cwd": str(conn.sandbox.root)}) if can_list else ([], True)
        if not can_list:
            acp_agent.record("session.delete.removes", Status.INCONCLUSIVE, "the agent does not offer session/list")
        elif not was_listed:
            acp_agent.record(
                "session.delete.removes", Status.INCONCLUSIVE, "the session was never listed, so its removal is unseen"
            )
        elif gone_by_close:
            acp_agent.record(
                "session.delete.removes",
                Status.INCONCLUSIVE,
                "closing the session (the agent refused to delete it open) took it off session/list already, "
                "so the delete's removal is unseen",
            )
        elif any(p.is_error for p in pages):
            acp_agent.record(
                "session.delete.removes",
                Status.INCONCLUSIVE,
                f"session/list failed after the delete: {describe(pages[-1])}",
            )
        else:
            acp_agent.check(
                "session.delete.removes",
                sid not in listed_ids(pages),
                f"the deleted session {sid!r} absent from session/list",
                f"still listed: {short(listed(pages))}",
            )
        again = await conn.peer.call("session/delete", {"sessionId": sid})
        bogus = f"acp-conformance-unknown-{uuid.uuid4().hex}"
        never = await conn.peer.call("session/delete", {"sessionId": bogus})
        acp_agent.check(
            "session.delete.idempotent",
            not again.is_error and not never.is_error,
            "success for deleting an already deleted session and one that never existed",
            f"again: {describe(again)}; never existed: {describe(never)}",
        )


def _was_listed(conn: Connection, sid: str) -> bool:
    """Did any session/list answer on this connection include ``sid``?"""
    for ev in conn.peer.events:
        if isinstance(ev, Response) and ev.method == "session/list" and isinstance(ev.result, dict):
            sessions = ev.result.get("sessions")
            if isinstance(sessions, list) and any(isinstance(s, dict) and s.get("sessionId") == sid for s in sessions):
                return True
    return False


# ------------------------------------------------------ additionalDirectories
def _listed_info(pages: Sequence[Response], sid: str) -> Json | None:
    return next((s for s in listed(pages) if s.get("sessionId") == sid), None)


@pytest.mark.acp_clause("session.additional-dirs.no-implicit-restore")
async def test_additional_directories_are_not_restored_implicitly(acp_agent: AgentHarness) -> None:
    """A session with one additional root, then resume (or load) without any: the roots the
    agent reports in session/list must be none, not the remembered ones."""
    async with acp_agent.connect() as conn:
        require(conn, "sessionCapabilities.additionalDirectories", "sessionCapabilities.additionalDirectories")
        if conn.client.agent_supports("sessionCapabilities.resume"):
            method = "session/resume"
        elif conn.client.agent_supports("loadSession"):
            method = "session/load"
        else:
            not_applicable("the agent offers neither session/resume nor session/load")
        if not conn.client.agent_supports("sessionCapabilities.list"):
            inconclusive("the agent does not offer session/list, where a session's roots are reported")
        extra = acp_agent.workdir / "acp-conformance-extra-root"
        extra.mkdir(exist_ok=True)
        cwd = conn.sandbox.root
        sid = await listed_session(acp_agent, conn, cwd, {"additionalDirectories": [str(extra)]})
        if sid is None:
            inconclusive("a session created (and prompted once) is not listed by session/list")
        pages, _ = await list_pages(conn, {"cwd": str(cwd)})
        before = (_listed_info(pages, sid) or {}).get("additionalDirectories")
        if not before:
            inconclusive("session/list does not report the session's additionalDirectories (it may omit them)")
        resp = await conn.peer.call(method, {"sessionId": sid, "cwd": str(cwd), "mcpServers": []})
        if resp.is_error:
            inconclusive(f"{method} of the session failed: {describe(resp)}")
        pages, _ = await list_pages(conn, {"cwd": str(cwd)})
        info = _listed_info(pages, sid)
        after = info.get("additionalDirectories") if info is not None else None
        acp_agent.check(
            "session.additional-dirs.no-implicit-restore",
            not after,
            f"no additional roots reported after {method} without additionalDirectories (before: {before})",
            f"additionalDirectories {after!r}",
        )
