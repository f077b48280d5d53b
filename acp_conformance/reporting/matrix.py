"""The interop matrix: many peers' reports side by side, the way Autobahn shows WebSocket stacks.

``python -m acp_conformance matrix reports/*.json -o reports/index.html`` writes one HTML page
(and ``index.md`` beside it): per role, a row per clause grouped by area and a column per peer,
each cell coloured by status and linking to that peer's finding; a summary row per peer (verdict,
counts, version). Below the matrix every FAIL and WARN is shown with its clause text, spec link,
observation, reproduce command and the exchange as an inline SVG sequence diagram. The page is a
single file with no script and nothing fetched from the network: it works offline, from a CI
artifact or a repository.

Made from the JSON reports alone, like the Markdown report (:mod:`.markdown`), whose frame
parsing and wording it shares.
"""

from __future__ import annotations

import html
import re
from collections import defaultdict
from pathlib import Path
from typing import Any

from acp_conformance.reporting.markdown import (
    frames_of,
    judged_frame,
    label_of,
    peer_name,
    printable,
    reproduce_command,
    spec_links,
    verdict_word,
)

__all__ = ["matrix_html", "matrix_markdown", "peer_key", "svg_sequence"]

_COLOURS = {
    "PASS": "#2e7d32",
    "FAIL": "#c62828",
    "WARN": "#ef6c00",
    "INFO": "#1565c0",
    "INCONCLUSIVE": "#6a1b9a",
    "NOT_APPLICABLE": "#9e9e9e",
    "NOT_TESTED": "#e0e0e0",
}
_SHOWN = ("FAIL", "WARN")


def peer_key(path: str) -> str:
    """A report's short name: its file name without ``.json``."""
    return Path(path).stem


def _anchor(peer: str, clause_id: str) -> str:
    return "f-" + re.sub(r"[^A-Za-z0-9-]", "-", f"{peer}--{clause_id}")


def _verdict_class(report: dict[str, Any]) -> str:
    return "v-good" if verdict_word(report) in ("CONFORMANT", "selection passes") else "v-bad"


def _by_role(reports: dict[str, dict[str, Any]]) -> dict[str, dict[str, dict[str, Any]]]:
    out: dict[str, dict[str, dict[str, Any]]] = defaultdict(dict)
    for name, report in sorted(reports.items()):
        out[report["peer"]["role"]][name] = report
    return dict(sorted(out.items()))


def svg_sequence(evidence: str, role: str, status: str) -> str:
    """The exchange of an evidence excerpt as an inline SVG: two lanes, one arrow per frame, the
    frame the finding is about drawn in its colour. Empty when the excerpt has no frames."""
    frames = frames_of(evidence)[-24:]
    if not frames:
        return ""
    left, right, top, step = 120, 520, 44, 26
    height = top + step * len(frames) + 16
    suite = "suite (client)" if role == "agent" else "suite (agent)"
    parts = [
        f'<svg class="seq" xmlns="http://www.w3.org/2000/svg" width="640" height="{height}" role="img" '
        f'aria-label="sequence diagram of the exchange">',
        f'<text x="{left}" y="18" text-anchor="middle" font-weight="bold">{html.escape(suite)}</text>',
        f'<text x="{right}" y="18" text-anchor="middle" font-weight="bold">{html.escape(role)}</text>',
        f'<line x1="{left}" y1="26" x2="{left}" y2="{height}" stroke="#999"/>',
        f'<line x1="{right}" y1="26" x2="{right}" y2="{height}" stroke="#999"/>',
    ]
    judged = judged_frame(frames)
    for n, (direction, text) in enumerate(frames):
        y = top + step * n
        last = n == judged
        colour = _COLOURS.get(status, "#000") if last else "#333"
        x1, x2 = (left, right) if direction == "->" else (right, left)
        tip = x2 - 8 if x2 > x1 else x2 + 8
        parts += [
            f'<text x="{(left + right) // 2}" y="{y - 5}" text-anchor="middle" font-size="11" fill="{colour}">'
            f"{html.escape(label_of(text))}</text>",
            f'<line x1="{x1}" y1="{y}" x2="{x2}" y2="{y}" stroke="{colour}" stroke-width="{2 if last else 1}"/>',
            f'<polygon points="{x2},{y} {tip},{y - 4} {tip},{y + 4}" fill="{colour}"/>',
        ]
    parts.append("</svg>")
    return "".join(parts)


def matrix_html(reports: dict[str, dict[str, Any]]) -> str:
    """The single-file page for ``reports`` (name -> JSON report)."""
    body: list[str] = []
    for role, peers in _by_role(reports).items():
        names = list(peers)
        body.append(f'<h2 id="role-{role}">{role.capitalize()}s</h2>')
        body.append('<table class="matrix"><thead><tr><th>clause</th><th>level</th>')
        body += [f'<th class="peer" id="peer-{html.escape(n)}">{html.escape(n)}</th>' for n in names]
        body.append("</tr></thead><tbody>")
        body.append('<tr class="summary"><td>verdict</td><td></td>')
        for n in names:
            r = peers[n]
            counts = ", ".join(f"{k} {v}" for k, v in r["verdict"]["counts"].items() if k in ("FAIL", "WARN", "PASS"))
            body.append(
                f'<td class="peer-summary" data-peer="{html.escape(n)}">'
                f'<b class="{_verdict_class(r)}">{verdict_word(r)}</b><br>'
                f"{html.escape(peer_name(r) or '(unnamed)')}<br><small>{html.escape(counts)}</small></td>"
            )
        body.append("</tr>")
        rows: dict[str, list[tuple[str, str, str]]] = defaultdict(list)
        first = peers[names[0]]
        order = [c["id"] for c in first["clauses"]]
        meta = {c["id"]: (c["area"], c["level"]) for r in peers.values() for c in r["clauses"]}
        for cid in order + sorted(set(meta) - set(order)):
            area, level = meta[cid]
            rows[area].append((cid, level, ""))
        status = {n: {c["id"]: c["status"] for c in r["clauses"]} for n, r in peers.items()}
        for area, clauses in rows.items():
            body.append(f'<tr class="area"><th colspan="{2 + len(names)}">{html.escape(area)}</th></tr>')
            for cid, level, _ in clauses:
                body.append(
                    f'<tr><td class="clause"><code>{html.escape(cid)}</code></td>'
                    f'<td class="level">{html.escape(level)}</td>'
                )
                for n in names:
                    st = status[n].get(cid, "")
                    text = html.escape(st.replace("_", " ").lower())
                    if st in _SHOWN:
                        text = f'<a href="#{_anchor(n, cid)}">{text}</a>'
                    body.append(f'<td class="cell s-{st}" title="{html.escape(n)}: {st}">{text}</td>')
                body.append("</tr>")
        body.append("</tbody></table>")
    body.append("<h2>Findings (FAIL and WARN)</h2>")
    for name, report in sorted(reports.items()):
        for c in report["clauses"]:
            if c["status"] not in _SHOWN:
                continue
            t = next((t for t in c["tests"] if t["status"] == c["status"]), {"message": "", "nodeid": ""})
            body += [
                f'<section class="finding" id="{_anchor(name, c["id"])}">',
                f"<h3>{html.escape(name)}: <code>{html.escape(c['id'])}</code> "
                f'<span class="badge s-{c["status"]}">{c["status"]}</span> ({html.escape(c["level"])})</h3>',
                f"<blockquote>{html.escape(c['text'])}</blockquote>",
                f"<p>Spec: {_md_links_to_html(spec_links(c['reference']))}</p>",
                f"<p><b>Observed</b> in <code>{html.escape(t['nodeid'])}</code>: {html.escape(t['message'])}</p>",
                f"<pre>{html.escape(reproduce_command(report, c['id'], t['message']))}</pre>",
                svg_sequence(t.get("evidence") or "", report["peer"]["role"], c["status"]),
            ]
            if t.get("evidence"):
                body.append(
                    f"<details><summary>transcript excerpt</summary><pre>{html.escape(t['evidence'])}</pre></details>"
                )
            body.append("</section>")
    style = " ".join(
        f".s-{k}{{background:{v};color:{'#000' if k == 'NOT_TESTED' else '#fff'}}}" for k, v in _COLOURS.items()
    )
    return printable(
        '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
        "<title>ACP conformance: interop matrix</title><style>"
        "body{font-family:system-ui,sans-serif;margin:2em;max-width:1400px}"
        "table.matrix{border-collapse:collapse;font-size:13px}"
        "table.matrix td,table.matrix th{border:1px solid #ccc;padding:2px 6px}"
        "tr.area th{background:#f5f5f5;text-align:left} td.clause,td.level{white-space:nowrap}"
        ".v-bad{color:#c62828} .v-good{color:#2e7d32}"
        "td.cell a{color:inherit} .badge{padding:1px 6px;border-radius:3px}"
        "section.finding{border-top:1px solid #ddd;margin-top:1.5em} pre{white-space:pre-wrap;word-break:break-all}"
        f"{style}</style></head><body><h1>ACP v1 conformance: interop matrix</h1>"
        "<p>Every cell is one clause for one peer; FAIL and WARN cells link to the finding below. "
        "MUST / MUST NOT breaches are FAIL, SHOULD breaches WARN, MAY notes INFO.</p>"
        + "\n".join(body)
        + "</body></html>\n"
    )


def _md_links_to_html(text: str) -> str:
    out, pos = [], 0
    for m in re.finditer(r"\[([^\]]+)\]\(([^)]+)\)|`([^`]+)`", text):
        out.append(html.escape(text[pos : m.start()]))
        if m.group(1):
            out.append(f'<a href="{html.escape(m.group(2))}">{html.escape(m.group(1))}</a>')
        else:
            out.append(f"<code>{html.escape(m.group(3))}</code>")
        pos = m.end()
    out.append(html.escape(text[pos:]))
    return "".join(out)


def matrix_markdown(reports: dict[str, dict[str, Any]]) -> str:
    """The matrix as Markdown: a summary per peer and a table per role, cells linking to
    ``PEER.md#finding-ID`` (the Markdown reports are expected beside it)."""
    from acp_conformance.reporting.markdown import finding_anchor

    lines = ["# ACP v1 conformance: interop matrix", ""]
    for role, peers in _by_role(reports).items():
        names = list(peers)
        lines += [
            f"## {role.capitalize()}s",
            "",
            "| peer | version | verdict | FAIL | WARN | PASS |",
            "|---|---|---|---:|---:|---:|",
        ]
        for n in names:
            r = peers[n]
            c = r["verdict"]["counts"]
            lines.append(
                f"| [{n}]({n}.md) | {(peer_name(r) or '(unnamed)')} | {verdict_word(r)} | "
                f"{c.get('FAIL', 0)} | {c.get('WARN', 0)} | {c.get('PASS', 0)} |"
            )
        lines += ["", "| clause | " + " | ".join(names) + " |", "|---|" + "---|" * len(names)]
        status = {n: {c["id"]: c["status"] for c in r["clauses"]} for n, r in peers.items()}
        for cid in [c["id"] for c in peers[names[0]]["clauses"]]:
            row = []
            for n in names:
                st = status[n].get(cid, "")
                row.append(f"[{st}]({n}.md#{finding_anchor(cid)})" if st in _SHOWN else st)
            if any(status[n].get(cid) in _SHOWN for n in names):
                lines.append(f"| `{cid}` | " + " | ".join(row) + " |")
        lines += ["", "(Clauses every peer passes, or no peer was judged on, are in the HTML matrix.)", ""]
    return "\n".join(lines)
