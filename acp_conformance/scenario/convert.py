"""Transcript -> scenario: a recorded session (or a failing test's trace) becomes a regression test.

The scenario plays one side of the recording (``play``) and replays it
against the other: our frames become ``send`` / ``answer`` steps, theirs
become expectations, in the recorded order.  To replay deterministically
against a fresh peer, values the other side invents are captured where
they first appear and templated afterwards (session ids, terminal and
tool call ids, the client's cwd), the cwd we announced becomes
``{{sandbox}}``, and volatile values (timestamps, message ids) match any
string.  Their requests are held (``answers: {method: hold}``) and
answered exactly as recorded.  Each expectation names the clause it most
plausibly proves (``--clause`` overrides); edit them to taste.
"""

from __future__ import annotations

import re
from typing import Any, Literal

import yaml

from acp_conformance.clauses import registry
from acp_conformance.core import jsonrpc
from acp_conformance.transcript import Transcript

__all__ = ["dump_scenario", "transcript_to_scenario"]

Side = Literal["client", "agent"]

#: Keys whose string values the other side invents: captured on first sight, templated afterwards.
CAPTURE_KEYS = {"sessionId": "session", "terminalId": "terminal", "toolCallId": "tool_call", "cwd": "cwd"}
#: Keys whose values differ on every run: matched as any string.
VOLATILE_KEYS = {"messageId", "updatedAt", "createdAt", "timestamp"}
_ISO = re.compile(r"^\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:?\d{2})?$")
#: In "shape" mode these keep their values; every other scalar matches by type only.
SHAPE_KEYS = {"sessionUpdate", "stopReason", "status", "kind", "outcome", "type", "protocolVersion"}

_RESPONSE_CLAUSE = {
    "client": {  # we play the client: their responses are the agent's
        "initialize": "init.response.protocol-version",
        "session/new": "session.new.unique-id",
        "session/load": "session.load.response",
        "session/prompt": "prompt.response.stop-reason",
    },
    "agent": {
        "session/request_permission": "perm.response.shape",
        "fs/read_text_file": "fs.read.response",
        "fs/write_text_file": "fs.write.response",
        "terminal/output": "term.output.shape",
    },
}
_REQUEST_CLAUSE = {
    "client": {
        "session/request_permission": "perm.request.shape",
        "fs/read_text_file": "fs.read.shape",
        "fs/write_text_file": "fs.write.shape",
        "terminal/create": "term.create.shape",
    },
    "agent": {
        "initialize": "init.request.capabilities",
        "session/new": "session.new.params",
        "session/load": "session.load.params",
        "session/prompt": "prompt.params",
    },
}
_UPDATE_CLAUSE = {
    "tool_call": "update.tool-call.shape",
    "tool_call_update": "update.tool-call-update.shape",
    "agent_message_chunk": "update.chunk.shape",
    "agent_thought_chunk": "update.chunk.shape",
    "user_message_chunk": "update.chunk.shape",
    "plan": "update.plan.shape",
}


class _Converter:
    def __init__(self, play: Side, clause: str | None, mode: str) -> None:
        self.play = play
        self.tested = "agent" if play == "client" else "client"
        self.clause = clause
        self.mode = mode
        self.steps: list[dict[str, Any]] = []
        self.our_requests: dict[tuple[str, Any], tuple[str, str]] = {}  # id key -> (name, method)
        self.their_requests: dict[tuple[str, Any], str] = {}
        self.held: list[str] = []
        self.literals: dict[str, str] = {}  # literal string -> template expression
        self.own: set[str] = set()  # values we invented (matched exactly when they come back)
        self.counts: dict[str, int] = {}
        self.reg = registry()

    def name(self, base: str) -> str:
        base = re.sub(r"[^a-z0-9]+", "_", base.rsplit("/", 1)[-1].lower()).strip("_") or "frame"
        self.counts[base] = self.counts.get(base, 0) + 1
        return f"{base}_{self.counts[base]}"

    def pick(self, candidate: str | None, fallback: str) -> str:
        if self.clause:
            return self.clause
        for cid in (candidate, fallback, "schema.valid"):
            if cid and cid in self.reg and self.reg.get(cid).applies_to(self.tested):
                return cid
        return "schema.valid"

    # ------------------------------------------------------------ our frames
    def ours_value(self, value: Any, key: str | None = None) -> Any:
        """Our own values: the other side's inventions we echo become templates."""
        if isinstance(value, dict):
            return {k: self.ours_value(v, k) for k, v in value.items()}
        if isinstance(value, list):
            return [self.ours_value(v) for v in value]
        if isinstance(value, str):
            if key in CAPTURE_KEYS and value not in self.literals:
                self.own.add(value)
            return self.template(value)
        return value

    def template(self, text: str) -> str:
        if text in self.literals:
            return "{{" + self.literals[text] + "}}"
        for lit in sorted(self.literals, key=len, reverse=True):
            if len(lit) >= 6 and lit in text:
                text = text.replace(lit, "{{" + self.literals[lit] + "}}")
        if text.startswith("$"):
            text = "$" + text  # a literal, not a matcher
        return text

    # ---------------------------------------------------------- their frames
    def theirs_value(self, value: Any, key: str | None = None) -> Any:
        """A pattern for their value: captures, templates, volatile values loosened."""
        if isinstance(value, dict):
            return {k: self.theirs_value(v, k) for k, v in value.items()}
        if isinstance(value, list):
            return [self.theirs_value(v) for v in value]
        if isinstance(value, str):
            if key in VOLATILE_KEYS or _ISO.match(value):
                return "$string"
            if key in CAPTURE_KEYS and value not in self.literals and value not in self.own and value:
                name = self.name(CAPTURE_KEYS[key])
                self.literals[value] = name
                return f"$capture({name})"
            if self.mode == "shape" and key not in SHAPE_KEYS and value not in self.literals and value not in self.own:
                return "$string"
            return self.template(value)
        if self.mode == "shape" and key not in SHAPE_KEYS and value is not None:
            return "$boolean" if isinstance(value, bool) else "$number"
        return value

    # ----------------------------------------------------------------- frames
    def on_ours(self, msg: dict[str, Any]) -> None:
        if "method" in msg and "id" in msg:
            method = msg["method"]
            name = self.name(method)
            self.our_requests[jsonrpc.id_key(msg["id"])] = (name, method)
            params = msg.get("params")
            if method in ("session/new", "session/load") and isinstance(params, dict):
                cwd = params.get("cwd")
                if isinstance(cwd, str) and cwd not in self.literals and self.play == "client":
                    self.literals[cwd] = "sandbox"
            send: dict[str, Any] = {"request": method}
            if "params" in msg:
                send["params"] = self.ours_value(params)
            if not isinstance(msg["id"], int) or isinstance(msg["id"], bool):
                send["id"] = msg["id"]
            send["as"] = name
            self.steps.append({"send": send})
        elif "method" in msg:
            send = {"notification": msg["method"]}
            if "params" in msg:
                send["params"] = self.ours_value(msg.get("params"))
            self.steps.append({"send": send})
        elif "id" in msg:
            key = jsonrpc.id_key(msg["id"])
            answer: dict[str, Any] = {}
            if key in self.their_requests:
                answer["request"] = self.their_requests.pop(key)
            else:
                answer["id"] = msg["id"]
            if "error" in msg:
                err = msg["error"] if isinstance(msg["error"], dict) else {}
                answer["error"] = {"code": err.get("code", -32603), "message": str(err.get("message", ""))}
            else:
                answer["result"] = self.ours_value(msg.get("result"))
            self.steps.append({"answer": answer})

    def on_theirs(self, msg: dict[str, Any]) -> None:
        if "method" in msg and "id" in msg:
            method = msg["method"]
            name = self.name(method)
            self.their_requests[jsonrpc.id_key(msg["id"])] = name
            if method not in self.held:
                self.held.append(method)
            expect: dict[str, Any] = {"request": method}
            if "params" in msg:
                expect["params"] = self.theirs_value(msg.get("params"))
            expect["as"] = name
            expect["clause"] = self.pick(_REQUEST_CLAUSE[self.play].get(method), "schema.valid")
            self.steps.append({"expect": expect})
        elif "method" in msg:
            method = msg["method"]
            params = msg.get("params")
            expect = {"notification": method}
            if "params" in msg:
                expect["params"] = self.theirs_value(params)
            update = params.get("update") if isinstance(params, dict) else None
            kind = update.get("sessionUpdate") if isinstance(update, dict) else None
            candidate = _UPDATE_CLAUSE.get(str(kind)) if method == "session/update" else None
            if method == "session/cancel":
                candidate = "cancel.is-notification"
            expect["clause"] = self.pick(candidate, "update.discriminator" if kind else "schema.valid")
            self.steps.append({"expect": expect})
        elif "id" in msg:
            key = jsonrpc.id_key(msg["id"])
            known = self.our_requests.get(key)
            expect = {"response": known[0]} if known else {"response_id": msg["id"]}
            method = known[1] if known else ""
            if "error" in msg:
                err = msg["error"] if isinstance(msg["error"], dict) else {}
                expect["error"] = {"code": err.get("code")}
                clause = self.pick("jsonrpc.every-request-answered", "schema.valid")
            else:
                result = msg.get("result")
                expect["result"] = self.theirs_value(result) if result is not None else "$null"
                clause = self.pick(_RESPONSE_CLAUSE[self.play].get(method), "jsonrpc.every-request-answered")
            expect["clause"] = clause
            self.steps.append({"expect": expect})


def transcript_to_scenario(
    transcript: Transcript,
    *,
    name: str,
    play: Side = "client",
    sent_by: Side = "client",
    clause: str | None = None,
    mode: Literal["exact", "shape"] = "exact",
    description: str = "",
) -> dict[str, Any]:
    """The scenario (as plain data, ready to dump) that replays ``transcript``.

    ``sent_by`` is the side that sent the transcript's ``out`` frames (the
    proxy and the agent suite record from the client's point of view);
    ``play`` is the side the scenario plays.
    """
    conv = _Converter(play, clause, mode)
    for e in transcript.entries:
        if e.direction not in ("in", "out"):
            continue
        ours = (e.direction == "out") == (sent_by == play)
        msg = e.message
        if msg is None:
            try:
                import orjson

                msg = orjson.loads(e.raw if isinstance(e.raw, bytes) else e.raw.encode("utf-8"))
            except ValueError:
                msg = None
        if not isinstance(msg, dict) or not ("method" in msg or "id" in msg):
            text = e.text().rstrip("\n")
            if ours:
                conv.steps.append({"raw": text})
            else:
                conv.steps.append({"note": f"the peer sent a line that is no JSON-RPC message: {text[:200]}"})
            continue
        (conv.on_ours if ours else conv.on_theirs)(msg)
    data: dict[str, Any] = {
        "scenario": name,
        "description": description or f"Converted from a recorded transcript ({transcript.label or 'unnamed'}).",
        "plays": play,
    }
    if conv.held:
        data["answers"] = {m: "hold" for m in conv.held}
    data["steps"] = conv.steps or [{"note": "the transcript holds no frames"}]
    return data


class _Dumper(yaml.SafeDumper):
    """Block style throughout; multi-line strings as literal blocks."""


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.Node:
    if "\n" in value.rstrip("\n") or value.endswith("\n"):
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style="|")
    return dumper.represent_scalar("tag:yaml.org,2002:str", value)


_Dumper.add_representer(str, _str)


def dump_scenario(data: dict[str, Any], *, schema_ref: str | None = None, header: str = "") -> str:
    """YAML text for a scenario (block style: one key per line, diff-friendly)."""
    lines = []
    if schema_ref:
        lines.append(f"# yaml-language-server: $schema={schema_ref}")
    for h in header.splitlines():
        lines.append(f"# {h}".rstrip())
    body = yaml.dump(data, Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=120, default_flow_style=False)
    return "\n".join(lines) + ("\n" if lines else "") + body
