"""Which fields a spec-defined object declares, walked from the schema.

Custom data belongs under ``_meta`` (extensibility.mdx: "MUST NOT add any custom fields at
the root of a type that's part of the specification"), so a field the applicable schema does
not declare is a finding.  The walk follows ``$ref``, ``allOf`` and the ``anyOf`` / ``oneOf``
branches the instance satisfies; a discriminator (``type``) whose value no variant has is an
unknown variant, not an undeclared field; and draft names an official revision once defined and
withdrew (``clauses/withdrawn.toml``) are told apart from names in no revision at all.
"""

from __future__ import annotations

import functools
import re
import tomllib
from dataclasses import dataclass
from importlib import resources
from typing import Any

__all__ = ["Withdrawn", "at_pointer", "undeclared_fields", "withdrawn_field", "withdrawn_fields"]

Json = dict[str, Any]

# ------------------------------------------------------- custom root fields
_DIALECT = "https://json-schema.org/draft/2020-12/schema"


class _Schema:
    """Just enough of the schema to know which fields a spec-defined object declares."""

    def __init__(self, defs: dict[str, Any]) -> None:
        from acp_conformance.schema.validator import SchemaValidator

        self.defs = defs
        self._valid: dict[int, Any] = {}
        self._document = SchemaValidator({"$schema": _DIALECT, "$defs": defs})

    def target(self, ref: str) -> Any:
        return self.defs.get(ref.rsplit("/", 1)[-1], {})

    def matches(self, node: Json, instance: Any) -> bool:
        v = self._valid.get(id(node))
        if v is None:
            v = self._valid[id(node)] = self._document.compile_node(node)
        return bool(v.is_valid(instance))

    def applicable(self, node: Any, instance: Any, depth: int = 0) -> list[Json]:
        """``node`` and every subschema that applies to ``instance`` at the same place:
        ``$ref`` targets, ``allOf`` members, the ``anyOf``/``oneOf`` branches it satisfies."""
        if not isinstance(node, dict) or depth > 32:
            return []
        out = [node]
        if isinstance(node.get("$ref"), str):
            out += self.applicable(self.target(node["$ref"]), instance, depth + 1)
        for sub in node.get("allOf") or []:
            out += self.applicable(sub, instance, depth + 1)
        for key in ("anyOf", "oneOf"):
            for sub in node.get(key) or []:
                if isinstance(sub, dict) and self.matches(sub, instance):
                    out += self.applicable(sub, instance, depth + 1)
        return out

    def variant_keys(self, node: Any, depth: int = 0) -> set[str]:
        """Keys that some variant of ``node`` (any ``anyOf``/``oneOf`` branch, matched or not)
        fixes with a ``const``: discriminators such as ``type``."""
        if not isinstance(node, dict) or depth > 8:
            return set()
        out: set[str] = set()
        if isinstance(node.get("$ref"), str):
            out |= self.variant_keys(self.target(node["$ref"]), depth + 1)
        for sub in node.get("allOf") or []:
            out |= self.variant_keys(sub, depth + 1)
        for key in ("anyOf", "oneOf"):
            for sub in node.get(key) or []:
                if isinstance(sub, dict):
                    props = sub.get("properties")
                    if isinstance(props, dict):
                        out |= {k for k, v in props.items() if isinstance(v, dict) and "const" in v}
                    out |= self.variant_keys(sub, depth + 1)
        return out

    def walk(self, node: Any, instance: Any, path: str, out: list[str], unknown: list[str] | None = None) -> None:
        nodes = self.applicable(node, instance)
        if isinstance(instance, dict):
            declared: dict[str, list[Any]] = {}
            closed = False
            discriminators = self.variant_keys(node)
            for n in nodes:
                if isinstance(n.get("properties"), dict):
                    closed = True
                    for key, sub in n["properties"].items():
                        declared.setdefault(key, []).append(sub)
            if any(
                n.get(k) not in (None, False) for n in nodes for k in ("additionalProperties", "unevaluatedProperties")
            ):
                closed = False
            for key, value in instance.items():
                if key == "_meta":
                    continue  # free-form by definition
                if key not in declared:
                    if key in discriminators:
                        # A discriminator with a value no variant has: an unknown variant, not a field.
                        if unknown is not None:
                            unknown.append(f"{path}/{key}")
                    elif closed:
                        out.append(f"{path}/{key}")
                    continue
                for sub in declared[key]:
                    self.walk(sub, value, f"{path}/{key}", out, unknown)
        elif isinstance(instance, list):
            for n in nodes:
                if isinstance(n.get("items"), dict):
                    for i, value in enumerate(instance):
                        self.walk(n["items"], value, f"{path}/{i}", out, unknown)


_SCHEMAS: dict[int, _Schema] = {}


def undeclared_fields(
    defs: dict[str, Any], name: str, instance: Any, unknown_variants: list[str] | None = None
) -> list[str]:
    """JSON pointers of fields in ``instance`` that ``$defs[name]`` (as it applies to
    this instance) does not declare, ``_meta`` aside: custom fields at the root
    of a spec-defined type.  Objects whose schema admits extra fields are skipped.
    A discriminator (``type``) whose value no variant has is not an undeclared field: its
    pointer goes to ``unknown_variants`` when given."""
    schema = _SCHEMAS.get(id(defs))
    if schema is None or schema.defs is not defs:
        schema = _SCHEMAS[id(defs)] = _Schema(defs)
    out: list[str] = []
    schema.walk({"$ref": f"#/$defs/{name}"}, instance, "", out, unknown_variants)
    return list(dict.fromkeys(out))


@dataclass(frozen=True)
class Withdrawn:
    """A draft name an official schema revision defined and later withdrew (``withdrawn.toml``)."""

    definitions: tuple[str, ...]
    pointer: re.Pattern[str]
    revision: str
    replacement: str
    when: tuple[str, Any] | None = None

    def matches(self, name: str, ptr: str, instance: Any) -> bool:
        if name not in self.definitions or not self.pointer.search(ptr):
            return False
        if self.when is None:
            return True
        holder = at_pointer(instance, ptr.rsplit("/", 1)[0])
        return isinstance(holder, dict) and holder.get(self.when[0]) == self.when[1]


@functools.cache
def withdrawn_fields() -> tuple[Withdrawn, ...]:
    """The withdrawn draft names (``acp_conformance/clauses/withdrawn.toml``)."""
    text = resources.files("acp_conformance.clauses").joinpath("withdrawn.toml").read_text("utf-8")
    out = []
    for raw in tomllib.loads(text).get("withdrawn", []):
        when = raw.get("when")
        out.append(
            Withdrawn(
                tuple(raw["definitions"]),
                re.compile(raw["pointer"]),
                raw["revision"],
                raw.get("replacement", ""),
                (when["field"], when["value"]) if isinstance(when, dict) else None,
            )
        )
    return tuple(out)


def withdrawn_field(name: str, ptr: str, instance: Any) -> Withdrawn | None:
    """The withdrawn draft name a field at ``ptr`` of a ``name`` message is, or None."""
    return next((w for w in withdrawn_fields() if w.matches(name, ptr, instance)), None)


def at_pointer(instance: Any, ptr: str) -> Any:
    """The value at the JSON pointer ``ptr`` of ``instance`` (None where the path does not exist)."""
    node = instance
    for part in [p for p in ptr.split("/") if p]:
        if isinstance(node, dict):
            node = node.get(part)
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return None
    return node
