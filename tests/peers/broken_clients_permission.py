"""Broken clients for session/request_permission and its cancellation.

Merged into ``BREAKAGES`` by ``broken_clients.py`` (run them through it).
"""

from __future__ import annotations

from typing import Any

from acp_conformance.core.events import Request
from acp_conformance.endpoints.client import PermissionCall
from acp_conformance.peer import HandlerError
from mock_client import MockClient
from tests.peers._breakage import Breakage


class PermissionError32601(MockClient):
    async def handle_permission(self, req: Request, default: Any) -> Any:
        raise HandlerError(-32601, "Method not found: session/request_permission")


class PermissionInternalError(MockClient):
    async def handle_permission(self, req: Request, default: Any) -> Any:
        raise HandlerError(-32603, "internal error: no permission UI")


class CancelledWithoutCancel(MockClient):
    async def handle_permission(self, req: Request, default: Any) -> Any:
        if self.endpoint.is_cancelled(self.session_id) or self.options.permission == "hold":
            return await default(req)
        return {"outcome": {"outcome": "cancelled"}}


class MalformedOutcome(MockClient):
    """Answers with an outcome the schema does not know ("approved")."""

    async def handle_permission(self, req: Request, default: Any) -> Any:
        if self.endpoint.is_cancelled(self.session_id) or self.options.permission == "hold":
            return await default(req)
        return {"outcome": {"outcome": "approved"}}


class HardcodedOptionId(MockClient):
    """Answers with the conventional ids whatever was offered."""

    async def handle_permission(self, req: Request, default: Any) -> Any:
        if self.endpoint.is_cancelled(self.session_id) or self.options.permission == "hold":
            return await default(req)
        option = "reject-once" if self.options.permission.startswith("reject") else "allow-once"
        return {"outcome": {"outcome": "selected", "optionId": option}}


class IgnoresPermissionPolicy(MockClient):
    async def handle_permission(self, req: Request, default: Any) -> Any:
        if self.endpoint.is_cancelled(self.session_id) or self.options.permission == "hold":
            return await default(req)
        options = req.params.get("options", []) if isinstance(req.params, dict) else []
        allow = next(o for o in options if str(o.get("kind", "")).startswith("allow"))
        return {"outcome": {"outcome": "selected", "optionId": allow["optionId"]}}


class PendingNotCancelled(MockClient):
    async def answer_pending_permissions(self, session_id: str) -> None:
        for call in self.endpoint.permission_calls:
            if call.session_id == session_id and call.outcome is None:
                options = call.request.params.get("options", []) if isinstance(call.request.params, dict) else []
                reject = next(o for o in options if str(o.get("kind", "")).startswith("reject"))
                await self.endpoint.answer_permission(call, {"outcome": "selected", "optionId": reject["optionId"]})


class LateRequestNotCancelled(MockClient):
    async def handle_permission(self, req: Request, default: Any) -> Any:
        if self.endpoint.is_cancelled(self.session_id):
            options = req.params.get("options", []) if isinstance(req.params, dict) else []
            allow = next(o for o in options if str(o.get("kind", "")).startswith("allow"))
            return {"outcome": {"outcome": "selected", "optionId": allow["optionId"]}}
        return await default(req)


class CancelAsRequest(MockClient):
    async def send_cancel(self, session_id: str) -> None:
        await self.peer.send_request("session/cancel", self.cancel_params(session_id), validate=False)


class CancelledRequestAsInternalError(MockClient):
    """Acts on $/cancel_request for a held permission request, but answers it -32603, not -32800."""

    async def withdraw_permission(self, call: PermissionCall) -> None:
        await self.endpoint.refuse_permission(call, -32603, "internal error: request aborted")


BREAKAGES: dict[str, Breakage[MockClient]] = {
    "malformed-outcome": Breakage(
        MalformedOutcome,
        "perm.response.shape",
        also=frozenset({"perm.auto"}),
        why_also="an unknown outcome is not the policy's option",
    ),
    # -32601: the client does not implement its baseline method (a SHOULD: overview.mdx lists it without
    # a keyword). It was a perm.response.shape MUST FAIL, a clause about a result's shape; the late
    # permission request after a cancel gets the error too.
    "permission-error": Breakage(
        PermissionError32601,
        "perm.client-baseline",
        status="WARN",
        also=frozenset({"perm.auto", "perm.late-request-after-cancel"}),
        why_also="an error is neither the policy's option nor the cancelled outcome",
        quiet=frozenset({"perm.response.shape"}),
    ),
    # Another error (here -32603 to every request) implements the method: only the clauses that ask
    # for an option or the cancelled outcome see it.
    "permission-internal-error": Breakage(
        PermissionInternalError,
        "perm.late-request-after-cancel",
        status="WARN",
        also=frozenset({"perm.auto"}),
        why_also="an error is not the policy's option",
        quiet=frozenset({"perm.response.shape", "perm.client-baseline"}),
    ),
    # cancelled outside a cancelled turn misuses the outcome, but no keyword forbids it (it was a
    # perm.response.shape MUST FAIL).
    "cancelled-without-cancel": Breakage(
        CancelledWithoutCancel, "perm.auto", status="INFO", quiet=frozenset({"perm.response.shape"})
    ),
    "hardcoded-option-id": Breakage(HardcodedOptionId, "perm.response.valid-option", status="WARN"),
    "ignores-permission-policy": Breakage(IgnoresPermissionPolicy, "perm.auto", status="INFO"),
    "pending-not-cancelled": Breakage(
        PendingNotCancelled, "perm.cancelled-on-cancel", scenario="client-cancel-pending-permission"
    ),
    "late-request-not-cancelled": Breakage(
        LateRequestNotCancelled,
        "perm.late-request-after-cancel",
        status="WARN",
        scenario="client-permission-after-cancel",
    ),
    "cancelled-request-as-internal-error": Breakage(CancelledRequestAsInternalError, "error.cancelled"),
    "cancel-as-request": Breakage(
        CancelAsRequest,
        "cancel.is-notification",
        also=frozenset({"schema.valid"}),
        why_also="session/cancel is a notification in the schema",
    ),
}
