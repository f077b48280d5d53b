"""The official ACP schema: the only code that reads it.

* ``locate``: where the schema comes from (``--acp-schema``, ``$ACP_CONFORMANCE_SCHEMA``,
  ``node_modules``, the per-user cache) and what is recorded about it;
* ``validator``: strict per-method validation (jsonschema-rs on the hot path);
* ``rules``: ``judge_frame``, the per-frame rules both the ``Peer`` and the recording proxy apply;
* ``declared``: which fields a spec-defined object declares (custom root fields, withdrawn
  draft names, unknown discriminator values).

``load_validator`` is the one way a tool gets a validator ("find the schema, or say why not").
Attributes are resolved lazily: ``from acp_conformance.schema import locate_schema`` does not
import jsonschema-rs, which keeps the mocks' start-up fast.
"""

from __future__ import annotations

import importlib
import logging
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from acp_conformance.schema.declared import Withdrawn, undeclared_fields, withdrawn_field, withdrawn_fields
    from acp_conformance.schema.locate import (
        ENV_VAR,
        FIX_HINT,
        PINNED_SDK_VERSION,
        SDK_PACKAGE,
        SchemaSource,
        cache_dir,
        fetch_into_cache,
        locate_schema,
    )
    from acp_conformance.schema.rules import judge_frame
    from acp_conformance.schema.validator import MethodSpec, SchemaIssue, SchemaValidator, clause_for

__all__ = [
    "ENV_VAR",
    "FIX_HINT",
    "PINNED_SDK_VERSION",
    "SDK_PACKAGE",
    "MethodSpec",
    "SchemaIssue",
    "SchemaSource",
    "SchemaValidator",
    "Withdrawn",
    "cache_dir",
    "clause_for",
    "fetch_into_cache",
    "judge_frame",
    "load_validator",
    "locate_schema",
    "undeclared_fields",
    "withdrawn_field",
    "withdrawn_fields",
]

_HOMES = {
    "ENV_VAR": "locate",
    "FIX_HINT": "locate",
    "PINNED_SDK_VERSION": "locate",
    "SDK_PACKAGE": "locate",
    "SchemaSource": "locate",
    "cache_dir": "locate",
    "fetch_into_cache": "locate",
    "locate_schema": "locate",
    "MethodSpec": "validator",
    "SchemaIssue": "validator",
    "SchemaValidator": "validator",
    "clause_for": "validator",
    "judge_frame": "rules",
    "Withdrawn": "declared",
    "undeclared_fields": "declared",
    "withdrawn_field": "declared",
    "withdrawn_fields": "declared",
}

log = logging.getLogger("acp_conformance.schema")


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{home}"), name)


def load_validator(
    explicit: str | None = None,
    *,
    required: bool = False,
    unstable: bool = False,
    warn: Any = None,
    flag: str = "--acp-schema",
) -> SchemaValidator | None:
    """The strict validator of the schema ``locate_schema`` finds.

    When there is none: ``required`` raises the ``ConfigurationError`` (which says how to fix
    it); otherwise ``warn`` (a callable taking the message; default: this module's logger) is
    told that the run goes on WITHOUT schema validation, and None is returned.  ``flag`` is the
    calling tool's own option for a schema path, named in the hint (the mocks take ``--schema``).
    Every tool that needs a validator (the mocks, the proxy, the scenario runner, the plugin)
    comes here."""
    from acp_conformance.errors import ConfigurationError
    from acp_conformance.schema.locate import locate_schema
    from acp_conformance.schema.validator import SchemaValidator

    try:
        source = locate_schema(explicit, unstable=unstable)
    except (ConfigurationError, OSError) as exc:
        if required:
            raise
        message = str(exc).replace("--acp-schema PATH", f"{flag} PATH")
        (warn or log.warning)(f"running WITHOUT schema validation: {message}")
        return None
    log.info("validating against %s (%s)", source.path, source.version)
    return SchemaValidator(source.data)
