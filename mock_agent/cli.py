"""Command line of the mock agent: ``python -m mock_agent [options]``.

Broken test agents reuse it: ``main(argv, agent_cls=MyBrokenAgent)`` returns the exit
status, ``run(argv, agent_cls=MyBrokenAgent)`` is the process's last act (no teardown).
Start-up is kept lean (the client measures time to the ``initialize``
answer): the schema is located and compiled only when validating, and
nothing heavier than the protocol core is imported.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, NoReturn

import anyio

from acp_conformance._util import run_as_program
from mock_agent.agent import AGENT_NAME, PROMPT_KEYWORDS, MockAgent

if TYPE_CHECKING:
    from acp_conformance.schema.validator import SchemaValidator

__all__ = ["build_parser", "load_validator", "main", "run"]

log = logging.getLogger("mock_agent")

LOG_LEVELS = ("debug", "info", "warning", "error")


def build_parser(prog: str = "python -m mock_agent") -> argparse.ArgumentParser:
    keywords = "\n".join(f"  {k:<24} {what}" for k, _, what in PROMPT_KEYWORDS)
    parser = argparse.ArgumentParser(
        prog=prog,
        description=(
            "Reference ACP v1 agent speaking newline-delimited JSON-RPC over stdin/stdout. "
            "Logs go to stderr; it exits with status 0 when stdin closes."
        ),
        epilog=f"prompt keywords (anywhere in the prompt text; any other prompt gets a plain turn):\n{keywords}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--no-validate",
        action="store_true",
        help="do not validate inbound frames against the ACP schema (outbound self-checks are skipped too)",
    )
    parser.add_argument(
        "--log-level",
        default="warning",
        type=str.lower,
        choices=LOG_LEVELS,
        help="stderr log level (default: %(default)s)",
    )
    parser.add_argument("--name", default=AGENT_NAME, help="agentInfo.name to announce (default: %(default)s)")
    parser.add_argument(
        "--require-auth",
        action="store_true",
        help="advertise the auth method 'token' and auth.logout; refuse session/new, load, resume and "
        "list with -32000 (auth_required) until authenticate (certify with --acp-auth-method=token)",
    )
    parser.add_argument(
        "--schema",
        metavar="PATH",
        default=None,
        help="schema.json or a directory holding it (default: $ACP_CONFORMANCE_SCHEMA, node_modules, cache)",
    )
    parser.add_argument(
        "--scenario",
        metavar="FILE",
        default=None,
        help="play this scenario file (plays: agent) beside the reference behaviour; "
        "exit status 0 pass, 1 fail, 2 bad file, 3 inconclusive",
    )
    parser.add_argument("--verdict", metavar="FILE", default=None, help="with --scenario: write the JSON verdict here")
    parser.add_argument("--seed", type=int, default=None, help="with --scenario: Faker seed (default: the file's)")
    parser.add_argument(
        "--timeout", type=float, default=None, help="with --scenario: default deadline of every wait, seconds"
    )
    return parser


def load_validator(explicit: str | None = None) -> SchemaValidator | None:
    """The schema validator, or None (with a warning naming ``--schema``) when there is no schema."""
    from acp_conformance.schema import load_validator as load

    return load(explicit, warn=log.warning, flag="--schema")


def main(argv: Sequence[str] | None = None, *, agent_cls: type[MockAgent] = MockAgent) -> int:
    """Run ``agent_cls`` over this process's stdio until stdin closes; returns the exit status."""
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        stream=sys.stderr,
        level=getattr(logging, args.log_level.upper()),
        format="mock-agent %(levelname)s %(message)s",
    )
    if args.scenario is None:
        for flag in ("verdict", "seed", "timeout"):
            if getattr(args, flag) is not None:
                print(f"mock-agent: --{flag} needs --scenario", file=sys.stderr)
                return 2
        validator = None if args.no_validate else load_validator(args.schema)
        agent = agent_cls(name=args.name, validator=validator, require_auth=args.require_auth)
    else:
        # Only now the scenario machinery (pydantic, yaml) is imported: plain start-up stays lean.
        from acp_conformance._extras import require_suite
        from acp_conformance.errors import ConfigurationError, ScenarioError

        try:
            require_suite("--scenario", ("pydantic", "faker"))
        except ConfigurationError as exc:
            print(f"mock-agent: {exc}", file=sys.stderr)
            return 2
        from mock_agent.scenario_agent import make_scenario_agent

        try:
            agent = make_scenario_agent(args, agent_cls)
        except ScenarioError as exc:
            print(f"mock-agent: invalid scenario:\n{exc}", file=sys.stderr)
            return 2

    from acp_conformance.transport.stdio import StdioTransport

    transport = StdioTransport(stdin=sys.stdin.buffer, stdout=sys.stdout.buffer)
    # stdout belongs to the protocol: a stray print() anywhere lands on stderr instead.
    sys.stdout = sys.stderr
    try:
        anyio.run(agent.serve, transport)
    except KeyboardInterrupt:
        return 130
    except Exception:
        log.exception("the mock agent crashed")
        return 1
    return int(getattr(agent, "exit_status", 0))


def run(argv: Sequence[str] | None = None, *, agent_cls: type[MockAgent] = MockAgent) -> NoReturn:
    """``main`` as the process's whole life: ``python -m mock_agent`` and the test agents.

    It exits without the interpreter's teardown (``run_as_program``): the process is started
    for every test of a certification run, and the teardown cost more CPU than most tests'
    work.  Call ``main`` instead to get the status back in a process that goes on.
    """
    run_as_program(lambda: main(argv, agent_cls=agent_cls))
