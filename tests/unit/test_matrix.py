"""The interop matrix page: every peer has its column and summary, every FAIL / WARN cell links
to a finding that exists, and the page needs nothing from the network."""

from __future__ import annotations

from pathlib import Path

from acp_conformance.__main__ import main
from tests.unit.matrix_support import Page, make_report


def test_matrix_links_every_finding_and_summarises_every_peer(tmp_path: Path) -> None:
    files = [
        make_report(tmp_path, "agent-a", "agent", fail=True),
        make_report(tmp_path, "agent-b", "agent", fail=False),
        make_report(tmp_path, "client-c", "client", fail=True),
    ]
    out = tmp_path / "site" / "index.html"
    assert main(["matrix", *map(str, files), "-o", str(out)]) == 0
    page = Page()
    page.feed(out.read_text())
    assert sorted(page.peers) == ["agent-a", "agent-b", "client-c"]
    assert page.links and all(target in page.ids for target in page.links), set(page.links) - page.ids
    assert "f-agent-a--init-version-latest-otherwise" in page.links
    assert page.svgs == 2 and not page.external  # one diagram per FAIL; offline: no script, no fetch
    md = out.with_suffix(".md").read_text()
    assert "[FAIL](agent-a.md#finding-init-version-latest-otherwise)" in md
    assert "| [client-c](client-c.md) |" in md


def test_matrix_rejects_a_file_that_is_nomake_report(tmp_path: Path) -> None:
    bad = tmp_path / "x.json"
    bad.write_text('{"a": 1}')
    assert main(["matrix", str(bad), "-o", str(tmp_path / "i.html")]) == 2
