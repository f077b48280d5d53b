"""``frames()``, ``invalid_frames()`` and ``evenly()``: valid and mutated frames a sender might write."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument
from hypothesis.strategies import SearchStrategy

from acp_conformance.core.connection import Role
from acp_conformance.fuzz._expect import Frame
from acp_conformance.fuzz._model import _model
from acp_conformance.fuzz._mutations import _mutant, _MutationContext
from acp_conformance.fuzz._options import (
    INVALID_MUTATIONS,
    KINDS,
    MIB,
    UNUSUAL_MUTATIONS,
    Kind,
    Meta,
    _opts,
    _role,
)
from acp_conformance.fuzz._valid import _frame_from, _spec, _valid_pairs


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
