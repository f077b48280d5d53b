"""The stateful fuzzer's replay files land under reports/: they are reports, read elsewhere."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from acp_conformance.fuzz._findings import Finding
from acp_conformance.fuzz.stateful import write_scenario
from acp_conformance.transcript import Transcript


def test_replay_files_carry_no_path_of_this_machine(tmp_path: Path) -> None:
    sandbox = Path(tempfile.gettempdir()) / "pytest-of-someone" / "pytest-7" / "test_x0" / "session-3"
    frame = {"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": {"cwd": str(sandbox), "mcpServers": []}}
    transcript = Transcript(label="agent")
    transcript.add("out", json.dumps(frame).encode() + b"\n", frame)
    finding = Finding("cancel.stop-reason", f"the turn in {sandbox} ended end_turn", "steps: prompt; cancel")
    where = write_scenario(tmp_path / "out", finding, transcript, ["new_session()"], "replay: ...")
    written = sorted((tmp_path / "out").iterdir())
    assert [p.suffix for p in written] == [".jsonl", ".yaml"], where
    for path in written:
        text = path.read_text("utf-8")
        assert tempfile.gettempdir() + "/" not in text, (path.name, text[:400])
    assert "<tmp>/" in written[0].read_text("utf-8")  # masked, not dropped: the evidence stays readable


def test_a_pytest_temp_path_cut_short_keeps_no_user_name() -> None:
    """A peer that echoes our frame clipped (zed codex-acp's errors do) may cut the path of
    pytest's temporary directory before the part that names the run: the user's name still goes."""
    from acp_conformance.redaction import machine_paths

    base = Path(tempfile.gettempdir()) / "pytest-of-someone"
    whole = machine_paths(f'"cwd":"{base}/pytest-8001/popen-gw0/test_x0/session-1"')
    assert whole == '"cwd":"<tmp>/popen-gw0/test_x0/session-1"'
    for cut in (f"{base}/pytest-8...", f"{base}/pyt...", f"{base}..."):
        masked = machine_paths(f'\\"cwd\\":\\"{cut} (1808 chars)')
        assert "someone" not in masked and "<tmp>/" in masked, masked
