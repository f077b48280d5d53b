"""Scenario files: scripted ACP conversations that prove clauses.

A scenario (YAML, see ``scenarios/README.md``) says what one side sends,
what it expects back and which clause each expectation proves.  The same
format drives the client side against an agent and the agent side against
a client.  The pieces:

* ``model`` - the format (pydantic; ``scenarios/schema.json`` is generated from it);
* ``loader`` - safe loading and checking, errors with file and line;
* ``match`` - templates and partial patterns;
* ``engine`` - runs a scenario on a ``Peer`` of either role (with ``judge``,
  ``answers`` and ``frames``);
* ``result`` - settings, per-step outcomes and the verdict (no engine needed);
* ``runner`` - against an agent command, file in, JSON verdict out;
* ``convert`` - transcript -> scenario;
* ``cli`` - ``python -m acp_conformance.scenario run|validate|schema|convert|check|proxy``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from acp_conformance.scenario.engine import Engine, run_scenario
    from acp_conformance.scenario.library_index import library_dir
    from acp_conformance.scenario.loader import load_scenario, load_text
    from acp_conformance.scenario.model import Scenario
    from acp_conformance.scenario.result import Outcome, ScenarioResult, Settings
    from acp_conformance.scenario.runner import play_against, run_against_agent, run_scenario_file

__all__ = [
    "Engine",
    "Outcome",
    "Scenario",
    "ScenarioResult",
    "Settings",
    "library_dir",
    "load_scenario",
    "load_text",
    "play_against",
    "run_against_agent",
    "run_scenario",
    "run_scenario_file",
]

_WHERE = {
    "Engine": "engine",
    "Outcome": "result",
    "ScenarioResult": "result",
    "Settings": "result",
    "run_scenario": "engine",
    "library_dir": "library_index",
    "load_scenario": "loader",
    "load_text": "loader",
    "Scenario": "model",
    "play_against": "runner",
    "run_against_agent": "runner",
    "run_scenario_file": "runner",
}


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        import importlib

        return getattr(importlib.import_module(f"{__name__}.{_WHERE[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
