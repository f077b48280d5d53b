"""What a fuzzed frame sent to a client under test may touch: nothing outside the session directory.

A client under test runs on the developer's machine: a ``terminal/create`` it serves runs a real
program, an ``fs/write_text_file`` writes a real file.  The client campaigns therefore draw every
frame with ``SAFE_OVERRIDES`` (paths in the session directory, one harmless command) and send only
frames ``client_safe`` accepts; ``tests/property/test_client_fuzz_safety.py`` proves the overrides
cover every member a new schema revision could add.
"""

from __future__ import annotations

from pathlib import PurePosixPath
from typing import Any

from hypothesis import strategies as st
from hypothesis.strategies import SearchStrategy

from acp_conformance.fuzz._expect import Frame
from acp_conformance.fuzz.campaign import LIVE_CWD, LIVE_SESSION

__all__ = [
    "FUZZ_PATHS",
    "NEVER_SENT",
    "PROBE_FILE",
    "PROBE_TEXT",
    "READ_FILE",
    "SAFE_ARG",
    "SAFE_COMMAND",
    "SAFE_OVERRIDES",
    "client_safe",
    "messages_of",
]

#: The only program a fuzzed ``terminal/create`` may run, and its only argument.
SAFE_COMMAND = "true"
SAFE_ARG = "acp-fuzz"
#: Files in the session directory: one the probes read (never a fuzz target), and the fuzz targets.
PROBE_FILE = "acp-fuzz-probe.txt"
PROBE_TEXT = "acp fuzz probe\n"
READ_FILE = "acp-fuzz-read.txt"
FUZZ_PATHS = (f"{LIVE_CWD}/{READ_FILE}", f"{LIVE_CWD}/acp-fuzz-write.txt", f"{LIVE_CWD}/acp-fuzz-missing.txt")
#: Never sent: a client may open a URL or wait for a person.
NEVER_SENT = frozenset({"elicitation/create"})

#: Overrides for the frame strategies: every member through which a frame could reach outside the
#: session directory gets a value that cannot (tests/property/test_client_fuzz_safety.py).
SAFE_OVERRIDES: dict[str, SearchStrategy[Any]] = {
    "SessionId": st.just(LIVE_SESSION),
    "path": st.sampled_from(FUZZ_PATHS),
    "command": st.just(SAFE_COMMAND),
    "args": st.sampled_from([[SAFE_ARG], []]),
    "cwd": st.just(LIVE_CWD),
    "env": st.just([]),
}


def _in_sandbox(path: Any) -> bool:
    if not isinstance(path, str) or "\x00" in path or not path.startswith(LIVE_CWD + "/"):
        return False
    return ".." not in PurePosixPath(path).parts


def messages_of(frame: Frame) -> list[dict[str, Any]]:
    m = frame.message
    if isinstance(m, dict):
        return [m]
    if isinstance(m, list):
        return [x for x in m if isinstance(x, dict)]
    return []


def client_safe(frame: Frame) -> bool:
    """Only frames that touch nothing outside the session directory (see the module docstring)."""
    if any(m.encode() in frame.data for m in NEVER_SENT):
        return False
    for msg in messages_of(frame):
        params = msg.get("params")
        if not isinstance(params, dict):
            continue
        method = msg.get("method")
        if isinstance(method, str) and method.startswith("fs/"):
            path = params.get("path")
            if path is not None and not _in_sandbox(path):
                return False
        if method == "terminal/create":
            command, args, cwd, env = (params.get(k) for k in ("command", "args", "cwd", "env"))
            if isinstance(command, str) and command != SAFE_COMMAND:
                return False
            if isinstance(args, list) and any(not (a == SAFE_ARG or not isinstance(a, str)) for a in args):
                return False
            if isinstance(cwd, str) and cwd != LIVE_CWD:
                return False
            if isinstance(env, list) and env:
                return False
    return True
