"""Filling the schema cache without Node: download, sha256 check, extract."""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from acp_conformance.errors import SchemaNotFound
from acp_conformance.schema import locate


def _tarball() -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, data in (
            ("package/schema/v1/schema.json", {"$defs": {"X": {}}}),
            ("package/schema/v1/schema.unstable.json", {"$defs": {"X": {}, "Y": {}}}),
            ("package/package.json", {"name": "@agentclientprotocol/sdk", "version": locate.PINNED_SDK_VERSION}),
        ):
            raw = json.dumps(data).encode()
            info = tarfile.TarInfo(name)
            info.size = len(raw)
            tar.addfile(info, io.BytesIO(raw))
    return buf.getvalue()


@pytest.fixture
def registry(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[bytes]:
    blob = _tarball()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            ok = self.path == f"/@agentclientprotocol/sdk/-/sdk-{locate.PINNED_SDK_VERSION}.tgz"
            self.send_response(200 if ok else 404)
            self.end_headers()
            if ok:
                self.wfile.write(blob)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    monkeypatch.setenv(locate.REGISTRY_ENV, f"http://127.0.0.1:{server.server_address[1]}")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv(locate.ENV_VAR, raising=False)  # the suite's own session points it at a schema
    try:
        yield blob
    finally:
        server.shutdown()
        server.server_close()


def test_fetch_checks_the_pinned_sha256_before_extracting(registry: bytes, tmp_path: Path) -> None:
    with pytest.raises(SchemaNotFound, match="not the pinned"):
        locate.fetch_into_cache(timeout=10)
    assert not (tmp_path / "cache" / "acp-conformance").exists()


def test_fetch_fills_the_cache_and_locate_uses_it(
    registry: bytes, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(locate, "PINNED_TARBALL_SHA256", hashlib.sha256(registry).hexdigest())
    monkeypatch.setattr(locate, "_candidates", lambda unstable, start: [])  # no node_modules anywhere
    found = locate.locate_schema(fetch=True, start=tmp_path)
    assert found.source == "cache (fetched now)" and found.pinned and found.mismatch() is None
    assert found.data == {"$defs": {"X": {}}}
    assert (tmp_path / "cache" / "acp-conformance" / f"sdk-{locate.PINNED_SDK_VERSION}" / "package.json").is_file()


def test_an_unreachable_registry_is_a_clear_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(locate.REGISTRY_ENV, "http://127.0.0.1:9")  # discard port: nothing listens
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    with pytest.raises(SchemaNotFound, match="could not download"):
        locate.fetch_into_cache(timeout=5)


def test_a_schema_that_is_not_the_pinned_one_says_so(tmp_path: Path) -> None:
    sdk = tmp_path / "node_modules" / "@agentclientprotocol" / "sdk"
    (sdk / "schema" / "v1").mkdir(parents=True)
    (sdk / "package.json").write_text(json.dumps({"name": "@agentclientprotocol/sdk", "version": "9.9.9"}))
    (sdk / "schema" / "v1" / "schema.json").write_text(json.dumps({"$defs": {}}))
    found = locate.locate_schema(str(sdk / "schema" / "v1"))
    assert not found.pinned and "not the pinned @agentclientprotocol/sdk@2.4.0" in (found.mismatch() or "")
    assert found.describe()["warning"] == found.mismatch()
