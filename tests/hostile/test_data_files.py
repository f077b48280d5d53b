"""Scenario files and transcripts are data: loading one never executes code from it.

Users share transcripts of hostile peers and write scenarios; a crafted file
must at worst be rejected with a message, never run anything.  Each payload
below would create a marker file if it were executed.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

import orjson
import pytest

from acp_conformance.errors import ScenarioError
from acp_conformance.transcript import Transcript


def payloads(marker: Path) -> list[str]:
    cmd = f"touch {marker}"
    return [
        f"!!python/object/apply:os.system [{cmd!r}]\n",
        f"scenario: x\nsteps: !!python/object/apply:os.system [{cmd!r}]\n",
        "scenario: x\nsteps:\n  - !!python/name:os.system\n",
        f"scenario: !!python/object/new:subprocess.Popen [[sh, -c, {cmd!r}]]\n",
        "scenario: !!binary aGVsbG8=\n",
        # A billion laughs: aliases are refused outright.
        'a: &a ["x","x","x","x","x","x","x","x","x"]\n'
        "b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\n"
        "c: [*b,*b,*b,*b,*b,*b,*b,*b,*b]\n",
        # Template expressions are lookups, not code (a well-formed file otherwise).
        TEMPLATED.replace("EXPR", f'__import__("os").system("{cmd}")'),
        TEMPLATED.replace("EXPR", "fake.__class__"),
    ]


TEMPLATED = """scenario: evil-template
plays: client
steps:
  - send:
      request: session/new
      params: {cwd: '{{EXPR}}', mcpServers: []}
"""


def loader() -> Any:
    try:
        return importlib.import_module("acp_conformance.scenario.loader")
    except ImportError:
        pytest.skip("no scenario loader in this version")


@pytest.mark.parametrize("index", range(8))
def test_crafted_scenario_files_are_rejected_not_executed(tmp_path: Path, index: int) -> None:
    marker = tmp_path / "executed"
    text = payloads(marker)[index]
    path = tmp_path / "evil.yaml"
    path.write_text(text)
    with pytest.raises(ScenarioError) as info:
        loader().load_scenario(path)
    assert str(path) in str(info.value), "the message names the file"
    assert not marker.exists(), "loading the scenario executed code"


def test_crafted_transcripts_load_as_plain_data(tmp_path: Path) -> None:
    marker = tmp_path / "executed"
    records = [
        {"t": 0.0, "dir": "in", "raw": f"__import__('os').system('touch {marker}')"},
        {"t": 0.1, "dir": "in", "raw": '{"jsonrpc":"2.0","method":"_x","params":{"$type":"os.system"}}'},
        {"t": 0.2, "dir": "note", "raw": "!!python/object/apply:os.system ['touch x']"},
        {"t": 0.3, "dir": "stderr", "raw": "\x1b]0;title\x07 terminal escape"},
        {"t": 0.4, "dir": "in", "raw": "{}", "violations": [{"clause": "transport.utf8", "message": "m"}]},
    ]
    data = b"".join(orjson.dumps(r) + b"\n" for r in records)
    t = Transcript.from_jsonl(data, label="evil")
    assert [e.text() for e in t.entries] == [r["raw"] for r in records]
    assert t.entries[1].message == {"jsonrpc": "2.0", "method": "_x", "params": {"$type": "os.system"}}
    assert not marker.exists()
    with pytest.raises(ValueError, match="line 2: not JSON"):
        Transcript.from_jsonl(b'{"t":0,"dir":"in","raw":"{}"}\n\x80\x81 not json\n', label="evil")
