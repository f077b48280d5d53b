"""The Python example of docs/using-the-mocks.md (linked from the README) runs as written."""

from __future__ import annotations

import re
import subprocess
import sys

from tests.e2e._suite_run import ROOT


def test_the_python_example_runs(tmp_path: object) -> None:
    text = (ROOT / "docs" / "using-the-mocks.md").read_text("utf-8")
    # The scripts; blocks that open with their file name are example test files, which
    # tests/e2e/test_testing_fixtures.py runs as a project.
    blocks = [b for b in re.findall(r"```python\n(.*?)```", text, flags=re.S) if not re.match(r"# [\w.]+\.py\n", b)]
    assert blocks, "docs/using-the-mocks.md has no python example"
    for code in blocks:
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=ROOT)
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert proc.stdout.split()[0] == "end_turn" and proc.stdout.strip().endswith("[]"), proc.stdout
