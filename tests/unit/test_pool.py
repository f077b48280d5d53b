"""``--acp-isolation=connection``: a warm connection goes back to the pool only when its test left
it as a fresh one would be, and the next test sees none of the last one's frames."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import pytest

from acp_conformance.core.events import Notification, Response, Violation
from acp_conformance.core.ids import id_key
from acp_conformance.errors import NotComparable, PeerExited
from acp_conformance.harness import AgentConfig, AgentHarness
from acp_conformance.harness.pool import ConnectionPool, Pooled, hosted_pool
from acp_conformance.results import Status
from acp_conformance.schema.validator import SchemaValidator
from acp_conformance.transport.process import spawn

pytestmark = pytest.mark.anyio

AGENT = f"{sys.executable} -m mock_agent"


BROKEN = f"{sys.executable} {Path(__file__).resolve().parents[1] / 'peers' / 'broken_agents.py'}"


@asynccontextmanager
async def pool_of(command: str, validator: SchemaValidator, tmp: Path) -> AsyncIterator[ConnectionPool]:
    config = AgentConfig(command=command, timeout=5, startup_timeout=30)
    with anyio.fail_after(60):
        async with hosted_pool(config, validator, tmp / "pool", str(tmp)) as pool:
            yield pool


def harness(pool: ConnectionPool, tmp: Path, n: int) -> AgentHarness:
    return AgentHarness(pool.config, pool.validator, tmp / f"test-{n}", label=f"test {n}", pool=pool)


async def one_turn(acp: AgentHarness) -> tuple[int, str, list[str]]:
    """A clean test: a session and a turn, then the test's end (``release``). Returns the pid, the
    session and the frames' methods."""
    async with acp.connect() as conn:
        resp = await conn.peer.call("session/new", {"cwd": str(conn.sandbox.root), "mcpServers": []})
        sid = resp.result["sessionId"]
        await conn.client.prompt(sid, "hello")
        methods = [str(e.message.get("method")) for e in conn.transcript.frames() if isinstance(e.message, dict)]
        pid = conn.transport.pid
    acp.release()
    return pid, sid, methods


async def test_a_clean_test_gives_its_process_to_the_next_which_sees_only_its_own_frames(
    schema_validator: SchemaValidator, tmp_path: Path
) -> None:
    async with pool_of(AGENT, schema_validator, tmp_path) as pool:
        pid1, sid1, _ = await one_turn(harness(pool, tmp_path, 1))
        second = harness(pool, tmp_path, 2)
        pid2, sid2, methods = await one_turn(second)
        assert pid1 == pid2 and sid1 != sid2
        assert (pool.started, pool.lent, pool.retired) == (1, 2, {})
        # The second test's transcript starts with the handshake, as a fresh process's would ...
        assert methods[:2] == ["initialize", "None"]
        # ... and holds nothing of the first test's session.
        frames = b"".join(e.raw for e in second.connections[0].transcript.frames() if isinstance(e.raw, bytes))
        assert sid1.encode() not in frames
        assert all(r.status in (Status.PASS, Status.NOT_APPLICABLE) for r in second.results)


@pytest.mark.parametrize(
    ("spoil", "reason"),
    [
        ("raw", "raw bytes sent"),
        ("finding", "the test found something"),
        ("unanswered", "a request of ours is unanswered"),
        ("second", "the test started another agent process beside it"),
        ("exit", "the agent exited"),
        ("eof", "we closed the agent's stdin"),
        ("initialize", "the test sent initialize (its effect may outlive the session)"),
        ("set-mode", "the test sent session/set_mode (its effect may outlive the session)"),
        ("streaming", "the scripted model is still streaming"),
    ],
)
async def test_a_test_that_leaves_anything_behind_retires_its_process(
    schema_validator: SchemaValidator, tmp_path: Path, spoil: str, reason: str
) -> None:
    async with pool_of(AGENT, schema_validator, tmp_path) as pool:
        acp = harness(pool, tmp_path, 1)
        async with acp.connect() as conn:
            pid = conn.transport.pid
            if spoil == "raw":
                await conn.peer.send_raw(b'{"jsonrpc":"2.0","method":"_probe/x"}\n')
            elif spoil == "finding":
                acp.record("prompt.response.stop-reason", Status.WARN, "made up for this test")
            elif spoil == "unanswered":
                # A turn that runs until cancelled (the long prompt): our prompt stays unanswered.
                new = await conn.peer.call("session/new", {"cwd": str(conn.sandbox.root), "mcpServers": []})
                prompt = [{"type": "text", "text": acp.config.long_prompt}]
                await conn.peer.send_request("session/prompt", {"sessionId": new.result["sessionId"], "prompt": prompt})
                await conn.peer.wait_for(lambda e: isinstance(e, Notification) and e.method == "session/update")
            elif spoil == "streaming":
                conn.client.hold_probes.append(lambda: "a reply is half streamed")
            elif spoil == "set-mode":
                new = await conn.peer.call("session/new", {"cwd": str(conn.sandbox.root), "mcpServers": []})
                modes = new.result["modes"]
                params = {"sessionId": new.result["sessionId"], "modeId": modes["availableModes"][-1]["id"]}
                await conn.peer.call("session/set_mode", params)
            elif spoil == "initialize":
                params = {"protocolVersion": 1, "clientCapabilities": conn.client.capabilities.to_wire()}
                await conn.peer.call("initialize", params)
            elif spoil == "eof":
                await conn.transport.close_output()  # released before the agent has exited
            elif spoil == "exit":
                await conn.transport.close_output()
                assert await conn.peer.wait_closed(10)
        if spoil == "second":
            async with acp.connect() as other:
                assert other.transport.pid != pid
        acp.release()
        assert pool.retired == {reason: 1}
        again = harness(pool, tmp_path, 2)
        async with again.connect() as conn:
            assert conn.transport.pid != pid
        again.release()


async def test_output_written_between_two_tests_retires_the_process(
    schema_validator: SchemaValidator, tmp_path: Path
) -> None:
    async with pool_of(AGENT, schema_validator, tmp_path) as pool:
        pid, _, _ = await one_turn(harness(pool, tmp_path, 1))
        pooled = pool.idle[0]
        # A frame the agent writes while no test holds it (a late update, say): read by nobody yet.
        assert pooled.transport is not None and not pooled.unread_output()
        pooled.live_peer.transcript.add("in", b'{"jsonrpc":"2.0","method":"session/update"}')
        pid2, _, _ = await one_turn(harness(pool, tmp_path, 2))
        assert pid2 != pid and pool.retired == {"the agent wrote between two tests": 1}


async def test_has_unread_sees_a_line_nobody_read_without_reading_it(tmp_path: Path) -> None:
    script = (
        "import sys; sys.stdout.write('{}\\n'); sys.stdout.flush(); "
        "sys.stderr.write('wrote\\n'); sys.stderr.flush(); sys.stdin.read()"
    )
    wrote = anyio.Event()
    with anyio.fail_after(20):
        async with spawn([sys.executable, "-c", script], on_stderr=lambda _line: wrote.set()) as transport:
            await wrote.wait()  # stderr after stdout: the line is in the pipe now
            assert transport.has_unread()
            assert await transport.receive() == b"{}\n"
            assert not transport.has_unread()


def test_late_frames_of_earlier_tests_are_kept_out_of_the_current_one() -> None:
    pooled = Pooled(b"key")
    pooled.sessions = {"old"}
    pooled.request_ids = {id_key(7)}

    class FakePeer:
        def sent(self, key: object) -> bool:
            return key == id_key(9)

    pooled.peer = FakePeer()  # type: ignore[assignment]
    old_update = Notification("session/update", {"sessionId": "old"}, index=1)
    its_violation = Violation("x", "about the late frame", index=1)
    new_update = Notification("session/update", {"sessionId": "new"}, index=2)
    late_answer = Response(id=7, result={}, error=None, is_error=False, method=None, duplicate=False, index=3)
    own_answer = Response(id=9, result={}, error=None, is_error=False, method="session/new", index=4)
    kept = pooled.late_frames([its_violation, old_update, new_update, late_answer, own_answer])
    assert kept == [new_update, own_answer]
    assert pooled.diverted == 2


async def test_an_error_in_our_reader_stops_the_test_and_is_raised_as_itself(
    schema_validator: SchemaValidator, tmp_path: Path
) -> None:
    """A listener of the test raising runs in the pool's reader task, not the test's: the test
    still ends with that error (not a timeout charged to the agent), and the next test is fine."""

    class Boom(Exception):
        pass

    def explode(_ev: Notification) -> None:
        raise Boom("a listener failed")

    async with pool_of(AGENT, schema_validator, tmp_path) as pool:
        acp = harness(pool, tmp_path, 1)
        with pytest.raises(Boom), anyio.fail_after(4):  # well inside the 5 s deadline of a wait
            async with acp.connect() as conn:
                conn.peer.listeners.append(explode)
                new = await conn.peer.call("session/new", {"cwd": str(conn.sandbox.root), "mcpServers": []})
                await conn.client.prompt(new.result["sessionId"], "hello")
        acp.release()
        assert "the connection's task failed" in pool.retired
        await one_turn(harness(pool, tmp_path, 2))


async def test_an_earlier_tests_session_stops_the_test_which_starts_over_on_a_process_of_its_own(
    schema_validator: SchemaValidator, tmp_path: Path
) -> None:
    """``constant-session-id`` answers every ``session/new`` with the same session, the earlier
    cwd included: on a borrowed connection the second test would judge the first one's session,
    which a fresh process never shows (a full proof once saw ``session.cwd.authoritative`` FAIL
    with reuse only).  The test is stopped at that answer, the process retired, and after
    ``start_over`` it runs on a process of its own, where its session is its own."""
    async with pool_of(f"{BROKEN} constant-session-id", schema_validator, tmp_path) as pool:
        pid1, sid1, _ = await one_turn(harness(pool, tmp_path, 1))
        second = harness(pool, tmp_path, 2)
        went_on = False
        with pytest.raises(NotComparable):
            async with second.connect() as conn:
                await conn.peer.call("session/new", {"cwd": str(conn.sandbox.root), "mcpServers": []})
                went_on = True
        assert not went_on, "the test went on with an earlier test's session"
        assert pool.retired == {"the agent gave an earlier test's session id again": 1} and pool.rerun == 1
        assert "1 test run again" in pool.summary()
        second.start_over()
        assert second.pool is None and second.results == [] and second.connections == []
        async with second.connect() as conn:
            cwd = str(conn.sandbox.root)
            new = await conn.peer.call("session/new", {"cwd": cwd, "mcpServers": []})
            turn = await conn.client.prompt(new.result["sessionId"], "hello")
            assert conn.transport.pid != pid1 and new.result["sessionId"] == sid1
            assert turn.updates
        second.release()
        assert pool.lent == 2 and pool.started == 1  # the second run borrowed nothing


def test_an_always_option_chosen_is_noticed() -> None:
    from acp_conformance.harness.pool import _chose_always
    from acp_conformance.transcript import Transcript

    t = Transcript()
    options = [{"optionId": "a1", "kind": "allow_always"}, {"optionId": "o1", "kind": "allow_once"}]
    ask = {"jsonrpc": "2.0", "id": 0, "method": "session/request_permission", "params": {"options": options}}
    t.add("in", b"...", ask)
    once = t.add("out", b"...", {"jsonrpc": "2.0", "id": 0, "result": {"outcome": {"optionId": "o1"}}})
    assert not _chose_always([*t.entries[:1], once])
    t.add("out", b"...", {"jsonrpc": "2.0", "id": 0, "result": {"outcome": {"optionId": "a1"}}})
    assert _chose_always(t.entries)


#: Answers initialize and, at the next request, closes its stdout (what follows is each script's own).
CLOSES_AT_THE_SECOND_REQUEST = (
    "import json, os, signal, sys, time\n"
    "first = json.loads(sys.stdin.readline())\n"
    "answer = {'protocolVersion': 1, 'agentCapabilities': {}, 'authMethods': []}\n"
    "sys.stdout.write(json.dumps({'jsonrpc': '2.0', 'id': first['id'], 'result': answer}) + '\\n')\n"
    "sys.stdout.flush()\n"
    "sys.stdin.readline()\n"
    "os.close(1)\n"
)
#: ... then says why on stderr and exits.
CRASHES_AFTER_CLOSING = (
    CLOSES_AT_THE_SECOND_REQUEST + "time.sleep(0.3)\nsys.stderr.write('crash report: out of memory\\n')\nsys.exit(3)\n"
)


async def test_a_peer_error_tears_the_borrowed_process_down_before_its_message_is_made(
    schema_validator: SchemaValidator, tmp_path: Path
) -> None:
    """What the agent writes on stderr on its way out is in the message, as for a fresh process,
    whose teardown (which drains stderr) comes before the message."""
    script = tmp_path / "crashes.py"
    script.write_text(CRASHES_AFTER_CLOSING)
    async with pool_of(f"{sys.executable} {script}", schema_validator, tmp_path) as pool:
        acp = harness(pool, tmp_path, 1)
        with pytest.raises(PeerExited) as raised:
            async with acp.connect() as conn:
                await conn.peer.call("session/new", {"cwd": str(conn.sandbox.root), "mcpServers": []})
        assert any("crash report: out of memory" in line for line in raised.value.stderr_tail), raised.value
        # ... and how it ended, which it did by itself: the line a report gives the test says so.
        assert raised.value.returncode == 3
        assert "; it exited with status 3 (agent stderr: crash report: out of memory)" in raised.value.describe()
        assert pool.retired == {"the test did not complete": 1}


#: ... then ignores stdin EOF and SIGTERM.
CLOSES_AND_LINGERS = CLOSES_AT_THE_SECOND_REQUEST + "signal.signal(signal.SIGTERM, signal.SIG_IGN)\nsignal.pause()\n"


async def test_an_exit_teardown_forced_is_not_reported_as_the_agents_own(
    schema_validator: SchemaValidator, tmp_path: Path
) -> None:
    """Killed by teardown after it outlived its stdin's EOF: its status is our signal, and a
    message saying "it was killed by SIGKILL" would blame the agent for our teardown."""
    script = tmp_path / "lingers.py"
    script.write_text(CLOSES_AND_LINGERS)
    config = AgentConfig(command=f"{sys.executable} {script}", timeout=0.5, startup_timeout=5)
    acp = AgentHarness(config, schema_validator, tmp_path / "fresh")
    with pytest.raises(PeerExited) as raised:
        async with acp.connect() as conn:
            await conn.peer.call("session/new", {"cwd": str(conn.sandbox.root), "mcpServers": []})
    assert raised.value.returncode is None
    assert "it was killed" not in raised.value.describe() and "exited with" not in raised.value.describe()
