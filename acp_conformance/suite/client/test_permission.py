"""session/request_permission and cancellation: valid answers, cancelled when (and only when) cancelling."""

from __future__ import annotations

import pytest

from acp_conformance.core import jsonrpc
from acp_conformance.core.events import Request
from acp_conformance.endpoints.agent import DEFAULT_OPTIONS
from acp_conformance.errors import PeerError, PeerTimeout
from acp_conformance.harness.client import ClientHarness
from acp_conformance.results import Status
from acp_conformance.suite._support import unless_answered_elsewhere
from acp_conformance.suite.client._helpers import first_turn, inconclusive, manual_check, require

pytestmark = pytest.mark.anyio

#: Unusual option ids (not the conventional "allow"/"reject"), so a client that
#: answers from habit instead of from the request is caught.
ODD_OPTIONS = [
    {"optionId": "opt-yes-7f3a", "name": "Yes, run it", "kind": "allow_once"},
    {"optionId": "opt-always-19c2", "name": "Yes, always", "kind": "allow_always"},
    {"optionId": "opt-no-b6e0", "name": "No", "kind": "reject_once"},
]


@pytest.mark.acp_clause(
    "perm.response.shape",
    "perm.response.valid-option",
    "perm.client-baseline",
    "jsonrpc.bidirectional",
    "jsonrpc.result-xor-error",
)
async def test_permission_answer_is_an_offered_option(acp_client: ClientHarness) -> None:
    """While its session/prompt is pending, the client answers the agent's permission request with
    {selected, optionId} naming one of the offered ids (or cancelled if it cancels the turn).

    Also bound to jsonrpc.result-xor-error (judged on the wire): the permission answer is the one
    result-bearing response every client must send, so this is where a response carrying both a
    result and an error shows up in a targeted run."""
    require(acp_client, "prompt")
    async with acp_client.connect() as conn:
        turn = await first_turn(acp_client, conn)
        tcid = await turn.tool_call("Run `make test`", kind="execute")
        answer = await turn.send_permission(tcid, ODD_OPTIONS)
        expected = "an answer to the agent's request while the client's own session/prompt is pending"
        try:
            # Not flagged: the answer may still come once we answer the client's prompt (judged below).
            await turn.wait_permission(answer, flag=False)
        except PeerTimeout:
            # The clock alone proves nothing: an answer that comes only once we answer the client's
            # session/prompt shows it waited for us; one that never comes is
            # jsonrpc.every-request-answered's (this wait's finding).
            window = conn.peer.timeout
            await turn.end()
            await turn.wait_permission(answer)
            acp_client.check(
                "jsonrpc.bidirectional",
                False,
                expected,
                f"no answer within {window:g} s while its session/prompt (id {turn.request.id!r}) was pending; "
                f"{answer.describe()} only once we had answered that prompt: it waited for us",
                stop=False,
            )
        else:
            acp_client.check("jsonrpc.bidirectional", True, expected, answer.describe())
        if answer.kind == "error":
            # An error is no result to judge; no sentence makes a client answer with an outcome
            # rather than an error (cancellation.mdx recommends -32800 for one it cancels itself).
            # -32601 says the client does not implement the method: perm.client-baseline's WARN.
            unimplemented = answer.unimplemented
            why = f"the client answered with an error, no result: {answer.describe()}"
            status = Status.NOT_APPLICABLE if unimplemented else Status.INCONCLUSIVE
            acp_client.record("perm.response.shape", status, why)
            if unimplemented:
                acp_client.record("perm.response.valid-option", Status.NOT_APPLICABLE, why)
        else:
            acp_client.check(
                "perm.response.shape",
                answer.kind in ("selected", "cancelled"),
                "a result {outcome: {outcome: selected, optionId}} or {outcome: {outcome: cancelled}}",
                answer.describe(),
            )
        if answer.kind == "selected":
            acp_client.check(
                "perm.response.valid-option",
                answer.option_id in [o["optionId"] for o in ODD_OPTIONS],
                "the optionId of one of the offered options",
                f"optionId {answer.option_id!r}",
            )
        if not turn.answered:  # nothing of a turn after its answer (prompt.updates.before-response)
            await turn.tool_update(tcid, "completed" if answer.option_kind == "allow_once" else "failed")
        await turn.end("cancelled" if conn.agent.cancelled(turn.session_id) else "end_turn")


@pytest.mark.parametrize("policy", ["allow", "reject"])
@pytest.mark.acp_clause("perm.auto", "perm.response.valid-option")
async def test_permission_policy_is_applied(acp_client: ClientHarness, policy: str) -> None:
    """With the profile's allow / reject setting, the client picks an option of that kind (perm.auto)."""
    require(acp_client, "prompt", f"permission:{policy}")
    async with acp_client.connect(permission=policy) as conn:
        turn = await first_turn(acp_client, conn)
        tcid = await turn.tool_call("Edit a file")
        answer = await turn.request_permission(tcid, DEFAULT_OPTIONS)
        kind = answer.option_kind or ""
        acp_client.check(
            "perm.auto",
            answer.kind == "selected" and kind.startswith(policy),
            f"an option of kind {policy}_* (the client was set to {policy} permission requests)",
            answer.describe(),
        )
        await turn.end()


@pytest.mark.acp_clause(
    "perm.cancelled-on-cancel",
    "perm.late-request-after-cancel",
    "cancel.is-notification",
    "cancel.client-may",
    "jsonrpc.every-request-answered",
)
async def test_cancel_answers_pending_permissions(acp_client: ClientHarness) -> None:
    """Two permission requests pending, then the client cancels the turn: it sends session/cancel (a
    notification) and answers both with cancelled; one sent after the cancel is answered cancelled too."""
    require(acp_client, "prompt", "cancel", "permission:hold")
    async with acp_client.connect(permission="hold") as conn:
        turn = await first_turn(acp_client, conn)
        first = await turn.send_permission(await turn.tool_call("Edit a.txt"))
        second = await turn.send_permission(await turn.tool_call("Edit b.txt"))
        if not await conn.agent.barrier():
            # No answer to an extension request: we cannot know the client read them; let it settle.
            await conn.peer.quiet_for(0.5, lambda e: False)
        answered_early = [a for a in (first, second) if a.request_id not in dict(conn.peer.conn.pending_outgoing)]
        if answered_early:
            inconclusive("the client answered a permission request before it was told to cancel (not held)")
        await conn.cancel()
        cancel = await turn.wait_cancel()
        acp_client.check(
            "cancel.is-notification",
            not isinstance(cancel, Request),
            "session/cancel as a notification (no id)",
            "session/cancel sent as a request",
        )
        acp_client.check(
            "cancel.client-may", True, "the client cancelled a turn with two permission requests pending", ""
        )
        for answer in (first, second):
            await turn.wait_permission(answer)
            acp_client.check(
                "perm.cancelled-on-cancel",
                answer.kind == "cancelled",
                "every pending permission request answered with outcome cancelled after session/cancel",
                answer.describe(),
            )
        late = await turn.request_permission(await turn.tool_call("Edit c.txt"))
        acp_client.check(
            "perm.late-request-after-cancel",
            late.kind == "cancelled",
            "a permission request arriving after session/cancel answered cancelled at once",
            late.describe(),
        )
        await turn.end("cancelled")


@pytest.mark.acp_clause(
    "cancel.is-notification", "cancel.client-may", "perm.late-request-after-cancel", "cancel.client-marks-tools"
)
async def test_cancel_a_running_turn(acp_client: ClientHarness) -> None:
    """The client cancels a turn that is streaming: session/cancel is a notification for that session; a
    permission request sent after it is answered cancelled; the turn ends with stopReason cancelled."""
    require(acp_client, "prompt", "cancel")
    async with acp_client.connect() as conn:
        turn = await first_turn(acp_client, conn)
        await turn.say("Working on it...")
        running = await turn.tool_call("Long refactoring", kind="edit", status="in_progress")
        await conn.agent.barrier()
        await conn.cancel()
        cancel = await turn.wait_cancel()
        acp_client.check(
            "cancel.is-notification",
            not isinstance(cancel, Request),
            "session/cancel as a notification (no id)",
            "session/cancel sent as a request",
        )
        acp_client.check("cancel.client-may", True, "the client can cancel a running turn", "")
        await turn.say("Stopping.")
        late = await turn.request_permission(await turn.tool_call("Edit d.txt"))
        acp_client.check(
            "perm.late-request-after-cancel",
            late.kind == "cancelled",
            "a permission request arriving after session/cancel answered cancelled at once",
            late.describe(),
        )
        await turn.tool_update(running, "in_progress")  # late tool call updates are still accepted
        await turn.end("cancelled")
        await manual_check(
            acp_client,
            "cancel.client-marks-tools",
            "Did the editor show the 'Long refactoring' tool call as cancelled?",
        )


@pytest.mark.acp_clause("cancelreq.must-answer", "error.cancelled")
async def test_cancel_request_for_a_held_permission_request(acp_client: ClientHarness) -> None:
    """We withdraw a permission request the client holds (its user has not answered) with
    ``$/cancel_request``.  Acting on it is optional; a client that does still answers the request
    once: a result, or an error with -32800 (cancellation.mdx).  The hold proves the order: nothing
    but our notification could have ended the request, so an error answer is the cancellation's.
    A client that ignores it answers when its turn is cancelled (then a result is expected,
    perm.cancelled-on-cancel, judged elsewhere)."""
    require(acp_client, "prompt", "cancel", "permission:hold")
    async with acp_client.connect(permission="hold") as conn:
        turn = await first_turn(acp_client, conn)
        held = await turn.send_permission(await turn.tool_call("Edit held.txt"))
        if not await conn.agent.barrier():
            inconclusive("the client did not answer our extension request, so we cannot know it read the permission")
        if held.request_id not in dict(conn.peer.conn.pending_outgoing):
            inconclusive("the client answered the permission request before it was withdrawn (not held)")
        await turn.withdraw(held.request_id)
        await conn.agent.barrier()
        via = "$/cancel_request"
        if held.request_id in dict(conn.peer.conn.pending_outgoing):
            # Not acted on by the time it answered the barrier: end the turn as its user would.
            via = "$/cancel_request, then session/cancel (it did not act on the notification before our barrier)"
            await conn.cancel()
        try:
            # Silence is cancelreq.must-answer's (the clause naming it), not flagged twice.
            resp = await conn.peer.wait_response(held.request_id, method="session/request_permission", flag=False)
        except PeerError as exc:
            unless_answered_elsewhere(exc, own_answer=True)
            expected = f"an answer to the permission request after {via}"
            acp_client.check("cancelreq.must-answer", False, expected, exc.message)
            return
        held.response = resp
        acp_client.check("cancelreq.must-answer", True, f"an answer to the permission request after {via}", "")
        if not resp.is_error:
            acp_client.record(
                "error.cancelled",
                Status.NOT_APPLICABLE,
                f"the client answered the withdrawn permission request with a result after {via}, not an error",
            )
        else:
            code = resp.code
            acp_client.check(
                "error.cancelled",
                code == jsonrpc.ErrorCode.REQUEST_CANCELLED,
                f"error code {jsonrpc.ErrorCode.REQUEST_CANCELLED} (Request Cancelled) for the held permission "
                f"request the client aborted after {via}",
                f"error {resp.error!r}",
            )
        await turn.end("cancelled" if conn.agent.cancelled(turn.session_id) else "end_turn")
