"""Templates and partial matching: the little languages inside scenario values.

Templates: ``{{ expr }}`` inside any string.  ``expr`` is a name (a var, a
capture, a builtin such as ``sandbox``) followed by ``.key`` / ``[index]``
steps, or ``fake.<provider>`` (Faker, seeded).  A string that is exactly one
template keeps the value's JSON type (``id: "{{perm.id}}"`` stays an
integer); otherwise the values are interpolated as text.

Patterns (what ``params`` / ``result`` / ``error`` / ``matches`` hold):

* a mapping matches a mapping that has (at least) those keys, each matching;
* a list matches a list of the same length, element by element;
* a scalar matches an equal JSON value of the same type (``1`` is not ``"1"``,
  ``true`` is not ``1``);
* matcher strings: ``$any`` (present, anything), ``$absent`` (the key is
  missing), ``$string``, ``$number``, ``$integer``, ``$boolean``, ``$object``,
  ``$array``, ``$null``, ``$nonempty``, ``$capture(name)`` (anything;
  remember it), ``$regex(re)`` (a string ``re.search`` accepts);
* operator mappings with a single ``$`` key: ``{$one_of: [p, ...]}``,
  ``{$not: p}``, ``{$contains: p}`` (an array with an element matching p),
  ``{$all: [p, ...]}``, ``{$exact: value}`` (literal, no matchers);
* ``$$...`` is a literal string starting with ``$``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

__all__ = [
    "MATCHERS",
    "OPERATORS",
    "Mismatch",
    "TemplateError",
    "captures_in",
    "describe",
    "match",
    "pattern_problems",
    "render",
    "template_roots",
]

TEMPLATE = re.compile(r"\{\{([^{}]*)\}\}")
_EXPR = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_]*)((?:\.[A-Za-z_$][A-Za-z0-9_$\-]*|\.\d+|\[\d+\])*)\s*$")
_STEP = re.compile(r"\.([A-Za-z_$][A-Za-z0-9_$\-]*)|\.(\d+)|\[(\d+)\]")
_MATCHER = re.compile(r"^\$([a-z_]+)(?:\((.*)\))?$", re.S)

MATCHERS = (
    "any",
    "absent",
    "string",
    "number",
    "integer",
    "boolean",
    "object",
    "array",
    "null",
    "nonempty",
    "capture",
    "regex",
)
OPERATORS = ("$one_of", "$not", "$contains", "$all", "$exact")

_MISSING: Any = object()


class TemplateError(Exception):
    """A template names something that is not (yet) defined, or is malformed."""


# ---------------------------------------------------------------- templates
def parse_expr(expr: str) -> tuple[str, list[str | int]]:
    """``name.a[0].b`` -> ``("name", ["a", 0, "b"])``; raises ``TemplateError``."""
    m = _EXPR.match(expr)
    if not m:
        raise TemplateError(f"malformed template {{{{{expr}}}}}: use {{{{name}}}} or {{{{name.key[0]}}}}")
    path: list[str | int] = []
    for key, dotted_index, index in _STEP.findall(m.group(2)):
        path.append(key if key else int(dotted_index or index))
    return m.group(1), path


def template_roots(value: Any) -> Iterator[tuple[str, list[str | int]]]:
    """Every ``(root, path)`` referenced by templates inside ``value`` (raises on malformed ones)."""
    if isinstance(value, str):
        for m in TEMPLATE.finditer(value):
            yield parse_expr(m.group(1))
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from template_roots(k)
            yield from template_roots(v)
    elif isinstance(value, list):
        for v in value:
            yield from template_roots(v)


def lookup(root: Any, path: list[str | int], expr: str) -> Any:
    node = root
    for step in path:
        if isinstance(step, int) and isinstance(node, list) and 0 <= step < len(node):
            node = node[step]
        elif isinstance(node, dict) and (step in node or str(step) in node):
            node = node[step] if step in node else node[str(step)]
        else:
            raise TemplateError(f"{{{{{expr}}}}}: no {step!r} in {_short(node)}")
    return node


def render(value: Any, resolve: Callable[[str, list[str | int], str], Any]) -> Any:
    """Replace templates in ``value`` (recursively) using ``resolve(root, path, expr)``."""
    if isinstance(value, str):
        if "{{" not in value:
            return value
        whole = TEMPLATE.fullmatch(value)
        if whole:
            root, path = parse_expr(whole.group(1))
            return resolve(root, path, whole.group(1).strip())

        def text(m: re.Match[str]) -> str:
            root, path = parse_expr(m.group(1))
            got = resolve(root, path, m.group(1).strip())
            return got if isinstance(got, str) else _json(got)

        return TEMPLATE.sub(text, value)
    if isinstance(value, dict):
        return {render(k, resolve): render(v, resolve) for k, v in value.items()}
    if isinstance(value, list):
        return [render(v, resolve) for v in value]
    return value


# ------------------------------------------------------------------ patterns
@dataclass(frozen=True)
class Mismatch:
    """Where a value departs from a pattern."""

    path: str
    expected: str
    actual: str

    def __str__(self) -> str:
        return f"at {self.path or '/'}: expected {self.expected}, got {self.actual}"


def match(pattern: Any, value: Any, captured: dict[str, Any], path: str = "") -> Mismatch | None:
    """``None`` when ``value`` matches ``pattern``; captures go into ``captured`` (only on success)."""
    found: dict[str, Any] = {}
    miss = _match(pattern, value, found, path)
    if miss is None:
        captured.update(found)
    return miss


def _match(pattern: Any, value: Any, found: dict[str, Any], path: str) -> Mismatch | None:
    if isinstance(pattern, str):
        if pattern.startswith("$$"):
            return _equal(pattern[1:], value, path)
        m = _MATCHER.match(pattern)
        if m and m.group(1) in MATCHERS:
            return _matcher(m.group(1), m.group(2), value, found, path)
        return _equal(pattern, value, path)
    if isinstance(pattern, dict):
        if len(pattern) == 1 and next(iter(pattern)) in OPERATORS:
            op, arg = next(iter(pattern.items()))
            return _operator(op, arg, value, found, path)
        if value is _MISSING or not isinstance(value, dict):
            return Mismatch(path, "an object", _short(value))
        for key, sub in pattern.items():
            if sub == "$absent":
                if key in value:
                    return Mismatch(f"{path}/{key}", "no such key", _short(value[key]))
                continue
            miss = _match(sub, value.get(key, _MISSING), found, f"{path}/{key}")
            if miss is not None:
                return miss
        return None
    if isinstance(pattern, list):
        if value is _MISSING or not isinstance(value, list):
            return Mismatch(path, f"an array of {len(pattern)}", _short(value))
        if len(value) != len(pattern):
            return Mismatch(path, f"an array of {len(pattern)} element(s)", f"{len(value)} element(s)")
        for i, (sub, item) in enumerate(zip(pattern, value, strict=True)):
            miss = _match(sub, item, found, f"{path}/{i}")
            if miss is not None:
                return miss
        return None
    return _equal(pattern, value, path)


def _equal(expected: Any, value: Any, path: str) -> Mismatch | None:
    if value is _MISSING:
        return Mismatch(path, _short(expected), "nothing (the key is missing)")
    if _same(expected, value):
        return None
    return Mismatch(path, _short(expected), _short(value))


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


_TYPES: dict[str, tuple[str, Callable[[Any], bool]]] = {
    "string": ("a string", lambda v: isinstance(v, str)),
    "number": ("a number", lambda v: isinstance(v, (int, float)) and not isinstance(v, bool)),
    "integer": ("an integer", lambda v: isinstance(v, int) and not isinstance(v, bool)),
    "boolean": ("a boolean", lambda v: isinstance(v, bool)),
    "object": ("an object", lambda v: isinstance(v, dict)),
    "array": ("an array", lambda v: isinstance(v, list)),
    "null": ("null", lambda v: v is None),
    "nonempty": ("a non-empty string, array or object", lambda v: isinstance(v, (str, list, dict)) and len(v) > 0),
}


def _matcher(name: str, arg: str | None, value: Any, found: dict[str, Any], path: str) -> Mismatch | None:
    if name == "absent":
        return None if value is _MISSING else Mismatch(path, "no such key", _short(value))
    if value is _MISSING:
        return Mismatch(path, f"${name}" + (f"({arg})" if arg is not None else ""), "nothing (the key is missing)")
    if name == "any":
        return None
    if name == "capture":
        found[str(arg).strip()] = value
        return None
    if name == "regex":
        if isinstance(value, str) and re.search(str(arg), value):
            return None
        return Mismatch(path, f"a string matching /{arg}/", _short(value))
    what, ok = _TYPES[name]
    return None if ok(value) else Mismatch(path, what, _short(value))


def _operator(op: str, arg: Any, value: Any, found: dict[str, Any], path: str) -> Mismatch | None:
    if op == "$exact":
        return _equal(arg, value, path)
    if op == "$not":
        miss = _match(arg, value, {}, path)
        return Mismatch(path, f"anything but {_short(arg)}", _short(value)) if miss is None else None
    if op == "$one_of":
        for option in arg:
            sub: dict[str, Any] = {}
            if _match(option, value, sub, path) is None:
                found.update(sub)
                return None
        return Mismatch(path, "one of " + ", ".join(_short(o) for o in arg), _short(value))
    if op == "$all":
        for option in arg:
            miss = _match(option, value, found, path)
            if miss is not None:
                return miss
        return None
    if op == "$contains":
        if not isinstance(value, list):
            return Mismatch(path, "an array", _short(value))
        for i, item in enumerate(value):
            sub = {}
            if _match(arg, item, sub, f"{path}/{i}") is None:
                found.update(sub)
                return None
        return Mismatch(path, f"an array containing {_short(arg)}", _short(value))
    raise AssertionError(op)


def pattern_problems(pattern: Any, path: str = "") -> list[str]:
    """Static problems of a pattern (unknown matchers, bad regexes, bad operator arguments)."""
    out: list[str] = []
    if isinstance(pattern, str):
        if pattern.startswith("$$"):
            return out
        m = _MATCHER.match(pattern)
        if m is None:
            return out
        name, arg = m.group(1), m.group(2)
        if name not in MATCHERS:
            close = [x for x in MATCHERS if x.startswith(name[:2])]
            hint = f" (did you mean ${close[0]}?)" if close else ""
            out.append(f"{path or '/'}: unknown matcher {pattern!r}{hint}; write $${pattern[1:]} for a literal")
        elif name == "capture":
            if not arg or not re.fullmatch(r"\s*[A-Za-z_][A-Za-z0-9_]*\s*", arg):
                out.append(f"{path or '/'}: $capture needs a name, e.g. $capture(session_id)")
        elif name == "regex":
            try:
                re.compile(str(arg))
            except re.error as exc:
                out.append(f"{path or '/'}: invalid regular expression in {pattern!r}: {exc}")
        elif arg is not None:
            out.append(f"{path or '/'}: ${name} takes no argument")
    elif isinstance(pattern, dict):
        if len(pattern) == 1 and next(iter(pattern)) in OPERATORS:
            op, arg = next(iter(pattern.items()))
            if op in ("$one_of", "$all") and (not isinstance(arg, list) or not arg):
                out.append(f"{path or '/'}: {op} takes a non-empty list of patterns")
            elif op != "$exact":
                for i, sub in enumerate(arg if isinstance(arg, list) else [arg]):
                    out += pattern_problems(sub, f"{path}/{op}" + (f"/{i}" if isinstance(arg, list) else ""))
            return out
        for key, sub in pattern.items():
            if isinstance(key, str) and key.startswith("$") and key not in OPERATORS:
                out.append(f"{path or '/'}: unknown operator {key!r}; use one of {', '.join(OPERATORS)} alone")
            out += pattern_problems(sub, f"{path}/{key}")
    elif isinstance(pattern, list):
        for i, sub in enumerate(pattern):
            out += pattern_problems(sub, f"{path}/{i}")
    return out


def captures_in(pattern: Any) -> Iterator[str]:
    """Names a pattern captures with ``$capture(name)``."""
    if isinstance(pattern, str):
        m = _MATCHER.match(pattern)
        if m and m.group(1) == "capture" and m.group(2):
            yield m.group(2).strip()
    elif isinstance(pattern, dict):
        for sub in pattern.values():
            yield from captures_in(sub)
    elif isinstance(pattern, list):
        for sub in pattern:
            yield from captures_in(sub)


def describe(pattern: Any, limit: int = 300) -> str:
    """A pattern, compact, for messages."""
    return _short(pattern, limit)


def _json(value: Any) -> str:
    import orjson

    try:
        return orjson.dumps(value).decode()
    except TypeError:
        return repr(value)


def _short(value: Any, limit: int = 160) -> str:
    if value is _MISSING:
        return "nothing"
    text = _json(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
