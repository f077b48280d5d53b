"""Authentication: authenticate, terminal methods, logout.

``--acp-auth-method ID`` makes the harness authenticate after every
initialize.  Without it, an agent that refuses session/new with -32000 is
reported as blocked (INCONCLUSIVE) by the session tests; nothing here
tries an advertised method on its own, since that may start an
interactive login.  authMethods' shape is judged in test_initialization.py.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import pytest

from acp_conformance.core.events import Response
from acp_conformance.errors import PeerTimeout
from acp_conformance.harness import AgentHarness, Connection
from acp_conformance.results import Status
from acp_conformance.suite._support import inconclusive, not_applicable, silence_judged_once
from acp_conformance.suite.agent._helpers import AUTH_REQUIRED, describe, short

# Own process under --acp-isolation=connection: authenticating changes what every later request of the process may do.
pytestmark = [pytest.mark.anyio, pytest.mark.acp_own_process]


def _methods(conn: Connection) -> list[Any]:
    methods = (conn.client.init_result or {}).get("authMethods")
    return methods if isinstance(methods, list) else []


def _ids(conn: Connection) -> list[str]:
    return [str(m.get("id")) for m in _methods(conn) if isinstance(m, dict)]


@pytest.mark.acp_clause("auth.authenticate.unknown-id")
async def test_authenticate_with_an_unknown_method_is_an_error(acp_agent: AgentHarness) -> None:
    async with acp_agent.connect() as conn:
        bogus = "acp-conformance-no-such-method"
        if bogus in _ids(conn):
            inconclusive(f"the agent advertises a method named {bogus!r}")
        expected = (
            f"an error for authenticate with the methodId {bogus!r}, which the agent did not advertise "
            f"(advertised: {_ids(conn)})"
        )
        try:
            resp = await conn.peer.call("authenticate", {"methodId": bogus})
        except PeerTimeout as exc:
            silence_judged_once(acp_agent, "auth.authenticate.unknown-id", expected, exc)
            return
        acp_agent.check("auth.authenticate.unknown-id", resp.is_error, expected, describe(resp))


@pytest.mark.acp_clause("auth.terminal.gated")
async def test_no_terminal_methods_without_the_client_capability(acp_agent: AgentHarness) -> None:
    """The suite's client never declares clientCapabilities.auth.terminal."""
    async with acp_agent.connect() as conn:
        terminal = [m for m in _methods(conn) if isinstance(m, dict) and m.get("type") == "terminal"]
        acp_agent.check(
            "auth.terminal.gated",
            not terminal,
            "no authMethods entry of type 'terminal' for a client that did not declare auth.terminal",
            f"authMethods {short(terminal)}",
        )


@pytest.mark.acp_clause("auth.authenticate.success")
async def test_authenticate_with_the_configured_method(acp_agent: AgentHarness) -> None:
    async with acp_agent.connect() as conn:  # the harness authenticated with --acp-auth-method, if given
        if acp_agent.config.auth_method is None:
            if not _methods(conn):
                not_applicable("the agent advertises no authMethods")
            inconclusive(f"pass --acp-auth-method ID to judge authenticate (advertised: {', '.join(_ids(conn))})")
        resp = next(e for e in conn.peer.events if isinstance(e, Response) and e.method == "authenticate")
        acp_agent.check(
            "auth.authenticate.success",
            not resp.is_error and isinstance(resp.result, dict),
            f"an object result for authenticate with {acp_agent.config.auth_method!r}",
            describe(resp),
        )


@pytest.mark.acp_clause("auth.logout.success", "auth.logout.reauth")
async def test_logout(acp_agent: AgentHarness) -> None:
    """Only with --acp-auth-method: logout ends the user's authenticated state, so the suite
    sends it only when it can authenticate again (it does so at once)."""
    async with acp_agent.connect() as conn:
        if not conn.client.agent_supports("auth.logout"):
            not_applicable("the agent does not advertise auth.logout")
        if acp_agent.config.auth_method is None:
            inconclusive(
                "logout would end the user's authenticated state; the suite sends it only when it can "
                "authenticate again: pass --acp-auth-method ID"
            )
        resp = await conn.peer.call("logout", {})
        probe: Response | None = None
        try:
            if not resp.is_error:
                probe = await conn.peer.call("session/new", {"cwd": str(conn.sandbox.root), "mcpServers": []})
        finally:
            await conn.peer.call("authenticate", {"methodId": acp_agent.config.auth_method})
        acp_agent.check(
            "auth.logout.success",
            not resp.is_error and isinstance(resp.result, dict),
            "an object result for logout, which the agent advertises (agentCapabilities.auth.logout)",
            describe(resp),
        )
        assert probe is not None
        if probe.code != AUTH_REQUIRED and await _serves_without_authentication(acp_agent):
            # authentication.mdx: after logout "new sessions that require authentication" need it again;
            # this agent's sessions never did.
            not_applicable(
                "the agent accepts session/new on a connection that never authenticated: its sessions require "
                f"no authentication (session/new after logout: {describe(probe)[:160]})"
            )
        acp_agent.check(
            "auth.logout.reauth",
            probe.code == AUTH_REQUIRED,
            "session/new after logout to need authentication again (error -32000 auth_required)",
            describe(probe),
        )


@contextlib.asynccontextmanager
async def _never_authenticated(acp: AgentHarness) -> AsyncIterator[tuple[Connection, dict[str, Any], Response]]:
    """A fresh connection, initialized (the harness would authenticate with --acp-auth-method) but
    never authenticated, with the params of its ``session/new`` and the answer to it."""
    async with acp.connect(initialize=False) as conn:
        await conn.client.initialize(timeout=acp.config.startup_timeout)
        params: dict[str, Any] = {"cwd": str(conn.sandbox.root), "mcpServers": []}
        yield conn, params, await conn.peer.call("session/new", params)


async def _serves_without_authentication(acp: AgentHarness) -> bool:
    """A fresh connection, never authenticated, gets a session from session/new."""
    async with _never_authenticated(acp) as (_, _, resp):
        return not resp.is_error


@pytest.mark.acp_clause("error.auth-required")
async def test_a_refusal_for_want_of_authentication_is_auth_required(acp_agent: AgentHarness) -> None:
    """session/new before authenticate.  Accepted: the agent needs no authentication.  Refused
    with -32000: as it should be.  Refused otherwise: only once session/new succeeds after
    ``authenticate`` (--acp-auth-method) do we know the refusal was about authentication, and
    then it should have been -32000 (auth_required)."""
    async with _never_authenticated(acp_agent) as (conn, params, first):
        if not first.is_error:
            not_applicable("the agent accepted session/new before authenticate: it requires no authentication")
        if first.code == AUTH_REQUIRED:
            acp_agent.record("error.auth-required", Status.PASS, "session/new before authenticate: -32000")
            return
        if acp_agent.config.auth_method is None:
            inconclusive(
                f"session/new before authenticate got {describe(first)}; pass --acp-auth-method ID to tell "
                "whether authentication was the reason"
            )
        await conn.peer.request("authenticate", {"methodId": acp_agent.config.auth_method})
        second = await conn.peer.call("session/new", params)
        if second.is_error:
            inconclusive(f"session/new fails after authenticate too ({describe(second)}): not about authentication")
        acp_agent.check(
            "error.auth-required",
            False,
            "error -32000 (auth_required) for a session/new refused until authenticate",
            describe(first),
        )
