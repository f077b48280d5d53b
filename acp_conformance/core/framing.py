"""Newline framing for ACP's stdio transport.

ACP frames are single lines terminated by ``\\n``.  The decoder accepts
bytes in arbitrary chunks (a frame may arrive one byte at a time, or many
frames in one read) and never imposes the 64 KiB line limit that common
stream readers do: real agents send multi-megabyte diffs.  The cap is
configurable; an over-long line is discarded up to its newline and
reported, so a peer writing a 100 MiB line costs bounded memory.

Over-long lines and end-of-stream in the middle of a line are two distinct
failures (the distinction anyio's ``receive_until`` draws).
"""

from __future__ import annotations

from dataclasses import dataclass

from acp_conformance.core.events import Violation

__all__ = ["DEFAULT_MAX_FRAME_BYTES", "FrameDecoder", "RawFrame", "encode_frame", "printable", "unterminated_note"]

#: 64 MiB: far above anything a sane peer sends, far below what hurts us.
DEFAULT_MAX_FRAME_BYTES = 64 * 1024 * 1024

CLAUSE_NEWLINE = "transport.stdio.newline-delimited"
CLAUSE_STRICT = "transport.stdio.strict-framing"
CLAUSE_LIMIT = "transport.frame-limit"
#: How much of an unterminated line a message shows.
PREVIEW_BYTES = 120


def printable(data: bytes) -> str:
    """``data`` as one printable line (invalid UTF-8 and control characters escaped): bytes a
    peer wrote, quoted in a message a person reads."""
    text = data.decode("utf-8", "backslashreplace")
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def unterminated_note(n: int, head: bytes) -> str:
    """What a transcript says of the ``n`` bytes of a line the peer began and has not ended
    (``head``: its first bytes, empty for an over-long line already cut)."""
    if not head:
        return f"the peer has written {n} bytes of an over-long line without a newline so far"
    more = f" (first {len(head)} shown)" if n > len(head) else ""
    return f"the peer has written {n} bytes of a line without a terminating newline{more}: {printable(head)}"


@dataclass(frozen=True, slots=True)
class RawFrame:
    """One line of peer output, without its terminating newline.

    ``crlf`` is true when the line ended in ``\\r\\n``; the ``\\r`` has been
    removed from ``data``.
    """

    data: bytes
    crlf: bool = False


class FrameDecoder:
    """Incremental splitter of a byte stream into newline-terminated frames."""

    __slots__ = (
        "_buf",
        "_closed",
        "_discarded",
        "_discarding",
        "_scan",
        "max_frame_bytes",
    )

    def __init__(self, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES) -> None:
        if max_frame_bytes < 1:
            raise ValueError("max_frame_bytes must be positive")
        self.max_frame_bytes = max_frame_bytes
        self._buf = bytearray()
        self._scan = 0
        self._discarding = False
        self._discarded = 0
        self._closed = False

    @property
    def buffered(self) -> int:
        """Bytes held for an unfinished line (bounded by ``max_frame_bytes``)."""
        return len(self._buf)

    @property
    def discarding(self) -> int:
        """Bytes of an over-long line being discarded so far (0 when none is)."""
        return self._discarded if self._discarding else 0

    def pending(self, limit: int = 200) -> bytes:
        """The first ``limit`` bytes of the unfinished line: evidence when a peer stops mid-line."""
        return bytes(self._buf[:limit])

    def feed(self, data: bytes) -> list[RawFrame | Violation]:
        """Add bytes; return the frames (and framing violations) they complete."""
        if self._closed:
            raise ValueError("feed() after feed_eof()")
        out: list[RawFrame | Violation] = []
        if not data:
            return out
        buf = self._buf
        buf += data
        start = 0
        scan = self._scan
        while True:
            nl = buf.find(b"\n", scan)
            if nl < 0:
                break
            if self._discarding:
                self._discarded += nl - start
                out.append(self._oversize_violation())
                self._discarding = False
                self._discarded = 0
            elif nl - start > self.max_frame_bytes:
                self._discarded = nl - start
                out.append(self._oversize_violation())
                self._discarded = 0
            else:
                self._emit(bytes(buf[start:nl]), out)
            start = scan = nl + 1
        if start:
            del buf[:start]
        pending = len(buf)
        if pending > self.max_frame_bytes or (self._discarding and pending):
            # Keep nothing of a line we already know is too long.
            self._discarding = True
            self._discarded += pending
            buf.clear()
            pending = 0
        self._scan = pending
        return out

    def feed_eof(self) -> list[RawFrame | Violation]:
        """Signal end of stream; report a line cut off without its newline."""
        out: list[RawFrame | Violation] = []
        if self._closed:
            return out
        self._closed = True
        if self._discarding:
            out.append(self._oversize_violation())
        elif self._buf:
            tail = bytes(self._buf)
            out.append(
                Violation(
                    CLAUSE_NEWLINE,
                    f"stream ended in the middle of a line ({len(tail)} bytes without a terminating newline): "
                    f"{printable(tail[:PREVIEW_BYTES])}{'...' if len(tail) > PREVIEW_BYTES else ''}",
                    raw=tail[:200],
                )
            )
        self._buf.clear()
        return out

    def _oversize_violation(self) -> Violation:
        return Violation(
            CLAUSE_LIMIT,
            f"line of at least {self._discarded} bytes exceeds the frame cap of "
            f"{self.max_frame_bytes} bytes (raise it with --acp-max-frame-bytes); "
            "the line was discarded unjudged",
        )

    def _emit(self, line: bytes, out: list[RawFrame | Violation]) -> None:
        crlf = line.endswith(b"\r")
        if crlf:
            line = line[:-1]
        if not line.strip():
            out.append(
                Violation(
                    CLAUSE_STRICT,
                    "blank line between frames (each line must carry exactly one message)",
                    severity="warning",
                    raw=line,
                )
            )
            return
        if crlf:
            out.append(
                Violation(
                    CLAUSE_STRICT,
                    "frame terminated by CRLF; ACP frames end with a bare \\n",
                    severity="warning",
                    raw=line[:200],
                )
            )
        out.append(RawFrame(line, crlf))


def encode_frame(payload: bytes) -> bytes:
    """Terminate an already serialized JSON payload as one frame."""
    if b"\n" in payload:
        # Serializers we use never emit raw newlines; this guards hand-made payloads.
        raise ValueError("a frame payload must not contain a raw newline")
    return payload + b"\n"
