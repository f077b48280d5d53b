"""Fields of the official *unstable* schema are protocol names, not custom data.

The stable schema is the yardstick for ext.no-root-fields, but a capability the
unstable schema defines at the same place (claude-agent-acp advertises
``sessionCapabilities.fork`` and ``providers``) is a draft protocol feature: the
suite names it and does not fail it.  The broken agent ``custom-root-field``
(tests/e2e/test_broken_agents.py) proves the check still fails on real custom data.
"""

from __future__ import annotations

import sys
from pathlib import Path

from tests.e2e._suite_run import ROOT, run_suite

AGENT = ROOT / "tests" / "peers" / "draft_feature_agent.py"


def test_draft_capabilities_are_not_custom_root_fields(tmp_path: Path) -> None:
    run = run_suite(f"{sys.executable} {AGENT}", tmp_path, "--acp-clause=ext.no-root-fields")
    clause = next(c for c in run.report["clauses"] if c["id"] == "ext.no-root-fields")
    assert clause["status"] == "PASS", run.stdout[-3000:]
    messages = " ".join(t["message"] for t in clause["tests"])
    assert "unstable schema" in messages and "sessionCapabilities/fork" in messages, messages
