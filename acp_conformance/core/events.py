"""Immutable events produced by the sans-IO core.

A peer's byte stream becomes a sequence of these.  ``Violation`` is an
event, not an exception: a broken frame is evidence to record, and the run
goes on so that later clauses can still be judged.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

__all__ = ["Event", "Notification", "Request", "Response", "Violation", "Severity"]

Severity = Literal["error", "warning"]


@dataclass(frozen=True, slots=True)
class Violation:
    """The peer broke ``clause_id``; ``severity`` 'warning' marks SHOULD-grade findings.

    ``index`` is the position of the offending inbound frame in the
    connection's inbound sequence (``None`` when not tied to one frame).
    """

    clause_id: str
    message: str
    severity: Severity = "error"
    raw: bytes | None = None
    index: int | None = None


@dataclass(frozen=True, slots=True)
class Request:
    """A request (has ``id`` and ``method``) received from the peer."""

    id: Any
    method: str
    params: Any
    raw: bytes = b""
    index: int = -1
    has_params: bool = True
    message: Any = None


@dataclass(frozen=True, slots=True)
class Notification:
    """A notification (``method`` without ``id``) received from the peer."""

    method: str
    params: Any
    raw: bytes = b""
    index: int = -1
    has_params: bool = True
    message: Any = None


@dataclass(frozen=True, slots=True)
class Response:
    """A response (result or error) received from the peer.

    ``method`` is the method of our request it answers, or ``None`` when the
    id matched no outstanding request of ours (that case also yields a
    ``Violation``).  ``duplicate`` marks a second answer to the same id.
    """

    id: Any
    result: Any = None
    error: Any = None
    is_error: bool = False
    method: str | None = None
    duplicate: bool = False
    raw: bytes = b""
    index: int = -1
    message: Any = None


Event = Request | Notification | Response | Violation
