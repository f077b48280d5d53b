"""The command line: every ``--acp-*`` option, and how a value is checked.

Options are declared here and nowhere else, for both roles, so ``pytest --help`` shows one
"ACP conformance" group.  The checks turn a bad value into a ``pytest.UsageError`` that says
which option, what is wrong and what to give instead, before any peer starts: a certification
run that will fail on its first test should fail in its first second instead.
"""

from __future__ import annotations

import os
import shlex
import shutil
from pathlib import Path
from typing import Any

import pytest

from acp_conformance.harness.human import MODES
from acp_conformance.prompts import (
    DEFAULT_ELICIT_PROMPT,
    DEFAULT_ELICIT_URL_PROMPT,
    DEFAULT_LONG_PROMPT,
    DEFAULT_PLAN_PROMPT,
    DEFAULT_PROMPT,
    DEFAULT_TOOL_PROMPT,
)

__all__ = [
    "FUZZ_ENV",
    "add_options",
    "directory",
    "key_values",
    "positive",
    "preflight",
    "resolve_fuzz",
]

#: The fuzz options travel to the campaigns (and to xdist workers, which inherit the environment)
#: as these variables: the campaign reads them (``fuzz/_budget.py``, which names them too: this
#: copy keeps ``pytest --help`` from importing Hypothesis; tests/test_rules.py keeps them equal).
FUZZ_ENV = {
    "examples": "ACP_FUZZ_EXAMPLES",
    "seconds": "ACP_FUZZ_SECONDS",
    "shrink_seconds": "ACP_FUZZ_SHRINK_SECONDS",
    "patience": "ACP_FUZZ_PATIENCE",
    "seed": "ACP_FUZZ_SEED",
}


def add_options(parser: pytest.Parser) -> None:
    g = parser.getgroup("acp", "ACP conformance (acp-conformance)")
    _peer_options(g)
    _agent_options(g)
    _client_options(g)
    _fuzz_options(g)


def _peer_options(g: Any) -> None:
    g.addoption("--acp-agent", metavar="COMMAND", help="certify the ACP agent started by this shell-style command")
    g.addoption(
        "--acp-client",
        metavar="COMMAND",
        help="certify the ACP client started by this command ({agent} is replaced by the mock agent's command)",
    )
    g.addoption("--acp-timeout", type=float, default=10.0, help="deadline in seconds for each wait (default 10)")
    g.addoption(
        "--acp-startup-timeout", type=float, default=20.0, help="deadline for the initialize answer (default 20)"
    )
    g.addoption("--acp-schema", metavar="PATH", help="official ACP schema.json (or its directory)")
    g.addoption("--acp-unstable", action="store_true", help="validate against the unstable schema")
    g.addoption("--acp-report-json", metavar="PATH", help="write the per-clause JSON report (Markdown beside it)")
    g.addoption("--acp-report-junit", metavar="PATH", help="write JUnit XML with one test case per clause")
    g.addoption(
        "--acp-baseline",
        metavar="FILE",
        help="expected failures (YAML, per role): pass when every FAIL is listed; fail on a new FAIL or a stale entry",
    )
    g.addoption("--acp-write-baseline", metavar="FILE", help="write this run's FAILs as a baseline file")
    g.addoption(
        "--acp-clause",
        metavar="ID",
        action="append",
        default=[],
        help="run only the tests bound to ID; a glob ('cancel.*') or a dotted prefix ('cancel') selects several",
    )
    g.addoption("--acp-area", metavar="AREA", action="append", default=[], help="run only clauses of AREA")
    g.addoption(
        "--acp-level",
        metavar="LEVEL",
        action="append",
        default=[],
        help="run only clauses of LEVEL: MUST (with MUST NOT), SHOULD (with SHOULD NOT), MAY, or an exact level",
    )
    g.addoption(
        "--acp-max-frame-bytes", type=int, default=64 * 1024 * 1024, help="longest accepted frame (default 64 MiB)"
    )


def _agent_options(g: Any) -> None:
    g.addoption(
        "--acp-agent-env", metavar="KEY=VAL", action="append", default=[], help="extra environment (repeatable)"
    )
    g.addoption("--acp-agent-cwd", metavar="DIR", help="working directory of the agent process")
    g.addoption(
        "--acp-isolation",
        choices=("process", "connection"),
        default="connection",
        help="connection (default): tests that need only a fresh session borrow a warm, initialized agent "
        "process, which goes back only if the test left it as a fresh one would be; process: every test starts "
        "the agent afresh (docs/isolation.md)",
    )
    g.addoption(
        "--acp-prompt", default=DEFAULT_PROMPT, help="prompt text used for plain prompt turns (steer real agents)"
    )
    g.addoption(
        "--acp-tool-prompt",
        default=DEFAULT_TOOL_PROMPT,
        help="prompt meant to make the agent use a tool / ask permission",
    )
    g.addoption(
        "--acp-elicit-prompt",
        default=DEFAULT_ELICIT_PROMPT,
        help="prompt meant to make the agent ask the user a question (form elicitation tests)",
    )
    g.addoption(
        "--acp-elicit-url-prompt",
        default=DEFAULT_ELICIT_URL_PROMPT,
        help="prompt meant to make the agent open a URL elicitation (URL elicitation tests)",
    )
    g.addoption(
        "--acp-plan-prompt",
        default=DEFAULT_PLAN_PROMPT,
        help="prompt dictating a plan's steps after its last colon, ';'-separated (plan tests)",
    )
    g.addoption(
        "--acp-dictated-plans",
        action="store_true",
        help="the agent plans exactly the steps the plan prompt dictates (the reference agent does): only then "
        "can a plan update be held against the full plan (plan.full-list)",
    )
    g.addoption(
        "--acp-long-prompt",
        default=DEFAULT_LONG_PROMPT,
        help="prompt meant to keep the agent busy until cancelled (cancellation tests)",
    )
    g.addoption("--acp-auth-method", metavar="ID", help="authenticate with this method id after initialize")
    g.addoption(
        "--acp-model-stub",
        metavar="KIND[:SCRIPT.toml]",
        help="serve the agent's model API from a scripted endpoint on 127.0.0.1: anthropic (Messages API) or "
        "openai (Responses API), optionally with a TOML script; implied when --acp-agent names a profile "
        "(claude-agent-acp, codex-acp, zed-codex-acp) or runs one of those programs; 'none' turns it off",
    )


def _client_options(g: Any) -> None:
    g.addoption(
        "--acp-client-profile",
        metavar="NAME|PATH",
        help="how to drive the client: a bundled profile (acpx, python-sdk-client, mock-client) or a TOML file",
    )
    g.addoption(
        "--acp-client-env", metavar="KEY=VAL", action="append", default=[], help="extra environment for the client"
    )
    g.addoption("--acp-client-cwd", metavar="DIR", help="working directory of the client (default: per-test dir)")
    g.addoption(
        "--acp-client-mode",
        default="auto",
        choices=MODES,
        help="auto: start the client per test; agent-initiated: a person launches the agent from an editor and "
        "sends one prompt per test; manual: agent-initiated plus guided steps (default: auto)",
    )
    g.addoption(
        "--acp-client-control",
        metavar="ADDR",
        help="fixed control address (unix:/path or tcp:127.0.0.1:PORT) for clients configured to launch the "
        "relay agent themselves, and for the agent-initiated and manual modes",
    )
    g.addoption(
        "--acp-human-timeout",
        type=float,
        default=300.0,
        help="deadline for a person to act in agent-initiated and manual modes (default 300)",
    )


def _fuzz_options(g: Any) -> None:
    g.addoption(
        "--acp-fuzz-examples",
        type=int,
        metavar="N",
        help=f"examples per fuzz campaign (default 25; env {FUZZ_ENV['examples']})",
    )
    g.addoption(
        "--acp-fuzz-seconds",
        type=float,
        metavar="S",
        help=f"time to generate examples, per fuzz campaign (default 20; env {FUZZ_ENV['seconds']})",
    )
    g.addoption(
        "--acp-fuzz-shrink-seconds",
        type=float,
        metavar="S",
        help=(
            "time to shrink one failure to a smaller example, per fuzz campaign (default: a third of "
            f"--acp-fuzz-seconds, 2 s to 30 s; env {FUZZ_ENV['shrink_seconds']})"
        ),
    )
    g.addoption(
        "--acp-fuzz-patience",
        type=float,
        metavar="S",
        help=(
            "how long a fuzz example waits for the answer to a frame the spec forbids sending (malformed, "
            "beyond limits, not advertised) while the peer writes nothing; at most --acp-timeout, which "
            f"valid requests get (default 5; env {FUZZ_ENV['patience']})"
        ),
    )
    g.addoption(
        "--acp-fuzz-seed",
        metavar="INT|random",
        help=f"seed of the fuzz campaigns (default 0: the same frames every run; env {FUZZ_ENV['seed']})",
    )


def partial_run(config: pytest.Config) -> str | None:
    """What makes this run partial, in the user's own options, or None when it runs the whole suite.

    A partial run can say whether what it selected passes, never whether the peer conforms: the
    plugin reports it as such and exits 0 when the selection passes."""
    parts: list[str] = []
    for flag, name in (("--acp-clause", "acp_clause"), ("--acp-area", "acp_area"), ("--acp-level", "acp_level")):
        parts += [f"{flag} {value}" for value in config.getoption(name) or []]
    option = config.option
    if getattr(option, "keyword", ""):
        parts.append(f"-k {option.keyword!r}")
    if getattr(option, "markexpr", ""):
        parts.append(f"-m {option.markexpr!r}")
    if getattr(option, "deselect", None):
        parts += [f"--deselect {d}" for d in option.deselect]
    if getattr(option, "lf", False):
        parts.append("--last-failed")
    if config.args_source is pytest.Config.ArgsSource.ARGS:
        parts.append("test paths " + " ".join(config.args))
    return "; ".join(parts) or None


def positive(config: pytest.Config, *names: str) -> None:
    """Every named numeric option is above zero."""
    for name in names:
        value = config.getoption(name)
        if not value > 0:
            raise pytest.UsageError(f"--{name.replace('_', '-')} must be positive, got {value}")


def key_values(option: str, items: list[str] | None) -> dict[str, str]:
    """``KEY=VALUE`` words (a repeatable option) as a mapping; the value may contain ``=``."""
    out: dict[str, str] = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise pytest.UsageError(f"{option} expects KEY=VALUE, got {item!r}")
        out[key] = value
    return out


def directory(option: str, value: str | None) -> str | None:
    """An optional directory option: it must exist."""
    if value and not Path(value).is_dir():
        raise pytest.UsageError(f"{option} {value!r} is not a directory")
    return value


def preflight(option: str, command: str, env: dict[str, str], cwd: str | None) -> None:
    """Reject a command that cannot possibly start, before any test runs."""
    try:
        argv = shlex.split(command)
    except ValueError as exc:
        raise pytest.UsageError(f"{option}: cannot parse {command!r}: {exc}") from None
    if not argv:
        raise pytest.UsageError(f"{option} is empty")
    exe = argv[0]
    path = env.get("PATH", os.environ.get("PATH"))
    if os.sep in exe:
        candidate = Path(cwd or ".", exe) if not os.path.isabs(exe) else Path(exe)
        if not candidate.exists():
            raise pytest.UsageError(f"{option}: {exe!r} does not exist (command: {command})")
    elif shutil.which(exe, path=path) is None:
        raise pytest.UsageError(
            f"{option}: command {exe!r} not found on PATH (command: {command}). Install it or give the full path."
        )


def resolve_fuzz(config: pytest.Config) -> str:
    """Put the fuzz budget in the environment, the seed resolved; returns it for the header.

    Runs on the xdist controller before the workers start, so ``random`` is drawn once and
    every worker fuzzes from the same seed (and the printed seed reproduces the run).  An
    option overrides its variable; the campaigns' own parser (``FuzzBudget.from_env``) checks
    the result, so an option and its variable are held to one rule.
    """
    from acp_conformance.errors import ConfigurationError
    from acp_conformance.fuzz._budget import FuzzBudget

    opt = config.getoption
    given = {key: opt(f"acp_fuzz_{key}") for key in FUZZ_ENV}
    for key, value in given.items():
        if value is not None:
            os.environ[FUZZ_ENV[key]] = str(value).strip()
    try:
        budget = FuzzBudget.from_env()
    except ConfigurationError as exc:
        flags = {FUZZ_ENV[k]: f"--acp-fuzz-{k.replace('_', '-')}" for k, v in given.items() if v is not None}
        message = str(exc)
        for env, flag in flags.items():
            message = message.replace(env, flag)
        raise pytest.UsageError(message) from None
    os.environ[FUZZ_ENV["seed"]] = str(budget.seed)  # "random" drawn once, for every worker
    return (
        f"acp fuzz: seed {budget.seed}, {budget.examples} examples and {budget.seconds:g} s per campaign "
        f"(reproduce with --acp-fuzz-seed={budget.seed})"
    )
