"""Broken clients for fs/read_text_file and fs/write_text_file.

Merged into ``BREAKAGES`` by ``broken_clients.py`` (run them through it).
"""

from __future__ import annotations

import os
from typing import Any

from acp_conformance.core.events import Request
from acp_conformance.peer import HandlerError
from mock_client import MockClient
from tests.peers._breakage import Breakage


class WrongReadContent(MockClient):
    async def handle_read(self, req: Request) -> Any:
        result = await super().handle_read(req)
        p = req.params if isinstance(req.params, dict) else {}
        if "line" not in p and "limit" not in p:
            result["content"] = result["content"].replace("\n", "\r\n")
        return result


class IgnoresLineLimit(MockClient):
    async def handle_read(self, req: Request) -> Any:
        p = dict(req.params) if isinstance(req.params, dict) else {}
        p.pop("line", None)
        p.pop("limit", None)
        return await super().handle_read(Request(req.id, req.method, p, req.raw, req.index))


class EmptyReadForMissing(MockClient):
    async def handle_read(self, req: Request) -> Any:
        p = req.params if isinstance(req.params, dict) else {}
        if isinstance(p.get("path"), str) and not os.path.exists(p["path"]):
            return {"content": ""}
        return await super().handle_read(req)


class MissingFileInternalError(MockClient):
    """A missing file is an error, but -32603 (internal) instead of -32002 (resource not found)."""

    async def handle_read(self, req: Request) -> Any:
        p = req.params if isinstance(req.params, dict) else {}
        if isinstance(p.get("path"), str) and not os.path.exists(p["path"]):
            raise HandlerError(-32603, f"ENOENT: {p['path']}")
        return await super().handle_read(req)


class WriteNotPerformed(MockClient):
    async def handle_write(self, req: Request) -> Any:
        return {}


class WriteReturnsString(MockClient):
    async def handle_write(self, req: Request) -> Any:
        await super().handle_write(req)
        return "ok"


class WriteReturnsNull(MockClient):
    """Answers fs/write_text_file with null, as the docs' example shows (the schema wants {})."""

    async def handle_write(self, req: Request) -> Any:
        await super().handle_write(req)
        return None


BREAKAGES: dict[str, Breakage[MockClient]] = {
    "wrong-read-content": Breakage(WrongReadContent, "fs.read.response", status="WARN"),
    "ignores-line-limit": Breakage(IgnoresLineLimit, "fs.read.line-limit", status="WARN"),
    "empty-read-for-missing": Breakage(EmptyReadForMissing, "fs.read.missing", status="WARN"),
    "missing-file-internal-error": Breakage(MissingFileInternalError, "error.resource-not-found", status="INFO"),
    "write-not-performed": Breakage(WriteNotPerformed, "fs.write.create"),
    "write-returns-string": Breakage(WriteReturnsString, "fs.write.response"),
    "write-returns-null": Breakage(WriteReturnsNull, "schema.null-result", status="WARN"),
}
