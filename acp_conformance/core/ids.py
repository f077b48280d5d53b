"""JSON-RPC request ids: the one definition of "the same id".

Rule 1 (after h11's ``_state.py``): every comparison of two request ids in
this package goes through ``same_id`` or ``id_key``; nothing else decides it
(``tests/test_rules.py`` keeps it that way).  Pairing a response with its
request, spotting a duplicate answer, excusing a fuzzer's odd id, and the
fuzz oracle's "did it echo my id" all ask the same question, so they must
get the same answer.

The rule, from JSON-RPC 2.0 § 5 ("the same value") and RFC 8259:

* JSON types stay apart: ``1`` and ``"1"`` are different ids, and so are
  ``true`` and ``1`` (a boolean is no id at all);
* numbers compare as JSON numbers: ``1`` and ``1.0`` are one value (RFC 8259
  has one number type), and integers compare exactly, however large:
  ``2**53 + 1`` echoed as ``2**53`` is a different value.  A peer that cannot
  hold such an integer (a JavaScript one rounds it to the nearest double) is
  at a limit RFC 8259 § 9 allows an implementation to set: that is a
  robustness finding, judged by the caller that sent such an id, never an
  excuse here;
* ``null`` equals ``null``;
* anything else (an array, an object: invalid ids a fuzzer may send) is
  compared by its JSON text, so it can still be looked up.
"""

from __future__ import annotations

import math
from typing import Any

import orjson

__all__ = ["answerable", "id_key", "other_spelling", "rounded_echo", "same_id"]


def id_key(value: Any) -> tuple[str, Any]:
    """A hashable key: two ids have the same key exactly when ``same_id`` says they are equal."""
    if isinstance(value, bool):
        return ("b", value)
    if isinstance(value, int):
        return ("n", value)
    if isinstance(value, float):
        if math.isfinite(value) and value.is_integer():
            return ("n", int(value))
        return ("n", value)
    if isinstance(value, str):
        return ("s", value)
    if value is None:
        return ("z", None)
    try:
        return ("o", orjson.dumps(value, option=orjson.OPT_SORT_KEYS))
    except TypeError:  # what orjson refuses (a lone surrogate, an integer beyond 64 bits inside)
        return ("o", repr(value))


def same_id(a: Any, b: Any) -> bool:
    """Whether ``a`` and ``b`` are the same JSON-RPC id (see the module docstring)."""
    return id_key(a) == id_key(b)


def rounded_echo(theirs: Any, ours: Any) -> bool:
    """Whether ``theirs`` is our integer id ``ours`` as a parser without 64-bit integers reads it
    (JavaScript's: the nearest IEEE double), and yet not the same id: the peer answered that
    request, under a mangled id.  Never ``same_id`` (the module docstring): a caller waiting for
    an answer to an id it knew was out of such a parser's range may stop waiting, and judges the
    mangled echo as what it is."""
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in (theirs, ours)) or theirs == ours:
        return False
    try:
        return float(theirs) == float(ours)
    except OverflowError:
        return False


def other_spelling(value: Any) -> Any:
    """``value`` in the other JSON type a careless echo gives it (``1`` -> ``"1"``, ``"1"`` -> ``1``),
    or ``None`` when it has none.  Only the canonical spelling: ``"01"``, ``"+1"``, ``"-0"`` are no
    spelling of an integer.  Never ``same_id``: the connection pairs such an echo with its request
    and flags it (``Connection._on_response``), one breach of the echo clause."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str) and value.isascii() and len(value) <= 19 and value.lstrip("-").isdigit():
        number = int(value)
        return number if str(number) == value else None
    return None


def answerable(value: Any) -> bool:
    """Whether a request under this id can be served: JSON-RPC 2.0 ids are strings, numbers or
    null (a fractional number is discouraged, not forbidden).  ACP's schema is narrower (no
    fractions): that is ``jsonrpc.is_valid_id``, what a peer may *send*; this is what a strict
    receiver refuses with -32600 rather than serve."""
    return value is None or isinstance(value, (str, float)) or (isinstance(value, int) and not isinstance(value, bool))
