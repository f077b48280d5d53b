"""Form elicitation (elicitation.mdx): the suite's client advertises ``elicitation.form`` and
answers the agent's ``elicitation/create`` with ``decline`` or ``cancel``.

Eliciting is optional: an agent that asks nothing (the elicit prompt is only a request) makes
these NOT_APPLICABLE.  What every ``elicitation/create`` must look like (elicit.request.shape),
and that a form never asks for a secret (elicit.form.no-secrets), is judged passively on every
transcript; these tests bind them where an elicitation is most likely to come.

What is judged here: "Agents MUST NOT assume an elicitation succeeds. They MUST handle
``decline``, ``cancel``, and failures by safely falling back, retrying, or failing the
originating operation" (§ Responses).  On the wire that is the turn going on to its end: an
answer to the ``session/prompt`` (a result or an error, either is a handled failure) within
the deadline, and no further elicitation of the same question waiting on us forever.
"""

from __future__ import annotations

from typing import Any

import pytest

from acp_conformance.core import jsonrpc
from acp_conformance.core.events import Event
from acp_conformance.endpoints.client import UNKNOWN_ACTION, UNKNOWN_ACTION_MARKER, ClientCapabilities
from acp_conformance.harness import AgentHarness
from acp_conformance.suite._support import new_session, not_applicable
from acp_conformance.suite.agent._helpers import wait_prompt_response

pytestmark = pytest.mark.anyio

FORM = ClientCapabilities(elicitation_form=True)
URL = ClientCapabilities(elicitation_url=True)


@pytest.mark.parametrize("answer", ["decline", "cancel"])
@pytest.mark.acp_clause("elicit.agent-handles-failure", "elicit.request.shape", "elicit.form.no-secrets")
async def test_turn_survives_a_refused_elicitation(acp_agent: AgentHarness, answer: str) -> None:
    async with acp_agent.connect(capabilities=FORM, permission="allow_once") as conn:
        conn.client.elicitation = answer
        sid = await new_session(acp_agent, conn)
        rid, start = await conn.client.send_prompt(sid, acp_agent.config.elicit_prompt)
        # The silence, if any, is this clause's: the turn waits on a failure it does not handle.
        resp = await wait_prompt_response(conn, rid, start, flag=False)
        calls = [c for c in conn.client.elicitation_calls if c.answer is not None]
        if not calls:
            if resp is None:
                # Nothing of ours refused, and no answer: a stall the test is not about.
                await wait_prompt_response(conn, rid, start)
            not_applicable("the agent sent no elicitation/create the client could answer (eliciting is optional)")
        acp_agent.check(
            "elicit.agent-handles-failure",
            resp is not None,
            f"the turn to end (a session/prompt result or error) after we answered its elicitation with {answer!r}",
            f"no session/prompt answer within {conn.peer.timeout:g} s of our {answer!r} "
            f"({len(calls)} elicitation(s) answered)",
        )


@pytest.mark.acp_clause("elicit.response.unknown-action", "elicit.agent-handles-failure")
async def test_an_unknown_action_is_not_taken_for_accept(acp_agent: AgentHarness) -> None:
    """We answer with an action the agent cannot know (the schema's extension variant) whose
    content carries a marker in every field.  The schema: "They MUST NOT treat it as a known
    elicitation action".  Treating it as ``accept`` is visible: the marker comes back in what the
    agent sends afterwards (not in a raw payload it forwards: ``RAW_CARRIERS``).  As failure,
    decline or cancel it is not, and which one is not visible either.  A turn that stalls after our
    answer did not handle it: that is elicit.agent-handles-failure's, not
    jsonrpc.every-request-answered's (one defect, one clause)."""
    async with acp_agent.connect(capabilities=FORM, permission="allow_once") as conn:
        conn.client.elicitation = "unknown-action"
        sid = await new_session(acp_agent, conn)
        rid, start = await conn.client.send_prompt(sid, acp_agent.config.elicit_prompt)
        resp = await wait_prompt_response(conn, rid, start, flag=False)  # what the turn sent is all on record
        calls = [c for c in conn.client.elicitation_calls if c.answer is not None]
        if not calls:
            if resp is None:
                await wait_prompt_response(conn, rid, start)  # a stall this test is not about
            not_applicable("the agent sent no elicitation/create the client could answer (eliciting is optional)")
        acp_agent.check(
            "elicit.agent-handles-failure",
            resp is not None,
            f"the turn to end (a result or an error) after we answered its elicitation with {UNKNOWN_ACTION!r}",
            f"no session/prompt answer within {conn.peer.timeout:g} s of our answer",
            stop=False,
        )
        after = conn.peer.events[calls[0].arrived_at_event :]  # the request itself holds no marker
        echoed = [e for e in after if UNKNOWN_ACTION_MARKER in _text_of(e)]
        acp_agent.check(
            "elicit.response.unknown-action",
            not echoed,
            f"the content of our {UNKNOWN_ACTION!r} answer left unused (the action handled as a failure, decline or "
            "cancel; which one is not visible)",
            f"the marker came back in {len(echoed)} frame(s), first: {_text_of(echoed[0])[:200]}" if echoed else "",
        )


@pytest.mark.acp_clause("elicit.url.id-unique", "elicit.complete.routing", "elicit.url.safety", "elicit.request.shape")
async def test_url_elicitations_and_their_completion(acp_agent: AgentHarness) -> None:
    """With elicitation.url advertised and the URL prompt, twice on one connection (we accept each;
    the suite never opens the URL): the elicitationIds of outstanding URL elicitations differ, and an
    elicitation/complete names one we received.  Both are judged on the frames (checks.wire);
    an agent that opens no URL elicitation makes them NOT_APPLICABLE."""
    async with acp_agent.connect(capabilities=URL, permission="allow_once") as conn:
        conn.client.elicitation = "accept"
        sid = await new_session(acp_agent, conn)
        for _ in range(2):
            rid, start = await conn.client.send_prompt(sid, acp_agent.config.elicit_url_prompt)
            await wait_prompt_response(conn, rid, start)
        urls = [c for c in conn.client.elicitation_calls if (c.request.params or {}).get("mode") == "url"]
        if not urls:
            not_applicable("the agent sent no URL elicitation (eliciting is optional)")


#: Where an agent keeps a payload as it came (a tool call's raw input and output, extension data):
#: the schema asks an agent that does not understand an action to "preserve the raw payload when
#: storing, replaying, proxying, or forwarding" it, so the marker there is no sign it was used.
RAW_CARRIERS = frozenset({"rawInput", "rawOutput", "_meta"})


def _text_of(ev: Event) -> str:
    """What an event carried, as JSON text (params of requests and notifications, results, errors),
    without the raw payloads it may forward (``RAW_CARRIERS``)."""
    payload = {k: _authored(getattr(ev, k, None)) for k in ("params", "result", "error")}
    return jsonrpc.dumps(payload).decode("utf-8", "replace")


def _authored(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _authored(v) for k, v in value.items() if k not in RAW_CARRIERS}
    if isinstance(value, list):
        return [_authored(v) for v in value]
    return value
