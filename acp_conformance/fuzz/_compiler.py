"""The compiler: a JSON Schema 2020-12 subset, over one schema's ``$defs``, to Hypothesis strategies."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from hypothesis import strategies as st
from hypothesis.strategies import SearchStrategy

from acp_conformance.fuzz._json import _json, _meta_objects
from acp_conformance.fuzz._model import _constraints, _Model
from acp_conformance.fuzz._options import _Opts
from acp_conformance.fuzz._text import _strings_for, _text

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
        #: Strategies built on top of the definitions (``built``), by what they are.
        self._built: dict[tuple[Any, ...], SearchStrategy[Any]] = {}
        self._variants: dict[int, list[_Spec]] = {}

    # ------------------------------------------------------------ entry points
    def built(self, key: tuple[Any, ...], make: Callable[[], SearchStrategy[Any]]) -> SearchStrategy[Any]:
        """The strategy ``key`` names, made once (``make``) and the same object ever after: a mutation
        draws its base message from one per example, and Hypothesis validates a strategy built anew
        on its first draw (most of a draw's time, in profiles, when it was built per draw)."""
        s = self._built.get(key)
        if s is None:
            s = self._built[key] = make()
        return s

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
