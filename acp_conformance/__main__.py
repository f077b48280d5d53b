"""``python -m acp_conformance`` (or ``acp-conformance``): the suite's command line.

Subcommands:
  agent [PYTEST OPTIONS] -- AGENT COMMAND
                    certify an agent: the bundled suite through pytest, as
                    `pytest --acp-agent="AGENT COMMAND" [PYTEST OPTIONS]` would
  client [PYTEST OPTIONS] -- CLIENT COMMAND
                    certify a client: `pytest --acp-client="CLIENT COMMAND" [PYTEST OPTIONS]`
  fetch-schema      fill the per-user schema cache from the npm registry (no Node, no checkout)
  schema            show which schema would be used, and from where
  clauses [--role]  list the clause registry
  clauses --trace ID
                    where one clause is checked, which tests report it, which broken peer proves it
  report FILE.json...
                    render the Markdown report (FILE.md) again from saved JSON reports
  matrix FILE.json... [-o index.html]
                    the interop matrix of many reports (HTML, and index.md beside it)
  check FILE        re-judge a saved transcript (JSONL) offline: every frame is decoded and
                    validated again, so a trace from any tool is judged, not trusted
                    (same as `python -m acp_conformance.scenario check`; --help for its options)
  proxy [options] -- AGENT COMMAND
                    the recording proxy: put it between any client and any agent; it forwards
                    bytes untouched, judges every frame live, writes the transcript and verdict
                    (same as `python -m acp_conformance.scenario proxy`; --help for its options)
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys

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

    if args.trace:
        from acp_conformance.plugin.trace import format_trace, trace

        print(format_trace(trace(args.trace)))
        return 0
    for c in registry():
        if args.role and not c.applies_to(args.role):
            continue
        flag = " (untestable)" if c.untestable else ""
        print(f"{c.id:<48} {c.role:<6} {c.level:<10} {c.text}{flag}")
    return 0


def _cmd_report(args: argparse.Namespace) -> int:
    import json
    from pathlib import Path

    from acp_conformance.reporting.markdown import render_markdown

    for name in args.files:
        path = Path(name)
        try:
            data = json.loads(path.read_text("utf-8"))
            text = render_markdown(data)
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise ConfigurationError(f"{name}: not an acp-conformance JSON report ({exc})") from None
        path.with_suffix(".md").write_text(text + "\n", "utf-8")
        print(f"wrote {path.with_suffix('.md')}")
    return 0


def _cmd_matrix(args: argparse.Namespace) -> int:
    import json
    from pathlib import Path

    from acp_conformance.reporting.matrix import matrix_html, matrix_markdown, peer_key

    reports = {}
    for name in args.files:
        try:
            data = json.loads(Path(name).read_text("utf-8"))
            data["peer"]["role"], data["clauses"], data["verdict"]
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise ConfigurationError(f"{name}: not an acp-conformance JSON report ({exc})") from None
        reports[peer_key(name)] = data
    out = Path(args.output)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(matrix_html(reports), "utf-8")
    out.with_suffix(".md").write_text(matrix_markdown(reports) + "\n", "utf-8")
    print(f"wrote {out} and {out.with_suffix('.md')} ({len(reports)} reports)")
    return 0


def _version() -> str:
    from acp_conformance import __version__
    from acp_conformance.schema.locate import PINNED_SDK_VERSION, PINNED_TARBALL_SHA256, SDK_PACKAGE

    return (
        f"acp-conformance {__version__} (ACP v1; schema pinned to {SDK_PACKAGE}@{PINNED_SDK_VERSION}, "
        f"sha256 {PINNED_TARBALL_SHA256[:12]}...)"
    )


def _certify(role: str, raw: list[str]) -> int:
    """``agent|client [pytest options] -- COMMAND...``: the bundled suite through ``pytest.main``."""
    if "--" not in raw or raw.index("--") == len(raw) - 1:
        print(
            f"usage: acp-conformance {role} [PYTEST OPTIONS] -- {role.upper()} COMMAND...\n"
            f'error: give the {role} command after "--", for example: '
            f"acp-conformance {role} -n auto -- "
            + ("npx my-agent --acp" if role == "agent" else "my-editor --acp-agent {agent}"),
            file=sys.stderr,
        )
        return 2
    cut = raw.index("--")
    options, command = raw[:cut], raw[cut + 1 :]
    import importlib.metadata

    from acp_conformance._extras import require_suite

    require_suite(f"acp-conformance {role}")
    import pytest

    args = [f"--acp-{role}={shlex.join(command)}", *options]
    # From a checkout that was never installed the pytest11 entry point is missing: load it by name.
    names = {ep.value for ep in importlib.metadata.entry_points(group="pytest11")}
    plugins = [] if "acp_conformance.plugin" in names else ["-p", "acp_conformance.plugin"]
    return int(pytest.main([*plugins, *args]))


def main(argv: list[str] | None = None) -> int:
    try:
        return _main(sys.argv[1:] if argv is None else list(argv))
    except BrokenPipeError:
        # `acp-conformance clauses | head`: the reader left; say nothing more, not a traceback.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


def _main(raw: list[str]) -> int:
    if raw[:1] in (["agent"], ["client"]):
        try:
            return _certify(raw[0], raw[1:])
        except ConfigurationError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
    if raw[:1] in (["proxy"], ["check"]):
        # One implementation, two names: the proxy and the offline judge are the scenario CLI's
        # (argparse cannot hand a subcommand's options, or the proxy's ``-- COMMAND`` tail, through
        # untouched).
        from acp_conformance.scenario.cli import main as scenario_main

        return scenario_main(raw)
    parser = argparse.ArgumentParser(
        prog="acp-conformance",
        description=(__doc__ or "").replace("``", ""),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=_version())
    sub = parser.add_subparsers(dest="cmd", required=True)
    sub.add_parser("agent", help="certify an agent: agent [PYTEST OPTIONS] -- AGENT COMMAND")
    sub.add_parser("client", help="certify a client: client [PYTEST OPTIONS] -- CLIENT COMMAND")
    sub.add_parser("fetch-schema", help="fill the per-user schema cache from the npm registry (no Node)").set_defaults(
        fn=_cmd_fetch_schema
    )
    p = sub.add_parser("schema", help="show the schema that would be used")
    p.add_argument("--schema", help="explicit schema path")
    p.add_argument("--unstable", action="store_true")
    p.set_defaults(fn=_cmd_schema)
    p = sub.add_parser("clauses", help="list the clause registry")
    p.add_argument("--role", choices=("agent", "client"))
    p.add_argument("--trace", metavar="ID", help="where clause ID is checked, reported and proven")
    p.set_defaults(fn=_cmd_clauses)
    p = sub.add_parser("report", help="render Markdown reports again from saved JSON reports")
    p.add_argument("files", nargs="+", metavar="FILE.json")
    p.set_defaults(fn=_cmd_report)
    p = sub.add_parser("matrix", help="the interop matrix of many JSON reports (HTML and Markdown)")
    p.add_argument("files", nargs="+", metavar="FILE.json")
    p.add_argument("-o", "--output", default="index.html", help="the HTML page to write (index.md goes beside it)")
    p.set_defaults(fn=_cmd_matrix)
    sub.add_parser("check", help="re-judge a saved transcript offline: check FILE [--role agent|client|both]")
    sub.add_parser("proxy", help="the recording proxy: proxy [--transcript F] [--verdict F] -- AGENT COMMAND")
    args = parser.parse_args(raw)
    try:
        return int(args.fn(args))
    except ConfigurationError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
