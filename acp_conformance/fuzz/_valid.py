"""Valid material: values, params and messages of the schema, and the ``Frame`` builders for them.

``encode``, ``_frame_from``, ``_valid_pairs`` and ``_valid_messages`` live here (not with
``frames()``) so that the mutations can build on them without importing ``_frames``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import orjson
from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument
from hypothesis.strategies import SearchStrategy

from acp_conformance.core.connection import Role
from acp_conformance.fuzz._compiler import _compiler
from acp_conformance.fuzz._expect import _ANY, _NOTIFY, _OPTIONAL, NO_ID, Expect, Frame
from acp_conformance.fuzz._model import _Model, _model
from acp_conformance.fuzz._options import Kind, Meta, _check_id_strategy, _near, _Opts, _opts, _role
from acp_conformance.fuzz._text import _slug, _text
from acp_conformance.schema.validator import MethodSpec


def from_definition(
    name: str,
    *,
    schema: Mapping[str, Any] | None = None,
    meta: Meta = "sometimes",
    realistic: bool = True,
    unusual: bool = False,
    overrides: Mapping[str, SearchStrategy[Any]] | None = None,
    max_items: int = 3,
) -> SearchStrategy[Any]:
    """Values valid against ``$defs[name]`` of the schema.

    ``meta``: whether objects that allow ``_meta`` carry it (``"always"``:
    every one of them).  ``overrides`` maps names to strategies used
    instead: a ``$defs`` name replaces that definition wherever it is used
    (``{"SessionId": st.just(sid)}`` aims every frame at a live session),
    any other name replaces every object member of that name
    (``{"cwd": st.just(root), "mcpServers": st.just([])}``).  Every draw
    is still checked against the schema, so overrides must yield valid values.
    """
    model = _model(schema)
    if not isinstance(name, str) or name not in model.defs:
        raise InvalidArgument(f"{name!r} is not a definition of the schema{_near(str(name), model.defs)}")
    opts = _opts(model, meta, realistic, unusual, max_items, overrides)
    return _valid_def(model, opts, name)


def _valid_def(model: _Model, opts: _Opts, name: str) -> SearchStrategy[Any]:
    compiler = _compiler(model, opts)
    return compiler.built(("valid", name), lambda: compiler.definition(name).filter(lambda v: model.is_valid(name, v)))


def _spec(model: _Model, method: Any) -> MethodSpec:
    if not isinstance(method, str) or method not in model.methods:
        raise InvalidArgument(
            f"{method!r} is not a method of the schema{_near(str(method), model.methods)}; "
            f"known: {', '.join(sorted(model.methods))}"
        )
    return model.methods[method]


def params(
    method: str,
    *,
    schema: Mapping[str, Any] | None = None,
    meta: Meta = "sometimes",
    realistic: bool = True,
    unusual: bool = False,
    overrides: Mapping[str, SearchStrategy[Any]] | None = None,
    max_items: int = 3,
) -> SearchStrategy[dict[str, Any]]:
    """Valid ``params`` of a request or notification ``method``."""
    model = _model(schema)
    spec = _spec(model, method)
    name = spec.request or spec.notification
    if name is None:
        raise InvalidArgument(f"{method} has no params definition")
    return _valid_def(model, _opts(model, meta, realistic, unusual, max_items, overrides), name)


def request_ids(*, unusual: bool = False) -> SearchStrategy[Any]:
    """JSON-RPC request ids: integers and strings (``unusual``: 0, negatives,
    the interoperable integer extremes ±(2**53 - 1), ``""``, numeric-looking, unicode and
    64 KiB strings, null)."""
    if not isinstance(unusual, bool):
        raise InvalidArgument(f"unusual must be a bool, not {unusual!r}")
    return _ids(unusual, null=unusual)


#: The largest integer every JSON implementation reads exactly (2**53 - 1; RFC 8259 § 6 and
#: I-JSON, RFC 7493, call larger ones non-interoperable). The schema's int64 ids allow more,
#: but an agent written in JavaScript cannot echo 2**53 + 1 exactly: that is the platform, not
#: a breach we would be right to fail, so ids stay in this range.
_SAFE_INT = 2**53 - 1


def _ids(unusual: bool, *, null: bool = False) -> SearchStrategy[Any]:
    base: SearchStrategy[Any] = st.integers(1, 2**31 - 1) | _slug("req-") | st.uuids().map(str)
    if not unusual:
        return base
    return st.one_of(
        st.sampled_from([0, -1, -_SAFE_INT, _SAFE_INT, "", "0", "1", "-0", " 1", "null"]),
        st.none() if null else st.nothing(),
        st.integers(-_SAFE_INT, _SAFE_INT),
        _text(True, True, max_size=40),
        st.integers(1024, 65536).map(lambda n: ("id-" + "\u05d0x" * n)[:n]),
        base,
    )


def _notification_of(model: _Model, opts: _Opts, method: str) -> SearchStrategy[dict[str, Any]]:
    def wrap(p: Any) -> dict[str, Any]:
        return {"jsonrpc": "2.0", "method": method, "params": p}

    return _valid_def(model, opts, model.methods[method].notification or "").map(wrap)


def _request_of(model: _Model, opts: _Opts, method: str, ids: SearchStrategy[Any]) -> SearchStrategy[dict[str, Any]]:
    def wrap(rid: Any, p: Any) -> dict[str, Any]:
        return {"jsonrpc": "2.0", "id": rid, "method": method, "params": p}

    return st.builds(wrap, ids, _valid_def(model, opts, model.methods[method].request or ""))


def _result_of(model: _Model, opts: _Opts, method: str, ids: SearchStrategy[Any]) -> SearchStrategy[dict[str, Any]]:
    def wrap(rid: Any, r: Any) -> dict[str, Any]:
        return {"jsonrpc": "2.0", "id": rid, "result": r}

    return st.builds(wrap, ids, _valid_def(model, opts, model.methods[method].response or ""))


def _role_methods(model: _Model, sender: Role | None, kind: Kind) -> list[str]:
    """Methods with a frame of ``kind`` that ``sender`` may send."""
    out = []
    for m, s in sorted(model.methods.items()):
        if kind in ("request", "notification"):
            if (kind == "request" and s.request is None) or (kind == "notification" and s.notification is None):
                continue
            if sender is None or s.receiver is None or s.receiver is sender.other:
                out.append(m)
        elif kind == "result":
            if s.response is None:
                continue
            if sender is None or s.receiver is None or s.receiver is sender:
                out.append(m)
    return out


def _method_choice(model: _Model, method: Any, sender: Role | None, kind: Kind) -> list[str]:
    if method is None:
        found = _role_methods(model, sender, kind)
        if not found:
            raise InvalidArgument(f"the schema has no {kind} a {sender.value if sender else 'peer'} sends")
        return found
    spec = _spec(model, method)
    if method not in _role_methods(model, sender, kind):
        who = f"the {sender.value}" if sender else "either side"
        raise InvalidArgument(
            f"{method} has no {kind} that {who} sends (receiver: {spec.receiver.value if spec.receiver else 'either'})"
        )
    return [method]


def requests(
    method: str | None = None,
    *,
    sender: Role | str | None = None,
    id: SearchStrategy[Any] | None = None,
    schema: Mapping[str, Any] | None = None,
    meta: Meta = "sometimes",
    realistic: bool = True,
    unusual: bool = False,
    overrides: Mapping[str, SearchStrategy[Any]] | None = None,
    max_items: int = 3,
) -> SearchStrategy[dict[str, Any]]:
    """Valid request messages (``method``, or any request ``sender`` may send)."""
    model = _model(schema)
    role = _role(sender)
    ids = _check_id_strategy(id) or _ids(unusual)
    methods = _method_choice(model, method, role, "request")
    opts = _opts(model, meta, realistic, unusual, max_items, overrides)
    return st.sampled_from(methods).flatmap(lambda m: _request_of(model, opts, m, ids))


def notifications(
    method: str | None = None,
    *,
    sender: Role | str | None = None,
    schema: Mapping[str, Any] | None = None,
    meta: Meta = "sometimes",
    realistic: bool = True,
    unusual: bool = False,
    overrides: Mapping[str, SearchStrategy[Any]] | None = None,
    max_items: int = 3,
) -> SearchStrategy[dict[str, Any]]:
    """Valid notification messages (``method``, or any notification ``sender`` may send)."""
    model = _model(schema)
    role = _role(sender)
    methods = _method_choice(model, method, role, "notification")
    opts = _opts(model, meta, realistic, unusual, max_items, overrides)
    return st.sampled_from(methods).flatmap(lambda m: _notification_of(model, opts, m))


def results(
    method: str | None = None,
    *,
    sender: Role | str | None = None,
    id: SearchStrategy[Any] | None = None,
    schema: Mapping[str, Any] | None = None,
    meta: Meta = "sometimes",
    realistic: bool = True,
    unusual: bool = False,
    overrides: Mapping[str, SearchStrategy[Any]] | None = None,
    max_items: int = 3,
) -> SearchStrategy[dict[str, Any]]:
    """Valid success responses to ``method`` (``sender`` is the side answering)."""
    model = _model(schema)
    role = _role(sender)
    ids = _check_id_strategy(id) or _ids(unusual)
    methods = _method_choice(model, method, role, "result")
    opts = _opts(model, meta, realistic, unusual, max_items, overrides)
    return st.sampled_from(methods).flatmap(lambda m: _result_of(model, opts, m, ids))


def errors(
    *,
    id: SearchStrategy[Any] | None = None,
    schema: Mapping[str, Any] | None = None,
    realistic: bool = True,
    unusual: bool = False,
) -> SearchStrategy[dict[str, Any]]:
    """Valid error responses (the schema's ``Error``)."""
    model = _model(schema)
    if "Error" not in model.defs:
        raise InvalidArgument("the schema defines no Error")
    ids = _check_id_strategy(id) or (_ids(unusual) | st.none())
    opts = _opts(model, "sometimes", realistic, unusual, 3, None)
    return st.builds(lambda rid, e: {"jsonrpc": "2.0", "id": rid, "error": e}, ids, _valid_def(model, opts, "Error"))


# ==================================================================== frames
def encode(message: Any) -> bytes:
    """Serialize one message as a frame (compact JSON + ``\\n``).

    Lone surrogates and integers beyond 64 bits are written as the
    standard library does (``\\ud800`` escapes, plain digits) where orjson
    refuses them."""
    try:
        return orjson.dumps(message) + b"\n"
    except (orjson.JSONEncodeError, TypeError):
        return json.dumps(message, ensure_ascii=True, separators=(",", ":"), allow_nan=False).encode() + b"\n"


def _frame_from(
    model: _Model,
    msg: dict[str, Any],
    sender: Role | None,
    *,
    mutation: str = "",
    definition: str = "",
) -> Frame:
    """A ``Frame`` for a valid message."""
    if "method" in msg:
        kind = "request" if "id" in msg else "notification"
        expect = Expect("required") if kind == "request" else _NOTIFY
        if kind == "request" and msg["id"] is None:
            expect = _ANY
    else:
        kind = "result" if "result" in msg else "error"
        expect = _OPTIONAL
    return Frame(
        data=encode(msg),
        message=msg,
        kind=kind,
        method=msg.get("method"),
        id=msg["id"] if "id" in msg else NO_ID,
        sender=sender,
        valid=True,
        mutation=mutation,
        definition=definition,
        expect=expect,
    )


def _valid_pairs(
    model: _Model, role: Role | None, kinds: Sequence[Kind], method: str | None, opts: _Opts
) -> SearchStrategy[tuple[str, dict[str, Any]]]:
    """Valid messages with the definition their payload was drawn from (built once per compiler)."""
    return _compiler(model, opts).built(
        ("pairs", role, tuple(kinds), method), lambda: _build_pairs(model, role, kinds, method, opts)
    )


def _build_pairs(
    model: _Model, role: Role | None, kinds: Sequence[Kind], method: str | None, opts: _Opts
) -> SearchStrategy[tuple[str, dict[str, Any]]]:
    ids = _ids(opts.unusual)
    parts: list[SearchStrategy[tuple[str, dict[str, Any]]]] = []
    for kind in kinds:
        if kind == "error":
            if method is None:
                errs = st.builds(
                    lambda rid, e: {"jsonrpc": "2.0", "id": rid, "error": e},
                    ids | st.none(),
                    _valid_def(model, opts, "Error"),
                )
                parts.append(errs.map(_tagger("Error")))
            continue
        try:
            methods = _method_choice(model, method, role, kind)
        except InvalidArgument:
            if method is None:
                raise
            continue
        for m in methods:
            spec = model.methods[m]
            if kind == "request":
                parts.append(_request_of(model, opts, m, ids).map(_tagger(spec.request or "")))
            elif kind == "notification":
                parts.append(_notification_of(model, opts, m).map(_tagger(spec.notification or "")))
            else:
                parts.append(_result_of(model, opts, m, ids).map(_tagger(spec.response or "")))
    if not parts:
        raise InvalidArgument(f"no {'/'.join(kinds)} frame exists for method {method!r} and this sender")
    return st.one_of(*parts)


def _tagger(name: str) -> Callable[[dict[str, Any]], tuple[str, dict[str, Any]]]:
    return lambda msg: (name, msg)


def _valid_messages(
    model: _Model, role: Role | None, kinds: Sequence[Kind], method: str | None, opts: _Opts
) -> SearchStrategy[dict[str, Any]]:
    return _compiler(model, opts).built(
        ("messages", role, tuple(kinds), method),
        lambda: _valid_pairs(model, role, kinds, method, opts).map(lambda pair: pair[1]),
    )
