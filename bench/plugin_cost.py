"""What installing acp-conformance costs another project's pytest runs: the plugin's imports
without any ``--acp-*`` option (the packaging issue's target: under 20 ms); and the fixed cost
of a suite start, the CPU of ``pytest --co --acp-agent=...`` (issue 18's target: under 0.6 s).

Measured with ``python -X importtime`` in fresh interpreters: the cumulative import time of
``acp_conformance.plugin`` after ``pytest`` itself is imported (pytest's own cost is not ours),
and, beside it, what an options-free ``pytest --co`` of an empty project costs with the plugin
and with ``-p no:acp_conformance``.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.common import PY, summarize

__all__ = ["plugin_md", "run_plugin_cost"]

_LINE = re.compile(r"import time:\s+(\d+)\s+\|\s+(\d+)\s+\|(\s*)(\S+)")


def _plugin_import_us() -> int:
    done = subprocess.run(
        [PY, "-X", "importtime", "-c", "import pytest; import acp_conformance.plugin"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    for line in done.stderr.splitlines():
        m = _LINE.match(line)
        if m and m.group(4) == "acp_conformance.plugin" and not m.group(3).strip(" "):
            return int(m.group(2))
    for line in done.stderr.splitlines():  # imported as a child of something else
        m = _LINE.match(line)
        if m and m.group(4) == "acp_conformance.plugin":
            return int(m.group(2))
    raise RuntimeError("acp_conformance.plugin not in the importtime output")


def _collect_s(project: Path, extra: list[str]) -> float:
    t0 = time.perf_counter()
    subprocess.run(
        [PY, "-m", "pytest", "-p", "no:cacheprovider", "--co", "-q", *extra],
        cwd=project,
        capture_output=True,
        timeout=120,
        check=False,
    )
    return time.perf_counter() - t0


def _suite_collect_cpu_s(project: Path) -> float:
    """User + system CPU of a ``pytest --co`` of the agent suite: its imports, the schema, the
    bindings, collection.  CPU, not wall: it is what every xdist worker pays again."""
    before = os.times()
    subprocess.run(
        [PY, "-m", "pytest", "-p", "no:cacheprovider", "--co", "-q", f"--acp-agent={shlex.quote(PY)} -m mock_agent"],
        cwd=project,
        capture_output=True,
        timeout=120,
        check=False,
    )
    after = os.times()
    return (after.children_user - before.children_user) + (after.children_system - before.children_system)


def run_plugin_cost(reps: int) -> dict[str, Any]:
    imports = [_plugin_import_us() / 1000 for _ in range(max(5, reps))]
    with tempfile.TemporaryDirectory() as tmp:
        project = Path(tmp)
        (project / "test_theirs.py").write_text("import pytest\n\n@pytest.mark.clause('x')\ndef test_x():\n    pass\n")
        with_plugin, without, suite = [], [], []
        for _ in range(max(3, reps)):
            with_plugin.append(_collect_s(project, []))
            without.append(_collect_s(project, ["-p", "no:acp_conformance"]))
            suite.append(_suite_collect_cpu_s(project))
    return {
        "suite_collect_cpu_s": summarize(suite, higher_is_better=False),
        "import_ms": summarize(imports, higher_is_better=False),
        "collect_with_s": summarize(with_plugin, higher_is_better=False),
        "collect_without_s": summarize(without, higher_is_better=False),
    }


def plugin_md(p: dict[str, Any]) -> str:
    imp = p["import_ms"]["median"]
    w, wo = p["collect_with_s"]["median"], p["collect_without_s"]["median"]
    return "\n".join(
        [
            "| measure | median | target |",
            "|---|---|---|",
            f"| `import acp_conformance.plugin` after `import pytest` | {imp:.1f} ms | < 20 ms |",
            f"| `pytest --co` of a project of one test, plugin installed | {w * 1000:.0f} ms | |",
            f"| the same with `-p no:acp_conformance` | {wo * 1000:.0f} ms | |",
            *(
                [f"| `pytest --co --acp-agent=...` (the agent suite), CPU | {suite * 1000:.0f} ms | < 600 ms |"]
                if (suite := (p.get("suite_collect_cpu_s") or {}).get("median")) is not None
                else []
            ),
        ]
    )
