"""Strict, per-method validation of ACP frames against the official schema.

Every frame is checked against the definition its method and direction
select (``PromptRequest`` for the params of ``session/prompt`` sent by a
client, ``PromptResponse`` for its result, ...), never against the root
``anyOf``: that has a catch-all extension branch which accepts malformed
frames.  The method map itself is read from the schema's ``x-method`` /
``x-side`` annotations, so it follows whatever revision is pinned.

The hot path is jsonschema-rs (sub-microsecond per frame).  Only when a
frame fails do we ask python-jsonschema for its ``best_match`` error,
because it explains ``oneOf`` failures far better ("'txt' is not one of
...") than the Rust validator's "not valid under any of the schemas".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import jsonschema_rs

from acp_conformance.core.connection import Role
from acp_conformance.core.jsonrpc import ERROR_CODE_CLAUSE

__all__ = ["MethodSpec", "SchemaIssue", "SchemaValidator"]

Kind = Literal["request", "response", "notification"]


@dataclass(frozen=True, slots=True)
class SchemaIssue:
    """One schema finding: which definition, where in the instance, what."""

    definition: str
    path: str
    message: str


@dataclass(frozen=True, slots=True)
class MethodSpec:
    """A method as the schema defines it."""

    method: str
    receiver: Role | None  # None: either side may receive it ($/cancel_request)
    request: str | None = None
    response: str | None = None
    notification: str | None = None


#: The URI the schema document is registered under when it names none (``$id``).
_BASE_URI = "urn:acp-conformance:schema"


class SchemaValidator:
    """Compiled validators for one schema document, built lazily per definition.

    Each definition's validator refers into the document through a ``jsonschema_rs.Registry``
    built once: compiling a wrapper that carries the whole ``$defs`` again for every definition
    cost ~1.2 ms each, and every process the suite starts (the mock agent, once per test) compiles
    a dozen of them; through the registry the same dozen take ~2 ms together, with the same
    verdicts and messages (``tests/unit/test_validation.py`` compares the two on every definition).
    """

    def __init__(self, schema: dict[str, Any]) -> None:
        self._schema = schema
        self._defs: dict[str, Any] = schema.get("$defs", {})
        self._compiled: dict[str, Any] = {}
        self._explainers: dict[str, Any] = {}
        self._registry: Any = None  # built on the first compile; False when this jsonschema_rs has none
        self.methods: dict[str, MethodSpec] = _method_map(self._defs)

    # --------------------------------------------------------------- lookups
    def spec(self, method: str) -> MethodSpec | None:
        return self.methods.get(method)

    def has_definition(self, name: str) -> bool:
        return name in self._defs

    def definition(self, name: str) -> Any:
        return self._defs[name]

    def methods_received_by(self, role: Role) -> list[str]:
        return sorted(m for m, s in self.methods.items() if s.receiver in (role, None))

    # ------------------------------------------------------------ validation
    def compiled(self, name: str) -> Any:
        """The jsonschema_rs validator of ``$defs[name]``, compiled on first use."""
        v = self._compiled.get(name)
        if v is None:
            v = self._compiled[name] = self._compile(name)
        return v

    def compile_node(self, node: dict[str, Any]) -> Any:
        """A jsonschema_rs validator for ``node``, a subschema of this document (an ``anyOf``
        branch, say) whose ``$ref``s point into its ``$defs``; not cached (callers key their own).
        Compiled against the document's registry, as the definitions are: ``node``'s own relative
        references are made absolute first, since a compiled node is a document of its own."""
        registry = self._document_registry()
        if registry is False:
            return jsonschema_rs.validator_for({"$schema": self._dialect, **node, "$defs": self._defs})
        absolute = _absolute_refs(node, self._base)
        return jsonschema_rs.validator_for({"$schema": self._dialect, **absolute}, registry=registry)

    @property
    def _dialect(self) -> str:
        return str(self._schema.get("$schema", "https://json-schema.org/draft/2020-12/schema"))

    @property
    def _base(self) -> str:
        """The URI the document is registered under: its own ``$id``, or ours."""
        return str(self._schema.get("$id") or _BASE_URI)

    def _document_registry(self) -> Any:
        if self._registry is None:
            self._registry = _registry(self._schema, self._base)
        return self._registry

    def _compile(self, name: str) -> Any:
        registry = self._document_registry()
        if registry is False:
            return jsonschema_rs.validator_for(self.standalone(name))
        return jsonschema_rs.validator_for({"$ref": f"{self._base}#/$defs/{name}"}, registry=registry)

    def standalone(self, name: str) -> dict[str, Any]:
        """``$defs[name]`` as a schema of its own (the whole ``$defs`` beside it): what the
        registry's validators must agree with, and what older jsonschema_rs releases compile."""
        return {"$schema": self._dialect, "$ref": f"#/$defs/{name}", "$defs": self._defs}

    def validate(self, name: str, instance: Any) -> list[SchemaIssue]:
        """Validate ``instance`` against ``$defs[name]``; empty list means valid."""
        if self.compiled(name).is_valid(instance):
            return []
        return [self._explain(name, instance)]

    def _explain(self, name: str, instance: Any) -> SchemaIssue:
        # Imported here: python-jsonschema costs ~100 ms to import and is
        # only needed once something is already wrong.  A mocks-only install (no `suite`
        # extra) has none: the Rust validator's own message then, as when the two disagree.
        try:
            from jsonschema import Draft202012Validator
            from jsonschema.exceptions import relevance
        except ImportError:
            return self._rust_issue(name, instance)

        explainer = self._explainers.get(name)
        if explainer is None:
            wrapper = {"$ref": f"#/$defs/{name}", "$defs": self._defs}
            explainer = self._explainers[name] = Draft202012Validator(wrapper)
        errors = list(explainer.iter_errors(instance))
        err = _descend(max(errors, key=relevance)) if errors else None
        if err is None:  # the two validators disagree: report the Rust verdict
            return self._rust_issue(name, instance)
        path = "/" + "/".join(str(p) for p in err.absolute_path)
        return SchemaIssue(name, path if path != "/" else "", _shorten(err.message))

    def _rust_issue(self, name: str, instance: Any) -> SchemaIssue:
        """The Rust validator's first error: its path and message as they are."""
        rs_err = next(iter(self.compiled(name).iter_errors(instance)), None)
        if rs_err is None:
            return SchemaIssue(name, "", "invalid")
        path = "".join(f"/{p}" for p in rs_err.instance_path)
        return SchemaIssue(name, path, _shorten(rs_err.message))

    def check_request(self, method: str, params: Any, has_params: bool, sender: Role) -> list[SchemaIssue]:
        spec = self.methods.get(method)
        if spec is None or spec.request is None:
            return []
        return self.validate(spec.request, params if has_params else None)

    def check_notification(self, method: str, params: Any, has_params: bool, sender: Role) -> list[SchemaIssue]:
        spec = self.methods.get(method)
        if spec is None or spec.notification is None:
            return []
        return self.validate(spec.notification, params if has_params else None)

    def check_result(self, method: str, result: Any) -> list[SchemaIssue]:
        spec = self.methods.get(method)
        if spec is None or spec.response is None:
            return []
        if method == "initialize" and _later_version(result):
            # The agent chose a newer protocol version than this schema describes (the right
            # answer to a version it does not support is its latest, e.g. 2 to our 999): the
            # rest of that body follows the newer version, which a v1 schema cannot judge.
            # Only the version field itself is checked; the client is to disconnect.
            return []
        return self.validate(spec.response, result)

    def check_error(self, error: Any) -> list[SchemaIssue]:
        if "Error" not in self._defs:
            return []
        return self.validate("Error", error)


def _absolute_refs(node: Any, base: str) -> Any:
    """``node`` with every document-relative ``$ref`` (``#/$defs/...``) prefixed with ``base``."""
    if isinstance(node, dict):
        return {
            k: (base + v if k == "$ref" and isinstance(v, str) and v.startswith("#") else _absolute_refs(v, base))
            for k, v in node.items()
        }
    if isinstance(node, list):
        return [_absolute_refs(v, base) for v in node]
    return node


def _registry(schema: dict[str, Any], uri: str) -> Any:
    """The schema document as a ``jsonschema_rs.Registry`` resource at ``uri``, or False on a
    jsonschema_rs without registries (before 0.29): the caller then compiles standalone wrappers."""
    make = getattr(jsonschema_rs, "Registry", None)
    if make is None:
        return False
    try:
        return make(resources=[(uri, schema)])
    except (TypeError, ValueError):  # a release whose Registry takes other arguments
        return False


#: The protocol version the bundled suite and the stable v1 schema describe.
SCHEMA_PROTOCOL_VERSION = 1


def _later_version(result: Any) -> bool:
    """An initialize result negotiating a (well-formed) version newer than ours."""
    version = result.get("protocolVersion") if isinstance(result, dict) else None
    return type(version) is int and SCHEMA_PROTOCOL_VERSION < version <= 65535


def _is_tag_failure(e: Any, depth: int) -> bool:
    return e.validator in ("const", "enum") and len(e.absolute_path) == depth


def _descend(err: Any) -> Any:
    """Turn "not valid under any of the given schemas" into the real reason.

    For a tagged union (``type``, ``sessionUpdate``, ``outcome``...) the
    branch whose tag matched holds the useful error; when no branch's tag
    matched, the useful error is the tag itself, listing the allowed values.
    An enum written as ``oneOf`` of ``const`` gets the list of its values.
    """
    while err.context:
        depth = len(err.absolute_path)
        branches: dict[Any, list[Any]] = {}
        for sub in err.context:
            branches.setdefault(sub.relative_schema_path[0], []).append(sub)
        leaves = [e for errs in branches.values() for e in errs]
        if leaves and all(_is_tag_failure(e, depth) for e in leaves):
            values = sorted(
                {str(v) for e in leaves for v in (e.validator_value if e.validator == "enum" else [e.validator_value])}
            )
            err.message = f"{err.instance!r} is not one of {values}"
            return err
        tagged = {b for b, errs in branches.items() if any(_is_tag_failure(e, depth + 1) for e in errs)}
        matched = [
            errs
            for b, errs in branches.items()
            if b not in tagged and not all(e.validator == "type" and e.validator_value == "null" for e in errs)
        ]
        if len(matched) == 1:
            err = max(matched[0], key=lambda e: len(e.absolute_path))
            continue
        if matched:
            return err
        tags: set[str] = set()
        key = None
        for b in tagged:
            for e in branches[b]:
                if _is_tag_failure(e, depth + 1):
                    key = e.absolute_path[-1]
                    tags.update(
                        map(
                            str,
                            e.validator_value if e.validator == "enum" else [e.validator_value],
                        )
                    )
        if key is not None:
            value = err.instance.get(key) if isinstance(err.instance, dict) else err.instance
            err.message = f"{key}={value!r} is not one of {sorted(tags)}"
        return err
    return err


def _shorten(msg: str, limit: int = 300) -> str:
    return msg if len(msg) <= limit else msg[: limit - 3] + "..."


def _method_map(defs: dict[str, Any]) -> dict[str, MethodSpec]:
    raw: dict[str, dict[str, Any]] = {}
    for name, d in defs.items():
        method = d.get("x-method") if isinstance(d, dict) else None
        if not method:
            continue
        entry = raw.setdefault(method, {"receiver": d.get("x-side")})
        for suffix, key in (
            ("Request", "request"),
            ("Response", "response"),
            ("Notification", "notification"),
        ):
            if name.endswith(suffix):
                entry[key] = name
    out: dict[str, MethodSpec] = {}
    for method, e in raw.items():
        side = e.get("receiver")
        receiver = Role.AGENT if side == "agent" else Role.CLIENT if side == "client" else None
        out[method] = MethodSpec(
            method=method,
            receiver=receiver,
            request=e.get("request"),
            response=e.get("response"),
            notification=e.get("notification"),
        )
    return out


_UPDATE_CLAUSES = {
    "user_message_chunk": "update.chunk.shape",
    "agent_message_chunk": "update.chunk.shape",
    "agent_thought_chunk": "update.chunk.shape",
    "tool_call": "update.tool-call.shape",
    "tool_call_update": "update.tool-call-update.shape",
    "plan": "update.plan.shape",
    "available_commands_update": "update.commands.shape",
    "current_mode_update": "update.current-mode.shape",
    "config_option_update": "update.config-option.shape",
    "session_info_update": "update.session-info.shape",
    "usage_update": "update.usage.shape",
    "notice": "update.notice.shape",
    "compaction_update": "update.compaction.shape",
    "compaction_summary_chunk": "update.compaction.shape",
}

#: The clause v2 vocabulary breaks on a connection validated as v1 (the version agreed on).
VERSION_AGREE_CLAUSE = "init.version.agree"
#: ``SessionUpdate`` kinds only the pinned SDK's v2 schema defines (``plan_update`` is in the v1
#: unstable schema too: update.no-unstable-variants judges it); re-derived from the schema files
#: in tests/unit/test_validation.py.
V2_ONLY_UPDATES = frozenset(
    {
        "agent_message",
        "agent_thought",
        "state_update",
        "terminal_output_chunk",
        "terminal_update",
        "tool_call_content_chunk",
        "user_message",
    }
)
#: Methods only the v2 schema defines (all of them sent by clients).
V2_ONLY_METHODS = frozenset({"auth/login", "auth/logout", "terminal/cancel", "tool_call/cancel"})

_DEFINITION_CLAUSES = {
    "RequestPermissionRequest": "perm.request.shape",
    "RequestPermissionResponse": "perm.response.shape",
    "ReadTextFileRequest": "fs.read.shape",
    "WriteTextFileRequest": "fs.write.shape",
    "ReadTextFileResponse": "fs.read.response",
    "WriteTextFileResponse": "fs.write.response",
    "CreateTerminalRequest": "term.create.shape",
    "TerminalOutputResponse": "term.output.shape",
    "Error": "jsonrpc.error-object",
    "CancelRequestNotification": "cancelreq.shape",
    "CreateElicitationRequest": "elicit.request.shape",
    "CreateElicitationResponse": "elicit.response.shape",
}

#: Results the schema defines as objects that the v1 docs' examples answer with null
#: (session-setup.mdx § Loading Sessions, file-system.mdx § Writing Files).
NULL_RESULT_EXAMPLES = frozenset({"LoadSessionResponse", "WriteTextFileResponse"})

#: Clause charged with a schema failure no more specific clause covers.
GENERIC_SCHEMA_CLAUSE = "schema.valid"


def clause_for(issue: SchemaIssue, instance: Any) -> str:
    """The clause a schema failure is evidence against.

    Specific shape clauses where the registry has one (so a report says
    "tool_call_update shape" rather than "schema"), else the generic one.
    """
    if instance is None and issue.definition in NULL_RESULT_EXAMPLES:
        return "schema.null-result"  # the docs' own example answers null (a SHOULD, not schema.valid)
    if issue.definition == "SessionNotification":
        update = instance.get("update") if isinstance(instance, dict) else None
        kind = update.get("sessionUpdate") if isinstance(update, dict) else None
        if issue.path.startswith("/update"):
            if kind in V2_ONLY_UPDATES:
                return VERSION_AGREE_CLAUSE  # v2 vocabulary on a connection that agreed on v1
            if kind in _UPDATE_CLAUSES:
                return _UPDATE_CLAUSES[kind]
            return "update.discriminator"
        return "prompt.updates.session-id"
    for definition, prefix, needle, clause in _PATH_CLAUSES:
        if issue.definition == definition and issue.path.startswith(prefix) and needle in issue.message:
            return clause
    if issue.definition == "PromptResponse":
        return GENERIC_SCHEMA_CLAUSE
    return _DEFINITION_CLAUSES.get(issue.definition, GENERIC_SCHEMA_CLAUSE)


def error_clause_for(issue: SchemaIssue) -> str:
    """The clause a schema failure of an error object is evidence against: its ``code`` is the
    core's ``ERROR_CODE_CLAUSE`` (as the core judges it without a schema), the rest the object's."""
    if issue.path.startswith("/code") or "'code' is a required" in issue.message:
        return ERROR_CODE_CLAUSE
    return "jsonrpc.error-object"


#: (definition, instance path prefix, text in the message, clause): first match wins.
_PATH_CLAUSES: list[tuple[str, str, str, str]] = [
    # A present version of the wrong type or range (ProtocolVersion: uint16); absent is the other clause's.
    ("InitializeResponse", "/protocolVersion", "", "init.request.protocol-version-type"),
    ("InitializeResponse", "", "'protocolVersion' is a required", "init.response.protocol-version"),
    ("InitializeRequest", "/protocolVersion", "", "init.request.protocol-version-type"),
    ("InitializeResponse", "/agentCapabilities/sessionCapabilities", "", "cap.object-presence"),
    ("InitializeResponse", "/agentCapabilities/", "", "cap.agent.defaults"),
    ("InitializeResponse", "/agentCapabilities", "", "init.response.capabilities"),
    ("InitializeResponse", "/authMethods", "", "auth.methods.advertised"),
    ("InitializeResponse", "/agentInfo", "", "init.implementation.shape"),
    ("InitializeRequest", "/clientInfo", "", "init.implementation.shape"),
    ("PromptResponse", "/stopReason", "", "prompt.stop-reason.enum"),
    ("PromptResponse", "", "'stopReason' is a required", "prompt.response.stop-reason"),
    ("NewSessionResponse", "", "'sessionId' is a required", "session.new.unique-id"),
    ("NewSessionResponse", "/modes", "", "mode.state.shape"),
    # A required member missing from a continue request is the clause naming those members.
    ("LoadSessionRequest", "", "is a required", "session.load.params"),
    ("ResumeSessionRequest", "", "is a required", "session.resume.params"),
]
