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


@dataclass(slots=True)
class Entry:
    """One transcript line (slotted: one is made per frame, and a flood makes millions)."""

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


class _FramesDropped(str):
    """The text of a "frames dropped here" note, which also knows its count (so a later
    compaction pass extends the run it ends in rather than adding a second note)."""

    n: int

    def __new__(cls, n: int) -> _FramesDropped:
        self = super().__new__(cls, f"... {n} frame(s) dropped here (a flood; see frames_dropped) ...")
        self.n = n
        return self


#: stderr lines a transcript keeps: the first ones (startup, the first error) ...
STDERR_HEAD = 200
#: ... and the most recent ones; those in between are dropped and counted.
STDERR_TAIL = 1000
#: Frames (both directions) a transcript keeps from the start of the connection ...
FRAMES_HEAD = 1000
#: ... and at the end; those in between are dropped and counted, except the pinned ones.
FRAMES_TAIL = 2000
#: At most this many kinds of frame (see ``_signature``) have their first frame pinned.
MAX_SIGNATURES = 512


def _signature(direction: Direction, message: Any) -> tuple[Any, ...] | None:
    """What a passive check's "was it exercised?" question can ask of a frame: its direction,
    method, kind (request / notification / result / error) and session update kind."""
    if not isinstance(message, dict):
        return (direction, None)
    method = message.get("method")
    if not isinstance(method, str):
        return (direction, None, "error" in message, "id" in message)
    update = None
    params = message.get("params")
    if method == "session/update" and isinstance(params, dict) and isinstance(params.get("update"), dict):
        kind = params["update"].get("sessionUpdate")
        update = kind if isinstance(kind, str) else None
    return (direction, method, "id" in message, update)


def _frame_excess_allowed(entries: int) -> int:
    """Frames past the tail a transcript of ``entries`` lines carries before it compacts (at
    least a quarter of them, so each pass over the entries is paid for by what it frees)."""
    return max(FRAMES_TAIL // 2, entries // 4)


class Transcript:
    """Append-only record of one connection, bounded against floods.

    An agent may write gigabytes of stderr, or millions of valid frames: a
    transcript that kept them all would grow without bound.  So:

    * stderr lines (not evidence of conformance): the first ``STDERR_HEAD`` and
      the last ``STDERR_TAIL`` are kept, and one note, where the dropping began,
      says how many were dropped (``stderr_dropped``);
    * frames: the first ``FRAMES_HEAD`` and the last ``FRAMES_TAIL`` are kept,
      plus every frame carrying a violation and the first frame of each kind
      (``_signature``: direction, method, request / notification / result /
      error, session update kind), so the passive checks' "was it exercised?"
      questions get the same answers as over the whole stream.  Each run of
      dropped frames leaves one note saying how many were dropped there
      (``frames_dropped`` counts them all).

    An entry carrying a violation is never dropped, and notes never are.
    """

    #: Whether our own frames are kept decoded as well as raw.  The suite's transcripts are
    #: evidence and keep them (checks and the pool read what we sent); a mock's log of its own
    #: traffic does not, and saves decoding every frame it writes (bench/README.md, item 6).
    keeps_sent = True

    def __init__(self, label: str = "") -> None:
        self.label = label
        self.started = time.monotonic()
        self.entries: list[Entry] = []
        self.violations: list[Violation] = []
        #: clause id -> (how many conforming judgements, what the first one saw): ``conformed``.
        self.passes: dict[str, tuple[int, str]] = {}
        self.stderr_total = 0
        self.stderr_dropped = 0
        self.frames_total = 0
        self.frames_dropped = 0
        self._stderr_tail: deque[Entry] = deque()  # droppable stderr entries, oldest first
        self._frame_tail: deque[Entry] = deque()  # droppable frame entries, oldest first
        self._drop_note: Entry | None = None
        self._signatures: set[tuple[Any, ...] | None] = set()
        #: No compaction can start before the frame tail is this long (``_maybe_compact``'s rule,
        #: which only grows with the entries): most frames skip the check.
        self._compact_at = FRAMES_TAIL + _frame_excess_allowed(0)
        #: The leading entries no later compaction can drop (``_drop``): each pass walks from here.
        self._settled = 0

    def _now(self) -> float:
        return round(time.monotonic() - self.started, 6)

    def add(self, direction: Direction, raw: bytes | str, message: Any = None) -> Entry:
        entry = Entry(self._now(), direction, raw, message)
        self.entries.append(entry)
        if direction == "in" or direction == "out":
            self.frames_total += 1
            sig = _signature(direction, message)
            if sig not in self._signatures and len(self._signatures) < MAX_SIGNATURES:
                self._signatures.add(sig)  # the first of its kind: pinned
            elif self.frames_total > FRAMES_HEAD:
                self._frame_tail.append(entry)
                # A frame adds one entry and one droppable frame: of ``_maybe_compact``'s three
                # triggers only the frame tail's can become true, at ``_compact_at`` at the soonest.
                if len(self._frame_tail) >= self._compact_at:
                    self._maybe_compact()
        elif direction == "stderr":
            self.stderr_total += 1
            if self.stderr_total > STDERR_HEAD:
                self._stderr_tail.append(entry)
                self._maybe_compact()
        return entry

    def _forget_removed(self) -> None:
        """Forget droppable entries a subclass removed from ``entries`` itself (the mock agent keeps only
        its last 100): the queues must not keep alive what the transcript no longer holds."""
        held = {id(e) for e in self.entries}
        self._stderr_tail = deque(e for e in self._stderr_tail if id(e) in held)
        self._frame_tail = deque(e for e in self._frame_tail if id(e) in held)

    def _maybe_compact(self) -> None:
        """Drop what is past the tails, in one pass over the entries.

        A pass costs O(entries): it runs only when it frees at least a quarter of them
        (and a tail's worth), so each line costs O(1) amortised.
        """
        stderr_excess = len(self._stderr_tail) - STDERR_TAIL
        frame_excess = len(self._frame_tail) - FRAMES_TAIL
        if len(self._stderr_tail) + len(self._frame_tail) > 2 * len(self.entries) + 64:
            self._forget_removed()  # amortised: afterwards the queues are no longer than the entries
        quarter = len(self.entries) // 4
        if stderr_excess >= max(STDERR_TAIL, quarter) or frame_excess >= _frame_excess_allowed(len(self.entries)):
            doomed: set[int] = set()
            for queue, excess in ((self._stderr_tail, stderr_excess), (self._frame_tail, frame_excess)):
                for _ in range(max(excess, 0)):
                    e = queue.popleft()
                    if not e.violations:
                        doomed.add(id(e))
            if doomed:
                self._drop(doomed)
        # The rule above with the entries as they are now (fewer after a drop); it only grows
        # as entries are added, so until then the frame tail's own length is the whole check.
        self._compact_at = FRAMES_TAIL + _frame_excess_allowed(len(self.entries))

    def _drop(self, doomed: set[int]) -> None:
        """Remove the ``doomed`` entries; count them in notes (one for stderr, one per run of frames).

        Only the stretch from ``_settled`` to the last doomed entry is walked: the doomed are the
        oldest droppable entries of each queue, so nothing before the first entry still queued
        (which only moves forward) can be doomed by a later pass, and nothing after the last
        doomed one changes in this pass.  A whole walk made flooding streams pay about four entry
        visits per frame dropped (bench/README.md, item 19)."""
        entries = self.entries
        start = min(self._settled, len(entries))
        kept: list[Entry] = entries[:start]
        frames_note: Entry | None = None  # the note of the run of dropped frames we are in
        # The oldest entries still droppable after this pass: the next pass starts no later.
        heads = {id(q[0]) for q in (self._stderr_tail, self._frame_tail) if q}
        settled = -1
        left = len(doomed)
        # Each run's note and the frames it gains in this pass: its text is written once, at the end.
        runs: list[list[Any]] = []
        run: list[Any] = []
        i = start
        while left and i < len(entries):
            e = entries[i]
            i += 1
            if id(e) not in doomed:
                if settled < 0 and id(e) in heads:
                    settled = len(kept)
                if frames_note is not None and e.direction in ("in", "out", "stderr"):
                    frames_note = None  # a kept line ends the run
                kept.append(e)
                continue
            left -= 1
            if e.direction == "stderr":
                self.stderr_dropped += 1
                if self._drop_note is None:
                    self._drop_note = Entry(e.t, "note", "")
                    kept.append(self._drop_note)
                continue
            self.frames_dropped += 1
            if frames_note is None:
                previous = kept[-1] if kept else None
                if previous is not None and previous.direction == "note" and isinstance(previous.raw, _FramesDropped):
                    frames_note = previous  # a run that an earlier pass began
                else:
                    frames_note = Entry(e.t, "note", _FramesDropped(0))
                    kept.append(frames_note)
                run = [frames_note, 0]
                runs.append(run)
            run[1] += 1
        for note, gained in runs:
            assert isinstance(note.raw, _FramesDropped)
            note.raw = _FramesDropped(note.raw.n + gained)
        # No queued entry among those walked: the queues' heads come after the last doomed one.
        self._settled = settled if settled >= 0 else len(kept)
        kept.extend(entries[i:])
        self.entries = kept
        if self._drop_note is not None:
            self._drop_note.raw = (
                f"... {self.stderr_dropped} stderr line(s) of the peer dropped here (a flood: the first "
                f"{STDERR_HEAD} and the last {STDERR_TAIL} are kept) ..."
            )

    @property
    def dropped_summary(self) -> str:
        """One sentence for reports: how much of the stream is not in the evidence ("" when nothing)."""
        parts = []
        if self.frames_dropped:
            parts.append(
                f"{self.frames_dropped} of {self.frames_total} frame(s) dropped from the evidence (a flood: the "
                f"first {FRAMES_HEAD} and last {FRAMES_TAIL}, every frame with a violation and the first of each "
                "kind are kept)"
            )
        if self.stderr_dropped:
            parts.append(f"{self.stderr_dropped} of {self.stderr_total} stderr line(s) dropped")
        return "; ".join(parts)

    def violation(self, v: Violation, entry: Entry | None = None) -> None:
        self.violations.append(v)
        if entry is not None:
            entry.violations.append(v)
        else:
            self.add("note", f"violation [{v.clause_id}] {v.message}").violations.append(v)

    def conformed(self, clause: str, seen: str) -> None:
        """A handler judged a frame on ``clause`` and found it conforming: the evidence of the
        clause's PASS (``checks.passive.passive_results``), where a breach would have been a
        ``violation``.  Without it a clause judged only by the absence of a violation could pass
        on traffic that never exercised it."""
        n, first = self.passes.get(clause, (0, seen))
        self.passes[clause] = (n + 1, first)

    def note(self, text: str) -> None:
        self.add("note", text)

    def set_aside(self, violations: Iterable[Violation], why: str) -> int:
        """Remove ``violations`` (from the list and from their entries), noting ``why``: a test
        judged what they show on a clause of its own (one defect, one clause).  How many went."""
        gone = 0
        for v in violations:
            if v in self.violations:
                self.violations.remove(v)
                gone += 1
            for entry in self.entries:
                if v in entry.violations:
                    entry.violations.remove(v)
        if gone:
            self.note(f"{why}: {gone} finding(s) set aside")
        return gone

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
