"""Hostile clients: clients under test that attack the suite itself, not one clause.

``python tests/peers/hostile_clients.py NAME [mock_client options]`` runs one
(it takes the options of ``python -m mock_client``; the suite puts the relay
agent's command line in ``--agent {agent}``).  The client side of
``hostile_agents.py``: where ``broken_clients.py`` breaks exactly one clause
to prove a check, these do what a broken or malicious client may do to the
*tester*: never write, never answer, hang mid-line, die in the middle of a
turn, flood the agent's stdin and their own stdout, write binary, ignore
stdin EOF and SIGTERM, leave grandchildren and a daemon behind.
``tests/hostile/test_hostile_clients.py`` runs a fixed selection of the client
suite against each and checks that the run ends in time, reports the right
clauses, and leaves no process behind.

Most are ``MockClient`` subclasses (conforming except for their one attack);
``mute`` and ``partial-frame`` are plain programs, because their attack is
below the protocol.

Environment they read (all optional; the tests set them with ``--acp-client-env``):

``HOSTILE_STATE_DIR``
    a directory shared by all processes of one suite run: the floods happen
    once per run (see ``hostile_agents.once_per_run``).
``HOSTILE_RUN_TAG``
    put on the command line of the daemon, which clears its environment, so a
    test can still find it in the process table.
``HOSTILE_FLOOD_FRAMES``
    notifications ``stdout-flood`` writes to the agent (default 40,000).
"""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import orjson

if __name__ == "__main__":  # run as a file: make the repository root importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from acp_conformance.core.events import Notification, Request
from acp_conformance.peer import NO_ANSWER, Peer
from acp_conformance.transport.base import Transport
from mock_client import MockClient
from mock_client.cli import main as mock_main
from tests.peers.hostile_agents import _fork_sleeper, once_per_run, record, stderr

MIB = 1024 * 1024


def agent_argv(argv: list[str]) -> list[str]:
    """The agent command line the suite gave us (``--agent CMD``)."""
    for i, arg in enumerate(argv):
        if arg == "--agent" and i + 1 < len(argv):
            return shlex.split(argv[i + 1])
        if arg.startswith("--agent="):
            return shlex.split(arg.split("=", 1)[1])
    raise SystemExit("hostile client: no --agent given")


# ------------------------------------------------------------------ silence
def mute(argv: list[str]) -> int:
    """Launches the agent and never writes a byte to it (no initialize); reads its output until EOF."""
    agent = subprocess.Popen(agent_argv(argv), stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert agent.stdout is not None
    while agent.stdout.read(65536):
        pass
    return 0


def partial_frame(argv: list[str]) -> int:
    """Launches the agent, writes half of an ``initialize`` request (no newline), then nothing."""
    agent = subprocess.Popen(agent_argv(argv), stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert agent.stdin is not None and agent.stdout is not None
    agent.stdin.write(b'{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVers')
    agent.stdin.flush()
    while agent.stdout.read(65536):
        pass
    return 0


class NeverAnswers(MockClient):
    """Drives the session as the reference client does, but answers none of the agent's
    requests (permission, fs, terminal, extension methods): each stays pending forever."""

    def install_handlers(self, peer: Peer) -> None:
        super().install_handlers(peer)

        async def ignore(req: Request) -> Any:
            return NO_ANSWER

        for method in list(peer.handlers):
            peer.handlers[method] = ignore
        peer.default_handler = ignore


# ------------------------------------------------------------------ crashes
class ExitsMidTurn(MockClient):
    """Dies (status 3) at the first ``session/update`` of a turn, saying why on stderr."""

    def on_notification(self, note: Notification) -> None:
        if note.method == "session/update":
            stderr("hostile: segmentation fault (simulated) in the middle of a turn")
            os._exit(3)
        super().on_notification(note)


# ------------------------------------------------------------------ volume
class StdoutFlood(MockClient):
    """Once per run, after ``session/new``: 40,000 valid extension notifications to the agent at full
    speed, and 8 MiB on its own stdout (the user-facing output the suite drains)."""

    async def new_session(self) -> str:
        sid = await super().new_session()
        if once_per_run("client-stdout-flood"):
            count = int(os.environ.get("HOSTILE_FLOOD_FRAMES", "40000"))
            frame = orjson.dumps({"jsonrpc": "2.0", "method": "_hostile/noise", "params": {"n": "x" * 64}}) + b"\n"
            batch = frame * 1000
            for _ in range(count // 1000):
                async with self.peer._send_lock:
                    await self.peer.transport.send(batch)
            line = b"hostile: user-facing output " + b"O" * 99 + b"\n"
            block = line * (MIB // len(line))
            for _ in range(8):
                await anyio.to_thread.run_sync(os.write, 1, block)
        return sid


class BinaryGarbage(MockClient):
    """After every frame it sends, a line of binary and invalid UTF-8; with its prompt, 64 KiB of
    random bytes and a line of log text (valid UTF-8, not JSON)."""

    def make_peer(self, transport: Transport) -> Peer:
        peer = super().make_peer(transport)
        state = {"blob": True}

        def wire(data: bytes) -> bytes:
            extra = b"\xff\xfe\x00binary\x80\x81 \xc3\x28\n"
            if state["blob"] and b'"method":"session/prompt"' in data:
                state["blob"] = False
                extra += os.urandom(64 * 1024).replace(b"\n", b"\x00") + b"\n"
                extra += b"hostile: a log line on the protocol stream\n"
            return data + extra

        peer.wire_filter = wire
        return peer


# ----------------------------------------------------------------- processes
class Immortal(MockClient):
    """Ignores SIGTERM; after its turns, neither exits nor lets the agent go (stdin EOF is ignored
    too: it never reads stdin).  Only SIGKILL ends it."""

    async def session_flow(self) -> int:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        code = await super().session_flow()
        stderr(f"hostile: done (status {code}), staying alive, ignoring SIGTERM")
        record("immortal", {"pid": os.getpid()})
        await anyio.sleep_forever()
        return code


def grandchildren(argv: list[str]) -> int:
    """The reference client, plus sleepers holding its pipes (same group, new group, new session)
    and a double-forked daemon (new session, stdio on /dev/null, empty environment)."""
    for how in ("same-group", "setpgid", "setsid"):
        _fork_sleeper(how)
    _fork_sleeper("double", close_stdio=True, clear_env=True)
    return mock_main(argv)


def undying(argv: list[str]) -> int:
    """``immortal`` plus a sleeper in a new session: only SIGKILL of the whole tree ends it."""
    _fork_sleeper("setsid")
    return mock_main(argv, client_cls=Immortal)


CLIENTS: dict[str, type[MockClient]] = {
    "never-answers": NeverAnswers,
    "exits-mid-turn": ExitsMidTurn,
    "stdout-flood": StdoutFlood,
    "binary-garbage": BinaryGarbage,
    "immortal": Immortal,
}
PROGRAMS = {"mute": mute, "partial-frame": partial_frame, "grandchildren": grandchildren, "undying": undying}


def run(argv: list[str]) -> int:
    if not argv or argv[0] not in CLIENTS.keys() | PROGRAMS.keys():
        names = ", ".join(sorted(CLIENTS.keys() | PROGRAMS.keys()))
        print(f"usage: hostile_clients.py NAME [mock_client options]; NAME is one of {names}", file=sys.stderr)
        return 2
    name, rest = argv[0], argv[1:]
    if name in PROGRAMS:
        return PROGRAMS[name](rest)
    return mock_main(rest, client_cls=CLIENTS[name])


if __name__ == "__main__":
    sys.exit(run(sys.argv[1:]))
