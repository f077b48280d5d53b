"""Scenario files are data: safe YAML, a strict model, and errors that name file, line and step."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from acp_conformance.errors import ScenarioError
from acp_conformance.scenario.library_index import library_dir
from acp_conformance.scenario.loader import load_scenario, load_text, parse_yaml
from acp_conformance.scenario.schema_export import schema_text

LIBRARY = library_dir()
FILES = sorted(LIBRARY.glob("*/*.yaml"))

HEAD = """scenario: demo
plays: client
steps:
"""


def problems(text: str) -> str:
    with pytest.raises(ScenarioError) as info:
        load_text(text, "demo.yaml")
    return str(info.value)


# ----------------------------------------------------------------- YAML safety
@pytest.mark.parametrize(
    "doc",
    [
        "a: !!python/object/apply:os.system ['echo pwned']\n",
        "a: !!python/name:os.system\n",
        "a: !!binary aGVsbG8=\n",
        "a: !custom 1\n",
        "a: !!set {x}\n",
    ],
)
def test_tags_are_refused_and_nothing_runs(doc: str) -> None:
    with pytest.raises(ScenarioError, match=r"demo\.yaml:1: .*(not allowed|tag)"):
        parse_yaml(doc, "demo.yaml")


def test_anchors_and_aliases_are_refused() -> None:
    with pytest.raises(ScenarioError, match=r"demo\.yaml:2: .*aliases"):
        parse_yaml("a: &x [1, 2]\nb: *x\n", "demo.yaml")


def test_duplicate_keys_are_refused_with_their_line() -> None:
    with pytest.raises(ScenarioError, match=r"demo\.yaml:3: duplicate key 'a'"):
        parse_yaml("a: 1\nb: 2\na: 3\n", "demo.yaml")


def test_values_stay_json_no_yaml_1_1_surprises() -> None:
    data, _ = parse_yaml("n: no\ny: yes\no: off\nd: 2024-01-02\nt: true\nz: null\ni: 010\nf: 1.5\nx: 0x10\ne: ~\n")
    assert data == {
        "n": "no",
        "y": "yes",
        "o": "off",
        "d": "2024-01-02",
        "t": True,
        "z": None,
        "i": 10,
        "f": 1.5,
        "x": "0x10",
        "e": None,
    }


def test_yaml_syntax_errors_name_the_line() -> None:
    text = problems(HEAD + "  - send: {request: x\n  - note: y\n")
    assert text.startswith("demo.yaml:5: YAML syntax:") and "started at line 4" in text, text


def test_line_numbers_are_recorded() -> None:
    _, lines = parse_yaml("a:\n  b:\n    - 1\n    - 2\n")
    assert lines[("a", "b", 1)] == 4


# ----------------------------------------------------------------- the model
@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("  - sleep: 1\n", r"demo\.yaml:4: steps\[0\]: there is no sleep step"),
        ("  - frobnicate: {}\n", r"demo\.yaml:4: steps\[0\]: a step is a mapping with exactly one of"),
        ("  - send: {request: a}\n    note: x\n", r"exactly one of.*got send, note"),
        ("  - expect: {request: x, within: 5 seconds, clause: schema.valid}\n", r"invalid duration '5 seconds'"),
        ("  - expect: {request: x}\n", r"must name the clause it proves"),
        ("  - expect: {request: x, clause: schema.valid, precondition: y}\n", r"clause or precondition, not both"),
        ("  - expect: {request: x, notification: y, clause: schema.valid}\n", r"exactly one of: request, notif"),
        ("  - expect: {request: x, clause: schema.valid, bogus: 1}\n", r"unknown key 'bogus'"),
        ("  - expect_nothing: {request: x, clause: schema.valid}\n", r"needs within .* or until"),
        ("  - answer: {request: r}\n", r"exactly one of: result, error, policy"),
        ("  - answer: {request: r, policy: hold}\n", r"hold/never means not answering"),
        ("  - wait: {}\n", r"wait needs exactly one of"),
        ("  - parallel: [[{note: a}]]\n", r"parallel"),
        ("  - raw: {hex: zz}\n", r"invalid hex"),
        ("  - send: {notification: n, round_trip: false}\n", r"round_trip applies to while_pending"),
    ],
)
def test_model_errors_name_file_line_and_step(body: str, expected: str) -> None:
    import re

    text = problems(HEAD + body)
    assert re.search(expected, text), text
    assert text.startswith("demo.yaml:")


def test_missing_top_level_keys() -> None:
    text = problems("scenario: demo\nsteps:\n  - note: x\n")
    assert "missing required key 'plays'" in text


def test_permission_policy_only_for_permission_requests() -> None:
    text = problems(HEAD.replace("steps:\n", "answers: {fs/read_text_file: allow_once}\nsteps:\n") + "  - note: x\n")
    assert "permission policy" in text


# --------------------------------------------------------------- the meaning
@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("  - expect: {request: x, clause: no.such-clause}\n", r"demo\.yaml:4: steps\[0\] \(expect\): unknown clause"),
        (
            "  - expect: {request: x, clause: perm.response.shape}\n",
            r"constrains the client, but this scenario \(plays: client\) tests the agent",
        ),
        ("  - expect: {response: nope, clause: schema.valid}\n", r"response: 'nope' is not defined before"),
        ("  - send: {request: x, params: {a: '{{who}}'}}\n", r"\{\{who\}\} is not defined before this step"),
        ("  - send: {request: x, params: {a: '{{ 1bad }}'}}\n", r"malformed template"),
        ("  - send: {request: x, params: {a: '{{fake.no_such_provider}}'}}\n", r"unknown Faker provider"),
        ("  - expect: {request: x, params: {a: $anyy}, clause: schema.valid}\n", r"unknown matcher '\$anyy'"),
        ("  - expect: {request: x, params: {a: '$regex(()'}, clause: schema.valid}\n", r"invalid regular expression"),
        ("  - answer: {request: nope, result: {}}\n", r"request: 'nope' is not defined"),
        ("  - wait: {captured: never_set}\n", r"nothing in this scenario captures 'never_set'"),
        ("  - send: {notification: n, while_pending: turn}\n", r"while_pending: 'turn' is not defined before"),
    ],
)
def test_semantic_errors_name_file_line_and_step(body: str, expected: str) -> None:
    import re

    text = problems(HEAD + body)
    assert re.search(expected, text), text


def test_every_problem_is_listed_not_just_the_first() -> None:
    text = problems(HEAD + "  - expect: {request: x, clause: bad.one}\n  - expect: {request: y, clause: bad.two}\n")
    assert "demo.yaml:4" in text and "demo.yaml:5" in text


def test_names_from_parallel_branches_are_visible_after_a_wait() -> None:
    load_text(
        HEAD
        + """  - parallel:
      - - expect: {request: session/request_permission, as: perm, precondition: asked}
      - - wait: {captured: perm}
        - answer: {request: perm, result: {outcome: {outcome: cancelled}}}
""",
        "demo.yaml",
    )


def test_a_missing_file_is_a_scenario_error() -> None:
    with pytest.raises(ScenarioError, match="no such scenario file"):
        load_scenario("/nonexistent/scenario.yaml")


def test_clauses_in_document_order() -> None:
    s = load_text(
        HEAD
        + "  - expect: {request: x, clause: [schema.valid, jsonrpc.version-field]}\n"
        + "  - if: {capability: loadSession}\n    then:\n      - check: {ref: seed, matches: $integer, "
        + "clause: session.load.response}\n",
        "demo.yaml",
    )
    assert s.clauses() == ["schema.valid", "jsonrpc.version-field", "session.load.response"]
    assert s.line_of("steps[1].then[0]") == 7


# ------------------------------------------------------------ the library
def test_the_library_exists() -> None:
    assert len([f for f in FILES if f.parent.name == "agent"]) >= 10
    assert [f for f in FILES if f.parent.name == "client"]


@pytest.mark.parametrize("path", FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_library_files_load_and_match_the_published_schema(path: Path) -> None:
    scenario = load_scenario(path)
    assert scenario.scenario.removeprefix("client-") == path.stem
    assert scenario.plays == ("client" if path.parent.name == "agent" else "agent")
    assert scenario.clauses(), "every library scenario proves at least one clause"
    data, _ = parse_yaml(path.read_text("utf-8"), str(path))
    schema = json.loads((LIBRARY / "schema.json").read_text("utf-8"))
    errors = sorted(jsonschema.Draft202012Validator(schema).iter_errors(data), key=str)
    assert not errors, errors[0].message
    assert path.read_text("utf-8").startswith("# yaml-language-server: $schema=../schema.json\n")


def test_published_schema_is_up_to_date() -> None:
    committed = (LIBRARY / "schema.json").read_text("utf-8")
    assert committed == schema_text(), (
        "scenarios/schema.json is stale: run `python -m acp_conformance.scenario schema -o scenarios/schema.json`"
    )


def test_published_schema_is_a_valid_json_schema() -> None:
    schema = json.loads((LIBRARY / "schema.json").read_text("utf-8"))
    jsonschema.Draft202012Validator.check_schema(schema)
    assert schema["$schema"].endswith("2020-12/schema")


def test_published_schema_rejects_what_the_model_rejects() -> None:
    schema = json.loads((LIBRARY / "schema.json").read_text("utf-8"))
    validator = jsonschema.Draft202012Validator(schema)
    bad = {"scenario": "x", "plays": "client", "steps": [{"sleep": 1}]}
    assert list(validator.iter_errors(bad))
    bad_key = {"scenario": "x", "plays": "client", "steps": [{"note": "a", "colour": "red"}]}
    assert list(validator.iter_errors(bad_key))
