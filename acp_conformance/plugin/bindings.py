"""Which clauses the bundled suite checks (read from its markers, statically).

Computed by importing the suite modules and reading their ``acp_clause``
marks, so the answer does not depend on test selection or on which xdist
worker ran what: a clause deselected with ``-k`` is NOT_TESTED, while a
clause this suite version has no check for is a coverage gap.

Importing every suite module costs most of a pytest start (Hypothesis, the fuzz strategies,
pydantic's scenario models), and every run needs the answer: the controller for the coverage
gaps, a ``--acp-clause`` run to know which modules it can skip.  So the answer is cached on disk,
keyed by the size and modification time of every file it can depend on (this package's sources
and the scenario library): a changed file is a different key, a stale answer cannot be read.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import os
import pkgutil
import tempfile
from functools import cache
from pathlib import Path

from acp_conformance.checks.passive import PASSIVE_CLAUSES
from acp_conformance.plugin.markers import is_clause_mark

__all__ = ["bindings", "checked_clauses", "module_clauses", "passive_clauses", "suite_dir"]


def suite_dir(role: str) -> Path:
    return Path(__file__).resolve().parent.parent / "suite" / role


_PACKAGE = Path(__file__).resolve().parent.parent


@cache
def bindings(role: str) -> dict[str, list[str]]:
    """clause id -> test function names bound to it, for the ``role`` suite."""
    path = _cache_path(role)
    if path is not None:
        try:
            data = json.loads(path.read_text("utf-8"))
            if isinstance(data, dict):
                return {str(k): [str(t) for t in v] for k, v in data.items()}
        except (OSError, ValueError):
            pass
    out = _imported_bindings(role)
    if path is not None:
        _write_atomically(path, json.dumps(out, sort_keys=True))
    return out


def module_clauses(role: str) -> dict[str, set[str]]:
    """suite module file name (``test_fuzz.py``) -> the clauses its tests are bound to."""
    out: dict[str, set[str]] = {}
    for cid, tests in bindings(role).items():
        for test in tests:
            out.setdefault(test.split("::", 1)[0] + ".py", set()).add(cid)
    return out


def _cache_path(role: str, root: Path = _PACKAGE) -> Path | None:
    """Where the bindings of this exact source tree are cached (None: no cache directory)."""
    from acp_conformance import __version__

    digest = hashlib.sha256(__version__.encode())
    try:
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
            for name in sorted(filenames):
                if name.endswith((".py", ".yaml", ".toml")):
                    st = os.stat(os.path.join(dirpath, name))
                    digest.update(f"{dirpath}/{name}:{st.st_size}:{st.st_mtime_ns}\n".encode())
        base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    except (OSError, RuntimeError):
        return None
    return Path(base) / "acp-conformance" / "bindings" / f"{role}-{digest.hexdigest()[:24]}.json"


def _write_atomically(path: Path, text: str) -> None:
    """Concurrent runs (xdist workers, parallel CI jobs) may write the same file: a rename is atomic."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".bindings-")
    except OSError:
        return  # a read-only home: the answer is recomputed next time
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except OSError:
        Path(tmp).unlink(missing_ok=True)


def _imported_bindings(role: str) -> dict[str, list[str]]:
    package = f"acp_conformance.suite.{role}"
    pkg = importlib.import_module(package)
    out: dict[str, list[str]] = {}
    for info in pkgutil.iter_modules(pkg.__path__):
        if not info.name.startswith("test_"):
            continue
        module = importlib.import_module(f"{package}.{info.name}")
        for name, obj in vars(module).items():
            if not name.startswith("test_") or not callable(obj):
                continue
            for cid in _marked_clauses(obj):
                names = out.setdefault(cid, [])
                if f"{info.name}::{name}" not in names:
                    names.append(f"{info.name}::{name}")
    return out


def _marked_clauses(test: object) -> list[str]:
    """The clause ids of a test's own marks and of its ``pytest.param(..., marks=...)`` values.

    A parametrized test (one scenario file per param, say) binds each param
    to the clauses that param checks; those count as checked too.
    """
    out: list[str] = []
    for mark in getattr(test, "pytestmark", []):
        if is_clause_mark(mark.name):
            out.extend(mark.args)
        elif mark.name == "parametrize" and len(mark.args) > 1:
            for value in mark.args[1]:
                for sub in getattr(value, "marks", ()):
                    if is_clause_mark(getattr(sub, "name", None)):
                        out.extend(sub.args)
    return out


def passive_clauses(role: str) -> set[str]:
    return {cid for cid, (roles, _) in PASSIVE_CLAUSES.items() if role in roles}


def checked_clauses(role: str) -> set[str]:
    return set(bindings(role)) | passive_clauses(role)
