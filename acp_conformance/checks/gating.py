"""Capabilities: what "advertised" means, and what a client may not send to an agent without one.

Rule 1 for capabilities (initialization.mdx § Capabilities: "all capabilities not declared are
unsupported"): a dotted capability path is advertised when every step of it is present and
neither ``null`` nor ``false``; an empty object (``"list": {}``) is advertised.  Everything that
asks "did the peer declare X" (the suite's client and agent endpoints, the scenario engine's
``capability:`` conditions, the fuzz campaigns' gating) calls ``advertised``.

``gated_use`` is the client side of capability gating: a schema-valid message a conforming client
may still not send to an agent that advertised ``caps`` (session-setup.mdx, content.mdx,
prompt-turn.mdx).  What such a message provokes is a robustness finding, never a MUST FAIL.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "AGENT_GATED_METHODS",
    "CLIENT_GATED_METHODS",
    "ELICITATION_MODES",
    "PROMPT_GATED_BLOCKS",
    "advertised",
    "elicitation_modes",
    "gated_use",
    "gated_uses",
    "ungranted",
]

#: Client requests gated by an agent capability (its dotted path in agentCapabilities).
AGENT_GATED_METHODS = {
    "session/load": "loadSession",
    "session/list": "sessionCapabilities.list",
    "session/resume": "sessionCapabilities.resume",
    "session/close": "sessionCapabilities.close",
    "session/delete": "sessionCapabilities.delete",
    "logout": "auth.logout",
}
#: Agent requests gated by a client capability (its dotted path in clientCapabilities).
CLIENT_GATED_METHODS = {
    "fs/read_text_file": "fs.readTextFile",
    "fs/write_text_file": "fs.writeTextFile",
    "terminal/create": "terminal",
    "terminal/output": "terminal",
    "terminal/release": "terminal",
    "terminal/wait_for_exit": "terminal",
    "terminal/kill": "terminal",
    "elicitation/create": "elicitation",
}
#: Prompt content block types gated by a prompt capability (text and resource_link never are).
PROMPT_GATED_BLOCKS = {
    "image": "promptCapabilities.image",
    "audio": "promptCapabilities.audio",
    "resource": "promptCapabilities.embeddedContext",
}


def advertised(caps: Any, path: str) -> bool:
    """Whether the dotted capability ``path`` is declared in ``caps`` (see the module docstring)."""
    node = caps
    for part in path.split("."):
        if not isinstance(node, dict) or node.get(part) in (None, False):
            return False
        node = node[part]
    return True


#: The elicitation modes a client can advertise (clientCapabilities.elicitation.<mode>).
ELICITATION_MODES = ("form", "url")


def elicitation_modes(client_caps: Any) -> set[str]:
    """The elicitation modes ``client_caps`` advertises: ``advertised`` read per mode, so
    ``elicitation: {}`` and ``{"form": null}`` advertise none (elicitation.mdx § Checking support:
    unlike MCP, each supported mode is explicit)."""
    return {mode for mode in ELICITATION_MODES if advertised(client_caps, f"elicitation.{mode}")}


def gated_uses(message: Any) -> list[tuple[str, str]]:
    """Every capability-gated thing ``message`` (from a client) uses: ``(the agent capability's
    dotted path, what the use is, as the end of a sentence)``, in the order they are judged."""
    if not isinstance(message, dict) or not isinstance(message.get("method"), str):
        return []
    method, params = message["method"], message.get("params")
    out: list[tuple[str, str]] = []
    need = AGENT_GATED_METHODS.get(method)
    if need is not None:
        out.append((need, f"that calls {method}, which the agent did not advertise ({need})"))
    if not isinstance(params, dict):
        return out
    # "Clients MUST only send additionalDirectories when the Agent advertises" it: the field at
    # all, an empty list included (session-setup.mdx § Additional Workspace Roots).
    if "additionalDirectories" in params:
        dirs = "sessionCapabilities.additionalDirectories"
        out.append((dirs, "that carries additionalDirectories, which the agent did not advertise"))
    if method == "session/prompt" and isinstance(params.get("prompt"), list):
        for block in params["prompt"]:
            kind = block.get("type") if isinstance(block, dict) else None
            if kind in PROMPT_GATED_BLOCKS:
                path = PROMPT_GATED_BLOCKS[kind]
                out.append((path, f"whose prompt holds a {kind} block the agent did not advertise ({path})"))
    for server in params.get("mcpServers") or []:
        kind = server.get("type") if isinstance(server, dict) else None
        if kind in ("http", "sse"):
            path = f"mcpCapabilities.{kind}"
            out.append((path, f"that names an MCP server of type {kind}, which the agent did not advertise"))
    return out


def ungranted(method: str, params: Any, caps: Any, *, peer: str) -> str | None:
    """What in a request we send to ``peer`` ("agent" or "client") it did not advertise in
    ``caps``, or None.  Such a request is one no conforming counterpart would send: a silence after
    it is a robustness finding, not a request left unanswered (``Peer._unanswered``)."""
    if peer == "agent":
        return gated_use({"method": method, "params": params}, caps)
    need = CLIENT_GATED_METHODS.get(method)
    if need is not None and not advertised(caps, need):
        return f"that calls {method}, which the client did not advertise ({need})"
    if method == "elicitation/create" and isinstance(params, dict):
        mode = params.get("mode")
        if isinstance(mode, str) and mode not in elicitation_modes(caps):
            return f"that asks for a {mode} elicitation, a mode the client did not advertise"
    return None


def gated_use(message: Any, caps: Any) -> str | None:
    """What in ``message`` a client may not send to an agent advertising ``caps``, or None."""
    return next((what for path, what in gated_uses(message) if not advertised(caps, path)), None)
