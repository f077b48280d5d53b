"""The published JSON Schema of the scenario format, generated from the models.

``python -m acp_conformance.scenario schema -o scenarios/schema.json``
regenerates it; a unit test fails when the committed copy is stale.  Point
an editor at it (the library's files start with a ``yaml-language-server``
comment) to get completion and validation while writing scenarios.
"""

from __future__ import annotations

from typing import Any

import orjson

from acp_conformance.scenario.model import Scenario

__all__ = ["SCHEMA_ID", "scenario_schema", "schema_text"]

SCHEMA_ID = "https://github.com/acp-conformance/acp-conformance/scenarios/schema.json"


def scenario_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of a scenario file."""
    body = Scenario.model_json_schema(by_alias=True, mode="validation")
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": SCHEMA_ID,
        "$comment": "GENERATED from acp_conformance/scenario/model.py by "
        "`python -m acp_conformance.scenario schema -o scenarios/schema.json`; DO NOT EDIT.",
        **body,
        "title": "ACP conformance scenario",
    }


def schema_text() -> str:
    """The schema as committed: sorted keys, two-space indent, trailing newline."""
    return orjson.dumps(scenario_schema(), option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS).decode() + "\n"
