"""Reading scenario files: YAML as plain data, then the model, then the meaning.

Loading never executes anything.  The YAML reader is a restricted safe
loader that yields JSON data only: no tags (``!!python/...``, ``!!binary``
and any other explicit tag are errors), no anchors or aliases, no
duplicate keys, no timestamps, and YAML 1.2 booleans (``yes``/``no``/``on``
stay strings, so the "Norway problem" cannot bite).

A bad file is rejected before anything runs, with every problem listed as
``FILE:LINE: steps[3] (expect): what is wrong``: YAML syntax, the model
(pydantic), then what the model cannot say - unknown clause ids or clauses
that do not constrain the peer under test, names used before they are
defined, malformed templates, unknown matchers and Faker providers.
"""

from __future__ import annotations

import os
import re
import zlib
from collections.abc import Iterable
from functools import cache
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from acp_conformance.errors import ConfigurationError, ScenarioError
from acp_conformance.scenario.match import (
    TemplateError,
    captures_in,
    pattern_problems,
    template_roots,
)
from acp_conformance.scenario.model import (
    MODEL_STREAM,
    STEP_KINDS,
    AnswerStep,
    CallStep,
    CheckStep,
    ExpectNothingStep,
    ExpectStep,
    IfStep,
    LetStep,
    ParallelStep,
    RawStep,
    Scenario,
    SendStep,
    WaitStep,
    step_kind,
)

__all__ = ["BUILTINS", "default_seed", "load_scenario", "load_text", "parse_yaml"]

#: Names every scenario may use in templates without defining them.
BUILTINS = ("sandbox", "seed", "scenario", "prompt", "tool_prompt", "long_prompt", "elicit_prompt", "fake")

_STR = "tag:yaml.org,2002:str"
_INT = "tag:yaml.org,2002:int"
_FLOAT = "tag:yaml.org,2002:float"
_BOOL = "tag:yaml.org,2002:bool"
_NULL = "tag:yaml.org,2002:null"
_MAP = "tag:yaml.org,2002:map"
_SEQ = "tag:yaml.org,2002:seq"


class _Loader(yaml.SafeLoader):
    """SafeLoader with a JSON-compatible YAML 1.2 core schema and no aliases."""

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()  # type: ignore[no-untyped-call]
            raise yaml.composer.ComposerError(
                None, None, "anchors and aliases (*name) are not supported in scenario files", event.start_mark
            )
        return super().compose_node(parent, index)


_Loader.yaml_implicit_resolvers = {}
for _tag, _regex, _first in (
    (_BOOL, r"^(?:true|True|TRUE|false|False|FALSE)$", "tTfF"),
    (_NULL, r"^(?:~|null|Null|NULL|)$", ["~", "n", "N", ""]),
    (_INT, r"^[-+]?[0-9]+$", "-+0123456789"),
    (_FLOAT, r"^[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?$", "-+.0123456789"),
):
    _Loader.add_implicit_resolver(_tag, re.compile(_regex), list(_first))


class _Located:
    """Data plus the line of every node, by path tuple."""

    def __init__(self) -> None:
        self.lines: dict[tuple[Any, ...], int] = {}

    def build(self, node: Any, path: tuple[Any, ...], where: str) -> Any:
        self.lines[path] = node.start_mark.line + 1
        line = node.start_mark.line + 1
        if isinstance(node, yaml.MappingNode):
            if node.tag != _MAP:
                raise ScenarioError(f"{where}:{line}: YAML tag {node.tag!r} is not allowed (scenario files are data)")
            out: dict[str, Any] = {}
            for key_node, value_node in node.value:
                key = self.build(key_node, (*path, "<key>"), where)
                if not isinstance(key, str):
                    raise ScenarioError(
                        f"{where}:{key_node.start_mark.line + 1}: mapping keys must be strings, got {key!r}"
                    )
                if key in out:
                    raise ScenarioError(f"{where}:{key_node.start_mark.line + 1}: duplicate key {key!r}")
                out[key] = self.build(value_node, (*path, key), where)
            return out
        if isinstance(node, yaml.SequenceNode):
            if node.tag != _SEQ:
                raise ScenarioError(f"{where}:{line}: YAML tag {node.tag!r} is not allowed (scenario files are data)")
            return [self.build(item, (*path, i), where) for i, item in enumerate(node.value)]
        value = node.value
        if node.tag == _STR:
            return value
        if node.tag == _NULL:
            return None
        if node.tag == _BOOL:
            return value.lower() == "true"
        try:
            if node.tag == _INT:
                return int(value)
            if node.tag == _FLOAT:
                return float(value)
        except ValueError:
            raise ScenarioError(f"{where}:{line}: {value!r} is not a valid {node.tag.rsplit(':', 1)[-1]}") from None
        raise ScenarioError(f"{where}:{line}: YAML tag {node.tag!r} is not allowed (scenario files are data)")


def parse_yaml(text: str, where: str = "<scenario>") -> tuple[Any, dict[tuple[Any, ...], int]]:
    """Plain data from YAML text, and the line of each node; ``ScenarioError`` on anything else."""
    try:
        loader = _Loader(text)
        try:
            node = loader.get_single_node()
        finally:
            loader.dispose()
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = f":{mark.line + 1}" if mark is not None else ""
        context = ""
        if exc.context and exc.context_mark is not None and exc.context_mark is not mark:
            context = f" ({exc.context} started at line {exc.context_mark.line + 1})"
        raise ScenarioError(f"{where}{line}: YAML syntax: {exc.problem or exc.context}{context}") from None
    except yaml.YAMLError as exc:
        raise ScenarioError(f"{where}: YAML: {exc}") from None
    if node is None:
        raise ScenarioError(f"{where}: the file is empty")
    located = _Located()
    return located.build(node, (), where), located.lines


def _line(lines: dict[tuple[Any, ...], int], path: tuple[Any, ...]) -> int:
    while path and path not in lines:
        path = path[:-1]
    return lines.get(path, 1)


def _step_path(path: tuple[Any, ...]) -> str:
    """('steps', 3, 'then', 0, 'expect') -> 'steps[3].then[0]' (the enclosing step)."""
    out = ""
    last_step = ""
    i = 0
    while i < len(path):
        part = path[i]
        if part in ("steps", "then", "else", "parallel") and i + 1 < len(path) and isinstance(path[i + 1], int):
            out += ("." if out else "") + str(part) + f"[{path[i + 1]}]"
            i += 2
            if part == "parallel" and i < len(path) and isinstance(path[i], int):
                out += f"[{path[i]}]"
                i += 1
            last_step = out
            continue
        break
    return last_step


def _describe_step(data: Any, path: tuple[Any, ...]) -> str:
    sp = _step_path(path)
    if not sp:
        return ""
    try:
        kind = step_kind(_get(data, _step_tuple(sp)))
    except (KeyError, IndexError, TypeError):
        kind = None
    return f"{sp} ({kind})" if kind else sp


def _step_tuple(path: str) -> tuple[Any, ...]:
    """'steps[3].parallel[0][1]' -> ('steps', 3, 'parallel', 0, 1)."""
    out: list[Any] = []
    for name, idx in re.findall(r"([a-z_]+)?\[(\d+)\]", path):
        if name:
            out.append(name)
        out.append(int(idx))
    return tuple(out)


def _loc_path(data: Any, loc: Iterable[Any]) -> tuple[Any, ...]:
    """A pydantic error location, without union tags, as a path into ``data``."""
    node = data
    out: list[Any] = []
    for part in loc:
        if isinstance(node, dict) and part in node:
            node = node[part]
            out.append(part)
        elif isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node):
            node = node[part]
            out.append(part)
        elif isinstance(part, str) and part.endswith("_") and isinstance(node, dict) and part[:-1] in node:
            node = node[part[:-1]]
            out.append(part[:-1])
    return tuple(out)


def _model_errors(exc: ValidationError, data: Any, lines: dict[tuple[Any, ...], int], where: str) -> list[str]:
    out = []
    seen = set()
    for err in exc.errors():
        path = _loc_path(data, err["loc"])
        field = [p for p in path if not isinstance(p, int) and p not in ("steps", "then", "else", "parallel")]
        step = _describe_step(data, path)
        msg = err["msg"].removeprefix("Value error, ")
        if err["type"] == "step_kind":
            node = _get(data, path)
            keys = list(node) if isinstance(node, dict) else None
            if isinstance(node, dict) and ("sleep" in node or "delay" in node):
                msg = (
                    "there is no sleep step: synchronise on a frame (expect) or a condition "
                    "(wait: {captured | eof | quiet}), never on time"
                )
            elif keys is not None:
                kinds = [k for k in keys if k in STEP_KINDS]
                msg += f" (got {', '.join(kinds) if kinds else 'keys ' + ', '.join(map(str, keys))})"
        elif err["type"] == "extra_forbidden":
            msg = f"unknown key {path[-1]!r}" if path else msg
        elif err["type"] == "missing":
            msg = f"missing required key {err['loc'][-1]!r}"
        where_step = f" {step}" if step else ""
        what = ".".join(str(f) for f in field[-2:]) if field and err["type"] not in ("extra_forbidden",) else ""
        prefix = f"{where}:{_line(lines, path)}:{where_step}{':' if where_step else ''}"
        text = f"{prefix} {what + ': ' if what else ''}{msg}"
        if text not in seen:
            seen.add(text)
            out.append(text)
    return out


def _get(data: Any, path: tuple[Any, ...]) -> Any:
    node = data
    for part in path:
        node = node[part]
    return node


def default_seed(name: str) -> int:
    """The Faker seed of a scenario that does not set one: stable, derived from its id."""
    return zlib.crc32(name.encode("utf-8")) & 0x7FFFFFFF


def load_text(text: str, where: str = "<scenario>", *, peer_role: str | None = None) -> Scenario:
    """Parse, validate and check a scenario; raises ``ScenarioError`` listing every problem."""
    data, lines = parse_yaml(text, where)
    if not isinstance(data, dict):
        raise ScenarioError(f"{where}:1: a scenario file is a mapping (scenario:, plays:, steps:, ...)")
    try:
        scenario = Scenario.model_validate(data)
    except ValidationError as exc:
        raise ScenarioError("\n".join(_model_errors(exc, data, lines, where))) from None
    problems = _Checker(scenario, data, lines, where).run()
    if problems:
        raise ScenarioError("\n".join(problems))
    scenario._source = where
    scenario._lines = {}
    for path_tuple, line in lines.items():
        sp = _step_path(path_tuple)
        if sp and sp not in scenario._lines:
            scenario._lines[sp] = line
    return scenario


def load_scenario(path: str | os.PathLike[str]) -> Scenario:
    """Load a scenario file (YAML or JSON)."""
    p = Path(path)
    try:
        text = p.read_text("utf-8")
    except FileNotFoundError:
        raise ScenarioError(f"{p}: no such scenario file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ScenarioError(f"{p}: cannot read: {exc}") from None
    return load_text(text, str(p))


@cache
def _faker_providers() -> frozenset[str]:
    from faker import Faker

    fake = Faker()
    return frozenset(n for n in dir(fake) if not n.startswith("_"))


class _Checker:
    """The checks the model cannot express, in document order."""

    def __init__(self, scenario: Scenario, data: Any, lines: dict[tuple[Any, ...], int], where: str) -> None:
        self.s = scenario
        self.data = data
        self.lines = lines
        self.where = where
        self.problems: list[str] = []
        self.tested_role = "agent" if scenario.plays == "client" else "client"
        #: name -> what it is: "request" (ours), "inbound" (a captured inbound frame), "value"
        self.names: dict[str, str] = {n: "value" for n in (*BUILTINS, *scenario.vars)}
        #: Names of sends that carry held_by (what race: may refer to).
        self.held_sends: set[str] = set()

    def at(self, path: str, msg: str) -> None:
        tup = _step_tuple(path)
        line = _line(self.lines, tup)
        kind = step_kind(_get(self.data, tup)) if tup and tup in self.lines else None
        label = f"{path} ({kind})" if kind else path
        self.problems.append(f"{self.where}:{line}: {label}: {msg}")

    def run(self) -> list[str]:
        from acp_conformance.clauses import registry

        self.reg = registry()
        for method, policy in self.s.answers.items():
            if not method:
                self.problems.append(f"{self.where}:{_line(self.lines, ('answers',))}: answers: empty method name")
            if not isinstance(policy, str):
                self._templates(policy.model_dump(), "answers", extra=("request",))
        self._templates(self.s.vars, "vars")
        self._steps(self.s.steps, "steps")
        return self.problems

    # ------------------------------------------------------------- helpers
    def _clauses(self, path: str, clauses: list[str] | None) -> None:
        for cid in clauses or []:
            try:
                clause = self.reg.get(cid)
            except ConfigurationError as exc:
                self.at(path, str(exc))
                continue
            if not clause.applies_to(self.tested_role):
                self.at(
                    path,
                    f"clause {cid!r} constrains the {clause.role}, but this scenario (plays: {self.s.plays}) "
                    f"tests the {self.tested_role}",
                )

    def _templates(self, value: Any, path: str, extra: tuple[str, ...] = ()) -> None:
        try:
            refs = list(template_roots(value))
        except TemplateError as exc:
            self.at(path, str(exc)) if path.startswith("steps") else self._top(path, str(exc))
            return
        for root, sub in refs:
            if root == "fake":
                if len(sub) != 1 or not isinstance(sub[0], str):
                    self._say(path, "{{fake.PROVIDER}} takes one provider name, e.g. {{fake.sentence}}")
                elif sub[0] not in _faker_providers():
                    self._say(path, f"unknown Faker provider {sub[0]!r} in {{{{fake.{sub[0]}}}}}")
                continue
            if root not in self.names and root not in extra:
                self._say(path, f"{{{{{root}}}}} is not defined before this step")

    def _say(self, path: str, msg: str) -> None:
        if path.startswith("steps"):
            self.at(path, msg)
        else:
            self._top(path, msg)

    def _top(self, key: str, msg: str) -> None:
        self.problems.append(f"{self.where}:{_line(self.lines, (key,))}: {key}: {msg}")

    def _pattern(self, path: str, pattern: Any) -> None:
        if pattern is None:
            return
        for problem in pattern_problems(pattern):
            self.at(path, problem)
        self._templates(pattern, path)

    def _ref(self, path: str, name: str | None, kinds: tuple[str, ...], what: str) -> None:
        if name is None:
            return
        got = self.names.get(name)
        if got is None:
            self.at(path, f"{what} {name!r} is not defined before this step")
        elif got not in kinds:
            self.at(path, f"{what} {name!r} names {_KIND_WORDS[got]}, not {' or '.join(_KIND_WORDS[k] for k in kinds)}")

    def _race(self, path: str, name: str | None) -> None:
        if name is None:
            return
        self._ref(path, name, ("race", "request"), "race:")
        if name in self.names and name not in self.held_sends:
            self.at(path, f"race: {name!r} names a send without held_by (nothing to prove the order with)")

    # --------------------------------------------------------------- steps
    def _steps(self, steps: list[Any], prefix: str) -> None:
        for i, step in enumerate(steps):
            self._step(step, f"{prefix}[{i}]")

    def _step(self, step: Any, path: str) -> None:
        if isinstance(step, SendStep):
            self._send(step, path)
        elif isinstance(step, CallStep):
            self._call(step, path)
        elif isinstance(step, ExpectStep):
            self._expect(step, path)
        elif isinstance(step, ExpectNothingStep):
            self._expect_nothing(step, path)
        elif isinstance(step, CheckStep):
            self._check(step, path)
        elif isinstance(step, AnswerStep):
            self._answer(step, path)
        elif isinstance(step, WaitStep):
            self._wait(step, path)
        elif isinstance(step, IfStep):
            self._if(step, path)
        elif isinstance(step, ParallelStep):
            self._parallel(step, path)
        elif isinstance(step, RawStep):
            self._raw(step, path)
        elif isinstance(step, LetStep):
            self._let(step, path)

    def _send(self, step: SendStep, path: str) -> None:
        sp = step.send
        self._templates(sp.params, path)
        self._templates(sp.id, path)
        if sp.while_pending is not None:
            self._ref(path, sp.while_pending, ("request",), "while_pending:")
        for held in sp.held_by or []:
            if held != MODEL_STREAM:
                self._ref(path, held, ("inbound",), "held_by:")
        if sp.as_:
            self.names[sp.as_] = "race" if sp.notification is not None else "request"
            if sp.held_by is not None:
                self.held_sends.add(sp.as_)

    def _call(self, step: CallStep, path: str) -> None:
        cp = step.call
        self._clauses(path, cp.clause)
        self._templates(cp.params, path)
        self._templates(cp.id, path)
        for pat in (cp.result, cp.error):
            self._pattern(path, pat)
            for name in captures_in(pat):
                self.names[name] = "value"
        if cp.as_:
            self.names[cp.as_] = "request"

    def _expect(self, step: ExpectStep, path: str) -> None:
        ep = step.expect
        self._clauses(path, ep.clause)
        self._ref(path, ep.response, ("request",), "response:")
        self._ref(path, ep.after, ("request", "inbound"), "after:")
        self._ref(path, ep.before, ("request", "inbound"), "before:")
        self._race(path, ep.race)
        self._templates(ep.response_id, path)
        for pat in (ep.params, ep.result, ep.error):
            self._pattern(path, pat)
        for pat in (ep.params, ep.result, ep.error):
            for name in captures_in(pat):
                self.names[name] = "value"
        if ep.as_:
            self.names[ep.as_] = "inbound"

    def _expect_nothing(self, step: ExpectNothingStep, path: str) -> None:
        np_ = step.expect_nothing
        self._clauses(path, np_.clause)
        self._ref(path, np_.response, ("request",), "response:")
        if np_.until != "eof" or "eof" in self.names:
            self._ref(path, np_.until, ("request", "inbound"), "until:")
        self._ref(path, np_.after, ("request", "inbound"), "after:")
        for pat in (np_.params, np_.result, np_.error):
            self._pattern(path, pat)
            if pat is not None and list(captures_in(pat)):
                self.at(path, "expect_nothing cannot capture ($capture): nothing is supposed to match")

    def _check(self, step: CheckStep, path: str) -> None:
        cp2 = step.check
        self._clauses(path, cp2.clause)
        self._race(path, cp2.race)
        self._templates("{{" + cp2.ref + "}}", path)
        self._pattern(path, cp2.matches)
        for name in captures_in(cp2.matches):
            self.names[name] = "value"

    def _answer(self, step: AnswerStep, path: str) -> None:
        ap = step.answer
        self._ref(path, ap.request, ("inbound",), "request:")
        self._templates(ap.result, path, extra=())
        self._templates(ap.id, path)
        if ap.error is not None:
            self._templates(ap.error.model_dump(), path)

    def _wait(self, step: WaitStep, path: str) -> None:
        self._clauses(path, step.wait.clause)
        if step.wait.captured and step.wait.captured not in self._all_names():
            self.at(path, f"wait: nothing in this scenario captures {step.wait.captured!r}")

    def _if(self, step: IfStep, path: str) -> None:
        if step.if_.captured and step.if_.captured not in self._all_names():
            self.at(path, f"if: nothing in this scenario captures {step.if_.captured!r}")
        self._steps(step.then, f"{path}.then")
        self._steps(step.else_, f"{path}.else")

    def _parallel(self, step: ParallelStep, path: str) -> None:
        # Names captured by any branch are visible to the others (after a wait) and afterwards.
        for branch in step.parallel:
            self._declare(branch)
        for b, branch in enumerate(step.parallel):
            self._steps(branch, f"{path}.parallel[{b}]")

    def _raw(self, step: RawStep, path: str) -> None:
        if isinstance(step.raw, str):
            self._templates(step.raw, path)
        elif step.raw.text is not None:
            self._templates(step.raw.text, path)

    def _let(self, step: LetStep, path: str) -> None:
        self._templates(step.let, path)
        for name in step.let:
            self.names[name] = "value"

    def _declare(self, steps: list[Any]) -> None:
        from acp_conformance.scenario.model import iter_steps

        for _, step in iter_steps(steps):
            for name, kind in _defines(step):
                self.names.setdefault(name, kind)

    def _all_names(self) -> set[str]:
        from acp_conformance.scenario.model import iter_steps

        out = set(self.names)
        for _, step in iter_steps(self.s.steps):
            out.update(n for n, _ in _defines(step))
        return out


_KIND_WORDS = {
    "request": "one of our requests",
    "inbound": "a captured frame of the peer",
    "value": "a value",
    "race": "a notification we sent",
}


def _defines(step: Any) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    if isinstance(step, SendStep) and step.send.as_:
        out.append((step.send.as_, "race" if step.send.notification is not None else "request"))
    elif isinstance(step, CallStep):
        if step.call.as_:
            out.append((step.call.as_, "request"))
        for pat in (step.call.result, step.call.error):
            out += [(n, "value") for n in captures_in(pat)]
    elif isinstance(step, ExpectStep):
        if step.expect.as_:
            out.append((step.expect.as_, "inbound"))
        for pat in (step.expect.params, step.expect.result, step.expect.error):
            out += [(n, "value") for n in captures_in(pat)]
    elif isinstance(step, CheckStep):
        out += [(n, "value") for n in captures_in(step.check.matches)]
    elif isinstance(step, LetStep):
        out += [(n, "value") for n in step.let]
    return out
