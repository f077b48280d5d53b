"""What happened on the wire, both ways, with monotonic timestamps.

A transcript is the evidence behind every verdict: each frame we sent or
received (raw bytes and decoded message), the violations found in it, the
peer's stderr lines, and notes from the harness.  Checks are plain
functions over transcripts, so a saved transcript can be re-checked
offline.  Values of secret-looking environment variables are redacted on
the way out (``to_jsonl`` / ``excerpt``), never stored in reports.
"""

from __future__ import annotations

import functools
import json
import os
import re
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import orjson

from acp_conformance.core.events import Violation

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

#: Names whose values are taken for secrets: API keys, tokens, passwords, credentials...
_SECRET_NAME = re.compile(
    r"(KEY|TOKEN|SECRET|PASSWORD|PASSWD|PASSPHRASE|CREDENTIAL|AUTH|COOKIE|SESSION_ID|PRIVATE|(?:^|_)PASS(?:$|_))",
    re.I,
)
#: Shorter values are left alone: masking them would mangle ordinary text.
_MIN_SECRET_LEN = 6
#: Well-known shapes of credentials, masked wherever they appear, even when no
#: variable of ours holds them (an agent may read its own config files).
_SECRET_SHAPES = (
    r"\bsk-(?:ant-|proj-)?[A-Za-z0-9_\-]{20,}",  # OpenAI / Anthropic keys
    r"\bgh[pousr]_[A-Za-z0-9]{30,}",  # GitHub tokens
    r"\bgithub_pat_[A-Za-z0-9_]{22,}",
    r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b",  # AWS access key ids
    r"\bxox[abprs]-[A-Za-z0-9\-]{10,}",  # Slack tokens
    r"\bAIza[0-9A-Za-z_\-]{35}",  # Google API keys
    r"-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?(?:-----END [A-Z ]*PRIVATE KEY-----|$)",
    r"(?<=Bearer )[A-Za-z0-9._~+/=\-]{16,}",  # an Authorization header's credential
)
REDACTED = "[REDACTED]"

#: Values registered at run time (``register_secrets``), e.g. from ``--acp-agent-env``.
_registered: set[str] = set()


def _is_secret(name: str, value: str) -> bool:
    return bool(_SECRET_NAME.search(name)) and len(value) >= _MIN_SECRET_LEN


def register_secrets(env: Mapping[str, str]) -> None:
    """Redact, from now on and in this process, the values of ``env``'s secret-looking names.

    ``redactor()`` sees ``os.environ``; the variables given to the peer only
    (``--acp-agent-env``, a peer profile's) are not there, so whoever builds the
    peer's environment registers them (``transport.process.spawn`` does).
    """
    _registered.update(v for k, v in env.items() if _is_secret(k, v))


def _forms(value: str) -> set[str]:
    """A value as it may appear in text: as is, and JSON-escaped (a frame carries it
    that way if it holds a quote, a backslash, a control or, with ``ensure_ascii`` -
    Python's ``json`` default - a non-ASCII character)."""
    return {value, json.dumps(value)[1:-1], json.dumps(value, ensure_ascii=False)[1:-1]}


#: Substrings every match of a shape contains: a cheap test before the regex, which
#: matters because every stderr line of a flooding agent goes through here.
_SHAPE_HINTS = (
    *("sk-", "ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_", "AKIA", "ASIA", "xox", "AIza"),
    *("PRIVATE KEY-----", "Bearer "),
)
_SHAPES = re.compile("|".join(_SECRET_SHAPES))


@functools.lru_cache(maxsize=64)
def _compiled(values: frozenset[str]) -> Callable[[str], str]:
    forms = tuple(sorted({f for v in values for f in _forms(v)}, key=len, reverse=True))  # longest first
    literal = re.compile("|".join(re.escape(f) for f in forms)) if forms else None

    def redact(text: str) -> str:
        if literal is not None and any(f in text for f in forms):
            text = literal.sub(REDACTED, text)
        if any(h in text for h in _SHAPE_HINTS):
            text = _SHAPES.sub(REDACTED, text)
        return text

    return redact


def redactor(env: Mapping[str, str] | None = None) -> Callable[[str], str]:
    """Return ``f(text) -> text`` that masks secrets with ``[REDACTED]``.

    Secrets: values (at least 6 characters) of secret-looking names in ``env``
    (default ``os.environ``) or registered with ``register_secrets``, in their
    literal and JSON-escaped forms, plus well-known credential shapes (API keys,
    tokens, private keys, bearer credentials).  Redact before cutting text, so a
    truncated line never shows a secret's prefix.
    """
    source = os.environ if env is None else env
    return _compiled(frozenset({v for k, v in source.items() if _is_secret(k, v)} | _registered))


def redact_data(data: Any, redact: Callable[[str], str] | None = None) -> Any:
    """A copy of JSON-like ``data`` with every string (keys included) redacted."""
    redact = redact or redactor()
    if isinstance(data, str):
        return redact(data)
    if isinstance(data, dict):
        return {redact_data(k, redact): redact_data(v, redact) for k, v in data.items()}
    if isinstance(data, (list, tuple)):
        return [redact_data(v, redact) for v in data]
    return data


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
