"""Fuzzing the agent under test with schema-derived frames (acp_conformance.strategies).

Each test is one Hypothesis campaign on a live agent: every example writes
one frame (invalid, or valid but unusual), waits for what the agent owes
(an answer with the applicable error code, or silence for a notification),
then proves the agent still serves requests with two probe round trips.
A frame that kills the agent, wedges it or makes it stop answering is a
``jsonrpc.every-request-answered`` failure; a wrong or missing error code
is judged on the clause for that kind of frame.  After a failing example
the agent is restarted, so Hypothesis can shrink the failure to a minimal
frame against a fresh process.

The judging, the budget (``ACP_FUZZ_EXAMPLES`` / ``ACP_FUZZ_SECONDS`` /
``ACP_FUZZ_SEED`` / ``ACP_FUZZ_REPLAY`` / ``ACP_FUZZ_DATABASE``) and the
reporting are shared with the client campaigns (``acp_conformance.fuzz.campaign``);
this module says how an agent connection is prepared and which frames go to it.

Every result message carries the seed; every failure also names the frame,
its replay blob and the database key.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import replace
from typing import Any

import orjson
import pytest
from anyio.from_thread import BlockingPortal
from hypothesis import strategies as st
from hypothesis.strategies import SearchStrategy

from acp_conformance import strategies as acp
from acp_conformance.checks.gating import gated_use
from acp_conformance.errors import PeerError
from acp_conformance.fuzz.campaign import (
    AGENT_PROBE,
    DEAD_SESSION,
    LIVE_CWD,
    LIVE_MODE,
    LIVE_SESSION,
    FrameFuzzer,
    FuzzBudget,
    Live,
    live_connection,
    probe_unanswered,
)
from acp_conformance.fuzz.campaign import run_campaign as _run_campaign
from acp_conformance.harness import AgentHarness, Connection
from acp_conformance.suite._support import auth_required
from acp_conformance.suite.agent._helpers import blocked_by_auth

# Own process under --acp-isolation=connection: campaigns run in a thread of their own and send
# what no fresh connection would get.
pytestmark = pytest.mark.acp_own_process


class AgentFrameFuzzer(FrameFuzzer):
    """Frames to the agent under test, aimed at a live session in the sandbox."""

    role = "agent"

    def __init__(
        self, acp_agent: AgentHarness, portal: BlockingPortal, budget: FuzzBudget, *, baseline: bool = False
    ) -> None:
        super().__init__(acp_agent, portal, budget)
        self.acp = acp_agent
        self.baseline = baseline

    def _connect(self) -> AbstractContextManager[Any]:
        return live_connection(self.portal, self.acp, self.stream_failures)

    def _gated(self, frame: acp.Frame, live: Live) -> str | None:
        """Schema-valid frames a conforming client may still not send to this agent: a method or a
        field gated by a capability the agent did not advertise (session-setup.mdx, content.mdx)."""
        caps = live.conn.client.agent_capabilities
        return gated_use(frame.message, caps)

    async def _prepare(self, conn: Connection) -> Live:
        peer = conn.peer
        root = str(conn.sandbox.root)
        resp = await peer.call("session/new", {"cwd": root, "mcpServers": []})
        if auth_required(resp):
            # Judged INCONCLUSIVE by ``run_campaign`` in the test's thread: a pytest outcome raised
            # here, in the loop the synchronous tests share, would end that loop for all of them.
            raise _AuthRequired(conn)
        if resp.is_error:
            raise PeerError(f"session/new failed ({resp.error!r}); cannot aim frames at a live session")
        result = resp.result
        sid = result.get("sessionId") if isinstance(result, dict) else None
        if not isinstance(sid, str):
            raise PeerError(f"session/new gave no sessionId ({result!r}); cannot aim frames at a live session")
        modes = result.get("modes") if isinstance(result, dict) else None
        mode_ids = [m.get("id") for m in (modes or {}).get("availableModes", []) if isinstance(m, dict)]
        # The probe, before any fuzzing: an agent that does not answer even this extension request
        # (ext.request.respond, judged by its own tests) cannot show that it survived a frame.
        silent = await probe_unanswered(peer)
        if silent is not None:
            raise PeerError(
                f"the agent did not answer the extension request {AGENT_PROBE} on a fresh connection "
                f"({silent}); without that probe the campaign cannot tell whether it survived a frame"
            )
        live = Live(conn, probe=(AGENT_PROBE, {}, False))
        live.values = {
            orjson.dumps(LIVE_SESSION): orjson.dumps(sid),
            orjson.dumps(LIVE_CWD): orjson.dumps(root),
        }
        if mode_ids and isinstance(mode_ids[0], str):
            live.values[orjson.dumps(LIVE_MODE)] = orjson.dumps(mode_ids[-1])
        caps = conn.client.agent_capabilities
        implemented = set(acp.BASELINE)
        if caps.get("loadSession") is True:
            implemented.add("session/load")
        session_caps = caps.get("sessionCapabilities")
        for name in ("list", "close", "resume", "delete"):
            if isinstance(session_caps, dict) and isinstance(session_caps.get(name), dict):
                implemented.add(f"session/{name}")
        if modes:
            implemented.add("session/set_mode")
        if isinstance(result, dict) and result.get("configOptions"):
            implemented.add("session/set_config_option")
        live.implemented = frozenset(implemented)
        if self.baseline:
            live.succeeded = await self._baseline(conn, sid, live)
        return live

    async def _baseline(self, conn: Connection, sid: str, live: Live) -> frozenset[str]:
        """Plain requests the agent serves: a frame that fails only with something unusual added is then telling."""
        ok = {"session/new"}
        turn = await conn.client.prompt(sid, self.acp.config.prompt)
        if turn.response is not None and not turn.response.is_error:
            ok.add("session/prompt")
        mode = live.values.get(orjson.dumps(LIVE_MODE))
        if mode is not None:
            resp = await conn.peer.call("session/set_mode", {"sessionId": sid, "modeId": orjson.loads(mode)})
            if not resp.is_error:
                ok.add("session/set_mode")
        return frozenset(ok)

    def _applicable(self, frame: acp.Frame, live: Live) -> bool:
        return orjson.dumps(LIVE_MODE) not in frame.data or orjson.dumps(LIVE_MODE) in live.values


class _AuthRequired(PeerError):
    """session/new answered -32000 (auth_required): the agent wants authentication first."""

    def __init__(self, conn: Connection) -> None:
        super().__init__("session/new: authentication required")
        self.conn = conn


# ------------------------------------------------------------- campaigns
def run_campaign(
    acp_agent: AgentHarness,
    name: str,
    clauses: Sequence[str],
    strategy: SearchStrategy[acp.Frame],
    judge: Callable[[acp.Frame, Live], acp.Expect] | None = None,
    *,
    baseline: bool = False,
) -> None:
    def make(portal: BlockingPortal, budget: FuzzBudget) -> FrameFuzzer:
        return AgentFrameFuzzer(acp_agent, portal, budget, baseline=baseline)

    try:
        _run_campaign(acp_agent, name, clauses, strategy.filter(_harmless), make, judge)
    except _AuthRequired as exc:
        blocked_by_auth(acp_agent, exc.conn)


#: Methods with effects beyond the connection: a real agent may start an interactive login for
#: ``authenticate`` or end the user's signed-in state for ``logout``. The auth tests send them only
#: when the user asked (--acp-auth-method); the fuzzer never does.
UNSAFE_METHODS = frozenset({"authenticate", "logout"})


def _harmless(frame: acp.Frame) -> bool:
    if frame.method in UNSAFE_METHODS:
        return False
    return not any(m in frame.data for m in (b'"authenticate"', b'"logout"'))


def _frames(**kwargs: Any) -> SearchStrategy[acp.Frame]:
    return acp.frames(sender="client", **kwargs)


_SAFE = {
    # Aim at the live session, in the sandbox, with no MCP server to launch.
    "cwd": st.just(LIVE_CWD),
    "mcpServers": st.just([]),
    "additionalDirectories": st.just([]),
}


# ------------------------------------------------------------------ tests
@pytest.mark.acp_clause("jsonrpc.parse-error", "jsonrpc.every-request-answered", "jsonrpc.survives-invalid-input")
def test_fuzz_unparseable_lines(acp_agent: AgentHarness) -> None:
    """Lines that are not JSON (garbage, NUL, invalid UTF-8, cut frames, banners, 1 MiB lines)
    get -32700 with a null id; oddly framed JSON (CRLF, BOM, split writes) is still served."""
    base = _frames(kinds=["request"], overrides={"SessionId": st.just(DEAD_SESSION), **_SAFE})
    strategy = acp.byte_damage(base, huge_bytes=1024 * 1024)
    run_campaign(
        acp_agent,
        "unparseable-lines",
        ["jsonrpc.parse-error", "jsonrpc.every-request-answered", "jsonrpc.survives-invalid-input"],
        strategy,
    )


@pytest.mark.acp_clause("jsonrpc.invalid-request", "jsonrpc.every-request-answered", "jsonrpc.survives-invalid-input")
def test_fuzz_invalid_requests(acp_agent: AgentHarness) -> None:
    """JSON that is no request object ({}, scalars, null, no method, a non-string method, ids of
    the wrong type, a broken envelope) gets -32600, and the agent keeps serving."""
    strategy = acp.invalid_frames(
        sender="client",
        mutations=["not-a-request", "invalid-id", "envelope"],
        overrides={"SessionId": st.just(DEAD_SESSION), **_SAFE},
    )
    run_campaign(
        acp_agent,
        "invalid-requests",
        ["jsonrpc.invalid-request", "jsonrpc.every-request-answered", "jsonrpc.survives-invalid-input"],
        strategy,
    )


@pytest.mark.acp_clause("jsonrpc.invalid-params", "jsonrpc.every-request-answered", "jsonrpc.survives-invalid-input")
def test_fuzz_invalid_params(acp_agent: AgentHarness) -> None:
    """A request missing a required member, or with a member (or params) of the wrong type,
    gets -32602 (or -32601 for a method the agent does not implement), aimed at a live session."""
    strategy = acp.invalid_frames(
        sender="client",
        kinds=["request"],
        mutations=["missing-required", "wrong-type", "params-not-object"],
        overrides={"SessionId": st.just(LIVE_SESSION), **_SAFE},
    ).filter(lambda f: f.expect.clause == "jsonrpc.invalid-params")

    def judge(frame: acp.Frame, live: Live) -> acp.Expect:
        codes = set(frame.expect.codes or ())
        codes.discard(acp.METHOD_NOT_FOUND)
        if frame.method not in live.implemented:
            codes.add(acp.METHOD_NOT_FOUND)
        return acp.Expect("required", frozenset(codes), result_ok=False, clause="jsonrpc.invalid-params")

    run_campaign(
        acp_agent,
        "invalid-params",
        ["jsonrpc.invalid-params", "jsonrpc.every-request-answered", "jsonrpc.survives-invalid-input"],
        strategy,
        judge,
    )


@pytest.mark.acp_clause(
    "jsonrpc.unknown-method",
    "jsonrpc.notification-no-response",
    "jsonrpc.every-request-answered",
    "jsonrpc.survives-invalid-input",
)
def test_fuzz_methods_and_notifications(acp_agent: AgentHarness) -> None:
    """Unknown methods (near misses, unicode, reserved prefixes) get -32601; no notification,
    valid or broken, known or unknown, is ever answered."""
    safe = {"SessionId": st.sampled_from([DEAD_SESSION, LIVE_SESSION]), **_SAFE}
    unknown = acp.invalid_frames(sender="client", mutations=["unknown-method"], overrides=safe)
    notes = acp.frames(sender="client", kinds=["notification"], valid=None, unusual=True, overrides=safe)
    strategy = acp.evenly(unknown, notes)
    run_campaign(
        acp_agent,
        "methods-and-notifications",
        [
            "jsonrpc.unknown-method",
            "jsonrpc.notification-no-response",
            "jsonrpc.every-request-answered",
            "jsonrpc.survives-invalid-input",
        ],
        strategy,
    )


@pytest.mark.acp_clause("jsonrpc.id-types", "jsonrpc.every-request-answered", "jsonrpc.survives-invalid-input")
def test_fuzz_odd_ids(acp_agent: AgentHarness) -> None:
    """Requests with odd but valid ids (0, negative, int64 extremes, "", numeric-looking, unicode,
    64 KiB strings) are answered with exactly that id; a reused id does not wedge the agent."""
    safe = {"SessionId": st.just(DEAD_SESSION), **_SAFE}
    odd = acp.frames(sender="client", kinds=["request"], mutations=["odd-id"], overrides=safe)
    dup = acp.invalid_frames(sender="client", mutations=["duplicate-id"], overrides=safe)
    strategy = acp.evenly(odd, odd, odd, dup)
    run_campaign(
        acp_agent,
        "odd-ids",
        ["jsonrpc.id-types", "jsonrpc.every-request-answered", "jsonrpc.survives-invalid-input"],
        strategy,
    )


@pytest.mark.acp_clause("jsonrpc.every-request-answered", "jsonrpc.survives-invalid-input")
def test_fuzz_survives_unusual_frames(acp_agent: AgentHarness) -> None:
    """Valid but unusual frames (1 MiB strings, long arrays, deep nesting, RTL / zero-width /
    combining text, extension methods) and odd invalid ones (lone surrogates, unknown enum values,
    nested wrong types, stray responses) are answered as owed, and the agent keeps answering."""
    safe = {"SessionId": st.just(DEAD_SESSION), **_SAFE}
    valid = acp.frames(
        sender="client",
        kinds=["request"],
        mutations=["unicode", "huge-string", "huge-array", "nesting", "extension"],
        overrides=safe,
    )
    odd = acp.invalid_frames(
        sender="client",
        mutations=["deep-nesting", "surrogates", "stray-response", "unknown-enum", "wrong-type"],
        overrides=safe,
    )
    strategy = acp.evenly(valid, odd)

    def judge(frame: acp.Frame, live: Live) -> acp.Expect:
        # These frames name a session that does not exist: a wrong-typed or unknown-valued member
        # may be refused as invalid params (-32602) or the session as unknown (-32002); which one
        # an agent checks first is its own business.  This campaign judges survival: any error.
        if frame.expect.codes is not None and frame.expect.clause == "jsonrpc.invalid-params":
            return replace(frame.expect, codes=None)
        return frame.expect

    run_campaign(
        acp_agent,
        "unusual-frames",
        ["jsonrpc.every-request-answered", "jsonrpc.survives-invalid-input"],
        strategy,
        judge,
    )


@pytest.mark.acp_clause("ext.meta.everywhere")
def test_fuzz_meta_is_accepted_everywhere(acp_agent: AgentHarness) -> None:
    """Requests that succeed without _meta still succeed with _meta on every object that allows it
    (params, content blocks, annotations...), whatever it holds; notifications carrying it are not answered."""
    prompt_text = acp_agent.config.prompt
    text_block = acp.from_definition("ContentBlock", meta="always", overrides={"text": st.just(prompt_text)}).filter(
        lambda b: b.get("type") == "text"
    )
    live = {"SessionId": st.just(LIVE_SESSION), **_SAFE}
    new = acp.frames(method="session/new", sender="client", kinds=["request"], meta="always", overrides=live)
    prompt = acp.frames(
        method="session/prompt",
        sender="client",
        kinds=["request"],
        meta="always",
        overrides={**live, "prompt": st.lists(text_block, min_size=1, max_size=2)},
    )
    mode = acp.frames(
        method="session/set_mode",
        sender="client",
        kinds=["request"],
        meta="always",
        overrides={**live, "SessionModeId": st.just(LIVE_MODE)},
    )
    cancel = acp.frames(method="session/cancel", sender="client", kinds=["notification"], meta="always", overrides=live)
    strategy = acp.evenly(new, new, mode, cancel, prompt)

    def judge(frame: acp.Frame, live: Live) -> acp.Expect:
        if frame.kind == "notification":
            return frame.expect
        if frame.method not in live.succeeded:
            return acp.Expect("required")  # it fails without _meta too: not a _meta matter
        if gated_use(frame.message, live.conn.client.agent_capabilities) is not None:
            # It also uses something the agent did not advertise (additionalDirectories...): a refusal
            # may be for that, so it says nothing about _meta (nor is it a robustness finding).
            return acp.Expect("required")
        return acp.Expect("required", frozenset(), result_ok=True, clause="ext.meta.everywhere")

    run_campaign(acp_agent, "meta-everywhere", ["ext.meta.everywhere"], strategy, judge, baseline=True)
