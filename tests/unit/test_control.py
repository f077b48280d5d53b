"""The control channel and the relay agent (a thin, faithful byte relay), and the client profiles
that put the relay's command line into the client's (``{agent}`` substitution)."""

from __future__ import annotations

import os
import socket
import sys
from pathlib import Path

import anyio
import anyio.abc
import anyio.lowlevel
import pytest

from acp_conformance.errors import ConfigurationError, PeerTimeout
from acp_conformance.harness.control import (
    FrameReader,
    encode_frame,
    open_control_server,
    parse_address,
    relay_command,
)
from acp_conformance.profiles import BUNDLED, PermissionNotSelectable, load_profile, parse_profile, substitute
from acp_conformance.transport.process import spawn

pytestmark = pytest.mark.anyio

#: How long a relay process may take to start and connect: a Python start-up, under CI's load (a
#: bound, not a wait).  Two CI failures once blamed on load ("within 10 s", then "within 60 s") were
#: ``accept`` waiting for a relay that had already connected (see the test below).
RELAY_START = 60


def test_frames_round_trip_in_any_chunking() -> None:
    wire = encode_frame(b"I", b"hello\n") + encode_frame(b"Z") + encode_frame(b"O", bytes(range(256)))
    for step in (1, 2, 5, len(wire)):
        reader = FrameReader()
        got = []
        for i in range(0, len(wire), step):
            got += reader.feed(wire[i : i + step])
        assert got == [(b"I", b"hello\n"), (b"Z", b""), (b"O", bytes(range(256)))]


def test_frame_kind_is_one_byte_and_size_is_bounded() -> None:
    with pytest.raises(ValueError):
        encode_frame(b"IO", b"")
    with pytest.raises(ValueError):
        FrameReader().feed(b"O\xff\xff\xff\xff")


@pytest.mark.parametrize("address", ["", "unix:", "unix:relative/path", "tcp:1234", "tcp:host:port", "http://x"])
def test_bad_addresses_are_configuration_errors(address: str) -> None:
    with pytest.raises(ConfigurationError):
        parse_address(address)


def test_relay_command_names_the_module_and_token() -> None:
    argv = relay_command("unix:/tmp/x.sock", "abc", python="/usr/bin/python3")
    assert argv == [
        "/usr/bin/python3", "-m", "acp_conformance.harness.relay", "--control", "unix:/tmp/x.sock", "--token", "abc"
    ]


@pytest.mark.parametrize("kind", ["unix", "tcp"])
async def test_bytes_flow_both_ways_unchanged(kind: str, tmp_path: Path) -> None:
    async with open_control_server(kind) as server:
        assert server.address.startswith(f"{kind}:")
        stderr: list[str] = []
        async with spawn(server.relay_argv(), cwd=tmp_path, on_stderr=stderr.append) as proc:
            relay = await server.accept(RELAY_START)
            assert relay.hello.pid == proc.pid
            assert relay.hello.cwd == str(tmp_path)
            assert relay.hello.argv[-1] == server.token
            # client -> agent stdin -> test: byte for byte, including non-UTF-8 and partial lines
            payload = b'{"jsonrpc":"2.0"}\n\xff\xfe partial'
            await proc.send(payload)
            got = b""
            with anyio.fail_after(5):
                while len(got) < len(payload):
                    got += await relay.receive()
            assert got == payload
            # test -> agent stdout -> client: byte for byte; stdout carries nothing else
            await relay.send(b'{"jsonrpc":"2.0","id":1,"result":{}}\n')
            with anyio.fail_after(5):
                assert await proc.receive() == b'{"jsonrpc":"2.0","id":1,"result":{}}\n'
            await relay.write_stderr(b"some log line\n")
            # stdin EOF is reported, then the test tells the relay to exit
            await proc.close_output()
            with anyio.fail_after(5):
                assert await relay.receive() == b""
                await relay.stdin_eof.wait()
            await relay.exit(3)
            assert await proc.wait_exit(5)
            assert proc.returncode == 3
            assert await relay.wait_gone(5)
        assert "some log line" in stderr


async def test_relay_exits_when_the_test_side_goes_away(tmp_path: Path) -> None:
    async with open_control_server() as server:
        async with spawn(server.relay_argv(), cwd=tmp_path) as proc:
            relay = await server.accept(RELAY_START)
            await relay.aclose()
            assert await proc.wait_exit(5), "the relay outlived its control connection"
            assert proc.returncode == 0


async def test_close_stdout_gives_the_client_eof(tmp_path: Path) -> None:
    async with open_control_server() as server:
        async with spawn(server.relay_argv(), cwd=tmp_path) as proc:
            relay = await server.accept(RELAY_START)
            await relay.send(b"x\n")
            await relay.close_output()
            data = b""
            with anyio.fail_after(5):
                while chunk := await proc.receive():
                    data += chunk
            assert data == b"x\n"


async def test_a_relay_that_connected_before_accept_is_the_one_accepted(tmp_path: Path) -> None:
    """``accept`` hands out relays in order, whenever they connected: one that is already there
    when the caller asks (a fast start, a caller slowed by load) is not waited for in vain (CI
    runs failed so: 'no agent connected to the control socket within 60 s')."""
    async with open_control_server() as server:
        async with spawn(server.relay_argv(), cwd=tmp_path):
            with anyio.fail_after(RELAY_START):
                while not server.connections:
                    await server.wait_change()
            relay = await server.accept(5)
            assert relay is server.connections[0]
            with pytest.raises(PeerTimeout):
                await server.accept(0.2)  # handed out once: the next is a relay still to come


async def test_signals_are_reported_before_the_relay_dies(tmp_path: Path) -> None:
    import signal

    async with open_control_server() as server:
        async with spawn(server.relay_argv(), cwd=tmp_path) as proc:
            relay = await server.accept(RELAY_START)
            os.kill(proc.pid, signal.SIGTERM)
            assert await relay.wait_gone(5)
            assert relay.signals == [signal.SIGTERM]
            assert await proc.wait_exit(5)
            assert proc.returncode == 128 + signal.SIGTERM


async def test_wrong_token_is_rejected(tmp_path: Path) -> None:
    async with open_control_server() as server:
        argv = relay_command(server.address, "not-the-token")
        async with spawn(argv, cwd=tmp_path) as proc:
            with anyio.fail_after(5):
                while not server.rejected:
                    await server.wait_change()
            assert server.connections == []
            assert await proc.wait_exit(5)
        with pytest.raises(PeerTimeout):
            await server.accept(0.2)


async def test_unreachable_control_socket_is_a_clear_error(tmp_path: Path) -> None:
    lines: list[str] = []
    argv = [sys.executable, "-m", "mock_agent.relay", "--control", f"unix:{tmp_path}/none.sock"]
    async with spawn(argv, cwd=tmp_path, on_stderr=lines.append) as proc:
        assert await proc.wait_exit(10)
        assert proc.returncode == 2
        assert await proc.receive() == b""  # nothing on stdout, ever
    assert any("cannot reach the test process" in line for line in lines)


async def test_fixed_address_and_empty_token(tmp_path: Path) -> None:
    sock = tmp_path / "fixed.sock"
    async with open_control_server(address=f"unix:{sock}", token="") as server:
        assert server.address == f"unix:{sock}"
        assert "--token" not in server.relay_argv()
        async with spawn(server.relay_argv(), cwd=tmp_path):
            relay = await server.accept(RELAY_START)
            assert relay.hello.token == ""
    assert not sock.exists()


# ----------------------------------------------- profiles: how the relay command reaches the client
AGENT_ARGV = ["/usr/bin/python3", "-m", "mock_agent.relay", "--control", "unix:/tmp/a b/c.sock"]


def test_agent_is_one_shell_quoted_word_and_agent_argv_splices() -> None:
    argv = substitute("acpx --agent {agent} exec {prompt}", agent_argv=AGENT_ARGV, prompt="hi there")
    assert argv == ["acpx", "--agent", "/usr/bin/python3 -m mock_agent.relay --control 'unix:/tmp/a b/c.sock'",
                    "exec", "hi there"]
    assert substitute("c.py {agent_argv}", agent_argv=AGENT_ARGV) == ["c.py", *AGENT_ARGV]
    assert substitute("c --agent={agent}", agent_argv=["a", "b"]) == ["c", "--agent=a b"]


def test_permission_placeholder_and_in_place_replacement() -> None:
    others = [["--approve-all"], ["--deny-all"]]
    assert substitute("acpx {permission} exec x", agent_argv=[], permission_args=["--deny-all"]) == [
        "acpx", "--deny-all", "exec", "x"]
    assert substitute("acpx --approve-all exec x", agent_argv=[], permission_args=["--deny-all"],
                      other_permission_args=others) == ["acpx", "--deny-all", "exec", "x"]
    with pytest.raises(PermissionNotSelectable):
        substitute("acpx exec x", agent_argv=[], permission_args=["--deny-all"], other_permission_args=others)
    assert substitute("acpx {permission} exec x", agent_argv=[]) == ["acpx", "exec", "x"]


@pytest.mark.parametrize("name", BUNDLED)
def test_bundled_profiles_load_and_build_their_example(name: str) -> None:
    profile = load_profile(name)
    argv = profile.build_argv(profile.example, agent_argv=AGENT_ARGV, tmp="/tmp/t")
    assert AGENT_ARGV[-1] in " ".join(argv)
    assert all("{" not in word for word in argv)


def test_bundled_profile_capabilities() -> None:
    acpx, sdk, mock = (load_profile(n) for n in ("acpx", "python-sdk-client", "mock-client"))
    assert acpx.unsupported("cancel") is None and "hold" in (acpx.unsupported("permission:hold") or "")
    assert "cannot cancel" in (sdk.unsupported("cancel") or "") and sdk.unsupported("second-prompt") is None
    assert all(mock.unsupported(a, mock.example) is None for a in ("cancel", "permission:hold", "permission:reject"))
    assert acpx.environment("/x") == {"HOME": "/x"}


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ("[client]\nname = 1\n", "p.toml:2: client.name: must be a str"),
        ("[client]\nname = 'x'\n[cancel]\nvia = 'telepathy'\n", "p.toml:4: cancel.via: must be one of"),
        ("[client]\nname = 'x'\n[prompt]\nvai = 'argv'\n", "p.toml:4: prompt.vai: unknown key"),
        ("[client]\nname = 'x'\n[permission]\nallow = '--yes'\n", "p.toml:4: permission.allow: must be a list"),
        ("[client]\nname = 'x'\n[cancel]\nvia = 'stdin'\n", "cancel.text: cancel.via = \"stdin\" needs"),
        ("[client]\nname = 'x'\n[cancel]\nsignal = 'SIGNOPE'\n", "p.toml:4: cancel.signal: unknown signal"),
        ("[clinet]\nname = 'x'\n", "unknown table or key 'clinet'"),
        ("[client]\ndescription = 'no name'\n", "p.toml:1: client: missing required key 'name'"),
        ("[client\nname = 'x'\n", "invalid TOML"),
    ],
)
def test_bad_profiles_name_file_line_and_key(text: str, where: str) -> None:
    with pytest.raises(ConfigurationError) as info:
        parse_profile(text, "p.toml")
    assert where in str(info.value)


def test_unknown_profile_name_is_a_configuration_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="not a bundled profile"):
        load_profile(str(tmp_path / "missing.toml"))


async def _cancel_a_read_as_data_arrives(stream: anyio.abc.ByteStream, other_end: socket.socket) -> list[object]:
    """Force the race deterministically: the read is cancelled in the same loop turn as its
    socket turns readable (the callback cancelling it is queued before the selector runs)."""
    import asyncio

    loop = asyncio.get_running_loop()
    errors: list[object] = []
    previous = loop.get_exception_handler()
    loop.set_exception_handler(lambda _loop, context: errors.append(context.get("exception")))
    try:
        scope = anyio.CancelScope()
        started = anyio.Event()

        async def read() -> None:
            with scope:
                started.set()
                await stream.receive()

        async with anyio.create_task_group() as tg:
            tg.start_soon(read)
            await started.wait()
            await anyio.lowlevel.checkpoint()  # the read now waits on the socket
            other_end.sendall(b"x")
            loop.call_soon(scope.cancel)
        for _ in range(5):
            await anyio.lowlevel.checkpoint()
    finally:
        loop.set_exception_handler(previous)
    return errors


async def test_a_read_cancelled_as_its_data_arrives_leaves_no_loop_error() -> None:
    """A relay dying while its test tears down made the loop report InvalidStateError (anyio's
    Unix socket streams), which the test runner raised beside the test's own outcome: the run
    recorded a suite error.  The control channel reads through asyncio's transports instead."""
    import asyncio

    from acp_conformance.harness.control import _TransportStream

    ours, theirs = socket.socketpair()
    with theirs:
        reader, writer = await asyncio.open_unix_connection(sock=ours)
        stream = _TransportStream(reader, writer)
        try:
            assert await _cancel_a_read_as_data_arrives(stream, theirs) == []
        finally:
            await stream.aclose()
