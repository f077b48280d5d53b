"""fs/*: a client that advertises a file capability must really serve it (verified by asking)."""

from __future__ import annotations

import pytest

from acp_conformance.harness.client import ClientHarness
from acp_conformance.results import Status
from acp_conformance.suite.client._helpers import (
    advertised,
    first_turn,
    not_applicable,
    probe_path,
    require,
    session_dir,
)

pytestmark = pytest.mark.anyio

#: ErrorCode "Resource not found" (schema: "a given resource, such as a file, was not found").
RESOURCE_NOT_FOUND = -32002

TEXT = "first line\nsecond line — ünïcødé ✓\nthird line\nfourth line\n"


@pytest.mark.acp_clause(
    "fs.read.response", "fs.read.line-limit", "fs.read.missing", "error.resource-not-found", "init.request.capabilities"
)
async def test_read_text_file(acp_client: ClientHarness) -> None:
    """Advertised fs.readTextFile: the agent reads a file the test wrote; whole, by line/limit, and a missing one
    (an error, and the schema's -32002 "resource not found" code is the one a missing file should get)."""
    require(acp_client, "prompt")
    async with acp_client.connect() as conn:
        turn = await first_turn(acp_client, conn)
        if not advertised(conn, "fs.readTextFile"):
            await turn.end()
            not_applicable("the client does not advertise fs.readTextFile")
        root = session_dir(conn, turn)
        target = probe_path(conn, turn, "acp-read-probe.txt")
        target.write_text(TEXT, "utf-8")
        whole = await turn.read_text_file(str(target))
        content = whole.result.get("content") if isinstance(whole.result, dict) else None
        acp_client.check(
            "init.request.capabilities",
            not whole.is_error,
            "a client advertising fs.readTextFile to serve fs/read_text_file",
            f"error {whole.error!r}",
        )
        acp_client.check(
            "fs.read.response",
            content == TEXT,
            f"{{content: <the file's exact text>}} for {target}",
            f"result {whole.result!r}",
        )
        part = await turn.read_text_file(str(target), line=2, limit=2)
        got = part.result.get("content") if isinstance(part.result, dict) else None
        want = "second line — ünïcødé ✓\nthird line"
        acp_client.check(
            "fs.read.line-limit",
            isinstance(got, str) and got.rstrip("\n") == want,
            "line 2 and 3 only (line is 1-based, limit caps the number of lines)",
            f"error {part.error!r}" if part.is_error else f"content {got!r}",
        )
        missing = await turn.read_text_file(str(root / "no-such-file-acp.txt"))
        acp_client.check(
            "fs.read.missing",
            missing.is_error,
            "an error (preferably -32002 resource not found) for a file that does not exist",
            f"result {missing.result!r}",
        )
        if missing.is_error:
            code = missing.code
            acp_client.check(
                "error.resource-not-found",
                code == RESOURCE_NOT_FOUND,
                f"error code {RESOURCE_NOT_FOUND} (resource not found) for a file that does not exist",
                f"error {missing.error!r}",
            )
        else:
            # No error at all is judged on fs.read.missing; which code it would have had is unknown.
            acp_client.record(
                "error.resource-not-found",
                Status.INCONCLUSIVE,
                "the client answered the read of a missing file without an error",
            )
        await turn.end()


@pytest.mark.acp_clause(
    "fs.write.create", "fs.write.response", "schema.null-result", "fs.read.response", "init.request.capabilities"
)
async def test_write_text_file(acp_client: ClientHarness) -> None:
    """Advertised fs.writeTextFile: a new file is really written (checked on disk and read back)."""
    require(acp_client, "prompt")
    async with acp_client.connect() as conn:
        turn = await first_turn(acp_client, conn)
        if not advertised(conn, "fs.writeTextFile"):
            await turn.end()
            not_applicable("the client does not advertise fs.writeTextFile")
        target = probe_path(conn, turn, "acp-write-probe.txt")
        content = "written by the agent\nline two ✓\n"
        resp = await turn.write_text_file(str(target), content)
        acp_client.check(
            "init.request.capabilities",
            not resp.is_error,
            "a client advertising fs.writeTextFile to serve fs/write_text_file",
            f"error {resp.error!r}",
        )
        if resp.result is None:
            # The docs' example shows null; the schema wants {}: schema.null-result (a SHOULD).
            acp_client.check("schema.null-result", False, "an empty object result {}", "result null")
        else:
            acp_client.check("schema.null-result", True, "an object result, not null", "")
            acp_client.check(
                "fs.write.response",
                resp.result == {} or (isinstance(resp.result, dict) and set(resp.result) <= {"_meta"}),
                "an empty object result",
                f"result {resp.result!r}",
            )
        on_disk = target.read_text("utf-8") if target.is_file() else None
        acp_client.check(
            "fs.write.create",
            on_disk == content,
            f"{target} to exist with exactly the content sent",
            "no such file" if on_disk is None else f"content {on_disk!r}",
        )
        if advertised(conn, "fs.readTextFile"):
            back = await turn.read_text_file(str(target))
            got = back.result.get("content") if isinstance(back.result, dict) else None
            acp_client.check(
                "fs.read.response",
                got == content,
                "reading the just-written file back to give its content on disk",
                f"error {back.error!r}" if back.is_error else f"content {got!r}",
            )
        await turn.end()
