"""Hostile agents: peers that attack the suite itself, not one clause.

``python tests/peers/hostile_agents.py NAME [mock_agent options]`` runs one.
Where ``broken_agents.py`` breaks exactly one clause to prove a check, these
do what a broken or malicious implementation may do to the *tester*: never
answer, hang mid-line, write a 100 MiB line, flood stdout or stderr, write
binary, close stdout, crash mid-turn, ignore EOF and SIGTERM, leave
grandchildren and daemons behind, change process group, flood us with
requests, reuse our request ids, try to read and write outside the sandbox,
echo secrets.  ``tests/hostile/test_hostile_agents.py`` runs the whole agent
suite against each and checks that the run ends in time, reports the right
clauses, keeps its memory bounded and leaves no process behind;
``docs/hostile-peers.md`` tabulates the outcomes.

Most are ``MockAgent`` subclasses (conforming except for their one attack);
a few are plain programs, because their attack is below the protocol.

Environment they read (all optional; the tests set them with ``--acp-agent-env``):

``HOSTILE_STATE_DIR``
    a directory shared by all agent processes of one suite run: attacks
    meant to happen once per run (the floods) mark it, so a run costs one
    flood, not one per test.  Unset: every process attacks.
``HOSTILE_RUN_TAG``
    put on the command line of daemons that clear their environment, so a
    test can still find them in the process table.
``HOSTILE_CANARY``
    a file outside the sandbox that ``sandbox-escape`` tries to reach.
``HOSTILE_ECHO_VARS``
    comma-separated names of the variables ``secret-echo`` leaks.
``HOSTILE_FLOOD_FRAMES`` / ``HOSTILE_FLOOD_REQUESTS`` / ``HOSTILE_STDERR_MIB``
    sizes of the floods (defaults: 200,000 notifications, 50,000 requests,
    32 MiB of stderr).
"""

from __future__ import annotations

import os
import random
import signal
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

if __name__ == "__main__":  # run as a file: make the repository root importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import anyio
import anyio.to_thread

from acp_conformance.core.events import Request
from acp_conformance.peer import NO_ANSWER, HandlerError, Peer
from mock_agent import MockAgent, Turn
from mock_agent.agent import END_TURN
from mock_agent.cli import main as mock_main

Json = dict[str, Any]

MIB = 1024 * 1024


def once_per_run(key: str) -> bool:
    """True the first time ``key`` is asked for in this suite run (see HOSTILE_STATE_DIR)."""
    state = os.environ.get("HOSTILE_STATE_DIR")
    if not state:
        return True
    try:
        fd = os.open(os.path.join(state, key), os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
    except FileExistsError:
        return False
    os.close(fd)
    return True


def stderr(text: str) -> None:
    os.write(2, (text + "\n").encode("utf-8", "replace"))


def record(name: str, item: Any) -> None:
    """Append ``item`` to ``$HOSTILE_STATE_DIR/NAME.jsonl`` (what the attack saw, for the tests)."""
    state = os.environ.get("HOSTILE_STATE_DIR")
    if state:
        with open(os.path.join(state, f"{name}.jsonl"), "ab") as log:
            log.write(orjson.dumps(item) + b"\n")


def update_frame(session_id: str, text: str) -> bytes:
    return (
        orjson.dumps(
            {
                "jsonrpc": "2.0",
                "method": "session/update",
                "params": {
                    "sessionId": session_id,
                    "update": {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}},
                },
            }
        )
        + b"\n"
    )


def read_stdin_until_eof() -> None:
    while os.read(0, 65536):
        pass


# ------------------------------------------------------------------ silence
def silent() -> int:
    """Never writes a byte; reads stdin until EOF, then exits 0."""
    read_stdin_until_eof()
    return 0


class AnswersSome(MockAgent):
    """Serves everything but ``session/prompt``: streams a chunk, then never answers it."""

    async def handle_prompt(self, req: Request) -> Any:
        params = self.params_of(req)
        session = self.find_session(params, "session/prompt")
        await self.send_update(session.id, self.message_chunk("agent_message_chunk", "thinking...", None))
        return NO_ANSWER


class WrongSessionNewId(MockAgent):
    """Answers ``session/new`` under an id we never used (the real request stays unanswered)."""

    async def handle_new_session(self, req: Request) -> Any:
        result = await super().handle_new_session(req)
        frame = {"jsonrpc": "2.0", "id": f"not-{req.id}", "result": result}
        await self.peer.send_raw(orjson.dumps(frame) + b"\n")
        return NO_ANSWER


class PartialFrame(MockAgent):
    """On ``session/prompt``: half of the response frame, no newline, then nothing (until EOF)."""

    async def handle_prompt(self, req: Request) -> Any:
        async with self.peer._send_lock:
            await self.peer.transport.send(b'{"jsonrpc":"2.0","id":' + orjson.dumps(req.id) + b',"result":{"stopRea')
            await anyio.sleep_forever()  # holding the lock: nothing else gets out either


def stdout_closed() -> int:
    """Answers ``initialize``, then closes its stdout and keeps reading stdin until EOF."""
    buf = b""
    while b"\n" not in buf:
        chunk = os.read(0, 65536)
        if not chunk:
            return 0
        buf += chunk
    first = orjson.loads(buf.split(b"\n", 1)[0])
    result = {
        "protocolVersion": 1,
        "agentCapabilities": {},
        "agentInfo": {"name": "hostile-stdout-closed", "version": "0"},
        "authMethods": [],
    }
    os.write(1, orjson.dumps({"jsonrpc": "2.0", "id": first.get("id"), "result": result}) + b"\n")
    os.close(1)
    stderr("hostile: closed my stdout, still running")
    read_stdin_until_eof()
    return 0


class ExitsMidTurn(MockAgent):
    """Streams one chunk of the turn, says why on stderr, and dies with status 3."""

    async def prompt_turn(self, turn: Turn) -> str:
        await self.emit(turn, self.message_chunk("agent_message_chunk", "Let me th", None))
        stderr("hostile: segmentation fault (simulated) in the middle of a turn")
        os._exit(3)


# ------------------------------------------------------------------ volume
class HugeLine(MockAgent):
    """Every turn starts with one 100 MiB ``session/update`` line, written 1 MiB at a time."""

    size = 100 * MIB

    async def prompt_turn(self, turn: Turn) -> str:
        head = update_frame(turn.session_id, "")
        cut = head.index(b'"text":"') + len(b'"text":"')
        send = self.peer.transport.send  # straight to the pipe: our own transcript must not hold it
        chunk = b"x" * MIB
        async with self.peer._send_lock:  # no other frame may land inside the line
            await send(head[:cut])
            for _ in range(self.size // MIB):
                await send(chunk)
            await send(head[cut:])
        return await super().prompt_turn(turn)


class StdoutFlood(MockAgent):
    """The first turn of the run is preceded by 200,000 valid notifications at full speed."""

    async def prompt_turn(self, turn: Turn) -> str:
        if once_per_run("stdout-flood"):
            count = int(os.environ.get("HOSTILE_FLOOD_FRAMES", "200000"))
            batch = update_frame(turn.session_id, "flood " * 8) * 1000
            for _ in range(count // 1000):
                async with self.peer._send_lock:
                    await self.peer.transport.send(batch)
        return await super().prompt_turn(turn)


def _stderr_flood() -> None:
    first = once_per_run("stderr-flood")
    mib = int(os.environ.get("HOSTILE_STDERR_MIB", "32")) if first else 1
    line = b"hostile: log line " + b"E" * 81 + b"\n"  # 100 bytes
    block = line * (MIB // len(line))
    for _ in range(mib):
        os.write(2, block)
    # A megabyte without a newline, and binary that is no UTF-8.
    os.write(2, b"N" * MIB)
    os.write(2, bytes(range(256)) * 64 + b"\n")


class StderrFlood(MockAgent):
    """Floods stderr from a thread at full speed while serving normally (and finishes
    the flood before it exits, so every run delivers the same volume)."""

    flood: threading.Thread | None = None

    async def on_start(self) -> None:
        self.flood = threading.Thread(target=_stderr_flood, daemon=True)
        self.flood.start()

    async def on_eof(self) -> None:
        await super().on_eof()
        if self.flood is not None:
            await anyio.to_thread.run_sync(self.flood.join, 30.0)


class BinaryGarbage(MockAgent):
    """After every frame, a line of binary; once per process, 64 KiB of random bytes."""

    validate_outbound = False

    def make_peer(self, transport: Any) -> Peer:
        peer = super().make_peer(transport)
        rng = random.Random(7)
        blob = bytes(rng.getrandbits(8) for _ in range(64 * 1024))
        state = {"blob": True}

        def wire(data: bytes) -> bytes:
            extra = b"\xff\xfe\x00binary\x80\x81 \xc3\x28\n"
            if state["blob"] and b'"method":"session/update"' in data:
                state["blob"] = False
                extra += blob + b"\n"
            return data + extra

        peer.wire_filter = wire
        return peer


# ----------------------------------------------------------------- processes
class Immortal(MockAgent):
    """Ignores stdin EOF and SIGTERM: only SIGKILL ends it."""

    async def on_start(self) -> None:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)

    async def on_eof(self) -> None:
        await anyio.sleep_forever()


SLEEPER = "import time\nwhile True: time.sleep(60)\n"


def _fork_sleeper(how: str, *, close_stdio: bool = False, clear_env: bool = False) -> None:
    """Fork a process that sleeps forever (holding our stdio unless ``close_stdio``)."""
    if os.fork() != 0:
        return
    try:
        if how == "setsid":
            os.setsid()
        elif how == "setpgid":
            os.setpgid(0, 0)
        elif how == "double":
            os.setsid()
            if os.fork() != 0:
                os._exit(0)
        if close_stdio:
            null = os.open(os.devnull, os.O_RDWR)
            for fd in (0, 1, 2):
                os.dup2(null, fd)
            os.closerange(3, 4096)
        env = {} if clear_env else dict(os.environ)
        tag = os.environ.get("HOSTILE_RUN_TAG", "untagged")
        record("sleepers", {"pid": os.getpid(), "how": how})
        os.execve(sys.executable, [sys.executable, "-c", SLEEPER, f"hostile-sleeper-{tag}", how], env)
    finally:
        os._exit(0)


def grandchildren(argv: list[str]) -> int:
    """The reference agent, plus sleepers holding its pipes: in its group, in a new group, in a new session."""
    for how in ("same-group", "setpgid", "setsid"):
        _fork_sleeper(how)
    return mock_main(argv)


def undying(argv: list[str]) -> int:
    """``immortal`` (ignores stdin EOF and SIGTERM) plus a sleeper in a new session: what only
    SIGKILL of the whole tree ends, and what an interrupted run must still leave behind nothing of."""
    _fork_sleeper("setsid")
    return mock_main(argv, agent_cls=Immortal)


def daemon(argv: list[str]) -> int:
    """The reference agent, plus a classic daemon: double fork, new session, stdio on
    /dev/null, empty environment (no trace of where it came from but its parentage)."""
    _fork_sleeper("double", close_stdio=True, clear_env=True)
    return mock_main(argv)


class Worker(MockAgent):
    """The real agent behind ``launcher``: never exits on EOF."""

    async def on_eof(self) -> None:
        await anyio.sleep_forever()


def launcher(argv: list[str]) -> int:
    """A launcher that starts its worker (the agent) in a new process group and exits at once."""
    pid = os.fork()
    if pid == 0:
        os.setpgid(0, 0)
        os._exit(mock_main(argv, agent_cls=Worker))
    return 0


# ------------------------------------------------------------------ requests
class RequestFlood(MockAgent):
    """The first turn of the run fires 50,000 fs/read_text_file requests without waiting, then collects."""

    async def prompt_turn(self, turn: Turn) -> str:
        if once_per_run("request-flood"):
            count = int(os.environ.get("HOSTILE_FLOOD_REQUESTS", "50000"))
            params = {"sessionId": turn.session_id, "path": os.path.join(turn.session.cwd, "missing.txt")}
            ids = [await self.peer.send_request("fs/read_text_file", params, validate=False) for _ in range(count)]
            errors = 0
            for rid in ids:
                resp = await self.peer.wait_response(rid, method="fs/read_text_file", timeout=60)
                errors += resp.is_error
            stderr(f"hostile: {count} requests sent, {errors} answered with an error")
            record("request-flood", {"sent": count, "errors": errors})
        return await super().prompt_turn(turn)


class IdCollision(MockAgent):
    """Every turn, sends requests whose ids are the ones the client uses for its own
    requests (0, 1, 2, and the strings "0", "1"): legal, since each side has its own
    id space.  Checks that each got its own answer; says so loudly if not."""

    async def prompt_turn(self, turn: Turn) -> str:
        if not (self.can_read_files() and self.can_write_files()):
            return await super().prompt_turn(turn)
        sid = turn.session_id
        probe = os.path.join(turn.session.cwd, "collide.txt")
        await self.client_request(turn, "fs/write_text_file", {"sessionId": sid, "path": probe, "content": "c\n"})
        wrong = []
        for rid in (0, 1, 2, "0", "1"):
            params = {"sessionId": sid, "path": probe}
            resp = await self.peer.call("fs/read_text_file", params, validate=False, id=rid)
            if resp.is_error or resp.result != {"content": "c\n"} or resp.id != rid:
                wrong.append((rid, resp.error if resp.is_error else resp.result))
        record("id-collision", {"ids": [0, 1, 2, "0", "1"], "wrong": wrong})
        if wrong:
            stderr(f"hostile: ID-COLLISION-MISMATCH {wrong}")
            await self.send_update(sid, {"sessionUpdate": "id-collision-mismatch"})
        return await super().prompt_turn(turn)


# ------------------------------------------------------------------ sandbox
class SandboxEscape(MockAgent):
    """Every turn, tries to reach outside the sandbox through the client's fs and
    terminals, and reports everything it got back in the conversation (so any
    leak would land in the transcript and the report)."""

    async def prompt_turn(self, turn: Turn) -> str:
        sid, cwd = turn.session_id, turn.session.cwd
        canary = os.environ.get("HOSTILE_CANARY", "/etc/hostname")
        rel = os.path.relpath(canary, cwd)
        inside = Path(cwd)
        self._plant(inside, canary)
        reads = [
            f"{cwd}/{rel}",
            canary,
            "/etc/passwd",
            "/proc/self/environ",
            f"/proc/{os.getppid()}/environ",
            "/dev/zero",
            f"{cwd}/link-to-canary",
            f"{cwd}/link-to-dir/{os.path.basename(canary)}",
            f"{cwd}/fifo",
            f"{cwd}/huge.bin",
            f"{cwd}/latin1.txt",
            f"{cwd}/hardlink",
            f"{cwd}/loop",
            f"{cwd}/{'a' * 300}",
            f"{cwd}/../../../../../../../../../../proc/self/cwd/{rel}",
        ]
        writes = [
            f"{cwd}/{rel}",
            canary,
            f"{cwd}/link-to-canary",
            f"{cwd}/link-to-dir/escaped.txt",
            f"{cwd}/dangling",
            f"{cwd}/fifo",
            f"{cwd}/hardlink",
            f"{os.path.dirname(canary)}/escaped.txt",
            "/dev/null",
        ]
        report: list[str] = []
        for path in reads:
            resp = await self.client_request(turn, "fs/read_text_file", {"sessionId": sid, "path": path}, timeout=10)
            report.append(f"read {path}: {_outcome(resp)}")
        for path in writes:
            params = {"sessionId": sid, "path": path, "content": "pwned by the agent\n"}
            resp = await self.client_request(turn, "fs/write_text_file", params, timeout=10)
            report.append(f"write {path}: {_outcome(resp)}")
        for command, args in (("env", []), ("printenv", []), ("sh", ["-c", f"cat {canary}"]), ("cat", [canary])):
            create = await self.client_request(
                turn, "terminal/create", {"sessionId": sid, "command": command, "args": args, "cwd": cwd}, timeout=10
            )
            if create is None or create.is_error:
                report.append(f"terminal {command}: {_outcome(create)}")
                continue
            ref = {"sessionId": sid, "terminalId": create.result["terminalId"]}
            out = await self.client_request(turn, "terminal/output", ref, timeout=10)
            report.append(f"terminal {command} {args}: {_outcome(out)}")
            await self.client_request(turn, "terminal/release", ref, timeout=10)
        for line in report:
            await self.emit(turn, self.message_chunk("agent_message_chunk", line + "\n", None))
        for line in report:
            record("sandbox-escape", line)
        return END_TURN

    @staticmethod
    def _plant(inside: Path, canary: str) -> None:
        """What a local agent can do to the sandbox directly: links, a FIFO, odd files."""
        plants: list[tuple[str, Callable[[Path], object]]] = [
            ("link-to-canary", lambda p: p.symlink_to(canary)),
            ("link-to-dir", lambda p: p.symlink_to(os.path.dirname(canary), target_is_directory=True)),
            ("dangling", lambda p: p.symlink_to(os.path.join(os.path.dirname(canary), "dangling-target.txt"))),
            ("loop", lambda p: p.symlink_to(p)),
            ("fifo", lambda p: os.mkfifo(p)),
            ("hardlink", lambda p: os.link(canary, p)),
            ("huge.bin", lambda p: _sparse(p, 64 * MIB)),
            ("latin1.txt", lambda p: p.write_bytes("café crème\n".encode("latin-1"))),
        ]
        for name, make in plants:
            path = inside / name
            if path.is_symlink() or path.exists():
                continue
            try:
                make(path)
            except OSError as exc:
                stderr(f"hostile: could not plant {name}: {exc}")


def _sparse(path: Path, size: int) -> None:
    with open(path, "wb") as f:
        f.truncate(size)


def _outcome(resp: Any) -> str:
    if resp is None:
        return "no answer"
    if resp.is_error:
        err = resp.error if isinstance(resp.error, dict) else {}
        return f"error {err.get('code')}: {err.get('message')}"
    return f"result {orjson.dumps(resp.result)[:2000].decode('utf-8', 'replace')}"


# ------------------------------------------------------------------ secrets
def _secrets() -> list[str]:
    """The values to leak: of the variables named in ``HOSTILE_ECHO_VARS`` only (never real CI secrets)."""
    names = [n for n in os.environ.get("HOSTILE_ECHO_VARS", "").split(",") if n]
    return [os.environ[n] for n in names if os.environ.get(n)]


class SecretEcho(MockAgent):
    """Echoes the values of the environment variables named in ``HOSTILE_ECHO_VARS``
    (secret-looking ones, set by the test) everywhere it can:
    agentInfo, stderr, message chunks, error messages, a schema-invalid update,
    and the stderr tail of a turn that never ends (prompts containing "second line")."""

    validate_outbound = False

    def agent_info(self) -> Json:
        return {**super().agent_info(), "title": "leaks " + " ".join(_secrets())}

    async def on_start(self) -> None:
        for value in _secrets():
            stderr(f"hostile: my API key is {value}")

    async def handle_new_session(self, req: Request) -> Any:
        result = await super().handle_new_session(req)
        for value in _secrets():
            stderr(f"hostile: session created with token={value}")
        return result

    def install_handlers(self, peer: Peer) -> None:
        super().install_handlers(peer)

        async def unknown(req: Request) -> Any:
            # The wrong code, so the check fails and its message quotes this error.
            raise HandlerError(-32603, f"no {req.method} for you (auth {' '.join(_secrets())})")

        peer.default_handler = unknown

    async def prompt_turn(self, turn: Turn) -> str:
        for value in _secrets():
            await self.emit(turn, self.message_chunk("agent_message_chunk", f"the secret is {value}", None))
            # Schema-invalid on purpose: the validator's message quotes the value.
            await self.send_update(turn.session_id, {"sessionUpdate": value})
        if "second line" in turn.text:  # the escaped-newlines test: stall, with the secret in stderr
            stderr(f"hostile: stuck; OPENAI_API_KEY={' '.join(_secrets())}")
            await anyio.sleep_forever()
        return await super().prompt_turn(turn)


# ------------------------------------------------------------------ registry
@dataclass(frozen=True)
class Hostile:
    """One hostile agent: how to run it and what it does."""

    run: Callable[[list[str]], int]
    does: str


def _agent(cls: type[MockAgent]) -> Callable[[list[str]], int]:
    return lambda argv: mock_main(argv, agent_cls=cls)


def _plain(fn: Callable[[], int]) -> Callable[[list[str]], int]:
    return lambda argv: fn()


HOSTILE: dict[str, Hostile] = {
    "silent": Hostile(_plain(silent), "never writes a byte (reads stdin until EOF)"),
    "answers-some": Hostile(_agent(AnswersSome), "answers every request but session/prompt"),
    "wrong-session-new-id": Hostile(_agent(WrongSessionNewId), "answers session/new under an id we never sent"),
    "partial-frame": Hostile(_agent(PartialFrame), "writes half a response line, no newline, then hangs"),
    "huge-line": Hostile(_agent(HugeLine), "a 100 MiB line at the start of every turn"),
    "stdout-flood": Hostile(_agent(StdoutFlood), "200,000 valid notifications at full speed (once per run)"),
    "stderr-flood": Hostile(_agent(StderrFlood), "32 MiB of stderr once, 1 MiB per process, a 1 MiB line, binary"),
    "binary-garbage": Hostile(_agent(BinaryGarbage), "a line of binary after every frame, and 64 KiB random bytes"),
    "stdout-closed": Hostile(_plain(stdout_closed), "answers initialize, closes stdout, keeps running"),
    "exits-mid-turn": Hostile(_agent(ExitsMidTurn), "dies (status 3) in the middle of every turn"),
    "immortal": Hostile(_agent(Immortal), "ignores stdin EOF and SIGTERM"),
    "grandchildren": Hostile(grandchildren, "leaves sleepers holding its pipes: same group, new group, new session"),
    "undying": Hostile(undying, "ignores stdin EOF and SIGTERM, and leaves a sleeper in a new session"),
    "daemon": Hostile(daemon, "leaves a double-forked daemon with no stdio and an empty environment"),
    "launcher": Hostile(launcher, "starts the agent in a new process group and exits; the agent ignores EOF"),
    "request-flood": Hostile(_agent(RequestFlood), "50,000 fs requests at once without reading answers (once)"),
    "id-collision": Hostile(_agent(IdCollision), "sends requests with the same ids as ours, and a reused id"),
    "sandbox-escape": Hostile(_agent(SandboxEscape), "fs and terminal requests aimed outside the sandbox"),
    "secret-echo": Hostile(_agent(SecretEcho), "echoes secret-looking environment values everywhere"),
}

if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] not in HOSTILE:
        print(f"usage: {sys.argv[0]} NAME [mock_agent options]; NAME one of: {', '.join(HOSTILE)}", file=sys.stderr)
        sys.exit(2)
    sys.exit(HOSTILE[sys.argv[1]].run(sys.argv[2:]))
