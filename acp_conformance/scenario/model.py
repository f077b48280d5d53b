"""The scenario file format, as pydantic models (the single source of truth).

A scenario is DATA: one YAML document (JSON is YAML too) that says what
one side of an ACP connection sends, what it expects back, and which
clause each expectation proves.  ``plays`` names the side the file plays:
``client`` (it drives an agent under test) or ``agent`` (it answers a
client under test).  Everything else is symmetric.

The published JSON Schema (``scenarios/schema.json``) is generated from
these models by ``schema_export``; editors use it to autocomplete and
validate scenario files.  The loader adds the checks a schema cannot
express (clause ids, names defined before use, template syntax) and
reports every problem with file, line and step.

Step kinds (each step is a mapping with exactly one of these keys):
``send``, ``call``, ``expect``, ``expect_nothing``, ``check``, ``answer``,
``wait``, ``if``, ``parallel``, ``raw``, ``close``, ``let``, ``note``,
``not_applicable``.  There is deliberately no ``sleep``: synchronise on a
frame (``expect``) or a condition (``wait``).
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal, Union

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Discriminator,
    Field,
    PrivateAttr,
    Tag,
    WithJsonSchema,
    model_validator,
)

__all__ = [
    "ANSWER_POLICIES",
    "STEP_KINDS",
    "AnswerSpec",
    "AnswerStep",
    "CallSpec",
    "CallStep",
    "CheckSpec",
    "CheckStep",
    "CloseStep",
    "Condition",
    "ErrorSpec",
    "ExpectNothingStep",
    "ExpectSpec",
    "ExpectStep",
    "IfStep",
    "LetStep",
    "NotApplicableStep",
    "NoteStep",
    "NothingSpec",
    "ParallelStep",
    "RawSpec",
    "RawStep",
    "Scenario",
    "SendSpec",
    "SendStep",
    "Step",
    "WaitSpec",
    "WaitStep",
    "parse_duration",
]

Json = Any

#: Ways to answer the peer's requests that no step answers explicitly.
#: The permission kinds apply to ``session/request_permission`` only.
ANSWER_POLICIES: tuple[str, ...] = (
    "auto",
    "hold",
    "never",
    "allow_once",
    "allow_always",
    "reject_once",
    "reject_always",
    "allow",
    "reject",
    "cancelled",
)
PERMISSION_POLICIES = frozenset(ANSWER_POLICIES[3:])

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s)\s*$")
_NAME = r"^[A-Za-z_][A-Za-z0-9_]*$"


def parse_duration(value: Any) -> float:
    """``250ms``, ``2s``, ``1.5s`` or a number of seconds -> seconds."""
    if isinstance(value, bool):
        raise ValueError("a duration is a number of seconds or a string such as 250ms or 2s, not a boolean")
    if isinstance(value, (int, float)):
        if value < 0:
            raise ValueError("a duration cannot be negative")
        return float(value)
    if isinstance(value, str):
        m = _DURATION.match(value)
        if m:
            n = float(m.group(1))
            return n / 1000.0 if m.group(2) == "ms" else n
    raise ValueError(f"invalid duration {value!r}: use e.g. 250ms, 2s, 1.5s or a number of seconds")


Duration = Annotated[
    float,
    BeforeValidator(parse_duration),
    WithJsonSchema(
        {
            "anyOf": [
                {"type": "number", "minimum": 0},
                {"type": "string", "pattern": r"^\s*\d+(\.\d+)?\s*(ms|s)\s*$"},
            ],
            "description": "A deadline: 250ms, 2s, 1.5s, or a number of seconds.",
        }
    ),
]


def _as_list(value: Any) -> Any:
    return [value] if isinstance(value, str) else value


Clauses = Annotated[
    list[str],
    BeforeValidator(_as_list),
    WithJsonSchema(
        {
            "anyOf": [
                {"type": "string", "pattern": r"^[a-z0-9][a-z0-9.\-]*$"},
                {"type": "array", "items": {"type": "string", "pattern": r"^[a-z0-9][a-z0-9.\-]*$"}, "minItems": 1},
            ],
            "description": "The clause id(s) this expectation proves (`python -m acp_conformance clauses` lists them).",
        }
    ),
]

Name = Annotated[str, Field(pattern=_NAME)]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True, frozen=True)


def _one_of(model: BaseModel, fields: tuple[str, ...], what: str) -> None:
    given = [f for f in fields if getattr(model, f) is not None]
    names = [_alias(f) for f in fields]
    if len(given) != 1:
        have = f" (got {', '.join(_alias(f) for f in given)})" if given else ""
        raise ValueError(f"{what} needs exactly one of: {', '.join(names)}{have}")


def _alias(field: str) -> str:
    return field[:-1] if field.endswith("_") else field


# ------------------------------------------------------------------ pieces
class ErrorSpec(_Model):
    """A JSON-RPC error object we send."""

    code: int = Field(description="JSON-RPC error code, e.g. -32800 (cancelled) or -32601 (method not found)")
    message: str = Field(description="short human-readable description")
    data: Json = Field(None, description="optional extra data")


_FRAME_KINDS = ("request", "notification", "response", "response_id", "violation")


class _FramePattern(_Model):
    request: str | None = Field(None, description="an inbound request whose method matches this (glob: fs/*)")
    notification: str | None = Field(None, description="an inbound notification whose method matches this (glob)")
    response: Name | None = Field(None, description="the response to OUR request named by `as`")
    response_id: Json = Field(None, description="a response carrying exactly this id (e.g. null for parse errors)")
    violation: str | None = Field(
        None, description="a protocol violation the core recorded, by clause id (glob), e.g. transport.*"
    )
    params: Json = Field(None, description="pattern the params must match (partial; see scenarios/README.md)")
    result: Json = Field(None, description="pattern the result must match; implies a success response")
    error: Json = Field(None, description="pattern the error object must match; implies an error response")

    def frame_kind(self) -> str:
        for f in ("request", "notification", "response", "violation"):
            if getattr(self, f) is not None:
                return f
        return "response_id"

    def _check_kind(self, what: str) -> None:
        given = [f for f in ("request", "notification", "response", "violation") if getattr(self, f) is not None]
        if "response_id" in self.model_fields_set:
            given.append("response_id")
        if len(given) != 1:
            have = f" (got {', '.join(given)})" if given else ""
            raise ValueError(f"{what} needs exactly one of: {', '.join(_FRAME_KINDS)}{have}")
        kind = given[0]
        if self.params is not None and kind not in ("request", "notification"):
            raise ValueError(f"{what}: params applies to request/notification frames, not {kind}")
        if (self.result is not None or self.error is not None) and kind not in ("response", "response_id"):
            raise ValueError(f"{what}: result/error apply to responses, not {kind}")
        if self.result is not None and self.error is not None:
            raise ValueError(f"{what}: give result or error, not both")


# ------------------------------------------------------------------- steps
class SendSpec(_Model):
    """Send a request or a notification (templated)."""

    request: str | None = Field(None, description="method of a request to send")
    notification: str | None = Field(None, description="method of a notification to send")
    params: Json = Field(None, description="params (templated: {{name}}, {{name.path}}, {{sandbox}}, {{fake.word}})")
    id: Json = Field(None, description="explicit request id (any JSON id); default: the next integer")
    as_: Name | None = Field(None, alias="as", description="name this request: expect its response with response: NAME")
    validate_: bool = Field(
        True, alias="validate", description="schema-check before sending; false sends an invalid frame on purpose"
    )
    while_pending: Name | None = Field(
        None,
        description="a race precondition: send only while OUR request of this name is still unanswered, "
        "proven by a round trip first (the peer's earlier output has then all arrived); if it was answered, "
        "the race could not be provoked and the scenario ends INCONCLUSIVE",
    )
    round_trip: bool = Field(
        True,
        description="with while_pending: prove it with a round trip first (default); false judges only what has "
        "arrived, for races where any delay would let the peer move on",
    )
    held_by: list[Name] | None = Field(
        None,
        description="what holds the peer's turn open when this goes out: captured requests of the peer that we "
        "have not answered (held with answers: hold), or model_stream (a slow reply of the runner's scripted "
        "model endpoint). Name this send with `as`; an expectation with race: NAME then FAILs only if one of "
        "them still held the turn when this went out, and is INCONCLUSIVE otherwise",
    )

    @model_validator(mode="after")
    def _kinds(self) -> SendSpec:
        _one_of(self, ("request", "notification"), "send")
        if self.notification is not None and self.id is not None:
            raise ValueError("send: a notification has no id")
        if self.notification is not None and self.as_ is not None and self.held_by is None:
            raise ValueError("send: name a notification with `as` only to judge a race on it (give held_by)")
        if self.held_by is not None and self.as_ is None:
            raise ValueError("send: held_by needs `as`, the name race: refers to")
        if not self.round_trip and self.while_pending is None:
            raise ValueError("send: round_trip applies to while_pending; give while_pending too")
        return self


#: The ``held_by`` name of a hold the runner reports (a slow reply of its scripted model endpoint).
MODEL_STREAM = "model_stream"

_RACE = (
    "judge this as a race against the send of this name (which has held_by): a mismatch FAILs only if the "
    "peer's turn was held open when that send went out, and is INCONCLUSIVE otherwise (the turn may have ended "
    "before the frame reached the peer)"
)


class _Judged(_Model):
    clause: Clauses | None = Field(None, description="the clause id(s) this expectation proves")
    precondition: str | None = Field(
        None,
        description="instead of a clause: what this step establishes; if it fails the scenario is INCONCLUSIVE",
    )
    within: Duration | None = Field(None, description="deadline (default: the scenario's timeout)")

    def _check_judged(self, what: str, *, optional: bool = False) -> None:
        if self.clause is not None and self.precondition is not None:
            raise ValueError(f"{what}: give clause or precondition, not both")
        if self.clause is None and self.precondition is None and not optional:
            raise ValueError(f"{what} must name the clause it proves (clause: ID) or be a precondition: WHY")


class CallSpec(_Judged):
    """Send a request and expect its response (``send`` + ``expect`` in one step)."""

    request: str = Field(description="method to call")
    params: Json = Field(None, description="params (templated)")
    id: Json = Field(None, description="explicit request id; default: the next integer")
    as_: Name | None = Field(None, alias="as", description="name: the response is captured under it")
    validate_: bool = Field(True, alias="validate", description="schema-check the params before sending")
    result: Json = Field(None, description="pattern the result must match (default: any success)")
    error: Json = Field(None, description="pattern the error must match: the call is expected to fail")

    @model_validator(mode="after")
    def _judge(self) -> CallSpec:
        self._check_judged("call")
        if self.result is not None and self.error is not None:
            raise ValueError("call: give result or error, not both")
        return self


class ExpectSpec(_FramePattern, _Judged):
    """Wait for an inbound frame that matches (partial match with wildcards and captures)."""

    as_: Name | None = Field(None, alias="as", description="capture the matched frame under this name")
    after: Name | None = Field(
        None, description="search from this named frame on (default: after the previous match of this branch)"
    )
    before: Name | None = Field(
        None,
        description="the frame must arrive before this one (our request's response, or a captured frame); "
        "if that arrives first the expectation fails at once",
    )
    race: Name | None = Field(None, description=_RACE)

    @model_validator(mode="after")
    def _valid(self) -> ExpectSpec:
        self._check_kind("expect")
        self._check_judged("expect")
        return self


class NothingSpec(_FramePattern, _Judged):
    """Assert that no matching frame arrives: within a time window, or before a named frame.

    As a precondition it establishes what a later step needs (no other tool call is about, so a
    write can only be the refused tool's): a matching frame makes the scenario INCONCLUSIVE."""

    within: Duration | None = Field(
        None, description="watch this long (e.g. 300ms); with until: how long to wait for that frame at most"
    )
    until: Name | None = Field(
        None,
        description="watch until this frame has arrived (our request's response, or a captured frame), "
        "or until the peer closes its output (eof)",
    )
    after: Name | None = Field(None, description="window starts after this named frame (default: the branch cursor)")

    @model_validator(mode="after")
    def _valid(self) -> NothingSpec:
        self._check_kind("expect_nothing")
        self._check_judged("expect_nothing")
        if self.within is None and self.until is None:
            raise ValueError("expect_nothing needs within (a time window) or until (a frame, or eof)")
        return self


class CheckSpec(_Model):
    """Assert something about a value captured earlier (no waiting)."""

    ref: str = Field(description="a captured name or path, e.g. done or done.result.stopReason")
    matches: Json = Field(description="pattern the value must match")
    clause: Clauses | None = Field(None, description="the clause id(s) this proves")
    precondition: str | None = Field(None, description="instead of a clause: what this establishes")
    race: Name | None = Field(None, description=_RACE)

    @model_validator(mode="after")
    def _valid(self) -> CheckSpec:
        if (self.clause is None) == (self.precondition is None):
            raise ValueError("check needs exactly one of: clause, precondition")
        return self


class AnswerSpec(_Model):
    """Answer a request of the peer explicitly (one it sent and we captured, or any id)."""

    request: Name | None = Field(None, description="captured name of the peer's request to answer")
    id: Json = Field(None, description="answer this id instead (e.g. one the peer never used)")
    result: Json = Field(None, description="result to send (templated)")
    error: ErrorSpec | None = Field(None, description="error to send")
    policy: str | None = Field(
        None, description="auto (our endpoint's normal answer) or a permission policy such as allow_once"
    )
    again: bool = Field(False, description="send even though it was answered already (a deliberate duplicate)")
    validate_: bool = Field(True, alias="validate", description="schema-check the result before sending")

    @model_validator(mode="after")
    def _valid(self) -> AnswerSpec:
        if (self.request is None) == ("id" not in self.model_fields_set):
            raise ValueError("answer needs exactly one of: request, id")
        given = [k for k in ("result", "error", "policy") if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError("answer needs exactly one of: result, error, policy")
        if self.policy is not None and self.policy not in ANSWER_POLICIES:
            raise ValueError(f"answer: unknown policy {self.policy!r}; use one of {', '.join(ANSWER_POLICIES)}")
        if self.policy in ("hold", "never"):
            raise ValueError("answer: policy hold/never means not answering; leave the step out")
        if self.policy is not None and self.request is None:
            raise ValueError("answer: a policy needs the request it answers (request: NAME)")
        return self


class WaitSpec(_Model):
    """Wait for a condition (never a bare delay)."""

    captured: Name | None = Field(None, description="until this name is captured (e.g. by a parallel branch)")
    eof: bool | None = Field(None, description="until the peer closes its output (exits)")
    quiet: Duration | None = Field(None, description="until the peer has sent nothing for this long")
    within: Duration | None = Field(None, description="deadline (default: the scenario's timeout)")
    clause: Clauses | None = Field(None, description="a timeout fails this clause (default: INCONCLUSIVE)")

    @model_validator(mode="after")
    def _valid(self) -> WaitSpec:
        given = [k for k in ("captured", "eof", "quiet") if getattr(self, k) not in (None, False)]
        if len(given) != 1:
            raise ValueError("wait needs exactly one of: captured, eof: true, quiet")
        return self


class Condition(_Model):
    """What ``if`` tests."""

    capability: str | None = Field(
        None,
        description="the peer advertised this capability (dotted path into agentCapabilities when we play "
        "the client, clientCapabilities when we play the agent): present, not null, not false",
    )
    not_capability: str | None = Field(None, description="the peer did NOT advertise this capability")
    captured: Name | None = Field(None, description="this name has been captured")

    @model_validator(mode="after")
    def _valid(self) -> Condition:
        _one_of(self, ("capability", "not_capability", "captured"), "if")
        return self


class RawSpec(_Model):
    """Bytes sent exactly as given (malformed input on purpose)."""

    text: str | None = Field(None, description="UTF-8 text (templated)")
    hex: str | None = Field(None, description="hex bytes, e.g. fffe0a")
    base64: str | None = Field(None, description="base64 bytes")
    newline: bool = Field(True, description="append a newline after the bytes")

    @model_validator(mode="after")
    def _valid(self) -> RawSpec:
        _one_of(self, ("text", "hex", "base64"), "raw")
        if self.hex is not None:
            try:
                bytes.fromhex(self.hex)
            except ValueError:
                raise ValueError(f"raw: invalid hex {self.hex!r}") from None
        return self


class SendStep(_Model):
    send: SendSpec = Field(description="send a request or notification")


class CallStep(_Model):
    call: CallSpec = Field(description="send a request and expect its response")


class ExpectStep(_Model):
    expect: ExpectSpec = Field(description="wait for a matching frame, within a deadline")


class ExpectNothingStep(_Model):
    expect_nothing: NothingSpec = Field(description="assert no matching frame arrives (window or until a frame)")


class CheckStep(_Model):
    check: CheckSpec = Field(description="assert on a captured value")


class AnswerStep(_Model):
    answer: AnswerSpec = Field(description="answer the peer's request explicitly")


class WaitStep(_Model):
    wait: WaitSpec = Field(description="wait for a condition (captured name, EOF, quiet peer)")


class IfStep(_Model):
    if_: Condition = Field(alias="if", description="the condition")
    then: list[Step] = Field(default_factory=list, description="steps when it holds")
    else_: list[Step] = Field(default_factory=list, alias="else", description="steps otherwise")


class ParallelStep(_Model):
    parallel: list[list[Step]] = Field(min_length=2, description="branches run concurrently; all must finish")


class RawStep(_Model):
    raw: str | RawSpec = Field(description="bytes to send as they are (a string is UTF-8 text plus a newline)")


class CloseStep(_Model):
    close: Literal[True] = Field(description="close our output (the peer sees EOF)")


class LetStep(_Model):
    let: dict[Annotated[str, Field(pattern=_NAME)], Json] = Field(description="define names (templated values)")


class NoteStep(_Model):
    note: str = Field(description="a note written into the transcript")


class NotApplicableStep(_Model):
    not_applicable: str = Field(
        description="stop here: the scenario does not apply to this peer (the reason); its clauses not judged "
        "so far are NOT_APPLICABLE"
    )


STEP_KINDS: dict[str, type[_Model]] = {
    "send": SendStep,
    "call": CallStep,
    "expect": ExpectStep,
    "expect_nothing": ExpectNothingStep,
    "check": CheckStep,
    "answer": AnswerStep,
    "wait": WaitStep,
    "if": IfStep,
    "parallel": ParallelStep,
    "raw": RawStep,
    "close": CloseStep,
    "let": LetStep,
    "note": NoteStep,
    "not_applicable": NotApplicableStep,
}


def step_kind(value: Any) -> str | None:
    """The kind of a raw step mapping, or None when it has not exactly one kind key."""
    if isinstance(value, BaseModel):
        for kind, model in STEP_KINDS.items():
            if isinstance(value, model):
                return kind
        return None
    if not isinstance(value, dict):
        return None
    kinds = [k for k in value if k in STEP_KINDS]
    return kinds[0] if len(kinds) == 1 else None


Step = Annotated[
    Union[  # noqa: UP007 - pydantic needs the Union spelled out for tagged members
        Annotated[SendStep, Tag("send")],
        Annotated[CallStep, Tag("call")],
        Annotated[ExpectStep, Tag("expect")],
        Annotated[ExpectNothingStep, Tag("expect_nothing")],
        Annotated[CheckStep, Tag("check")],
        Annotated[AnswerStep, Tag("answer")],
        Annotated[WaitStep, Tag("wait")],
        Annotated[IfStep, Tag("if")],
        Annotated[ParallelStep, Tag("parallel")],
        Annotated[RawStep, Tag("raw")],
        Annotated[CloseStep, Tag("close")],
        Annotated[LetStep, Tag("let")],
        Annotated[NoteStep, Tag("note")],
        Annotated[NotApplicableStep, Tag("not_applicable")],
    ],
    Discriminator(
        step_kind,
        custom_error_type="step_kind",
        custom_error_message="a step is a mapping with exactly one of: " + ", ".join(STEP_KINDS),
    ),
]

IfStep.model_rebuild()
ParallelStep.model_rebuild()


class ResultPolicy(_Model):
    result: Json = Field(description="answer every such request with this result (templated; {{request...}})")


class ErrorPolicy(_Model):
    error: ErrorSpec


AnswerPolicy = Annotated[
    Union[
        Literal[
            "auto",
            "hold",
            "never",
            "allow_once",
            "allow_always",
            "reject_once",
            "reject_always",
            "allow",
            "reject",
            "cancelled",
        ],
        "ResultPolicy",
        "ErrorPolicy",
    ],
    Field(description="auto | hold | never | a permission policy | {result: ...} | {error: {code, message}}"),
]


class Scenario(_Model):
    """One scenario file."""

    scenario: Annotated[str, Field(pattern=r"^[a-z0-9][a-z0-9_.\-]*$")] = Field(
        description="the scenario's id (a slug; usually the file name)"
    )
    description: str = Field("", description="what it tests, for people")
    plays: Literal["client", "agent"] = Field(
        description="the side this file plays: client (tests an agent) or agent (tests a client)"
    )
    seed: int | None = Field(None, description="Faker seed (default: derived from the scenario id); recorded")
    timeout: Duration | None = Field(None, description="default deadline of every wait (default: the runner's)")
    tags: list[str] = Field(default_factory=list, description="free-form labels")
    vars: dict[Annotated[str, Field(pattern=_NAME)], Json] = Field(
        default_factory=dict, description="constants usable as {{name}}"
    )
    answers: dict[str, AnswerPolicy] = Field(
        default_factory=dict,
        description="method -> how to answer the peer's requests no step answers (default auto: the mock's "
        "normal behaviour; hold: wait for an answer step)",
    )
    steps: list[Step] = Field(min_length=1, description="what happens, in order")

    _source: str = PrivateAttr(default="<scenario>")
    _lines: dict[str, int] = PrivateAttr(default_factory=dict)

    @property
    def source(self) -> str:
        """The file it was loaded from."""
        return self._source

    def line_of(self, path: str) -> int | None:
        """Line of a step path such as ``steps[3].parallel[0][1]`` in the source file."""
        return self._lines.get(path)

    def clauses(self) -> list[str]:
        """Every clause an expectation of this scenario names, in order of appearance."""
        out: list[str] = []
        for _, step in iter_steps(self.steps):
            for cid in step_clauses(step):
                if cid not in out:
                    out.append(cid)
        return out

    @model_validator(mode="after")
    def _valid(self) -> Scenario:
        for method, policy in self.answers.items():
            if isinstance(policy, str) and policy in PERMISSION_POLICIES and method != "session/request_permission":
                raise ValueError(
                    f"answers: {method}: {policy!r} is a permission policy (only for session/request_permission)"
                )
        return self


Scenario.model_rebuild()


def step_clauses(step: Any) -> list[str]:
    """The clauses one step (not its children) names."""
    spec = getattr(step, step_kind(step) or "", None)
    clause = getattr(spec, "clause", None)
    return list(clause) if clause else []


def iter_steps(steps: list[Any], prefix: str = "steps") -> Any:
    """``(path, step)`` for every step, depth first, in document order."""
    for i, step in enumerate(steps):
        path = f"{prefix}[{i}]"
        yield path, step
        if isinstance(step, IfStep):
            yield from iter_steps(step.then, f"{path}.then")
            yield from iter_steps(step.else_, f"{path}.else")
        elif isinstance(step, ParallelStep):
            for b, branch in enumerate(step.parallel):
                yield from iter_steps(branch, f"{path}.parallel[{b}]")
