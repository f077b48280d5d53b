"""JUnit XML with one test case per clause, for the test panels of CI systems.

pytest's own ``--junitxml`` lists test functions; people gating on ACP want the clause ids in the
panel. Made from the JSON report (the one place results leave the run, already redacted), so the
JUnit file can never disagree with the reports or the exit status:

* ``FAIL``: ``<failure>`` with the message, and the evidence excerpt as its text;
* ``NOT_APPLICABLE``, ``NOT_TESTED``, ``INCONCLUSIVE``: ``<skipped>`` with the reason;
* ``WARN`` and ``INFO``: a passing case with a ``status`` property and the message on
  ``system-out`` (a SHOULD or a MAY never fails a build); a FAIL the baseline expects likewise,
  with ``expected-by-baseline``;
* coverage gaps (no check in this suite version) are left out: they are not results;
* a full run that judged no FAIL but left mandatory clauses INCONCLUSIVE (or NOT_TESTED) fails
  one ``verdict.unjudged-mandatory`` case naming them, as the exit status does.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from typing import Any

from acp_conformance.reporting.markdown import clause_message, peer_name, verdict_word

__all__ = ["junit_xml"]

#: Evidence is for reading in a CI panel, not a transcript dump.
_EVIDENCE_CHARS = 4000


def junit_xml(report: dict[str, Any]) -> bytes:
    """The JUnit XML document for a report as :meth:`RunResults.to_json` makes it."""
    role = report["peer"]["role"]
    expected = set((report.get("baseline") or {}).get("expected", {}))
    suite = ET.Element("testsuite", name=f"acp-conformance {role}")
    props = ET.SubElement(suite, "properties")
    for name, value in (
        ("peer-command", report["peer"].get("command") or ""),
        ("peer", peer_name(report)),
        ("schema-version", str(report.get("schema", {}).get("version", ""))),
        ("verdict", verdict_word(report)),
    ):
        ET.SubElement(props, "property", name=name, value=value)
    counts = {"tests": 0, "failures": 0, "skipped": 0, "errors": 0}
    for clause in report["clauses"]:
        if not clause["checked"] and not clause["tests"]:
            continue  # a coverage gap is no result
        counts["tests"] += 1
        case = ET.SubElement(suite, "testcase", name=clause["id"], classname=f"acp.{role}.{clause['area']}")
        status = clause["status"]
        message = clause_message(clause)
        case_props = ET.SubElement(case, "properties")
        ET.SubElement(case_props, "property", name="level", value=clause["level"])
        ET.SubElement(case_props, "property", name="status", value=status)
        ET.SubElement(case_props, "property", name="reference", value=clause["reference"])
        if status == "FAIL" and clause["id"] not in expected:
            counts["failures"] += 1
            failure = ET.SubElement(case, "failure", message=message, type=f"ACP {clause['level']}")
            failure.text = f"{clause['text']}\n\n{message}\n\n{_evidence(clause)}".rstrip()
        elif status in ("NOT_APPLICABLE", "NOT_TESTED", "INCONCLUSIVE"):
            counts["skipped"] += 1
            reason = message or clause.get("not_applicable_reason") or clause.get("not_tested_reason") or status
            ET.SubElement(case, "skipped", message=f"{status}: {reason}")
        elif status != "PASS":
            if status == "FAIL":
                ET.SubElement(case_props, "property", name="expected-by-baseline", value="true")
            out = ET.SubElement(case, "system-out")
            out.text = f"{status}: {message}"
    stale = (report.get("baseline") or {}).get("stale") or {}
    if stale:  # the gate fails on them: the panel must show why
        counts["tests"] += 1
        counts["failures"] += 1
        case = ET.SubElement(suite, "testcase", name="baseline.stale-entries", classname=f"acp.{role}.baseline")
        listed = ", ".join(f"{cid} (now {status})" for cid, status in stale.items())
        ET.SubElement(case, "failure", message=f"listed as expected failures but no longer failing: {listed}")
    verdict = report["verdict"]
    unjudged = [*verdict.get("not_tested_mandatory", []), *verdict.get("inconclusive_mandatory", [])]
    if not report.get("baseline") and verdict.get("conformant") is False and not counts["failures"] and unjudged:
        # No clause failed, yet the run exits non-zero: mandatory clauses went unjudged.  The panel
        # must show that, or the JUnit file would disagree with the exit status.
        counts["tests"] += 1
        counts["failures"] += 1
        case = ET.SubElement(suite, "testcase", name="verdict.unjudged-mandatory", classname=f"acp.{role}.verdict")
        ET.SubElement(
            case, "failure", message=f"{verdict_word(report)}: mandatory clauses not judged: {', '.join(unjudged)}"
        )
    for key, value in counts.items():
        suite.set(key, str(value))
    root = ET.Element("testsuites")
    root.append(suite)
    ET.indent(root)
    data: bytes = ET.tostring(root, encoding="utf-8", xml_declaration=True)
    return data + b"\n"


def _evidence(clause: dict[str, Any]) -> str:
    text = next((t["evidence"] for t in clause["tests"] if t["status"] == "FAIL" and t.get("evidence")), "")
    return text if len(text) <= _EVIDENCE_CHARS else "...\n" + text[-_EVIDENCE_CHARS:]
