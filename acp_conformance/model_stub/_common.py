"""Helpers both model API stubs share (``anthropic`` and ``openai``)."""

from __future__ import annotations

from typing import Any

__all__ = ["chunks", "json_schema_of"]


def chunks(text: str, size: int) -> list[str]:
    """``text`` in pieces of ``size`` characters (at least one piece, maybe empty), as a stream sends it."""
    size = max(size, 1)
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]


def json_schema_of(fmt: Any) -> dict[str, Any] | None:
    """The schema of a structured-output format ``{"type": "json_schema", "schema": {...}}``, else None."""
    if isinstance(fmt, dict) and fmt.get("type") == "json_schema" and isinstance(fmt.get("schema"), dict):
        schema: dict[str, Any] = fmt["schema"]
        return schema
    return None
