"""terminal/*: a client advertising terminal runs real commands and manages their lifecycle."""

from __future__ import annotations

import os
import select
import shlex
import signal
from pathlib import Path
from typing import Any

import anyio
import pytest

from acp_conformance._proctree import pidfd, signal_if_same, stat
from acp_conformance.core.events import Response
from acp_conformance.endpoints.agent import PromptTurn
from acp_conformance.errors import PeerError
from acp_conformance.harness.client import ClientConnection, ClientHarness
from acp_conformance.results import Status
from acp_conformance.suite._support import check_or_stop
from acp_conformance.suite.client._helpers import (
    advertised,
    first_turn,
    inconclusive,
    not_applicable,
    probe_path,
    require,
    session_dir,
)

pytestmark = pytest.mark.anyio

#: Seconds a long-running probe command lasts at most; every check finishes well before.
LONG = 60
#: The file whose appearance lets the held command of ``test_terminal_kill_keeps_the_id`` finish
#: (its name is in the command line; the broken clients of its proofs recognise it by it).
RELEASE_FILE = ".acp-conformance-release"


async def _terminal_turn(acp: ClientHarness, conn: ClientConnection) -> PromptTurn:
    turn = await first_turn(acp, conn)
    if not advertised(conn, "terminal"):
        await turn.end()
        not_applicable("the client does not advertise the terminal capability")
    return turn


def _created_tid(created: Response) -> str:
    """The terminal id ``terminal/create`` answered with.  Without one the test stops INCONCLUSIVE:
    a client may refuse a command (its policy, its sandbox), no clause makes it run ours, and a
    result without a terminalId is the schema's breach (``schema.valid``), not this test's."""
    tid = _tid(created)
    if not isinstance(tid, str):
        got = f"error {created.error!r}" if created.is_error else f"result {created.result!r}"
        inconclusive(f"terminal/create gave no terminal id ({got}): the terminal clauses here are not judged")
    return tid


def _tid(resp: Response) -> Any:
    return resp.result.get("terminalId") if isinstance(resp.result, dict) else None


def _exit_status_ok(status: Any) -> bool:
    if not isinstance(status, dict):
        return False
    code, sig = status.get("exitCode"), status.get("signal")
    code_ok = code is None or (isinstance(code, int) and not isinstance(code, bool) and code >= 0)
    return code_ok and (sig is None or isinstance(sig, str))


def _printed(output: Any, line: str) -> bool:
    """``output`` holds ``line`` as a line of its own.  A client running the command in a
    pseudo-terminal hands back what the terminal made of it: "\\r\\n" line ends (the terminal's
    output processing), which the docs leave to the client."""
    return isinstance(output, str) and line in output.replace("\r\n", "\n").split("\n")


@pytest.mark.acp_clause("term.wait", "term.output.shape", "term.exit-status.shape", "term.release.invalidates")
async def test_terminal_runs_a_command(acp_client: ClientHarness) -> None:
    """create -> wait_for_exit (exit code 3) -> output ("hello", exitStatus) -> release -> the id is gone."""
    require(acp_client, "prompt")
    async with acp_client.connect() as conn:
        turn = await _terminal_turn(acp_client, conn)
        cwd = str(session_dir(conn, turn))
        created = await turn.create_terminal("sh", ["-c", "printf 'hello\\n'; exit 3"], cwd=cwd)
        tid = _created_tid(created)
        waited = await turn.terminal("wait_for_exit", tid)
        status = waited.result if isinstance(waited.result, dict) else None
        acp_client.check(
            "term.exit-status.shape",
            _exit_status_ok(status),
            "exitCode a non-negative integer or null and signal a string or null",
            f"error {waited.error!r}" if waited.is_error else f"result {waited.result!r}",
        )
        acp_client.check(
            "term.wait",
            status is not None and status.get("exitCode") == 3,
            "wait_for_exit to return once the command exited, with its exit code 3",
            f"result {waited.result!r}",
        )
        out = await turn.terminal("output", tid)
        result = out.result if isinstance(out.result, dict) else {}
        acp_client.check(
            "term.output.shape",
            _printed(result.get("output"), "hello")
            and result.get("truncated") is False
            and isinstance(result.get("exitStatus"), dict)
            and result["exitStatus"].get("exitCode") == 3,
            'output holding the line "hello" (a terminal may end it with \\r\\n), truncated false and the '
            "exitStatus of the exited command",
            f"error {out.error!r}" if out.is_error else f"result {out.result!r}",
        )
        released = await turn.terminal("release", tid)
        check_or_stop(
            acp_client,
            "term.release.invalidates",
            not released.is_error,
            "terminal/release to succeed",
            f"error {released.error!r}",
        )
        for method in ("output", "wait_for_exit"):
            after = await turn.terminal(method, tid)
            acp_client.check(
                "term.release.invalidates",
                after.is_error,
                f"terminal/{method} on a released terminalId to be rejected with an error",
                f"result {after.result!r}",
            )
        await turn.end()


@pytest.mark.acp_clause(
    "term.create.immediate", "term.output.shape", "term.kill.keeps-id", "jsonrpc.every-request-answered"
)
async def test_terminal_kill_keeps_the_id(acp_client: ClientHarness) -> None:
    """A long command: create answers at once; output has no exitStatus yet; kill stops it and the id still
    works for output and wait_for_exit."""
    require(acp_client, "prompt")
    async with acp_client.connect() as conn:
        turn = await _terminal_turn(acp_client, conn)
        limit = min(acp_client.config.timeout, 10.0)
        # The command runs until we let it finish (the file appears), LONG s at most: a create that
        # waits for the command is told from a slow one by letting it finish and seeing the answer
        # come only then, never from the clock alone.
        release = probe_path(conn, turn, RELEASE_FILE)
        held = f"[ ! -e {shlex.quote(str(release))} ] && [ $i -lt {LONG * 10} ]"
        script = f"echo started; i=0; while {held}; do sleep 0.1; i=$((i+1)); done"
        params = {"sessionId": turn.session_id, "command": "sh", "args": ["-c", script]}
        rid = await conn.peer.send_request("terminal/create", params)
        created = await _response_within(conn, rid, 2 * limit)
        if created is None:
            release.touch()
            try:
                # Flagged: three deadlines after it went out, no answer at all is one left unanswered.
                await conn.peer.wait_response(rid, method="terminal/create", timeout=limit)
            except PeerError:
                inconclusive(
                    f"no answer to terminal/create within {2 * limit:g} s while the command ran, nor within "
                    f"{limit:g} s after it was let finish: not shown to wait for the command"
                )
            acp_client.check(
                "term.create.immediate",
                False,
                f"a terminalId while the command runs (it ran {2 * limit:g} s, until we let it finish)",
                "the answer came only after the command was let finish: terminal/create waited for it",
            )
            # A SHOULD: the check records its WARN and the test goes on, but the command has ended.
            inconclusive("the terminal id came only once the command had ended: its output and kill not judged")
        tid = _created_tid(created)
        acp_client.check("term.create.immediate", True, "a terminalId while the command runs", "")
        out = await turn.terminal("output", tid)
        result = out.result if isinstance(out.result, dict) else {}
        acp_client.check(
            "term.output.shape",
            not out.is_error
            and isinstance(result.get("output"), str)
            and isinstance(result.get("truncated"), bool)
            and result.get("exitStatus") is None,
            "output and truncated, and no exitStatus while the command is still running",
            f"error {out.error!r}" if out.is_error else f"result {out.result!r}",
        )
        killed = await turn.terminal("kill", tid)
        if killed.is_error:
            release.touch()  # the command ends by itself, as it was not killed
        check_or_stop(
            acp_client, "term.kill.keeps-id", not killed.is_error, "terminal/kill to succeed", f"error {killed.error!r}"
        )
        waited = await turn.terminal("wait_for_exit", tid, timeout=limit)
        acp_client.check(
            "term.kill.keeps-id",
            not waited.is_error and _exit_status_ok(waited.result),
            "wait_for_exit on the killed terminal to return its exit status",
            f"error {waited.error!r}" if waited.is_error else f"result {waited.result!r}",
        )
        after = await turn.terminal("output", tid)
        acp_client.check(
            "term.kill.keeps-id",
            not after.is_error,
            "terminal/output to still accept the killed terminal's id",
            f"error {after.error!r}",
        )
        await turn.terminal("release", tid)
        await turn.end()


async def _response_within(conn: ClientConnection, rid: Any, limit: float) -> Response | None:
    """The answer to our ``terminal/create`` ``rid``, or None after ``limit`` s or the client's EOF:
    not flagged (a late answer is no missing one; the caller judges a silence)."""
    try:
        return await conn.peer.wait_response(rid, method="terminal/create", timeout=limit, flag=False)
    except PeerError:
        return None


async def _wait_for_file(path: Path, limit: float) -> str | None:
    with anyio.move_on_after(limit):
        while True:
            if path.is_file():
                text = path.read_text().strip()
                if text:
                    return text
            await anyio.sleep(0.05)  # polling a file the command writes: no event to wait on
    return None


class _Watched:
    """A process of the client's, watched for its end from before we ask the client to end it.

    A pidfd, opened while the pid still names the command: readable once that process has ended
    (a zombie its parent has not reaped included), never another process's if the pid is recycled,
    and an event to wait on.  Where the kernel has no pidfds, /proc (or ``kill(pid, 0)``) is polled.
    """

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.proc = stat(pid)
        try:
            self.fd = pidfd(self.proc) if self.proc is not None else None
        except OSError:
            self.fd = None

    def alive(self) -> bool:
        if self.fd is not None:
            return not select.select([self.fd], [], [], 0)[0]
        now = stat(self.pid)
        if now is not None:
            return now.state != "Z" and (self.proc is None or now.start == self.proc.start)
        try:
            os.kill(self.pid, 0)
        except OSError:
            return False
        return True

    async def ended_within(self, limit: float) -> bool:
        with anyio.move_on_after(limit):
            if self.fd is not None:
                await anyio.wait_readable(self.fd)
            else:
                while self.alive():
                    await anyio.sleep(0.05)  # no pidfd: no event for another process's end
        return not self.alive()

    def kill(self) -> None:
        if self.proc is not None:
            signal_if_same(self.proc, signal.SIGKILL)
        elif self.alive():
            os.kill(self.pid, signal.SIGKILL)

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


@pytest.mark.acp_clause("term.release.kills")
async def test_release_kills_a_running_command(acp_client: ClientHarness) -> None:
    """Releasing a terminal whose command still runs kills the command (checked by its pid)."""
    require(acp_client, "prompt")
    async with acp_client.connect() as conn:
        turn = await _terminal_turn(acp_client, conn)
        pidfile = probe_path(conn, turn, "acp-term.pid")
        script = f"echo $$ > {pidfile}; exec sleep {LONG}"
        params = {"sessionId": turn.session_id, "command": "sh", "args": ["-c", script]}
        rid = await conn.peer.send_request("terminal/create", params)
        created = await _response_within(conn, rid, acp_client.config.timeout)
        tid = _tid(created) if created is not None else None
        pid_text = await _wait_for_file(pidfile, acp_client.config.timeout)
        if tid is None or pid_text is None or not pid_text.isdigit():
            await turn.end()
            got = (created.result or created.error) if created is not None else "no answer in time"
            inconclusive(f"the command did not start (terminal/create: {got!r})")
        watched = _Watched(int(pid_text))
        try:
            if not watched.alive():
                await turn.end()
                inconclusive(f"the command (pid {watched.pid}) had ended before we released its terminal")
            await turn.terminal("release", tid)
            ended = await watched.ended_within(acp_client.config.timeout)
            if not ended:
                watched.kill()
        finally:
            watched.close()
        acp_client.check(
            "term.release.kills",
            ended,
            "terminal/release to kill the still-running command",
            f"pid {watched.pid} was still running {acp_client.config.timeout:g} s after the release",
        )
        await turn.end()


@pytest.mark.acp_clause("term.output.truncate-head", "term.output.char-boundary")
async def test_output_byte_limit_keeps_the_tail(acp_client: ClientHarness) -> None:
    """outputByteLimit cuts from the front, never inside a UTF-8 character, and sets truncated."""
    require(acp_client, "prompt")
    text = "start-" + "€" * 10 + "-end"  # € is 3 bytes: a cut at 11 bytes falls inside one
    data = text.encode()
    limit = 11
    async with acp_client.connect() as conn:
        turn = await _terminal_turn(acp_client, conn)
        created = await turn.create_terminal("sh", ["-c", 'printf %s "$1"', "sh", text], output_byte_limit=limit)
        tid = _created_tid(created)
        await turn.terminal("wait_for_exit", tid)
        out = await turn.terminal("output", tid)
        result = out.result if isinstance(out.result, dict) else {}
        got = result.get("output")
        got_bytes = got.encode("utf-8", "surrogatepass") if isinstance(got, str) else b""
        # A split character may have become U+FFFD: that is judged on char-boundary, not here.
        core = got.lstrip("\ufffd").encode("utf-8", "surrogatepass") if isinstance(got, str) else b""
        acp_client.check(
            "term.output.truncate-head",
            result.get("truncated") is True and data.endswith(core) and limit - 3 <= len(core) <= limit,
            f"the last (at most {limit}) bytes of the output, and truncated true",
            f"error {out.error!r}" if out.is_error else f"output {got!r}, truncated {result.get('truncated')!r}",
        )
        if isinstance(got, str) and "\ufffd" not in got and len(got_bytes) > limit:
            # Whole characters, more of them than the limit: nothing was cut, so no cut can be
            # judged (keeping too much is truncate-head's finding, a SHOULD, above).
            acp_client.record(
                "term.output.char-boundary",
                Status.INCONCLUSIVE,
                f"the client kept {len(got_bytes)} bytes of output, more than outputByteLimit {limit}: "
                "no truncation to judge",
            )
        else:
            acp_client.check(
                "term.output.char-boundary",
                isinstance(got, str) and "\ufffd" not in got and got_bytes in data,
                "the kept tail to start on a character boundary (no broken or replacement characters)",
                f"output {got!r}",
            )
        await turn.terminal("release", tid)
        await turn.end()
