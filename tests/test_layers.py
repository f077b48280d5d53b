"""Imports flow one way (see the layer table in docs/architecture.md).

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
    ("acp_conformance._proctree", 0),
    ("acp_conformance._extras", 0),
    ("acp_conformance._watchdog", 0),
    ("acp_conformance._cache", 0),
    ("acp_conformance.errors", 0),
    ("acp_conformance.redaction", 0),
    ("acp_conformance.prompts", 0),
    ("acp_conformance.core", 1),
    ("acp_conformance._tasks", 2),
    ("acp_conformance.transport", 2),
    ("acp_conformance.model_stub", 2),
    ("acp_conformance.schema", 2),
    ("acp_conformance.transcript", 3),
    ("acp_conformance.outbox", 3),
    ("acp_conformance.handlers", 3),
    ("acp_conformance.deadlines", 3),
    ("acp_conformance.peer", 3),
    ("acp_conformance.clauses", 4),
    ("acp_conformance.results", 4),
    ("acp_conformance.checks", 4),
    ("acp_conformance.endpoints", 5),
    ("acp_conformance.client", 5),
    ("acp_conformance.profiles", 5),
    ("acp_conformance.scenario", 5),
    ("acp_conformance.proxy", 5),
    ("acp_conformance.strategies", 5),
    ("acp_conformance.fuzz", 5),
    ("acp_conformance.harness", 5),
    ("acp_conformance.reporting", 6),
    ("acp_conformance.plugin", 7),
    ("acp_conformance.suite", 7),
    ("acp_conformance.testing", 7),
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


def imports(path: Path, *, typing_only: bool = True) -> set[str]:
    """Every module ``path`` imports, at any depth (a function-level import is a dependency
    too); ``typing_only=False`` leaves out the ``if TYPE_CHECKING:`` blocks, which never run."""
    tree = ast.parse(path.read_text("utf-8"))
    skipped: set[int] = set()
    if not typing_only:
        for node in ast.walk(tree):
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                skipped.update(id(sub) for stmt in node.body for sub in ast.walk(stmt))
    out: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.add(node.module)
            # ``from package import submodule`` depends on the submodule, not on the package's face
            out.update(f"{node.module}.{a.name}" for a in node.names if f"{node.module}.{a.name}" in KNOWN)
    return out


MODULES = sorted(p for p in PKG.rglob("*.py"))
KNOWN = {module_name(p) for p in MODULES}


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


def _owner(name: str) -> str | None:
    """The module of ours that ``name`` (an import target) resolves to."""
    while name and name not in KNOWN:
        name = name.rpartition(".")[0]
    return name or None


def _graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for path in MODULES:
        me = module_name(path)
        deps = {_owner(i) for i in imports(path, typing_only=False) if i.split(".")[0] == "acp_conformance"}
        deps = {d for d in deps if d is not None and d != me}
        # a module's import of a submodule of its own package is fine; its import of its
        # own package face is not a dependency on anything but itself
        graph[me] = {d for d in deps if not me.startswith(d + ".")}
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp: list[str] = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_no_import_cycles_even_within_a_layer() -> None:
    """Layers allow any import within a layer; this forbids the cycles that leaves room for
    (the plugin and its client half, the mock agent's CLI and its scenario agent used to import
    each other).  Function-level imports count: a cycle deferred to call time is still a
    cycle in the design."""
    assert _cycles(_graph()) == []


def test_the_cycle_detector_sees_a_cycle() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
