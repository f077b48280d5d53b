"""The public strategies (acp_conformance.strategies) keep their promises.

* every valid frame, for every method and direction, validates against the
  definition its method and direction select (judged here independently,
  with ``SchemaValidator`` and the core's JSON-RPC classifier);
* every invalid frame is invalid, and says so; the mutation families and
  the byte damage produce what they claim;
* options are checked eagerly (``InvalidArgument`` at call time);
* ``Expect.check`` and ``Frame.answers`` judge answers as documented.

Budgets are modest and derandomized; the module runs in well under 30 s.
"""

from __future__ import annotations

import datetime
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument

from acp_conformance import strategies as acp
from acp_conformance.core import jsonrpc
from acp_conformance.core.connection import Role
from acp_conformance.core.framing import FrameDecoder, RawFrame
from acp_conformance.schema.validator import SchemaValidator
from tests.conftest import SCHEMA_DIRS

_FOUND = next((d for d in SCHEMA_DIRS if (d / "schema.json").is_file()), None)
if _FOUND is None:  # pragma: no cover - environment problem
    pytest.skip("ACP schema not found (run `npm ci`)", allow_module_level=True)
SCHEMA_DIR: Path = _FOUND
DOC: dict[str, Any] = json.loads((SCHEMA_DIR / "schema.json").read_text("utf-8"))
V = SchemaValidator(DOC)

FEW = settings(
    max_examples=6,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much, HealthCheck.data_too_large],
)
SOME = settings(FEW, max_examples=40)


# ------------------------------------------------------------------ judging
def sends(sender: Role, method: str, kind: str) -> bool:
    """May ``sender`` send a ``kind`` frame of ``method`` (per the schema's x-side)?"""
    spec = V.methods[method]
    if kind == "result":
        return spec.response is not None and spec.receiver in (sender, None)
    defn = spec.request if kind == "request" else spec.notification
    return defn is not None and spec.receiver in (sender.other, None)


def one_line(data: bytes) -> bytes:
    dec = FrameDecoder()
    items = dec.feed(data) + dec.feed_eof()
    assert len(items) == 1 and isinstance(items[0], RawFrame), items
    assert not items[0].crlf
    return items[0].data


def problems_of(frame: acp.Frame, sender: Role) -> list[str]:
    """Why ``frame`` is not a valid frame of ``sender`` (empty: valid)."""
    out: list[str] = []
    dec = FrameDecoder()
    items = dec.feed(frame.data) + dec.feed_eof()
    if len(items) != 1 or not isinstance(items[0], RawFrame) or items[0].crlf:
        return [f"framing: {items!r:.200}"]
    msg, bad = jsonrpc.decode(items[0].data)
    if bad or msg is None:
        return [f"decode: {[v.message for v in bad]}"]
    kind, bad = jsonrpc.classify(msg)
    if bad or kind is None:
        return [f"envelope: {[v.message for v in bad]}"]
    rid = msg.get("id")
    if "id" in msg and V.validate("RequestId", rid):
        return [f"id {rid!r} is no RequestId"]
    if isinstance(rid, int) and not -(2**63) <= rid < 2**63:
        return [f"id {rid!r} is beyond the RequestId format int64"]  # formats are not asserted by validators
    if kind in ("request", "notification"):
        method = msg["method"]
        if method.startswith("_"):
            return out
        spec = V.spec(method)
        if spec is None:
            return [f"unknown method {method!r}"]
        if not sends(sender, method, kind):
            return [f"{sender.value} does not send a {method} {kind}"]
        defn = spec.request if kind == "request" else spec.notification
        assert defn is not None
        out += [f"{i.path}: {i.message}" for i in V.validate(defn, msg.get("params", {}))]
    elif "error" in msg:
        out += [f"{i.path}: {i.message}" for i in V.validate("Error", msg["error"])]
    else:
        answered = [m for m, s in V.methods.items() if s.response == frame.definition]
        if not answered or not any(sends(sender, m, "result") for m in answered):
            return [f"{frame.definition!r} is no response {sender.value} sends"]
        out += [f"{i.path}: {i.message}" for i in V.validate(frame.definition, msg["result"])]
    return out


CASES = sorted(
    (role.value, method, kind)
    for role in Role
    for method in V.methods
    for kind in ("request", "notification", "result")
    if sends(role, method, kind)
)


# ------------------------------------------------------------ valid frames
@pytest.mark.parametrize(("sender", "method", "kind"), CASES, ids=lambda x: str(x))
def test_every_valid_frame_validates_against_its_definition(sender: str, method: str, kind: str) -> None:
    role = Role(sender)

    @FEW
    @given(acp.frames(method=method, sender=sender, kinds=[kind], schema=DOC))
    def check(frame: acp.Frame) -> None:
        assert frame.valid and frame.kind == kind and frame.method == (None if kind == "result" else method)
        assert problems_of(frame, role) == [], frame.describe()
        assert json.loads(one_line(frame.data)) == frame.message

    check()


@pytest.mark.parametrize("sender", ["agent", "client"])
def test_unusual_valid_frames_validate(sender: str) -> None:
    role = Role(sender)
    seen: set[str] = set()

    @SOME
    @given(acp.frames(sender=sender, unusual=True, schema=DOC, huge_bytes=64 * 1024))
    def check(frame: acp.Frame) -> None:
        seen.add(frame.mutation)
        assert frame.valid
        assert problems_of(frame, role) == [], frame.describe()

    check()
    assert len(seen) >= 4, seen


@SOME
@given(acp.frames(sender="client", kinds=["request"], meta="always", schema=DOC))
def test_meta_always_puts_meta_on_every_object_that_allows_it(frame: acp.Frame) -> None:
    params = frame.message["params"]
    assert isinstance(params.get("_meta"), dict)
    if frame.method == "session/prompt":
        for block in params["prompt"]:
            assert isinstance(block.get("_meta"), dict), block


@FEW
@given(
    acp.requests(
        "session/new",
        overrides={"cwd": st.just("/work/here"), "mcpServers": st.just([]), "SessionId": st.just("s-1")},
        schema=DOC,
    ),
    acp.requests("session/prompt", overrides={"SessionId": st.just("s-1")}, schema=DOC),
)
def test_overrides_replace_definitions_and_members(new: dict[str, Any], prompt: dict[str, Any]) -> None:
    assert new["params"]["cwd"] == "/work/here" and new["params"]["mcpServers"] == []
    assert prompt["params"]["sessionId"] == "s-1"


@FEW
@given(acp.from_definition("ContentBlock", schema=DOC), acp.errors(schema=DOC), acp.json_values())
def test_building_blocks_are_valid(block: Any, error: dict[str, Any], value: Any) -> None:
    assert V.validate("ContentBlock", block) == []
    assert V.validate("Error", error["error"]) == []
    assert json.loads(json.dumps(value)) == value or value != value  # NaN never appears, but stay total


# ---------------------------------------------------------- invalid frames
@pytest.mark.parametrize("sender", ["agent", "client"])
def test_invalid_frames_are_invalid_and_labelled(sender: str) -> None:
    role = Role(sender)
    seen: set[str] = set()

    @settings(SOME, max_examples=80)
    @given(acp.invalid_frames(sender=sender, schema=DOC, huge_bytes=64 * 1024))
    def check(frame: acp.Frame) -> None:
        seen.add(frame.mutation)
        assert not frame.valid and frame.mutation in acp.INVALID_MUTATIONS
        if frame.mutation == "deep-nesting":
            # Beyond what parsers promise: our decoder may refuse it, and that is the point.
            assert frame.message is None and frame.expect.null_id_ok
            return
        if frame.mutation == "surrogates":
            assert b"\\ud" in frame.data.lower() or b"\\udc" in frame.data.lower()
            return
        if frame.mutation == "stray-response":
            # Well-formed, but it answers a request the receiver never sent.
            assert frame.kind in ("result", "error") and frame.expect.answer == "optional"
            return
        if frame.mutation == "duplicate-id":
            first, second = frame.data.splitlines()
            assert json.loads(first)["id"] == json.loads(second)["id"]
            return
        if frame.mutation == "envelope" and frame.detail == "an unknown envelope member":
            # JSON-RPC 2.0 lists the members and forbids no others: an odd frame, not a wrong one,
            # and what it expects of the receiver says so (any answer; a notification, none).
            assert frame.expect.answer != "forbidden" or frame.kind == "notification"
            return
        assert problems_of(frame, role) != [], frame.describe()
        if frame.expect.clause == "jsonrpc.invalid-params":
            assert frame.kind == "request" and frame.expect.codes and acp.INVALID_PARAMS in frame.expect.codes
        if frame.mutation == "unknown-method":
            assert frame.method not in V.methods and not frame.method.startswith("_")
            assert frame.expect.answer == ("forbidden" if frame.kind == "notification" else "required")

    check()
    assert len(seen) >= 4, seen  # a mix; each family is drawn on its own below


#: A family that has nothing to mutate in the drawn message falls back to another one.
FALLBACK = {"unknown-enum": "wrong-type"}


@pytest.mark.parametrize("sender", ["agent", "client"])
@pytest.mark.parametrize("mutation", sorted(acp.INVALID_MUTATIONS))
def test_every_invalid_mutation_family_is_drawn_and_labelled(sender: str, mutation: str) -> None:
    """Asked for one family, the strategy draws frames of that family (or its documented fallback),
    each invalid: counting the families a mixed draw happens to reach proves nothing stable."""
    labels: set[str] = set()

    @settings(FEW, max_examples=10)
    @given(acp.invalid_frames(sender=sender, schema=DOC, huge_bytes=64 * 1024, mutations=[mutation]))
    def check(frame: acp.Frame) -> None:
        assert not frame.valid
        labels.add(frame.mutation)

    check()
    assert labels and labels <= {mutation, FALLBACK.get(mutation, mutation)}, labels


def test_huge_arrays_are_many_items_not_many_megabytes() -> None:
    """An array of long items repeated tens of thousands of times was a 200 MB frame (a CI run spent
    35 minutes shrinking one): the count gives way to a bound of a few huge_bytes."""
    huge, seen = 64 * 1024, []
    servers = [{"name": "x" * 3000, "command": "/bin/true", "args": [], "env": []}] * 2

    @settings(SOME, max_examples=20)
    @given(
        acp.frames(
            method="session/new",
            sender="client",
            kinds=["request"],
            unusual=True,
            mutations=["huge-array"],
            huge_bytes=huge,
            overrides={"mcpServers": st.just(servers)},
            schema=DOC,
        )
    )
    def check(frame: acp.Frame) -> None:
        if frame.mutation == "huge-array":
            seen.append(frame.detail)
            assert len(frame.data) <= 5 * huge + 16 * 1024, (len(frame.data), frame.detail)
            assert problems_of(frame, Role.CLIENT) == [], frame.describe()

    check()
    assert seen


@SOME
@given(acp.invalid_frames(sender="client", mutations=["missing-required", "wrong-type"], schema=DOC))
def test_top_level_params_mutations_expect_invalid_params(frame: acp.Frame) -> None:
    if frame.expect.clause != "jsonrpc.invalid-params":
        return  # a nested mutation: any answer will do
    msg = frame.message
    spec = V.spec(msg["method"])
    assert spec is not None and spec.request is not None
    assert V.validate(spec.request, msg.get("params", {})) != []


# --------------------------------------------------------------- byte damage
@SOME
@given(acp.byte_damage(sender="client", schema=DOC, huge_bytes=64 * 1024))
def test_byte_damage_does_what_it_says(frame: acp.Frame) -> None:
    assert frame.mutation in acp.BYTE_DAMAGE or frame.kind == "request"
    assert b"".join(frame.writes) == frame.data
    if frame.mutation == "crlf":
        assert frame.data.endswith(b"\r\n")
    elif frame.mutation == "bom":
        assert frame.data.startswith(b"\xef\xbb\xbf")
    elif frame.mutation in ("nul", "invalid-utf8", "truncated", "garbage", "not-json-text", "huge-line"):
        line = frame.data.rstrip(b"\r\n")
        parsed = jsonrpc.decode(line)[0] if line.strip() else None
        if frame.expect.clause == "jsonrpc.parse-error":
            assert parsed is None, frame.describe()
        if frame.mutation == "huge-line":
            assert len(frame.data) > 64 * 1024
    elif frame.mutation == "blank":
        assert not frame.data.strip()


@SOME
@given(st.binary(max_size=300), st.data())
def test_chunkings_partition_the_bytes(data: bytes, draw: st.DataObject) -> None:
    chunks = draw.draw(acp.chunkings(data, max_chunks=5))
    assert b"".join(chunks) == data and all(chunks) and len(chunks) <= 5
    assert [a + b for a, b in acp.every_split(data)] == [data] * max(0, len(data) - 1)


# ------------------------------------------------------------ eager checks
@pytest.mark.parametrize(
    "build",
    [
        lambda: acp.requests("session/no_such", schema=DOC),
        lambda: acp.requests("session/update", schema=DOC),  # a notification, not a request
        lambda: acp.requests("fs/read_text_file", sender="client", schema=DOC),  # the agent sends it
        lambda: acp.notifications("session/update", sender="client", schema=DOC),
        lambda: acp.frames(sender="editor", schema=DOC),
        lambda: acp.frames(kinds=["request", "batch"], schema=DOC),
        lambda: acp.frames(kinds="request", schema=DOC),
        lambda: acp.frames(meta="often", schema=DOC),
        lambda: acp.frames(valid="yes", schema=DOC),  # type: ignore[arg-type]
        lambda: acp.frames(mutations=["wrong-type"], schema=DOC),  # invalid family for valid frames
        lambda: acp.invalid_frames(mutations=["no-such-mutation"], schema=DOC),
        lambda: acp.frames(max_items=-1, schema=DOC),
        lambda: acp.frames(huge_bytes=0, schema=DOC),
        lambda: acp.from_definition("NoSuchDefinition", schema=DOC),
        lambda: acp.from_definition("ContentBlock", overrides={"NoSuchThing": st.just(1)}, schema=DOC),
        lambda: acp.from_definition("ContentBlock", overrides={"text": "hello"}, schema=DOC),  # type: ignore[dict-item]
        lambda: acp.requests("session/new", id=7, schema=DOC),  # type: ignore[arg-type]
        lambda: acp.requests("session/new", schema={"no": "defs"}),
        lambda: acp.byte_damage(kinds=["gremlins"]),
        lambda: acp.chunkings("text"),  # type: ignore[arg-type]
        lambda: acp.chunkings(b"abc", max_chunks=0),
        lambda: acp.text(max_size=0),
        lambda: acp.json_values(max_leaves=0),
        lambda: acp.request_ids(unusual=1),  # type: ignore[arg-type]
    ],
)
def test_bad_arguments_raise_invalid_argument_at_once(build: Any) -> None:
    with pytest.raises(InvalidArgument):
        build()


# --------------------------------------------------------------- judging answers
def err(code: int, rid: Any = 1) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "error": {"code": code, "message": "m"}}


def test_expect_check_and_answers() -> None:
    frame = acp.Frame(
        data=b"x\n",
        message={},
        kind="request",
        id=1,
        expect=acp.Expect("required", frozenset({-32602}), result_ok=False, clause="jsonrpc.invalid-params"),
    )
    responses = [err(-32602, 1), err(-32601, 2), {"jsonrpc": "2.0", "id": "1", "result": {}}]
    assert frame.answers(responses) == [responses[0]]
    assert frame.expect.check(frame.answers(responses)) == []
    assert [p.clause for p in frame.expect.check([err(-32603)])] == ["jsonrpc.invalid-params"]
    assert [p.clause for p in frame.expect.check([{"id": 1, "result": {}}])] == ["jsonrpc.invalid-params"]
    assert [p.clause for p in frame.expect.check([])] == ["jsonrpc.every-request-answered"]
    assert [p.clause for p in frame.expect.check([err(-32602, None)])] == ["jsonrpc.response-id-echo"]
    # 1.0 and 1 are one JSON number; "1" is not.
    assert acp.Frame(b"", {}, "request", id=1.0).answers([err(1, 1)]) == [err(1, 1)]
    note = acp.Frame(b"", {}, "notification", expect=acp.Expect("forbidden", clause="jsonrpc.notification-no-response"))
    assert [p.clause for p in note.expect.check(note.answers([err(-32600, None)]))] == [
        "jsonrpc.notification-no-response"
    ]
    assert note.expect.check(note.answers([err(-32600, 5)])) == []


def test_encode_survives_what_orjson_refuses() -> None:
    assert json.loads(acp.encode({"s": "\ud800", "n": 2**70})) == {"s": "\ud800", "n": 2**70}
    assert acp.encode({"a": 1}) == b'{"a":1}\n'


def _drawn(strategy: st.SearchStrategy[Any], n: int) -> list[str]:
    out: list[str] = []

    @seed(0)
    @settings(
        max_examples=n, database=None, deadline=None, phases=[Phase.generate], suppress_health_check=list(HealthCheck)
    )
    @given(strategy)
    def draw(value: Any) -> None:
        out.append(json.dumps(value, sort_keys=True))

    draw()
    return out


def test_a_seed_draws_the_same_values_every_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """The default seed promises the same frames in every run (docs/fuzzing.md), so a replay is the
    example reported: nothing drawn may depend on the clock (Faker's dates end "now" by default,
    so the second draw runs with Faker's clock a day later)."""
    from faker.providers import date_time

    annotations = acp.from_definition("Annotations")
    first = _drawn(annotations, 60)

    class Tomorrow(datetime.datetime):
        @classmethod
        def now(cls, tz: datetime.tzinfo | None = None) -> Tomorrow:
            t = datetime.datetime.now(tz) + datetime.timedelta(days=1)
            return cls.fromtimestamp(t.timestamp(), tz)

    monkeypatch.setattr(date_time, "datetime", Tomorrow)
    again = _drawn(annotations, 60)
    assert any('"lastModified": "' in a for a in first), "no timestamp drawn: the test proves nothing"
    assert first == again


def test_the_fakers_with_few_providers_say_what_full_ones_would() -> None:
    """``_text`` makes its Fakers with only the providers it calls (a full one costs up to 0.2 s
    per locale): every call it makes must exist in each locale and give, for a seed, the text a
    Faker with every provider gives, so a seed keeps drawing the frames it drew before."""
    from faker import Faker

    from acp_conformance.fuzz import _text

    calls = (
        lambda f: f.sentence(nb_words=8),
        lambda f: f.word(),
        lambda f: f.file_path(depth=3, absolute=True),
        lambda f: f.user_name(),
        lambda f: f.uri(),
        lambda f: f.mime_type(),
        lambda f: f.iso8601(end_datetime=_text._DATES_END),
        lambda f: f.catch_phrase() if f.locales[0] == "en_US" else f.word(),
        lambda f: f.paragraph(nb_sentences=3),
    )
    for seed_ in range(3 * len(_text._LOCALES)):
        few = _text._faker(seed_)
        full = Faker(few.locales[0])
        for call in calls:
            full.seed_instance(seed_)
            expected = call(full)
            assert call(_text._faker(seed_)) == expected, (few.locale, seed_)
