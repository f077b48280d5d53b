"""What the scripted model answers: a small typed data model.

A ``Script`` is an ordered list of ``Rule``s; the first rule whose
``Match`` fits the request's ``Conversation`` gives the ``Reply``.  A reply
is the model's output for one request: text, thinking, one or several tool
calls, a slow stream that keeps the turn busy, or an error.  Nothing here
knows a wire format; ``anthropic`` and ``openai`` turn a ``Conversation``
out of a request body and a ``Reply`` into server-sent events.

The default scripts decide by the conversation:

* the last message carries a tool result -> final text naming it;
* the last user text contains ``acp:tool`` (and the request offers tools)
  -> a tool call that writes ``acp-probe.txt`` in the session cwd
  (Claude: ``Write``; Codex: ``exec_command``, asking for escalated
  permissions where its instructions say how, so that the approval policy
  of the session decides);
* it contains ``acp:elicit`` and the request offers Claude Code's ``AskUserQuestion`` -> that
  tool, asking which greeting to use (the adapter turns it into a form elicitation);
* it contains ``acp:long`` -> text streamed slowly until the client goes
  away (bounded);
* anything else -> a short text.

Scripts load from a dict or a TOML file::

    [[rule]]
    name = "tool"
    contains = "acp:tool"
    with_tools = true
    reply = [{type = "tool_call", name = "Write", arguments = {file_path = "{cwd}/x.txt", content = "hi"}}]

    [[rule]]
    name = "boom"
    contains = "acp:error"
    error = {status = 400, type = "invalid_request_error", message = "scripted failure"}

    [default]
    reply = [{type = "text", text = "OK."}]

String values in tool arguments may use ``{cwd}`` (the session working
directory as the request reveals it) and ``{n}`` (the tool call's ordinal);
reply text may use ``{cwd}``, ``{prompt}`` and ``{tool_result}``.
"""

from __future__ import annotations

import json
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

__all__ = [
    "DEFAULT_ELICIT_MARKER",
    "DEFAULT_EXIT_PLAN_MARKER",
    "DEFAULT_LONG_MARKER",
    "DEFAULT_QUESTION",
    "DEFAULT_TOOL_MARKER",
    "Conversation",
    "Fail",
    "Match",
    "Part",
    "Reply",
    "Rule",
    "Script",
    "ScriptError",
    "SlowText",
    "Text",
    "Thinking",
    "ToolCall",
    "default_script",
    "expand",
    "render",
    "schema_instance",
]

Provider = Literal["anthropic", "openai"]

DEFAULT_TOOL_MARKER = "acp:tool"
DEFAULT_ELICIT_MARKER = "acp:elicit"
#: Claude Code's ExitPlanMode: a prompt with this marker, in plan mode, has the model present a plan.
DEFAULT_EXIT_PLAN_MARKER = "acp:exit-plan"
DEFAULT_PLAN_TEXT = "1. Read the README.\n2. Write the conformance probe file."
#: The question the default script asks with Claude Code's AskUserQuestion (its input schema:
#: 2..4 options, each with a label and a description).
DEFAULT_QUESTION: dict[str, Any] = {
    "question": "Which greeting should I use?",
    "header": "Greeting",
    "options": [
        {"label": "hello", "description": "a plain hello"},
        {"label": "howdy", "description": "a friendly howdy"},
    ],
    "multiSelect": False,
}
DEFAULT_LONG_MARKER = "acp:long"
PROBE_FILE = "acp-probe.txt"
PROBE_CONTENT = "hello\n"


class ScriptError(ValueError):
    """A script (dict / TOML) that does not describe a valid script."""


# ------------------------------------------------------------------ parts
@dataclass(frozen=True)
class Text:
    """Assistant text, streamed in deltas of ``chunk`` characters."""

    text: str
    chunk: int = 24


@dataclass(frozen=True)
class Thinking:
    """Reasoning the model shows (Anthropic ``thinking`` block, OpenAI reasoning summary)."""

    text: str


@dataclass(frozen=True)
class ToolCall:
    """A tool call with these arguments (serialised as the JSON the model streams)."""

    name: str
    arguments: Mapping[str, Any] = field(default_factory=dict)
    id: str | None = None


@dataclass(frozen=True)
class SlowText:
    """Text that keeps coming, one ``piece`` every ``interval`` seconds, until the
    client disconnects or ``max_seconds`` have passed (then the reply ends normally).
    The model's pace, not synchronisation: it is how a turn stays busy for a cancel."""

    piece: str = "counting... "
    interval: float = 0.1
    max_seconds: float = 60.0


Part = Text | Thinking | ToolCall | SlowText


@dataclass(frozen=True)
class Fail:
    """An API error instead of an answer (HTTP ``status`` with the provider's error body)."""

    status: int = 400
    type: str = "invalid_request_error"
    message: str = "scripted error from the model stub"


@dataclass(frozen=True)
class Reply:
    """The model's whole answer to one request."""

    parts: tuple[Part, ...] = ()
    error: Fail | None = None

    @property
    def tool_calls(self) -> tuple[ToolCall, ...]:
        return tuple(p for p in self.parts if isinstance(p, ToolCall))

    def summary(self) -> str:
        if self.error is not None:
            return f"error {self.error.status} {self.error.type}"
        out: list[str] = []
        for p in self.parts:
            if isinstance(p, Text):
                out.append(f"text {_short(p.text)!r}")
            elif isinstance(p, Thinking):
                out.append(f"thinking {_short(p.text)!r}")
            elif isinstance(p, ToolCall):
                out.append(f"tool_call {p.name} {_short(str(dict(p.arguments)), 80)}")
            else:
                out.append(f"slow stream ({p.interval:g} s pace, max {p.max_seconds:g} s)")
        return "; ".join(out) or "empty"


# ---------------------------------------------------------- conversation
@dataclass(frozen=True)
class Conversation:
    """What a rule may look at, independent of the wire format."""

    provider: Provider
    model: str = ""
    #: Text of the latest user message that carries text (the prompt of the turn).
    last_user_text: str = ""
    #: The last input item is (or contains) a tool result: the model is asked to go on after a tool.
    after_tool_result: bool = False
    #: The outputs of those tool results, as text.
    tool_results: tuple[str, ...] = ()
    #: Names of the tools the request offers (empty: a side request, e.g. a title).
    tools: tuple[str, ...] = ()
    #: The session working directory, when the request reveals it (system prompt / environment context).
    cwd: str | None = None
    #: How many tool calls the model made so far in this conversation.
    tool_calls_so_far: int = 0
    streaming: bool = True
    #: The system prompt / developer instructions, joined (what the agent tells its model).
    system_text: str = ""
    #: The user's own words in ``last_user_text`` (injected context blocks left out), for reports.
    headline: str = ""
    #: A JSON schema the answer must follow (structured output), e.g. Claude Code's title request.
    output_schema: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class Match:
    """Conditions on a ``Conversation``; all given ones must hold."""

    contains: str | None = None
    after_tool_result: bool | None = None
    with_tools: bool | None = None
    tool: str | None = None
    model: str | None = None
    system_contains: str | None = None

    def fits(self, conv: Conversation) -> bool:
        if self.system_contains is not None and self.system_contains not in conv.system_text:
            return False
        if self.contains is not None and self.contains not in conv.last_user_text:
            return False
        if self.after_tool_result is not None and conv.after_tool_result != self.after_tool_result:
            return False
        if self.with_tools is not None and bool(conv.tools) != self.with_tools:
            return False
        if self.tool is not None and self.tool not in conv.tools:
            return False
        return not (self.model is not None and self.model not in conv.model)


@dataclass
class Rule:
    """``match`` -> ``reply``; fires at most ``times`` times when given."""

    match: Match
    reply: Reply
    name: str = ""
    times: int | None = None
    used: int = 0

    def available(self) -> bool:
        return self.times is None or self.used < self.times


@dataclass
class Script:
    """Ordered rules, first fit wins; ``default`` answers whatever none fits."""

    rules: list[Rule] = field(default_factory=list)
    default: Reply = field(default_factory=lambda: Reply((Text("OK."),)))

    def decide(self, conv: Conversation) -> tuple[str, Reply]:
        """The rule name (``"default"`` when none fits) and the reply for ``conv``.

        Unscripted structured-output requests get a minimal JSON instance of their schema
        (a title request still gets a parseable title)."""
        for rule in self.rules:
            if rule.available() and rule.match.fits(conv):
                rule.used += 1
                return rule.name or "rule", rule.reply
        if conv.output_schema is not None and not self.default.error and not self.default.tool_calls:
            return "default (json)", Reply((Text(json.dumps(schema_instance(conv.output_schema))),))
        return "default", self.default

    # ----------------------------------------------------------- loading
    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, base: Script | None = None) -> Script:
        """Build a script; with ``base``, its rules follow the loaded ones (and its default applies)."""
        if not isinstance(data, Mapping):
            raise ScriptError(f"a script is a table, got {type(data).__name__}")
        unknown = set(data) - {"rule", "rules", "default"}
        if unknown:
            raise ScriptError(f"unknown script keys: {sorted(unknown)}")
        raw_rules = data.get("rule", data.get("rules", []))
        if not isinstance(raw_rules, list):
            raise ScriptError("'rule' must be a list of tables")
        rules = [_rule(r, i) for i, r in enumerate(raw_rules)]
        default = base.default if base is not None else Reply((Text("OK."),))
        if "default" in data:
            d = data["default"]
            if not isinstance(d, Mapping):
                raise ScriptError("'default' must be a table with 'reply' or 'error'")
            default = _reply(d, "default")
        if base is not None:
            rules.extend(base.rules)
        return cls(rules, default)

    @classmethod
    def from_toml(cls, path: str | Path, *, base: Script | None = None) -> Script:
        try:
            data = tomllib.loads(Path(path).read_text("utf-8"))
        except (OSError, tomllib.TOMLDecodeError) as exc:
            raise ScriptError(f"cannot load script {path}: {exc}") from None
        return cls.from_dict(data, base=base)


def default_script(provider: Provider) -> Script:
    """The conversation-driven default (see the module docstring)."""
    after = Rule(
        Match(after_tool_result=True),
        Reply((Text("Done. The tool reported: {tool_result}"),)),
        name="after-tool",
    )
    long = Rule(Match(contains=DEFAULT_LONG_MARKER, with_tools=True), Reply((SlowText(),)), name="long")
    if provider == "anthropic":
        write = ToolCall("Write", {"file_path": "{cwd}/" + PROBE_FILE, "content": PROBE_CONTENT})
        # Claude Code's question tool, offered only when the client advertises elicitation.form
        # (claude-agent-acp turns it into a form elicitation/create tied to the tool call).
        ask = ToolCall("AskUserQuestion", {"questions": [DEFAULT_QUESTION]})
        # Claude Code's plan approval: a deferred tool (not in the request's tools, named in the system
        # text), called directly all the same; after its result the "after-tool" rule ends the turn.
        exit_plan = ToolCall("ExitPlanMode", {"plan": DEFAULT_PLAN_TEXT})
        tools = [
            Rule(Match(contains=DEFAULT_ELICIT_MARKER, tool="AskUserQuestion"), Reply((ask,)), name="ask"),
            Rule(
                Match(contains=DEFAULT_EXIT_PLAN_MARKER, with_tools=True),
                Reply((Text("Here is my plan."), exit_plan)),
                name="exit-plan",
            ),
            Rule(Match(contains=DEFAULT_TOOL_MARKER, with_tools=True), Reply((write,)), name="tool"),
        ]
    else:
        # Codex: exec_command (unified exec).  Where the instructions say how to request escalation
        # (approval policy on-request), the model asks for it, so the session's approval policy decides
        # and no working sandbox is needed; under "never" it must not (the command would be refused).
        command = {"cmd": f"printf '{PROBE_CONTENT.strip()}\\n' > {PROBE_FILE}", "workdir": "{cwd}"}
        escalated = {
            **command,
            "sandbox_permissions": "require_escalated",
            "justification": "Do you allow the conformance suite's probe file to be written?",
        }
        tools = [
            Rule(
                Match(contains=DEFAULT_TOOL_MARKER, with_tools=True, system_contains="require_escalated"),
                Reply((ToolCall("exec_command", escalated),)),
                name="tool-escalated",
            ),
            Rule(
                Match(contains=DEFAULT_TOOL_MARKER, with_tools=True),
                Reply((ToolCall("exec_command", command),)),
                name="tool",
            ),
        ]
    return Script([after, *tools, long], Reply((Text("Hello from the scripted model."),)))


def schema_instance(schema: Mapping[str, Any], depth: int = 0) -> Any:
    """A small value that satisfies common JSON schemas (objects, arrays, enums, scalars)."""
    if depth > 8:
        return None
    if "const" in schema:
        return schema["const"]
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        return schema["enum"][0]
    for key in ("anyOf", "oneOf", "allOf"):
        options = schema.get(key)
        if isinstance(options, list) and options and isinstance(options[0], Mapping):
            return schema_instance(options[0], depth + 1)
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind == "object" or "properties" in schema:
        raw_props = schema.get("properties")
        props: Mapping[str, Any] = raw_props if isinstance(raw_props, Mapping) else {}
        raw_required = schema.get("required")
        required = list(raw_required) if isinstance(raw_required, list) else list(props)
        return {k: schema_instance(v, depth + 1) for k, v in props.items() if k in required and isinstance(v, Mapping)}
    if kind == "array":
        return []
    if kind == "integer" or kind == "number":
        return 0
    if kind == "boolean":
        return False
    if kind == "null":
        return None
    return "Scripted answer"


def render(text: str, conv: Conversation) -> str:
    """Substitute ``{cwd}``, ``{prompt}`` and ``{tool_result}`` (first line, shortened) in reply text."""
    first = next((r.strip().splitlines()[0] for r in conv.tool_results if r.strip()), "(no output)")
    return (
        text.replace("{cwd}", conv.cwd or ".")
        .replace("{prompt}", _short(conv.headline or conv.last_user_text, 120))
        .replace("{tool_result}", _short(first, 160))
    )


def expand(value: Any, conv: Conversation, n: int) -> Any:
    """Substitute ``{cwd}`` and ``{n}`` in the strings of a tool-arguments structure."""
    if isinstance(value, str):
        return value.replace("{cwd}", conv.cwd or ".").replace("{n}", str(n))
    if isinstance(value, Mapping):
        return {k: expand(v, conv, n) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [expand(v, conv, n) for v in value]
    return value


# ------------------------------------------------------------- parsing
def _short(text: str, n: int = 40) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


def _rule(raw: Any, i: int) -> Rule:
    where = f"rule {i + 1}"
    if not isinstance(raw, Mapping):
        raise ScriptError(f"{where}: must be a table")
    known = {
        "name",
        "times",
        "contains",
        "after_tool_result",
        "with_tools",
        "tool",
        "model",
        "system_contains",
        "reply",
        "error",
    }
    unknown = set(raw) - known
    if unknown:
        raise ScriptError(f"{where}: unknown keys {sorted(unknown)}")
    name = raw.get("name", f"rule-{i + 1}")
    times = raw.get("times")
    if times is not None and (not isinstance(times, int) or times < 1):
        raise ScriptError(f"{where}: 'times' must be a positive integer")
    match = Match(
        contains=_opt(raw, "contains", str, where),
        after_tool_result=_opt(raw, "after_tool_result", bool, where),
        with_tools=_opt(raw, "with_tools", bool, where),
        tool=_opt(raw, "tool", str, where),
        model=_opt(raw, "model", str, where),
        system_contains=_opt(raw, "system_contains", str, where),
    )
    return Rule(match, _reply(raw, where), name=str(name), times=times)


def _opt(raw: Mapping[str, Any], key: str, kind: type, where: str) -> Any:
    value = raw.get(key)
    if value is not None and not isinstance(value, kind):
        raise ScriptError(f"{where}: {key!r} must be {kind.__name__}")
    return value


def _reply(raw: Mapping[str, Any], where: str) -> Reply:
    err = raw.get("error")
    parts_raw = raw.get("reply", [])
    if err is not None:
        if not isinstance(err, Mapping):
            raise ScriptError(f"{where}: 'error' must be a table")
        return Reply(
            (),
            Fail(
                status=int(err.get("status", 400)),
                type=str(err.get("type", "invalid_request_error")),
                message=str(err.get("message", "scripted error from the model stub")),
            ),
        )
    if isinstance(parts_raw, str):
        parts_raw = [{"type": "text", "text": parts_raw}]
    if not isinstance(parts_raw, Sequence):
        raise ScriptError(f"{where}: 'reply' must be a list of parts")
    return Reply(tuple(_part(p, f"{where}, part {j + 1}") for j, p in enumerate(parts_raw)))


def _part(raw: Any, where: str) -> Part:
    if not isinstance(raw, Mapping) or not isinstance(raw.get("type"), str):
        raise ScriptError(f"{where}: a part is a table with a 'type'")
    kind = raw["type"]
    try:
        if kind == "text":
            return Text(str(raw["text"]), int(raw.get("chunk", 24)))
        if kind == "thinking":
            return Thinking(str(raw["text"]))
        if kind == "tool_call":
            args = raw.get("arguments", {})
            if not isinstance(args, Mapping):
                raise ScriptError(f"{where}: 'arguments' must be a table")
            return ToolCall(str(raw["name"]), dict(args), raw.get("id"))
        if kind == "slow_text":
            return SlowText(
                str(raw.get("piece", "counting... ")),
                float(raw.get("interval", 0.1)),
                float(raw.get("max_seconds", 60.0)),
            )
    except KeyError as exc:
        raise ScriptError(f"{where}: missing {exc.args[0]!r}") from None
    raise ScriptError(f"{where}: unknown part type {kind!r} (text, thinking, tool_call, slow_text)")
