"""Listing and continuing sessions, client side: what a user asks for, the client carries out right.

``session/list`` pages through sessions with cursors that are awkward to carry unchanged
(``endpoints.listing``); ``session/load`` and ``session/resume`` continue a session the client saw
in an earlier run.  Only a user can ask a client to list or continue, so these tests need the
profile's ``list-sessions`` and ``continue-session`` actions; without them they are NOT_APPLICABLE.
The findings themselves are flagged by the suite's agent where each request arrives.
"""

from __future__ import annotations

from typing import Any

import pytest

from acp_conformance.core.events import Request
from acp_conformance.endpoints.agent import AgentSetup
from acp_conformance.endpoints.listing import SessionPager
from acp_conformance.harness.client import ClientConnection, ClientHarness
from acp_conformance.results import Status
from acp_conformance.suite._support import inconclusive
from acp_conformance.suite.client._helpers import one_turn, require

pytestmark = pytest.mark.anyio


async def _one_turn(acp: ClientHarness, conn: ClientConnection) -> str:
    """Play the client's first prompt turn: "a prompt turn", or why none came."""
    return await one_turn(acp, conn) or "a prompt turn"


@pytest.mark.acp_clause("session.list.cursor-opaque", "session.list.cursor-end")
async def test_session_list_cursors_go_back_unchanged_and_end_with_the_last_page(acp_client: ClientHarness) -> None:
    """Five sessions in three pages.  Each nextCursor (with +, /, =, a %2F, a space, an é) must come back
    byte for byte (session-list.mdx: "Clients MUST treat cursors as opaque tokens"), and a page without
    nextCursor is the last: no further page is asked for."""
    require(acp_client, "prompt", "list-sessions")
    pager = SessionPager.sample(str(acp_client.workdir.resolve()))
    setup = AgentSetup(session_capabilities={"list": {}}, listing=pager)
    async with acp_client.connect(setup, actions={"list-sessions": None}) as conn:
        how = await _one_turn(acp_client, conn)
        # A client that would (wrongly) ask past the end gets a moment to do so.
        await conn.peer.quiet_for(0.3, lambda e: isinstance(e, Request) and e.method == "session/list")
    if not pager.seen:
        inconclusive(f"the client was asked to list its sessions and sent no session/list ({how})")
    if all(c is None for c in pager.seen):
        acp_client.record("session.list.cursor-opaque", Status.NOT_APPLICABLE, "the client followed no nextCursor")
    if not pager.ended:
        acp_client.record(
            "session.list.cursor-end", Status.NOT_APPLICABLE, "the client did not page to the end of the listing"
        )
    elif not pager.past_end:
        acp_client.record(
            "session.list.cursor-end",
            Status.PASS,
            f"no page asked for after the last one (a page without nextCursor) within 0.3 s; "
            f"{len(pager.seen)} session/list request(s)",
        )
    # Breaches are flagged by the agent where the request arrives (endpoints.listing); cursor-opaque's
    # PASS too (checks.passive.CLIENT_TRAFFIC_CLAUSES).


async def _saved_session(acp: ClientHarness, setup: AgentSetup) -> tuple[str, dict[str, Any]]:
    """A first run opens a session: its id (what a user continues) and the session/new params."""
    async with acp.connect(setup) as conn:
        how = await _one_turn(acp, conn)
        news = [r for r in conn.agent.session_requests if r.method == "session/new"]
        if not news:
            inconclusive(f"no session to continue: the client opened none ({how})")
        sid = next(iter(conn.agent.sessions))
        return sid, news[0].params if isinstance(news[0].params, dict) else {}


async def _continued(acp: ClientHarness, setup: AgentSetup, sid: str, method: str) -> dict[str, Any]:
    """A second run continues ``sid``: the params of the ``method`` request that did it."""
    async with acp.connect(setup, actions={"continue-session": sid}) as conn:
        how = await _one_turn(acp, conn)
        sent = [r for r in conn.agent.session_requests if r.method == method]
        if not sent:
            others = [r.method for r in conn.agent.session_requests]
            inconclusive(f"the client was asked to continue {sid!r} and sent no {method} (it sent {others}; {how})")
        return sent[0].params if isinstance(sent[0].params, dict) else {}


@pytest.mark.acp_clause("session.load.params", "session.additional-dirs.resend")
async def test_a_saved_session_is_loaded_with_cwd_and_mcp_servers(acp_client: ClientHarness) -> None:
    """The agent can load sessions (loadSession) and takes additional roots: the client continues a session
    of an earlier run with session/load {sessionId, cwd, mcpServers} (all three required), and sends the
    roots it works with again (session-setup.mdx: a load does not restore them)."""
    require(acp_client, "prompt", "continue-session")
    setup = AgentSetup(load_session=True, session_capabilities={"additionalDirectories": {}})
    sid, new = await _saved_session(acp_client, setup)
    load = await _continued(acp_client, setup, sid, "session/load")
    # session.load.params is flagged by the agent on the request itself.
    roots = new.get("additionalDirectories")
    if not roots:
        acp_client.record(
            "session.additional-dirs.resend", Status.NOT_APPLICABLE, "the client works with no additional root"
        )
        return
    acp_client.check(
        "session.additional-dirs.resend",
        load.get("additionalDirectories") == roots,
        f"session/load to carry the additional roots the session was opened with, {roots}",
        f"additionalDirectories {load.get('additionalDirectories', '(absent)')!r}",
    )


@pytest.mark.acp_clause("session.resume.params")
async def test_a_saved_session_is_resumed_with_session_id_and_cwd(acp_client: ClientHarness) -> None:
    """The agent cannot load but can resume (sessionCapabilities.resume): the client continues with
    session/resume {sessionId, cwd} (ResumeSessionRequest requires both)."""
    require(acp_client, "prompt", "continue-session")
    setup = AgentSetup(session_capabilities={"resume": {}})
    sid, _ = await _saved_session(acp_client, setup)
    await _continued(acp_client, setup, sid, "session/resume")
    # session.resume.params is flagged by the agent on the request itself.
