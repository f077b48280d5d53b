"""The relay agent: what a client under test launches during client certification.

``python -m acp_conformance.harness.relay --control ADDR [--token T]`` (also reachable as
``python -m mock_agent.relay``, the name editors are configured with) connects back to the
test process (``acp_conformance.harness.control``) and becomes a byte relay:
everything the client writes on its stdin goes to the test, and whatever
the test sends comes out on its stdout (or stderr).  The test plays the
agent in-process and sees every frame; this program only moves bytes.

stdout is sacred: nothing but the bytes the test sends is ever written
there.  Diagnostics go to stderr.  The relay starts fast (standard library
only), exits when the test tells it to or as soon as the control socket
closes, and reports the signals it receives before dying of them.
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import signal
import socket
import struct
import sys
import threading
from collections.abc import Sequence
from types import FrameType

__all__ = ["main"]

HEADER = struct.Struct(">cI")
# relay -> suite
HELLO, STDIN, STDIN_EOF, SIGNAL, STDOUT_BROKEN = b"H", b"I", b"Z", b"S", b"B"
# suite -> relay
STDOUT, STDERR, CLOSE_STDOUT, EXIT = b"O", b"E", b"C", b"X"
READ_CHUNK = 64 * 1024


def _connect(address: str, timeout: float) -> socket.socket:
    kind, _, rest = address.partition(":")
    if kind == "unix":
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(timeout)
        sock.connect(rest)
    elif kind == "tcp":
        host, _, port = rest.rpartition(":")
        sock = socket.create_connection((host, int(port)), timeout=timeout)
    else:
        raise ValueError(f"unsupported control address {address!r} (want unix:PATH or tcp:HOST:PORT)")
    sock.settimeout(None)
    return sock


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


class Relay:
    """Moves bytes; every socket write goes through one writer thread, so a
    signal arriving at any moment can still report itself without deadlock."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.outq: queue.SimpleQueue[tuple[bytes, threading.Event | None]] = queue.SimpleQueue()  # put() is signal-safe
        self.stdout_ok = True

    def writer_loop(self) -> None:
        while True:
            frame, done = self.outq.get()
            try:
                self.sock.sendall(frame)
            except OSError:
                pass
            if done is not None:
                done.set()

    def send(self, kind: bytes, payload: bytes = b"") -> threading.Event:
        done = threading.Event()
        self.outq.put((HEADER.pack(kind, len(payload)) + payload, done))
        return done

    def stdin_loop(self) -> None:
        while True:
            try:
                data = os.read(0, READ_CHUNK)
            except OSError:
                data = b""
            if not data:
                self.send(STDIN_EOF)
                return
            self.send(STDIN, data)

    def on_signal(self, signum: int, frame: FrameType | None) -> None:
        self.send(SIGNAL, str(signum).encode()).wait(1.0)
        os._exit(128 + signum)

    def handle(self, kind: bytes, payload: bytes) -> int | None:
        if kind == STDOUT:
            if self.stdout_ok:
                try:
                    _write_all(1, payload)
                except OSError:
                    self.stdout_ok = False
                    self.send(STDOUT_BROKEN)
        elif kind == STDERR:
            try:
                _write_all(2, payload)
            except OSError:
                pass
        elif kind == CLOSE_STDOUT:
            if self.stdout_ok:
                self.stdout_ok = False
                try:
                    os.close(1)
                except OSError:
                    pass
        elif kind == EXIT:
            try:
                return int(payload or b"0")
            except ValueError:
                return 0
        return None

    def run(self) -> int:
        buf = bytearray()
        while True:
            try:
                chunk = self.sock.recv(256 * 1024)
            except OSError:
                chunk = b""
            if not chunk:
                return 0  # the test is gone: so are we
            buf += chunk
            while len(buf) >= HEADER.size:
                kind, size = HEADER.unpack_from(buf)
                end = HEADER.size + size
                if len(buf) < end:
                    break
                payload = bytes(buf[HEADER.size : end])
                del buf[:end]
                code = self.handle(kind, payload)
                if code is not None:
                    return code


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m acp_conformance.harness.relay",
        description="Byte relay between a client under test and the acp-conformance test process.",
    )
    parser.add_argument("--control", required=True, metavar="ADDR", help="unix:/path/to/socket or tcp:127.0.0.1:PORT")
    parser.add_argument("--token", default="", help="the token the test process expects")
    parser.add_argument("--connect-timeout", type=float, default=10.0, help="seconds to wait for the connection")
    args = parser.parse_args(argv)
    try:
        sock = _connect(args.control, args.connect_timeout)
    except (OSError, ValueError) as exc:
        sys.stderr.write(f"acp relay: cannot reach the test process at {args.control}: {exc}\n")
        return 2
    relay = Relay(sock)
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, relay.on_signal)
    hello = {
        "pid": os.getpid(),
        "ppid": os.getppid(),
        "argv": sys.argv,
        "cwd": os.getcwd(),
        "token": args.token,
        "env_keys": sorted(os.environ),
    }
    threading.Thread(target=relay.writer_loop, name="writer", daemon=True).start()
    relay.send(HELLO, json.dumps(hello).encode())
    threading.Thread(target=relay.stdin_loop, name="stdin", daemon=True).start()
    code = relay.run()
    relay.send(b"\0").wait(1.0)  # flush what is queued (a no-op frame the suite ignores)
    try:
        sock.close()
    finally:
        os._exit(code)


if __name__ == "__main__":
    sys.exit(main())
