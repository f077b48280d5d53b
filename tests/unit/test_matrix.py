"""The interop matrix page: every peer has its column and summary, every FAIL / WARN cell links
to a finding that exists, and the page needs nothing from the network."""

from __future__ import annotations

import json
from html.parser import HTMLParser
from pathlib import Path

from acp_conformance.__main__ import main
from acp_conformance.clauses import registry
from acp_conformance.reporting import RunResults
from acp_conformance.reporting import TestRecord as Record
from acp_conformance.results import ClauseResult, Status

REG = registry()
EVIDENCE = (
    '    0.01 -> {"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":0}}\n'
    '    0.02 <- {"jsonrpc":"2.0","id":0,"error":{"code":-32022,"message":"Unsupported"}}\n'
)


class _Page(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.ids: set[str] = set()
        self.links: list[str] = []
        self.peers: list[str] = []
        self.external: list[str] = []
        self.svgs = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if a.get("id"):
            self.ids.add(a["id"] or "")
        if tag == "a" and (a.get("href") or "").startswith("#"):
            self.links.append((a["href"] or "")[1:])
        if tag in ("script", "link", "img") or (tag == "a" and "example" in (a.get("href") or "")):
            self.external.append(tag)
        if a.get("data-peer"):
            self.peers.append(a["data-peer"] or "")
        if tag == "svg":
            self.svgs += 1


def _report(tmp: Path, name: str, role: str, fail: bool) -> Path:
    cid = "init.version.latest-otherwise" if role == "agent" else "perm.response.shape"
    run = RunResults(registry=REG, role=role, command=f"{name} --acp", checked={cid})
    status = Status.FAIL if fail else Status.PASS
    run.add(Record("test_x.py::test_y", "failed" if fail else "passed", [ClauseResult(cid, status, "bad", EVIDENCE)]))
    path = tmp / f"{name}.json"
    path.write_text(json.dumps(run.to_json()))
    return path


def test_matrix_links_every_finding_and_summarises_every_peer(tmp_path: Path) -> None:
    files = [
        _report(tmp_path, "agent-a", "agent", fail=True),
        _report(tmp_path, "agent-b", "agent", fail=False),
        _report(tmp_path, "client-c", "client", fail=True),
    ]
    out = tmp_path / "site" / "index.html"
    assert main(["matrix", *map(str, files), "-o", str(out)]) == 0
    page = _Page()
    page.feed(out.read_text())
    assert sorted(page.peers) == ["agent-a", "agent-b", "client-c"]
    assert page.links and all(target in page.ids for target in page.links), set(page.links) - page.ids
    assert "f-agent-a--init-version-latest-otherwise" in page.links
    assert page.svgs == 2 and not page.external  # one diagram per FAIL; offline: no script, no fetch
    md = out.with_suffix(".md").read_text()
    assert "[FAIL](agent-a.md#finding-init-version-latest-otherwise)" in md
    assert "| [client-c](client-c.md) |" in md


def test_matrix_rejects_a_file_that_is_no_report(tmp_path: Path) -> None:
    bad = tmp_path / "x.json"
    bad.write_text('{"a": 1}')
    assert main(["matrix", str(bad), "-o", str(tmp_path / "i.html")]) == 2
