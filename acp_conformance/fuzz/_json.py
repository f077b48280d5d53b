"""Arbitrary JSON values (``_meta`` members, ``rawInput``, ``data``)."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument
from hypothesis.strategies import SearchStrategy

from acp_conformance.fuzz._options import _Opts
from acp_conformance.fuzz._text import _strings_for, _text


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


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")
