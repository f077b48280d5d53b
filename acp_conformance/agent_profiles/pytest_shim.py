"""Interim pytest glue: ``pytest -p acp_conformance.agent_profiles.pytest_shim --acp-agent=claude-agent-acp``.

Until ``pytest_plugin`` resolves profiles itself (``--acp-model-stub`` and
profile names; see docs/real-adapters.md for the glue), this module does it
from the outside:

* ``tryfirst`` in ``pytest_configure``: a profile name in ``--acp-agent`` is
  replaced by the installed program's path (so the plugin's preflight finds it);
* ``trylast``: the plugin's ``AgentConfig`` gets the profile's ``setup`` hook
  (the scripted model endpoint, HOME, config files).

Idempotent and inert when the plugin already did both (an ``AgentConfig``
with a ``setup``): keeping ``-p`` on a command line after the glue lands is
harmless.
"""

from __future__ import annotations

import pytest

from acp_conformance._pytest_keys import STATE
from acp_conformance.agent_profiles.profiles import ProfileError, find_profile, resolve

__all__ = ["attach_profile_setup", "pytest_addoption", "pytest_configure"]


def _plugin_has_option() -> bool:
    """Whether ``pytest_plugin`` declares ``--acp-model-stub`` itself (the glue has landed).

    ``-p`` plugins register before entry-point plugins, so a duplicate added here
    first would make the plugin's own ``addoption`` fail."""
    import inspect

    from acp_conformance import pytest_plugin

    return "--acp-model-stub" in inspect.getsource(pytest_plugin)


def pytest_addoption(parser: pytest.Parser) -> None:
    if _plugin_has_option():
        return
    try:
        parser.getgroup("acp").addoption(
            "--acp-model-stub",
            metavar="KIND[:SCRIPT.toml]",
            help="serve the agent's model API from a scripted stub on 127.0.0.1 (anthropic, openai)",
        )
    except ValueError:
        pass  # declared already


def _stub_option(config: pytest.Config) -> str | None:
    value = config.getoption("acp_model_stub", None)
    return value if isinstance(value, str) else None


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    agent = config.getoption("acp_agent", None)
    if not isinstance(agent, str) or find_profile(agent) is None:
        return
    try:
        resolved = resolve(agent, _stub_option(config))
    except ProfileError as exc:
        raise pytest.UsageError(str(exc)) from None
    if resolved is not None:
        config.option.acp_agent = resolved[0]


class _Late:
    @pytest.hookimpl(trylast=True)
    def pytest_configure(self, config: pytest.Config) -> None:
        attach_profile_setup(config)


def attach_profile_setup(config: pytest.Config) -> None:
    """Attach the profile's setup to the plugin's ``AgentConfig`` (unless it has one)."""
    state = config.stash.get(STATE, None)
    agent = getattr(state, "agent", None)
    if agent is None or agent.setup is not None:
        return
    try:
        resolved = resolve(agent.command, _stub_option(config))
    except ProfileError as exc:
        raise pytest.UsageError(str(exc)) from None
    if resolved is not None:
        agent.command, agent.setup = resolved


def pytest_plugin_registered(plugin: object, manager: pytest.PytestPluginManager) -> None:
    import sys

    if plugin is sys.modules[__name__] and not manager.has_plugin("acp-profiles-late"):
        manager.register(_Late(), "acp-profiles-late")
