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

from acp_conformance.client import ClientCapabilities, PermissionPolicy
from acp_conformance.errors import ConfigurationError
from mock_client.client import ClientOptions, MockClient

if TYPE_CHECKING:
    from acp_conformance.validation import SchemaValidator

__all__ = ["build_parser", "main", "parse_caps"]

log = logging.getLogger("mock_client")

CAP_WORDS = ("fs", "read", "write", "terminal", "none")


def parse_caps(spec: str) -> ClientCapabilities:
    """``fs`` (default), ``fs,terminal``, ``none``, or any of fs, read, write, terminal."""
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
        "--cancel-after-permission",
        action="store_true",
        help="cancel the turn as soon as the agent asks for permission (the request is answered cancelled)",
    )
    parser.add_argument("--timeout", type=float, default=300.0, help="deadline for each turn (default: %(default)s)")
    parser.add_argument("--report", metavar="FILE", help="write a JSON account of the run to FILE")
    parser.add_argument("--validate", action="store_true", help="validate the agent's frames against the schema")
    parser.add_argument("--quiet", action="store_true", help="print nothing on stdout")
    parser.add_argument(
        "--log-level", default="warning", type=str.lower, choices=("debug", "info", "warning", "error")
    )
    return parser


def load_validator() -> SchemaValidator | None:
    from acp_conformance.schema import locate_schema

    try:
        source = locate_schema(None)
    except (ConfigurationError, OSError) as exc:
        log.warning("running WITHOUT schema validation: %s", exc)
        return None
    from acp_conformance.validation import SchemaValidator

    return SchemaValidator(source.data)


def main(argv: Sequence[str] | None = None, *, client_cls: type[MockClient] = MockClient) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        stream=sys.stderr,
        level=getattr(logging, args.log_level.upper()),
        format="mock-client %(levelname)s %(message)s",
    )
    options = ClientOptions(
        agent=args.agent,
        prompts=list(args.prompt),
        stdin_prompts=not args.prompt,
        permission=args.permission,
        capabilities=args.caps,
        cancel_after_permission=args.cancel_after_permission,
        timeout=args.timeout,
        report=args.report,
        quiet=args.quiet,
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
