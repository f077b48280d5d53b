"""What the schema says about one received frame, as a pure function.

``judge_frame`` applies the per-frame schema rules (the definition the
method and direction select, the method map, who may send what) to one
decoded message and returns the violations, without any I/O: the ``Peer``
records them on its transcript, and the recording proxy, which sees frames
it does not serve, calls the same function (one rulebook, two callers).
"""

from __future__ import annotations

from types import ModuleType
from typing import TYPE_CHECKING

from acp_conformance.core.connection import Role
from acp_conformance.core.events import Notification, Request, Response, Violation

if TYPE_CHECKING:
    from acp_conformance.schema.validator import SchemaValidator

__all__ = ["judge_frame"]

#: ``acp_conformance.schema.validator``, once the first frame is judged: it loads jsonschema_rs,
#: which the mocks' start-up does without.  Not an import in ``judge_frame``: a ``from ... import``
#: statement costs 1-2 us each time it runs, a tenth of a received frame's whole path.
_SCHEMA: ModuleType | None = None


def _schema_module() -> ModuleType:
    global _SCHEMA
    from acp_conformance.schema import validator

    _SCHEMA = validator
    return validator


#: A method neither in the pinned schema nor ``_``-prefixed (extensibility.mdx).


def judge_frame(
    validator: SchemaValidator | None, receiver: Role, ev: Request | Notification | Response
) -> list[Violation]:
    """The schema violations of ``ev``, a frame received by ``receiver`` (the side judging it).

    Responses are checked against the result definition of the method they answer (or the
    error object); requests and notifications against their params definition, after the
    method map: an unknown method that is not ``_``-prefixed, or one the other side handles,
    is a violation in itself.  ``_`` extension methods are free-form.  No validator: nothing.
    """
    if validator is None:
        return []
    sv = _SCHEMA or _schema_module()
    if isinstance(ev, Response):
        out: list[tuple[str, str]] = []
        if ev.is_error:
            out += [
                (sv.error_clause_for(i), f"error object: {i.message} at {i.path or '/'}")
                for i in validator.check_error(ev.error)
            ]
        elif ev.method is not None:
            out += [
                (sv.clause_for(i, ev.result), f"{ev.method} result: {i.message} at {i.path or '/'}")
                for i in validator.check_result(ev.method, ev.result)
            ]
        return _violations(out, ev) if out else []
    method = ev.method
    if method.startswith("_"):
        return []
    spec = validator.spec(method)
    if spec is None and method in sv.V2_ONLY_METHODS:
        what = f"{method!r} is a method of ACP v2 only, sent on a connection that agreed on protocol version 1"
        return _violations([(sv.VERSION_AGREE_CLAUSE, what)], ev)
    if spec is None:
        return _violations(
            [
                (
                    "ext.method.underscore",
                    f"{method!r} is not an ACP method of the pinned schema and does not start with '_'",
                )
            ],
            ev,
        )
    if spec.receiver is not None and spec.receiver is not receiver:
        sender = receiver.other.value
        return _violations([("schema.valid", f"{method} is handled by the {sender}; a {sender} must not send it")], ev)
    params = ev.params if ev.has_params else {}
    if isinstance(ev, Request):
        if spec.request is None:
            what = f"{method} is a notification but arrived as a request (with an id)"
            return _violations([("schema.valid", what)], ev)
        issues = validator.validate(spec.request, params)
    else:
        if spec.notification is None:
            return _violations([("schema.valid", f"{method} is a request but arrived as a notification (no id)")], ev)
        issues = validator.validate(spec.notification, params)
    if not issues:  # nearly every frame
        return []
    return _violations(
        [(sv.clause_for(i, params), f"{method} params: {i.message} at {i.path or '/'}") for i in issues], ev
    )


def _violations(found: list[tuple[str, str]], ev: Request | Notification | Response) -> list[Violation]:
    return [Violation(clause, message, "error", ev.raw[:200], ev.index) for clause, message in found]
