"""The client fuzz campaigns keep their promises before any client sees a frame.

* every *valid* frame the campaigns draw (with their overrides) passes the
  safety filter: the overrides cover every member through which a frame could
  reach outside the session directory, so a new schema revision that adds one
  fails here rather than silently starving a campaign (the campaigns suppress
  Hypothesis's filter health checks);
* what the filter lets through stays inside the session directory;
* the reference client's params check (``mock_client.strict.REQUIRED``) is
  exactly the schema's ``required`` lists for the requests an agent sends a
  client, and it refuses every invalid-params frame the campaign can draw.
"""

from __future__ import annotations

import json
from pathlib import PurePosixPath
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

from acp_conformance import strategies as acp
from acp_conformance.core.events import Request
from acp_conformance.fuzz.campaign import LIVE_CWD
from acp_conformance.fuzz.client_safety import SAFE_ARG, SAFE_COMMAND, SAFE_OVERRIDES, client_safe
from acp_conformance.peer import HandlerError
from mock_client.strict import REQUIRED, check_params
from tests.conftest import SCHEMA_DIRS

_FOUND = next((d for d in SCHEMA_DIRS if (d / "schema.json").is_file()), None)
if _FOUND is None:  # pragma: no cover - environment problem
    pytest.skip("ACP schema not found (run `npm ci`)", allow_module_level=True)
DOC: dict[str, Any] = json.loads((_FOUND / "schema.json").read_text("utf-8"))

SOME = settings(
    max_examples=40,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much, HealthCheck.data_too_large],
)


@SOME
@given(acp.frames(sender="agent", kinds=["request", "notification"], overrides=SAFE_OVERRIDES))
def test_valid_frames_pass_the_safety_filter(frame: acp.Frame) -> None:
    assert client_safe(frame) or frame.method == "elicitation/create", frame.describe()


@SOME
@given(
    acp.frames(sender="agent", kinds=["request"], valid=None, unusual=True, overrides=SAFE_OVERRIDES).filter(
        client_safe
    )
)
def test_what_the_filter_lets_through_stays_in_the_sandbox(frame: acp.Frame) -> None:
    msg = frame.message
    if not isinstance(msg, dict) or not isinstance(msg.get("params"), dict):
        return
    params, method = msg["params"], msg.get("method")
    if method in ("fs/read_text_file", "fs/write_text_file") and "path" in params:
        path = params["path"]
        assert path is None or (isinstance(path, str) and path.startswith(LIVE_CWD + "/")), frame.describe()
        assert path is None or ".." not in PurePosixPath(path).parts
    if method == "terminal/create":
        assert params.get("command") in (SAFE_COMMAND, None) or not isinstance(params.get("command"), str)
        args = params.get("args")
        assert not isinstance(args, list) or all(a == SAFE_ARG or not isinstance(a, str) for a in args)
        assert not isinstance(params.get("env"), list) or not params["env"]


def test_reference_client_requires_what_the_schema_requires() -> None:
    defs = DOC["$defs"]
    by_method = {
        m["x-method"]: name
        for name, m in defs.items()
        if isinstance(m, dict) and m.get("x-side") == "client" and name.endswith("Request") and "x-method" in m
    }
    served = {m: by_method[m] for m in REQUIRED}
    for method, name in served.items():
        assert sorted(REQUIRED[method]) == sorted(defs[name].get("required", [])), method


@SOME
@given(
    acp.invalid_frames(
        sender="agent", kinds=["request"], mutations=["missing-required", "wrong-type", "params-not-object"]
    ).filter(lambda f: f.expect.clause == "jsonrpc.invalid-params" and f.method in REQUIRED)
)
def test_reference_client_refuses_every_invalid_params_frame(frame: acp.Frame) -> None:
    msg = frame.message
    req = Request(id=msg.get("id"), method=msg["method"], params=msg.get("params"), raw=frame.data, message=msg)
    with pytest.raises(HandlerError) as info:
        check_params(req)
    assert info.value.code == -32602
