"""Session modes and config options: set_mode, set_config_option, their updates and payloads.

Nothing assumes particular mode or option ids: the tests pick among what the
agent advertised for the session (another mode than the current one, another
value of an option, the option of category 'mode' first).
"""

from __future__ import annotations

from typing import Any

import pytest

from acp_conformance.checks.sessions import (
    boolean_options,
    category_problems,
    default_value_problems,
    missing_option_ids,
    mode_option,
    mode_sync_problems,
    option_ids,
    select_values,
    session_updates,
    update_kind,
)
from acp_conformance.checks.turns import position_of
from acp_conformance.core.events import Request, Response
from acp_conformance.endpoints.client import PermissionPolicy
from acp_conformance.errors import PeerTimeout
from acp_conformance.harness import AgentHarness, Connection
from acp_conformance.results import Status
from acp_conformance.suite._support import inconclusive, not_applicable
from acp_conformance.suite.agent._helpers import (
    answers,
    describe,
    open_session,
    position,
    short,
    start_long_turn,
)

pytestmark = pytest.mark.anyio

Json = dict[str, Any]


def _modes(conn: Connection, sid: str) -> Json | None:
    modes = conn.client.sessions[sid].get("modes")
    return modes if isinstance(modes, dict) else None


def _options(conn: Connection, sid: str) -> list[Json] | None:
    options = conn.client.sessions[sid].get("configOptions")
    return [o for o in options if isinstance(o, dict)] if isinstance(options, list) else None


def _other_mode(modes: Json) -> str:
    """A mode to switch to: another than the current one if there is one."""
    ids: list[str] = [
        m["id"] for m in modes.get("availableModes", []) if isinstance(m, dict) and isinstance(m.get("id"), str)
    ]
    if not ids:
        not_applicable("the session's modes list no available mode")
    current = modes.get("currentModeId")
    return next((i for i in ids if i != current), ids[0])


def _option_to_change(options: list[Json]) -> tuple[Json, str] | None:
    """A select option with another value to choose (category 'mode' first)."""
    ordered = sorted(options, key=lambda o: o.get("category") != "mode")
    for option in ordered:
        if option.get("type") != "select" or not isinstance(option.get("id"), str):
            continue
        other = [v for v in select_values(option) if v != option.get("currentValue")]
        if other:
            return option, other[0]
    return None


def _require_option_to_change(options: list[Json]) -> tuple[Json, str]:
    choice = _option_to_change(options)
    if choice is None:
        not_applicable("no select config option offers a value other than its current one")
    return choice


def _mode_updates(conn: Connection, sid: str, start: int, end: int | None = None) -> list[Any]:
    return [
        u["update"].get("currentModeId")
        for u in session_updates(conn.peer.events, start, end, sid)
        if update_kind(u) == "current_mode_update"
    ]


def _config_updates(conn: Connection, sid: str, start: int, end: int | None = None) -> list[Any]:
    return [
        u["update"].get("configOptions")
        for u in session_updates(conn.peer.events, start, end, sid)
        if update_kind(u) == "config_option_update"
    ]


def _judge_config_updates(acp: AgentHarness, segments: list[tuple[list[str], list[Any], Any]]) -> None:
    """config.update.complete over ``segments``: each the option ids of a complete state read
    (``session/new``, a ``session/set_config_option`` answer), the ``config_option_update``
    payloads that followed it, and the complete state read after them (``None``: none was).

    An update carries the complete state (session-config-options.mdx § From the Agent), but the
    state may change under it: "This allows Agents to reflect dependent changes", an option may
    go when another changes.  So an option an update leaves out is a breach only when a complete
    state read after the update still lists it; without one, that it was left out is not proven."""
    problems: list[str] = []
    unproven: list[str] = []
    for known, updates, after in segments:
        later = set(option_ids(after))
        for options in updates:
            missing = missing_option_ids(known, options)
            if missing and after is None:
                unproven.append(f"an update lists {option_ids(options)} and leaves out {missing}")
            elif missing:
                kept = [m for m in missing if m in later]  # the rest was removed, not left out
                if kept:
                    problems.append(
                        f"an update lists {option_ids(options)} and leaves out {kept}, which the complete "
                        f"state read after it still lists ({sorted(later)})"
                    )
            known = option_ids(options) or known
    if not any(updates for _, updates, _ in segments):
        acp.record("config.update.complete", Status.NOT_APPLICABLE, "the agent sent no config_option_update")
    elif problems or not unproven:
        acp.check(
            "config.update.complete",
            not problems,
            "every config_option_update to carry all of the session's config options",
            "; ".join(problems),
        )
    else:
        acp.record(
            "config.update.complete",
            Status.INCONCLUSIVE,
            "; ".join(unproven) + ": no complete configuration state was read after it, so the options it "
            "leaves out may have gone with the change (dependent options), not been left out",
        )


# -------------------------------------------------------------------- modes
@pytest.mark.acp_clause("mode.set.response", "mode.set.anytime", "config.update.complete")
async def test_set_mode_changes_the_current_mode(acp_agent: AgentHarness) -> None:
    async with acp_agent.connect() as conn:
        sid = await open_session(acp_agent, conn)
        modes = _modes(conn, sid)
        if modes is None:
            not_applicable("session/new returned no modes")
        target = _other_mode(modes)
        start = len(conn.peer.events)
        resp = await conn.peer.call("session/set_mode", {"sessionId": sid, "modeId": target})
        await open_session(acp_agent, conn)  # a round trip: updates sent just after the answer arrive before its own
        reported = _mode_updates(conn, sid, start)
        if resp.is_error:
            # No MUST makes the switch succeed (session-modes.mdx: "can be changed at any point", no
            # keyword): refusing an advertised mode, with or without a policy reason, is one WARN.
            acp_agent.check(
                "mode.set.anytime",
                False,
                f"session/set_mode to the advertised mode {target!r} accepted",
                f"refused: {describe(resp)}",
            )
            refused = "the agent refused the switch (judged on mode.set.anytime)"
            acp_agent.record("mode.set.response", Status.NOT_APPLICABLE, refused)
            acp_agent.record("config.update.complete", Status.NOT_APPLICABLE, refused)
            return
        acp_agent.check("mode.set.anytime", True, f"session/set_mode to the advertised mode {target!r} accepted", "")
        acp_agent.check(
            "mode.set.response",
            not resp.is_error and isinstance(resp.result, dict) and (not reported or reported[-1] == target),
            f"an object result for session/set_mode to the advertised mode {target!r}, and any "
            f"current_mode_update then naming {target!r} as currentModeId",
            f"{describe(resp)}; current_mode_update currentModeId values: {reported}",
        )
        _judge_config_updates(acp_agent, [(option_ids(_options(conn, sid)), _config_updates(conn, sid, start), None)])


@pytest.mark.acp_clause("mode.set.invalid")
async def test_set_mode_to_an_unknown_mode_is_an_error(acp_agent: AgentHarness) -> None:
    async with acp_agent.connect() as conn:
        sid = await open_session(acp_agent, conn)
        if _modes(conn, sid) is None:
            not_applicable("session/new returned no modes")
        resp = await conn.peer.call("session/set_mode", {"sessionId": sid, "modeId": "acp-conformance-no-such-mode"})
        acp_agent.check(
            "mode.set.invalid",
            resp.is_error,
            "an error for session/set_mode to 'acp-conformance-no-such-mode', which is not an available mode",
            describe(resp),
        )


async def _during_a_turn(
    acp: AgentHarness, conn: Connection, sid: str, clause: str, method: str, params: Json, what: str
) -> None:
    """Send ``method`` while a turn runs: it must be answered (a result) before the turn ends.

    Only a turn the suite holds proves the order: a tool turn blocked on a permission request we
    have not answered cannot end, so an answer that does not come while we hold it waits for the
    turn (judged).  Without one (the agent asks no permission), a long turn is used, and an answer
    that comes after the turn's end is INCONCLUSIVE: the turn may have ended before the request
    reached the agent."""
    conn.client.permission = PermissionPolicy("hold")
    rid_turn, start = await conn.client.send_prompt(sid, acp.config.tool_prompt)
    asked = await conn.peer.wait_for(
        lambda e: (isinstance(e, Request) and e.method == "session/request_permission") or answers(rid_turn)(e),
        start=start,
        what="a permission request of the tool turn, or its end",
        awaiting="session/prompt",
    )
    if isinstance(asked, Request):
        await _during_a_held_turn(acp, conn, sid, rid_turn, clause, method, params, what)
        return
    conn.client.permission = PermissionPolicy("allow_once")
    rid_turn, start = await start_long_turn(acp, conn, sid)
    mark = len(conn.peer.events)
    rid = await conn.peer.send_request(method, params)
    is_answer = answers(rid)
    try:
        await conn.peer.wait_for(is_answer, start=mark, what=f"the answer to {method} during the turn")
    except PeerTimeout:
        pass  # judged below, once the turn is over
    await conn.client.cancel(sid)
    turn = await conn.client.finish_turn(sid, rid_turn, start)
    resp = await conn.peer.wait_response(rid, method=method)
    assert turn.response is not None
    ended = position(conn.peer.events, turn.response)
    if ended < mark:
        inconclusive(f"the long turn ended ({describe(turn.response)}) before {method} was sent")
    answered = position(conn.peer.events, resp)
    if not resp.is_error and answered > ended:
        inconclusive(
            f"{method} was answered after the long turn ended ({describe(turn.response)}), and nothing held the "
            "turn open: it may have ended before the request reached the agent (a tool turn that asks "
            "permission, --acp-tool-prompt, is judged)"
        )
    acp.check(
        clause,
        not resp.is_error,
        f"a result for {method} ({what}) sent while the turn runs, before the turn's session/prompt answer",
        describe(resp),
    )


async def _during_a_held_turn(
    acp: AgentHarness, conn: Connection, sid: str, rid_turn: Any, clause: str, method: str, params: Json, what: str
) -> None:
    calls = [c for c in conn.client.permission_calls if c.session_id == sid]
    while not calls:  # the endpoint registers the request in its own handler task
        await conn.client.wait_permission(index=len(conn.client.permission_calls))
        calls = [c for c in conn.client.permission_calls if c.session_id == sid]
    held = conn.client.holding(sid)
    mark = len(conn.peer.events)
    rid = await conn.peer.send_request(method, params)
    resp: Response | None = None
    try:
        # Not wait_response: an answer that only comes once the turn is over is late, not missing
        # (jsonrpc.every-request-answered is judged on the wait after the turn, below).
        ev = await conn.peer.wait_for(answers(rid), start=mark, what=f"the answer to {method} during the turn")
        assert isinstance(ev, Response)
        resp = ev
    except PeerTimeout:
        pass
    try:
        if resp is None:
            acp.check(
                clause,
                False,
                f"an answer to {method} ({what}) while the turn runs",
                f"no answer within {conn.peer.timeout:g} s while the turn was blocked on the suite ({held}): "
                "the agent waits for the turn to end",
            )
            return
        acp.check(
            clause,
            not resp.is_error,
            f"a result for {method} ({what}) while the turn runs (it was blocked on the suite: {held})",
            describe(resp),
        )
    finally:
        await conn.client.cancel(sid)  # answers the held permission request "cancelled"
        await conn.client.finish_turn(sid, rid_turn, 0)
        if resp is None:
            await conn.peer.wait_response(rid, method=method)


@pytest.mark.acp_clause("mode.set.anytime")
async def test_set_mode_during_a_turn(acp_agent: AgentHarness) -> None:
    async with acp_agent.connect() as conn:
        sid = await open_session(acp_agent, conn)
        modes = _modes(conn, sid)
        if modes is None:
            not_applicable("session/new returned no modes")
        target = _other_mode(modes)
        await _during_a_turn(
            acp_agent,
            conn,
            sid,
            "mode.set.anytime",
            "session/set_mode",
            {"sessionId": sid, "modeId": target},
            f"mode {target!r}",
        )


# ----------------------------------------------------------- config options
@pytest.mark.acp_clause("config.set.response-complete")
async def test_set_config_option_answers_the_full_state(acp_agent: AgentHarness) -> None:
    """session-config-options.mdx: the answer is "the complete list of all configuration options and
    their current values", and "always contains the complete configuration state. This allows Agents
    to reflect dependent changes" (changing the model may take a reasoning option away).  So an
    option of ``session/new`` absent after a change proves nothing by itself; set back to its
    ``session/new`` value, the option's state is the one ``session/new`` described, and an answer
    that still leaves out options of that state is incomplete.  A refused change is no answer this
    clause judges."""
    async with acp_agent.connect() as conn:
        sid = await open_session(acp_agent, conn)
        options = _options(conn, sid)
        if not options:
            not_applicable("session/new returned no configOptions")
        option, value = _require_option_to_change(options)
        known = option_ids(options)
        oid, original = option["id"], option.get("currentValue")

        async def set_to(target: Any) -> list[Any] | None:
            params = {"sessionId": sid, "configId": oid, "value": target}
            resp = await conn.peer.call("session/set_config_option", params)
            if resp.is_error:
                inconclusive(
                    f"session/set_config_option of {oid!r} to {target!r} (one of its values) was refused: "
                    f"{describe(resp)}; this clause judges the answer to a change made"
                )
            got = resp.result.get("configOptions") if isinstance(resp.result, dict) else None
            changed = next((o for o in got or [] if isinstance(o, dict) and o.get("id") == oid), None)
            acp_agent.check(
                "config.set.response-complete",
                changed is not None and changed.get("currentValue") == target,
                f"configOptions with {oid!r}, the option just set, now at {target!r}",
                f"{oid!r}: {short(changed)} in {short(got)}",
            )
            return got if isinstance(got, list) else None

        got = await set_to(value)
        missing = missing_option_ids(known, got)
        if not missing:
            acp_agent.check(
                "config.set.response-complete",
                True,
                f"configOptions with every option {known} and {oid!r} now at {value!r}",
                "",
            )
            return
        back = await set_to(original)
        still = missing_option_ids(known, back)
        acp_agent.check(
            "config.set.response-complete",
            not still,
            f"with {oid!r} back at its session/new value {original!r}, configOptions with every option of "
            f"session/new {known} (with {oid!r} at {value!r} the answer left out {missing}: dependent options "
            "may change)",
            f"the answer still leaves out {still}: {short(back)}",
        )


@pytest.mark.acp_clause("config.set.invalid")
async def test_set_config_option_rejects_unknown_ids_and_values(acp_agent: AgentHarness) -> None:
    async with acp_agent.connect() as conn:
        sid = await open_session(acp_agent, conn)
        options = _options(conn, sid)
        if not options:
            not_applicable("session/new returned no configOptions")
        resp = await conn.peer.call(
            "session/set_config_option",
            {"sessionId": sid, "configId": "acp-conformance-no-such-option", "value": "x"},
        )
        acp_agent.check(
            "config.set.invalid",
            resp.is_error,
            "an error for session/set_config_option of the unknown configId 'acp-conformance-no-such-option'",
            describe(resp),
        )
        select = next((o for o in options if o.get("type") == "select" and isinstance(o.get("id"), str)), None)
        if select is None:
            return
        resp = await conn.peer.call(
            "session/set_config_option",
            {"sessionId": sid, "configId": select["id"], "value": "acp-conformance-no-such-value"},
        )
        acp_agent.check(
            "config.set.invalid",
            resp.is_error,
            f"an error for session/set_config_option of {select['id']!r} to 'acp-conformance-no-such-value', "
            f"not one of its values {select_values(select)}",
            describe(resp),
        )


@pytest.mark.acp_clause("config.set.anytime")
async def test_set_config_option_during_a_turn(acp_agent: AgentHarness) -> None:
    async with acp_agent.connect() as conn:
        sid = await open_session(acp_agent, conn)
        options = _options(conn, sid)
        if not options:
            not_applicable("session/new returned no configOptions")
        option, value = _require_option_to_change(options)
        await _during_a_turn(
            acp_agent,
            conn,
            sid,
            "config.set.anytime",
            "session/set_config_option",
            {"sessionId": sid, "configId": option["id"], "value": value},
            f"{option['id']!r} to {value!r}",
        )


@pytest.mark.acp_clause(
    "config.default-value",
    "config.category.reserved",
    "config.boolean.gated",
    "mode.dual-advertise",
    "config.update.complete",
)
async def test_config_option_payloads(acp_agent: AgentHarness) -> None:
    """Every configOptions payload of a session (initial, set results, updates) after a mode and an option change."""
    async with acp_agent.connect() as conn:
        sid = await open_session(acp_agent, conn)
        modes, options = _modes(conn, sid), _options(conn, sid)
        if modes is None and mode_option(options) is None:
            acp_agent.record(
                "mode.dual-advertise",
                Status.NOT_APPLICABLE,
                "the session has neither modes nor a config option of category 'mode'",
            )
        elif modes is None or mode_option(options) is None:
            acp_agent.check(
                "mode.dual-advertise",
                False,
                "both modes and a configOptions entry of category 'mode' (during the transition period)",
                "modes only" if modes is not None else "a config option of category 'mode' only",
            )
        payloads: list[tuple[str, Any]] = [("session/new", options)]
        states: list[tuple[str, Any, Any]] = [("session/new", modes.get("currentModeId") if modes else None, options)]
        start = len(conn.peer.events)
        if modes is not None:
            target = _other_mode(modes)
            await conn.peer.call("session/set_mode", {"sessionId": sid, "modeId": target})
            await open_session(acp_agent, conn)  # a round trip for updates sent after the answer
            reported = _mode_updates(conn, sid, start)
            current = reported[-1] if reported else target
            for update in _config_updates(conn, sid, start):
                states.append((f"config_option_update after set_mode {target!r}", current, update))
        choice = _option_to_change(options) if options else None
        # config.update.complete's segments: a complete state, the updates after it, the complete
        # state read after them (the set_config_option answer, when it has configOptions).
        segments: list[tuple[list[str], list[Any], Any]] = []
        if choice is not None:
            option, value = choice
            mark = len(conn.peer.events)
            resp: Response = await conn.peer.call(
                "session/set_config_option", {"sessionId": sid, "configId": option["id"], "value": value}
            )
            answered = position_of(conn.peer.events, resp)
            answer = resp.result.get("configOptions") if isinstance(resp.result, dict) else None
            complete = answer if isinstance(answer, list) else None
            await open_session(acp_agent, conn)
            if answered >= 0:
                segments += [
                    (option_ids(options), _config_updates(conn, sid, start, answered), complete),
                    (option_ids(complete) or option_ids(options), _config_updates(conn, sid, answered + 1), None),
                ]
            if isinstance(resp.result, dict):
                payloads.append(("session/set_config_option result", resp.result.get("configOptions")))
            reported = _mode_updates(conn, sid, mark)
            if reported and isinstance(resp.result, dict):
                states.append((f"after set_config_option {option['id']}", reported[-1], resp.result["configOptions"]))
        updates = _config_updates(conn, sid, start)
        payloads += [("config_option_update", u) for u in updates]
        if modes is not None and mode_option(options) is not None:
            unsynced = [f"{where}: {p}" for where, mode, opts in states for p in mode_sync_problems(mode, opts)]
            acp_agent.check(
                "mode.dual-advertise",
                not unsynced,
                "modes and the config option of category 'mode' to name the same current mode",
                "; ".join(unsynced),
            )
        if not options:
            not_applicable("session/new returned no configOptions")
        _judge_config_updates(acp_agent, segments or [(option_ids(options), updates, None)])
        found = {
            "config.default-value": [f"{w}: {p}" for w, opts in payloads for p in default_value_problems(opts)],
            "config.category.reserved": [f"{w}: {p}" for w, opts in payloads for p in category_problems(opts)],
            "config.boolean.gated": [
                f"{w}: boolean option {b!r}" for w, opts in payloads for b in boolean_options(opts)
            ],
        }
        expected = {
            "config.default-value": "every option with a current value, a select's being one of its values",
            "config.category.reserved": "categories among mode, model, model_config, thought_level or starting with _",
            "config.boolean.gated": "no boolean option: the client did not declare session.configOptions.boolean",
        }
        for clause, problems in found.items():
            acp_agent.check(clause, not problems, expected[clause], "; ".join(problems[:5]))
