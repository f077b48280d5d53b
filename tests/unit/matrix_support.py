"""Reports and an HTML reader for the matrix tests (a helper module: test modules import it,
never each other)."""

from __future__ import annotations

import json
from html.parser import HTMLParser
from pathlib import Path

from acp_conformance.clauses import registry
from acp_conformance.reporting import RunResults
from acp_conformance.reporting import TestRecord as Record
from acp_conformance.results import ClauseResult, Status

REG = registry()
EVIDENCE = (
    '    0.01 -> {"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":0}}\n'
    '    0.02 <- {"jsonrpc":"2.0","id":0,"error":{"code":-32022,"message":"Unsupported"}}\n'
)


class Page(HTMLParser):
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


def make_report(tmp: Path, name: str, role: str, fail: bool) -> Path:
    cid = "init.version.latest-otherwise" if role == "agent" else "perm.response.shape"
    run = RunResults(registry=REG, role=role, command=f"{name} --acp", checked={cid})
    status = Status.FAIL if fail else Status.PASS
    run.add(Record("test_x.py::test_y", "failed" if fail else "passed", [ClauseResult(cid, status, "bad", EVIDENCE)]))
    path = tmp / f"{name}.json"
    path.write_text(json.dumps(run.to_json()))
    return path
