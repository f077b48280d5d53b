"""Hypothesis strategies for ACP v1 frames, derived from the official schema.

Everything here is built from the pinned ``schema.json`` itself (its
``$defs`` and the ``x-method`` / ``x-side`` annotations), so the generated
frames follow whatever revision ``locate_schema()`` finds; nothing about
message shapes is hard-coded.  Free text is realistic (Faker, in several
scripts, RTL included) unless told otherwise.

Valid material::

    requests("session/prompt")            # {"jsonrpc": "2.0", "id": ..., "method": ..., "params": {...}}
    notifications("session/update")       # agent -> client notifications
    results("session/new")                # {"jsonrpc": "2.0", "id": ..., "result": {...}}
    from_definition("ContentBlock")       # any ``$defs`` entry
    frames(sender="client")               # ``Frame`` objects: bytes, message, and what the receiver owes

Broken material, each ``Frame`` labelled with what a conforming receiver
must do with it (``frame.expect``)::

    invalid_frames(sender="client")       # wrong types, missing fields, unknown enums and methods, bad ids
    frames(sender="client", unusual=True) # valid but odd: _meta everywhere, odd ids, RTL text, 1 MiB strings
    byte_damage()                         # CRLF, BOM, NUL, bad UTF-8, truncation, garbage, 1 MiB lines, split writes
    chunkings(data)                       # the ways one write can arrive in pieces

Options are keyword-only and checked when the strategy is built (a bad
one raises ``hypothesis.errors.InvalidArgument`` at once, not at draw
time).  ``schema=`` takes a parsed schema document; by default the schema
``locate_schema()`` finds is used (``SchemaNotFound`` if there is none).

A receiver judges itself with ``frame.expect.check(answers)``, where
``answers`` are the responses it sent for the frame (``frame.answers(...)``
picks them out of everything it sent): the result is a list of
``Problem`` (clause id, message), empty when the answer was right.
"""

from __future__ import annotations

import base64
import json
import math
import threading
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

import jsonschema_rs
import orjson
from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument
from hypothesis.strategies import DrawFn, SearchStrategy

from acp_conformance.core import jsonrpc
from acp_conformance.core.connection import Role
from acp_conformance.core.ids import same_id
from acp_conformance.schema import locate_schema
from acp_conformance.schema.validator import MethodSpec, SchemaValidator

__all__ = [
    "BYTE_DAMAGE",
    "INVALID_MUTATIONS",
    "UNUSUAL_MUTATIONS",
    "Expect",
    "Frame",
    "Problem",
    "byte_damage",
    "chunkings",
    "encode",
    "errors",
    "evenly",
    "every_split",
    "frames",
    "from_definition",
    "invalid_frames",
    "json_values",
    "notifications",
    "params",
    "request_ids",
    "requests",
    "results",
    "text",
]

Meta = Literal["never", "sometimes", "always"]
Answer = Literal["required", "forbidden", "optional"]
Kind = Literal["request", "notification", "result", "error"]

KINDS: tuple[Kind, ...] = ("request", "notification", "result", "error")
MIB = 1024 * 1024

#: Mutations whose result is (as a rule) not a valid ACP message.
INVALID_MUTATIONS: frozenset[str] = frozenset(
    {
        "missing-required",  # a required params member removed (top level or nested)
        "wrong-type",  # a params member given a JSON type its schema does not allow
        "params-not-object",  # params an array, string, number, boolean or null
        "unknown-enum",  # a discriminator / enum member given a value the schema does not list
        "unknown-method",  # a method name that is neither in the schema nor an extension
        "invalid-id",  # id a float, boolean, array, object or beyond int64
        "duplicate-id",  # two requests with one id, back to back
        "envelope",  # jsonrpc missing or not "2.0", extra envelope members, method + result
        "not-a-request",  # JSON that is no JSON-RPC message: {}, scalars, batches, no method
        "stray-response",  # a response to a request the receiver never sent
        "deep-nesting",  # nesting deeper than parsers promise to handle (> 500 levels)
        "surrogates",  # lone UTF-16 surrogates (escaped), which RFC 8259 leaves unpredictable
    }
)
#: Mutations whose result is still valid, only unusual.
UNUSUAL_MUTATIONS: frozenset[str] = frozenset(
    {
        "meta-everywhere",  # _meta on every object that allows it
        "odd-id",  # 0, negative, ±(2**53 - 1), "", numeric-looking, unicode, 64 KiB ids, null
        "unicode",  # RTL, zero-width, combining marks, emoji ZWJ sequences, U+2028, escaped NUL
        "huge-string",  # a string of 1 MiB or more
        "huge-array",  # an array of tens of thousands of items
        "nesting",  # nesting of 50..200 levels inside _meta
        "extension",  # an unknown _-prefixed method (valid: extension space)
    }
)
#: Byte-level damage applied to an encoded frame.
BYTE_DAMAGE: frozenset[str] = frozenset(
    {
        "split",  # the frame written in several chunks (valid)
        "crlf",  # terminated by \r\n
        "bom",  # preceded by a UTF-8 byte order mark
        "nul",  # a raw NUL byte inside
        "invalid-utf8",  # an invalid UTF-8 sequence inside
        "truncated",  # cut short (the newline kept)
        "garbage",  # random bytes
        "not-json-text",  # a banner, a log line, an LSP header
        "blank",  # an empty or whitespace-only line
        "huge-line",  # a non-JSON line of 1 MiB or more
    }
)

# Clause ids (acp_conformance/clauses/registry.toml) a receiver's answer is judged on.
C_ANSWERED = "jsonrpc.every-request-answered"
C_NOTIFICATION = "jsonrpc.notification-no-response"
C_PARSE = "jsonrpc.parse-error"
C_INVALID_REQUEST = "jsonrpc.invalid-request"
C_INVALID_PARAMS = "jsonrpc.invalid-params"
C_UNKNOWN_METHOD = "jsonrpc.unknown-method"
C_EXT_UNKNOWN = "ext.request.unknown"
C_META = "ext.meta.everywhere"
C_ID_TYPES = "jsonrpc.id-types"
C_ID_ECHO = "jsonrpc.response-id-echo"

PARSE_ERROR = int(jsonrpc.ErrorCode.PARSE_ERROR)
INVALID_REQUEST = int(jsonrpc.ErrorCode.INVALID_REQUEST)
METHOD_NOT_FOUND = int(jsonrpc.ErrorCode.METHOD_NOT_FOUND)
INVALID_PARAMS = int(jsonrpc.ErrorCode.INVALID_PARAMS)

#: Methods every receiver of that role implements (so -32601 is never right for them).
BASELINE = frozenset({"initialize", "session/new", "session/prompt", "session/request_permission"})


# =============================================================== expectations
@dataclass(frozen=True, slots=True)
class Problem:
    """A receiver's answer (or silence) broke ``clause``."""

    clause: str
    message: str


@dataclass(frozen=True, slots=True)
class Expect:
    """What a conforming receiver does with a frame.

    ``answer``: ``required`` (the frame must be answered), ``forbidden`` (a
    notification: nothing may come back) or ``optional``.  An error answer
    must carry one of ``codes`` (``None``: any code); a result is acceptable
    when ``result_ok``.  ``null_id_ok``: an error with a null id is an
    acceptable answer (the receiver could not be expected to read the id).
    A wrong answer breaks ``clause``, a missing one ``missing_clause``, an
    error that drops a readable id ``id_clause``.
    """

    answer: Answer
    codes: frozenset[int] | None = None
    result_ok: bool = True
    null_id_ok: bool = False
    clause: str = C_ANSWERED
    missing_clause: str = C_ANSWERED
    id_clause: str = C_ID_ECHO

    def check(self, answers: Sequence[Mapping[str, Any]]) -> list[Problem]:
        """Judge the responses the receiver sent for the frame (see ``Frame.answers``)."""
        if self.answer == "forbidden":
            if answers:
                return [Problem(self.clause, f"a notification was answered: {_short(answers[0])}")]
            return []
        if not answers:
            if self.answer == "required":
                return [Problem(self.missing_clause, "no answer")]
            return []
        out: list[Problem] = []
        for a in answers:
            if "error" in a and "result" not in a:
                err = a.get("error")
                code = err.get("code") if isinstance(err, dict) else None
                if a.get("id") is None and not self.null_id_ok:
                    out.append(
                        Problem(self.id_clause, f"error {code!r} ({_msg(err)}) with a null id: the id was readable")
                    )
                elif self.codes is not None and code not in self.codes:
                    want = ", ".join(str(c) for c in sorted(self.codes))
                    out.append(Problem(self.clause, f"error {code!r} ({_msg(err)}), expected {want}"))
            elif "result" in a and not self.result_ok:
                want = ", ".join(str(c) for c in sorted(self.codes or ()))
                out.append(Problem(self.clause, f"a result {_short(a.get('result'))}, expected error {want}"))
        return out


def _msg(err: Any) -> str:
    m = err.get("message") if isinstance(err, dict) else None
    return _clip(m if isinstance(m, str) else repr(m), 80)


def _clip(s: str, n: int) -> str:
    return s if len(s) <= n else s[: n - 3] + "..."


def _short(value: Any, n: int = 120) -> str:
    try:
        s = orjson.dumps(value).decode()
    except (TypeError, orjson.JSONEncodeError):
        s = repr(value)
    return _clip(s, n)


#: ``Frame.id`` of a frame whose id the receiver cannot read (not JSON, or no id).
class _NoId:
    __slots__ = ()

    def __repr__(self) -> str:
        return "NO_ID"


NO_ID: Any = _NoId()


@dataclass(frozen=True)
class Frame:
    """One thing to write to a receiver, and what it owes in return.

    ``data`` is the exact bytes (normally newline-terminated); ``chunks`` how
    to write them (one write by default).  ``message`` is the JSON value
    carried, when there is one Python can hold (``None`` for non-JSON bytes,
    and for nesting too deep to decode).  ``id`` is the request id the
    receiver can read (``NO_ID`` when it cannot).  ``valid``: a conforming
    sender could have sent it (envelope and schema both valid).
    ``mutation`` names what was done to a valid frame (``""``: nothing),
    ``detail`` where and how.
    """

    data: bytes
    message: Any
    kind: str
    method: str | None = None
    id: Any = NO_ID
    sender: Role | None = None
    valid: bool = True
    mutation: str = ""
    detail: str = ""
    expect: Expect = field(default_factory=lambda: Expect("optional"))
    #: The ``$defs`` entry the payload (params, result or error) was drawn from ("" if none).
    definition: str = ""
    chunks: tuple[bytes, ...] = ()

    @property
    def writes(self) -> tuple[bytes, ...]:
        """The writes that deliver ``data``."""
        return self.chunks or (self.data,)

    @property
    def has_id(self) -> bool:
        return self.id is not NO_ID

    @property
    def trackable_id(self) -> bool:
        """The id is a non-null string or integer (what JSON-RPC correlates by)."""
        return self.has_id and self.id is not None and jsonrpc.is_valid_id(self.id)

    def answers(self, responses: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
        """Of the receiver's responses, those that answer this frame: its id, or an error with a null id."""
        out = []
        for r in responses:
            rid = r.get("id")
            if rid is None:
                # An error with a null id answers what could not be read; a null-id result can only
                # (wrongly) answer a frame without a usable id, or a request whose id was null.
                if "error" in r or not self.has_id or self.id is None:
                    out.append(r)
            elif self.has_id and same_id(rid, self.id):
                out.append(r)
        return out

    def describe(self, limit: int = 300) -> str:
        """One line for reports: the mutation and the bytes (clipped)."""
        what = self.mutation or f"valid {self.kind}"
        if self.detail:
            what += f" ({_clip(self.detail, 160)})"
        body = self.data.decode("utf-8", "backslashreplace")
        if len(body) > limit:
            body = body[:limit] + f"... ({len(self.data)} bytes)"
        split = f" in {len(self.chunks)} writes" if len(self.chunks) > 1 else ""
        return f"{what}{split}: {body!r}"


# ============================================================ the schema model
class _Model:
    """One schema document: definitions, methods, fast validators."""

    def __init__(self, schema: Mapping[str, Any]) -> None:
        self.schema = schema
        defs = schema.get("$defs")
        if not isinstance(defs, dict):
            raise InvalidArgument("schema has no $defs: not the ACP schema")
        self.defs: dict[str, Any] = defs
        self.validator = SchemaValidator(dict(schema))
        self.methods: dict[str, MethodSpec] = self.validator.methods
        self._rs: dict[str, Any] = {}
        self._lock = threading.Lock()
        self.property_names: set[str] = set()
        self._collect_properties(defs, 0)

    def _collect_properties(self, node: Any, depth: int) -> None:
        if depth > 40:
            return
        if isinstance(node, dict):
            props = node.get("properties")
            if isinstance(props, dict):
                self.property_names.update(props)
            for v in node.values():
                self._collect_properties(v, depth + 1)
        elif isinstance(node, list):
            for v in node:
                self._collect_properties(v, depth + 1)

    def is_valid(self, name: str, instance: Any) -> bool:
        v = self._rs.get(name)
        if v is None:
            wrapper = {
                "$schema": self.schema.get("$schema", "https://json-schema.org/draft/2020-12/schema"),
                "$ref": f"#/$defs/{name}",
                "$defs": self.defs,
            }
            with self._lock:
                v = self._rs[name] = jsonschema_rs.validator_for(wrapper)
        try:
            return bool(v.is_valid(instance))
        except (ValueError, RecursionError, OverflowError):
            return False

    def resolve(self, node: Any) -> Any:
        """Follow a bare ``$ref`` (or a one-member ``allOf`` wrapper) to its target."""
        seen = 0
        while isinstance(node, dict) and seen < 32:
            seen += 1
            ref = node.get("$ref")
            if isinstance(ref, str) and ref.startswith("#/$defs/"):
                node = self.defs.get(ref[len("#/$defs/") :], {})
                continue
            all_of = node.get("allOf")
            if isinstance(all_of, list) and len(all_of) == 1 and not _constraints(node, ignore=("allOf",)):
                node = all_of[0]
                continue
            break
        return node

    def ref_name(self, node: Any) -> str | None:
        """The $defs name a node is a (wrapped) reference to."""
        for _ in range(8):
            if not isinstance(node, dict):
                return None
            ref = node.get("$ref")
            if isinstance(ref, str) and ref.startswith("#/$defs/"):
                return ref[len("#/$defs/") :]
            all_of = node.get("allOf")
            if isinstance(all_of, list) and len(all_of) == 1 and not _constraints(node, ignore=("allOf",)):
                node = all_of[0]
                continue
            return None
        return None

    def top(self, name: str) -> tuple[dict[str, Any], set[str]]:
        """Top-level properties and required members of an object definition."""
        props: dict[str, Any] = {}
        required: set[str] = set()

        def walk(node: Any, depth: int) -> None:
            node = self.resolve(node)
            if not isinstance(node, dict) or depth > 8:
                return
            for k, v in (node.get("properties") or {}).items():
                props.setdefault(k, v)
            required.update(node.get("required") or ())
            for member in node.get("allOf") or ():
                walk(member, depth + 1)

        walk(self.defs.get(name, {}), 0)
        return props, required

    def accepted_types(self, node: Any, depth: int = 0) -> set[str]:
        """JSON types a subschema accepts (``ALL`` when unconstrained)."""
        node = self.resolve(node)
        if node is True or node == {} or not isinstance(node, dict) or depth > 12:
            return set(_ALL_TYPES)
        if "const" in node:
            return {_json_type(node["const"])}
        if "enum" in node:
            return {_json_type(v) for v in node["enum"]}
        t = node.get("type")
        if isinstance(t, str):
            out = {t}
        elif isinstance(t, list):
            out = set(t)
        else:
            out = set()
            for key in ("anyOf", "oneOf"):
                for b in node.get(key) or ():
                    out |= self.accepted_types(b, depth + 1)
            for b in node.get("allOf") or ():
                sub = self.accepted_types(b, depth + 1)
                out = sub if not out else out & sub
            if not out:
                out = {"object"} if "properties" in node else set(_ALL_TYPES)
        if "number" in out:
            out.add("integer")
        return out


_ALL_TYPES = ("null", "boolean", "integer", "number", "string", "array", "object")
_ANNOTATIONS = ("description", "title", "default", "examples", "$comment", "deprecated", "discriminator")


def _constraints(node: dict[str, Any], ignore: tuple[str, ...] = ()) -> list[str]:
    return [k for k in node if k not in _ANNOTATIONS and not k.startswith("x-") and k not in ignore]


def _json_type(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, int):
        return "integer"
    if isinstance(v, float):
        return "number"
    if isinstance(v, str):
        return "string"
    if isinstance(v, list):
        return "array"
    return "object"


_MODELS: dict[int, _Model] = {}
_DEFAULT: list[_Model] = []
_MODELS_LOCK = threading.Lock()


def _model(schema: Mapping[str, Any] | None) -> _Model:
    if schema is None:
        with _MODELS_LOCK:
            if not _DEFAULT:
                _DEFAULT.append(_Model(locate_schema().data))
            return _DEFAULT[0]
    if not isinstance(schema, Mapping):
        raise InvalidArgument(f"schema must be a parsed schema document (a mapping), not {type(schema).__name__}")
    with _MODELS_LOCK:
        m = _MODELS.get(id(schema))
        if m is None or m.schema is not schema:
            m = _MODELS[id(schema)] = _Model(schema)
        return m


# ================================================================== options
@dataclass(frozen=True)
class _Opts:
    meta: Meta = "sometimes"
    realistic: bool = True
    unusual: bool = False
    max_items: int = 3
    overrides: tuple[tuple[str, SearchStrategy[Any]], ...] = ()


def _opts(
    model: _Model,
    meta: Any,
    realistic: Any,
    unusual: Any,
    max_items: Any,
    overrides: Any,
) -> _Opts:
    if meta not in ("never", "sometimes", "always"):
        raise InvalidArgument(f"meta must be 'never', 'sometimes' or 'always', not {meta!r}")
    for name, value in (("realistic", realistic), ("unusual", unusual)):
        if not isinstance(value, bool):
            raise InvalidArgument(f"{name} must be a bool, not {value!r}")
    if not isinstance(max_items, int) or isinstance(max_items, bool) or max_items < 0:
        raise InvalidArgument(f"max_items must be a non-negative integer, not {max_items!r}")
    items: list[tuple[str, SearchStrategy[Any]]] = []
    if overrides is not None:
        if not isinstance(overrides, Mapping):
            raise InvalidArgument(f"overrides must map $defs names to strategies, not {type(overrides).__name__}")
        for name, strat in overrides.items():
            if name not in model.defs and name not in model.property_names:
                known = set(model.defs) | model.property_names
                raise InvalidArgument(
                    f"overrides: {name!r} is neither a definition nor a property name of the schema{_near(name, known)}"
                )
            if not isinstance(strat, SearchStrategy):
                raise InvalidArgument(f"overrides[{name!r}] must be a strategy (e.g. st.just(value)), not {strat!r}")
            items.append((name, strat))
    return _Opts(meta, realistic, unusual, max_items, tuple(sorted(items, key=lambda kv: kv[0])))


def _near(name: str, known: Collection[str]) -> str:
    import difflib

    close = difflib.get_close_matches(name, list(known), n=3)
    return f"; did you mean {', '.join(close)}?" if close else ""


def _role(sender: Any) -> Role | None:
    if sender is None or isinstance(sender, Role):
        return sender
    if sender in ("agent", "client"):
        return Role(sender)
    raise InvalidArgument(f"sender must be 'agent', 'client', a Role or None, not {sender!r}")


def _check_id_strategy(id: Any) -> SearchStrategy[Any] | None:
    if id is None or isinstance(id, SearchStrategy):
        return id
    raise InvalidArgument(f"id must be a strategy of request ids (e.g. st.just(7)), not {id!r}")


# ===================================================================== text
_LOCALES = ("en_US", "ja_JP", "ar_AA", "he_IL", "ru_RU", "zh_CN", "de_DE", "el_GR", "ko_KR", "fr_FR")
_FAKERS = threading.local()


def _faker(seed: int) -> Any:
    """A Faker of a locale picked by ``seed``, seeded with it (deterministic per seed)."""
    cache = getattr(_FAKERS, "cache", None)
    if cache is None:
        cache = _FAKERS.cache = {}
    locale = _LOCALES[seed % len(_LOCALES)]
    fake = cache.get(locale)
    if fake is None:
        from faker import Faker

        fake = cache[locale] = Faker(locale)
    fake.seed_instance(seed)
    return fake


def _fake(fn: Callable[[Any], str], *, english: bool = False) -> SearchStrategy[str]:
    """Realistic text from Faker, reproducible from a Hypothesis-drawn seed."""
    seeds = st.integers(0, 2**31 - 1)
    if english:
        seeds = seeds.map(lambda s: s - s % len(_LOCALES))  # en_US is locale 0
    return seeds.map(lambda s: fn(_faker(s)))


#: Strings that break naive text handling: bidi controls, zero-width and
#: combining characters, ZWJ emoji, line separators, escapes, injection bait.
EDGE_STRINGS: tuple[str, ...] = (
    "",
    " ",
    "\u202eevil.txt\u202c",  # RTL override
    "\u200f\u05e9\u05dc\u05d5\u05dd \u05e2\u05d5\u05dc\u05dd\u200f",  # RLM + Hebrew
    "مرحبا بالعالم",
    "a\u200bb\u200cc\u200dd\u2060e\ufeff",  # zero-width family
    "e\u0301\u0302\u0303\u0304\u0305\u0306\u0307\u0308",  # stacked combining marks
    "Z\u0351\u036b\u0343\u036a\u0302\u036b\u033d\u034f\u0334\u0319\u0324\u031e\u0349\u035a\u032f\u031e\u0320\u034d",
    "👩\u200d👩\u200d👧\u200d👦",  # ZWJ sequence
    "\U0001d573\U0001d58a\U0001d591\U0001d591\U0001d594 🏳️\u200d🌈",  # mathematical letters, flag ZWJ
    "line\u2028separator\u2029paragraph",
    "tab\tcr\rlf\nnul\x00esc\x1b[31mred\x1b[0m",
    "\x7f\x80\x9f",
    "\ufffe\uffff\U0010ffff",
    '"}\n{"jsonrpc":"2.0","id":1,"method":"session/cancel"}',
    "\\u0000\\\\\\",
    "../../../../etc/passwd",
    "%s%n%x{0}${jndi:ldap://x}",
    "I\u0307stanbul İı ß ﬃ",  # case mapping traps
    "\U0001f600" * 8,
)
SURROGATES: tuple[str, ...] = ("\ud800", "\udfff", "a\ud83dz", "\udc00\ud800")


def text(
    *,
    realistic: bool = True,
    unusual: bool = False,
    surrogates: bool = False,
    max_size: int = 200,
) -> SearchStrategy[str]:
    """Free text: realistic sentences (Faker, several scripts incl. RTL),
    ``unusual`` adds edge cases (bidi, zero-width, combining, ZWJ, U+2028,
    control characters), ``surrogates`` adds lone surrogates (not
    encodable as UTF-8; ``encode`` escapes them)."""
    for name, value in (("realistic", realistic), ("unusual", unusual), ("surrogates", surrogates)):
        if not isinstance(value, bool):
            raise InvalidArgument(f"{name} must be a bool, not {value!r}")
    if not isinstance(max_size, int) or isinstance(max_size, bool) or max_size < 1:
        raise InvalidArgument(f"max_size must be a positive integer, not {max_size!r}")
    return _text(realistic, unusual, surrogates, max_size)


def _text(realistic: bool, unusual: bool, surrogates: bool = False, max_size: int = 200) -> SearchStrategy[str]:
    parts: list[SearchStrategy[str]] = []
    if realistic:
        parts.append(_fake(lambda f: f.sentence(nb_words=8)).map(lambda s: s[:max_size]))
    parts.append(st.text(max_size=min(max_size, 40)))
    if unusual:
        edge = st.sampled_from(EDGE_STRINGS)
        if surrogates:
            edge = edge | st.sampled_from(SURROGATES)
        pieces = edge | _fake(lambda f: f.word()) if realistic else edge
        parts.append(st.lists(pieces, min_size=1, max_size=4).map(lambda xs: "".join(xs)[: max_size * 4]))
        if surrogates:
            parts.append(st.text(st.characters(categories=["Cs", "Lo", "Mn", "Cf"]), max_size=min(max_size, 20)))
    return st.one_of(*parts)


def _slug(prefix: str) -> SearchStrategy[str]:
    return st.builds(
        lambda n, tail: f"{prefix}{n:03d}{tail}",
        st.integers(0, 999),
        st.text("abcdef0123456789", min_size=0, max_size=8),
    )


def _abs_paths(realistic: bool, unusual: bool) -> SearchStrategy[str]:
    parts: list[SearchStrategy[str]] = []
    if realistic:
        parts.append(_fake(lambda f: f.file_path(depth=3, absolute=True)))
        parts.append(_fake(lambda f: f"/home/{f.user_name()}/src/{f.word()}", english=True))
    parts.append(
        st.lists(st.text(st.characters(exclude_characters="/\x00"), min_size=1, max_size=8), max_size=4).map(
            lambda xs: "/" + "/".join(xs)
        )
    )
    if unusual:
        parts.append(st.sampled_from(["/", "//", "/tmp/../etc", "/a b/c\u202ed", "/" + "x" * 4096, "/😀/\u200b"]))
    return st.one_of(*parts)


def _b64(max_bytes: int = 48) -> SearchStrategy[str]:
    return st.binary(max_size=max_bytes).map(lambda b: base64.b64encode(b).decode())


_MIME = ("text/plain", "image/png", "image/jpeg", "audio/wav", "audio/mpeg", "application/json", "text/x-python")


def _strings_for(hint: str | None, opts: _Opts) -> SearchStrategy[str]:
    """Realistic strings for a property or definition name."""
    r, u = opts.realistic, opts.unusual
    free = _text(r, u)
    if hint is None or not r:
        return free
    ids = {
        "SessionId": "sess_",
        "ToolCallId": "call_",
        "TerminalId": "term_",
        "MessageId": "msg_",
        "PermissionOptionId": "opt_",
        "SessionModeId": "mode_",
        "SessionConfigId": "cfg_",
        "SessionConfigValueId": "val_",
        "SessionConfigGroupId": "grp_",
        "AuthMethodId": "auth_",
        "ElicitationId": "elic_",
        "CompactionId": "cmp_",
        "id": "id_",
        "optionId": "opt_",
        "modeId": "mode_",
        "methodId": "auth_",
        "configId": "cfg_",
        "requestId": "req_",
        "terminalId": "term_",
    }
    if hint in ids:
        base = _slug(ids[hint]) | st.uuids().map(str)
        return base | _text(False, True, max_size=20) if u else base
    if hint in ("cwd", "path", "additionalDirectories", "root"):
        return _abs_paths(r, u)
    if hint in ("uri", "url"):
        uris = _fake(lambda f: f.uri()) | _abs_paths(r, False).map(lambda p: "file://" + p)
        return uris | free if u else uris
    if hint == "mimeType":
        return st.sampled_from(_MIME) | _fake(lambda f: f.mime_type())
    if hint in ("data", "blob"):
        return _b64()
    if hint in ("updatedAt", "lastModified", "createdAt"):
        return _fake(lambda f: f.iso8601() + "Z")
    if hint == "version":
        return st.builds(lambda a, b, c: f"{a}.{b}.{c}", st.integers(0, 9), st.integers(0, 30), st.integers(0, 99))
    if hint == "currency":
        return st.sampled_from(["USD", "EUR", "JPY", "credits"])
    if hint == "command":
        return st.sampled_from(["npx", "uvx", "python3", "/usr/local/bin/mcp-server", "node"]) | _abs_paths(r, u)
    if hint in ("name", "title", "hint"):
        return _fake(lambda f: f.catch_phrase() if f.locale == "en_US" else f.word()) | free
    if hint in ("text", "content", "newText", "oldText", "output", "message", "description", "summary"):
        return _fake(lambda f: f.paragraph(nb_sentences=3)) | free
    if hint in ("signal",):
        return st.sampled_from(["SIGTERM", "SIGKILL", "SIGINT"])
    if hint in ("traceparent",):
        return st.builds(lambda a, b: f"00-{a:032x}-{b:016x}-01", st.integers(1, 2**128 - 1), st.integers(1, 2**64 - 1))
    return free


# =============================================================== JSON values
def json_values(*, max_leaves: int = 10, unusual: bool = False) -> SearchStrategy[Any]:
    """Arbitrary JSON values (what ``_meta`` members, ``rawInput`` and ``data`` may hold)."""
    if not isinstance(max_leaves, int) or isinstance(max_leaves, bool) or max_leaves < 1:
        raise InvalidArgument(f"max_leaves must be a positive integer, not {max_leaves!r}")
    if not isinstance(unusual, bool):
        raise InvalidArgument(f"unusual must be a bool, not {unusual!r}")
    return _json(max_leaves, unusual)


def _json(max_leaves: int = 10, unusual: bool = False, realistic: bool = True) -> SearchStrategy[Any]:
    ints = st.integers(-(2**63), 2**63 - 1)
    if unusual:
        ints = ints | st.sampled_from([0, -1, 2**53 + 1, -(2**63), 2**64 - 1])
    scalars = (
        st.none()
        | st.booleans()
        | ints
        | st.floats(allow_nan=False, allow_infinity=False)
        | _text(realistic, unusual, max_size=60)
    )
    keys = _text(False, unusual, max_size=12) | st.sampled_from(["id", "type", "_meta", "name", "value"])
    return st.recursive(
        scalars,
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(keys, inner, max_size=4),
        max_leaves=max_leaves,
    )


def _meta_objects(opts: _Opts) -> SearchStrategy[dict[str, Any]]:
    vendor = st.sampled_from(
        ["zed.dev/editor", "acp-conformance.dev/probe", "com.example/trace", "x", "_meta", "\u202ekey", "k\u0301", ""]
    )
    trace = st.fixed_dictionaries(
        {},
        optional={
            "traceparent": _strings_for("traceparent", opts),
            "tracestate": st.just("acp=00f067aa0ba902b7"),
            "baggage": st.just("userId=alice,isProduction=false"),
        },
    )
    extra = st.dictionaries(vendor, _json(6, opts.unusual, opts.realistic), max_size=3)
    return st.tuples(trace, extra).map(lambda pair: {**pair[1], **pair[0]})


# ============================================================ the compiler
_INT_FORMATS = {
    "int8": (-(2**7), 2**7 - 1),
    "int16": (-(2**15), 2**15 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "int64": (-(2**63), 2**63 - 1),
    "uint8": (0, 2**8 - 1),
    "uint16": (0, 2**16 - 1),
    "uint32": (0, 2**32 - 1),
    "uint64": (0, 2**64 - 1),
}


@dataclass
class _Spec:
    """A flattened object schema: every member's subschemas, required set, extras."""

    props: dict[str, list[Any]] = field(default_factory=dict)
    required: set[str] = field(default_factory=set)
    additional: Any = None  # None: not allowed by us (closed in practice); True; or a schema
    forbid: dict[str, set[Any]] = field(default_factory=dict)

    def merge(self, other: _Spec) -> _Spec:
        props = {k: list(v) for k, v in self.props.items()}
        for k, v in other.props.items():
            props.setdefault(k, []).extend(v)
        forbid = {k: set(v) for k, v in self.forbid.items()}
        for k, values in other.forbid.items():
            forbid.setdefault(k, set()).update(values)
        additional = self.additional if other.additional is None else other.additional
        return _Spec(props, self.required | other.required, additional, forbid)


class _Compiler:
    """A JSON Schema 2020-12 subset -> Hypothesis strategies, over one schema's $defs.

    Handled: ``$ref`` (local), ``type`` (single or list), ``properties`` /
    ``required`` / ``additionalProperties``, ``const``, ``enum``, ``allOf``
    (merged), ``oneOf`` / ``anyOf`` (one branch drawn; object-level unions,
    with or without a discriminator, flattened into variants), the
    ``not``-of-tags pattern of catch-all branches, ``items``,
    ``minItems`` / ``maxItems``, ``minimum`` / ``maximum``, ``minLength``
    and the integer ``format``s.  Annotations (``x-*``, descriptions,
    defaults) are ignored.  Whatever the subset misses is caught by the
    final validation filter of ``from_definition``.
    """

    def __init__(self, model: _Model, opts: _Opts) -> None:
        self.model = model
        self.opts = opts
        self.overrides = dict(opts.overrides)
        self._defs: dict[str, SearchStrategy[Any]] = {}
        #: ``definition(name)`` filtered by the schema validator, per name.
        self.valid: dict[str, SearchStrategy[Any]] = {}
        self._variants: dict[int, list[_Spec]] = {}

    # ------------------------------------------------------------ entry points
    def definition(self, name: str) -> SearchStrategy[Any]:
        if name in self.overrides and name in self.model.defs:
            return self.overrides[name]
        s = self._defs.get(name)
        if s is None:
            s = self._defs[name] = st.deferred(lambda: self.node(self.model.defs[name], name))
        return s

    # ------------------------------------------------------------------ nodes
    def node(self, n: Any, hint: str | None = None) -> SearchStrategy[Any]:
        if n is True or n == {} or not isinstance(n, dict):
            return _json(6, self.opts.unusual, self.opts.realistic) if n is not False else st.nothing()
        ref = n.get("$ref")
        if isinstance(ref, str):
            name = ref.rsplit("/", 1)[-1]
            if not _constraints(n, ignore=("$ref",)):
                return self.definition(name)
        if "const" in n:
            return st.just(n["const"])
        if "enum" in n:
            return st.sampled_from(list(n["enum"]))
        all_of = n.get("allOf")
        if isinstance(all_of, list) and len(all_of) == 1 and not _constraints(n, ignore=("allOf",)):
            target = self.model.ref_name(all_of[0])
            return self.node(all_of[0], target or hint)
        if self._objectish(n):
            variants = self.variants(n)
            return st.one_of(*[self.spec(v, hint) for v in variants]) if variants else st.nothing()
        for key in ("oneOf", "anyOf"):
            branches = n.get(key)
            if isinstance(branches, list):
                rest = {k: v for k, v in n.items() if k != key}
                return st.one_of(*[self.node(_overlay(rest, b), hint) for b in branches])
        if isinstance(all_of, list):
            # allOf of non-objects (not used by ACP): the first member, filtered by the rest later.
            return self.node(_overlay({k: v for k, v in n.items() if k != "allOf"}, all_of[0]), hint)
        t = n.get("type")
        if isinstance(t, list):
            return st.one_of(*[self.typed(n, x, hint) for x in t])
        if isinstance(t, str):
            return self.typed(n, t, hint)
        return _json(6, self.opts.unusual, self.opts.realistic)

    def _objectish(self, n: Any, depth: int = 0) -> bool:
        n = self.model.resolve(n)
        if not isinstance(n, dict) or depth > 10:
            return False
        t = n.get("type")
        if t == "object":
            return True
        if t is not None:
            return False
        if "properties" in n or "required" in n:
            return True
        for key in ("oneOf", "anyOf", "allOf"):
            branches = n.get(key)
            if isinstance(branches, list) and branches:
                if all(self._objectish(b, depth + 1) for b in branches):
                    return True
        return False

    def variants(self, n: Any, depth: int = 0) -> list[_Spec]:
        """The object shapes ``n`` allows, one per combination of union branches."""
        n = self.model.resolve(n)
        key = id(n)
        cached = self._variants.get(key)
        if cached is not None:
            return cached
        if not isinstance(n, dict) or depth > 12:
            return [_Spec(additional=True)]
        base = _Spec(
            props={k: [v] for k, v in (n.get("properties") or {}).items()},
            required=set(n.get("required") or ()),
            additional=n.get("additionalProperties"),
            forbid=_forbidden_tags(n.get("not")),
        )
        if base.additional is False:
            base.additional = None
        parts = [base]
        for member in n.get("allOf") or ():
            parts = [p.merge(v) for p in parts for v in self.variants(member, depth + 1)]
        for union in ("oneOf", "anyOf"):
            branches = n.get(union)
            if isinstance(branches, list) and branches:
                options = [v for b in branches for v in self.variants(b, depth + 1)]
                parts = [p.merge(v) for p in parts for v in options]
        self._variants[key] = parts
        return parts

    def spec(self, spec: _Spec, hint: str | None) -> SearchStrategy[dict[str, Any]]:
        required: dict[str, SearchStrategy[Any]] = {}
        optional: dict[str, SearchStrategy[Any]] = {}
        meta = self.opts.meta
        for key, schemas in spec.props.items():
            if key == "_meta":
                if meta == "never":
                    continue
                s: SearchStrategy[Any] = _meta_objects(self.opts)
                if meta == "always":
                    required[key] = s
                else:
                    optional[key] = s | st.none()
                continue
            if key in self.overrides and key not in self.model.defs:
                (required if key in spec.required else optional)[key] = self.overrides[key]
                continue
            s = self.node(_most_specific(schemas), key)
            if key in spec.forbid:
                s = s.filter(_not_in(spec.forbid[key]))
            (required if key in spec.required else optional)[key] = s
        for key in spec.required - set(spec.props):
            required[key] = _strings_for(key, self.opts) | _json(4, self.opts.unusual, self.opts.realistic)
        body: SearchStrategy[dict[str, Any]] = st.fixed_dictionaries(required, optional=optional)
        extra = spec.additional
        if isinstance(extra, dict) and extra:
            values = self.node(extra, hint)
            keys = _strings_for("name", self.opts) if self.opts.realistic else st.text(max_size=12)
            body = st.tuples(body, st.dictionaries(keys, values, max_size=self.opts.max_items)).map(
                lambda pair: {**pair[1], **pair[0]}
            )
        elif extra is True and not spec.props and not spec.required:
            body = st.dictionaries(
                _text(False, self.opts.unusual, max_size=12), _json(4, self.opts.unusual), max_size=self.opts.max_items
            )
        return body

    def typed(self, n: dict[str, Any], t: str, hint: str | None) -> SearchStrategy[Any]:
        u = self.opts.unusual
        if t == "null":
            return st.none()
        if t == "boolean":
            return st.booleans()
        if t == "integer":
            lo, hi = _INT_FORMATS.get(n.get("format", ""), (-(2**63), 2**63 - 1))
            if isinstance(n.get("minimum"), (int, float)):
                lo = max(lo, math.ceil(n["minimum"]))
            if isinstance(n.get("maximum"), (int, float)):
                hi = min(hi, math.floor(n["maximum"]))
            if isinstance(n.get("exclusiveMinimum"), (int, float)):
                lo = max(lo, math.floor(n["exclusiveMinimum"]) + 1)
            if isinstance(n.get("exclusiveMaximum"), (int, float)):
                hi = min(hi, math.ceil(n["exclusiveMaximum"]) - 1)
            small_lo = max(lo, 0) if hi >= 0 else lo
            small = st.integers(small_lo, min(hi, small_lo + 1000))
            full = st.integers(lo, hi)
            return small | full | st.sampled_from([lo, hi]) if u else small | full
        if t == "number":
            floats = st.floats(allow_nan=False, allow_infinity=False)
            if isinstance(n.get("minimum"), (int, float)):
                floats = st.floats(min_value=n["minimum"], allow_nan=False, allow_infinity=False)
            return st.floats(0, 1) | floats if self.opts.realistic else floats
        if t == "string":
            s = _strings_for(hint, self.opts)
            min_len = n.get("minLength")
            if isinstance(min_len, int) and min_len > 0:
                s = s.filter(_at_least(min_len)) | st.text(min_size=min_len, max_size=min_len + 20)
            return s
        if t == "array":
            items = n.get("items", True)
            item = self.node(items, self.model.ref_name(items) or hint)
            min_items = n.get("minItems")
            max_items = n.get("maxItems")
            least: int = min_items if isinstance(min_items, int) else 0
            most: int = max_items if isinstance(max_items, int) else max(least, self.opts.max_items)
            return st.lists(item, min_size=least, max_size=most)
        if t == "object":
            if hint == "_meta" or (n.get("additionalProperties") is True and not n.get("properties")):
                return _meta_objects(self.opts) if hint == "_meta" else self.spec(_Spec(additional=True), hint)
            variants = self.variants(n)
            return st.one_of(*[self.spec(v, hint) for v in variants])
        return _json(6, u, self.opts.realistic)


def _not_in(bad: set[Any]) -> Callable[[Any], bool]:
    return lambda v: v not in bad


def _at_least(n: int) -> Callable[[str], bool]:
    return lambda v: len(v) >= n


def _overlay(rest: dict[str, Any], branch: Any) -> Any:
    """A union branch with the constraints that sit beside the union."""
    if not _constraints(rest):
        return branch
    return {"allOf": [rest, branch]}


def _most_specific(schemas: list[Any]) -> Any:
    for s in schemas:
        if isinstance(s, dict) and "const" in s:
            return s
    for s in schemas:
        if isinstance(s, dict) and "enum" in s:
            return s
    return schemas[0] if len(schemas) == 1 else next((s for s in schemas if s not in (True, {})), schemas[0])


def _forbidden_tags(not_: Any) -> dict[str, set[Any]]:
    """``not: {anyOf: [{properties: {k: {const: v}}, required: [k]}...]}`` -> {k: {v...}}."""
    out: dict[str, set[Any]] = {}
    if not isinstance(not_, dict):
        return out
    for b in not_.get("anyOf") or [not_]:
        if not isinstance(b, dict):
            continue
        for k, v in (b.get("properties") or {}).items():
            if isinstance(v, dict) and "const" in v:
                out.setdefault(k, set()).add(v["const"])
    return out


_COMPILERS: dict[tuple[int, _Opts], _Compiler] = {}


def _compiler(model: _Model, opts: _Opts) -> _Compiler:
    key = (id(model), opts)
    c = _COMPILERS.get(key)
    if c is None:
        c = _Compiler(model, opts)
        if len(_COMPILERS) < 256:
            _COMPILERS[key] = c
    return c


# ======================================================== valid material (dicts)
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
    s = compiler.valid.get(name)
    if s is None:
        s = compiler.valid[name] = compiler.definition(name).filter(lambda v: model.is_valid(name, v))
    return s


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


def _invalid_params_expect(method: str, implemented: Collection[str] | None, not_object: bool = False) -> Expect:
    codes = {INVALID_PARAMS}
    if not _implemented(method, implemented):
        codes.add(METHOD_NOT_FOUND)
    if not_object:
        codes.add(INVALID_REQUEST)
    return Expect("required", frozenset(codes), result_ok=False, clause=C_INVALID_PARAMS)


def _implemented(method: str, implemented: Collection[str] | None) -> bool:
    return method in (implemented if implemented is not None else BASELINE)


_PARSE = Expect(
    "required", frozenset({PARSE_ERROR}), result_ok=False, null_id_ok=True, clause=C_PARSE, missing_clause=C_PARSE
)
_NOT_REQUEST = Expect(
    "required",
    frozenset({INVALID_REQUEST}),
    result_ok=False,
    null_id_ok=True,
    clause=C_INVALID_REQUEST,
    missing_clause=C_INVALID_REQUEST,
)
_NOTIFY = Expect("forbidden", clause=C_NOTIFICATION)
#: A broken notification: silence, or -32600 with a null id; a result (or another error) answers a notification.
_BAD_NOTIFY = Expect("optional", frozenset({INVALID_REQUEST}), result_ok=False, null_id_ok=True, clause=C_NOTIFICATION)
#: A notification the receiver may fail to parse (too deep, lone surrogates): silence, or -32700.
_NOTIFY_OR_PARSE = Expect("optional", frozenset({PARSE_ERROR}), result_ok=False, null_id_ok=True, clause=C_NOTIFICATION)
_ANY = Expect("required", null_id_ok=True)
#: A request the receiver may be unable to parse (too deep, lone surrogates, odd framing): it owes the
#: answer, or -32700 with a null id; silence is judged as a missing parse error.
_ANY_OR_PARSE = Expect("required", null_id_ok=True, missing_clause=C_PARSE)
_OPTIONAL = Expect("optional", null_id_ok=True)


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
    """Valid messages with the definition their payload was drawn from."""
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
    return _valid_pairs(model, role, kinds, method, opts).map(lambda pair: pair[1])


def _kinds(kinds: Any) -> tuple[Kind, ...]:
    if kinds is None:
        return KINDS
    if isinstance(kinds, str) or not isinstance(kinds, Collection):
        raise InvalidArgument(f"kinds must be a collection of {list(KINDS)}, not {kinds!r}")
    bad = [k for k in kinds if k not in KINDS]
    if bad or not kinds:
        raise InvalidArgument(f"kinds must be a non-empty collection of {list(KINDS)}; got {sorted(map(str, kinds))}")
    return tuple(k for k in KINDS if k in kinds)


def _families(mutations: Any, allowed: frozenset[str], what: str) -> tuple[str, ...]:
    if mutations is None:
        return tuple(sorted(allowed))
    if isinstance(mutations, str) or not isinstance(mutations, Collection):
        raise InvalidArgument(f"{what} must be a collection of names, not {mutations!r}")
    bad = sorted(str(m) for m in mutations if m not in allowed)
    if bad or not mutations:
        raise InvalidArgument(f"{what}: unknown or empty {bad or list(mutations)}; choose from {sorted(allowed)}")
    return tuple(sorted(mutations))


def frames(
    *,
    method: str | None = None,
    sender: Role | str | None = None,
    kinds: Collection[str] | None = None,
    valid: bool | None = True,
    schema: Mapping[str, Any] | None = None,
    meta: Meta = "sometimes",
    realistic: bool = True,
    unusual: bool = False,
    overrides: Mapping[str, SearchStrategy[Any]] | None = None,
    max_items: int = 3,
    mutations: Collection[str] | None = None,
    implemented: Collection[str] | None = None,
    huge_bytes: int = MIB,
) -> SearchStrategy[Frame]:
    """``Frame`` objects a ``sender`` might write, for any method of the schema.

    ``valid=True``: valid frames (with ``unusual=True`` also the valid but
    unusual mutations: _meta everywhere, odd ids, edge-case unicode, huge
    strings and arrays, deep-but-sane nesting, extension methods);
    ``valid=False``: invalid ones (targeted mutations of valid frames, see
    ``INVALID_MUTATIONS``); ``None``: both.  ``mutations`` narrows the
    mutation families.  ``implemented``: methods the receiver is known to
    implement (it may answer -32601 for the others; default: the baseline
    ``initialize``, ``session/new``, ``session/prompt``,
    ``session/request_permission``).  ``huge_bytes``: size of the huge
    strings, arrays and lines.
    """
    model = _model(schema)
    role = _role(sender)
    ks = _kinds(kinds)
    if valid not in (True, False, None):
        raise InvalidArgument(f"valid must be True, False or None, not {valid!r}")
    if method is not None:
        _spec(model, method)
    opts = _opts(model, meta, realistic, unusual, max_items, overrides)
    if implemented is not None and (isinstance(implemented, str) or not isinstance(implemented, Collection)):
        raise InvalidArgument(f"implemented must be a collection of method names, not {implemented!r}")
    if not isinstance(huge_bytes, int) or isinstance(huge_bytes, bool) or huge_bytes < 1:
        raise InvalidArgument(f"huge_bytes must be a positive integer, not {huge_bytes!r}")
    if valid is True:
        allowed = UNUSUAL_MUTATIONS if unusual else frozenset()
        fams = _families(mutations, UNUSUAL_MUTATIONS, "mutations") if mutations is not None else tuple(allowed)
    elif valid is False:
        fams = _families(mutations, INVALID_MUTATIONS, "mutations")
    else:
        fams = _families(mutations, INVALID_MUTATIONS | UNUSUAL_MUTATIONS, "mutations")
    pairs = _valid_pairs(model, role, ks, method, opts)
    base = pairs.map(lambda pair: pair[1])
    plain = pairs.map(lambda pair: _frame_from(model, pair[1], role, definition=pair[0]))
    if not fams:
        return plain
    ctx = _MutationContext(model, role, ks, method, opts, implemented, huge_bytes, base)
    mutated = st.sampled_from(fams).flatmap(lambda fam: _mutant(ctx, fam))
    if valid is False:
        return mutated.filter(lambda f: not f.valid)
    # Half plain, half mutated (a bare one_of would weigh each method's branch like all mutations together).
    both = evenly(plain, mutated)
    return both.filter(lambda f: f.valid) if valid is True else both


def evenly(*strategies: SearchStrategy[Any]) -> SearchStrategy[Any]:
    """Draw from one of ``strategies``, each equally likely.

    ``st.one_of`` flattens nested unions, so a strategy that is itself a
    union of many branches (``frames()`` has one per method) would crowd
    out the others; this keeps the weights as given (repeat an argument to
    weigh it more)."""
    if not strategies or not all(isinstance(s, SearchStrategy) for s in strategies):
        raise InvalidArgument(f"evenly() takes one or more strategies, not {strategies!r}")
    chosen = tuple(strategies)
    return st.integers(0, len(chosen) - 1).flatmap(lambda i: chosen[i])


def invalid_frames(
    *,
    method: str | None = None,
    sender: Role | str | None = None,
    kinds: Collection[str] | None = None,
    schema: Mapping[str, Any] | None = None,
    mutations: Collection[str] | None = None,
    implemented: Collection[str] | None = None,
    overrides: Mapping[str, SearchStrategy[Any]] | None = None,
    realistic: bool = True,
    huge_bytes: int = MIB,
) -> SearchStrategy[Frame]:
    """Invalid frames by targeted mutation (``frames(valid=False, ...)``); see ``INVALID_MUTATIONS``."""
    return frames(
        method=method,
        sender=sender,
        kinds=kinds,
        valid=False,
        schema=schema,
        mutations=mutations,
        implemented=implemented,
        overrides=overrides,
        realistic=realistic,
        huge_bytes=huge_bytes,
    )


# ================================================================= mutations
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
        Expect("required", frozenset({METHOD_NOT_FOUND}), result_ok=False, clause=C_UNKNOWN_METHOD)
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
        Expect("required", frozenset({METHOD_NOT_FOUND}), result_ok=True, clause=C_EXT_UNKNOWN)
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
    f = _mk(ctx, msg, "odd-id", f"id = {_clip(repr(msg['id']), 60)}", Expect("required", id_clause=C_ID_TYPES))
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
        new, where = _set(p, path, (sub * (n // len(sub) + 1))[:n]), _path(path)
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


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


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


# =============================================================== byte damage
def chunkings(data: bytes, *, max_chunks: int = 16) -> SearchStrategy[tuple[bytes, ...]]:
    """Ways ``data`` may arrive: a partition into 1..``max_chunks`` non-empty pieces."""
    if not isinstance(data, (bytes, bytearray)):
        raise InvalidArgument(f"data must be bytes, not {type(data).__name__}")
    if not isinstance(max_chunks, int) or isinstance(max_chunks, bool) or max_chunks < 1:
        raise InvalidArgument(f"max_chunks must be a positive integer, not {max_chunks!r}")
    raw = bytes(data)
    if len(raw) <= 1:
        return st.just((raw,) if raw else ())
    cuts = st.lists(st.integers(1, len(raw) - 1), max_size=max_chunks - 1, unique=True).map(sorted)
    return cuts.map(lambda cs: tuple(raw[a:b] for a, b in zip([0, *cs], [*cs, len(raw)], strict=True)))


def every_split(data: bytes) -> Iterator[tuple[bytes, bytes]]:
    """Every split of ``data`` into two writes, at each offset (1 .. len-1)."""
    for i in range(1, len(data)):
        yield data[:i], data[i:]


_BANNERS = (
    b"Starting my-agent v1.2.3 ...",
    b"DEBUG [acp] ready",
    b"Content-Length: 52",
    b"\x1b[32m\xe2\x9c\x93\x1b[0m connected",
    b"Traceback (most recent call last):",
    b"undefined",
    b"NaN",
    b"{'jsonrpc': '2.0'}",
    b'{"jsonrpc":"2.0",',
    b"}{",
)
_INVALID_UTF8 = (b"\xff", b"\xfe\xff", b"\xc3", b"\xc0\xaf", b"\xed\xa0\x80", b"\xf8\x88\x80\x80\x80", b"\x80")


def byte_damage(
    base: SearchStrategy[Frame] | None = None,
    *,
    kinds: Collection[str] | None = None,
    sender: Role | str | None = None,
    schema: Mapping[str, Any] | None = None,
    huge_bytes: int = MIB,
    max_chunks: int = 16,
) -> SearchStrategy[Frame]:
    """Frames damaged at the byte level (see ``BYTE_DAMAGE``), from ``base``
    frames (default: valid requests ``sender`` may send)."""
    fams = _families(kinds, BYTE_DAMAGE, "kinds")
    if base is not None and not isinstance(base, SearchStrategy):
        raise InvalidArgument(f"base must be a strategy of Frame, not {base!r}")
    if not isinstance(huge_bytes, int) or isinstance(huge_bytes, bool) or huge_bytes < 1:
        raise InvalidArgument(f"huge_bytes must be a positive integer, not {huge_bytes!r}")
    if not isinstance(max_chunks, int) or isinstance(max_chunks, bool) or max_chunks < 1:
        raise InvalidArgument(f"max_chunks must be a positive integer, not {max_chunks!r}")
    if base is None:
        base = frames(sender=sender, kinds=("request",), schema=schema)
    b: SearchStrategy[Frame] = base

    @st.composite
    def damaged(draw: DrawFn) -> Frame:
        kind = draw(st.sampled_from(fams))
        return _damage(draw, draw(b), kind, huge_bytes, max_chunks)

    return damaged()


def _parse_expect(frame: Frame) -> Expect:
    """A frame still carrying its message, oddly framed: its own answer, or a parse error."""
    e = frame.expect
    if e.answer == "forbidden":
        return Expect("optional", frozenset({PARSE_ERROR}), result_ok=False, null_id_ok=True, clause=C_PARSE)
    codes = None if e.codes is None else e.codes | {PARSE_ERROR}
    return replace(e, codes=codes, null_id_ok=True, missing_clause=C_PARSE)


def _classify_bytes(data: bytes) -> Expect:
    """The expectation for a line from its bytes alone."""
    line = data.rstrip(b"\n")
    if not line.strip(b" \t\r"):
        return Expect(
            "optional",
            frozenset({PARSE_ERROR, INVALID_REQUEST}),
            result_ok=False,
            null_id_ok=True,
            clause=C_PARSE,
            missing_clause=C_PARSE,
        )
    try:
        value = json.loads(line.decode("utf-8"), parse_constant=_reject_constant)
    except (UnicodeDecodeError, ValueError, RecursionError):
        return _PARSE
    if isinstance(value, dict) and isinstance(value.get("method"), str):
        return _ANY if "id" in value else _NOTIFY
    if isinstance(value, list):
        return _OPTIONAL
    if isinstance(value, dict) and "id" in value and "method" not in value:
        return _OPTIONAL  # response-shaped: answering it would put an error into the sender's id space
    return _NOT_REQUEST


def _damage(draw: DrawFn, frame: Frame, kind: str, huge: int, max_chunks: int) -> Frame:
    data = frame.data if frame.data.endswith(b"\n") else frame.data + b"\n"
    body = data[:-1]
    if kind == "split":
        chunks = draw(chunkings(data, max_chunks=max_chunks))
        return replace(frame, chunks=chunks, mutation=frame.mutation or "split", detail=f"{len(chunks)} writes")
    if kind == "crlf":
        return replace(
            frame,
            data=body + b"\r\n",
            valid=False,
            mutation="crlf",
            detail="\\r\\n terminator",
            expect=_parse_expect(frame),
            chunks=(),
        )
    if kind == "bom":
        return replace(
            frame,
            data=b"\xef\xbb\xbf" + data,
            valid=False,
            mutation="bom",
            detail="UTF-8 BOM first",
            expect=_parse_expect(frame),
            chunks=(),
        )
    if kind in ("nul", "invalid-utf8", "truncated"):
        at = draw(st.integers(0, max(0, len(body) - 1)))
        if kind == "nul":
            new = body[:at] + b"\x00" + body[at:]
            detail = f"raw NUL at byte {at}"
        elif kind == "invalid-utf8":
            seq = draw(st.sampled_from(_INVALID_UTF8))
            new = body[:at] + seq + body[at:]
            detail = f"{seq!r} at byte {at}"
        else:
            new = body[:at]
            detail = f"cut at byte {at} of {len(body)}"
        line = new + b"\n"
        expect = _classify_bytes(line)
        if kind == "invalid-utf8" and expect.codes == frozenset({PARSE_ERROR}):
            # A lenient decoder (both TypeScript SDKs use a non-fatal TextDecoder) turns the bytes
            # into U+FFFD and may then see JSON that is no request (-32600), or even a request it can
            # serve: each is a receiver coping with input a conforming sender never writes.
            expect = replace(expect, codes=frozenset({PARSE_ERROR, INVALID_REQUEST}), result_ok=True)
        return replace(
            frame,
            data=line,
            message=None,
            valid=False,
            mutation=kind,
            detail=detail,
            id=NO_ID,
            expect=expect,
            chunks=(),
            kind="garbage",
            method=None,
        )
    if kind == "garbage":
        raw = draw(st.binary(min_size=1, max_size=200)).replace(b"\n", b" ")
        line = raw + b"\n"
    elif kind == "not-json-text":
        line = draw(st.sampled_from(_BANNERS)) + draw(st.sampled_from([b"\n", b"\r\n"]))
    elif kind == "blank":
        line = draw(st.sampled_from([b"\n", b"   \n", b"\r\n", b"\t\n"]))
    else:  # huge-line
        size = draw(st.integers(huge, 2 * huge))
        unit = draw(st.sampled_from([b"x", b"{", b"[", b'"', b"\xff", b"log line ", b"\\"]))
        line = (unit * (size // len(unit) + 1))[:size] + b"\n"
    detail = f"{len(line)} bytes" if kind == "huge-line" else ""
    return Frame(
        data=line,
        message=None,
        kind="garbage",
        sender=frame.sender,
        valid=False,
        mutation=kind,
        detail=detail,
        expect=_classify_bytes(line),
    )
