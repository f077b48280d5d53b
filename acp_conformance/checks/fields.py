"""Fields the schema does not define, in everything a peer sent: one judgement for both roles.

extensibility.mdx reserves the root of every spec-defined type for the protocol: custom data
goes under ``_meta``.  The same walk judges an agent's messages and a client's; only the events
differ (what each peer sent, as its Peer recorded it).  A field that the unstable schema
defines at the same place is a draft feature of the protocol (named, never failed); one an
official revision defined and withdrew is ``ext.withdrawn-draft-field``'s; an unknown
discriminator value is no field at all.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from acp_conformance.core.events import Event, Notification, Request, Response
from acp_conformance.schema.declared import at_pointer, undeclared_fields, withdrawn_field
from acp_conformance.schema.validator import SchemaValidator

__all__ = ["FieldFindings", "judge_fields", "typed_payloads"]


def typed_payloads(validator: SchemaValidator, events: Sequence[Event]) -> list[tuple[str, str, Any]]:
    """``(where, schema definition, object)`` for everything the peer sent that the schema types:
    its requests' and notifications' params, its results (by the method they answer), its errors."""
    out: list[tuple[str, str, Any]] = []
    for ev in events:
        if isinstance(ev, Response):
            if ev.is_error:
                out.append((f"error answering {ev.method}", "Error", ev.error))
                continue
            spec = validator.spec(ev.method) if ev.method else None
            if spec is not None and spec.response is not None:
                out.append((f"{ev.method} result", spec.response, ev.result))
        elif isinstance(ev, (Request, Notification)):
            spec = validator.spec(ev.method)
            name = (spec.request if isinstance(ev, Request) else spec.notification) if spec is not None else None
            if name is not None:
                out.append((f"{ev.method} params", name, ev.params))
    return out


@dataclass
class FieldFindings:
    """What the walk found, by what each finding is."""

    #: Fields no schema defines: ext.no-root-fields.
    extra: list[str] = field(default_factory=list)
    #: Fields the unstable schema defines at that place: draft protocol names, not custom data.
    drafted: list[str] = field(default_factory=list)
    #: Withdrawn draft names, with the revision and the replacement: ext.withdrawn-draft-field.
    withdrawn: list[str] = field(default_factory=list)
    #: Unknown discriminator values (``type``), which are no fields.
    variants: list[str] = field(default_factory=list)

    def note(self) -> str:
        """What was not judged, for the PASS or FAIL message."""
        note = ""
        if self.drafted:
            note = f"; {len(self.drafted)} field(s) of the unstable schema not judged: {'; '.join(self.drafted[:4])}"
        if self.variants:
            note += f"; unknown discriminator value(s), not undefined fields: {'; '.join(self.variants[:4])}"
        return note


def judge_fields(
    defs: dict[str, Any], draft: dict[str, Any] | None, payloads: Sequence[tuple[str, str, Any]]
) -> FieldFindings:
    """Walk every payload against ``defs`` (the stable ``$defs``), ``draft`` (the unstable ones)."""
    found = FieldFindings()
    for where, name, obj in payloads:
        odd: list[str] = []
        unknown = undeclared_fields(defs, name, obj, odd)
        in_draft = set(unknown) - set(undeclared_fields(draft, name, obj)) if draft and unknown else set()
        for ptr in [*unknown, *odd]:
            gone = withdrawn_field(name, ptr, obj)
            if ptr in in_draft:
                found.drafted.append(f"{where}: {ptr}")
            elif gone is not None:
                found.withdrawn.append(f"{where}: {ptr}, from {gone.revision} (use {gone.replacement})")
            elif ptr in odd:
                found.variants.append(f"{where}: {ptr} = {at_pointer(obj, ptr)!r}")
            else:
                found.extra.append(f"{where}: {ptr}")
    return found
