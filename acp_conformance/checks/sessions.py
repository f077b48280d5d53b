"""Checks for sessions, history replay, modes and config options.

Plain functions over what a connection observed (``session/update``
params, result objects): no I/O, no pytest.  Each returns the problems it
found as short sentences (an empty list means the check held), so a test
can put them straight into its evidence.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Sequence
from typing import Any

from acp_conformance.core.events import Event, Notification

__all__ = [
    "CHUNK_KINDS",
    "HISTORY_KINDS",
    "SPEC_CATEGORIES",
    "boolean_options",
    "category_problems",
    "chunk_text",
    "default_value_problems",
    "extra_result_keys",
    "history",
    "is_within",
    "message_id_problems",
    "missing_option_ids",
    "mode_option",
    "mode_sync_problems",
    "normalize",
    "option_ids",
    "replay_problems",
    "select_choices",
    "select_values",
    "session_updates",
    "trace_key_problems",
    "update_kind",
]

#: Updates that carry conversation history (what session/load replays and
#: what session/resume or session/list must not send).
HISTORY_KINDS = frozenset(
    {"user_message_chunk", "agent_message_chunk", "agent_thought_chunk", "tool_call", "tool_call_update", "plan"}
)
CHUNK_KINDS = ("user_message_chunk", "agent_message_chunk", "agent_thought_chunk")
#: Config option categories the spec defines; any other name must start with "_".
SPEC_CATEGORIES = frozenset({"mode", "model", "model_config", "thought_level"})

Json = dict[str, Any]


# ----------------------------------------------------------------- updates
def update_kind(params: Any) -> str | None:
    """The ``sessionUpdate`` discriminator of one ``session/update`` params object."""
    update = params.get("update") if isinstance(params, dict) else None
    kind = update.get("sessionUpdate") if isinstance(update, dict) else None
    return kind if isinstance(kind, str) else None


def session_updates(
    events: Sequence[Event], start: int = 0, end: int | None = None, session_id: str | None = None
) -> list[Json]:
    """The params of the ``session/update`` notifications in ``events[start:end]``,
    in arrival order, optionally only those naming ``session_id``."""
    out: list[Json] = []
    for ev in events[start:end]:
        if not (isinstance(ev, Notification) and ev.method == "session/update" and isinstance(ev.params, dict)):
            continue
        if session_id is not None and ev.params.get("sessionId") != session_id:
            continue
        out.append(ev.params)
    return out


def history(updates: Iterable[Json]) -> list[Json]:
    """Only the updates that carry conversation history."""
    return [u for u in updates if update_kind(u) in HISTORY_KINDS]


def normalize(text: str) -> str:
    """Whitespace-insensitive form for comparing replayed text with the original."""
    return " ".join(text.split())


def chunk_text(updates: Iterable[Json], kind: str) -> str:
    """The text of all ``kind`` chunks with text content, concatenated in order."""
    parts: list[str] = []
    for params in updates:
        if update_kind(params) != kind:
            continue
        content = params["update"].get("content")
        if isinstance(content, dict) and content.get("type") == "text" and isinstance(content.get("text"), str):
            parts.append(content["text"])
    return "".join(parts)


def _tool_call_ids(updates: Iterable[Json]) -> list[str]:
    ids: list[str] = []
    for params in updates:
        if update_kind(params) == "tool_call":
            tid = params["update"].get("toolCallId")
            if isinstance(tid, str) and tid not in ids:
                ids.append(tid)
    return ids


def _short(text: str, limit: int = 80) -> str:
    text = normalize(text)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def replay_problems(turns: Sequence[tuple[str, Sequence[Json]]], replay: Sequence[Json]) -> list[str]:
    """What of the conversation a ``session/load`` replay left out.

    ``turns`` holds each earlier prompt's text with the updates its turn
    produced; ``replay`` the updates sent while the load was answered.
    Every prompt must come back as ``user_message_chunk`` text, every turn's
    agent message text as ``agent_message_chunk`` text (compared ignoring
    whitespace), and at least as many tool calls as the turns made.
    """
    problems: list[str] = []
    user = normalize(chunk_text(replay, "user_message_chunk"))
    agent = normalize(chunk_text(replay, "agent_message_chunk"))
    originals = 0
    for prompt, updates in turns:
        if normalize(prompt) not in user:
            problems.append(f"the prompt {_short(prompt)!r} was not replayed as user_message_chunk text")
        said = normalize(chunk_text(updates, "agent_message_chunk"))
        if said and said not in agent:
            problems.append(f"the agent's reply {_short(said)!r} was not replayed as agent_message_chunk text")
        originals += len(_tool_call_ids(updates))
    replayed = len(_tool_call_ids(replay))
    if replayed < originals:
        problems.append(f"{originals} tool call(s) were made but {replayed} replayed as tool_call")
    return problems


def message_id_problems(updates: Sequence[Json]) -> list[str]:
    """messageId misuse among chunks: one id for chunks of different kinds
    (a user message is not an agent message), or one id for two user
    messages (its chunks separated by the agent's output)."""
    problems: list[str] = []
    kinds: dict[str, str] = {}
    closed: set[str] = set()  # user message ids whose message ended
    current_user: str | None = None
    for params in updates:
        kind = update_kind(params)
        if kind not in CHUNK_KINDS:
            continue
        mid = params["update"].get("messageId")
        if kind != "user_message_chunk" and current_user is not None:
            closed.add(current_user)
            current_user = None
        if not isinstance(mid, str):
            continue
        first = kinds.setdefault(mid, kind)
        if first != kind:
            problems.append(f"messageId {mid!r} is used for both {first} and {kind}")
        if kind == "user_message_chunk":
            if mid in closed:
                problems.append(f"messageId {mid!r} is used for two different user messages")
            if current_user is not None and current_user != mid:
                closed.add(current_user)
            current_user = mid
    return list(dict.fromkeys(problems))


# ------------------------------------------------------------------- paths
def is_within(path: str, root: str | os.PathLike[str]) -> bool:
    """True when absolute ``path`` is ``root`` or lies below it (symlinks resolved)."""
    real = os.path.realpath(path)
    base = os.path.realpath(root)
    return real == base or real.startswith(base.rstrip(os.sep) + os.sep)


# ------------------------------------------------------------------ results
def extra_result_keys(result: Any) -> list[str]:
    """Keys other than ``_meta`` in a result the schema defines as empty (``{}``)."""
    if not isinstance(result, dict):
        return []
    return sorted(k for k in result if k != "_meta")


# ----------------------------------------------------------- config options
def option_ids(options: Any) -> list[str]:
    if not isinstance(options, list):
        return []
    return [o["id"] for o in options if isinstance(o, dict) and isinstance(o.get("id"), str)]


def select_values(option: Json) -> list[str]:
    """The selectable values of a ``select`` option, flat or grouped."""
    return [c["value"] for c in select_choices(option)]


def select_choices(option: Json) -> list[Json]:
    """The choices of a ``select`` option (``{value, name, ...}``), flat or grouped."""
    choices: list[Json] = []
    entries = option.get("options")
    for entry in entries if isinstance(entries, list) else []:
        if not isinstance(entry, dict):
            continue
        if isinstance(entry.get("value"), str):
            choices.append(entry)
        elif isinstance(entry.get("options"), list):  # a group
            choices.extend(v for v in entry["options"] if isinstance(v, dict) and isinstance(v.get("value"), str))
    return choices


def default_value_problems(options: Any) -> list[str]:
    """Options without a current value, or a select value that is not one of its values."""
    problems: list[str] = []
    for o in options if isinstance(options, list) else []:
        if not isinstance(o, dict):
            continue
        oid, value = o.get("id"), o.get("currentValue")
        if o.get("type") == "select":
            values = select_values(o)
            if not isinstance(value, str):
                problems.append(f"select option {oid!r} has no string currentValue ({value!r})")
            elif value not in values:
                problems.append(f"option {oid!r} has currentValue {value!r}, not one of its values {values}")
        elif o.get("type") == "boolean" and not isinstance(value, bool):
            problems.append(f"boolean option {oid!r} has no boolean currentValue ({value!r})")
    return problems


def category_problems(options: Any) -> list[str]:
    """Categories that are neither spec-defined nor custom (leading '_')."""
    problems: list[str] = []
    for o in options if isinstance(options, list) else []:
        if not isinstance(o, dict) or o.get("category") is None:
            continue
        cat = o["category"]
        if not isinstance(cat, str) or (cat not in SPEC_CATEGORIES and not cat.startswith("_")):
            problems.append(f"option {o.get('id')!r} has category {cat!r}")
    return problems


def boolean_options(options: Any) -> list[str]:
    """Ids of ``type: boolean`` options."""
    return [
        str(o.get("id"))
        for o in (options if isinstance(options, list) else [])
        if isinstance(o, dict) and o.get("type") == "boolean"
    ]


def missing_option_ids(known: Iterable[str], options: Any) -> list[str]:
    """Option ids of the known complete state that ``options`` leaves out."""
    present = set(option_ids(options))
    return [oid for oid in known if oid not in present]


def mode_option(options: Any) -> Json | None:
    """The first select option of category ``mode``, if any."""
    for o in options if isinstance(options, list) else []:
        if isinstance(o, dict) and o.get("category") == "mode" and o.get("type") == "select":
            return o
    return None


def mode_sync_problems(current_mode: Any, options: Any) -> list[str]:
    """Modes and the mode config option must describe the same current mode."""
    opt = mode_option(options)
    if opt is None or current_mode is None:
        return []
    if opt.get("currentValue") != current_mode:
        return [
            f"the mode config option {opt.get('id')!r} says {opt.get('currentValue')!r} "
            f"while the session mode is {current_mode!r}"
        ]
    return []


# ------------------------------------------------------------------- _meta
_TRACEPARENT = re.compile(r"^[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$")
TRACE_KEYS = ("traceparent", "tracestate", "baggage")


def _metas(value: Any) -> Iterable[Json]:
    if isinstance(value, dict):
        for key, item in value.items():
            if key == "_meta":
                if isinstance(item, dict):
                    yield item
            else:
                yield from _metas(item)
    elif isinstance(value, list):
        for item in value:
            yield from _metas(item)


def trace_key_problems(message: Any) -> tuple[int, list[str]]:
    """``(number of trace keys seen, problems)`` for the W3C trace-context keys
    at the root of every ``_meta`` object inside ``message``: they may only
    carry trace context (a W3C traceparent, string tracestate / baggage)."""
    seen = 0
    problems: list[str] = []
    for meta in _metas(message):
        for key in TRACE_KEYS:
            if key not in meta:
                continue
            seen += 1
            value = meta[key]
            if key == "traceparent":
                ok = isinstance(value, str) and bool(_TRACEPARENT.match(value))
            else:
                ok = isinstance(value, str)
            if not ok:
                problems.append(f"_meta.{key} = {value!r} is not W3C trace context")
    return seen, problems
