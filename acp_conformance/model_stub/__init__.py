"""Scripted model endpoints on 127.0.0.1: real adapters, full turns, no real model.

A real ACP adapter (claude-agent-acp, codex-acp) only shows its interesting
behaviour (tool calls, permission requests, cancellation, history replay)
when its model asks for tools.  The stub serves the adapter's model API
itself and scripts exactly what the model does:

* ``anthropic``: the Messages API (Claude Code);
* ``openai``: the Responses API (Codex).

See ``script`` for the per-request script model and ``stub`` for the
endpoint and the ``AgentConfig.setup`` hook.
"""

from acp_conformance.model_stub.script import (
    Conversation,
    Fail,
    Match,
    Reply,
    Rule,
    Script,
    ScriptError,
    SlowText,
    Text,
    Thinking,
    ToolCall,
    default_script,
)
from acp_conformance.model_stub.server import RecordedRequest, StubServer
from acp_conformance.model_stub.stub import KINDS, ModelStub, PreparedStub, model_stub_setup, normalize_kind

__all__ = [
    "KINDS",
    "Conversation",
    "Fail",
    "Match",
    "ModelStub",
    "PreparedStub",
    "RecordedRequest",
    "Reply",
    "Rule",
    "Script",
    "ScriptError",
    "SlowText",
    "StubServer",
    "Text",
    "Thinking",
    "ToolCall",
    "default_script",
    "model_stub_setup",
    "normalize_kind",
]
