"""Authentication, client side: the suite's agent requires a login and the client is asked to log in.

The agent answers every session request with auth_required (-32000) until the client authenticates
(authentication.mdx § Protocol-driven authentication).  Only a user can tell a client to log in, so
these tests need the profile's ``authenticate`` action (``[actions]``); without it they are
NOT_APPLICABLE.  The method the agent offers is ``acp-login`` (profiles that log in through an
environment variable name it: acpx's ``ACPX_AUTH_ACP_LOGIN``).
"""

from __future__ import annotations

from typing import Any

import pytest

from acp_conformance.checks.gating import advertised
from acp_conformance.core.events import Request
from acp_conformance.endpoints.agent import AgentSetup
from acp_conformance.harness.client import ClientHarness
from acp_conformance.suite._support import inconclusive, not_applicable
from acp_conformance.suite.client._helpers import one_turn, require

pytestmark = pytest.mark.anyio

METHOD = "acp-login"
TERMINAL_METHOD = "acp-terminal-login"


async def _logs_in(acp: ClientHarness, methods: list[dict[str, Any]]) -> tuple[list[Any], str]:
    """Run the client against an agent requiring a login with ``methods``: the methodIds it sent in
    ``authenticate``, and how the run ended (a prompt turn, or why none came)."""
    setup = AgentSetup(auth_methods=methods, require_auth=True)
    async with acp.connect(setup, actions={"authenticate": None}) as conn:
        ended = await one_turn(acp, conn, "Logged in.") or "a prompt turn"
        return _method_ids(conn.agent.authentications), ended


def _method_ids(requests: list[Request]) -> list[Any]:
    return [r.params.get("methodId") if isinstance(r.params, dict) else None for r in requests]


@pytest.mark.acp_clause("auth.method.default-type", "auth.authenticate.advertised-id")
async def test_a_method_without_type_is_an_agent_method(acp_client: ClientHarness) -> None:
    """authentication.mdx: "When no type is present, the method is treated as agent", which the client
    drives with authenticate.  Baseline first: the same method with an explicit type "agent"; a client
    that cannot log in even then is not judged here (its login does not reach this agent at all)."""
    require(acp_client, "prompt", "authenticate")
    typed, how = await _logs_in(acp_client, [{"id": METHOD, "name": "Log in", "type": "agent"}])
    if METHOD not in typed:
        inconclusive(f"the client did not log in with an explicit agent method either (sent {typed}; {how})")
    sent, how = await _logs_in(acp_client, [{"id": METHOD, "name": "Log in", "description": "no type: agent"}])
    acp_client.check(
        "auth.method.default-type",
        METHOD in sent,
        f"authenticate with the method {METHOD!r}, which has no type (an agent method), as it did with type agent",
        f"methodIds sent {sent}; {how}",
    )
    # auth.authenticate.advertised-id is judged by the agent on each authenticate it receives.


@pytest.mark.acp_clause("auth.authenticate.no-terminal")
async def test_a_terminal_method_is_never_named_in_authenticate(acp_client: ClientHarness) -> None:
    """A client advertising auth.terminal is offered a terminal method first and an agent method after
    it: it may run the terminal one (outside the connection) or authenticate with the agent one, but
    "the Client MUST NOT send an authenticate request for a terminal method"."""
    require(acp_client, "prompt", "authenticate")
    methods: list[dict[str, Any]] = [
        {"id": TERMINAL_METHOD, "name": "Log in in a terminal", "type": "terminal", "args": ["--acp-login"]},
        {"id": METHOD, "name": "Log in"},
    ]
    async with acp_client.connect(
        AgentSetup(auth_methods=methods, require_auth=True), actions={"authenticate": None}
    ) as conn:
        await conn.agent.wait_initialize(acp_client.config.startup_timeout)
        if not advertised(conn.agent.client_capabilities, "auth.terminal"):
            not_applicable(
                "the client does not advertise clientCapabilities.auth.terminal, so no terminal method may be "
                "offered to it (authentication.mdx)"
            )
        how = await one_turn(acp_client, conn, "Logged in.") or "a prompt turn"
        sent = _method_ids(conn.agent.authentications)
        if not sent:
            inconclusive(f"the client sent no authenticate at all ({how})")
        acp_client.check(
            "auth.authenticate.no-terminal",
            TERMINAL_METHOD not in sent,
            f"no authenticate naming the terminal method {TERMINAL_METHOD!r}",
            f"methodIds sent {sent}",
        )
