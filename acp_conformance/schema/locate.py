"""Locating the official ACP JSON Schema.

The schema is reference data owned by the ACP project; we never vendor it.
It ships inside the npm package ``@agentclientprotocol/sdk`` (pinned in
``package.json``).  Resolution order, first hit wins:

1. an explicit path (``--acp-schema PATH``): a ``schema.json`` file or a
   directory holding ``schema.json`` / ``schema.unstable.json``;
2. the ``ACP_CONFORMANCE_SCHEMA`` environment variable (same forms);
3. ``node_modules/@agentclientprotocol/sdk/schema/v1/`` in the current
   directory or any parent, then beside this package's source tree;
4. the per-user cache filled by ``python -m acp_conformance fetch-schema``.

Whichever is used is recorded (source, version, sha256) in every report.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from acp_conformance.errors import SchemaNotFound

__all__ = [
    "ENV_VAR",
    "PINNED_SDK_VERSION",
    "SchemaSource",
    "cache_dir",
    "fetch_into_cache",
    "locate_schema",
]

ENV_VAR = "ACP_CONFORMANCE_SCHEMA"
PINNED_SDK_VERSION = "2.4.0"
SDK_PACKAGE = "@agentclientprotocol/sdk"
_SUBDIR = Path("node_modules") / "@agentclientprotocol" / "sdk"

FIX_HINT = (
    "Fix it with one of: `npm ci` in the acp-conformance checkout (installs "
    f"{SDK_PACKAGE}@{PINNED_SDK_VERSION}); `python -m acp_conformance fetch-schema` "
    "(fills the per-user cache via `npm pack`); `--acp-schema PATH`; or "
    f"`{ENV_VAR}=PATH`."
)


@dataclass(frozen=True)
class SchemaSource:
    """Where the schema came from, for the report header."""

    path: Path
    source: str  # "option", "environment", "node_modules", "cache"
    version: str
    sha256: str
    unstable: bool
    data: dict[str, Any]

    def describe(self) -> dict[str, Any]:
        return {
            "source": f"{self.source}:{self.path}",
            "version": self.version,
            "sha256": self.sha256,
            "unstable": self.unstable,
        }


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "acp-conformance" / f"sdk-{PINNED_SDK_VERSION}"


def _file_name(unstable: bool) -> str:
    return "schema.unstable.json" if unstable else "schema.json"


def _resolve_given(path: Path, unstable: bool, what: str) -> Path:
    if path.is_dir():
        for candidate in (
            path / _file_name(unstable),
            path / "schema" / "v1" / _file_name(unstable),
        ):
            if candidate.is_file():
                return candidate
        raise SchemaNotFound(f"{what} {path} is a directory without {_file_name(unstable)}. {FIX_HINT}")
    if path.is_file():
        if unstable and path.name == "schema.json" and (path.parent / "schema.unstable.json").is_file():
            return path.parent / "schema.unstable.json"
        return path
    raise SchemaNotFound(f"{what} {path} does not exist. {FIX_HINT}")


def _sdk_version_near(path: Path) -> str:
    for parent in path.parents:
        pkg = parent / "package.json"
        if pkg.is_file():
            try:
                meta = json.loads(pkg.read_text("utf-8"))
            except (OSError, ValueError):
                return "unknown"
            if meta.get("name") == SDK_PACKAGE:
                return f"{SDK_PACKAGE}@{meta.get('version', 'unknown')}"
            return "unknown"
    return "unknown"


def _candidates(unstable: bool, start: Path) -> list[tuple[str, Path]]:
    found: list[tuple[str, Path]] = []
    roots = [start, *start.parents, Path(__file__).resolve().parents[2]]
    for root in roots:
        f = root / _SUBDIR / "schema" / "v1" / _file_name(unstable)
        found.append(("node_modules", f))
    found.append(("cache", cache_dir() / "schema" / "v1" / _file_name(unstable)))
    return found


def locate_schema(explicit: str | None = None, *, unstable: bool = False, start: Path | None = None) -> SchemaSource:
    """Find, load and fingerprint the schema. Raises ``SchemaNotFound`` with a fix."""
    path: Path | None = None
    source = ""
    if explicit:
        path, source = (
            _resolve_given(Path(explicit).expanduser(), unstable, "--acp-schema"),
            "option",
        )
    elif os.environ.get(ENV_VAR):
        path = _resolve_given(Path(os.environ[ENV_VAR]).expanduser(), unstable, f"${ENV_VAR}")
        source = "environment"
    else:
        for kind, candidate in _candidates(unstable, (start or Path.cwd()).resolve()):
            if candidate.is_file():
                path, source = candidate, kind
                break
    if path is None:
        raise SchemaNotFound(
            f"the official ACP schema ({SDK_PACKAGE}@{PINNED_SDK_VERSION} "
            f"schema/v1/{_file_name(unstable)}) was not found. {FIX_HINT}"
        )
    raw = path.read_bytes()
    try:
        data = json.loads(raw)
    except ValueError as exc:
        raise SchemaNotFound(f"{path} is not valid JSON ({exc}). {FIX_HINT}") from None
    if not isinstance(data, dict) or "$defs" not in data:
        raise SchemaNotFound(f"{path} does not look like the ACP schema (no $defs). {FIX_HINT}")
    version = _sdk_version_near(path)
    if version == "unknown" and source == "cache":
        version = f"{SDK_PACKAGE}@{PINNED_SDK_VERSION}"
    return SchemaSource(
        path=path,
        source=source,
        version=version,
        sha256=hashlib.sha256(raw).hexdigest(),
        unstable=unstable,
        data=data,
    )


def fetch_into_cache(version: str = PINNED_SDK_VERSION) -> Path:
    """Fill the per-user cache from the npm registry with ``npm pack``."""
    npm = shutil.which("npm")
    if npm is None:
        raise SchemaNotFound("`npm` is not on PATH; install Node.js/npm or pass --acp-schema PATH.")
    target = cache_dir()
    with tempfile.TemporaryDirectory() as tmp:
        proc = subprocess.run(
            [npm, "pack", f"{SDK_PACKAGE}@{version}", "--silent"],
            cwd=tmp,
            capture_output=True,
            text=True,
            check=False,
        )
        if proc.returncode != 0:
            raise SchemaNotFound(f"`npm pack {SDK_PACKAGE}@{version}` failed: {proc.stderr.strip()[-500:]}")
        tgz = next(Path(tmp).glob("*.tgz"), None)
        if tgz is None:
            raise SchemaNotFound("`npm pack` produced no tarball")
        out = target / "schema" / "v1"
        out.mkdir(parents=True, exist_ok=True)
        with tarfile.open(tgz) as tar:
            for name in ("schema.json", "schema.unstable.json"):
                member = tar.getmember(f"package/schema/v1/{name}")
                fh = tar.extractfile(member)
                if fh is None:
                    raise SchemaNotFound(f"{name} missing from the {SDK_PACKAGE} tarball")
                (out / name).write_bytes(fh.read())
            pkg = tar.extractfile(tar.getmember("package/package.json"))
            if pkg is not None:
                (target / "package.json").write_bytes(pkg.read())
    return target
