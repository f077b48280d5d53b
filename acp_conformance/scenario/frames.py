"""Frames, judged without the engine: what an expectation looks for (the kind predicate and the
content patterns), how a spec or a frame reads in a message, the peer's capabilities as the
wire announced them, and the bytes of a ``raw`` step.

``render`` expands a template with the run's values (``Engine._render``).
"""

from __future__ import annotations

import fnmatch
from collections.abc import Callable, Sequence
from typing import Any

from acp_conformance.checks.gating import advertised, elicitation_modes
from acp_conformance.core import jsonrpc
from acp_conformance.core.events import Event, Notification, Request, Response, Violation
from acp_conformance.endpoints.client import ClientCapabilities
from acp_conformance.scenario.match import Mismatch, TemplateError, describe, match
from acp_conformance.scenario.model import CallSpec, ExpectSpec, NothingSpec, RawSpec

__all__ = [
    "brief",
    "client_caps",
    "content_miss",
    "describe_spec",
    "has_capability",
    "index_of",
    "kind_pred",
    "message_of",
    "method_of",
    "peer_capabilities",
    "raw_bytes",
]

#: Expands a template with the run's values.
Render = Callable[[Any], Any]

_ABSENT_PARAMS: Any = object()


def kind_pred(spec: ExpectSpec | NothingSpec, requests: dict[str, Any], render: Render) -> Callable[[Event], bool]:
    kind = spec.frame_kind()
    if kind == "request":
        method = spec.request or ""
        return lambda ev: isinstance(ev, Request) and fnmatch.fnmatchcase(ev.method, method)
    if kind == "notification":
        method = spec.notification or ""
        return lambda ev: isinstance(ev, Notification) and fnmatch.fnmatchcase(ev.method, method)
    if kind == "violation":
        clause = spec.violation or ""
        return lambda ev: isinstance(ev, Violation) and fnmatch.fnmatchcase(ev.clause_id, clause)
    if kind == "response":
        name = spec.response or ""
        if name not in requests:
            raise TemplateError(f"response: {name!r} names no request we sent (yet)")
        key = jsonrpc.id_key(requests[name])
        return lambda ev: isinstance(ev, Response) and jsonrpc.id_key(ev.id) == key
    key = jsonrpc.id_key(render(spec.response_id))
    return lambda ev: isinstance(ev, Response) and jsonrpc.id_key(ev.id) == key


def content_miss(spec: ExpectSpec | NothingSpec | CallSpec, ev: Event, found: dict[str, Any], render: Render) -> Any:
    """``None`` when ``ev`` (of the right kind) matches the spec's patterns."""
    if isinstance(ev, (Request, Notification)):
        params = getattr(spec, "params", None)
        if params is None:
            return None
        value = ev.params if ev.has_params else _ABSENT_PARAMS
        if value is _ABSENT_PARAMS:
            return None if params == "$absent" else Mismatch("/params", describe(params), "no params")
        return match(render(params), value, found, "/params")
    if isinstance(ev, Response):
        if spec.result is not None:
            if ev.is_error:
                return Mismatch("", "a result", f"error {describe(ev.error)}")
            return match(render(spec.result), ev.result, found, "/result")
        if spec.error is not None:
            if not ev.is_error:
                return Mismatch("", "an error", f"result {describe(ev.result)}")
            return match(render(spec.error), ev.error, found, "/error")
        return None
    return None


def describe_spec(spec: ExpectSpec | NothingSpec, render: Render) -> str:
    kind = spec.frame_kind()
    if kind == "response":
        text = f"a response to {spec.response!r}"
    elif kind == "response_id":
        text = f"a response with id {describe(render(spec.response_id))}"
    elif kind == "violation":
        text = f"a violation of {spec.violation}"
    else:
        text = f"a {kind} {getattr(spec, kind)}"
    for key in ("params", "result", "error"):
        pat = getattr(spec, key)
        if pat is not None:
            try:
                pat = render(pat)
            except TemplateError:
                pass
            text += f" with {key} {describe(pat, 200)}"
    return text


def peer_capabilities(events: Sequence[Event], plays: str) -> dict[str, Any]:
    for ev in events:
        if plays == "client" and isinstance(ev, Response) and ev.method == "initialize":
            caps = ev.result.get("agentCapabilities") if isinstance(ev.result, dict) else None
            return caps if isinstance(caps, dict) else {}
        if plays == "agent" and isinstance(ev, Request) and ev.method == "initialize":
            caps = ev.params.get("clientCapabilities") if isinstance(ev.params, dict) else None
            return caps if isinstance(caps, dict) else {}
    return {}


def raw_bytes(raw: str | RawSpec, render: Render) -> bytes:
    if isinstance(raw, str):
        return str(render(raw)).encode("utf-8") + b"\n"
    if raw.text is not None:
        data = str(render(raw.text)).encode("utf-8")
    elif raw.hex is not None:
        data = bytes.fromhex(raw.hex)
    else:
        import base64

        data = base64.b64decode(raw.base64 or "")
    return data + (b"\n" if raw.newline else b"")


def method_of(spec: ExpectSpec) -> str | None:
    return spec.request or spec.notification


def message_of(ev: Event) -> Any:
    if isinstance(ev, Violation):
        return {"clause": ev.clause_id, "message": ev.message}
    return ev.message


def index_of(events: Sequence[Event], ev: Event, start: int) -> int:
    for i in range(start, len(events)):
        if events[i] is ev:
            return i
    return -1


def brief(ev: Event) -> str:
    if isinstance(ev, Violation):
        return f"violation [{ev.clause_id}] {ev.message}"
    raw = ev.raw.decode("utf-8", "replace")
    return raw if len(raw) <= 300 else raw[:297] + "..."


def has_capability(caps: dict[str, Any], path: str) -> bool:
    """Whether a scenario's ``capability:`` condition holds (``checks.gating.advertised``)."""
    return advertised(caps, path)


def client_caps(wire: Any) -> ClientCapabilities:
    """What the endpoint serves, from the capabilities we announced on the wire."""
    caps: dict[str, Any] = wire if isinstance(wire, dict) else {}
    fs: dict[str, Any] = caps["fs"] if isinstance(caps.get("fs"), dict) else {}
    modes = elicitation_modes(caps)
    return ClientCapabilities(
        fs_read=fs.get("readTextFile") is True,
        fs_write=fs.get("writeTextFile") is True,
        terminal=caps.get("terminal") is True,
        elicitation_form="form" in modes,
        elicitation_url="url" in modes,
        absent=frozenset(k for k in ("fs", "terminal") if k not in caps),
    )
