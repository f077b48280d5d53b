"""initialize: version negotiation and the shape of what the agent advertises."""

from __future__ import annotations

from typing import Any

import pytest

from acp_conformance.checks.shapes import implementation_ok
from acp_conformance.harness import AgentHarness

pytestmark = pytest.mark.anyio


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _chosen_version(result: Any) -> Any:
    """The version an ``initialize`` result chose, as a number where it is one in the wrong JSON
    type (``"1"``): one defect, one clause.  Its type is init.request.protocol-version-type's; the
    negotiation clauses judge the value chosen."""
    version = result.get("protocolVersion") if isinstance(result, dict) else None
    if isinstance(version, str) and version.isdecimal() and version.isascii():
        return int(version)
    return version


@pytest.mark.acp_clause(
    "init.response.protocol-version",
    "init.request.protocol-version-type",
    "init.version.same-if-supported",
    "init.response.capabilities",
    "init.response.agent-info",
    "init.implementation.shape",
)
async def test_initialize_v1(acp_agent: AgentHarness) -> None:
    async with acp_agent.connect(initialize=False) as conn:
        resp = await conn.peer.call(
            "initialize",
            {
                "protocolVersion": 1,
                "clientCapabilities": conn.client.capabilities.to_wire(),
                "clientInfo": conn.client.client_info,
            },
            timeout=acp_agent.config.startup_timeout,
        )
        result = resp.result if isinstance(resp.result, dict) else {}
        version = result.get("protocolVersion")
        acp_agent.check(
            "init.response.protocol-version",
            not resp.is_error and version is not None,
            "a successful result carrying the chosen protocolVersion",
            f"error {resp.error!r}" if resp.is_error else f"protocolVersion {version!r}",
        )
        acp_agent.check(
            "init.request.protocol-version-type",
            isinstance(version, int) and _is_int(version) and 0 <= version <= 65535,
            "protocolVersion as a bare JSON integer in 0..65535 (the schema's ProtocolVersion)",
            f"protocolVersion {version!r} ({type(version).__name__})",
            stop=False,
        )
        acp_agent.check(
            "init.version.same-if-supported",
            _chosen_version(result) == 1,
            "protocolVersion 1 in answer to a v1 client (every ACP v1 agent supports v1)",
            f"protocolVersion {result.get('protocolVersion')!r}",
        )
        caps = result.get("agentCapabilities")
        acp_agent.check(
            "init.response.capabilities",
            caps is None or isinstance(caps, dict),
            "agentCapabilities to be an object (or omitted, meaning all defaults)",
            f"agentCapabilities {caps!r}",
        )
        info = result.get("agentInfo")
        # The SHOULD is to provide it; what it must hold once provided (name and version strings,
        # the schema's Implementation) is init.implementation.shape, judged on the frame itself.
        acp_agent.check(
            "init.response.agent-info",
            isinstance(info, dict),
            "agentInfo (the agent's name and version)",
            f"agentInfo {info!r}",
        )
        if info is not None:
            acp_agent.check(
                "init.implementation.shape",
                implementation_ok(info),
                "agentInfo to be an Implementation (string name and version, optional title)",
                f"agentInfo {info!r}",
            )


async def _negotiate(acp_agent: AgentHarness, version: int) -> tuple[Any, Any]:
    async with acp_agent.connect(initialize=False) as conn:
        resp = await conn.peer.call(
            "initialize",
            {"protocolVersion": version, "clientCapabilities": conn.client.capabilities.to_wire()},
            timeout=acp_agent.config.startup_timeout,
        )
        return resp.error if resp.is_error else None, resp.result


@pytest.mark.acp_clause("init.version.latest-otherwise")
async def test_unsupported_future_version_gets_latest(acp_agent: AgentHarness) -> None:
    """Ask for 999: the answer is a success carrying the agent's newest version, never 999."""
    error, result = await _negotiate(acp_agent, 999)
    version = _chosen_version(result)
    acp_agent.check(
        "init.version.latest-otherwise",
        error is None and isinstance(version, int) and _is_int(version) and 1 <= version < 999,
        "a successful result with the agent's newest supported version (1 for a v1 agent), not 999",
        f"error {error!r}" if error else f"protocolVersion {version!r}",
    )


@pytest.mark.acp_clause("init.version.latest-otherwise", "init.version.v0")
async def test_pre_release_version_0_gets_latest(acp_agent: AgentHarness) -> None:
    """Ask for 0 (the pre-release): a successful answer is required (v1 has no error for a mismatch).

    Which version it carries is the agent's to choose: 0 if it supports 0 (the same version's
    MUST), else its newest.  Nothing in the docs or the schema says an agent does not support 0,
    so an answer of 0 is noted (``init.version.v0``, informative), never a breach: an agent that
    negotiates ``min(requested, own)`` answers 0 here and 1 to 999, and conforms."""
    error, result = await _negotiate(acp_agent, 0)
    version = _chosen_version(result)
    observed = f"error {error!r}" if error else f"protocolVersion {version!r}"
    # The informative clause first, from the answer in hand (it never stops the test).
    acp_agent.check(
        "init.version.v0",
        error is None and isinstance(version, int) and _is_int(version) and version >= 1,
        "the agent's own version (1): version 0 was a pre-release",
        observed,
    )
    acp_agent.check(
        "init.version.latest-otherwise",
        error is None and _is_int(version),
        "a successful initialize result carrying a protocol version (0 if the agent supports 0, else the newest it "
        "supports; initialization.mdx: 'Otherwise, the Agent MUST respond with the latest version it supports'; v1 "
        "defines no error for a version mismatch)",
        observed,
    )


@pytest.mark.acp_clause("cap.agent.defaults", "cap.object-presence", "auth.methods.advertised")
async def test_capability_shapes(acp_agent: AgentHarness) -> None:
    async with acp_agent.connect() as conn:
        init = conn.client.init_result or {}
        caps = init.get("agentCapabilities") or {}
        flags = {"loadSession": caps.get("loadSession")}
        for group, names in (
            ("promptCapabilities", ("image", "audio", "embeddedContext")),
            ("mcpCapabilities", ("http", "sse")),
        ):
            sub = caps.get(group) or {}
            for name in names:
                flags[f"{group}.{name}"] = sub.get(name) if isinstance(sub, dict) else sub
        bad = {k: v for k, v in flags.items() if v is not None and not isinstance(v, bool)}
        acp_agent.check(
            "cap.agent.defaults", not bad, "boolean capability flags (absent = false)", f"non-boolean: {bad}"
        )
        session_caps = caps.get("sessionCapabilities") or {}
        odd = {
            k: v
            for k, v in (session_caps.items() if isinstance(session_caps, dict) else [])
            if k != "_meta" and v is not None and not isinstance(v, dict)
        }
        acp_agent.check(
            "cap.object-presence",
            not odd,
            "sessionCapabilities entries to be objects (present = supported) or null",
            f"non-object entries: {odd}",
        )
        methods = init.get("authMethods", [])
        well_formed = isinstance(methods, list) and all(
            isinstance(m, dict) and isinstance(m.get("id"), str) and isinstance(m.get("name"), str) for m in methods
        )
        acp_agent.check(
            "auth.methods.advertised",
            well_formed,
            "authMethods to be an array (default empty) of entries with string id and name",
            f"authMethods {methods!r}",
        )


@pytest.mark.acp_clause("init.once")
async def test_a_second_initialize_is_answered_and_the_agent_keeps_working(acp_agent: AgentHarness) -> None:
    """initialize is meant to be sent once; the reaction to a second one is unspecified (a result
    or an error both do), but it is answered and the connection keeps working."""
    async with acp_agent.connect() as conn:  # initialized (and authenticated, if configured)
        again = await conn.peer.call(
            "initialize",
            {
                "protocolVersion": 1,
                "clientCapabilities": conn.client.capabilities.to_wire(),
                "clientInfo": conn.client.client_info,
            },
        )
        answer = f"error {again.error!r}" if again.is_error else "a result"
        if acp_agent.config.auth_method and not again.is_error:
            # A fresh handshake may have reset the authentication: do it again, as a client would.
            await conn.peer.call("authenticate", {"methodId": acp_agent.config.auth_method})
        resp = await conn.peer.call("session/new", {"cwd": str(conn.sandbox.root), "mcpServers": []})
        acp_agent.check(
            "init.once",
            not resp.is_error and isinstance(resp.result, dict) and isinstance(resp.result.get("sessionId"), str),
            "session/new to work after a second initialize",
            f"the second initialize got {answer}; then session/new got "
            + (f"error {resp.error!r}" if resp.is_error else f"result {resp.result!r}"),
        )
