"""The run's state: the options read once, checked, and turned into the peer's configuration.

``AcpState`` is built in ``pytest_configure`` (on the xdist controller and on each worker:
both parse the same command line) and kept in ``config.stash[STATE]``.  Everything a fixture
or the reporter needs comes from here, so an option is read in one place.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from acp_conformance.clauses import registry
from acp_conformance.errors import ConfigurationError
from acp_conformance.plugin import options
from acp_conformance.plugin.bindings import bindings, passive_clauses
from acp_conformance.redaction import register_secrets
from acp_conformance.reporting.baseline import Baseline, load_baseline
from acp_conformance.schema import SchemaSource, locate_schema

if TYPE_CHECKING:
    from acp_conformance.harness.agent import AgentConfig
    from acp_conformance.harness.client import ClientConfig
    from acp_conformance.schema.validator import SchemaValidator

__all__ = ["AcpState", "absolutize"]


@dataclass
class AcpState:
    """Per-process state of a certification run.

    ``role`` is the role of the peer under test: "agent" (``--acp-agent``) or "client"
    (``--acp-client``); exactly one of ``agent`` / ``client`` is set.
    """

    role: str
    command: str
    schema: SchemaSource
    validator: SchemaValidator
    clauses: list[str] = field(default_factory=list)
    agent: AgentConfig | None = None
    client: ClientConfig | None = None
    #: The resolved fuzz budget and seed (xdist controller only), for the header and summary.
    fuzz_line: str = ""
    #: ``--acp-baseline``: the expected failures (workers mark those tests xfail, the reporter gates).
    baseline: Baseline | None = None
    #: What each pytest process's pool of warm agent connections did (``ConnectionPool.summary``),
    #: for the terminal summary: this process's, and on the xdist controller each worker's.
    pool_lines: list[str] = field(default_factory=list)

    @classmethod
    def from_config(cls, config: pytest.Config, role: str) -> AcpState:
        opt = config.getoption
        options.positive(config, "acp_timeout", "acp_startup_timeout")
        if opt("acp_max_frame_bytes") < 1024:
            raise pytest.UsageError("--acp-max-frame-bytes must be at least 1024")
        try:
            schema = locate_schema(opt("acp_schema"), unstable=opt("acp_unstable"), start=Path.cwd(), fetch=True)
        except ConfigurationError as exc:
            raise pytest.UsageError(str(exc)) from None
        from acp_conformance.schema.validator import SchemaValidator

        patterns, areas, levels = (list(opt(name) or []) for name in ("acp_clause", "acp_area", "acp_level"))
        clauses: list[str] = []
        if patterns or areas or levels:
            try:
                clauses = registry().select(role, patterns, areas, levels)
            except ConfigurationError as exc:
                raise pytest.UsageError(f"--acp-clause / --acp-area / --acp-level: {exc}") from None
        state = cls(role, "", schema, SchemaValidator(schema.data), clauses)
        if opt("acp_baseline"):
            try:
                state.baseline = load_baseline(opt("acp_baseline"), registry())
            except ConfigurationError as exc:
                raise pytest.UsageError(f"--acp-baseline: {exc}") from None
        if role == "agent":
            state.agent = _agent_config(config)
            state.command = state.agent.command  # a profile name resolves to the installed program
        else:
            state.client = _client_config(config)
            state.command = state.client.command
        return state

    def unbound_passive(self) -> list[str]:
        """Selected stream-level clauses no test is bound to: judged on all traffic."""
        bound = bindings(self.role)
        return sorted(c for c in set(self.clauses) & passive_clauses(self.role) if c not in bound)


def _agent_config(config: pytest.Config) -> AgentConfig:
    from acp_conformance.harness.agent import AgentConfig
    from acp_conformance.profiles import agents as profiles

    opt = config.getoption
    command: str = opt("acp_agent")
    env = options.key_values("--acp-agent-env", opt("acp_agent_env"))
    register_secrets(env)  # the xdist controller never spawns the agent, yet writes the reports
    cwd = options.directory("--acp-agent-cwd", opt("acp_agent_cwd"))
    try:
        resolved = profiles.resolve(command, opt("acp_model_stub"))
    except profiles.ProfileError as exc:
        raise pytest.UsageError(str(exc)) from None
    setup = None
    if resolved is not None:
        command, setup = resolved
    options.preflight("--acp-agent", command, env, cwd)
    return AgentConfig(
        command=command,
        env=env,
        cwd=cwd,
        timeout=opt("acp_timeout"),
        startup_timeout=opt("acp_startup_timeout"),
        max_frame_bytes=opt("acp_max_frame_bytes"),
        prompt=opt("acp_prompt"),
        tool_prompt=opt("acp_tool_prompt"),
        long_prompt=opt("acp_long_prompt"),
        elicit_prompt=opt("acp_elicit_prompt"),
        elicit_url_prompt=opt("acp_elicit_url_prompt"),
        plan_prompt=opt("acp_plan_prompt"),
        dictated_plans=opt("acp_dictated_plans"),
        auth_method=opt("acp_auth_method"),
        setup=setup,
    )


def _client_config(config: pytest.Config) -> ClientConfig:
    """The client's command, profile and mode, checked.

    The client command is shell-style; ``{agent}`` is replaced by the command line of the agent
    the client must launch (shell-quoted, one word), ``{agent_argv}`` (a word of its own) by
    that command as separate words.  A command with neither needs ``--acp-client-control
    ADDR``: the client is then expected to be configured to launch the relay agent itself
    (printed in the report header).  See docs/client-certification.md.
    """
    from acp_conformance.harness.client import ClientConfig
    from acp_conformance.harness.control import parse_address
    from acp_conformance.harness.human import tty_available
    from acp_conformance.profiles.clients import default_profile, has_agent_placeholder, load_profile

    opt = config.getoption
    command: str = opt("acp_client")
    mode: str = opt("acp_client_mode")
    env = options.key_values("--acp-client-env", opt("acp_client_env"))
    register_secrets(env)
    cwd = options.directory("--acp-client-cwd", opt("acp_client_cwd"))
    spec = opt("acp_client_profile")
    try:
        profile = load_profile(spec) if spec else default_profile()
    except ConfigurationError as exc:
        raise pytest.UsageError(f"--acp-client-profile: {exc}") from None
    control = opt("acp_client_control")
    if control:
        try:
            parse_address(control)
        except ConfigurationError as exc:
            raise pytest.UsageError(f"--acp-client-control: {exc}") from None
    options.positive(config, "acp_human_timeout")
    token: str | None = None
    if mode == "auto":
        if not has_agent_placeholder(command):
            if not control:
                raise pytest.UsageError(
                    f"--acp-client: the command has no {{agent}} placeholder ({command!r}). Put {{agent}} where the "
                    "client takes its agent command (e.g. --agent {agent}), or {agent_argv} where it takes the "
                    "agent program and arguments as separate words. A client that reads its agent command from "
                    "its own configuration can be certified too: configure it to launch "
                    f"`{sys.executable} -m acp_conformance.harness.relay --control ADDR` and pass "
                    "--acp-client-control=ADDR (see docs/client-certification.md)."
                )
            token = ""  # the client's configuration holds the address, not a per-run token
        options.preflight("--acp-client", command, env, cwd)
        if not cwd:
            command = absolutize(command, Path.cwd())
        _serial_with_fixed_address(config, control, "--acp-client-control")
    else:
        control = control or f"unix:/tmp/acp-conformance-{os.getuid()}.sock"
        token = ""
        _serial_with_fixed_address(config, control, f"--acp-client-mode={mode}")
        if mode == "manual" and not tty_available():
            raise pytest.UsageError("--acp-client-mode=manual needs a terminal (/dev/tty) to talk to you")
    return ClientConfig(
        command=command,
        profile=profile,
        env=env,
        cwd=cwd,
        timeout=opt("acp_timeout"),
        startup_timeout=opt("acp_startup_timeout"),
        max_frame_bytes=opt("acp_max_frame_bytes"),
        mode=mode,
        control=control,
        token=token,
        human_timeout=opt("acp_human_timeout"),
    )


def absolutize(command: str, base: Path) -> str:
    """``command`` with each relative path word that exists under ``base`` made absolute.

    Each test runs the client in a fresh directory of its own (most clients use their working
    directory as the session cwd), so a command typed relative to where pytest runs
    (``node_modules/.bin/acpx``, ``python examples/client.py``) would not be found there.  Only
    whole words containing a ``/`` that name an existing file or directory under ``base``
    change; placeholders, options and prompt text are left alone.
    """
    import shlex

    try:
        words = shlex.split(command)
    except ValueError:
        return command  # preflight reports it
    changed = False
    for i, word in enumerate(words):
        if "/" not in word or os.path.isabs(word) or word.startswith("-") or "{" in word:
            continue
        candidate = base / word
        if candidate.exists():
            words[i] = str(candidate.absolute())
            changed = True
    return shlex.join(words) if changed else command


def _serial_with_fixed_address(config: pytest.Config, control: str | None, why: str) -> None:
    if control is None:
        return
    n: Any = config.getoption("numprocesses", None) if hasattr(config.option, "numprocesses") else None
    if n not in (None, 0, "0"):
        raise pytest.UsageError(f"{why} uses one fixed control address: run it serially (without -n)")
