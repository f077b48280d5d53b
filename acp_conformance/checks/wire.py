"""Clause checks judged on every frame the peer sent, like schema validation.

Schema validation (``schema.valid`` and the per-update shape clauses) says
*that* a frame is wrong; these checks say *which* requirement it breaks, by
the clause's own name, and judge what the schema cannot: base64 payloads,
capability gating of update kinds, update kinds that only the unstable
schema defines, and ``$/cancel_request`` naming a request of the sender.

Each check is a plain function over the frames of one transcript (inbound:
what the peer sent; outbound: what we sent) returning whether the clause
was exercised and the findings.  ``WIRE_CHECKS`` judges an agent's frames,
``CLIENT_WIRE_CHECKS`` a client's; a rule both roles obey (a content block's
shape, a ``$/cancel_request`` naming the sender's own request) is one function
in both tables, fed what that role sends.  No I/O: the same functions judge a live
test, a recorded session, or a saved transcript.

Every constant below is read off the pinned stable schema
(@agentclientprotocol/sdk 2.4.0, ``schema/v1/schema.json``) or its unstable
sibling; ``tests/unit/test_checks_wire.py`` re-derives them from the schema
files, so a schema bump that changes them fails there, not silently here.
"""

from __future__ import annotations

import binascii
import re
import urllib.parse
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from acp_conformance.core.ids import id_key
from acp_conformance.transcript import Entry

__all__ = [
    "CLIENT_WIRE_CHECKS",
    "CONTENT_BLOCK_FIELDS",
    "TOOL_CALL_STATUSES",
    "TOOL_KINDS",
    "UNSTABLE_ONLY_UPDATES",
    "WIRE_CHECKS",
    "Finding",
    "Frames",
    "WireCheck",
    "is_base64",
    "wire_checks",
]

#: ``ToolKind`` (its ten ``const`` values; no custom/future escape in the schema).
TOOL_KINDS = frozenset(
    {"read", "edit", "delete", "move", "search", "execute", "think", "fetch", "switch_mode", "other"}
)
#: ``ToolCallStatus`` (four ``const`` values, no escape).
TOOL_CALL_STATUSES = frozenset({"pending", "in_progress", "completed", "failed"})
#: ``SessionUpdate`` discriminators of the unstable schema that the stable one lacks.
UNSTABLE_ONLY_UPDATES = frozenset(
    {"plan_update", "plan_removed", "subagent_update", "session_message", "session_message_chunk"}
)
#: ``ContentBlock`` variant -> its required string fields (``resource`` is judged separately).
CONTENT_BLOCK_FIELDS: dict[str, tuple[str, ...]] = {
    "text": ("text",),
    "image": ("data", "mimeType"),
    "audio": ("data", "mimeType"),
    "resource_link": ("uri", "name"),
    "resource": (),
}
#: ``ToolCallContent`` variant -> its required string fields.
TOOL_CONTENT_FIELDS: dict[str, tuple[str, ...]] = {
    "content": (),
    "diff": ("path", "newText"),
    "terminal": ("terminalId",),
}
#: Results that carry ``configOptions`` (method of our request -> where).
CONFIG_RESULTS = frozenset({"session/new", "session/load", "session/resume", "session/set_config_option"})
#: Update kinds a client must opt into with ``clientCapabilities.session.<name>``.
GATED_UPDATES: dict[str, tuple[str, ...]] = {
    "notices": ("notice",),
    "compaction": ("compaction_update", "compaction_summary_chunk"),
}

_BASE64 = re.compile(r"[A-Za-z0-9+/]*={0,2}")
#: Query parameter names that carry a credential outright (beside SECRET_LABEL's): an OAuth
#: client secret or PKCE verifier, a bare token.  ``state``, ``code_challenge``, ``client_id`` are not.
URL_SECRET_PARAM = re.compile(r"token|secret|client[_-]?secret|code[_-]?verifier", re.IGNORECASE)
#: What a form field asking for a secret is labelled with: elicitation.mdx § Form mode's own list
#: ("passwords, API keys, access or refresh tokens, private keys, recovery codes, or payment
#: credentials"), matched on a free-text field's key, title and description.
SECRET_LABEL = re.compile(
    r"pass(word|phrase)|api[ _-]?key|(access|refresh|auth|bearer)[ _-]?token|private[ _-]?key|"
    r"recovery[ _-]?code|card[ _-]?number|\bcvv\b|\bcvc\b|security[ _-]?code",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class Finding:
    """One frame that breaks the clause, and why."""

    entry: Entry
    message: str


@dataclass
class Frames:
    """The frames of one transcript, indexed once for every check."""

    inbound: Sequence[Entry]
    outbound: Sequence[Entry] = ()
    _methods: dict[tuple[str, Any], str] | None = field(default=None, repr=False)

    def messages(self) -> Iterator[tuple[Entry, dict[str, Any]]]:
        for e in self.inbound:
            if isinstance(e.message, dict):
                yield e, e.message

    def updates(self) -> Iterator[tuple[Entry, dict[str, Any]]]:
        """Every ``session/update`` object the agent sent."""
        for e, m in self.messages():
            params = m.get("params")
            if m.get("method") == "session/update" and "id" not in m and isinstance(params, dict):
                update = params.get("update")
                if isinstance(update, dict):
                    yield e, update

    def requests(self, method: str) -> Iterator[tuple[Entry, dict[str, Any]]]:
        """``(entry, params)`` of every request (or notification) ``method`` the agent sent."""
        for e, m in self.messages():
            if m.get("method") == method and isinstance(m.get("params"), dict):
                yield e, m["params"]

    def our_method(self, rid: Any) -> str | None:
        """The method of the request we sent with id ``rid`` (None when we sent none)."""
        if self._methods is None:
            self._methods = {}
            for e in self.outbound:
                m = e.message
                if isinstance(m, dict) and isinstance(m.get("method"), str) and "id" in m:
                    self._methods.setdefault(id_key(m["id"]), m["method"])
        return self._methods.get(id_key(rid))

    def results(self, methods: frozenset[str]) -> Iterator[tuple[Entry, str, dict[str, Any]]]:
        """``(entry, method, result)`` of every result the agent sent for our requests of ``methods``."""
        for e, m in self.messages():
            if "method" in m or "id" not in m or not isinstance(m.get("result"), dict):
                continue
            method = self.our_method(m["id"])
            if method in methods:
                yield e, method, m["result"]

    def client_session_capability(self, name: str) -> bool | None:
        """Did our ``initialize`` advertise ``clientCapabilities.session.<name>`` as an object?
        None when we sent no initialize on this connection."""
        for e in self.outbound:
            m = e.message
            if isinstance(m, dict) and m.get("method") == "initialize" and "id" in m:
                params = m.get("params") if isinstance(m.get("params"), dict) else {}
                caps = params.get("clientCapabilities") if isinstance(params, dict) else None
                session = caps.get("session") if isinstance(caps, dict) else None
                return isinstance(session, dict) and isinstance(session.get(name), dict)
        return None


def _items(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def is_base64(data: str) -> bool:
    """Standard-alphabet base64 (RFC 4648 § 4); padding may be left out, nothing else is forgiven."""
    if not _BASE64.fullmatch(data) or len(data.rstrip("=")) % 4 == 1:
        return False
    try:
        binascii.a2b_base64(data + "=" * (-len(data) % 4))
    except binascii.Error:
        return False
    return True


# ---------------------------------------------------------------- tool calls
def _tool_objects(frames: Frames) -> Iterator[tuple[Entry, str, dict[str, Any]]]:
    """``(entry, where, fields)`` of every tool call the agent described: tool_call and
    tool_call_update updates, and the toolCall of its permission requests."""
    for e, u in frames.updates():
        kind = u.get("sessionUpdate")
        if kind in ("tool_call", "tool_call_update"):
            yield e, f"{kind} {u.get('toolCallId')!r}", u
    for e, params in frames.requests("session/request_permission"):
        tool = params.get("toolCall")
        if isinstance(tool, dict):
            yield e, f"permission request for {tool.get('toolCallId')!r}", tool


def check_tool_kinds(frames: Frames) -> tuple[bool, list[Finding]]:
    seen, out = False, []
    for e, where, fields in _tool_objects(frames):
        seen = True
        kind = fields.get("kind")
        if kind is not None and kind not in TOOL_KINDS:
            out.append(Finding(e, f"{where}: kind {kind!r} is not one of {sorted(TOOL_KINDS)}"))
    return seen, out


def check_tool_statuses(frames: Frames) -> tuple[bool, list[Finding]]:
    seen, out = False, []
    for e, where, fields in _tool_objects(frames):
        seen = True
        status = fields.get("status")
        if status is not None and status not in TOOL_CALL_STATUSES:
            out.append(Finding(e, f"{where}: status {status!r} is not one of {sorted(TOOL_CALL_STATUSES)}"))
    return seen, out


def check_tool_content(frames: Frames) -> tuple[bool, list[Finding]]:
    seen, out = False, []
    for e, where, fields in _tool_objects(frames):
        for n, item in enumerate(_items(fields.get("content"))):
            seen = True
            problem = _tool_content_problem(item)
            if problem:
                out.append(Finding(e, f"{where}: content[{n}] {problem}"))
    return seen, out


def _tool_content_problem(item: Any) -> str | None:
    if not isinstance(item, dict):
        return f"is a {type(item).__name__}, not an object"
    kind = item.get("type")
    if kind in CONTENT_BLOCK_FIELDS:
        return f"is a bare {kind!r} ContentBlock; wrap it as {{type: 'content', content: {{...}}}}"
    if kind not in TOOL_CONTENT_FIELDS:
        return f"has type {kind!r}, not one of {sorted(TOOL_CONTENT_FIELDS)}"
    if kind == "content" and not isinstance(item.get("content"), dict):
        return "of type 'content' carries no content block object"
    missing = [k for k in TOOL_CONTENT_FIELDS[kind] if not isinstance(item.get(k), str)]
    if missing:
        return f"of type {kind!r} lacks the string field(s) {', '.join(missing)}"
    if kind == "diff" and item.get("oldText") is not None and not isinstance(item.get("oldText"), str):
        return "of type 'diff' has an oldText that is neither a string nor null"
    return None


# ------------------------------------------------------------ content blocks
def _content_blocks(frames: Frames) -> Iterator[tuple[Entry, str, Any]]:
    """Every ContentBlock the agent sent: message/thought chunks, compaction summaries, and
    the ``content`` items of tool calls."""
    for e, u in frames.updates():
        kind = u.get("sessionUpdate")
        if kind in ("user_message_chunk", "agent_message_chunk", "agent_thought_chunk", "compaction_summary_chunk"):
            if "content" in u:
                yield e, str(kind), u["content"]
    for e, where, fields in _tool_objects(frames):
        for n, item in enumerate(_items(fields.get("content"))):
            if isinstance(item, dict) and item.get("type") == "content" and "content" in item:
                yield e, f"{where} content[{n}]", item["content"]


def _block_problem(block: Any) -> str | None:
    if not isinstance(block, dict):
        return f"is a {type(block).__name__}, not a content block object"
    kind = block.get("type")
    if kind not in CONTENT_BLOCK_FIELDS:
        return f"has type {kind!r}, not one of {sorted(CONTENT_BLOCK_FIELDS)}"
    missing = [k for k in CONTENT_BLOCK_FIELDS[kind] if not isinstance(block.get(k), str)]
    if missing:
        return f"({kind}) lacks the string field(s) {', '.join(missing)}"
    if kind == "resource":
        res = block.get("resource")
        if not isinstance(res, dict) or not isinstance(res.get("uri"), str):
            return "(resource) has no resource object with a string uri"
        if not isinstance(res.get("text"), str) and not isinstance(res.get("blob"), str):
            return "(resource) holds neither a text nor a blob string"
    return None


def _prompt_blocks(frames: Frames) -> Iterator[tuple[Entry, str, Any]]:
    """Every ContentBlock a client sent: the items of its ``session/prompt`` requests (a
    non-list ``prompt`` is the schema's and prompt.params' business)."""
    for e, params in frames.requests("session/prompt"):
        for n, block in enumerate(_items(params.get("prompt"))):
            yield e, f"session/prompt prompt[{n}]", block


def check_content_blocks(frames: Frames) -> tuple[bool, list[Finding]]:
    return _judge_blocks(_content_blocks(frames))


def check_prompt_blocks(frames: Frames) -> tuple[bool, list[Finding]]:
    return _judge_blocks(_prompt_blocks(frames))


def _judge_blocks(blocks: Iterator[tuple[Entry, str, Any]]) -> tuple[bool, list[Finding]]:
    seen, out = False, []
    for e, where, block in blocks:
        seen = True
        problem = _block_problem(block)
        if problem:
            out.append(Finding(e, f"{where}: content block {problem}"))
    return seen, out


def check_base64(frames: Frames) -> tuple[bool, list[Finding]]:
    return _judge_base64(_content_blocks(frames))


def check_prompt_base64(frames: Frames) -> tuple[bool, list[Finding]]:
    return _judge_base64(_prompt_blocks(frames))


def _judge_base64(blocks: Iterator[tuple[Entry, str, Any]]) -> tuple[bool, list[Finding]]:
    seen, out = False, []
    for e, where, block in blocks:
        if not isinstance(block, dict):
            continue
        payloads: list[tuple[str, Any]] = []
        if block.get("type") in ("image", "audio"):
            payloads.append((f"{block['type']} data", block.get("data")))
        resource = block.get("resource")
        if block.get("type") == "resource" and isinstance(resource, dict) and "blob" in resource:
            payloads.append(("resource blob", resource.get("blob")))
        for what, data in payloads:
            if not isinstance(data, str):
                continue  # the shape clause's business
            seen = True
            if not is_base64(data):
                out.append(Finding(e, f"{where}: {what} {_shorten(data)!r} is not base64"))
    return seen, out


# ------------------------------------------------------------- update kinds
def check_no_unstable_updates(frames: Frames) -> tuple[bool, list[Finding]]:
    seen, out = False, []
    for e, u in frames.updates():
        seen = True
        kind = u.get("sessionUpdate")
        if kind in UNSTABLE_ONLY_UPDATES:
            out.append(Finding(e, f"session/update {kind!r} exists only in the unstable schema"))
    return seen, out


def _gated(capability: str) -> Callable[[Frames], tuple[bool, list[Finding]]]:
    kinds = GATED_UPDATES[capability]

    def check(frames: Frames) -> tuple[bool, list[Finding]]:
        if frames.client_session_capability(capability) is not False:
            return False, []  # advertised (anything goes), or no initialize of ours to judge by
        seen, out = False, []
        for e, u in frames.updates():
            seen = True
            if u.get("sessionUpdate") in kinds:
                out.append(
                    Finding(
                        e,
                        f"session/update {u.get('sessionUpdate')!r} sent although the client did not advertise "
                        f"clientCapabilities.session.{capability}",
                    )
                )
        return seen, out

    return check


# ---------------------------------------------------------- config options
def _config_lists(frames: Frames) -> Iterator[tuple[Entry, str, Any]]:
    for e, method, result in frames.results(CONFIG_RESULTS):
        if result.get("configOptions") is not None:
            yield e, f"{method} result", result["configOptions"]
    for e, u in frames.updates():
        if u.get("sessionUpdate") == "config_option_update":
            yield e, "config_option_update", u.get("configOptions")


def _option_problem(option: Any) -> str | None:
    if not isinstance(option, dict):
        return f"is a {type(option).__name__}, not an object"
    missing = [k for k in ("id", "name") if not isinstance(option.get(k), str)]
    if missing:
        return f"lacks the string field(s) {', '.join(missing)}"
    kind, current = option.get("type"), option.get("currentValue")
    if kind == "boolean":
        return None if isinstance(current, bool) else f"(boolean) has currentValue {current!r}, not a boolean"
    if kind != "select":
        return f"has type {kind!r}, not 'select' or 'boolean'"
    if not isinstance(current, str):
        return f"(select) has currentValue {current!r}, not a string"
    choices = option.get("options")
    if not isinstance(choices, list):
        return "(select) has no options list"
    for choice in choices:
        if not isinstance(choice, dict):
            return "(select) has an option that is not an object"
        if "group" in choice:
            if not isinstance(choice.get("group"), str) or not isinstance(choice.get("name"), str):
                return "(select) has an option group without string group and name"
            inner = choice.get("options")
            if not isinstance(inner, list) or not all(_flat_choice(c) for c in inner):
                return f"(select) group {choice.get('group')!r} lacks a list of {{value, name}} options"
        elif not _flat_choice(choice):
            return "(select) has an option without string value and name"
    return None


def _flat_choice(choice: Any) -> bool:
    return isinstance(choice, dict) and isinstance(choice.get("value"), str) and isinstance(choice.get("name"), str)


def check_config_options(frames: Frames) -> tuple[bool, list[Finding]]:
    seen, out = False, []
    for e, where, options in _config_lists(frames):
        seen = True
        if not isinstance(options, list):
            out.append(Finding(e, f"{where}: configOptions is a {type(options).__name__}, not a list"))
            continue
        for option in options:
            problem = _option_problem(option)
            if problem:
                oid = option.get("id") if isinstance(option, dict) else None
                out.append(Finding(e, f"{where}: config option {oid!r} {problem}"))
    return seen, out


# ---------------------------------------------------------------- elicitation
def check_form_secrets(frames: Frames) -> tuple[bool, list[Finding]]:
    """No form-mode ``elicitation/create`` asks for a secret: a free-text field (a string without
    ``enum`` / ``oneOf`` choices) labelled as one of the credentials the docs list.  A field that is
    not so labelled is no proof that nothing secret is asked: the PASS says what was looked at."""
    seen, out = False, []
    for e, params in frames.requests("elicitation/create"):
        if params.get("mode") != "form":
            continue
        seen = True
        requested = params.get("requestedSchema")
        props = requested.get("properties") if isinstance(requested, dict) else None
        for name, prop in (props or {}).items() if isinstance(props, dict) else ():
            if not isinstance(prop, dict) or prop.get("type") != "string" or "enum" in prop or "oneOf" in prop:
                continue
            label = " ".join(str(prop.get(k, "")) for k in ("title", "description"))
            if SECRET_LABEL.search(f"{name} {label}"):
                out.append(
                    Finding(e, f"form elicitation field {name!r} ({_shorten(label.strip())!r}) asks for a secret")
                )
    return seen, out


def check_url_credentials(frames: Frames) -> tuple[bool, list[Finding]]:
    """No URL elicitation carries credentials in its URL: a password in the userinfo, or a query or
    fragment parameter named as one of the credentials the docs list (``access_token=``, ``api_key=``
    ...).  Personal data and pre-authenticated links cannot be told from the URL alone: the PASS
    says only that none was labelled so."""
    seen, out = False, []
    for e, params in frames.requests("elicitation/create"):
        url = params.get("url")
        if params.get("mode") != "url" or not isinstance(url, str):
            continue
        seen = True
        try:
            parts = urllib.parse.urlsplit(url)
        except ValueError:
            continue  # not a URL: the schema's business (format uri)
        labelled = [k for k, _ in urllib.parse.parse_qsl(parts.query) + urllib.parse.parse_qsl(parts.fragment)]
        secret = [k for k in labelled if SECRET_LABEL.search(k) or URL_SECRET_PARAM.fullmatch(k)]
        if parts.password:
            secret.append("the userinfo's password")
        if secret:
            out.append(Finding(e, f"URL elicitation {_shorten(url, 80)!r} carries credentials: {', '.join(secret)}"))
    return seen, out


def _our_answers(frames: Frames) -> dict[tuple[str, Any], Any]:
    """Our answers to the agent's requests, by id: the result (or None for an error)."""
    out: dict[tuple[str, Any], Any] = {}
    for e in frames.outbound:
        m = e.message
        if isinstance(m, dict) and "id" in m and "method" not in m:
            out[id_key(m["id"])] = m.get("result")
    return out


def check_elicitation_ids(frames: Frames) -> tuple[bool, list[Finding]]:
    """A URL elicitation reuses no ``elicitationId`` still outstanding on this connection: one not
    yet answered, or accepted and not yet completed (elicitation/complete)."""
    seen, out = False, []
    answers = _our_answers(frames)
    # Every frame of the agent in order: requests open ids, completions close them.
    outstanding: dict[Any, Any] = {}  # elicitationId -> request id
    for e, m in frames.messages():
        raw = m.get("params")
        params: dict[str, Any] = raw if isinstance(raw, dict) else {}
        if m.get("method") == "elicitation/complete" and "id" not in m:
            outstanding.pop(params.get("elicitationId"), None)
            continue
        if m.get("method") != "elicitation/create" or params.get("mode") != "url" or "id" not in m:
            continue
        seen = True
        eid = params.get("elicitationId")
        for other, rid in list(outstanding.items()):
            result = answers.get(id_key(rid), ...)
            if result is not ... and not (isinstance(result, dict) and result.get("action") == "accept"):
                del outstanding[other]  # declined, cancelled or refused: over
        if eid in outstanding:
            what = f"URL elicitation reuses elicitationId {eid!r}, still outstanding on this connection"
            out.append(Finding(e, what))
        outstanding[eid] = m["id"]
    return seen, out


def check_completion_routing(frames: Frames) -> tuple[bool, list[Finding]]:
    """Every ``elicitation/complete`` the agent sends names a URL elicitation it sent us earlier."""
    seen, out = False, []
    sent: set[Any] = set()
    for e, m in frames.messages():
        raw = m.get("params")
        params: dict[str, Any] = raw if isinstance(raw, dict) else {}
        if m.get("method") == "elicitation/create" and params.get("mode") == "url":
            sent.add(params.get("elicitationId"))
        elif m.get("method") == "elicitation/complete" and "id" not in m:
            seen = True
            eid = params.get("elicitationId")
            if eid not in sent:
                out.append(Finding(e, f"elicitation/complete for {eid!r}, no URL elicitation this client received"))
    return seen, out


# ---------------------------------------------------------- $/cancel_request
def check_cancel_request_target(frames: Frames) -> tuple[bool, list[Finding]]:
    """A ``$/cancel_request`` from the agent names a request the agent itself sent earlier."""
    seen, out = False, []
    sent: set[tuple[str, Any]] = set()
    for e, m in frames.messages():
        if isinstance(m.get("method"), str) and "id" in m and m["method"] != "$/cancel_request":
            sent.add(id_key(m["id"]))
            continue
        if m.get("method") != "$/cancel_request" or "id" in m:
            continue
        seen = True
        params = m.get("params")
        rid = params.get("requestId") if isinstance(params, dict) else None
        if id_key(rid) not in sent:
            ours = frames.our_method(rid)
            whose = f"our {ours} request" if ours else "no request it had sent"
            out.append(Finding(e, f"$/cancel_request names requestId {rid!r}, {whose}"))
    return seen, out


def _shorten(text: str, limit: int = 40) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


WireCheck = Callable[[Frames], tuple[bool, list[Finding]]]

#: clause id -> check (agent role); each returns (exercised?, findings).
WIRE_CHECKS: dict[str, WireCheck] = {
    "tool.kind.enum": check_tool_kinds,
    "tool.status.enum": check_tool_statuses,
    "tool.content.shapes": check_tool_content,
    "content.block.shapes": check_content_blocks,
    "content.base64": check_base64,
    "update.no-unstable-variants": check_no_unstable_updates,
    "update.notice.gated": _gated("notices"),
    "update.compaction.gated": _gated("compaction"),
    "config.shape": check_config_options,
    "cancelreq.shape": check_cancel_request_target,
    "elicit.form.no-secrets": check_form_secrets,
    "elicit.url.id-unique": check_elicitation_ids,
    "elicit.complete.routing": check_completion_routing,
    "elicit.url.safety": check_url_credentials,
}

#: clause id -> check (client role: the frames a client sent, against what the suite's agent sent).
CLIENT_WIRE_CHECKS: dict[str, WireCheck] = {
    "content.block.shapes": check_prompt_blocks,
    "content.base64": check_prompt_base64,
    "cancelreq.shape": check_cancel_request_target,
}


def wire_checks(role: str) -> dict[str, WireCheck]:
    """The wire checks that judge a peer playing ``role``."""
    return CLIENT_WIRE_CHECKS if role == "client" else WIRE_CHECKS
