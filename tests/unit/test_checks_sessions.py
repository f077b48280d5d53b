"""acp_conformance.checks.sessions, and the session-area checks that need --acp-auth-method.

The second part runs the agent suite (restricted to a few clauses) against
tests/peers/broken_agents_sessions.py's AGENTS: conforming bases for features
the reference agent lacks, among them the reference agent with --require-auth
(its breakages are proven in tests/e2e/test_broken_agents.py).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from acp_conformance.checks.sessions import (
    boolean_options,
    category_problems,
    chunk_text,
    default_value_problems,
    extra_result_keys,
    history,
    is_within,
    message_id_problems,
    missing_option_ids,
    mode_sync_problems,
    replay_problems,
    select_values,
    session_updates,
    trace_key_problems,
)
from acp_conformance.core.events import Notification, Response

Json = dict[str, Any]


def upd(kind: str, sid: str = "s", **fields: Any) -> Json:
    return {"sessionId": sid, "update": {"sessionUpdate": kind, **fields}}


def chunk(kind: str, text: str, mid: str | None = None) -> Json:
    fields: Json = {"content": {"type": "text", "text": text}}
    if mid is not None:
        fields["messageId"] = mid
    return upd(kind, **fields)


def select(oid: str, current: Any, values: list[str], **extra: Any) -> Json:
    return {
        "id": oid,
        "name": oid,
        "type": "select",
        "currentValue": current,
        "options": [{"value": v, "name": v} for v in values],
        **extra,
    }


# ------------------------------------------------------------------ updates
def test_session_updates_filters_by_window_and_session() -> None:
    events: list[Any] = [
        Notification("session/update", upd("plan", "a")),
        Response(1, {}, method="session/new"),
        Notification("session/update", upd("plan", "b")),
        Notification("_ext", {}),
        Notification("session/update", upd("agent_message_chunk", "a")),
    ]
    assert [u["sessionId"] for u in session_updates(events)] == ["a", "b", "a"]
    assert [u["sessionId"] for u in session_updates(events, 1, None, "a")] == ["a"]
    assert session_updates(events, 0, 1, "b") == []


def test_history_keeps_conversation_kinds_only() -> None:
    ups = [upd("available_commands_update"), upd("plan"), upd("current_mode_update"), chunk("user_message_chunk", "x")]
    assert [u["update"]["sessionUpdate"] for u in history(ups)] == ["plan", "user_message_chunk"]


def test_chunk_text_concatenates_text_chunks_of_one_kind() -> None:
    ups = [chunk("agent_message_chunk", "Hel"), chunk("agent_thought_chunk", "hmm"), chunk("agent_message_chunk", "lo")]
    assert chunk_text(ups, "agent_message_chunk") == "Hello"


def test_replay_problems_accepts_a_complete_replay() -> None:
    turn = [
        chunk("agent_message_chunk", "You said: "),
        chunk("agent_message_chunk", "hi"),
        upd("tool_call", toolCallId="t1"),
    ]
    replay = [
        chunk("user_message_chunk", "hi"),
        chunk("agent_message_chunk", "You said:  hi"),  # whitespace does not matter
        upd("tool_call", toolCallId="t1"),
    ]
    assert replay_problems([("hi", turn)], replay) == []


def test_replay_problems_names_what_is_missing() -> None:
    turn = [chunk("agent_message_chunk", "the answer"), upd("tool_call", toolCallId="t1")]
    problems = replay_problems([("the question", turn)], [chunk("agent_message_chunk", "something else")])
    assert len(problems) == 3
    assert "the question" in problems[0] and "the answer" in problems[1] and "1 tool call" in problems[2]


def test_message_ids_distinct_per_message() -> None:
    good = [
        chunk("user_message_chunk", "a", "u1"),
        chunk("user_message_chunk", "b", "u1"),
        chunk("agent_message_chunk", "c", "a1"),
        upd("tool_call", toolCallId="t"),
        chunk("agent_message_chunk", "d", "a1"),  # one agent message around a tool call is fine
        chunk("user_message_chunk", "e", "u2"),
        chunk("agent_message_chunk", "f"),
    ]
    assert message_id_problems(good) == []


def test_message_ids_shared_across_kinds_or_user_messages() -> None:
    shared = [chunk("user_message_chunk", "a", "m"), chunk("agent_message_chunk", "b", "m")]
    assert message_id_problems(shared) == ["messageId 'm' is used for both user_message_chunk and agent_message_chunk"]
    reused = [
        chunk("user_message_chunk", "a", "u"),
        chunk("agent_message_chunk", "b", "a1"),
        chunk("user_message_chunk", "c", "u"),
    ]
    assert message_id_problems(reused) == ["messageId 'u' is used for two different user messages"]
    switched = [
        chunk("user_message_chunk", "a", "u"),
        chunk("user_message_chunk", "b", "v"),
        chunk("user_message_chunk", "c", "u"),
    ]
    assert message_id_problems(switched) == ["messageId 'u' is used for two different user messages"]


# -------------------------------------------------------------------- paths
def test_is_within(tmp_path: Path) -> None:
    root = tmp_path / "root"
    (root / "sub").mkdir(parents=True)
    (tmp_path / "link").symlink_to(root)
    assert is_within(str(root), root)
    assert is_within(str(root / "sub" / "f.txt"), root)
    assert is_within(str(tmp_path / "link" / "f.txt"), root)
    assert not is_within(str(tmp_path / "rootless"), root)
    assert not is_within(str(tmp_path), root)


def test_extra_result_keys() -> None:
    assert extra_result_keys({}) == []
    assert extra_result_keys({"_meta": {"x": 1}}) == []
    assert extra_result_keys({"closed": True, "_meta": {}}) == ["closed"]
    assert extra_result_keys(None) == []


# ----------------------------------------------------------- config options
def test_select_values_flat_and_grouped() -> None:
    assert select_values(select("m", "a", ["a", "b"])) == ["a", "b"]
    grouped = {
        "id": "g",
        "type": "select",
        "options": [
            {"group": "x", "name": "X", "options": [{"value": "a", "name": "A"}]},
            {"group": "y", "name": "Y", "options": [{"value": "b", "name": "B"}]},
        ],
    }
    assert select_values(grouped) == ["a", "b"]


def test_default_value_problems() -> None:
    ok = [select("model", "fast", ["fast", "smart"]), {"id": "b", "type": "boolean", "currentValue": False}]
    assert default_value_problems(ok) == []
    bad = [select("model", "turbo", ["fast"]), select("m2", None, ["x"]), {"id": "b", "type": "boolean"}]
    assert len(default_value_problems(bad)) == 3


def test_category_problems() -> None:
    options = [
        select("a", "x", ["x"], category="mode"),
        select("b", "x", ["x"], category="_mine"),
        select("c", "x", ["x"]),
        select("d", "x", ["x"], category="speed"),
    ]
    assert category_problems(options) == ["option 'd' has category 'speed'"]


def test_boolean_options_and_missing_ids() -> None:
    options = [select("a", "x", ["x"]), {"id": "b", "type": "boolean", "currentValue": True}]
    assert boolean_options(options) == ["b"]
    assert missing_option_ids(["a", "b", "c"], options) == ["c"]
    assert missing_option_ids(["a"], None) == ["a"]


def test_mode_sync_problems() -> None:
    options = [select("mode", "ask", ["ask", "code"], category="mode")]
    assert mode_sync_problems("ask", options) == []
    assert len(mode_sync_problems("code", options)) == 1
    assert mode_sync_problems("code", [select("model", "x", ["x"])]) == []


def test_trace_key_problems() -> None:
    tp = "00-80e1afed08e019fc1110464cfa66635c-7a085853722dc6d2-01"
    assert trace_key_problems({"params": {"_meta": {"traceparent": tp, "tracestate": "a=b"}}}) == (2, [])
    seen, problems = trace_key_problems({"result": {"x": [{"_meta": {"traceparent": "hello", "baggage": 3}}]}})
    assert seen == 2 and len(problems) == 2
    assert trace_key_problems({"_meta": {"other": {"traceparent": "nested, not root"}}}) == (0, [])


# ----------------------------------------- checks that need --acp-auth-method
ROOT = Path(__file__).resolve().parents[2]
AUTH_PEERS = ROOT / "tests" / "peers" / "broken_agents_sessions.py"
SESSION_CLAUSES = (
    "session.cwd.relative-rejected",
    "session.load.replay-all",
    "session.list.empty",
    "mode.set.response",
)


def _run(name: str, tmp_path: Path, *args: str) -> dict[str, Any]:
    from tests.e2e._suite_run import run_suite

    run = run_suite(
        f"{sys.executable} {AUTH_PEERS} {name}", tmp_path, "--acp-timeout=3", "--acp-startup-timeout=3", *args
    )
    return {c["id"]: c for c in run.report["clauses"]}


def _clauses(*ids: str) -> list[str]:
    return [f"--acp-clause={c}" for c in ids]


@pytest.mark.slow
def test_an_agent_requiring_auth_is_reported_blocked(tmp_path: Path) -> None:
    """No --acp-auth-method: the session checks are INCONCLUSIVE, naming the option and the methods."""
    clauses = _run("requires-auth", tmp_path, *_clauses(*SESSION_CLAUSES))
    for cid in SESSION_CLAUSES:
        assert clauses[cid]["status"] == "INCONCLUSIVE", clauses[cid]
        messages = [t["message"] for t in clauses[cid]["tests"]]
        assert any(
            "agent requires authentication; pass --acp-auth-method ID (advertised: token)" in m for m in messages
        )


@pytest.mark.slow
def test_an_agent_requiring_auth_is_judged_once_authenticated(tmp_path: Path) -> None:
    ids = (*SESSION_CLAUSES, "auth.authenticate.success", "auth.logout.success", "auth.logout.reauth")
    clauses = _run("requires-auth", tmp_path, "--acp-auth-method=token", *_clauses(*ids))
    assert {cid: clauses[cid]["status"] for cid in ids} == dict.fromkeys(ids, "PASS")


@pytest.mark.slow
def test_without_auth_method_authenticate_and_logout_are_not_judged(tmp_path: Path) -> None:
    ids = ("auth.authenticate.success", "auth.logout.success", "auth.logout.reauth")
    clauses = _run("requires-auth", tmp_path, *_clauses(*ids))
    assert {cid: clauses[cid]["status"] for cid in ids} == dict.fromkeys(ids, "INCONCLUSIVE")


@pytest.mark.slow
def test_additional_directories_base_is_conforming(tmp_path: Path) -> None:
    clause = "session.additional-dirs.no-implicit-restore"
    clauses = _run("additional-directories", tmp_path, *_clauses(clause))
    assert clauses[clause]["status"] == "PASS", clauses[clause]
