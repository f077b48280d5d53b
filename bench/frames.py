"""Per-frame costs, in process: framing, decode + classify, serialization, validation.

Three typical frames (the shapes the mock agent and the suite's client send):

* ``update``: a ``session/update`` ``agent_message_chunk`` (agent -> client), ~250 bytes;
* ``prompt``: a ``session/prompt`` request with one text block (client -> agent);
* ``tool_call``: a ``session/update`` ``tool_call`` with a location and raw input.

Each operation is timed with ``timeit`` (``repeat`` runs of an auto-ranged count); the table
shows the median and best of the runs, in microseconds per frame.  python-jsonschema is
timed on the same definitions for comparison, and the full ``Peer`` paths (inbound:
framing -> event -> transcript -> validation -> dispatch; outbound: validation ->
serialization -> transcript -> transport) are timed with validation on and off.
"""

from __future__ import annotations

import json
import time
import timeit
from collections.abc import Callable
from typing import Any

import orjson

from bench.common import summarize

SID = "sess_001_1a2b3c4d"
PROBE = "/tmp/acp-bench-sandbox/session-1/acp-probe.txt"

PARAMS: dict[str, dict[str, Any]] = {
    "update": {
        "sessionId": SID,
        "update": {
            "sessionUpdate": "agent_message_chunk",
            "content": {"type": "text", "text": "chunk 00042 of the streamed reply "},
            "messageId": f"{SID}-agent-2",
        },
    },
    "prompt": {
        "sessionId": SID,
        "prompt": [{"type": "text", "text": "Hello! Please reply with a short greeting."}],
    },
    "tool_call": {
        "sessionId": SID,
        "update": {
            "sessionUpdate": "tool_call",
            "toolCallId": "call_001",
            "title": "Write acp-probe.txt",
            "kind": "edit",
            "status": "pending",
            "locations": [{"path": PROBE, "line": 1}],
            "rawInput": {"path": PROBE, "content": "hello from the mock agent\n"},
        },
    },
}
METHOD = {"update": "session/update", "prompt": "session/prompt", "tool_call": "session/update"}
DEFINITION = {"update": "SessionNotification", "prompt": "PromptRequest", "tool_call": "SessionNotification"}


def message(kind: str, rid: int = 7) -> dict[str, Any]:
    msg: dict[str, Any] = {"jsonrpc": "2.0", "method": METHOD[kind], "params": PARAMS[kind]}
    if kind == "prompt":
        msg = {"jsonrpc": "2.0", "id": rid, "method": METHOD[kind], "params": PARAMS[kind]}
    return msg


def line(kind: str) -> bytes:
    return orjson.dumps(message(kind)) + b"\n"


# ------------------------------------------------------------------ timing
def per_call_us(fn: Callable[[], Any], repeat: int, min_time: float, frames_per_call: int = 1) -> dict[str, Any]:
    """µs per frame of ``fn`` (which handles ``frames_per_call`` frames per call)."""
    timer = timeit.Timer(fn)
    number = 1
    while True:
        t = timer.timeit(number)
        if t >= min_time or number >= 10_000_000:
            break
        number = max(number * 2, int(number * min_time / max(t, 1e-9) * 1.1))
    runs = [timer.timeit(number) / number / frames_per_call * 1e6 for _ in range(repeat)]
    out = summarize(runs, higher_is_better=False)
    out["number"] = number
    return out


async def _peer_path_us(kind: str, validator: Any, n: int, direction: str) -> float:
    """µs per frame through ``Peer`` (the mocks' and the suite's endpoint), in or out."""
    from acp_conformance.core.connection import Role
    from acp_conformance.peer import Peer

    class NullTransport:
        async def send(self, data: bytes) -> None:
            return None

        async def receive(self) -> bytes:
            import anyio

            await anyio.sleep_forever()
            return b""

        async def close_output(self) -> None:
            return None

        async def aclose(self) -> None:
            return None

    role = Role.CLIENT if direction == "in" else Role.AGENT
    peer = Peer(NullTransport(), role, validator=validator)
    data = line(kind)
    params = PARAMS[kind]
    async with peer:
        if direction == "in":
            dispatch = peer._dispatch  # what Peer._reader does with every chunk it reads
            receive = peer.conn.receive_data
            t0 = time.perf_counter()
            for _ in range(n):
                dispatch(receive(data))
            elapsed = time.perf_counter() - t0
        else:
            t0 = time.perf_counter()
            for _ in range(n):
                await peer.notify(METHOD[kind], params)
            elapsed = time.perf_counter() - t0
        peer._tg.cancel_scope.cancel()  # type: ignore[union-attr]
    if direction == "in" and any(True for _ in peer.violations()):
        raise RuntimeError(f"the {kind} frame raised violations: {peer.violations()[:1]}")
    return elapsed / n * 1e6


def peer_path_us(kind: str, validator: Any, n: int, repeat: int, direction: str) -> dict[str, Any]:
    import anyio

    runs = [anyio.run(_peer_path_us, kind, validator, n, direction) for _ in range(repeat)]
    out = summarize(runs, higher_is_better=False)
    out["number"] = n
    return out


# ------------------------------------------------------------------ the section
def run_frames(repeat: int, quick: bool) -> dict[str, Any]:
    from acp_conformance.core import jsonrpc
    from acp_conformance.core.connection import Connection, Role
    from acp_conformance.core.framing import FrameDecoder
    from acp_conformance.schema import locate_schema
    from acp_conformance.schema.validator import SchemaValidator

    min_time = 0.01 if quick else 0.03
    source = locate_schema()
    validator = SchemaValidator(source.data)
    results: dict[str, Any] = {"frames": {}, "schema": source.describe()}
    try:
        from jsonschema import Draft202012Validator
    except ImportError:  # pragma: no cover - it is a dependency
        Draft202012Validator = None

    for kind in ("update", "prompt", "tool_call"):
        data = line(kind)
        body = data[:-1]
        msg = message(kind)
        params = PARAMS[kind]
        defn = DEFINITION[kind]
        ops: dict[str, dict[str, Any]] = {}
        # Framing: one frame per read (the worst case), and 100 frames per read.
        dec = FrameDecoder()
        ops["framing (1 frame per read)"] = per_call_us(lambda d=dec, x=data: d.feed(x), repeat, min_time)
        batch = data * 100
        dec2 = FrameDecoder()
        ops["framing (100 frames per read)"] = per_call_us(
            lambda d=dec2, x=batch: d.feed(x), repeat, min_time, frames_per_call=100
        )

        def decode_classify(b: bytes = body) -> Any:
            value, _ = jsonrpc.decode(b)
            return jsonrpc.classify(value, b)

        ops["decode + classify"] = per_call_us(decode_classify, repeat, min_time)
        if kind == "prompt":
            # Unique ids: the core tracks the peer's outstanding requests.
            frames = [orjson.dumps(message(kind, rid=i)) + b"\n" for i in range(200_000 if not quick else 20_000)]
            state = {"i": 0, "conn": Connection(Role.AGENT)}

            def core_in(frames: list[bytes] = frames, state: dict[str, Any] = state) -> Any:
                i = state["i"]
                if i == len(frames):  # out of prepared ids: a fresh connection (rare, amortized)
                    state["conn"], i = Connection(Role.AGENT), 0
                state["i"] = i + 1
                return state["conn"].receive_data(frames[i])

            ops["core inbound (Connection.receive_data)"] = per_call_us(core_in, repeat, min_time)
        else:
            conn = Connection(Role.CLIENT)
            ops["core inbound (Connection.receive_data)"] = per_call_us(
                lambda c=conn, x=data: c.receive_data(x), repeat, min_time
            )
        ops["serialize (orjson, as Connection.send_*)"] = per_call_us(
            lambda m=msg: jsonrpc.dumps(m) + b"\n", repeat, min_time
        )
        validator.validate(defn, params)  # compile outside the clock (done once per definition)
        ops["VALIDATION: SchemaValidator.validate (jsonschema-rs)"] = per_call_us(
            lambda d=defn, p=params: validator.validate(d, p), repeat, min_time
        )
        if Draft202012Validator is not None:
            ref = Draft202012Validator({"$ref": f"#/$defs/{defn}", "$defs": source.data["$defs"]})
            if not ref.is_valid(params):
                raise RuntimeError(f"python-jsonschema rejects the {kind} frame")
            ops["python-jsonschema Draft 2020-12 is_valid (reference)"] = per_call_us(
                lambda r=ref, p=params: r.is_valid(p), max(3, repeat // 2), min_time
            )
        ops["stdlib json loads + dumps (reference)"] = per_call_us(
            lambda b=body: json.dumps(json.loads(b), separators=(",", ":")), repeat, min_time
        )
        ops["orjson loads + dumps (reference)"] = per_call_us(
            lambda b=body: orjson.dumps(orjson.loads(b)), repeat, min_time
        )
        n = 2_000 if quick else 5_000
        if kind != "prompt":
            # Interleaved on/off, so a drift of the machine hits both alike.
            for direction, what in (("in", "Peer inbound"), ("out", "Peer outbound notify")):
                on: list[float] = []
                off: list[float] = []
                for _ in range(repeat):
                    on += peer_path_us(kind, validator, n, 1, direction)["values"]
                    off += peer_path_us(kind, None, n, 1, direction)["values"]
                ops[f"{what}, validation on"] = {**summarize(on, higher_is_better=False), "number": n}
                ops[f"{what}, validation off"] = {**summarize(off, higher_is_better=False), "number": n}
        results["frames"][kind] = {"bytes": len(data), "ops_us": ops}
    worst = max(
        (
            f["ops_us"]["VALIDATION: SchemaValidator.validate (jsonschema-rs)"]["median"]
            for f in results["frames"].values()
        ),
        default=None,
    )
    results["validation_worst_median_us"] = worst
    return results
