#!/usr/bin/env python3
"""Fetch the example programs of the ACP Python SDK (PyPI ``agent-client-protocol``).

The examples (``echo_agent.py``, ``agent.py``, ``client.py``, ...) are shipped in the
sdist only, not in the wheel.  This script downloads the pinned sdist with pip and
extracts its ``examples/`` directory to ``.peers/python-sdk-<version>/examples/``
under the repository root.

It is idempotent: when the examples are already in place (a marker file records the
sdist's SHA-256), it does nothing.  ``--force`` re-extracts.

Standard library only.  The examples themselves need ``agent-client-protocol`` (and
thus pydantic) installed in the interpreter that runs them.
"""

from __future__ import annotations

import argparse
import hashlib
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path, PurePosixPath
from typing import Final

PACKAGE: Final = "agent-client-protocol"
VERSION: Final = "0.12.1"
SDIST_NAME: Final = f"agent_client_protocol-{VERSION}.tar.gz"
SDIST_SHA256: Final = "9963ccb590ed96d7dc542c9c023e90676fc76b1c6562e21a9ee112f4fbcb0095"
# Files the conformance suite relies on; others in examples/ are extracted too.
REQUIRED_EXAMPLES: Final = ("echo_agent.py", "agent.py", "client.py")
MARKER_NAME: Final = ".fetched-from"

REPO_ROOT: Final = Path(__file__).resolve().parent.parent
DEFAULT_DEST: Final = REPO_ROOT / ".peers" / f"python-sdk-{VERSION}"


class FetchError(Exception):
    """A failure with a message meant for the person running the script."""


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 16), b""):
            digest.update(chunk)
    return digest.hexdigest()


def is_complete(dest: Path) -> bool:
    examples = dest / "examples"
    marker = dest / MARKER_NAME
    if not marker.is_file():
        return False
    if marker.read_text(encoding="utf-8").split() != [SDIST_NAME, SDIST_SHA256]:
        return False
    return all((examples / name).is_file() for name in REQUIRED_EXAMPLES)


def download_sdist(cache_dir: Path) -> Path:
    """Return the path of the verified sdist, downloading it with pip if needed."""
    sdist = cache_dir / SDIST_NAME
    if sdist.is_file() and sha256_of(sdist) == SDIST_SHA256:
        return sdist
    cache_dir.mkdir(parents=True, exist_ok=True)
    if sdist.exists():
        sdist.unlink()
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--disable-pip-version-check",
        "--no-binary",
        ":all:",
        "--no-deps",
        "--dest",
        str(cache_dir),
        f"{PACKAGE}=={VERSION}",
    ]
    print(f"fetch_python_sdk_examples: downloading {PACKAGE}=={VERSION} sdist with pip", flush=True)
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    except OSError as exc:
        raise FetchError(f"could not run pip ({' '.join(cmd)}): {exc}") from exc
    if proc.returncode != 0:
        if "No module named pip" in proc.stderr:
            raise FetchError(
                f"pip is not available for {sys.executable}; install pip or run this script "
                "with an interpreter that has it"
            )
        raise FetchError(
            f"pip download failed (exit {proc.returncode}); is PyPI reachable?\n"
            f"command: {' '.join(cmd)}\n--- pip stderr ---\n{proc.stderr.strip()}"
        )
    if not sdist.is_file():
        found = ", ".join(sorted(p.name for p in cache_dir.iterdir())) or "nothing"
        raise FetchError(f"pip download succeeded but {SDIST_NAME} is not in {cache_dir} (found: {found})")
    actual = sha256_of(sdist)
    if actual != SDIST_SHA256:
        raise FetchError(
            f"{sdist} has SHA-256 {actual}, expected {SDIST_SHA256}; refusing to use it "
            "(delete it and retry; if it persists the index serves a different file)"
        )
    return sdist


def extract_examples(sdist: Path, target: Path) -> list[str]:
    """Extract ``<top>/examples/*`` from ``sdist`` into ``target`` (a fresh directory)."""
    prefix = PurePosixPath(f"agent_client_protocol-{VERSION}") / "examples"
    names: list[str] = []
    try:
        with tarfile.open(sdist, "r:gz") as tar:
            for member in tar.getmembers():
                path = PurePosixPath(member.name)
                if not member.isfile() or prefix not in path.parents:
                    continue
                rel = path.relative_to(prefix)
                if rel.is_absolute() or ".." in rel.parts:
                    raise FetchError(f"refusing suspicious path in sdist: {member.name}")
                fileobj = tar.extractfile(member)
                if fileobj is None:
                    continue
                out = target.joinpath(*rel.parts)
                out.parent.mkdir(parents=True, exist_ok=True)
                with fileobj, out.open("wb") as fh:
                    shutil.copyfileobj(fileobj, fh)
                names.append(rel.as_posix())
    except (tarfile.TarError, OSError) as exc:
        raise FetchError(f"could not read {sdist}: {exc}") from exc
    missing = [name for name in REQUIRED_EXAMPLES if name not in names]
    if missing:
        raise FetchError(f"{sdist} has no examples/{', examples/'.join(missing)}")
    return sorted(names)


def fetch(dest: Path, *, force: bool) -> Path:
    examples = dest / "examples"
    if not force and is_complete(dest):
        print(f"fetch_python_sdk_examples: up to date: {examples}")
        return examples
    sdist = download_sdist(dest.parent / "downloads")
    dest.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".examples-", dir=dest))
    try:
        names = extract_examples(sdist, staging)
        marker = dest / MARKER_NAME
        marker.unlink(missing_ok=True)
        if examples.exists():
            shutil.rmtree(examples)
        staging.rename(examples)
        marker.write_text(f"{SDIST_NAME} {SDIST_SHA256}\n", encoding="utf-8")
    finally:
        if staging.exists():
            shutil.rmtree(staging)
    print(f"fetch_python_sdk_examples: extracted {len(names)} files to {examples}")
    for name in names:
        print(f"  {name}")
    return examples


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument(
        "--dest",
        type=Path,
        default=DEFAULT_DEST,
        help=f"directory to hold examples/ (default: {DEFAULT_DEST.relative_to(REPO_ROOT)})",
    )
    parser.add_argument("--force", action="store_true", help="re-extract even if up to date")
    args = parser.parse_args(argv)
    try:
        fetch(args.dest.resolve(), force=args.force)
    except FetchError as exc:
        print(f"fetch_python_sdk_examples: error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
