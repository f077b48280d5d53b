"""Client certification (``pytest --acp-client=CMD``): options, configuration, fixture.

``pytest_plugin`` calls ``add_options`` and, when ``--acp-client`` is
given, ``configure``; this module then registers itself as the plugin
providing the ``acp_client`` fixture (a ``ClientHarness``).

The client command is shell-style; ``{agent}`` is replaced by the command
line of the agent the client must launch (shell-quoted, one word),
``{agent_argv}`` (a word of its own) by that command as separate words.
A command with neither needs ``--acp-client-control ADDR``: the client is
then expected to be configured to launch
``python -m mock_agent.relay --control ADDR`` itself (printed in the
report header).  See docs/client-certification.md.
"""

from __future__ import annotations

import os
import shlex
import sys
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import pytest

from acp_conformance._pytest_keys import HARNESS, STATE
from acp_conformance.client_harness import MODES, ClientConfig, ClientHarness
from acp_conformance.control import parse_address, relay_command
from acp_conformance.errors import ConfigurationError
from acp_conformance.profiles import default_profile, has_agent_placeholder, load_profile

__all__ = ["TerminalHuman", "absolutize", "acp_client", "add_options", "configure"]

PLUGIN_NAME = "acp-conformance-client"


def add_options(group: Any) -> None:
    group.addoption(
        "--acp-client",
        metavar="COMMAND",
        help="certify the ACP client started by this command ({agent} is replaced by the mock agent's command)",
    )
    group.addoption(
        "--acp-client-profile",
        metavar="NAME|PATH",
        help="how to drive the client: a bundled profile (acpx, python-sdk-client, mock-client) or a TOML file",
    )
    group.addoption(
        "--acp-client-env", metavar="KEY=VAL", action="append", default=[], help="extra environment for the client"
    )
    group.addoption("--acp-client-cwd", metavar="DIR", help="working directory of the client (default: per-test dir)")
    group.addoption(
        "--acp-client-mode",
        default="auto",
        choices=MODES,
        help="auto: start the client per test; agent-initiated: a person launches the agent from an editor and "
        "sends one prompt per test; manual: agent-initiated plus guided steps (default: auto)",
    )
    group.addoption(
        "--acp-client-control",
        metavar="ADDR",
        help="fixed control address (unix:/path or tcp:127.0.0.1:PORT) for clients configured to launch the "
        "relay agent themselves, and for the agent-initiated and manual modes",
    )
    group.addoption(
        "--acp-human-timeout",
        type=float,
        default=300.0,
        help="deadline for a person to act in agent-initiated and manual modes (default 300)",
    )


def _default_control() -> str:
    return f"unix:/tmp/acp-conformance-{os.getuid()}.sock"


def configure(config: pytest.Config, state: Any) -> None:
    from acp_conformance.pytest_plugin import preflight

    opt = config.getoption
    command: str = opt("acp_client")
    mode: str = opt("acp_client_mode")
    env: dict[str, str] = {}
    for item in opt("acp_client_env") or []:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise pytest.UsageError(f"--acp-client-env expects KEY=VALUE, got {item!r}")
        env[key] = value
    cwd = opt("acp_client_cwd")
    if cwd and not Path(cwd).is_dir():
        raise pytest.UsageError(f"--acp-client-cwd {cwd!r} is not a directory")
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
    if opt("acp_human_timeout") <= 0:
        raise pytest.UsageError("--acp-human-timeout must be positive")
    token: str | None = None
    if mode == "auto":
        if not has_agent_placeholder(command):
            if not control:
                raise pytest.UsageError(
                    f"--acp-client: the command has no {{agent}} placeholder ({command!r}). Put {{agent}} where the "
                    "client takes its agent command (e.g. --agent {agent}), or {agent_argv} where it takes the "
                    "agent program and arguments as separate words. A client that reads its agent command from "
                    "its own configuration can be certified too: configure it to launch "
                    f"`{sys.executable} -m mock_agent.relay --control ADDR` and pass --acp-client-control=ADDR "
                    "(see docs/client-certification.md)."
                )
            token = ""  # the client's configuration holds the address, not a per-run token
        preflight("--acp-client", command, env, cwd)
        if not cwd:
            command = absolutize(command, Path.cwd())
        _no_parallel_with_fixed_address(config, control, "--acp-client-control")
    else:
        control = control or _default_control()
        token = ""
        _no_parallel_with_fixed_address(config, control, f"--acp-client-mode={mode}")
        if mode == "manual" and not _tty_available():
            raise pytest.UsageError("--acp-client-mode=manual needs a terminal (/dev/tty) to talk to you")
    state.client = ClientConfig(
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
    if not config.pluginmanager.has_plugin(PLUGIN_NAME):
        config.pluginmanager.register(sys.modules[__name__], PLUGIN_NAME)


def absolutize(command: str, base: Path) -> str:
    """``command`` with each relative path word that exists under ``base`` made absolute.

    Each test runs the client in a fresh directory of its own (most clients use
    their working directory as the session cwd), so a command typed relative to
    where pytest runs (``node_modules/.bin/acpx``, ``python examples/client.py``)
    would not be found there.  Only whole words containing a ``/`` that name an
    existing file or directory under ``base`` change; placeholders, options and
    prompt text are left alone.
    """
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


def _no_parallel_with_fixed_address(config: pytest.Config, control: str | None, why: str) -> None:
    if control is None:
        return
    n = config.getoption("numprocesses", None) if hasattr(config.option, "numprocesses") else None
    if n not in (None, 0, "0"):
        raise pytest.UsageError(f"{why} uses one fixed control address: run it serially (without -n)")


def _tty_available() -> bool:
    try:
        with open("/dev/tty", "r+b", buffering=0):
            return True
    except OSError:
        return False


def pytest_report_header(config: pytest.Config) -> list[str] | None:
    state = config.stash.get(STATE, None)
    if state is None or state.client is None:
        return None
    c: ClientConfig = state.client
    lines = [f"acp client profile: {c.profile.name} ({c.profile.source}), mode {c.mode}"]
    if c.control is not None:
        relay = relay_command(c.control, c.token or "")
        lines.append("acp agent command for the client to launch: " + " ".join(relay))
    return lines


class TerminalHuman:
    """Talks to the person on /dev/tty (stderr when there is none), whatever pytest captures."""

    def __init__(self) -> None:
        self._tty: Any = None
        try:
            self._tty = open("/dev/tty", "r+", buffering=1, encoding="utf-8")
        except OSError:
            self._tty = None

    def say(self, text: str) -> None:
        out = self._tty or sys.__stderr__
        if out is None:
            return
        out.write("\n" + "=" * 70 + "\n" + text + "\n" + "=" * 70 + "\n")
        out.flush()

    async def ask(self, question: str, choices: tuple[str, ...]) -> str:
        answer: str = await anyio.to_thread.run_sync(self._ask, question, choices, abandon_on_cancel=True)
        return answer

    def _ask(self, question: str, choices: tuple[str, ...]) -> str:
        if self._tty is None:
            raise ConfigurationError("no terminal to ask the question on")
        while True:
            self._tty.write(f"{question} [{'/'.join(choices)}] ")
            self._tty.flush()
            answer = str(self._tty.readline()).strip().lower()
            if answer in choices:
                return answer

    def close(self) -> None:
        if self._tty is not None:
            self._tty.close()


@pytest.fixture
def acp_client(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    """The client under test: ``async with acp_client.connect() as conn: turn = await conn.agent.next_turn()``."""
    state = request.config.stash.get(STATE, None)
    if state is None or state.client is None:
        pytest.skip("no --acp-client given")
    human = TerminalHuman() if state.client.mode != "auto" else None
    harness = ClientHarness(state.client, state.validator, tmp_path, human=human, label=request.node.nodeid)
    request.node.stash[HARNESS] = harness
    yield harness
    if human is not None:
        human.close()
