"""What happened on the wire, both ways, with monotonic timestamps.

A transcript is the evidence behind every verdict: each frame we sent or
received (raw bytes and decoded message), the violations found in it, the
peer's stderr lines, and notes from the harness.  Checks are plain
functions over transcripts, so a saved transcript can be re-checked
offline.  Values of secret-looking environment variables are redacted on
the way out (``to_jsonl`` / ``excerpt``), never stored in reports.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Literal

import orjson

from acp_conformance.core.events import Violation

__all__ = ["Direction", "Entry", "Transcript", "redactor"]

Direction = Literal["in", "out", "stderr", "note"]

_SECRET_NAME = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH|COOKIE|SESSION_ID)", re.I)


def redactor(env: dict[str, str] | None = None) -> Any:
    """Return ``f(text) -> text`` that masks values of secret-looking env vars."""
    source = os.environ if env is None else env
    secrets = sorted(
        {v for k, v in source.items() if _SECRET_NAME.search(k) and len(v) >= 6},
        key=len,
        reverse=True,
    )
    if not secrets:
        return lambda text: text
    pattern = re.compile("|".join(re.escape(s) for s in secrets))
    return lambda text: pattern.sub("[REDACTED]", text)


@dataclass
class Entry:
    """One transcript line."""

    t: float
    direction: Direction
    raw: bytes | str
    message: Any = None
    violations: list[Violation] = field(default_factory=list)

    @property
    def method(self) -> str | None:
        m = self.message
        return m.get("method") if isinstance(m, dict) and isinstance(m.get("method"), str) else None

    @property
    def is_frame(self) -> bool:
        return self.direction in ("in", "out")

    def text(self) -> str:
        if isinstance(self.raw, bytes):
            return self.raw.decode("utf-8", "replace")
        return self.raw


class Transcript:
    """Append-only record of one connection."""

    def __init__(self, label: str = "") -> None:
        self.label = label
        self.started = time.monotonic()
        self.entries: list[Entry] = []
        self.violations: list[Violation] = []

    def _now(self) -> float:
        return round(time.monotonic() - self.started, 6)

    def add(self, direction: Direction, raw: bytes | str, message: Any = None) -> Entry:
        entry = Entry(self._now(), direction, raw, message)
        self.entries.append(entry)
        return entry

    def violation(self, v: Violation, entry: Entry | None = None) -> None:
        self.violations.append(v)
        if entry is not None:
            entry.violations.append(v)
        else:
            self.add("note", f"violation [{v.clause_id}] {v.message}").violations.append(v)

    def note(self, text: str) -> None:
        self.add("note", text)

    # ---------------------------------------------------------------- queries
    def frames(self, direction: Direction | None = None) -> Iterator[Entry]:
        for e in self.entries:
            if e.is_frame and (direction is None or e.direction == direction):
                yield e

    def messages(self, direction: Direction) -> Iterator[dict[str, Any]]:
        for e in self.frames(direction):
            if isinstance(e.message, dict):
                yield e.message

    def stderr(self) -> list[str]:
        return [e.text() for e in self.entries if e.direction == "stderr"]

    # ------------------------------------------------------------- rendering
    def excerpt(self, around: Iterable[Entry] = (), *, last: int = 30, width: int = 400) -> str:
        """The last ``last`` entries (plus any ``around``), one line each, redacted."""
        redact = redactor()
        chosen = list(self.entries[-last:])
        extra = [e for e in around if e not in chosen]
        lines = []
        for e in sorted(extra + chosen, key=lambda x: x.t):
            arrow = {"in": "<-", "out": "->", "stderr": "!!", "note": "##"}[e.direction]
            body = redact(e.text())  # before truncating: a cut must not expose a secret's prefix
            if len(body) > width:
                body = body[:width] + f"... ({len(body)} chars)"
            line = f"{e.t:9.3f} {arrow} {body}"
            for v in e.violations:
                line += f"\n          ^^ [{v.clause_id}] {redact(v.message)}"
            lines.append(line)
        return "\n".join(lines)

    def to_jsonl(self) -> bytes:
        redact = redactor()
        out = bytearray()
        for e in self.entries:
            rec: dict[str, Any] = {
                "t": e.t,
                "dir": e.direction,
                "raw": redact(e.text()),
            }
            if e.violations:
                rec["violations"] = [
                    {
                        "clause": v.clause_id,
                        "message": redact(v.message),
                        "severity": v.severity,
                    }
                    for v in e.violations
                ]
            out += orjson.dumps(rec) + b"\n"
        return bytes(out)

    @classmethod
    def from_jsonl(cls, data: bytes, label: str = "") -> Transcript:
        """Load a saved transcript (the inverse of ``to_jsonl``, for offline checks)."""
        t = cls(label)
        for n, line in enumerate(data.splitlines(), 1):
            if not line.strip():
                continue
            try:
                rec = orjson.loads(line)
            except orjson.JSONDecodeError as exc:
                raise ValueError(f"{label or 'transcript'} line {n}: not JSON ({exc})") from None
            raw = rec.get("raw", "")
            message = None
            if rec.get("dir") in ("in", "out"):
                try:
                    message = orjson.loads(raw)
                except orjson.JSONDecodeError:
                    message = None
            entry = Entry(float(rec.get("t", 0.0)), rec.get("dir", "note"), raw, message)
            for v in rec.get("violations", []):
                entry.violations.append(Violation(v["clause"], v["message"], v.get("severity", "error")))
                t.violations.append(entry.violations[-1])
            t.entries.append(entry)
        return t
