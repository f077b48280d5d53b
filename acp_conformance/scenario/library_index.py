"""What the suites need to know of the scenario library before they run anything.

A suite test per library file needs, at collection, each file's id, who it plays, its tags and the
clauses it proves; reading that means parsing and validating every file (YAML, the pydantic models),
a third of a pytest start.  The answer depends only on the packaged library, so it is cached on disk
(``acp_conformance._cache``); a library from ``$ACP_SCENARIOS_DIR`` is read every time.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from acp_conformance._cache import cached

if TYPE_CHECKING:
    from acp_conformance.scenario.model import Scenario

__all__ = ["Entry", "library_dir", "library_entries"]


@dataclass(frozen=True)
class Entry:
    """One library file, as a suite's parametrization needs it."""

    path: Path
    scenario: str
    plays: str
    tags: tuple[str, ...]
    clauses: tuple[str, ...]


#: The library shipped inside the package.
PACKAGED = Path(__file__).resolve().parent / "library"


def library_dir() -> Path:
    """The scenario library: ``$ACP_SCENARIOS_DIR``, else the one shipped inside the package
    (``acp_conformance/scenario/library``, package data in a wheel; the checkout's top-level
    ``scenarios/`` is a symlink to it).  Here, not in the loader: finding the folder must not
    import the scenario models (pydantic), which a cached index exists to avoid."""
    env = os.environ.get("ACP_SCENARIOS_DIR")
    if env:
        return Path(env)
    return PACKAGED


def library_entries(kind: str, check: Callable[[Scenario], None] | None = None) -> list[Entry]:
    """The files of ``scenarios/<kind>/``; ``check`` vets each one when they are read (an invalid
    file, or one the suite cannot play, raises then: a collection error naming file and line)."""
    folder = library_dir() / kind

    def read() -> list[dict[str, Any]]:
        from acp_conformance.scenario.loader import load_scenario

        out = []
        for path in sorted(folder.glob("*.yaml")):
            scenario = load_scenario(path)
            if check is not None:
                check(scenario)
            out.append(
                {
                    "file": path.name,
                    "scenario": scenario.scenario,
                    "plays": scenario.plays,
                    "tags": list(scenario.tags),
                    "clauses": list(scenario.clauses()),
                }
            )
        return out

    def load(data: Any) -> list[dict[str, Any]]:
        if not isinstance(data, list):
            raise ValueError("not a list")
        return data

    rows = cached("scenarios", kind, read, load=load) if folder.resolve() == (PACKAGED / kind).resolve() else read()
    return [
        Entry(folder / r["file"], str(r["scenario"]), str(r["plays"]), tuple(r["tags"]), tuple(r["clauses"]))
        for r in rows
    ]
