"""Clauses judged on every transcript, whatever the test was about."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from acp_conformance.checks.wire import CLIENT_WIRE_CHECKS, WIRE_CHECKS, Frames, wire_checks
from acp_conformance.clauses import registry
from acp_conformance.results import ClauseResult, Status, breach_status
from acp_conformance.transcript import Entry, Transcript, redactor

__all__ = ["CLIENT_TRAFFIC_CLAUSES", "MAX_EXAMPLES_PER_CLAUSE", "PASSIVE_CLAUSES", "passive_results"]

Predicate = Callable[[list[Entry]], bool]


def _any_frame(entries: list[Entry]) -> bool:
    return bool(entries)


def _responses(entries: list[Entry]) -> list[dict[str, Any]]:
    return [
        e.message for e in entries if isinstance(e.message, dict) and "id" in e.message and "method" not in e.message
    ]


def _any_response(entries: list[Entry]) -> bool:
    return bool(_responses(entries))


def _any_error(entries: list[Entry]) -> bool:
    return any("error" in m for m in _responses(entries))


def _updates_of(*kinds: str) -> Predicate:
    def pred(entries: list[Entry]) -> bool:
        for e in entries:
            m = e.message
            if isinstance(m, dict) and m.get("method") == "session/update":
                u = (m.get("params") or {}).get("update") if isinstance(m.get("params"), dict) else None
                if isinstance(u, dict) and (not kinds or u.get("sessionUpdate") in kinds):
                    return True
        return False

    return pred


def _inbound_method(method: str) -> Predicate:
    return lambda entries: any(e.method == method for e in entries)


def _any_method(entries: list[Entry]) -> bool:
    return any(isinstance(e.message, dict) and isinstance(e.message.get("method"), str) for e in entries)


def _any_request(entries: list[Entry]) -> bool:
    return any(isinstance(e.message, dict) and "method" in e.message and "id" in e.message for e in entries)


def _implementation_info(entries: list[Entry]) -> bool:
    """An ``initialize`` that carried the sender's ``clientInfo`` (its request) or ``agentInfo``
    (its answer: the result with the negotiated version beside it)."""
    for e in entries:
        m = e.message
        if not isinstance(m, dict):
            continue
        params, result = m.get("params"), m.get("result")
        if m.get("method") == "initialize" and isinstance(params, dict) and "clientInfo" in params:
            return True
        if isinstance(result, dict) and "agentInfo" in result and "protocolVersion" in result:
            return True
    return False


def _wire_roles(clause_id: str) -> tuple[str, ...]:
    """The roles a wire check judges ``clause_id`` for: the tables it is in."""
    return tuple(role for role in ("agent", "client") if clause_id in wire_checks(role))


def _wire(clause_id: str) -> Predicate:
    """Exercised as a wire check of ``clause_id`` says (judged on the inbound frames alone);
    passive_results asks the check of the peer's own role, this is for callers without one."""
    check = WIRE_CHECKS.get(clause_id) or CLIENT_WIRE_CHECKS[clause_id]
    return lambda entries: check(Frames(entries))[0]


#: clause id -> (roles of the peer it is judged for, "was it exercised?")
PASSIVE_CLAUSES: dict[str, tuple[tuple[str, ...], Predicate]] = {
    "transport.utf8": (("agent", "client"), _any_frame),
    "transport.stdio.newline-delimited": (("agent", "client"), _any_frame),
    "transport.stdio.one-message-per-line": (("agent", "client"), _any_frame),
    "transport.stdio.stdout-clean": (("agent",), _any_frame),
    "transport.stdio.stdin-clean": (("client",), _any_frame),
    "transport.stdio.strict-framing": (("agent", "client"), _any_frame),
    "transport.frame-limit": (("agent", "client"), _any_frame),
    "jsonrpc.version-field": (("agent", "client"), _any_frame),
    "jsonrpc.response-id-echo": (("agent", "client"), _any_response),
    "jsonrpc.result-xor-error": (("agent", "client"), _any_response),
    "jsonrpc.no-duplicate-response": (("agent", "client"), _any_response),
    "jsonrpc.every-request-answered": (("agent", "client"), _any_response),
    "jsonrpc.error-object": (("agent", "client"), _any_error),
    "error.codes": (("agent", "client"), _any_error),
    "schema.valid": (("agent", "client"), _any_frame),
    # The schema's Implementation object, charged to its own clause (schema.validator.clause_for).
    "init.implementation.shape": (("agent", "client"), _implementation_info),
    # Every frame is validated against the v1 schema, the version the suite agrees on; v2-only
    # vocabulary is charged here (schema.validator.clause_for, schema.rules.judge_frame).
    "init.version.agree": (("agent", "client"), _any_frame),
    # Peer.validate_inbound: a method neither in the pinned schema nor _-prefixed.
    "ext.method.underscore": (("agent", "client"), _any_method),
    "update.discriminator": (("agent",), _updates_of()),
    "prompt.updates.session-id": (("agent",), _updates_of()),
    "update.chunk.shape": (("agent",), _updates_of("user_message_chunk", "agent_message_chunk", "agent_thought_chunk")),
    "update.tool-call.shape": (("agent",), _updates_of("tool_call")),
    "update.tool-call-update.shape": (("agent",), _updates_of("tool_call_update")),
    "update.plan.shape": (("agent",), _updates_of("plan")),
    "update.commands.shape": (("agent",), _updates_of("available_commands_update")),
    "update.current-mode.shape": (("agent",), _updates_of("current_mode_update")),
    "update.config-option.shape": (("agent",), _updates_of("config_option_update")),
    "update.session-info.shape": (("agent",), _updates_of("session_info_update")),
    "update.usage.shape": (("agent",), _updates_of("usage_update")),
    "perm.request.shape": (("agent",), _inbound_method("session/request_permission")),
    "fs.read.shape": (("agent",), _inbound_method("fs/read_text_file")),
    "fs.write.shape": (("agent",), _inbound_method("fs/write_text_file")),
    "term.create.shape": (("agent",), _inbound_method("terminal/create")),
    "elicit.request.shape": (("agent",), _inbound_method("elicitation/create")),
    # Envelope findings of the core (params not an object, a reused id; a null or fractional id).
    "jsonrpc.request-shape": (("agent", "client"), _any_request),
    "jsonrpc.id-not-null": (("agent",), _any_request),
    # Shapes the validator charges to their own clause (validation.clause_for).
    "update.notice.shape": (("agent",), _updates_of("notice")),
    "update.compaction.shape": (("agent",), _updates_of("compaction_update", "compaction_summary_chunk")),
    # Judged by checks.wire on every transcript as well.
    **{clause_id: (_wire_roles(clause_id), _wire(clause_id)) for clause_id in {**WIRE_CHECKS, **CLIENT_WIRE_CHECKS}},
}

#: Clauses the suite's agent endpoint (``endpoints.agent``) judges on each client request of their
#: kind, wherever it arrives: a breach is a violation on the request, a conforming request says
#: so (``Transcript.conformed``), and ``passive_results`` turns that into the PASS, with what was
#: seen.  ``session.list.cursor-end`` is the one exception: its breach is flagged where the request
#: arrives (``endpoints.listing``), but only its test, after an observation window, can say that no
#: request came past the last page (``SessionPager.past_end``), and records the PASS.  Like the
#: passive clauses, a test bound to one whose client sent no such request leaves it not exercised
#: (the plugin's stream-level default), never a bare PASS.
CLIENT_TRAFFIC_CLAUSES = frozenset(
    {
        "init.first",
        "session.after-init",
        "session.new.params",
        "session.mcp.transport-gated",
        "session.load.params",
        "session.resume.params",
        "session.list.cursor-opaque",
        "session.list.cursor-end",
        "prompt.after-setup",
        "auth.authenticate.advertised-id",
        "perm.response.valid-option",
        "perm.client-baseline",
        "mode.set.valid",
        "config.set.value",
    }
)


#: Narrower clause -> the broader one it refines: a silence to an extension request is
#: ``ext.request.respond``'s finding (``Peer._unanswered``), one defect, one clause; the broader
#: clause gets no PASS from that transcript either, which would deny the breach.
NARROWER = {"ext.request.respond": "jsonrpc.every-request-answered"}


#: Distinct messages reported per clause and transcript; the rest are counted.
MAX_EXAMPLES_PER_CLAUSE = 20


def passive_results(
    transcript: Transcript,
    peer_role: str,
    *,
    excerpt_lines: int = 40,
    max_examples: int = MAX_EXAMPLES_PER_CLAUSE,
) -> list[ClauseResult]:
    """Judge ``transcript`` (of a peer playing ``peer_role``) on the passive clauses.

    Linear in the transcript, whatever the peer sends: a peer writing 20,000
    bad lines makes 20,000 violations, and judging them one against every entry
    (or with one 40-line excerpt each) took minutes and hundreds of megabytes.
    So the entry of each violation is found in one pass; per clause and status,
    the first ``max_examples`` distinct messages are reported, each with the
    excerpt around its first occurrence, and the rest are counted in one more
    result of the same status (the verdict is the same).  Messages are redacted
    here: schema messages quote the peer's values, secrets included.
    """
    reg = registry()
    redact = redactor()
    where: dict[int, Entry] = {}
    for e in transcript.entries:
        for v in e.violations:
            where.setdefault(id(v), e)
    out: list[ClauseResult] = []
    failed: set[str] = set()
    shown: dict[tuple[str, Status], set[str]] = {}
    hidden: dict[tuple[str, Status], int] = {}
    for v in transcript.violations:
        if v.clause_id not in reg:
            raise ValueError(f"internal error: violation names unknown clause {v.clause_id!r}")
        clause = reg.get(v.clause_id)
        if not clause.applies_to(peer_role):
            continue
        failed.add(v.clause_id)
        key = (v.clause_id, breach_status(clause))
        messages = shown.setdefault(key, set())
        if v.message in messages:
            continue  # the same finding again: one result says it
        if len(messages) >= max_examples:
            hidden[key] = hidden.get(key, 0) + 1
            continue
        messages.add(v.message)
        entry = where.get(id(v))
        excerpt = transcript.excerpt([entry] if entry is not None else [], last=excerpt_lines)
        out.append(ClauseResult(v.clause_id, key[1], redact(v.message), excerpt))
    inbound = [e for e in transcript.entries if e.direction == "in"]
    frames = Frames(inbound, [e for e in transcript.entries if e.direction == "out"])
    wire_exercised: dict[str, bool] = {}
    checks = wire_checks(peer_role)
    for clause_id, check in checks.items():
        touched, findings = check(frames)
        wire_exercised[clause_id] = touched
        for finding in findings:
            failed.add(clause_id)
            key = (clause_id, breach_status(reg.get(clause_id)))
            messages = shown.setdefault(key, set())
            if finding.message in messages:
                continue
            if len(messages) >= max_examples:
                hidden[key] = hidden.get(key, 0) + 1
                continue
            messages.add(finding.message)
            excerpt = transcript.excerpt([finding.entry], last=excerpt_lines)
            out.append(ClauseResult(clause_id, key[1], redact(finding.message), excerpt))
    for (clause_id, status), n in hidden.items():
        out.append(
            ClauseResult(
                clause_id,
                status,
                f"{n} more violation(s) of this clause not listed: only the first {max_examples} distinct messages are",
            )
        )
    failed |= {broad for narrow, broad in NARROWER.items() if narrow in failed}
    for clause_id, (roles, exercised) in PASSIVE_CLAUSES.items():
        if clause_id in failed or peer_role not in roles or clause_id not in reg:
            continue
        if wire_exercised.get(clause_id, False) if clause_id in checks else exercised(inbound):
            out.append(ClauseResult(clause_id, Status.PASS, f"{len(inbound)} inbound frame(s) checked"))
    for clause_id, (n, seen) in transcript.passes.items():
        if clause_id not in reg:
            raise ValueError(f"internal error: a conforming judgement names unknown clause {clause_id!r}")
        if clause_id in failed or not reg.get(clause_id).applies_to(peer_role):
            continue
        more = f" ({n - 1} more judged alike)" if n > 1 else ""
        out.append(ClauseResult(clause_id, Status.PASS, redact(seen) + more))
    return out
