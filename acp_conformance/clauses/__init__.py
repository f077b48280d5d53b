"""The clause registry: every ACP v1 requirement we judge, as data.

One record per requirement (``registry.toml`` beside this file), seeded
from the upstream paraphrased catalog and corrected where the docs or the
schema disagree (``CHANGES.md``).  IDs are the public vocabulary of
reports: an ID never changes meaning.  Tests bind to clauses with
``@pytest.mark.acp_clause("cancel.stop-reason")``; unknown IDs are usage
errors, and a meta-test requires every clause to be bound to a test or to
carry the reason it cannot be observed on the wire.
"""

from __future__ import annotations

import difflib
import fnmatch
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from typing import Any, Literal

from acp_conformance.errors import ConfigurationError

__all__ = ["LEVELS", "Clause", "Registry", "registry"]

Level = Literal["MUST", "MUST NOT", "SHOULD", "SHOULD NOT", "MAY"]
ClauseRole = Literal["agent", "client", "both"]
LEVELS: tuple[str, ...] = ("MUST", "MUST NOT", "SHOULD", "SHOULD NOT", "MAY")
ROLES: tuple[str, ...] = ("agent", "client", "both")


@dataclass(frozen=True)
class Clause:
    """One requirement."""

    id: str
    area: str
    role: ClauseRole
    level: Level
    text: str
    reference: str
    capability: str = ""
    since: str = ""
    flags: tuple[str, ...] = ()
    untestable: str | None = None
    robustness: bool = False
    note: str | None = None
    #: The usual fix, in one line, shown beside a finding of this clause.
    hint: str = ""
    extra: dict[str, Any] = field(default_factory=dict, compare=False)

    @property
    def mandatory(self) -> bool:
        """MUST / MUST NOT: a failure makes the peer non-conformant."""
        return self.level in ("MUST", "MUST NOT")

    def applies_to(self, role: str) -> bool:
        return self.role == role or self.role == "both"


class Registry:
    """All clauses, by id, with the lookups the plugin and reports need."""

    def __init__(self, clauses: list[Clause]) -> None:
        self._by_id: dict[str, Clause] = {}
        for c in clauses:
            if c.id in self._by_id:
                raise ValueError(f"duplicate clause id {c.id!r} in the registry")
            self._by_id[c.id] = c

    def __contains__(self, clause_id: object) -> bool:
        return clause_id in self._by_id

    def __iter__(self) -> Any:
        return iter(self._by_id.values())

    def __len__(self) -> int:
        return len(self._by_id)

    def get(self, clause_id: str) -> Clause:
        """The clause, or a ``ConfigurationError`` naming close matches."""
        try:
            return self._by_id[clause_id]
        except KeyError:
            close = difflib.get_close_matches(clause_id, list(self._by_id), n=3)
            hint = f" Did you mean {', '.join(close)}?" if close else ""
            raise ConfigurationError(
                f"unknown clause id {clause_id!r}.{hint} `python -m acp_conformance clauses` lists them all."
            ) from None

    def for_role(self, role: str) -> list[Clause]:
        return [c for c in self._by_id.values() if c.applies_to(role)]

    def select(
        self, role: str, patterns: Sequence[str] = (), areas: Sequence[str] = (), levels: Sequence[str] = ()
    ) -> list[str]:
        """The ids of ``role``'s clauses a selection names, in registry order.

        Each kind of option narrows the others (``--acp-clause 'cancel.*' --acp-level MUST``: the
        MUSTs among the cancellation clauses), and within a kind the values add up. A pattern is an
        id, a glob (``cancel.*``, as Autobahn takes ``6.*``) or a dotted prefix (``cancel``, as h2spec
        takes ``http2/6.3``). ``MUST`` includes ``MUST NOT`` and ``SHOULD`` includes ``SHOULD NOT``.
        A value that selects nothing is a ``ConfigurationError`` saying what exists.
        """
        pool = self.for_role(role)
        if patterns:
            chosen: set[str] = set()
            for pattern in patterns:
                if pattern in self._by_id:
                    chosen.add(pattern)
                    continue
                glob = pattern if any(ch in pattern for ch in "*?[") else None
                hits = {
                    c.id for c in pool if (fnmatch.fnmatchcase(c.id, glob) if glob else c.id.startswith(pattern + "."))
                }
                if not hits:
                    self.get(pattern)  # raises, naming close ids
                chosen |= hits
            pool = [c for c in pool if c.id in chosen]
        if areas:
            known = sorted({c.area for c in self._by_id.values()})
            for area in areas:
                if area not in known:
                    raise ConfigurationError(f"unknown area {area!r}; the areas are: {', '.join(known)}")
            pool = [c for c in pool if c.area in areas]
        if levels:
            wanted: set[str] = set()
            for level in levels:
                upper = " ".join(level.upper().replace("_", " ").split())
                if upper not in LEVELS:
                    raise ConfigurationError(f"unknown level {level!r}; the levels are: {', '.join(LEVELS)}")
                wanted |= {upper, f"{upper} NOT"} & set(LEVELS)
            pool = [c for c in pool if c.level in wanted]
        if not pool:
            raise ConfigurationError(f"the selection names no {role} clause: nothing would run")
        return [c.id for c in pool]


def _parse(data: dict[str, Any], origin: str) -> list[Clause]:
    out = []
    for n, raw in enumerate(data.get("clause", []), 1):
        where = f"{origin}: clause #{n} ({raw.get('id', '?')})"
        try:
            level = raw["level"]
            role = raw["role"]
            if level not in LEVELS:
                raise ValueError(f"level {level!r} not in {LEVELS}")
            if role not in ROLES:
                raise ValueError(f"role {role!r} not in {ROLES}")
            known = {
                "id",
                "area",
                "role",
                "level",
                "text",
                "reference",
                "capability",
                "since",
                "flags",
                "untestable",
                "robustness",
                "note",
                "hint",
            }
            out.append(
                Clause(
                    id=raw["id"],
                    area=raw["area"],
                    role=role,
                    level=level,
                    text=raw["text"],
                    reference=raw.get("reference", ""),
                    capability=raw.get("capability", ""),
                    since=raw.get("since", ""),
                    flags=tuple(raw.get("flags", ())),
                    untestable=raw.get("untestable"),
                    robustness=bool(raw.get("robustness", False)),
                    note=raw.get("note"),
                    hint=raw.get("hint", ""),
                    extra={k: v for k, v in raw.items() if k not in known},
                )
            )
        except (KeyError, ValueError) as exc:
            raise ValueError(f"{where}: {exc}") from None
    return out


@cache
def registry() -> Registry:
    """The bundled registry (parsed once per process)."""
    text = resources.files(__package__).joinpath("registry.toml").read_text("utf-8")
    return Registry(_parse(tomllib.loads(text), "registry.toml"))
