"""``python -m acp_conformance``: small utilities around the suite.

Subcommands:
  fetch-schema      fill the per-user schema cache via `npm pack` (no checkout needed)
  schema            show which schema would be used, and from where
  clauses [--role]  list the clause registry
  check FILE        judge a saved transcript (JSONL) offline on the passive clauses
  proxy [options] -- AGENT COMMAND
                    the recording proxy: put it between any client and any agent; it forwards
                    bytes untouched, judges every frame live, writes the transcript and verdict
                    (same as `python -m acp_conformance.scenario proxy`; --help for its options)
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from acp_conformance.errors import ConfigurationError


def _cmd_fetch_schema(args: argparse.Namespace) -> int:
    from acp_conformance.schema import fetch_into_cache

    target = fetch_into_cache()
    print(f"schema cached in {target}")
    return 0


def _cmd_schema(args: argparse.Namespace) -> int:
    from acp_conformance.schema import locate_schema

    src = locate_schema(args.schema, unstable=args.unstable)
    for key, value in src.describe().items():
        print(f"{key}: {value}")
    return 0


def _cmd_clauses(args: argparse.Namespace) -> int:
    from acp_conformance.clauses import registry

    for c in registry():
        if args.role and not c.applies_to(args.role):
            continue
        flag = " (untestable)" if c.untestable else ""
        print(f"{c.id:<48} {c.role:<6} {c.level:<10} {c.text}{flag}")
    return 0


def _cmd_check(args: argparse.Namespace) -> int:
    from acp_conformance.checks import passive_results
    from acp_conformance.results import Status
    from acp_conformance.transcript import Transcript

    path = Path(args.file)
    if not path.is_file():
        raise ConfigurationError(f"{path}: no such file")
    try:
        transcript = Transcript.from_jsonl(path.read_bytes(), label=str(path))
    except ValueError as exc:
        raise ConfigurationError(str(exc)) from None
    results = passive_results(transcript, args.role)
    bad = 0
    for r in sorted(results, key=lambda r: (r.status.value, r.clause)):
        if r.status is Status.PASS and not args.verbose:
            continue
        bad += r.status is Status.FAIL
        print(f"{r.status.value:<5} {r.clause}: {r.message}")
    print(f"{len(results)} clause judgement(s), {bad} FAIL")
    return 1 if bad else 0


def main(argv: list[str] | None = None) -> int:
    raw = sys.argv[1:] if argv is None else list(argv)
    if raw[:1] == ["proxy"]:
        # One implementation, two names: the proxy's options and its ``-- COMMAND`` tail are the
        # scenario CLI's (argparse cannot hand a subcommand's options through untouched).
        from acp_conformance.scenario.cli import main as scenario_main

        return scenario_main(raw)
    parser = argparse.ArgumentParser(
        prog="python -m acp_conformance", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="cmd", required=True)
    sub.add_parser("fetch-schema", help="fill the per-user schema cache via npm pack").set_defaults(
        fn=_cmd_fetch_schema
    )
    p = sub.add_parser("schema", help="show the schema that would be used")
    p.add_argument("--schema", help="explicit schema path")
    p.add_argument("--unstable", action="store_true")
    p.set_defaults(fn=_cmd_schema)
    p = sub.add_parser("clauses", help="list the clause registry")
    p.add_argument("--role", choices=("agent", "client"))
    p.set_defaults(fn=_cmd_clauses)
    p = sub.add_parser("check", help="judge a saved transcript offline")
    p.add_argument("file")
    p.add_argument("--role", choices=("agent", "client"), default="agent", help="role of the peer under test")
    p.add_argument("-v", "--verbose", action="store_true", help="also list PASS results")
    p.set_defaults(fn=_cmd_check)
    sub.add_parser("proxy", help="the recording proxy: proxy [--transcript F] [--verdict F] -- AGENT COMMAND")
    args = parser.parse_args(raw)
    try:
        return int(args.fn(args))
    except ConfigurationError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
