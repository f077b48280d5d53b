"""The clause bindings are cached on disk, and a run selected by clause imports only what it runs."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from acp_conformance._cache import source_key_path
from acp_conformance.plugin.bindings import _imported_bindings, bindings


def test_the_cached_bindings_are_the_imported_ones() -> None:
    for role in ("agent", "client"):
        assert bindings(role) == _imported_bindings(role)


def test_any_change_to_a_source_file_is_a_new_cache_key(tmp_path: Path) -> None:
    (tmp_path / "suite").mkdir()
    module = tmp_path / "suite" / "test_x.py"
    module.write_text("A = 1\n")
    (tmp_path / "notes.txt").write_text("not a source\n")
    first = source_key_path("bindings", "agent", tmp_path)
    assert first is not None and first == source_key_path("bindings", "agent", tmp_path)
    (tmp_path / "notes.txt").write_text("still not a source\n")
    assert source_key_path("bindings", "agent", tmp_path) == first
    module.write_text("A = 22\n")
    assert source_key_path("bindings", "agent", tmp_path) != first
    assert source_key_path("bindings", "client", tmp_path) != source_key_path("bindings", "agent", tmp_path)


def test_a_run_selected_by_clause_skips_the_fuzz_modules(tmp_path: Path) -> None:
    """Hypothesis and the scenario models cost most of a pytest start; a run that selects clauses
    only scripted tests judge must not import them (the second run: the first fills the cache)."""
    argv = [
        sys.executable, "-X", "importtime", "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:faker", "-q",
        "--co", f"--acp-agent={sys.executable} -m mock_agent", "--acp-clause=jsonrpc.id-types",
    ]  # fmt: skip
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_ADDOPTS"}
    for _ in range(2):
        proc = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    imported = {line.rsplit("|", 1)[-1].strip() for line in proc.stderr.splitlines() if "|" in line}
    assert "test_jsonrpc.py::" in proc.stdout, proc.stdout[-2000:]  # what it selected was collected
    for heavy in ("hypothesis", "acp_conformance.fuzz.campaign", "acp_conformance.scenario.model"):
        assert heavy not in imported, f"{heavy} imported by a run that needs none of it"


def test_the_cached_library_index_is_what_the_files_say() -> None:
    from acp_conformance.scenario.library_index import library_dir, library_entries
    from acp_conformance.scenario.loader import load_scenario

    for kind in ("agent", "client"):
        entries = library_entries(kind)
        assert [e.path.name for e in entries] == sorted(p.name for p in (library_dir() / kind).glob("*.yaml"))
        for e in entries:
            s = load_scenario(e.path)
            assert (e.scenario, e.plays, e.tags, e.clauses) == (s.scenario, s.plays, tuple(s.tags), tuple(s.clauses()))
