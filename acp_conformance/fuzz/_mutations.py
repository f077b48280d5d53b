"""The mutation families: targeted changes to valid frames, each labelled with what the receiver owes."""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass, replace
from typing import Any

import orjson
from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument
from hypothesis.strategies import DrawFn, SearchStrategy

from acp_conformance.core import jsonrpc
from acp_conformance.core.connection import Role
from acp_conformance.fuzz._expect import (
    _ANY,
    _ANY_OR_PARSE,
    _BAD_NOTIFY,
    _NOT_REQUEST,
    _NOTIFY,
    _NOTIFY_OR_PARSE,
    _OPTIONAL,
    METHOD_NOT_FOUND,
    NO_ID,
    Expect,
    Frame,
    _clip,
    _invalid_params_expect,
)
from acp_conformance.fuzz._json import _json, _reject_constant
from acp_conformance.fuzz._model import _ALL_TYPES, _json_type, _Model
from acp_conformance.fuzz._options import Kind, _Opts
from acp_conformance.fuzz._text import SURROGATES, _text
from acp_conformance.fuzz._valid import _frame_from, _ids, _valid_messages, _valid_pairs, encode


@dataclass(frozen=True)
class _MutationContext:
    model: _Model
    role: Role | None
    kinds: tuple[Kind, ...]
    method: str | None
    opts: _Opts
    implemented: Collection[str] | None
    huge_bytes: int
    base: SearchStrategy[dict[str, Any]]

    def requests(self) -> SearchStrategy[dict[str, Any]]:
        """Valid requests for this context (mutations mostly target requests)."""
        try:
            return _valid_messages(self.model, self.role, ("request",), self.method, self.opts)
        except InvalidArgument:
            return self.base

    def messages_with_params(self) -> SearchStrategy[dict[str, Any]]:
        kinds = tuple(k for k in self.kinds if k in ("request", "notification")) or ("request",)
        try:
            return _valid_messages(self.model, self.role, kinds, self.method, self.opts)
        except InvalidArgument:
            return self.requests()


def _mutant(ctx: _MutationContext, family: str) -> SearchStrategy[Frame]:
    return st.composite(lambda draw: _MUTATORS[family](draw, ctx))()


def _params_def(model: _Model, msg: dict[str, Any]) -> str | None:
    spec = model.methods.get(msg.get("method", ""))
    if spec is None:
        return None
    return spec.request if "id" in msg else spec.notification


def _judge(ctx: _MutationContext, msg: Any) -> bool:
    """Is ``msg`` a valid message of a conforming sender (envelope and schema)?"""
    if not isinstance(msg, dict):
        return False
    kind, problems = jsonrpc.classify(msg)
    if kind is None or problems:
        return False
    if kind in ("request", "notification"):
        method = msg["method"]
        if method.startswith("_"):
            return True
        name = _params_def(ctx.model, msg)
        if name is None:
            return False
        return ctx.model.is_valid(name, msg.get("params", {}))
    return True  # responses: judged by their request, which this frame does not have


def _mk(
    ctx: _MutationContext,
    msg: Any,
    mutation: str,
    detail: str,
    expect: Expect,
    *,
    data: bytes | None = None,
    valid: bool | None = None,
    message: Any = ...,
) -> Frame:
    is_dict = isinstance(msg, dict)
    has_id = is_dict and "id" in msg
    kind = "garbage"
    if is_dict and isinstance(msg.get("method"), str):
        kind = "request" if "id" in msg else "notification"
    elif is_dict and ("result" in msg or "error" in msg):
        kind = "result" if "result" in msg else "error"
    return Frame(
        definition=(_params_def(ctx.model, msg) or "") if kind in ("request", "notification") else "",
        data=data if data is not None else encode(msg),
        message=msg if message is ... else message,
        kind=kind,
        method=msg.get("method") if is_dict and isinstance(msg.get("method"), str) else None,
        id=msg["id"] if has_id else NO_ID,
        sender=ctx.role,
        valid=_judge(ctx, msg) if valid is None else valid,
        mutation=mutation,
        detail=detail,
        expect=expect,
    )


def _locations(value: Any, path: tuple[Any, ...] = (), depth: int = 0) -> Iterator[tuple[tuple[Any, ...], Any]]:
    yield path, value
    if depth > 12:
        return
    if isinstance(value, dict):
        for k, v in value.items():
            if k != "_meta":
                yield from _locations(v, (*path, k), depth + 1)
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _locations(v, (*path, i), depth + 1)


def _set(value: Any, path: tuple[Any, ...], new: Any) -> Any:
    if not path:
        return new
    head, rest = path[0], path[1:]
    if isinstance(value, dict):
        return {**value, head: _set(value[head], rest, new)}
    out = list(value)
    out[head] = _set(out[head], rest, new)
    return out


def _delete(value: Any, path: tuple[Any, ...]) -> Any:
    head, rest = path[0], path[1:]
    if not rest:
        if isinstance(value, dict):
            return {k: v for k, v in value.items() if k != head}
        return [v for i, v in enumerate(value) if i != head]
    if isinstance(value, dict):
        return {**value, head: _delete(value[head], rest)}
    out = list(value)
    out[head] = _delete(out[head], rest)
    return out


def _path(path: tuple[Any, ...]) -> str:
    return "params" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path)


_WRONG_VALUES: dict[str, Any] = {
    "null": None,
    "boolean": True,
    "integer": 7,
    "number": 1.5,
    "string": "fuzz",
    "array": ["fuzz"],
    "object": {"fuzz": 1},
}


def _wrong_value(draw: DrawFn, accepted: set[str]) -> Any:
    choices = [t for t in _ALL_TYPES if t not in accepted]
    if not choices:
        return None
    return _WRONG_VALUES[draw(st.sampled_from(choices))]


def _draw_params_message(draw: DrawFn, ctx: _MutationContext) -> dict[str, Any]:
    msg = draw(ctx.messages_with_params())
    if not isinstance(msg.get("params"), dict):
        msg = {**msg, "params": {}}
    return msg


def _tolerated(schema: Any, value: Any) -> bool:
    """SDKs default this member instead of rejecting it (``x-deserialize-default-on-*``)."""
    if not isinstance(schema, dict):
        return False
    if schema.get("x-deserialize-default-on-error"):
        return True
    return value is None and bool(schema.get("x-deserialize-default-on-null"))


def _params_expect(ctx: _MutationContext, msg: dict[str, Any], top: bool, not_object: bool = False) -> Expect:
    if "id" not in msg:
        return _NOTIFY
    if top:
        return _invalid_params_expect(msg["method"], ctx.implemented, not_object)
    return _ANY


def _m_missing_required(draw: DrawFn, ctx: _MutationContext) -> Frame:
    msg = _draw_params_message(draw, ctx)
    p = msg["params"]
    _, required = ctx.model.top(_params_def(ctx.model, msg) or "")
    present = sorted(k for k in required if k in p)
    nested = [path for path, v in _locations(p) if path and isinstance(v, dict) and v]
    where = draw(st.sampled_from(["top", "top", "nested", "omit"]))
    if where == "nested" and nested:
        path = draw(st.sampled_from(nested))
        sub: Any = p
        for part in path:
            sub = sub[part]
        key = draw(st.sampled_from(sorted(sub)))
        m = {**msg, "params": _delete(p, (*path, key))}
        return _mk(ctx, m, "missing-required", _path((*path, key)), _params_expect(ctx, msg, top=False))
    if present and where != "omit":
        key = draw(st.sampled_from(present))
        m = {**msg, "params": {k: v for k, v in p.items() if k != key}}
        return _mk(ctx, m, "missing-required", _path((key,)), _params_expect(ctx, msg, top=True))
    m = {k: v for k, v in msg.items() if k != "params"}
    return _mk(ctx, m, "missing-required", "params omitted", _params_expect(ctx, msg, top=bool(required)))


def _m_wrong_type(draw: DrawFn, ctx: _MutationContext) -> Frame:
    msg = _draw_params_message(draw, ctx)
    name = _params_def(ctx.model, msg) or ""
    p = msg["params"]
    props, required = ctx.model.top(name)
    present = sorted(k for k in required if k in p)
    coin = draw(st.booleans())
    if present and coin:
        key = draw(st.sampled_from(present))
        value = _wrong_value(draw, ctx.model.accepted_types(props.get(key, True)))
        m = {**msg, "params": {**p, key: value}}
        top = not _tolerated(props.get(key), value)
        return _mk(ctx, m, "wrong-type", f"{_path((key,))} = {value!r}", _params_expect(ctx, msg, top=top))
    spots = [path for path, _ in _locations(p) if path]
    if not spots:
        value = draw(st.sampled_from([[], "params", 42, True, None]))
        m = {**msg, "params": value}
        return _mk(ctx, m, "wrong-type", f"params = {value!r}", _params_expect(ctx, msg, top=True, not_object=True))
    path = draw(st.sampled_from(spots))
    sub = p
    for part in path:
        sub = sub[part]
    value = _WRONG_VALUES[draw(st.sampled_from([t for t in _ALL_TYPES if t != _json_type(sub)]))]
    m = {**msg, "params": _set(p, path, value)}
    top = len(path) == 1 and path[0] in required and not _tolerated(props.get(path[0]), value)
    return _mk(ctx, m, "wrong-type", f"{_path(path)} = {value!r}", _params_expect(ctx, msg, top=top))


def _m_params_not_object(draw: DrawFn, ctx: _MutationContext) -> Frame:
    msg = _draw_params_message(draw, ctx)
    value = draw(st.sampled_from(["array", "positional", "string", "number", "boolean", "null"]))
    new = {
        "array": [],
        "positional": list(msg["params"].values()),
        "string": json.dumps(msg["params"])[:200],
        "number": 0,
        "boolean": False,
        "null": None,
    }[value]
    m = {**msg, "params": new}
    return _mk(ctx, m, "params-not-object", f"params = {value}", _params_expect(ctx, msg, top=True, not_object=True))


_TAG_KEYS = ("type", "kind", "status", "priority", "outcome", "sessionUpdate", "severity", "action", "mode", "category")


def _m_unknown_enum(draw: DrawFn, ctx: _MutationContext) -> Frame:
    msg = _draw_params_message(draw, ctx)
    p = msg["params"]
    spots = [
        path
        for path, v in _locations(p)
        if path and isinstance(v, str) and (path[-1] in _TAG_KEYS or (len(path) > 1 and path[-2] == "audience"))
    ]
    if not spots:
        return _m_wrong_type(draw, ctx)
    path = draw(st.sampled_from(spots))
    sub: Any = p
    for part in path:
        sub = sub[part]
    value = draw(
        st.sampled_from(
            [sub.upper(), sub + " ", sub.replace("_", ""), "fuzz_unknown_value", "", "\u202e" + sub]
        ).filter(lambda v: v != sub)
    )
    m = {**msg, "params": _set(p, path, value)}
    return _mk(ctx, m, "unknown-enum", f"{_path(path)} = {value!r}", _params_expect(ctx, msg, top=False))


_UNKNOWN_METHODS = (
    "session/acp_fuzz_unknown",
    "session/Prompt",
    "Session/new",
    "session/new ",
    "session//new",
    "initialize\u200b",
    "$/acp_fuzz_unknown",
    "fuzz",
    "",
    "/",
    "\u202esession/new",
    "rpc.discover",
)


def _m_unknown_method(draw: DrawFn, ctx: _MutationContext) -> Frame:
    msg = dict(_draw_params_message(draw, ctx))
    known = set(ctx.model.methods)
    name = draw(
        st.sampled_from(_UNKNOWN_METHODS)
        | _text(ctx.opts.realistic, True, max_size=30).filter(lambda s: not s.startswith("_"))
    )
    if name in known or name.startswith("_"):
        name = "session/acp_fuzz_unknown"
    msg["method"] = name
    expect = (
        Expect("required", frozenset({METHOD_NOT_FOUND}), result_ok=False, clause="jsonrpc.unknown-method")
        if "id" in msg
        else _NOTIFY
    )
    return _mk(ctx, msg, "unknown-method", repr(name), expect)


def _m_extension(draw: DrawFn, ctx: _MutationContext) -> Frame:
    msg = dict(_draw_params_message(draw, ctx))
    suffix = draw(
        st.sampled_from(["acp_fuzz/unknown", "zed.dev/x", "", "_", "a/b/c"]) | _text(False, True, max_size=12)
    )
    msg["method"] = "_" + suffix
    msg["params"] = draw(_json(8, ctx.opts.unusual).map(lambda v: v if isinstance(v, dict) else {"value": v}))
    expect = (
        Expect(
            "required",
            frozenset({METHOD_NOT_FOUND}),
            result_ok=True,
            clause="ext.request.unknown",
            # Silence is extensibility.mdx's MUST for exactly these requests (as Peer._unanswered).
            missing_clause="ext.request.respond",
        )
        if "id" in msg
        else _NOTIFY
    )
    return _mk(ctx, msg, "extension", repr(msg["method"]), expect)


def _m_invalid_id(draw: DrawFn, ctx: _MutationContext) -> Frame:
    msg = dict(draw(ctx.requests()))
    value = draw(
        st.sampled_from(
            [True, False, [], [1], {}, {"id": 1}, 1.5, 1.0, -0.5, 1e300, 2**63, 2**64 - 1, 2**64, -(2**63) - 1, 10**30]
        )
    )
    msg["id"] = value
    if isinstance(value, (bool, list, dict)):
        # Not a JSON-RPC id at all: an Invalid Request (-32600, id null or echoed).
        expect = _NOT_REQUEST
    else:
        # A JSON number JSON-RPC allows, but fractional or beyond the schema's int64: serve it or refuse it.
        expect = _ANY
    return _mk(ctx, msg, "invalid-id", f"id = {value!r}", expect, valid=False)


def _m_odd_id(draw: DrawFn, ctx: _MutationContext) -> Frame:
    msg = dict(draw(ctx.requests()))
    msg["id"] = draw(_ids(True, null=True))
    f = _mk(ctx, msg, "odd-id", f"id = {_clip(repr(msg['id']), 60)}", Expect("required", id_clause="jsonrpc.id-types"))
    if msg["id"] is None:
        # A null request id is discouraged (RequestId: "this specification uses a value of Null
        # for Responses with an unknown id"), and many SDKs read it as a notification: an answer
        # is fine, silence no breach.
        f = replace(f, expect=_OPTIONAL)
    return f


def _m_duplicate_id(draw: DrawFn, ctx: _MutationContext) -> Frame:
    first = draw(ctx.requests())
    second = {**draw(ctx.requests()), "id": first["id"]}
    data = encode(first) + encode(second)
    return _mk(ctx, first, "duplicate-id", f"two requests with id {first['id']!r}", _ANY, data=data, valid=False)


def _m_envelope(draw: DrawFn, ctx: _MutationContext) -> Frame:
    msg = dict(draw(ctx.base))
    how = draw(st.sampled_from(["version", "no-version", "extra-member", "method-and-result", "null-id"]))
    if how == "version":
        msg["jsonrpc"] = draw(st.sampled_from(["1.0", "2", "2.0 ", 2.0, 2, None, "\uff12.\uff10"]))
        detail = f"jsonrpc = {msg['jsonrpc']!r}"
    elif how == "no-version":
        del msg["jsonrpc"]
        detail = "no jsonrpc member"
    elif how == "extra-member":
        msg[draw(st.sampled_from(["extra", "Method", "ID", "meta", "_meta"]))] = draw(_json(3))
        detail = "an unknown envelope member"
    elif how == "method-and-result":
        msg["result"] = {}
        msg.setdefault("method", "session/new")
        msg.setdefault("id", 1)
        msg.pop("error", None)
        detail = "method and result together"
    else:
        msg.pop("result", None)
        msg.pop("error", None)
        msg.setdefault("method", "session/cancel")
        msg.setdefault("params", {})
        msg["id"] = None
        detail = "a request with id null"
    if how in ("method-and-result", "null-id"):
        # Ambiguous by construction: with an id and a result it reads as a response too (never
        # answered); a null id is discouraged and often read as a notification. An answer is
        # fine; silence is no breach.
        expect = _OPTIONAL
    elif "method" in msg and "id" in msg:
        expect = _ANY
    elif "method" in msg:
        # An invalid notification: silence, or -32600 with a null id; anything else answers a notification.
        expect = _BAD_NOTIFY if how != "extra-member" else _NOTIFY
    else:
        expect = _OPTIONAL
    return _mk(ctx, msg, "envelope", detail, expect, valid=False)


def _m_not_a_request(draw: DrawFn, ctx: _MutationContext) -> Frame:
    how = draw(
        st.sampled_from(
            ["empty", "version-only", "id-only", "method-not-string", "scalar", "null", "array", "batch", "params-only"]
        )
    )
    msg: Any
    expect = _NOT_REQUEST
    if how == "empty":
        msg = {}
    elif how == "version-only":
        msg = {"jsonrpc": "2.0"}
    elif how == "id-only":
        msg = {"jsonrpc": "2.0", "id": draw(st.integers(1, 1000))}
        # Response-shaped (an id, no method): it may be a malformed answer to one of the receiver's own
        # requests, so an error under that id would land in the sender's id space. Silence is right.
        expect = _OPTIONAL
    elif how == "method-not-string":
        msg = {"jsonrpc": "2.0", "id": draw(st.integers(1, 1000)), "method": draw(st.sampled_from([5, None, [], {}]))}
    elif how == "scalar":
        msg = draw(st.sampled_from([0, 1, -1.5, "session/new", True, False, ""]))
    elif how == "null":
        msg = None
    elif how == "array":
        msg = draw(st.sampled_from([[], [1, 2], [[]]]))
    elif how == "batch":
        msg = [draw(ctx.requests()) for _ in range(draw(st.integers(1, 3)))]
        expect = _OPTIONAL  # ACP frames no batches; answering per member or with -32600 are both seen
    else:
        msg = {"jsonrpc": "2.0", "params": {}}
    return _mk(ctx, msg, "not-a-request", how, expect, data=encode(msg), valid=False)


def _m_stray_response(draw: DrawFn, ctx: _MutationContext) -> Frame:
    rid = draw(st.sampled_from(["acp-fuzz-never-sent", -424242, 987654321]))
    if draw(st.booleans()):
        msg = {"jsonrpc": "2.0", "id": rid, "result": draw(_json(4))}
    else:
        msg = {"jsonrpc": "2.0", "id": rid, "error": {"code": -32603, "message": "stray"}}
    return _mk(ctx, msg, "stray-response", f"answer to id {rid!r}", _OPTIONAL, valid=False)


def _string_spots(p: Any) -> list[tuple[Any, ...]]:
    return [path for path, v in _locations(p) if path and isinstance(v, str) and path[-1] not in _TAG_KEYS]


def _m_unicode(draw: DrawFn, ctx: _MutationContext, surrogates: bool = False) -> Frame:
    msg = _draw_params_message(draw, ctx)
    p = msg["params"]
    spots = _string_spots(p)
    value = draw(_text(ctx.opts.realistic, True, surrogates=surrogates, max_size=60))
    if surrogates and not any(0xD800 <= ord(c) <= 0xDFFF for c in value):
        value += draw(st.sampled_from(SURROGATES))
    if spots:
        path = draw(st.sampled_from(spots))
        new = _set(p, path, value)
        where = _path(path)
    else:
        new = {**p, "_meta": {"text": value}}
        where = "params._meta.text"
    m = {**msg, "params": new}
    if surrogates:
        expect = _NOTIFY_OR_PARSE if "id" not in msg else _ANY_OR_PARSE
        return _mk(ctx, m, "surrogates", f"{where} = {value!r}", expect, valid=False)
    expect = _NOTIFY if "id" not in msg else Expect("required")
    return _mk(ctx, m, "unicode", f"{where} = {_clip(repr(value), 80)}", expect)


def _m_surrogates(draw: DrawFn, ctx: _MutationContext) -> Frame:
    return _m_unicode(draw, ctx, surrogates=True)


def _huge_text(draw: DrawFn, size: int) -> str:
    """A string of at least ``size`` UTF-8 bytes, repeating a drawn unit."""
    unit = draw(
        st.sampled_from(["a", "lorem ipsum ", "日本語テキスト", "\u202e\u05e9\u05dc\u05d5\u05dd ", "😀", '\\n"', "\t"])
    )
    return unit * (size // len(unit.encode()) + 1)


def _m_huge_string(draw: DrawFn, ctx: _MutationContext) -> Frame:
    msg = _draw_params_message(draw, ctx)
    p = msg["params"]
    size = draw(st.integers(ctx.huge_bytes, 2 * ctx.huge_bytes))
    value = _huge_text(draw, size)
    spots = _string_spots(p)
    if spots:
        path = draw(st.sampled_from(spots))
        new, where = _set(p, path, value), _path(path)
    else:
        new, where = {**p, "_meta": {"blob": value}}, "params._meta.blob"
    m = {**msg, "params": new}
    expect = _NOTIFY if "id" not in msg else Expect("required")
    return _mk(ctx, m, "huge-string", f"{where}: {len(value.encode())} bytes", expect)


def _m_huge_array(draw: DrawFn, ctx: _MutationContext) -> Frame:
    msg = _draw_params_message(draw, ctx)
    p = msg["params"]
    n = draw(st.integers(max(1000, ctx.huge_bytes // 64), max(2000, ctx.huge_bytes // 16)))
    arrays = [path for path, v in _locations(p) if path and isinstance(v, list) and v]
    if arrays:
        path = draw(st.sampled_from(arrays))
        sub: Any = p
        for part in path:
            sub = sub[part]
        # Many items, not many bytes: the array is filled with its smallest item and the count is
        # capped so the frame stays within a few huge_bytes (an array of long paths repeated 65,000
        # times made a 200 MB frame that no peer, and no CI deadline, could be asked to take).
        item = min(sub, key=lambda v: len(json.dumps(v)))
        n = min(n, max(len(sub) + 1, 4 * ctx.huge_bytes // (len(json.dumps(item)) + 1)))
        items = [*sub, *([item] * (n - len(sub)))]
        n = len(items)
        new, where = _set(p, path, items), _path(path)
    else:
        new, where = {**p, "_meta": {"items": list(range(n))}}, "params._meta.items"
    m = {**msg, "params": new}
    expect = _NOTIFY if "id" not in msg else Expect("required")
    return _mk(ctx, m, "huge-array", f"{where}: {n} items", expect)


_DEEP_MARK = "\x00acp-fuzz-deep\x00"


def _deep_bytes(depth: int, kind: str) -> bytes:
    if kind == "array":
        return b"[" * depth + b"]" * depth
    return b'{"a":' * depth + b"{}" + b"}" * depth


def _deep(draw: DrawFn, ctx: _MutationContext, lo: int, hi: int, mutation: str) -> Frame:
    msg = _draw_params_message(draw, ctx)
    depth = draw(st.integers(lo, hi))
    kind = draw(st.sampled_from(["array", "object"]))
    m = {**msg, "params": {**msg["params"], "_meta": {"deep": _DEEP_MARK}}}
    data = encode(m).replace(orjson.dumps(_DEEP_MARK), _deep_bytes(depth, kind))
    detail = f"params._meta.deep: {depth} nested {kind}s"
    if mutation == "nesting":
        decoded = _decode_or_none(data)
        expect = _NOTIFY if "id" not in msg else Expect("required")
        return _mk(ctx, decoded, mutation, detail, expect, data=data)
    expect = _NOTIFY_OR_PARSE if "id" not in msg else _ANY_OR_PARSE
    return _mk(ctx, m, mutation, detail, expect, data=data, valid=False, message=None)


def _decode_or_none(data: bytes) -> Any:
    try:
        return json.loads(data, parse_constant=_reject_constant)
    except (ValueError, RecursionError):
        return None


def _m_nesting(draw: DrawFn, ctx: _MutationContext) -> Frame:
    return _deep(draw, ctx, 50, 200, "nesting")


def _m_deep_nesting(draw: DrawFn, ctx: _MutationContext) -> Frame:
    return _deep(draw, ctx, 600, 5000, "deep-nesting")


def _m_meta_everywhere(draw: DrawFn, ctx: _MutationContext) -> Frame:
    opts = replace(ctx.opts, meta="always")
    kinds = tuple(k for k in ctx.kinds if k in ("request", "notification")) or ("request",)
    try:
        definition, msg = draw(_valid_pairs(ctx.model, ctx.role, kinds, ctx.method, opts))
    except InvalidArgument:
        definition, msg = "", draw(ctx.base)
    f = _frame_from(ctx.model, msg, ctx.role, mutation="meta-everywhere", definition=definition)
    return replace(f, detail="_meta on every object that allows it")


_MUTATORS: dict[str, Callable[[DrawFn, _MutationContext], Frame]] = {
    "missing-required": _m_missing_required,
    "wrong-type": _m_wrong_type,
    "params-not-object": _m_params_not_object,
    "unknown-enum": _m_unknown_enum,
    "unknown-method": _m_unknown_method,
    "invalid-id": _m_invalid_id,
    "duplicate-id": _m_duplicate_id,
    "envelope": _m_envelope,
    "not-a-request": _m_not_a_request,
    "stray-response": _m_stray_response,
    "deep-nesting": _m_deep_nesting,
    "surrogates": _m_surrogates,
    "meta-everywhere": _m_meta_everywhere,
    "odd-id": _m_odd_id,
    "unicode": _m_unicode,
    "huge-string": _m_huge_string,
    "huge-array": _m_huge_array,
    "nesting": _m_nesting,
    "extension": _m_extension,
}
