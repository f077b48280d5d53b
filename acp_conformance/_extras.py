"""What needs the `suite` extra, and the one message that says how to get it.

The base install is the mocks' (anyio, orjson, jsonschema-rs, PyYAML); the conformance suite,
the fuzzers and scenario files need pytest, Hypothesis, pydantic, Faker and python-jsonschema
(``pip install "acp-conformance[suite]"``).  Every entry point that needs them asks here first,
so a mocks-only install says what to install instead of failing with an ImportError.
"""

from __future__ import annotations

import importlib.util

from acp_conformance.errors import ConfigurationError

__all__ = ["SUITE_MODULES", "missing_suite_modules", "require_suite"]

#: Modules of the `suite` extra (pyproject.toml) that the suite and scenario files import.
SUITE_MODULES = ("pytest", "hypothesis", "pydantic", "faker", "jsonschema")


def missing_suite_modules(needed: tuple[str, ...] = SUITE_MODULES) -> list[str]:
    return [m for m in needed if importlib.util.find_spec(m) is None]


def require_suite(what: str, needed: tuple[str, ...] = SUITE_MODULES) -> None:
    """Raise ``ConfigurationError`` naming the extra when ``what`` cannot run in this install."""
    missing = missing_suite_modules(needed)
    if missing:
        raise ConfigurationError(
            f"{what} needs acp-conformance's `suite` extra (missing: {', '.join(missing)}): "
            "pip install 'acp-conformance[suite]'"
        )
