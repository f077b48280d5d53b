"""Imports flow one way (see the architecture table in README.md).

Walks every module's imports with ``ast`` and checks them against the
layer table, so a convenience import that would tie the sans-IO core to
anyio, or the suite library to the mocks, fails here first.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PKG = ROOT / "acp_conformance"

# module prefix -> layer; a module may import only from layers <= its own.
LAYERS: list[tuple[str, int]] = [
    ("acp_conformance._util", 0),
    ("acp_conformance.errors", 0),
    ("acp_conformance.redaction", 0),
    ("acp_conformance.core", 1),
    ("acp_conformance.transport", 2),
    ("acp_conformance.model_stub", 2),
    ("acp_conformance.schema", 2),
    ("acp_conformance.validation", 2),
    ("acp_conformance.transcript", 3),
    ("acp_conformance.peer", 3),
    ("acp_conformance.clauses", 4),
    ("acp_conformance.results", 4),
    ("acp_conformance.checks", 4),
    ("acp_conformance.control", 3),
    ("acp_conformance.client_harness", 5),
    ("acp_conformance.agent_endpoint", 5),
    ("acp_conformance.profiles", 5),
    ("acp_conformance.agent_profiles.pytest_shim", 7),
    ("acp_conformance.agent_profiles", 5),
    ("acp_conformance.scenario", 5),
    ("acp_conformance.proxy", 5),
    ("acp_conformance.strategies", 5),
    ("acp_conformance.fuzz", 5),
    ("acp_conformance.client", 5),
    ("acp_conformance.harness", 5),
    ("acp_conformance.reporting", 6),
    ("acp_conformance.suite_bindings", 7),
    ("acp_conformance.suite", 7),
    ("acp_conformance.pytest_plugin", 7),
    ("acp_conformance.client_plugin", 7),
    ("acp_conformance._pytest_keys", 7),
    ("acp_conformance.__main__", 8),
    ("acp_conformance", 8),
]

# third-party modules forbidden per layer (the core does no I/O; only layer 7 may import pytest)
FORBIDDEN = {
    1: {"anyio", "pytest", "subprocess", "asyncio", "jsonschema", "jsonschema_rs", "pydantic"},
    2: {"pytest"},
    3: {"pytest"},
    4: {"pytest", "anyio"},
    5: {"pytest"},
    6: {"pytest", "anyio"},
}


def layer_of(module: str) -> int:
    for prefix, layer in LAYERS:
        if module == prefix or module.startswith(prefix + "."):
            return layer
    raise AssertionError(f"{module} is not in the layer table; add it to tests/test_layers.py")


def module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text("utf-8"))
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.add(node.module)
    return out


MODULES = sorted(p for p in PKG.rglob("*.py"))


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(ROOT)))
def test_imports_flow_downward(path: Path) -> None:
    me = module_name(path)
    mine = layer_of(me)
    for imp in imports(path):
        top = imp.split(".")[0]
        if top in ("mock_agent", "mock_client"):
            pytest.fail(f"{me} imports {imp}: the suite reaches the mocks only as commands")
        if top == "acp_conformance":
            if imp == "acp_conformance":
                continue  # the package root only carries __version__
            theirs = layer_of(imp)
            assert theirs <= mine, f"{me} (layer {mine}) imports {imp} (layer {theirs}): imports must flow downward"
        elif top in FORBIDDEN.get(mine, set()):
            pytest.fail(f"{me} (layer {mine}) must not import {top}")


def _fuzz_graph() -> dict[str, set[str]]:
    """Imports among the modules of ``acp_conformance.fuzz`` (and its face, ``strategies``)."""
    paths = [PKG / "strategies.py", *sorted((PKG / "fuzz").glob("*.py"))]
    mods = {module_name(p): p for p in paths}
    return {m: {i for i in imports(p) if i in mods and i != m} for m, p in mods.items()}


def test_fuzz_package_has_no_import_cycle() -> None:
    """The strategy modules form a chain (``_expect`` ... ``_bytes``): putting an ``Expect`` constant
    or a frame builder beside its user, rather than where it is defined, closes a circle."""
    graph = _fuzz_graph()
    done: set[str] = set()

    def visit(node: str, path: list[str]) -> None:
        if node in path:
            cycle = [*path[path.index(node) :], node]
            pytest.fail("import cycle: " + " -> ".join(cycle))
        if node in done:
            return
        for nxt in sorted(graph[node]):
            visit(nxt, [*path, node])
        done.add(node)

    for start in sorted(graph):
        visit(start, [])


@pytest.mark.parametrize("path", sorted((PKG / "fuzz").glob("*.py")), ids=lambda p: p.name)
def test_fuzz_imports_no_pytest(path: Path) -> None:
    """The fuzz engine runs under pytest but never needs it: the suite's tests hold the pytest parts."""
    assert not {i for i in imports(path) if i.split(".")[0] in ("pytest", "_pytest")}, path.name
