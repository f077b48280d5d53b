"""Command line of the reference client: ``python -m mock_client --agent CMD [options]``.

Broken test clients reuse it: ``main(argv, client_cls=MyBrokenClient)``.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

import anyio

from acp_conformance.endpoints.client import ClientCapabilities, PermissionPolicy
from acp_conformance.errors import ConfigurationError
from mock_client.client import ClientOptions, MockClient

if TYPE_CHECKING:
    from acp_conformance.schema.validator import SchemaValidator

__all__ = ["build_parser", "main", "parse_caps"]

log = logging.getLogger("mock_client")

CAP_WORDS = ("fs", "read", "write", "terminal", "elicitation-form", "elicitation-url", "auth-terminal", "none")


def parse_caps(spec: str) -> ClientCapabilities:
    """``fs`` (default), ``fs,terminal``, ``none``, or any of fs, read, write, terminal, elicitation-form
    (answers form elicitations: accept, with each field's default or first choice), elicitation-url
    (answers URL elicitations accept and never opens the page: a headless client has nobody to show it
    to), auth-terminal
    (advertises ``auth.terminal``; for testing: it logs in through agent methods only, never running a
    terminal one, and never names one in ``authenticate``)."""
    words = {w.strip() for w in spec.split(",") if w.strip()}
    unknown = words - set(CAP_WORDS)
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown capability {sorted(unknown)}; use {', '.join(CAP_WORDS)}")
    if "none" in words:
        if len(words) > 1:
            raise argparse.ArgumentTypeError("'none' cannot be combined with other capabilities")
        return ClientCapabilities.none()
    return ClientCapabilities(
        fs_read=bool(words & {"fs", "read"}),
        fs_write=bool(words & {"fs", "write"}),
        terminal="terminal" in words,
        elicitation_form="elicitation-form" in words,
        elicitation_url="elicitation-url" in words,
        auth_terminal="auth-terminal" in words,
    )


def _policy(spec: str) -> str:
    try:
        PermissionPolicy(spec)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return spec


def build_parser(prog: str = "python -m mock_client") -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=prog,
        description=(
            "Reference ACP v1 client: launches AGENT, initializes, opens a session in --cwd and runs one "
            "prompt turn per --prompt (without --prompt: one per stdin line). SIGINT during a turn cancels it."
        ),
    )
    parser.add_argument("--agent", required=True, metavar="CMD", help="the agent command line (shell-style)")
    parser.add_argument("--prompt", action="append", default=[], metavar="TEXT", help="a prompt (repeatable)")
    parser.add_argument(
        "--permission",
        default="allow_once",
        type=_policy,
        metavar="POLICY",
        help="how permission requests are answered: allow_once, allow_always, reject_once, reject_always, "
        "allow, reject, cancelled, hold (until the turn is cancelled), option:<id> (default: %(default)s)",
    )
    parser.add_argument(
        "--caps",
        default="fs",
        type=parse_caps,
        help="advertised capabilities (default: %(default)s); 'terminal' runs the agent's commands for real "
        "(confined to the session directory), so it is opt-in: --caps fs,terminal",
    )
    parser.add_argument("--cwd", default=None, help="session working directory (default: the current directory)")
    parser.add_argument(
        "--add-dir",
        action="append",
        default=[],
        metavar="DIR",
        help="an additional workspace root (repeatable), sent as an absolute path in session/new only when the "
        "agent advertises sessionCapabilities.additionalDirectories",
    )
    parser.add_argument(
        "--authenticate",
        action="store_true",
        help="when the agent answers auth_required (-32000), authenticate with its first agent method (a method "
        "without a type is one) and retry",
    )
    parser.add_argument(
        "--list-sessions",
        action="store_true",
        help="after initialize, list the agent's sessions in --cwd (session/list, every page), when it advertises it",
    )
    parser.add_argument(
        "--continue",
        dest="continue_session",
        metavar="SESSION_ID",
        help="continue this session (session/load, or session/resume) instead of opening a new one",
    )
    parser.add_argument(
        "--attach",
        action="append",
        default=[],
        metavar="FILE",
        help="attach FILE to every prompt: an image block (base64) when it is an image the agent accepts, else a "
        "resource link (repeatable)",
    )
    parser.add_argument(
        "--set-mode",
        metavar="MODE",
        help="switch the session to this mode (its id or its name, as a user picks it) before prompting",
    )
    parser.add_argument(
        "--set-config",
        metavar="OPTION=CHOICE",
        help="set a config option (each by id or name, as a user picks them) before prompting",
    )
    parser.add_argument(
        "--cancel-after-permission",
        action="store_true",
        help="cancel the turn as soon as the agent asks for permission (the request is answered cancelled)",
    )
    parser.add_argument(
        "--scenario",
        metavar="FILE",
        help="play this scenario file (plays: client) against the agent instead of prompt turns; "
        "exit 0 pass / not applicable, 1 fail, 2 bad input, 3 inconclusive (docs/scenarios.md)",
    )
    parser.add_argument("--verdict", metavar="FILE", help="with --scenario: write the JSON verdict here")
    parser.add_argument("--seed", type=int, default=None, help="with --scenario: Faker seed (default: the file's)")
    parser.add_argument("--transcript", metavar="FILE", help="with --scenario: write the transcript (JSONL) here")
    parser.add_argument(
        "--timeout",
        type=float,
        default=None,
        help="deadline for each turn (default: 300); with --scenario: the default deadline of every wait",
    )
    parser.add_argument("--report", metavar="FILE", help="write a JSON account of the run to FILE")
    parser.add_argument("--validate", action="store_true", help="validate the agent's frames against the schema")
    parser.add_argument("--quiet", action="store_true", help="print nothing on stdout")
    parser.add_argument("--log-level", default="warning", type=str.lower, choices=("debug", "info", "warning", "error"))
    return parser


def load_validator() -> SchemaValidator | None:
    """The schema validator, or None (with a warning) when there is no schema."""
    from acp_conformance.schema import load_validator as load

    return load(None, warn=log.warning)


def main(argv: Sequence[str] | None = None, *, client_cls: type[MockClient] = MockClient) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        stream=sys.stderr,
        level=getattr(logging, args.log_level.upper()),
        format="mock-client %(levelname)s %(message)s",
    )
    if args.scenario is not None:
        if args.prompt or args.cancel_after_permission or args.report:
            parser.error("--scenario scripts the whole conversation: no --prompt, --cancel-after-permission, --report")
        return _play_scenario(args)
    for flag in ("verdict", "seed", "transcript"):
        if getattr(args, flag) is not None:
            parser.error(f"--{flag} needs --scenario")
    options = ClientOptions(
        agent=args.agent,
        prompts=list(args.prompt),
        stdin_prompts=not args.prompt,
        permission=args.permission,
        capabilities=args.caps,
        cancel_after_permission=args.cancel_after_permission,
        timeout=300.0 if args.timeout is None else args.timeout,
        report=args.report,
        quiet=args.quiet,
        add_dirs=list(args.add_dir),
        authenticate=args.authenticate,
        list_sessions=args.list_sessions,
        continue_session=args.continue_session,
        attach=list(args.attach),
        set_mode=args.set_mode,
        set_config=args.set_config,
    )
    if args.cwd is not None:
        options.cwd = args.cwd
    client = client_cls(options, load_validator() if args.validate else None)
    try:
        return anyio.run(client.run)
    except KeyboardInterrupt:
        return 130
    except ConfigurationError as exc:
        print(f"mock_client: {exc}", file=sys.stderr)
        return 2


def _play_scenario(args: argparse.Namespace) -> int:
    """``--scenario FILE``: the scenario engine plays the client (same runner and verdict as
    ``python -m acp_conformance.scenario run``), so one file format drives either mock."""
    from acp_conformance._extras import require_suite
    from acp_conformance.errors import ConfigurationError, ScenarioError

    try:
        require_suite("--scenario", ("pydantic", "faker"))
    except ConfigurationError as exc:
        print(f"mock-client: {exc}", file=sys.stderr)
        return 2
    from acp_conformance.scenario.cli import print_verdict
    from acp_conformance.scenario.runner import run_scenario_file

    try:
        verdict = run_scenario_file(
            args.scenario,
            args.agent,
            verdict_path=args.verdict,
            transcript_path=args.transcript,
            seed=args.seed,
            timeout=args.timeout,
        )
    except ScenarioError as exc:
        print(f"mock_client: invalid scenario:\n{exc}", file=sys.stderr)
        return 2
    except ConfigurationError as exc:
        print(f"mock_client: {exc}", file=sys.stderr)
        return 2
    if not args.quiet:
        print_verdict(verdict)
    return int(verdict["exit_status"])
