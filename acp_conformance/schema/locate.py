"""Locating the official ACP JSON Schema.

The schema is reference data owned by the ACP project; we never vendor it.
It ships inside the npm package ``@agentclientprotocol/sdk`` (pinned in
``package.json``).  Resolution order, first hit wins:

1. an explicit path (``--acp-schema PATH``): a ``schema.json`` file or a
   directory holding ``schema.json`` / ``schema.unstable.json``;
2. the ``ACP_CONFORMANCE_SCHEMA`` environment variable (same forms);
3. ``node_modules/@agentclientprotocol/sdk/schema/v1/`` in the current
   directory or any parent, then beside this package's source tree;
4. the per-user cache filled by ``python -m acp_conformance fetch-schema``, or, when
   nothing else is found and ``fetch=True`` (the plugin), filled on the spot.

Filling the cache needs no Node: the pinned tarball is downloaded from the npm registry over
HTTPS by Python itself and checked against a pinned sha256 before anything is extracted (a
registry or proxy serving other bytes is an error, not a different schema). Whichever schema is
used is recorded (source, version, sha256, whether it is the pinned one) in every report.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from functools import cached_property
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
#: The npm registry's tarball of the pinned version, and its sha256 (checked before extracting).
PINNED_TARBALL = f"https://registry.npmjs.org/{SDK_PACKAGE}/-/sdk-{PINNED_SDK_VERSION}.tgz"
PINNED_TARBALL_SHA256 = "87acc66d5824f88d8913702f85cf74c997526bbffb06fce15a9f0d637566ca8d"
#: ``$ACP_CONFORMANCE_REGISTRY``: an npm registry mirror to fetch the tarball from instead.
REGISTRY_ENV = "ACP_CONFORMANCE_REGISTRY"
_SUBDIR = Path("node_modules") / "@agentclientprotocol" / "sdk"

FIX_HINT = (
    "Fix it with one of: `npm ci` in the acp-conformance checkout (installs "
    f"{SDK_PACKAGE}@{PINNED_SDK_VERSION}); `python -m acp_conformance fetch-schema` "
    "(downloads the pinned tarball from the npm registry into the per-user cache; no Node needed); "
    "`--acp-schema PATH`; or "
    f"`{ENV_VAR}=PATH`."
)


@dataclass(frozen=True)
class SchemaSource:
    """Where the schema came from, for the report header."""

    path: Path
    source: str  # "option", "environment", "node_modules", "cache"
    version: str
    unstable: bool
    data: dict[str, Any]
    raw: bytes = field(repr=False, compare=False)

    @cached_property
    def sha256(self) -> str:
        """Of the bytes that were read.  Computed when a report asks: ``hashlib`` loads OpenSSL's
        libcrypto, ~3.7 MiB of RSS that a mock agent reading the schema has no use for."""
        import hashlib

        return hashlib.sha256(self.raw).hexdigest()

    @property
    def pinned(self) -> bool:
        """Whether this is the schema this suite version was built and proven against."""
        return self.version == f"{SDK_PACKAGE}@{PINNED_SDK_VERSION}"

    def mismatch(self) -> str | None:
        """A warning when the schema found is not the pinned one (a project's own node_modules, say)."""
        if self.pinned:
            return None
        return (
            f"the schema used is {self.version}, not the pinned {SDK_PACKAGE}@{PINNED_SDK_VERSION}: verdicts "
            "may differ from a run against the pinned schema (pass --acp-schema, or run "
            "`python -m acp_conformance fetch-schema` and point $ACP_CONFORMANCE_SCHEMA at the cache)"
        )

    def describe(self) -> dict[str, Any]:
        return {
            "source": f"{self.source}:{self.path}",
            "version": self.version,
            "pinned": self.pinned,
            **({"warning": self.mismatch()} if self.mismatch() else {}),
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


def locate_schema(
    explicit: str | None = None, *, unstable: bool = False, start: Path | None = None, fetch: bool = False
) -> SchemaSource:
    """Find, load and fingerprint the schema. Raises ``SchemaNotFound`` with a fix.

    ``fetch``: when no schema is found anywhere, fill the per-user cache from the npm registry
    (the plugin does, so that a wheel installed from PyPI certifies with nothing else)."""
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
    if path is None and fetch:
        fetch_into_cache()
        path, source = cache_dir() / "schema" / "v1" / _file_name(unstable), "cache (fetched now)"
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
    if version == "unknown" and source.startswith("cache"):
        version = f"{SDK_PACKAGE}@{PINNED_SDK_VERSION}"
    return SchemaSource(
        path=path,
        source=source,
        version=version,
        unstable=unstable,
        data=data,
        raw=raw,
    )


def fetch_into_cache(timeout: float = 60.0) -> Path:
    """Download the pinned SDK tarball, check its sha256, and extract the schemas into the cache."""
    # Imported here: urllib.request brings ssl, http.client and email, ~7 MiB of RSS in every
    # process that merely reads the schema (the mock agent's peak RSS budget is 40 MiB).
    import hashlib
    import io
    import tarfile
    import urllib.error
    import urllib.request

    registry = os.environ.get(REGISTRY_ENV, "").rstrip("/")
    url = f"{registry}/{SDK_PACKAGE}/-/sdk-{PINNED_SDK_VERSION}.tgz" if registry else PINNED_TARBALL
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            blob = response.read()
    except (urllib.error.URLError, OSError, TimeoutError) as exc:
        reason = getattr(exc, "reason", exc)
        raise SchemaNotFound(f"could not download {url} ({reason}). {FIX_HINT}") from None
    digest = hashlib.sha256(blob).hexdigest()
    if digest != PINNED_TARBALL_SHA256:
        raise SchemaNotFound(
            f"{url} has sha256 {digest}, not the pinned {PINNED_TARBALL_SHA256}: refusing to use it "
            f"(a registry mirror or proxy served other bytes). {FIX_HINT}"
        )
    target = cache_dir()
    out = target / "schema" / "v1"
    out.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(blob), mode="r:gz") as tar:
        for name in ("schema.json", "schema.unstable.json"):
            fh = tar.extractfile(tar.getmember(f"package/schema/v1/{name}"))
            if fh is None:
                raise SchemaNotFound(f"{name} missing from the {SDK_PACKAGE} tarball")
            (out / name).write_bytes(fh.read())
        pkg = tar.extractfile(tar.getmember("package/package.json"))
        if pkg is not None:
            (target / "package.json").write_bytes(pkg.read())
    return target
