"""Expected-failures baselines: gate CI on regressions without first fixing every known FAIL.

A baseline file lists, per role, the clauses a peer is known to FAIL, each optionally with the
reason (the MUST the peer breaks on purpose, an upstream issue)::

    agent:
      init.version.latest-otherwise: "answers version 0 with -32022; upstream #123"
      tool.id.unique:
    client:
      - perm.response.shape

A run then passes its gate when every FAIL is listed, and fails on a FAIL that is not (a
regression) and on a *stale* entry, a listed clause that was judged and did not FAIL, so the list
cannot silently mask a regression that a later fix would have revealed. A listed clause the run
did not judge (deselected, INCONCLUSIVE) is neither: the run knows nothing new about it.

Modelled on the MCP conformance suite's expected-failures file. Pure functions over a report's
data: the plugin loads the file, the reporter compares, both print what this module decides.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from acp_conformance.clauses import Registry
from acp_conformance.errors import ConfigurationError

__all__ = ["Baseline", "GateResult", "compare", "load_baseline", "write_baseline"]

ROLES = ("agent", "client")
#: Statuses that say the clause was judged and did not fail: an entry for it is stale.
_JUDGED_OK = ("PASS", "WARN", "INFO", "NOT_APPLICABLE")


@dataclass(frozen=True)
class Baseline:
    """The expected failures of one file: role -> clause id -> reason ("" when none is given)."""

    path: str
    expected: dict[str, dict[str, str]]

    def for_role(self, role: str) -> dict[str, str]:
        return self.expected.get(role, {})


@dataclass
class GateResult:
    """How a run's FAILs compare with a baseline."""

    path: str
    #: FAIL and listed: clause id -> the baseline's reason.
    expected: dict[str, str] = field(default_factory=dict)
    #: FAIL and not listed: the regressions.
    new: list[str] = field(default_factory=list)
    #: Listed, judged, and not FAIL: clause id -> its status now.
    stale: dict[str, str] = field(default_factory=dict)
    #: Listed but not judged by this run (deselected, INCONCLUSIVE, NOT_TESTED).
    unjudged: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return not self.new and not self.stale

    def line(self) -> str:
        """The terminal and Markdown line: what was expected, what is new, what is stale."""
        parts = [f"{len(self.expected)} expected FAIL" + (f" ({', '.join(self.expected)})" if self.expected else "")]
        parts.append(f"{len(self.new)} new FAIL" + (f" ({', '.join(self.new)})" if self.new else ""))
        stale = ", ".join(f"{cid}: now {status}" for cid, status in self.stale.items())
        parts.append(
            f"{len(self.stale)} stale entr{'y' if len(self.stale) == 1 else 'ies'}" + (f" ({stale})" if stale else "")
        )
        if self.unjudged:
            parts.append(f"{len(self.unjudged)} listed but not judged in this run")
        verdict = "the gate passes" if self.passed else "the gate FAILS"
        hint = "" if self.passed or not self.stale else "; remove the stale entries (they would hide a regression)"
        return f"baseline {self.path}: {'; '.join(parts)}: {verdict}{hint}"

    def to_json(self) -> dict[str, Any]:
        return {
            "file": self.path,
            "passed": self.passed,
            "expected": self.expected,
            "new": self.new,
            "stale": self.stale,
            "unjudged": self.unjudged,
        }


def load_baseline(path: str, registry: Registry) -> Baseline:
    """Read and check a baseline file; every problem is a ``ConfigurationError`` naming the place."""
    file = Path(path)
    try:
        text = file.read_text("utf-8")
    except OSError as exc:
        raise ConfigurationError(f"baseline {path}: cannot read it ({exc.strerror})") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f":{mark.line + 1}" if mark is not None else ""
        raise ConfigurationError(f"baseline {path}{where}: not valid YAML ({getattr(exc, 'problem', exc)})") from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigurationError(f"baseline {path}: expected a mapping with keys 'agent' and/or 'client'")
    expected: dict[str, dict[str, str]] = {}
    for role, entries in data.items():
        if role not in ROLES:
            raise ConfigurationError(f"baseline {path}: unknown key {role!r}; the keys are 'agent' and 'client'")
        if entries is None:
            entries = {}
        if isinstance(entries, list):
            entries = dict.fromkeys(entries, "")
        if not isinstance(entries, dict):
            raise ConfigurationError(
                f"baseline {path}: {role}: expected a list of clause ids or a mapping 'clause id: reason'"
            )
        listed: dict[str, str] = {}
        for cid, reason in entries.items():
            if not isinstance(cid, str) or cid not in registry:
                close = "" if not isinstance(cid, str) else _close(registry, cid)
                raise ConfigurationError(f"baseline {path}: {role}: unknown clause id {cid!r}{close}")
            if reason is not None and not isinstance(reason, str):
                raise ConfigurationError(f"baseline {path}: {role}: {cid}: the reason must be text")
            listed[cid] = reason or ""
        expected[role] = listed
    return Baseline(str(path), expected)


def _close(registry: Registry, cid: str) -> str:
    try:
        registry.get(cid)
    except ConfigurationError as exc:
        text = str(exc)
        return text[text.index(" Did you mean") :].split(" `")[0] if "Did you mean" in text else ""
    return ""


def compare(baseline: Baseline, role: str, statuses: dict[str, str]) -> GateResult:
    """Compare a run's per-clause statuses (clause id -> status) with the baseline for ``role``."""
    listed = baseline.for_role(role)
    out = GateResult(baseline.path)
    for cid, status in statuses.items():
        if status == "FAIL":
            if cid in listed:
                out.expected[cid] = listed[cid]
            else:
                out.new.append(cid)
    for cid in listed:
        status = statuses.get(cid, "NOT_TESTED")
        if status in _JUDGED_OK:
            out.stale[cid] = status
        elif status != "FAIL":
            out.unjudged.append(cid)
    return out


def write_baseline(path: str, role: str, failures: dict[str, str]) -> None:
    """Write (or update, keeping the other role's entries) a baseline listing ``failures``
    (clause id -> the message of its FAIL, which becomes the reason)."""
    file = Path(path)
    data: dict[str, Any] = {}
    if file.is_file():
        loaded = yaml.safe_load(file.read_text("utf-8"))
        if isinstance(loaded, dict):
            data = {k: v for k, v in loaded.items() if k in ROLES}
    data[role] = {cid: " ".join(reason.split())[:200] for cid, reason in sorted(failures.items())}
    header = (
        "# acp-conformance expected failures (--acp-baseline): the run passes when every FAIL is listed;\n"
        "# a new FAIL or a listed clause that no longer fails makes it fail. Replace a reason with your own.\n"
    )
    file.parent.mkdir(parents=True, exist_ok=True)
    file.write_text(header + yaml.safe_dump(data, sort_keys=True, allow_unicode=True, width=120), "utf-8")
