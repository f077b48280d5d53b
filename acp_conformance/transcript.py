"""What happened on the wire, both ways, with monotonic timestamps.

A transcript is the evidence behind every verdict: each frame we sent or
received (raw bytes and decoded message), the violations found in it, the
peer's stderr lines, and notes from the harness.  Checks are plain
functions over transcripts, so a saved transcript can be re-checked
offline.  Values of secret-looking environment variables are redacted on
the way out (``to_jsonl`` / ``excerpt``), never stored in reports.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Literal

import orjson

from acp_conformance.core.events import Violation
from acp_conformance.redaction import REDACTED, redact_data, redactor, register_secrets

__all__ = [
    "REDACTED",
    "STDERR_HEAD",
    "STDERR_TAIL",
    "Direction",
    "Entry",
    "Transcript",
    "redact_data",
    "redactor",
    "register_secrets",
]

Direction = Literal["in", "out", "stderr", "note"]


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


#: stderr lines a transcript keeps: the first ones (startup, the first error) ...
STDERR_HEAD = 200
#: ... and the most recent ones; those in between are dropped and counted.
STDERR_TAIL = 1000


class Transcript:
    """Append-only record of one connection, except for stderr floods.

    Frames are all kept (checks need them).  stderr lines are not evidence of
    conformance, and an agent may write gigabytes of them: the transcript keeps
    the first ``STDERR_HEAD`` and the last ``STDERR_TAIL`` lines, and one note,
    where the dropping began, that says how many were dropped
    (``stderr_dropped``).  A line carrying a violation is never dropped.
    """

    def __init__(self, label: str = "") -> None:
        self.label = label
        self.started = time.monotonic()
        self.entries: list[Entry] = []
        self.violations: list[Violation] = []
        self.stderr_total = 0
        self.stderr_dropped = 0
        self._stderr_tail: deque[Entry] = deque()  # droppable stderr entries, oldest first
        self._drop_note: Entry | None = None

    def _now(self) -> float:
        return round(time.monotonic() - self.started, 6)

    def add(self, direction: Direction, raw: bytes | str, message: Any = None) -> Entry:
        entry = Entry(self._now(), direction, raw, message)
        self.entries.append(entry)
        if direction == "stderr":
            self.stderr_total += 1
            if self.stderr_total > STDERR_HEAD:
                self._stderr_tail.append(entry)
                excess = len(self._stderr_tail) - STDERR_TAIL
                # Compacting costs a pass over the entries: only when it frees at least a
                # quarter of them (and a tail's worth), so each line costs O(1) amortised.
                if excess >= max(STDERR_TAIL, len(self.entries) // 4):
                    self._drop_stderr(excess)
        return entry

    def _drop_stderr(self, n: int) -> None:
        """Drop the ``n`` oldest droppable stderr lines; count them in one note."""
        doomed: set[int] = set()
        first: Entry | None = None
        for _ in range(n):
            e = self._stderr_tail.popleft()
            if not e.violations:
                doomed.add(id(e))
                first = first or e
        if first is None:
            return
        self.stderr_dropped += len(doomed)
        kept: list[Entry] = []
        for e in self.entries:
            if id(e) not in doomed:
                kept.append(e)
            elif self._drop_note is None:
                self._drop_note = Entry(e.t, "note", "")
                kept.append(self._drop_note)
        self.entries = kept
        assert self._drop_note is not None
        self._drop_note.raw = (
            f"... {self.stderr_dropped} stderr line(s) of the peer dropped here (a flood: the first "
            f"{STDERR_HEAD} and the last {STDERR_TAIL} are kept) ..."
        )

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
        """The stderr lines kept (see the class docstring; ``stderr_dropped`` counts the others)."""
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
