"""The options every strategy takes, checked when the strategy is built, and the names they accept."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from hypothesis.errors import InvalidArgument
from hypothesis.strategies import SearchStrategy

from acp_conformance.core.connection import Role
from acp_conformance.fuzz._model import _Model

Meta = Literal["never", "sometimes", "always"]
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
