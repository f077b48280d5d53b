"""Answers derived from this package's own files, cached on disk between runs.

Some answers every pytest start needs cost more to compute than the rest of the start: which
clauses each suite test is bound to (importing every suite module), which scenario files the
suites run (parsing and validating each).  They depend on nothing but this package's files, so
they are cached under ``$XDG_CACHE_HOME/acp-conformance/<kind>/``, keyed by the size and
modification time of every source, scenario and profile file: an edited file is a new key, a
stale answer cannot be read.  No cache directory (a read-only home) means computing every time.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

__all__ = ["cached", "source_key_path"]

T = TypeVar("T")

PACKAGE = Path(__file__).resolve().parent


def source_key_path(kind: str, name: str, root: Path = PACKAGE) -> Path | None:
    """Where ``name`` of ``kind`` is cached for this exact source tree (None: nowhere)."""
    from acp_conformance import __version__

    digest = hashlib.sha256(__version__.encode())
    try:
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
            for file in sorted(filenames):
                if file.endswith((".py", ".yaml", ".toml")):
                    st = os.stat(os.path.join(dirpath, file))
                    digest.update(f"{dirpath}/{file}:{st.st_size}:{st.st_mtime_ns}\n".encode())
        base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    except (OSError, RuntimeError):
        return None
    return Path(base) / "acp-conformance" / kind / f"{name}-{digest.hexdigest()[:24]}.json"


def cached(kind: str, name: str, compute: Callable[[], T], *, load: Callable[[Any], T]) -> T:
    """``load`` of the cached JSON for ``name``, or ``compute()`` (then stored) when there is none."""
    path = source_key_path(kind, name)
    if path is not None:
        try:
            return load(json.loads(path.read_text("utf-8")))
        except (OSError, ValueError, TypeError, KeyError):
            pass
    value = compute()
    if path is not None:
        _write_atomically(path, json.dumps(value, sort_keys=True))
    return value


def _write_atomically(path: Path, text: str) -> None:
    """Concurrent runs (xdist workers, parallel CI jobs) may write the same file: a rename is atomic."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.stem}-")
    except OSError:
        return
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except OSError:
        Path(tmp).unlink(missing_ok=True)
