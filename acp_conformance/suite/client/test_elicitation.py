"""Elicitation, client side (elicitation.mdx): the suite's agent asks the client questions.

The client's capabilities decide what is asked: a mode it did not advertise must be refused
with -32602; a form it did advertise must be answered with one of the actions; a mode nobody
knows must never be handled as a known one; an ``elicitation/complete`` for an id the client
never saw must be ignored.  A client that advertises no elicitation at all is still judged on
refusing it.
"""

from __future__ import annotations

from typing import Any

import anyio
import orjson
import pytest

from acp_conformance.checks.gating import ELICITATION_MODES, elicitation_modes
from acp_conformance.core.events import Response
from acp_conformance.core.jsonrpc import ErrorCode
from acp_conformance.endpoints.agent import PromptTurn
from acp_conformance.errors import PeerError, PeerTimeout
from acp_conformance.harness.client import ClientConnection, ClientHarness
from acp_conformance.model_stub.server import HttpRequest, Responder, StubServer
from acp_conformance.results import Status
from acp_conformance.suite._support import inconclusive, not_applicable, silence_judged_once
from acp_conformance.suite.client._helpers import (
    ask_again,
    first_turn,
    manual_check,
    permission_baseline,
    require,
    same_kind,
    still_answers,
)

pytestmark = pytest.mark.anyio

MODES = ELICITATION_MODES


def advertised_modes(conn: ClientConnection) -> set[str]:
    """The modes the client advertised (``checks.gating.elicitation_modes``)."""
    return elicitation_modes(conn.agent.client_capabilities)


def elicitation_params(turn: PromptTurn, mode: str) -> dict[str, Any]:
    """A well-formed request of ``mode`` (an unknown mode gets the form fields)."""
    if mode == "url":
        return {
            "mode": "url",
            "elicitationId": f"acp-conformance-{turn.new_tool_call_id()}",
            "url": "https://127.0.0.1/acp-conformance/elicit",
            "message": "Open this page to continue (the suite never serves it).",
        }
    return {
        "mode": mode,
        "message": "Which greeting should the agent use?",
        "requestedSchema": {
            "type": "object",
            "properties": {"greeting": {"type": "string", "title": "Greeting", "enum": ["hello", "howdy"]}},
            "required": ["greeting"],
        },
    }


async def _ask(acp: ClientHarness, turn: PromptTurn, mode: str) -> Response | PeerTimeout:
    """The client's answer, or the silence: charged once where the wait flagged it, and the
    caller's clause INCONCLUSIVE (``silence_judged_once``), never a PASS for want of an answer."""
    try:
        resp: Response = await turn.call("elicitation/create", elicitation_params(turn, mode), validate=mode in MODES)
        return resp
    except PeerTimeout as exc:
        return exc


@pytest.mark.acp_clause("elicit.mode.unadvertised-error", "elicit.capability.explicit")
async def test_an_unadvertised_mode_is_refused(acp_client: ClientHarness) -> None:
    """A mode the client did not advertise gets -32602 (a SHOULD: the sentence has no keyword).
    When the client sent an elicitation object, the mode missing from it is unsupported by the
    client's own declaration: accepting it anyway is reading ``{}`` or a null mode as support
    (MCP's rule, not ACP's).  But the request is one the agent MUST NOT send, so that is a
    robustness finding: elicit.mode.unadvertised-error's WARN, and elicit.capability.explicit
    (client half) INCONCLUSIVE, never its FAIL."""
    require(acp_client, "prompt")
    async with acp_client.connect() as conn:
        turn = await first_turn(acp_client, conn)
        missing = [m for m in MODES if m not in advertised_modes(conn)]
        if not missing:
            await turn.end()
            not_applicable("the client advertised both elicitation modes")
        mode = missing[0]
        declared = isinstance(conn.agent.client_capabilities.get("elicitation"), dict)
        expected = f"error -32602 (Invalid params) for a {mode} elicitation the client did not advertise"
        if not declared:
            reason = "the client sent no elicitation object (nothing to read explicitly)"
            acp_client.record("elicit.capability.explicit", Status.NOT_APPLICABLE, reason)
        resp = await _ask(acp_client, turn, mode)
        if not isinstance(resp, PeerTimeout):
            code = resp.code
            answer = f"error {resp.error!r}" if resp.is_error else f"result {resp.result!r}"
            accepted = not resp.is_error and isinstance(resp.result, dict) and resp.result.get("action") == "accept"
            if declared:
                elicitation = conn.agent.client_capabilities.get("elicitation")
                if accepted:
                    # The request is one the agent MUST NOT send (elicitation.mdx): what a client makes
                    # of it is a robustness finding, elicit.mode.unadvertised-error's (a SHOULD), not a
                    # FAIL of this MUST.
                    acp_client.record(
                        "elicit.capability.explicit",
                        Status.INCONCLUSIVE,
                        f"the client accepted a {mode} elicitation its elicitation object {elicitation!r} does not "
                        "advertise; the request is one the agent MUST NOT send, so the client's answer is judged "
                        f"as elicit.mode.unadvertised-error's, not this MUST ({answer})",
                    )
                else:
                    acp_client.check(
                        "elicit.capability.explicit",
                        True,
                        f"no accept for a {mode} elicitation: the client's elicitation object {elicitation!r} does "
                        f"not advertise {mode}",
                        answer,
                    )
            acp_client.check("elicit.mode.unadvertised-error", code == ErrorCode.INVALID_PARAMS, expected, answer)
        else:
            silence_judged_once(acp_client, "elicit.mode.unadvertised-error", expected, resp)
            explicit = "no accept for an elicitation in a mode the client's elicitation object does not advertise"
            if declared:
                silence_judged_once(acp_client, "elicit.capability.explicit", explicit, resp)
        await turn.end()


@pytest.mark.acp_clause("elicit.response.shape")
async def test_an_advertised_form_is_answered_with_an_action(acp_client: ClientHarness) -> None:
    """The answer's shape is judged on the frame (the schema's CreateElicitationResponse, charged to
    elicit.response.shape); here the client is asked, and a known action is required."""
    require(acp_client, "prompt")
    async with acp_client.connect() as conn:
        turn = await first_turn(acp_client, conn)
        if "form" not in advertised_modes(conn):
            await turn.end()
            not_applicable("the client did not advertise elicitation.form")
        resp = await _ask(acp_client, turn, "form")
        if isinstance(resp, PeerTimeout):
            silence_judged_once(
                acp_client, "elicit.response.shape", "a result with action accept, decline or cancel", resp
            )
        elif not resp.is_error:
            action = resp.result.get("action") if isinstance(resp.result, dict) else None
            acp_client.check(
                "elicit.response.shape",
                action in ("accept", "decline", "cancel"),
                "a result with action accept, decline or cancel",
                f"result {resp.result!r}",
            )
        else:
            why = f"the advertised form was answered with error {resp.error!r}: the clause judges the actions"
            acp_client.record("elicit.response.shape", Status.NOT_APPLICABLE, why)
        await turn.end()


@pytest.mark.acp_clause("elicit.unknown-mode")
async def test_an_unknown_mode_is_not_handled_as_a_known_one(acp_client: ClientHarness) -> None:
    """A custom mode nobody defines, with a form's fields: accepting it with content would be
    rendering it as a form.  An error, a decline or a cancel is right."""
    require(acp_client, "prompt")
    async with acp_client.connect() as conn:
        turn = await first_turn(acp_client, conn)
        resp = await _ask(acp_client, turn, "_acp_conformance_unknown_mode")
        if isinstance(resp, PeerTimeout):
            expected = "no accept with content for an elicitation of an unknown mode (an error, decline or cancel)"
            silence_judged_once(acp_client, "elicit.unknown-mode", expected, resp)
        else:
            result = resp.result if isinstance(resp.result, dict) else {}
            rendered = not resp.is_error and result.get("action") == "accept" and bool(result.get("content"))
            acp_client.check(
                "elicit.unknown-mode",
                not rendered,
                "no accept with content for an elicitation of an unknown mode (an error, decline or cancel)",
                f"result {resp.result!r}",
            )
        await turn.end()


#: An elicitation id no agent issued (agents MUST send a completion only with "the original elicitationId").
NEVER_ISSUED = "acp-conformance-never-sent-7"


@pytest.mark.acp_clause("elicit.complete.ignore-unknown", "jsonrpc.survives-invalid-input")
async def test_a_completion_for_an_unknown_id_is_ignored(acp_client: ClientHarness) -> None:
    """elicitation.mdx § URL completion: "Clients MUST ignore unknown or already-completed IDs".

    An agent MUST send ``elicitation/complete`` only with "the original elicitationId", so an id it
    never issued is input the spec forbids us to send: a client that stops serving after it shows a
    robustness finding (``jsonrpc.survives-invalid-input``), never the MUST.  The MUST is judged on
    input an agent may send: a second completion of a URL elicitation it did issue and complete
    (the agent MAY send the completion; nothing forbids sending it again), an already-completed id.
    That needs URL elicitation advertised; without it the clause, gated on it, does not apply."""
    require(acp_client, "prompt")
    async with acp_client.connect() as conn:
        turn = await first_turn(acp_client, conn)
        baseline = await permission_baseline(turn)
        if "url" in advertised_modes(conn):
            params = elicitation_params(turn, "url")
            try:
                await turn.call("elicitation/create", params)
            except PeerTimeout:
                inconclusive("the client did not answer the URL elicitation whose completion is sent twice")
            completion = {"elicitationId": params["elicitationId"]}
            await conn.peer.notify("elicitation/complete", completion)
            # The first completion is one a conforming agent sends: a client that stops answering after
            # it broke something else (or nothing provable here), not this clause.
            after_first = await ask_again(turn, "between.txt")
            now = after_first.message if isinstance(after_first, PeerError) else after_first.describe()
            if isinstance(after_first, PeerError) or not same_kind(baseline, after_first):
                inconclusive(
                    f"after the completion of its own URL elicitation the client no longer answered as before "
                    f"({baseline.describe()}; now {now}): the repeat would prove nothing"
                )
            await conn.peer.notify("elicitation/complete", completion)
            await still_answers(
                acp_client,
                turn,
                "elicit.complete.ignore-unknown",
                "a second elicitation/complete for an elicitation already completed",
                baseline,
            )
        else:
            acp_client.record(
                "elicit.complete.ignore-unknown",
                Status.NOT_APPLICABLE,
                "the client does not advertise URL elicitation (clientCapabilities.elicitation.url): no "
                "elicitation it could know is completed",
            )
        # Last: a client that stops serving here leaves nothing else unjudged.  Sent marked as a frame
        # no conforming agent sends, so a request left unanswered after it is robustness (``Peer.provoked``).
        never = {"jsonrpc": "2.0", "method": "elicitation/complete", "params": {"elicitationId": NEVER_ISSUED}}
        await conn.peer.send_raw(
            orjson.dumps(never) + b"\n", forbidden="an elicitation/complete for an id never issued"
        )
        await still_answers(
            acp_client,
            turn,
            "jsonrpc.survives-invalid-input",
            "an elicitation/complete for an id no agent issued (which agents MUST NOT send)",
            baseline,
        )
        await turn.end()


async def _landing(request: HttpRequest, answer: Responder) -> None:
    """The page a URL elicitation points at: it only records that someone fetched it."""
    await answer.json(200, {"page": "acp-conformance elicitation landing page: nothing to do here"})


@pytest.mark.acp_clause("elicit.url.safety")
async def test_an_elicited_url_is_never_opened_without_consent(acp_client: ClientHarness) -> None:
    """elicitation.mdx § URL mode: "Clients MUST NOT prefetch the URL or open it without explicit user
    consent".  The URL points at a local page that records every fetch: a fetch while the client answers
    decline or cancel (or refuses) was made without consent.  A fetch before an accept cannot be told from
    opening the page right after the user consented: not a finding.  Showing the full URL and asking are
    for a person to see (manual mode)."""
    require(acp_client, "prompt")
    async with StubServer(_landing) as page, acp_client.connect() as conn:
        turn = await first_turn(acp_client, conn)
        if "url" not in advertised_modes(conn):
            not_applicable("the client does not advertise URL elicitation (clientCapabilities.elicitation.url)")
        params = elicitation_params(turn, "url")
        params["url"] = f"{page.url}/acp-conformance/elicit/{params['elicitationId']}"
        try:
            resp = await turn.call("elicitation/create", params)
        except PeerTimeout:
            inconclusive("the client did not answer the URL elicitation")
        result = resp.result if isinstance(resp.result, dict) else {}
        action = "an error" if resp.is_error else repr(result.get("action"))
        # A client opening the page on its way out of the dialog: give the fetch a moment to land.
        await _fetched_within(page, 0.5)
        await turn.say("Thanks.")
        await turn.end()
        if acp_client.mode == "manual":
            await manual_check(
                acp_client,
                "elicit.url.safety",
                f"Did the editor show the full URL ({params['url']}) and ask you before opening it?",
            )
    fetched = [r.line() for r in page.requests]
    consented = not resp.is_error and result.get("action") == "accept"
    acp_client.check(
        "elicit.url.safety",
        consented or not fetched,
        "the URL fetched only after the user accepted (never prefetched)",
        f"answered {action}, and the page was fetched: {fetched}",
    )


async def _fetched_within(page: StubServer, seconds: float) -> None:
    with anyio.move_on_after(seconds):
        while not page.requests:
            await page.next_request()
