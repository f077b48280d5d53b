"""The Markdown report, rendered from the JSON report alone.

Rendered from the JSON (never from live run state) so a saved report can be rendered again with
a newer suite (``python -m acp_conformance report FILE.json``) and the two can never disagree.
It is written for a stranger: every finding says which requirement it breaks (the clause text,
a link to the spec section), what was expected and observed, how to reproduce it with one
command, and what went over the wire, as a sequence diagram (Mermaid, which GitHub renders)
with the raw excerpt folded beneath it. Nothing is cut mid-word.
"""

from __future__ import annotations

import json
import re
import shlex
from collections import defaultdict
from typing import Any

__all__ = [
    "clause_message",
    "finding_anchor",
    "frames_of",
    "judged_frame",
    "label_of",
    "peer_name",
    "printable",
    "render_markdown",
    "reproduce_command",
    "sequence_diagram",
    "spec_links",
    "verdict_word",
]

#: The published v1 docs; a registry reference ``docs/protocol/v1/NAME.mdx § Section`` maps onto it.
DOCS_SITE = "https://agentclientprotocol.com/protocol"
#: Findings, most serious first.
_ORDER = {"FAIL": 0, "WARN": 1, "INCONCLUSIVE": 2, "INFO": 3}
#: A sequence diagram shows the end of the excerpt: the frames nearest the finding.
_DIAGRAM_FRAMES = 24
_FRAME = re.compile(r"^\s*(?:\d+(?:\.\d+)?\s+)?(->|<-)\s+(\{.*)$")


def spec_links(reference: str) -> str:
    """The registry's reference with every docs part as a link to the published section."""
    parts = []
    for part in (p.strip() for p in reference.split(";")):
        m = re.match(r"docs/protocol/v1/([\w-]+)\.mdx(?:\s*§\s*(.+))?$", part)
        if not m:
            parts.append(f"`{part}`" if part else part)
            continue
        page, section = m.group(1), (m.group(2) or "").strip()
        anchor = "" if not section or section.startswith("(") else "#" + _slug(section)
        label = f"{page}" + (f" § {section}" if section else "")
        parts.append(f"[{label}]({DOCS_SITE}/{page}{anchor})")
    return "; ".join(parts)


def _slug(heading: str) -> str:
    return re.sub(r"[^a-z0-9 -]", "", heading.lower()).strip().replace(" ", "-")


def reproduce_command(data: dict[str, Any], clause_id: str, message: str) -> str:
    """One command that runs the check again: the fuzz replay a campaign printed, else the clause."""
    m = re.search(r"replay: (ACP_FUZZ_SEED=\S+ ACP_FUZZ_REPLAY=\S+) pytest", message)
    role = data["peer"]["role"]
    command = shlex.quote(data["peer"].get("command") or "COMMAND")
    base = f"pytest --acp-{role}={command} --acp-clause={clause_id}"
    profile = data["peer"].get("profile")
    if role == "client" and isinstance(profile, str) and profile:
        base += f" --acp-client-profile={shlex.quote(profile)}"
    return f"{m.group(1)} {base}" if m else base


def sequence_diagram(evidence: str, role: str, clause_id: str, status: str) -> str | None:
    """The frames of an evidence excerpt as a Mermaid ``sequenceDiagram``, or None without frames.

    ``->`` lines are what the suite sent, ``<-`` what the peer sent; the frame the finding is
    about (:func:`judged_frame`) is followed by a note naming it.
    """
    frames = frames_of(evidence)
    if not frames:
        return None
    suite = "client" if role == "agent" else "agent"
    lines = [
        "```mermaid",
        "sequenceDiagram",
        f"    participant S as suite ({suite})",
        f"    participant P as {role}",
    ]
    if len(frames) > _DIAGRAM_FRAMES:
        lines.append(f"    Note over S,P: {len(frames) - _DIAGRAM_FRAMES} earlier frames")
        frames = frames[-_DIAGRAM_FRAMES:]
    judged = judged_frame(frames)
    for n, (direction, text) in enumerate(frames):
        arrow = "S->>P" if direction == "->" else "P->>S"
        lines.append(f"    {arrow}: {label_of(text)}")
        if n == judged:
            lines.append(f"    Note over S,P: {status} {clause_id}")
    lines.append("```")
    return "\n".join(lines)


_MEMBER = re.compile(r'"(id|method)":(-?\d+|"(?:[^"\\]|\\.)*")')


def _top_level(text: str, key: str) -> str | None:
    """The raw value of the member ``key`` of the outermost object in ``text``, a frame that may
    be cut short (excerpts clip long frames), or None.  A response's ``id`` may come after its
    ``result``, which holds ids of its own (authMethods, modes): only depth 1 counts."""
    depth, in_string, escaped = 0, False, False
    for i, ch in enumerate(text):
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
            continue
        if ch == '"':
            if depth == 1 and (m := _MEMBER.match(text, i)) and m.group(1) == key:
                return m.group(2)
            in_string = True
        elif ch in "{[":
            depth += 1
        elif ch in "}]":
            depth -= 1
    return None


def frames_of(evidence: str) -> list[tuple[str, str]]:
    """``(direction, frame text)`` of each frame line of an evidence excerpt (``->`` sent by the
    suite, ``<-`` by the peer); notes, stderr and profile lines are left out."""
    return [(m.group(1), m.group(2)) for m in map(_FRAME.match, evidence.splitlines()) if m]


def judged_frame(frames: list[tuple[str, str]]) -> int:
    """The index of the frame a finding is most likely about: the last frame that is not one of
    the suite's own probes (``_acp_conformance/...`` pings and flushes sent to learn that the peer
    had read everything) or the peer's answer to one."""
    probe_ids: set[str] = set()
    for direction, text in frames:
        if direction == "->" and "acp_conformance" in label_of(text).split(" (id")[0]:
            found = _top_level(text, "id")
            if found:
                probe_ids.add(found)
    for n in range(len(frames) - 1, -1, -1):
        direction, text = frames[n]
        label = label_of(text)
        if "acp_conformance" in label.split(" (id")[0]:
            continue
        rid = _top_level(text, "id")
        if direction == "<-" and rid and rid in probe_ids and _top_level(text, "method") is None:
            continue
        return n
    return len(frames) - 1


def label_of(text: str) -> str:
    """A frame in a few words: method and id, or the result / error it answers with."""
    try:
        msg = json.loads(text)
    except ValueError:
        # Excerpts cut long frames: name what the start of the frame still shows.
        method = _top_level(text, "method")
        found = _top_level(text, "id")
        if method and method.startswith('"'):
            return _safe(method.strip('"') + (f" (id {found})" if found else "") + " ...")
        if '"result"' in text[:200]:
            return _safe("result" + (f" (id {found})" if found else "") + " ...")
        return "a line that is not JSON"
    if not isinstance(msg, dict):
        return f"a JSON {type(msg).__name__}, not a message"
    rid = f" (id {json.dumps(msg['id'])})" if "id" in msg else ""
    if isinstance(msg.get("method"), str):
        label = msg["method"]
        update = (msg.get("params") or {}).get("update") if isinstance(msg.get("params"), dict) else None
        if isinstance(update, dict) and isinstance(update.get("sessionUpdate"), str):
            label += f" {update['sessionUpdate']}"
        return _safe(label + rid)
    if isinstance(msg.get("error"), dict):
        return _safe(f"error {msg['error'].get('code')}{rid}")
    if "result" in msg:
        result = msg["result"]
        detail = f" stopReason {result['stopReason']}" if isinstance(result, dict) and "stopReason" in result else ""
        return _safe(f"result{detail}{rid}")
    return "a frame with neither method nor result"


def _safe(label: str) -> str:
    # Mermaid ends a message at ';' and treats '#' as an entity start.
    return re.sub(r"[;#<>]", " ", label)[:80]


def _clip(text: str, limit: int) -> str:
    """At most ``limit`` characters, cut at a word boundary (a table cell; the full text is below)."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    cut = text[:limit].rsplit(" ", 1)[0]
    return cut + " …"


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


def printable(text: str) -> str:
    """Control characters a peer or a fuzz frame put in evidence, shown as escapes: a report is a
    text file, and a NUL in it makes tools call it binary."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


def render_markdown(data: dict[str, Any]) -> str:
    """The Markdown report of a JSON report (control characters escaped throughout)."""
    return printable(_render(data))


def _render(data: dict[str, Any]) -> str:
    from acp_conformance.reporting import baseline_line, inconclusive_reasons, verdict_line

    v = data["verdict"]
    info = data["peer"].get("info") or {}
    role = data["peer"]["role"]
    schema = data.get("schema") or {}
    expected = set((data.get("baseline") or {}).get("expected", {}))
    lines = [
        f"# ACP conformance report: {role} `{data['peer']['command']}`",
        "",
        f"- Peer: {info.get('name')} {info.get('version', '')}".rstrip()
        if info.get("name")
        else "- Peer: not identified (its `initialize` answer carries no `agentInfo`)"
        if data["peer"].get("protocolVersion") is not None
        else "- Peer: not identified (no `initialize` answer in this run named it)",
        f"- Schema: {schema.get('version')} (sha256 {str(schema.get('sha256', ''))[:16]}...)",
        f"- Generated: {data['generated']} by acp-conformance {data['tool']['version']}",
        f"- Tests run: {v['tests']}" + (f" (selection: {data['selection']})" if data.get("selection") else ""),
        "",
        f"**Verdict: {verdict_line(v)}**",
        "",
        *[f"- INCONCLUSIVE ({n} MUST clauses): {why}" for why, n in inconclusive_reasons(data)],
        *([""] if inconclusive_reasons(data) else []),
        *([f"**Baseline:** {baseline_line(data['baseline'])}", ""] if data.get("baseline") else []),
        "| status | clauses |",
        "|---|---:|",
        *[f"| {k} | {n} |" for k, n in v["counts"].items()],
        "",
    ]
    findings = sorted(
        (c for c in data["clauses"] if c["status"] in _ORDER), key=lambda c: (_ORDER[c["status"]], c["id"])
    )
    if findings:
        lines += ["## Findings", "", "| clause | level | status | what was observed |", "|---|---|---|---|"]
        for c in findings:
            msg = clause_message(c)
            status = f"{c['status']} (expected)" if c["status"] == "FAIL" and c["id"] in expected else c["status"]
            link = f"[`{c['id']}`](#{finding_anchor(c['id'])})"
            lines.append(f"| {link} | {c['level']} | {status} | {_cell(_clip(msg, 240))} |")
        lines += ["", "## Findings in detail", ""]
        for c in findings:
            lines += _finding(data, c, c["id"] in expected)
    lines += ["## All clauses by area", ""]
    by_area: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for c in data["clauses"]:
        by_area[c["area"]].append(c)
    for area, items in by_area.items():
        lines += [f"### {area}", "", "| clause | level | status |", "|---|---|---|"]
        for c in items:
            status = c["status"]
            if c.get("untestable"):
                status += " (not observable on the wire)"
            elif not c["checked"]:
                status += " (no check yet)"
            name = f"[`{c['id']}`](#{finding_anchor(c['id'])})" if c["status"] in _ORDER else f"`{c['id']}`"
            lines.append(f"| {name} | {c['level']} | {status} |")
        lines.append("")
    return "\n".join(lines)


def finding_anchor(clause_id: str) -> str:
    return "finding-" + re.sub(r"[^a-z0-9-]", "-", clause_id.lower())


def clause_message(clause: dict[str, Any]) -> str:
    """The first message a test gave the clause with the clause's own status (its finding)."""
    return next((t["message"] for t in clause["tests"] if t["status"] == clause["status"] and t["message"]), "")


def peer_name(report: dict[str, Any]) -> str:
    """The peer's own ``name version`` (from its initialize answer), or "" when it gave none."""
    info = report["peer"].get("info") or {}
    return f"{info.get('name', '')} {info.get('version', '')}".strip()


def verdict_word(report: dict[str, Any]) -> str:
    """The verdict in a word or two, for a matrix cell or a JUnit property."""
    v = report["verdict"]
    if v.get("interrupted"):
        return "interrupted"
    if v.get("scope") == "selected":
        return "selection passes" if v["selected_pass"] else "selection fails"
    from acp_conformance.reporting import verdict_word_of

    return verdict_word_of(v)


def _finding(data: dict[str, Any], c: dict[str, Any], expected: bool) -> list[str]:
    role = data["peer"]["role"]
    status = f"{c['status']} (expected by the baseline)" if expected else c["status"]
    lines = [
        f'### <a id="{finding_anchor(c["id"])}"></a>`{c["id"]}` ({c["level"]}): {status}',
        "",
        f"> {c['text']}",
        "",
        f"Spec: {spec_links(c['reference'])}",
        "",
    ]
    if c.get("hint"):
        lines += [f"Usual fix: {c['hint']}", ""]
    shown = [t for t in c["tests"] if t["status"] == c["status"]][:3]
    for t in shown:
        lines += [f"- Test: `{t['nodeid']}`", f"- Observed: {t['message']}", ""]
        lines += ["```sh", reproduce_command(data, c["id"], t["message"]), "```", ""]
        evidence = t.get("evidence") or ""
        if evidence:
            diagram = sequence_diagram(evidence, role, c["id"], c["status"])
            if diagram:
                lines += [diagram, ""]
            lines += [
                "<details><summary>transcript excerpt</summary>",
                "",
                "```",
                evidence.rstrip(),
                "```",
                "",
                "</details>",
                "",
            ]
    more = len([t for t in c["tests"] if t["status"] == c["status"]]) - len(shown)
    if more > 0:
        lines += [f"({more} more test(s) found the same; see the JSON report)", ""]
    return lines
