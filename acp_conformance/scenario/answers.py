"""How a scenario answers the peer's requests: its ``answers`` policies and its ``answer`` steps.

The engine installs the policies on the ``Peer`` before the first step and removes
them when the run ends; a method set to ``auto`` (or not named) stays with the
handler underneath (the ``ClientEndpoint``, or the reference agent's handlers).
``hold`` / ``never`` leave the request unanswered (an ``answer`` step may answer
it later), a permission policy picks an option, ``result`` / ``error`` answer with
the rendered template (``{{request...}}`` is the request being answered).
``settle`` lets the answers in flight reach the wire before a runner closes.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import orjson

from acp_conformance.core import jsonrpc
from acp_conformance.core.events import Request
from acp_conformance.endpoints.client import PermissionPolicy
from acp_conformance.peer import NO_ANSWER, HandlerError, Peer
from acp_conformance.scenario.model import PERMISSION_POLICIES, AnswerStep, ErrorPolicy, ResultPolicy, Scenario
from acp_conformance.scenario.result import Stop

__all__ = ["Answers", "settle"]

Handler = Callable[[Request], Awaitable[Any]]


class Answers:
    """The answer policies of one run on one peer.

    ``render`` / ``render_with`` expand templates (the second with extra names),
    ``inbound`` is the engine's map of captured peer requests (read when an
    ``answer`` step names one), ``where`` labels a step path for messages.
    """

    def __init__(
        self,
        scenario: Scenario,
        peer: Peer,
        *,
        render: Callable[[Any], Any],
        render_with: Callable[[Any, dict[str, Any]], Any],
        inbound: dict[str, Request],
        where: Callable[[str], str],
    ) -> None:
        self.s = scenario
        self.peer = peer
        self.render = render
        self.render_with = render_with
        self.inbound = inbound
        self.where = where
        self._orig: dict[str, Handler | None] = {}

    def install(self) -> None:
        for method, policy in self.s.answers.items():
            if policy == "auto":
                continue
            self._orig[method] = self.peer.handlers.get(method)
            self.peer.handlers[method] = self._policy_handler(method, policy)

    def uninstall(self) -> None:
        for method, orig in self._orig.items():
            if orig is None:
                self.peer.handlers.pop(method, None)
            else:
                self.peer.handlers[method] = orig

    def _policy_handler(self, method: str, policy: Any) -> Handler:
        async def handler(req: Request) -> Any:
            if policy in ("hold", "never"):
                return NO_ANSWER
            if isinstance(policy, str) and policy in PERMISSION_POLICIES:
                return self._permission(policy, req)
            if isinstance(policy, ResultPolicy):
                return self.render_with(policy.result, {"request": req.message})
            if isinstance(policy, ErrorPolicy):
                err = self.render_with(policy.error.model_dump(), {"request": req.message})
                raise HandlerError(err["code"], err["message"], err.get("data"))
            raise AssertionError(policy)

        return handler

    @staticmethod
    def _permission(policy: str, req: Request) -> Any:
        options = req.params.get("options", []) if isinstance(req.params, dict) else []
        outcome = PermissionPolicy(policy).choose(options)
        return NO_ANSWER if outcome is None else {"outcome": outcome}

    async def answer(self, step: AnswerStep, path: str) -> None:
        """An ``answer`` step: answer a captured request (or an id) now, as the step says."""
        spec = step.answer
        req: Request | None = None
        if spec.request is not None:
            req = self.inbound.get(spec.request)
            if req is None:
                raise Stop("error", f"{self.where(path)}: {spec.request!r} is not a captured request (yet)")
            rid = req.id
        else:
            rid = self.render(spec.id)
        result: Any = None
        error: dict[str, Any] | None = None
        if spec.policy is not None:
            assert req is not None
            if spec.policy == "auto":
                result, error = await self._auto_answer(req)
            else:
                result = self._permission(spec.policy, req)
                if result is NO_ANSWER:
                    return
        elif spec.error is not None:
            error = self.render(spec.error.model_dump(exclude_none=True))
        else:
            result = self.render(spec.result)
        outstanding = any(jsonrpc.id_key(i) == jsonrpc.id_key(rid) for i, _ in self.peer.conn.pending_incoming)
        if spec.again or not outstanding:
            frame: dict[str, Any] = {"jsonrpc": "2.0", "id": rid}
            if error is not None:
                frame["error"] = error
            else:
                frame["result"] = result
            self.peer.transcript.note(f"scenario: deliberately answering id {rid!r} (already answered or unknown)")
            what = "a second response to" if spec.again else "a response to no pending request of its own,"
            await self.peer.send_raw(orjson.dumps(frame) + b"\n", forbidden=f"{what} id {rid!r}")
        elif error is not None:
            await self.peer.respond_error(rid, error["code"], error["message"], error.get("data"))
        else:
            method = req.method if req is not None else None
            await self.peer.respond(rid, result, method=method, validate=spec.validate_)

    async def _auto_answer(self, req: Request) -> tuple[Any, dict[str, Any] | None]:
        handler = self._orig.get(req.method, self.peer.handlers.get(req.method))
        if handler is None:
            return None, {"code": jsonrpc.ErrorCode.METHOD_NOT_FOUND, "message": f"method not found: {req.method}"}
        try:
            return await handler(req), None
        except HandlerError as exc:
            err: dict[str, Any] = {"code": exc.code, "message": exc.message}
            if exc.data is not None:
                err["data"] = exc.data
            return None, err


async def settle(peer: Peer, scenario: Scenario | None = None, timeout: float = 2.0) -> bool:
    """Wait (bounded) until every request the peer sent us has been answered.

    Handlers answer in their own tasks; before closing the connection a runner
    lets them finish, so an answer is never cut off by our own EOF.  Requests
    the scenario holds or never answers are not waited for.
    """
    skip = {m for m, p in (scenario.answers if scenario else {}).items() if p in ("hold", "never")}
    with anyio.move_on_after(timeout):
        while any(method not in skip for _, method in peer.conn.pending_incoming):
            await anyio.sleep(0.005)  # our own handler tasks, not the peer: a bounded poll
        await peer.drain()  # every settled answer is on the wire
        return True
    return False
