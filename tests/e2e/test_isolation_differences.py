"""The rule the equivalence proof applies (``isolation_differences``): what counts as the two
isolation modes judging otherwise, and what does not."""

from __future__ import annotations

from typing import Any

from tests.e2e._suite_run import SuiteRun, isolation_differences


def run(*tests: tuple[str, str, str, str]) -> SuiteRun:
    """A run from (clause, node id, per-test status, message); a clause's status is its worst."""
    order = ["PASS", "INCONCLUSIVE", "WARN", "FAIL"]
    clauses: dict[str, dict[str, Any]] = {}
    for cid, node, status, message in tests:
        c = clauses.setdefault(cid, {"id": cid, "status": "PASS", "tests": []})
        c["tests"].append({"nodeid": node, "status": status, "message": message})
        c["status"] = max(c["status"], status, key=order.index)
    return SuiteRun(0, "", {"clauses": list(clauses.values())})


def test_a_fail_in_one_mode_only_is_a_difference_per_test_even_when_the_clause_agrees() -> None:
    a = run(("c", "test_x.py::test_a", "FAIL", "m"), ("c", "test_x.py::test_b", "PASS", ""))
    b = run(("c", "test_x.py::test_a", "PASS", ""), ("c", "test_x.py::test_b", "FAIL", "m"))
    assert isolation_differences(a, b) == [
        "c in test_x.py::test_a: FAIL with a process per test, PASS with reuse",
        "c in test_x.py::test_b: PASS with a process per test, FAIL with reuse",
    ]


def test_a_campaign_may_meet_a_breach_in_one_run_only_if_the_clause_agrees() -> None:
    a = run(("c", "test_fuzz.py::test_fuzz_odd_ids", "FAIL", "m"), ("c", "test_fuzz.py::test_fuzz_other", "FAIL", "m"))
    b = run(("c", "test_fuzz.py::test_fuzz_odd_ids", "PASS", ""), ("c", "test_fuzz.py::test_fuzz_other", "FAIL", "m"))
    assert isolation_differences(a, b) == []
    lone = run(("c", "test_fuzz.py::test_fuzz_odd_ids", "PASS", ""), ("c", "test_fuzz.py::test_fuzz_other", "PASS", ""))
    assert isolation_differences(a, lone) == ["c: FAIL with a process per test, PASS with reuse"]


def test_an_inconclusive_that_says_why_is_excused_against_a_pass_and_one_that_does_not_is_not() -> None:
    a = run(("c", "test_x.py::test_a", "PASS", ""))
    assert isolation_differences(a, run(("c", "test_x.py::test_a", "INCONCLUSIVE", "lost the race"))) == []
    assert isolation_differences(a, run(("c", "test_x.py::test_a", "INCONCLUSIVE", " "))) == [
        "c: PASS with a process per test, INCONCLUSIVE with reuse"
    ]
