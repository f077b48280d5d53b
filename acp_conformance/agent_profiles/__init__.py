"""Peer profiles: how to run a real ACP adapter against a scripted model endpoint.

A profile knows, for one adapter package, where its program is
(``node_modules/.bin`` of this checkout or of the current directory and
its parents, then ``PATH``), which model API it speaks, the environment
and config files that keep it on 127.0.0.1 with a fresh ``HOME`` per test,
and which session mode makes it ask for permission.

``resolve(agent_option, model_stub)`` is what the pytest plugin calls with
``--acp-agent`` and ``--acp-model-stub``; it returns the command to run and
an ``AgentConfig.setup`` hook, or ``None`` when neither names a profile nor
asks for a stub.
"""

from acp_conformance.agent_profiles.profiles import (
    CLAUDE_AGENT_ACP,
    CODEX_ACP,
    PROFILES,
    ZED_CODEX_ACP,
    AgentProfile,
    PreparedProfile,
    ProfileError,
    find_profile,
    find_program,
    profile_setup,
    resolve,
)

__all__ = [
    "CLAUDE_AGENT_ACP",
    "CODEX_ACP",
    "PROFILES",
    "ZED_CODEX_ACP",
    "AgentProfile",
    "PreparedProfile",
    "ProfileError",
    "find_profile",
    "find_program",
    "profile_setup",
    "resolve",
]
