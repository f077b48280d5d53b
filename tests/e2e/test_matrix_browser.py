"""The interop matrix as a browser shows it: headless Chromium loads the page from disk (no
network) and the DOM it builds has every peer's summary and every finding a cell links to."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from acp_conformance.__main__ import main
from tests.unit.matrix_support import Page, make_report

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.skipif(CHROMIUM is None, reason="chromium not installed (./run setup --with-peers installs it as root)")
def test_matrix_renders_in_a_real_browser(tmp_path: Path) -> None:
    files = [
        make_report(tmp_path, "agent-a", "agent", fail=True),
        make_report(tmp_path, "client-c", "client", fail=True),
    ]
    page_file = tmp_path / "index.html"
    assert main(["matrix", *map(str, files), "-o", str(page_file)]) == 0
    assert CHROMIUM is not None
    headless = [
        CHROMIUM,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--no-first-run",
        f"--user-data-dir={tmp_path / 'profile'}",
    ]
    dom = subprocess.run(
        [*headless, "--dump-dom", page_file.as_uri()], capture_output=True, text=True, timeout=90
    ).stdout
    page = Page()
    page.feed(dom)
    assert sorted(page.peers) == ["agent-a", "client-c"], dom[:2000]
    assert page.links and all(target in page.ids for target in page.links)
    assert page.svgs == 2
    # One report alone is the same page with one column: the single-file HTML report of a peer.
    single = tmp_path / "agent-a.html"
    assert main(["matrix", str(files[0]), "-o", str(single)]) == 0
    one = Page()
    one.feed(
        subprocess.run([*headless, "--dump-dom", single.as_uri()], capture_output=True, text=True, timeout=90).stdout
    )
    assert one.peers == ["agent-a"] and one.svgs == 1 and all(t in one.ids for t in one.links)
    shot = tmp_path / "matrix.png"
    subprocess.run(
        [*headless, "--window-size=1200,900", f"--screenshot={shot}", page_file.as_uri()],
        capture_output=True,
        timeout=90,
    )
    assert shot.is_file() and shot.stat().st_size > 10_000  # something was drawn
