"""The pytest plugin: hooks only, everything they do lives in the modules beside this one.

* ``options``: every ``--acp-*`` option and how its value is checked;
* ``state``: ``AcpState``, the options turned into the peer's configuration, once per process;
* ``fixtures``: ``acp_agent`` and ``acp_client``, a fresh harness per test;
* ``outcomes``: how a test's outcome becomes clause results (typed skips for NOT_APPLICABLE and
  INCONCLUSIVE);
* ``reporter``: the results shipped from workers, the reports written on the controller;
* ``bindings``: which clauses the bundled suites check, read from their markers.

Registered through the ``pytest11`` entry point, so ``pip install "acp-conformance[suite]"`` is all it
takes for ``pytest --acp-agent="<command>"`` to collect the bundled agent suite from any
directory.  Without ``--acp-agent`` / ``--acp-client`` the plugin stays out of the way: it
registers its options and marker and imports nothing heavier than pytest.
"""

from __future__ import annotations

import gc
import sys
from collections.abc import Generator
from pathlib import Path
from typing import Any

import pytest

from acp_conformance.plugin import options
from acp_conformance.plugin.fixtures import acp_agent, acp_agent_pool, acp_agent_thread_host, acp_client
from acp_conformance.plugin.keys import HARNESS, STATE

__all__ = ["acp_agent", "acp_agent_pool", "acp_agent_thread_host", "acp_client"]

_REPORTER = "acp-conformance-reporter"


def pytest_addoption(parser: pytest.Parser) -> None:
    options.add_options(parser)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "acp_clause(*ids): the ACP clause ids this test checks")
    config.addinivalue_line(
        "markers", "acp_own_process: this test starts the agent afresh even under --acp-isolation=connection"
    )
    config.addinivalue_line(
        "markers",
        "acp_sole_process: as acp_own_process, and no other agent process of this pytest process lives beside it",
    )
    agent, client = config.getoption("acp_agent"), config.getoption("acp_client")
    for name, value in (("--acp-agent", agent), ("--acp-client", client)):
        if value is not None and not value.strip():
            raise pytest.UsageError(f"{name} is empty: give the command line of the peer to certify")
    if agent and client:
        raise pytest.UsageError("give either --acp-agent or --acp-client, not both")
    if not agent and not client:
        return
    from acp_conformance._extras import require_suite
    from acp_conformance.errors import ConfigurationError

    try:
        require_suite("the conformance suite")
    except ConfigurationError as exc:
        raise pytest.UsageError(str(exc)) from None
    # The bundled suite's old marker name, registered only when the suite runs.
    config.addinivalue_line("markers", "clause(*ids): alias of acp_clause inside the bundled suite")
    from acp_conformance.plugin.bindings import suite_dir
    from acp_conformance.plugin.reporter import Reporter
    from acp_conformance.plugin.state import AcpState

    state = AcpState.from_config(config, "agent" if agent else "client")
    config.stash[STATE] = state
    controller = not hasattr(config, "workerinput")
    if not config.option.collectonly:
        from acp_conformance.plugin import lifetime

        lifetime.install(worker=not controller)
    if controller:
        state.fuzz_line = options.resolve_fuzz(config)  # both roles have fuzz campaigns
    if config.args_source is not pytest.Config.ArgsSource.ARGS:
        config.args = [str(suite_dir(state.role))]
    if controller:
        config.pluginmanager.register(Reporter(config, state), _REPORTER)
    # What is alive now (pytest, its plugins, Faker's tables, the schema, the registry) lives as
    # long as the run: leave it out of every later collection.  Each full collection of a suite
    # run otherwise walks it again; in `pytest --co --acp-agent=...` that was ~0.1 s of 0.65 s
    # CPU (A/B, bench/README.md).  Only cycles among these objects that later become garbage
    # would stay unfreed, which for module-level state means none in practice.
    gc.freeze()


def pytest_report_header(config: pytest.Config) -> list[str] | None:
    state = config.stash.get(STATE, None)
    if state is None:
        return None
    s = state.schema
    lines = [
        f"acp {state.role}: {state.command}",
        f"acp schema: {s.version} from {s.source} {s.path} (sha256 {s.sha256[:12]})",
        *([f"acp schema WARNING: {s.mismatch()}"] if s.mismatch() else []),
    ]
    if state.client is not None:
        c = state.client
        lines.append(f"acp client profile: {c.profile.name} ({c.profile.source}), mode {c.mode}")
        if c.control is not None:
            from acp_conformance.harness.control import relay_command

            lines.append(
                "acp agent command for the client to launch: " + " ".join(relay_command(c.control, c.token or ""))
            )
    if state.fuzz_line:
        lines.append(state.fuzz_line)
    unbound = state.unbound_passive()
    if unbound:
        lines.append(f"acp selection: {', '.join(unbound)} judged on every exchange, so every test runs")
    return lines


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """A run selected by clause does not import the suite modules none of whose tests it keeps
    (``pytest_collection_modifyitems`` would deselect them all): the fuzz modules alone cost a
    third of a pytest start.  Which module checks what comes from the cached bindings."""
    state = config.stash.get(STATE, None)
    if state is None or not state.clauses or not collection_path.name.startswith("test_"):
        return None
    from acp_conformance.plugin.bindings import module_clauses, suite_dir

    if collection_path.parent != suite_dir(state.role) or state.unbound_passive():
        return None
    if module_clauses(state.role).get(collection_path.name, set()) & set(state.clauses):
        return None
    return True


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    state = config.stash.get(STATE, None)
    if state is None:
        return  # without --acp-agent / --acp-client the plugin judges nothing, markers included
    from acp_conformance.plugin.markers import marked_clauses

    marked = [(item, marked_clauses(item)) for item in items]
    if any(ids for _, ids in marked):
        from acp_conformance.clauses import registry
        from acp_conformance.errors import ConfigurationError

        reg = registry()
        for item, ids in marked:
            for cid in ids:
                if cid not in reg:
                    try:
                        reg.get(cid)
                    except ConfigurationError as exc:
                        raise pytest.UsageError(f"{item.nodeid}: @pytest.mark.acp_clause: {exc}") from None
    if not state.clauses:
        return
    if state.unbound_passive():
        return  # a stream-level clause no test is bound to is judged on all traffic: keep the lot
    wanted = set(state.clauses)
    keep: list[pytest.Item] = []
    drop: list[pytest.Item] = []
    for item, ids in marked:
        (keep if set(ids) & wanted else drop).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


@pytest.hookimpl(wrapper=True, trylast=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, None, None]:
    """A test whose borrowed agent connection proved not comparable with a fresh process (it was
    handed an earlier test's session) runs once more, on processes of its own: the attempt's
    results are forgotten, so its verdict is the one process mode gives.  Innermost (``trylast``),
    so the second run is captured and timed like the first."""
    try:
        return (yield)
    except Exception as exc:
        errors = sys.modules.get("acp_conformance.errors")  # imported if a harness raised it
        if errors is None or not isinstance(exc, errors.NotComparable) or HARNESS not in item.stash:
            raise
    from acp_conformance.harness.agent import AgentHarness  # imported already: it raised

    harness = item.stash[HARNESS]
    assert isinstance(harness, AgentHarness), "only the agent harness borrows connections"
    harness.start_over()
    item.runtest()
    return None


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, Any, None]:
    outcome = yield
    if HARNESS not in item.stash:
        return  # not a conformance test (or one that never reached its fixture)
    from acp_conformance.plugin.reporter import collect

    collect(item, call, outcome.get_result())


def _raise_pending_interrupt() -> None:
    lifetime = sys.modules.get("acp_conformance.plugin.lifetime")  # imported: a run with --acp-*
    if lifetime is not None:
        lifetime.raise_pending()


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_teardown(item: pytest.Item) -> None:
    """Before a test's teardown: an interrupt that came as its event loop stopped is raised here,
    not by the queued callback inside an async fixture's teardown (session finish tears down)."""
    _raise_pending_interrupt()


def pytest_runtest_logfinish(nodeid: str, location: tuple[str, int | None, str]) -> None:
    """Between tests: the same, for an interrupt that came as a teardown's loop stopped."""
    _raise_pending_interrupt()
