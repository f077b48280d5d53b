"""Prompt content the agent accepts (initialization.mdx § Prompt capabilities, content.mdx).

``text`` and ``resource_link`` are the baseline every agent accepts; image,
audio and embedded ``resource`` blocks need promptCapabilities.image /
audio / embeddedContext.  "Accepted" means session/prompt ends with a
result, whatever its stop reason; each probe first runs a plain text turn
on the same session, so an agent that rejects every prompt is not charged
with rejecting a content type.

Sending a block type the agent did *not* declare is a deliberate
robustness probe: a conforming client never does it (content.*.gated), so
the agent is only expected (SHOULD) to reject it with an error.
"""

from __future__ import annotations

from typing import Any

import pytest

from acp_conformance.harness import AgentHarness, Connection
from acp_conformance.results import Status
from acp_conformance.suite._support import inconclusive, new_session
from acp_conformance.suite.agent._helpers import record

pytestmark = pytest.mark.anyio

#: A 1x1 PNG and 1 ms of 8 kHz silence as WAV: tiny, but real files of their type.
PNG_1X1 = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGP4z8AAAAMBAQDJ/pLvAAAAAElFTkSuQmCC"
WAV_SILENCE = "UklGRiwAAABXQVZFZm10IBAAAAABAAEAQB8AAEAfAAABAAgAZGF0YQgAAACAgICAgICAgA=="
CONTEXT_FILE = "acp-context.txt"
CONTEXT_TEXT = "The launch code is 1234.\n"


def context_uri(conn: Connection) -> str:
    """A real file in the session's sandbox, for blocks that reference or embed one."""
    path = conn.sandbox.root / CONTEXT_FILE
    path.write_text(CONTEXT_TEXT, "utf-8")
    return path.as_uri()


def block(kind: str, conn: Connection) -> dict[str, Any]:
    if kind == "image":
        return {"type": "image", "mimeType": "image/png", "data": PNG_1X1}
    if kind == "audio":
        return {"type": "audio", "mimeType": "audio/wav", "data": WAV_SILENCE}
    if kind == "resource":
        resource = {"uri": context_uri(conn), "mimeType": "text/plain", "text": CONTEXT_TEXT}
        return {"type": "resource", "resource": resource}
    return {"type": "resource_link", "uri": context_uri(conn), "name": CONTEXT_FILE, "mimeType": "text/plain"}


#: block type -> the promptCapabilities flag that allows it
GATED = {"image": "image", "audio": "audio", "resource": "embeddedContext"}


async def baseline(acp: AgentHarness, conn: Connection, sid: str) -> None:
    """A plain text turn first: content clauses are judged only against an agent that takes text."""
    turn = await conn.client.prompt(sid, acp.config.prompt)
    assert turn.response is not None
    if turn.response.is_error:
        inconclusive(f"the agent rejects even a plain text prompt ({turn.response.error!r}); see content.text.baseline")


async def probe(acp: AgentHarness, conn: Connection, sid: str, kind: str) -> tuple[bool, str]:
    """Send a text block plus one ``kind`` block: (accepted, what happened)."""
    text = {"type": "text", "text": f"Describe the attached {kind.replace('_', ' ')} in one short sentence."}
    turn = await conn.client.prompt(sid, [text, block(kind, conn)])
    resp = turn.response
    assert resp is not None
    if resp.is_error:
        return False, f"error {resp.error!r}"
    result = resp.result if isinstance(resp.result, dict) else {}
    return True, f"a result (stopReason {result.get('stopReason')!r})"


#: Annotations on a baseline block (schema Annotations: audience roles, priority 0..1, lastModified).
ANNOTATIONS = {"audience": ["user", "assistant"], "priority": 0.5, "lastModified": "2025-01-01T00:00:00Z"}


@pytest.mark.acp_clause("content.resource-link.baseline", "content.annotations")
async def test_resource_link_is_accepted(acp_agent: AgentHarness) -> None:
    """A resource_link is baseline; then text and resource_link blocks carrying annotations, which
    receivers accept (content.mdx: annotations are optional display/routing hints)."""
    async with acp_agent.connect() as conn:
        sid = await new_session(acp_agent, conn)
        await baseline(acp_agent, conn, sid)
        accepted, what = await probe(acp_agent, conn, sid, "resource_link")
        acp_agent.check(
            "content.resource-link.baseline",
            accepted,
            "a prompt with a resource_link block accepted (answered with a result), whatever the capabilities",
            what,
        )
        text = {"type": "text", "text": acp_agent.config.prompt, "annotations": ANNOTATIONS}
        link = {**block("resource_link", conn), "annotations": {"priority": 1.0}}
        turn = await conn.client.prompt(sid, [text, link])
        assert turn.response is not None
        acp_agent.check(
            "content.annotations",
            not turn.response.is_error,
            "a prompt whose text and resource_link blocks carry annotations accepted (answered with a result)",
            f"error {turn.response.error!r}",
        )


@pytest.mark.parametrize("kind", list(GATED))
@pytest.mark.acp_clause("content.gated.agent-accepts", "content.gated.agent-undeclared")
async def test_gated_content_type(acp_agent: AgentHarness, kind: str) -> None:
    """Declared: the block must be accepted.  Not declared: it should be refused with an error."""
    async with acp_agent.connect() as conn:
        sid = await new_session(acp_agent, conn)
        flag = GATED[kind]
        declared = conn.client.agent_supports(f"promptCapabilities.{flag}")
        if declared:
            record(
                acp_agent,
                Status.NOT_APPLICABLE,
                f"the agent declares promptCapabilities.{flag}",
                "content.gated.agent-undeclared",
            )
        else:
            record(
                acp_agent,
                Status.NOT_APPLICABLE,
                f"the agent does not declare promptCapabilities.{flag}",
                "content.gated.agent-accepts",
            )
        await baseline(acp_agent, conn, sid)
        accepted, what = await probe(acp_agent, conn, sid, kind)
        if declared:
            acp_agent.check(
                "content.gated.agent-accepts",
                accepted,
                f"a prompt with a {kind} block accepted: the agent declares promptCapabilities.{flag}",
                what,
            )
        else:
            acp_agent.check(
                "content.gated.agent-undeclared",
                not accepted,
                f"an error for a {kind} block, which the agent did not declare (promptCapabilities.{flag}); "
                "a conforming client never sends one, this is a robustness probe",
                what,
            )
