"""Patterns and templates: the little languages inside scenario values."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from acp_conformance.scenario.match import TemplateError, lookup, match, pattern_problems, render

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4),
    max_leaves=20,
)


def ok(pattern: Any, value: Any) -> bool:
    return match(pattern, value, {}) is None


@given(json_values)
def test_exact_matches_itself(value: Any) -> None:
    assert ok({"$exact": value}, value)


@given(st.dictionaries(st.text(max_size=5).filter(lambda k: not k.startswith("$")), json_values, max_size=5))
def test_an_empty_mapping_matches_any_mapping(value: dict[str, Any]) -> None:
    assert ok({}, value)
    assert ok("$object", value)


@pytest.mark.parametrize(
    ("pattern", "value", "good"),
    [
        ({"a": 1}, {"a": 1, "b": 2}, True),  # partial
        ({"a": 1}, {"a": "1"}, False),  # JSON types are strict
        ({"a": 1}, {"a": True}, False),  # true is not 1
        (1, 1.0, True),
        ([1, 2], [1, 2, 3], False),  # lists: same length
        ({"a": "$absent"}, {"b": 1}, True),
        ({"a": "$absent"}, {"a": None}, False),
        ({"a": "$any"}, {"a": None}, True),
        ({"a": "$any"}, {}, False),
        ("$string", "x", True),
        ("$integer", 1.5, False),
        ("$number", True, False),
        ("$null", None, True),
        ("$nonempty", [], False),
        ("$regex(^sess_)", "sess_1", True),
        ("$regex(^sess_)", 7, False),
        ({"$one_of": ["a", "b"]}, "b", True),
        ({"$one_of": ["a", {"$absent": 1}]}, "c", False),
        ({"$not": "a"}, "b", True),
        ({"$contains": {"kind": "x"}}, [{"kind": "y"}, {"kind": "x", "n": 1}], True),
        ({"$all": ["$string", "$regex(b)"]}, "abc", True),
        ("$$any", "$any", True),  # escaped literal
        ("$/cancel_request", "$/cancel_request", True),  # not matcher syntax: literal
    ],
)
def test_pattern_semantics(pattern: Any, value: Any, good: bool) -> None:
    assert ok(pattern, value) is good


def test_captures_only_on_success() -> None:
    got: dict[str, Any] = {}
    assert match({"id": "$capture(sid)", "x": 1}, {"id": "s1", "x": 2}, got) is not None
    assert got == {}
    assert match({"id": "$capture(sid)", "x": 1}, {"id": "s1", "x": 1}, got) is None
    assert got == {"sid": "s1"}


def test_mismatch_names_the_path() -> None:
    miss = match({"result": {"stopReason": "cancelled"}}, {"result": {"stopReason": "end_turn"}}, {})
    assert miss is not None
    assert str(miss) == 'at /result/stopReason: expected "cancelled", got "end_turn"'


def test_static_problems() -> None:
    assert pattern_problems({"a": "$anything"})
    assert pattern_problems("$capture()")
    assert pattern_problems({"$one_of": "x"})
    assert pattern_problems({"$nope": 1, "b": 2})
    assert not pattern_problems({"a": ["$any", {"$not": "$null"}], "b": "$capture(x)"})


def resolver(values: dict[str, Any]) -> Any:
    def resolve(root: str, path: list[str | int], expr: str) -> Any:
        if root not in values:
            raise TemplateError(f"{root} is not set")
        return lookup(values[root], path, expr)

    return resolve


def test_a_whole_template_keeps_the_json_type() -> None:
    values = {"perm": {"id": 7, "params": {"options": [{"optionId": "a"}]}}}
    assert render({"id": "{{perm.id}}"}, resolver(values)) == {"id": 7}
    assert render("{{ perm.params.options[0].optionId }}", resolver(values)) == "a"
    assert render("id={{perm.id}} of {{perm.params.options.0.optionId}}", resolver(values)) == "id=7 of a"
    assert render("{{a}} {{b}}", resolver({"a": "x", "b": "y"})) == "x y"


def test_template_errors_explain() -> None:
    with pytest.raises(TemplateError, match="no 'nope'"):
        render("{{perm.nope}}", resolver({"perm": {"id": 1}}))
    with pytest.raises(TemplateError, match="not set"):
        render("{{ghost}}", resolver({}))
