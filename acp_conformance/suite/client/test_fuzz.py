"""Fuzzing the client under test with schema-derived frames (acp_conformance.strategies).

The suite plays the agent: once the client has sent its first
``session/prompt``, and while that turn is open, every example writes one
frame an agent might send (``sender="agent"``: ``session/update`` variants,
``session/request_permission``, ``fs/*``, ``terminal/*``), valid but unusual
or broken, waits for what the client owes (an answer with the applicable
error code, or silence for a notification), then proves the client still
serves with two probe requests: an ``fs/read_text_file`` of a file in the
session directory if the client advertised ``fs.readTextFile``, else a
``session/request_permission`` (the baseline client method).  A client that
dies, wedges or stops answering fails ``jsonrpc.every-request-answered``; a
wrong or missing error code fails (or, for a SHOULD, warns on) the clause of
that kind of frame.  After a failing example the client is started afresh,
so Hypothesis shrinks the failure to a minimal frame against a new process.

What a client owes is taken from the ACP v1 schema and docs, with the same
rules as the agent campaigns (``acp_conformance.fuzz.campaign``), plus what is
particular to a client:

* a method the client did not advertise (``fs/*`` without ``fs.*``,
  ``terminal/*`` without ``terminal``): the agent broke ``fs.*.gated`` /
  ``term.gated`` by asking, and no clause fixes the error code the client
  answers with, so any error is right (and a valid request may even be
  served); an invalid one still must not get a result;
* a client that answers a valid ``session/request_permission`` with -32601
  (it does not implement the baseline method; judged on
  ``perm.response.shape`` by the permission tests) may answer an invalid one
  with any error too: that is no finding about params;
* a response-shaped frame (no method, or a result) under an id the client
  itself used is not sent: it would read as the answer to the client's own
  request (its pending ``session/prompt``), which is no robustness matter.

Safety: every frame stays inside the session directory.  ``fs/*`` paths are
files in it (anything else, and non-string paths, which some runtimes read
as file descriptors, are never sent), ``terminal/create`` runs only
``true acp-fuzz`` in it with no extra environment, and ``elicitation/create``
is never sent (a client may open a URL or wait for a person).

Budget, seed, replay and the database: as for agents (``--acp-fuzz-*``,
``ACP_FUZZ_*``); fuzzing needs ``--acp-client-mode=auto`` (it restarts the
client after a failing example).
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from dataclasses import replace
from pathlib import PurePosixPath
from typing import Any

import orjson
import pytest
from anyio.from_thread import BlockingPortal
from hypothesis import strategies as st
from hypothesis.strategies import SearchStrategy

from acp_conformance import strategies as acp
from acp_conformance.checks.gating import CLIENT_GATED_METHODS
from acp_conformance.core import jsonrpc
from acp_conformance.core.events import Request
from acp_conformance.core.ids import id_key
from acp_conformance.endpoints.agent import DEFAULT_OPTIONS
from acp_conformance.fuzz.campaign import (
    DEAD_SESSION,
    LIVE_CWD,
    LIVE_SESSION,
    FrameFuzzer,
    FuzzBudget,
    Judge,
    Live,
    live_connection,
    run_campaign,
)
from acp_conformance.fuzz.client_safety import (
    FUZZ_PATHS,
    PROBE_FILE,
    PROBE_TEXT,
    READ_FILE,
    SAFE_OVERRIDES,
    client_safe,
    messages_of,
)
from acp_conformance.harness.client import ClientConnection, ClientHarness
from acp_conformance.suite.client._helpers import advertised, first_turn, not_applicable, require, session_dir

__all__ = ["ClientFrameFuzzer"]

#: Methods a client serves, by the capability that offers them (the baseline one needs none).
GATED = CLIENT_GATED_METHODS
PERMISSION = "session/request_permission"
CLIENT_METHODS = frozenset({PERMISSION, *GATED})


# -------------------------------------------------------------- the fuzzer
class ClientFrameFuzzer(FrameFuzzer):
    """Frames to the client under test, during its first prompt turn, aimed at its live session."""

    role = "client"

    def __init__(self, acp_client: ClientHarness, portal: BlockingPortal, budget: FuzzBudget) -> None:
        super().__init__(acp_client, portal, budget)
        self.acp = acp_client

    def _connect(self) -> AbstractContextManager[Any]:
        return live_connection(self.portal, self.acp, self.stream_failures)

    async def _prepare(self, conn: ClientConnection) -> Live:
        turn = await first_turn(self.acp, conn)
        root = session_dir(conn, turn)
        for name, text in ((PROBE_FILE, PROBE_TEXT), (READ_FILE, "fuzz me\n")):
            (root / name).write_text(text, "utf-8")
            conn.cleanup.append(root / name)
        for path in FUZZ_PATHS[1:]:
            conn.cleanup.append(root / PurePosixPath(path).name)
        sid = turn.session_id
        implemented = {PERMISSION} | {m for m, cap in GATED.items() if advertised(conn, cap)}
        if "fs/read_text_file" in implemented:
            probe: tuple[str, Any, bool] = (
                "fs/read_text_file",
                {"sessionId": sid, "path": str(root / PROBE_FILE)},
                True,
            )
        else:
            tool_call = {"toolCallId": "acp-fuzz-probe", "title": "Fuzz probe", "kind": "read", "status": "pending"}
            probe = (PERMISSION, {"sessionId": sid, "toolCall": tool_call, "options": DEFAULT_OPTIONS}, True)
        # The baseline, before any fuzzing: the probe is answered (a client that does not answer even
        # this fails jsonrpc.every-request-answered by the wait itself), and a valid permission request
        # tells whether the client implements the baseline method at all.
        if probe[0] != PERMISSION:
            await conn.peer.call(probe[0], probe[1])
        tool_call = {"toolCallId": "acp-fuzz-baseline", "title": "Fuzz baseline", "kind": "read", "status": "pending"}
        first = await conn.peer.call(PERMISSION, {"sessionId": sid, "toolCall": tool_call, "options": DEFAULT_OPTIONS})
        if first.code == jsonrpc.ErrorCode.METHOD_NOT_FOUND:
            implemented.discard(PERMISSION)
        live = Live(conn, probe=probe, implemented=frozenset(implemented))
        live.values = {
            orjson.dumps(LIVE_SESSION): orjson.dumps(sid),
            LIVE_CWD.encode(): orjson.dumps(str(root))[1:-1],
        }
        return live

    def _applicable(self, frame: acp.Frame, live: Live) -> bool:
        own = {id_key(e.id) for e in live.conn.peer.events if isinstance(e, Request)}
        for msg in messages_of(frame):
            response_shaped = not isinstance(msg.get("method"), str) or "result" in msg or "error" in msg
            if response_shaped and "id" in msg and id_key(msg["id"]) in own:
                return False
        return True


def _judge(frame: acp.Frame, live: Live) -> acp.Expect:
    """The frame's own expectation, but for methods the client did not advertise (see the module docstring)."""
    e = frame.expect
    if frame.kind != "request" or frame.method not in CLIENT_METHODS or e.answer != "required":
        return e
    if frame.method in live.implemented:
        if e.codes is None or frame.method in acp.BASELINE:
            return e
        # strategies add -32601 for methods outside the baseline; the client said it serves this one.
        return replace(e, codes=e.codes - {acp.METHOD_NOT_FOUND})
    if e.codes is None:
        return e
    return replace(e, codes=None)


def _campaign(
    acp_client: ClientHarness, name: str, clauses: list[str], strategy: SearchStrategy[acp.Frame], judge: Judge = _judge
) -> None:
    require(acp_client, "prompt")
    if acp_client.mode != "auto":
        not_applicable("fuzzing restarts the client after a failing example: run with --acp-client-mode=auto")

    def make(portal: BlockingPortal, budget: FuzzBudget) -> FrameFuzzer:
        return ClientFrameFuzzer(acp_client, portal, budget)

    run_campaign(acp_client, f"client-{name}", clauses, strategy.filter(client_safe), make, judge)


def _frames(**kwargs: Any) -> SearchStrategy[acp.Frame]:
    return acp.frames(sender="agent", **kwargs)


def _invalid(**kwargs: Any) -> SearchStrategy[acp.Frame]:
    return acp.invalid_frames(sender="agent", **kwargs)


#: Size of the huge strings, arrays and lines.
HUGE = 1024 * 1024


# ------------------------------------------------------------------ tests
@pytest.mark.acp_clause("jsonrpc.parse-error", "jsonrpc.every-request-answered", "jsonrpc.survives-invalid-input")
def test_fuzz_client_unparseable_lines(acp_client: ClientHarness) -> None:
    """Lines that are not JSON (garbage, NUL, invalid UTF-8, cut frames, banners, 1 MiB lines) get -32700
    with a null id; oddly framed agent requests (CRLF, BOM, split writes) are still served."""
    base = _frames(kinds=["request"], overrides=SAFE_OVERRIDES)
    strategy = acp.byte_damage(base, huge_bytes=HUGE)
    _campaign(
        acp_client,
        "unparseable-lines",
        ["jsonrpc.parse-error", "jsonrpc.every-request-answered", "jsonrpc.survives-invalid-input"],
        strategy,
    )


@pytest.mark.acp_clause("jsonrpc.invalid-request", "jsonrpc.every-request-answered", "jsonrpc.survives-invalid-input")
def test_fuzz_client_invalid_requests(acp_client: ClientHarness) -> None:
    """JSON that is no request object ({}, scalars, null, no method, a non-string method, ids of the wrong
    type, a broken envelope) gets -32600, and the client keeps serving its agent."""
    strategy = _invalid(
        kinds=["request", "notification"],
        mutations=["not-a-request", "invalid-id", "envelope"],
        overrides=SAFE_OVERRIDES,
    )
    _campaign(
        acp_client,
        "invalid-requests",
        ["jsonrpc.invalid-request", "jsonrpc.every-request-answered", "jsonrpc.survives-invalid-input"],
        strategy,
    )


@pytest.mark.acp_clause("jsonrpc.invalid-params", "jsonrpc.every-request-answered", "jsonrpc.survives-invalid-input")
def test_fuzz_client_invalid_params(acp_client: ClientHarness) -> None:
    """session/request_permission, fs/* and terminal/* with a required member missing or of the wrong type, or
    params that are no object, get -32602 (any error for a method the client did not advertise), never a result."""
    strategy = _invalid(
        kinds=["request"], mutations=["missing-required", "wrong-type", "params-not-object"], overrides=SAFE_OVERRIDES
    ).filter(lambda f: f.expect.clause == "jsonrpc.invalid-params")
    _campaign(
        acp_client,
        "invalid-params",
        ["jsonrpc.invalid-params", "jsonrpc.every-request-answered", "jsonrpc.survives-invalid-input"],
        strategy,
    )


@pytest.mark.acp_clause(
    "jsonrpc.unknown-method",
    "jsonrpc.notification-no-response",
    "jsonrpc.every-request-answered",
    "jsonrpc.survives-invalid-input",
)
def test_fuzz_client_methods_and_notifications(acp_client: ClientHarness) -> None:
    """Unknown methods (near misses, unicode, reserved prefixes) get -32601; no notification is ever answered:
    session/update of every kind (valid, unusual, broken, for a session that does not exist), unknown ones too."""
    safe = {**SAFE_OVERRIDES, "SessionId": st.sampled_from([LIVE_SESSION, LIVE_SESSION, DEAD_SESSION])}
    unknown = _invalid(kinds=["request"], mutations=["unknown-method"], overrides=SAFE_OVERRIDES)
    notes = _frames(kinds=["notification"], valid=None, unusual=True, overrides=safe)
    strategy = acp.evenly(unknown, notes, notes)
    _campaign(
        acp_client,
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
def test_fuzz_client_odd_ids(acp_client: ClientHarness) -> None:
    """Agent requests with odd but valid ids (0, negative, int64 extremes, "", numeric-looking, unicode, 64 KiB
    strings) are answered with exactly that id; a reused id does not wedge the client."""
    odd = _frames(kinds=["request"], mutations=["odd-id"], overrides=SAFE_OVERRIDES)
    dup = _invalid(kinds=["request"], mutations=["duplicate-id"], overrides=SAFE_OVERRIDES)
    _campaign(
        acp_client,
        "odd-ids",
        ["jsonrpc.id-types", "jsonrpc.every-request-answered", "jsonrpc.survives-invalid-input"],
        acp.evenly(odd, odd, odd, dup),
    )


@pytest.mark.acp_clause("jsonrpc.every-request-answered", "ext.request.unknown")
def test_fuzz_client_survives_unusual_frames(acp_client: ClientHarness) -> None:
    """Valid but unusual frames (_meta on every object, 1 MiB strings, long arrays, deep nesting, RTL /
    zero-width / combining text, extension requests) and odd invalid ones (lone surrogates, unknown enum
    values, nested wrong types, stray responses) are answered as owed, and the client keeps answering."""
    valid = _frames(
        kinds=["request", "notification"],
        mutations=["meta-everywhere", "unicode", "huge-string", "huge-array", "nesting", "extension"],
        overrides=SAFE_OVERRIDES,
        huge_bytes=HUGE,
    )
    odd = _invalid(
        kinds=["request", "notification"],
        mutations=["deep-nesting", "surrogates", "stray-response", "unknown-enum", "wrong-type"],
        overrides=SAFE_OVERRIDES,
        huge_bytes=HUGE,
    )
    _campaign(
        acp_client, "unusual-frames", ["jsonrpc.every-request-answered", "ext.request.unknown"], acp.evenly(valid, odd)
    )
