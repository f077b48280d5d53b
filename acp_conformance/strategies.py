"""Hypothesis strategies for ACP v1 frames, derived from the official schema.

Everything here is built from the pinned ``schema.json`` itself (its
``$defs`` and the ``x-method`` / ``x-side`` annotations), so the generated
frames follow whatever revision ``locate_schema()`` finds; nothing about
message shapes is hard-coded.  Free text is realistic (Faker, in several
scripts, RTL included) unless told otherwise.

Valid material::

    requests("session/prompt")            # {"jsonrpc": "2.0", "id": ..., "method": ..., "params": {...}}
    notifications("session/update")       # agent -> client notifications
    results("session/new")                # {"jsonrpc": "2.0", "id": ..., "result": {...}}
    from_definition("ContentBlock")       # any ``$defs`` entry
    frames(sender="client")               # ``Frame`` objects: bytes, message, and what the receiver owes

Broken material, each ``Frame`` labelled with what a conforming receiver
must do with it (``frame.expect``)::

    invalid_frames(sender="client")       # wrong types, missing fields, unknown enums and methods, bad ids
    frames(sender="client", unusual=True) # valid but odd: _meta everywhere, odd ids, RTL text, 1 MiB strings
    byte_damage()                         # CRLF, BOM, NUL, bad UTF-8, truncation, garbage, 1 MiB lines, split writes
    chunkings(data)                       # the ways one write can arrive in pieces

Options are keyword-only and checked when the strategy is built (a bad
one raises ``hypothesis.errors.InvalidArgument`` at once, not at draw
time).  ``schema=`` takes a parsed schema document; by default the schema
``locate_schema()`` finds is used (``SchemaNotFound`` if there is none).

A receiver judges itself with ``frame.expect.check(answers)``, where
``answers`` are the responses it sent for the frame (``frame.answers(...)``
picks them out of everything it sent): the result is a list of
``Problem`` (clause id, message), empty when the answer was right.
"""

# The public face of ``acp_conformance.fuzz`` (the way ``hypothesis.strategies`` is the face of
# ``hypothesis.strategies._internal``): the strategies live in the private modules of that package,
# one per concern, and are re-exported here.  ``__all__`` is the public API; the other names below
# were public attributes of this module before the split and stay importable from it.

from __future__ import annotations

from acp_conformance.fuzz._bytes import byte_damage, chunkings, every_split
from acp_conformance.fuzz._expect import BASELINE as BASELINE
from acp_conformance.fuzz._expect import INVALID_PARAMS as INVALID_PARAMS
from acp_conformance.fuzz._expect import INVALID_REQUEST as INVALID_REQUEST
from acp_conformance.fuzz._expect import METHOD_NOT_FOUND as METHOD_NOT_FOUND
from acp_conformance.fuzz._expect import NO_ID as NO_ID
from acp_conformance.fuzz._expect import PARSE_ERROR as PARSE_ERROR
from acp_conformance.fuzz._expect import Answer as Answer
from acp_conformance.fuzz._expect import Expect, Frame, Problem
from acp_conformance.fuzz._frames import evenly, frames, invalid_frames
from acp_conformance.fuzz._json import json_values
from acp_conformance.fuzz._options import BYTE_DAMAGE, INVALID_MUTATIONS, UNUSUAL_MUTATIONS
from acp_conformance.fuzz._options import KINDS as KINDS
from acp_conformance.fuzz._options import MIB as MIB
from acp_conformance.fuzz._options import Kind as Kind
from acp_conformance.fuzz._options import Meta as Meta
from acp_conformance.fuzz._text import EDGE_STRINGS as EDGE_STRINGS
from acp_conformance.fuzz._text import SURROGATES as SURROGATES
from acp_conformance.fuzz._text import text
from acp_conformance.fuzz._valid import (
    encode,
    errors,
    from_definition,
    notifications,
    params,
    request_ids,
    requests,
    results,
)

__all__ = [
    "BYTE_DAMAGE",
    "INVALID_MUTATIONS",
    "UNUSUAL_MUTATIONS",
    "Expect",
    "Frame",
    "Problem",
    "byte_damage",
    "chunkings",
    "encode",
    "errors",
    "evenly",
    "every_split",
    "frames",
    "from_definition",
    "invalid_frames",
    "json_values",
    "notifications",
    "params",
    "request_ids",
    "requests",
    "results",
    "text",
]
