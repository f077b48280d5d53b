"""The schema model: one schema document's definitions, methods and fast validators."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

from hypothesis.errors import InvalidArgument

from acp_conformance.schema import locate_schema
from acp_conformance.schema.validator import MethodSpec, SchemaValidator


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
        # Compiled once, by the validator (two threads racing to the first compile both compile,
        # and either result serves).
        v = self.validator.compiled(name)
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
