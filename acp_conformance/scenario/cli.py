"""``python -m acp_conformance.scenario``: scenarios from the command line.

Subcommands:
  run FILE --agent CMD     play a `plays: client` scenario against an agent; JSON verdict, exit status
  validate FILE...         check scenario files (file, line and problem for each error)
  schema [-o PATH]         print or write the scenario format's JSON Schema
  convert TRANSCRIPT       turn a recorded transcript (JSONL) into a scenario file
  check TRANSCRIPT         re-judge a saved transcript offline on the transcript-level clauses
  proxy [opts] -- CMD...   a transparent recording proxy in front of an agent

Exit status: 0 pass (or not applicable), 1 a clause failed, 2 bad input
(scenario file, option, command), 3 inconclusive.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from acp_conformance.errors import ConfigurationError, ScenarioError

__all__ = ["build_parser", "main", "print_verdict"]


def _cmd_run(args: argparse.Namespace) -> int:
    from acp_conformance.scenario.runner import run_scenario_file

    verdict = run_scenario_file(
        args.file,
        args.agent,
        verdict_path=args.verdict,
        transcript_path=args.transcript,
        schema=args.schema,
        timeout=args.timeout,
        startup_timeout=args.startup_timeout,
        seed=args.seed,
    )
    print_verdict(verdict)
    return int(verdict["exit_status"])


def print_verdict(verdict: dict[str, object]) -> None:
    for e in verdict["expectations"]:  # type: ignore[attr-defined]
        if e["status"] != "PASS":
            print(f"{e['status']:<12} {', '.join(e['clauses']) or '-'}: {e['message']}")
            if e.get("evidence") and e["status"] == "FAIL":
                print("    " + str(e["evidence"]).replace("\n", "\n    "))
    for c in verdict["clauses"]:  # type: ignore[attr-defined]
        if c["status"] in ("FAIL", "WARN") and not any(
            c["clause"] in e["clauses"]
            for e in verdict["expectations"]  # type: ignore[attr-defined]
        ):
            print(f"{c['status']:<12} {c['clause']} (transcript): {c['message']}")
    tail = verdict["peer"].get("stderr_tail") if isinstance(verdict["peer"], dict) else None
    if verdict["verdict"] != "pass" and tail:
        print("--- the peer's stderr (last lines) ---\n" + "\n".join(tail))
    reason = f" ({verdict['end']}: {verdict['reason']})" if verdict["reason"] else ""
    print(f"scenario {verdict['scenario']}: {str(verdict['verdict']).upper()}{reason}; seed {verdict['seed']}")


def _cmd_validate(args: argparse.Namespace) -> int:
    from acp_conformance.scenario.loader import load_scenario

    bad = 0
    for name in args.files:
        try:
            scenario = load_scenario(name)
        except ScenarioError as exc:
            bad += 1
            print(exc, file=sys.stderr)
            continue
        print(f"ok {name}: {scenario.scenario} (plays {scenario.plays}; clauses {', '.join(scenario.clauses())})")
    return 2 if bad else 0


def _cmd_schema(args: argparse.Namespace) -> int:
    from acp_conformance.scenario.schema_export import schema_text

    text = schema_text()
    if args.output:
        Path(args.output).write_text(text, "utf-8")
        print(f"wrote {args.output}")
    else:
        sys.stdout.write(text)
    return 0


def _read_transcript(name: str) -> object:
    from acp_conformance.transcript import Transcript

    path = Path(name)
    if not path.is_file():
        raise ConfigurationError(f"{path}: no such file")
    try:
        return Transcript.from_jsonl(path.read_bytes(), label=str(path))
    except (ValueError, KeyError) as exc:
        raise ConfigurationError(f"{path}: not a transcript: {exc}") from None


def _cmd_convert(args: argparse.Namespace) -> int:
    import os

    from acp_conformance.scenario.convert import dump_scenario, transcript_to_scenario
    from acp_conformance.scenario.library_index import library_dir
    from acp_conformance.scenario.loader import load_text
    from acp_conformance.transcript import Transcript

    transcript = _read_transcript(args.transcript)
    assert isinstance(transcript, Transcript)
    name = args.name or _slug(Path(args.transcript).stem)
    data = transcript_to_scenario(
        transcript, name=name, play=args.play, sent_by=args.sent_by, clause=args.clause, mode=args.match
    )
    schema_ref = None
    out = Path(args.output) if args.output else None
    schema = library_dir() / "schema.json"
    if schema.is_file():
        base = out.resolve().parent if out else Path.cwd()
        root = schema.parent.parent
        inside = base == root or root in base.parents
        schema_ref = os.path.relpath(schema, base) if inside else str(schema)
    text = dump_scenario(
        data, schema_ref=schema_ref, header=f"Converted from {args.transcript} by acp_conformance.scenario convert."
    )
    load_text(text, str(out or "<converted>"))  # the converted file must load back
    if out:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text, "utf-8")
        print(f"wrote {out} ({len(data['steps'])} steps)", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return 0


def _slug(text: str) -> str:
    import re

    return re.sub(r"[^a-z0-9_.\-]+", "-", text.lower()).strip("-") or "converted"


def _cmd_check(args: argparse.Namespace) -> int:
    from acp_conformance.proxy import judge_transcript
    from acp_conformance.results import Status
    from acp_conformance.schema import load_validator
    from acp_conformance.transcript import Transcript

    transcript = _read_transcript(args.transcript)
    assert isinstance(transcript, Transcript)
    validator = load_validator(args.schema, warn=lambda m: print(f"warning: {m}", file=sys.stderr), flag="--schema")
    tap = judge_transcript(transcript, sent_by=args.sent_by, validator=validator)
    sides = ("agent", "client") if args.role == "both" else (args.role,)
    failed = 0
    for side in sides:
        results = tap.results(side)  # type: ignore[arg-type]
        for r in sorted(results, key=lambda r: (r.status.value, r.clause)):
            if r.status is Status.PASS and not args.verbose:
                continue
            failed += r.status is Status.FAIL
            print(f"{side:<6} {r.status.value:<5} {r.clause}: {r.message}")
        print(f"{side}: {len(results)} clause judgement(s), {sum(r.status is Status.FAIL for r in results)} FAIL")
    return 1 if failed else 0


def _cmd_proxy(args: argparse.Namespace) -> int:
    import anyio

    from acp_conformance.proxy import ProxyOptions, run_proxy

    command = list(args.command)
    if command and command[0] == "--":
        command = command[1:]
    if not command:
        raise ConfigurationError("proxy: give the agent command after --, e.g. proxy -- python -m mock_agent")
    opts = ProxyOptions(
        command=command, transcript=args.transcript, verdict=args.verdict, quiet=args.quiet, schema=args.schema
    )
    return anyio.run(run_proxy, opts)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m acp_conformance.scenario",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="cmd", required=True)

    p = sub.add_parser("run", help="play a scenario (plays: client) against an agent command")
    p.add_argument("file")
    p.add_argument("--agent", required=True, metavar="CMD", help="the agent command (shell-style)")
    p.add_argument("--verdict", metavar="FILE", help="write the JSON verdict here")
    p.add_argument("--transcript", metavar="FILE", help="write the transcript (JSONL) here")
    p.add_argument("--schema", metavar="PATH", help="the official schema.json (or its directory)")
    p.add_argument("--timeout", type=float, help="default deadline of every wait, seconds (default 10)")
    p.add_argument("--startup-timeout", type=float, help="deadline of the initialize answer (default 20)")
    p.add_argument("--seed", type=int, help="Faker seed (default: the scenario's)")
    p.set_defaults(fn=_cmd_run)

    p = sub.add_parser("validate", help="check scenario files")
    p.add_argument("files", nargs="+")
    p.set_defaults(fn=_cmd_validate)

    p = sub.add_parser("schema", help="the JSON Schema of the scenario format")
    p.add_argument("-o", "--output", metavar="PATH")
    p.set_defaults(fn=_cmd_schema)

    p = sub.add_parser("convert", help="turn a transcript (JSONL) into a scenario")
    p.add_argument("transcript")
    p.add_argument("-o", "--output", metavar="FILE", help="write here (default: stdout)")
    p.add_argument("--name", help="scenario id (default: from the file name)")
    p.add_argument("--play", choices=("client", "agent"), default="client", help="the side the scenario plays")
    p.add_argument(
        "--sent-by", choices=("client", "agent"), default="client", help="who sent the transcript's out frames"
    )
    p.add_argument("--clause", help="name this clause on every expectation")
    p.add_argument("--match", choices=("exact", "shape"), default="exact", help="exact values, or only kinds and types")
    p.set_defaults(fn=_cmd_convert)

    p = sub.add_parser("check", help="re-judge a saved transcript offline")
    p.add_argument("transcript")
    p.add_argument("--role", choices=("agent", "client", "both"), default="agent", help="whose frames to judge")
    p.add_argument(
        "--sent-by", choices=("client", "agent"), default="client", help="who sent the transcript's out frames"
    )
    p.add_argument("--schema", metavar="PATH")
    p.add_argument("-v", "--verbose", action="store_true", help="also list PASS results")
    p.set_defaults(fn=_cmd_check)

    p = sub.add_parser("proxy", help="record and judge a live session: proxy [options] -- AGENT COMMAND")
    p.add_argument("--transcript", metavar="FILE", help="write the transcript (JSONL) here at exit")
    p.add_argument("--verdict", metavar="FILE", help="write both peers' transcript-level results here at exit")
    p.add_argument("--schema", metavar="PATH")
    p.add_argument("-q", "--quiet", action="store_true", help="no live violation reports on stderr")
    p.add_argument("command", nargs=argparse.REMAINDER, help="-- then the agent command")
    p.set_defaults(fn=_cmd_proxy)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.fn(args))
    except ScenarioError as exc:
        print(f"error: invalid scenario:\n{exc}", file=sys.stderr)
        return 2
    except ConfigurationError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
