"""The client mocks run a hostile peer's fs and terminal requests: they must not be a way out.

Attacks on ``acp_conformance.client.Sandbox`` (and through ``ClientEndpoint``
over the wire): traversal, absolute paths, symlinks planted inside pointing
out, /proc, devices and FIFOs, hard links to outside files, huge and
non-UTF-8 files, symlink loops, over-long names, a directory swapped for a
symlink between the check and the use.  Each is refused with a JSON-RPC
error (never an exception, never a hang), and nothing outside the root is
read or written.  Terminals are virtual: nothing runs, and ``env`` shows the
sandbox's environment, not ours.
"""

from __future__ import annotations

import contextlib
import os
import signal
import stat
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from acp_conformance.core.connection import Role
from acp_conformance.endpoints.client import MAX_READ_BYTES, ClientEndpoint, Sandbox, VirtualTerminals
from acp_conformance.peer import HandlerError, Peer
from acp_conformance.transport import memory_pair

INVALID_PARAMS, INTERNAL_ERROR, RESOURCE_NOT_FOUND = -32602, -32603, -32002
SECRET = "top secret canary 9f2c\n"
SID = "sess-1"


def snapshot(path: Path) -> dict[str, tuple[int, bytes | str | None]]:
    """Every entry under ``path``: (mode, content / link target), to prove nothing changed."""
    out: dict[str, tuple[int, bytes | str | None]] = {}
    for dirpath, dirnames, filenames in os.walk(path):
        for name in dirnames + filenames:
            p = Path(dirpath, name)
            st = p.lstat()
            if stat.S_ISLNK(st.st_mode):
                out[str(p.relative_to(path))] = (st.st_mode, os.readlink(p))
            elif stat.S_ISREG(st.st_mode):
                out[str(p.relative_to(path))] = (st.st_mode, p.read_bytes())
            else:
                out[str(p.relative_to(path))] = (st.st_mode, None)
    return out


@pytest.fixture
def box(tmp_path: Path) -> tuple[Sandbox, Path, Path]:
    """(sandbox, its root, a directory outside it) with the attacker's plants in the root."""
    root, outside = tmp_path / "root", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    (outside / "secret.txt").write_text(SECRET)
    (root / "ok.txt").write_text("fine\n")
    (root / "sub").mkdir()
    (root / "link-file").symlink_to(outside / "secret.txt")
    (root / "link-dir").symlink_to(outside, target_is_directory=True)
    (root / "link-root").symlink_to("/", target_is_directory=True)
    (root / "link-proc").symlink_to("/proc/self", target_is_directory=True)
    (root / "chain-1").symlink_to(root / "chain-2")
    (root / "chain-2").symlink_to(root / "link-file")
    (root / "dangling").symlink_to(outside / "not-yet.txt")
    (root / "loop").symlink_to(root / "loop")
    os.mkfifo(root / "fifo")
    os.link(outside / "secret.txt", root / "hardlink")
    with open(root / "huge.bin", "wb") as f:
        f.truncate(MAX_READ_BYTES + 1)
    (root / "latin1.txt").write_bytes("café\n".encode("latin-1"))
    (root / "binary.bin").write_bytes(b"\x00\x01\xfe\xff" * 64)
    return Sandbox(root), root, outside


def refused(fn: Callable[[], Any], *codes: int) -> HandlerError:
    with pytest.raises(HandlerError) as info:
        fn()
    assert info.value.code in (codes or (INVALID_PARAMS,)), info.value.message
    assert info.value.message, "an error a person can read"
    return info.value


ESCAPES = [
    "{root}/../outside/secret.txt",
    "{root}/sub/../../outside/secret.txt",
    "{root}/sub/../../../../../../../../../..{outside}/secret.txt",
    "{outside}/secret.txt",
    "/etc/passwd",
    "/proc/self/environ",
    "/proc/self/cwd/secret.txt",
    "/proc/self/root/etc/passwd",
    "/dev/zero",
    "/dev/urandom",
    "{root}/link-file",
    "{root}/link-dir/secret.txt",
    "{root}/link-root/etc/passwd",
    "{root}/link-proc/environ",
    "{root}/chain-1",
    "{root}/dangling",
]


def escape(template: str, root: Path, outside: Path) -> str:
    return template.format(root=root, outside=outside)


@pytest.mark.parametrize("template", ESCAPES)
def test_paths_leading_outside_are_refused_both_ways(box: tuple[Sandbox, Path, Path], template: str) -> None:
    sandbox, root, outside = box
    path = escape(template, root, outside)
    before = snapshot(root.parent)
    assert "outside the session sandbox" in refused(lambda: sandbox.read(path)).message
    assert "outside the session sandbox" in refused(lambda: sandbox.write(path, "pwned")).message
    assert snapshot(root.parent) == before
    assert sandbox.reads == [] and sandbox.writes == []


@contextlib.contextmanager
def no_hang(seconds: int) -> Iterator[None]:
    """Turn a blocking call (a FIFO opened without a peer) into a failure instead of a hung run."""

    def expired(signum: int, frame: Any) -> None:
        raise AssertionError(f"blocked for more than {seconds} s")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


@pytest.mark.parametrize(
    ("name", "why"),
    [
        ("fifo", "not a regular file"),  # opening it would block the whole suite
        ("hardlink", "hard links"),  # the same inode as a file outside
        ("loop", "symlink loop"),
        ("a" * 300, "File name too long"),
    ],
)
def test_special_files_planted_inside_are_refused_without_blocking(
    box: tuple[Sandbox, Path, Path], name: str, why: str
) -> None:
    sandbox, root, outside = box
    before = snapshot(root.parent)
    with no_hang(5):
        assert why in refused(lambda: sandbox.read(f"{root}/{name}")).message
        assert why in refused(lambda: sandbox.write(f"{root}/{name}", "pwned")).message
    assert snapshot(root.parent) == before
    assert (outside / "secret.txt").read_text() == SECRET


@pytest.mark.skipif(not hasattr(os, "mknod"), reason="no mknod")
def test_device_node_inside_is_refused(box: tuple[Sandbox, Path, Path]) -> None:
    sandbox, root, _ = box
    try:
        os.mknod(root / "zero", stat.S_IFCHR | 0o600, os.makedev(1, 5))
    except PermissionError:
        pytest.skip("creating a device node needs CAP_MKNOD")
    assert "not a regular file" in refused(lambda: sandbox.read(f"{root}/zero")).message
    assert "not a regular file" in refused(lambda: sandbox.write(f"{root}/zero", "x")).message


def test_huge_and_non_utf8_files_are_errors(box: tuple[Sandbox, Path, Path]) -> None:
    sandbox, root, _ = box
    assert f"larger than {MAX_READ_BYTES} bytes" in refused(lambda: sandbox.read(f"{root}/huge.bin")).message
    assert "not UTF-8" in refused(lambda: sandbox.read(f"{root}/latin1.txt")).message
    assert "not UTF-8" in refused(lambda: sandbox.read(f"{root}/binary.bin")).message


@pytest.mark.parametrize(
    "path", ["", "relative.txt", None, 42, ["/etc/passwd"], "/etc/passwd\x00", "{root}/ok.txt\x00.png"]
)
def test_malformed_paths_are_invalid_params(box: tuple[Sandbox, Path, Path], path: Any) -> None:
    sandbox, root, _ = box
    if isinstance(path, str):
        path = path.format(root=root)
    refused(lambda: sandbox.read(path))
    refused(lambda: sandbox.write(path, "x"))


def test_directories_are_not_files(box: tuple[Sandbox, Path, Path]) -> None:
    sandbox, root, _ = box
    refused(lambda: sandbox.read(str(root)), RESOURCE_NOT_FOUND)
    refused(lambda: sandbox.read(f"{root}/sub"), RESOURCE_NOT_FOUND)
    assert "is a directory" in refused(lambda: sandbox.write(str(root), "x")).message
    assert "is a directory" in refused(lambda: sandbox.write(f"{root}/sub", "x")).message


def test_writing_inside_works_and_creates_parents(box: tuple[Sandbox, Path, Path]) -> None:
    sandbox, root, _ = box
    sandbox.write(f"{root}/new/deep/file.txt", "héllo\n")
    assert (root / "new" / "deep" / "file.txt").read_text("utf-8") == "héllo\n"
    sandbox.write(f"{root}/ok.txt", "shorter")
    assert sandbox.read(f"{root}/ok.txt") == "shorter"  # truncated, not overlaid
    assert sandbox.read(f"{root}/sub/../ok.txt") == "shorter"


def test_content_with_a_lone_surrogate_is_invalid_params(box: tuple[Sandbox, Path, Path]) -> None:
    """JSON can encode a lone surrogate (``"\\ud800"``); no file can hold it, so it is the agent's error."""
    sandbox, root, _ = box
    assert "lone surrogate" in refused(lambda: sandbox.write(f"{root}/new.txt", "a\ud800b"), INVALID_PARAMS).message
    assert not (root / "new.txt").exists()


@pytest.mark.parametrize("op", ["read", "write"])
def test_directory_swapped_for_a_symlink_after_the_check_is_refused(
    box: tuple[Sandbox, Path, Path], monkeypatch: pytest.MonkeyPatch, op: str
) -> None:
    """The time-of-check/time-of-use race: ``sub`` is checked as a directory inside,
    then replaced by a link to the outside before it is used."""
    sandbox, root, outside = box
    (root / "sub" / "secret.txt").write_text("inside\n")
    real_resolve = Sandbox.resolve

    def resolve_then_swap(self: Sandbox, path: Any) -> Path:
        real = real_resolve(self, path)
        (root / "sub" / "secret.txt").unlink()
        (root / "sub").rmdir()
        (root / "sub").symlink_to(outside, target_is_directory=True)
        return real

    monkeypatch.setattr(Sandbox, "resolve", resolve_then_swap)
    before = snapshot(outside)
    if op == "read":
        error = refused(lambda: sandbox.read(f"{root}/sub/secret.txt"), INVALID_PARAMS, RESOURCE_NOT_FOUND)
        assert SECRET.strip() not in error.message
    else:
        refused(lambda: sandbox.write(f"{root}/sub/secret.txt", "pwned"), INVALID_PARAMS, INTERNAL_ERROR)
    assert snapshot(outside) == before
    assert (outside / "secret.txt").read_text() == SECRET


@pytest.mark.parametrize("op", ["read", "write"])
def test_file_swapped_for_a_fifo_after_the_check_does_not_block(
    box: tuple[Sandbox, Path, Path], monkeypatch: pytest.MonkeyPatch, op: str
) -> None:
    sandbox, root, _ = box
    real_resolve = Sandbox.resolve

    def resolve_then_swap(self: Sandbox, path: Any) -> Path:
        real = real_resolve(self, path)
        (root / "ok.txt").unlink()
        os.mkfifo(root / "ok.txt")
        return real

    monkeypatch.setattr(Sandbox, "resolve", resolve_then_swap)
    with no_hang(5):
        if op == "read":
            assert "not a regular file" in refused(lambda: sandbox.read(f"{root}/ok.txt")).message
        else:
            assert "not a regular file" in refused(lambda: sandbox.write(f"{root}/ok.txt", "x")).message


# --------------------------------------------------------------- over the wire
@pytest.mark.anyio
async def test_attacks_over_the_wire_are_json_rpc_errors(box: tuple[Sandbox, Path, Path]) -> None:
    sandbox, root, outside = box
    agent_end, client_end = memory_pair()
    before = snapshot(outside)
    planted = [f"{root}/{n}" for n in ("fifo", "hardlink", "loop", "a" * 300)]
    both = [escape(t, root, outside) for t in ESCAPES] + planted
    read_only = [f"{root}/huge.bin", f"{root}/latin1.txt"]  # (writing them is fine: they are inside)
    with no_hang(30), anyio.fail_after(20):  # fail_after cannot interrupt a blocked event loop; the alarm can
        async with (
            Peer(client_end, Role.CLIENT, timeout=5) as client,
            Peer(agent_end, Role.AGENT, timeout=5) as agent,
        ):
            ClientEndpoint(client, sandbox=sandbox)
            for path in both + read_only:
                answers = [await agent.call("fs/read_text_file", {"sessionId": SID, "path": path})]
                if path in both:
                    params = {"sessionId": SID, "path": path, "content": "pwned"}
                    answers.append(await agent.call("fs/write_text_file", params))
                for resp in answers:
                    assert resp.is_error and resp.error["code"] in (INVALID_PARAMS, RESOURCE_NOT_FOUND), (path, resp)
                    assert SECRET.strip().encode() not in resp.raw
            notes = [e.text() for e in client.transcript.entries if e.direction == "note"]
            assert not [n for n in notes if "internal error" in n], notes
    assert snapshot(outside) == before


# ------------------------------------------------------------------ terminals
def test_terminals_are_virtual_and_show_the_sandbox_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ACP_TEST_SECRET_TOKEN", "user-only-token-5e1d")
    terms = VirtualTerminals()
    cwd = str(tmp_path)
    made = tmp_path / "made-by-terminal"

    def run(command: str, *args: str, env: list[dict[str, str]] | None = None) -> tuple[str, int | None]:
        tid = terms.create({"command": command, "args": list(args), "cwd": cwd, "env": env or []})
        term = terms.get(tid)
        return term.output, term.exit_code

    output, code = run("env", env=[{"name": "AGENT_SET", "value": "yes"}])
    assert code == 0
    shown = dict(line.split("=", 1) for line in output.splitlines())
    assert shown["PWD"] == shown["HOME"] == cwd and shown["AGENT_SET"] == "yes"
    for name, value in os.environ.items():
        if len(value) >= 6 and value not in (cwd, "C.UTF-8", "/bin/sh", "dumb") and name not in shown:
            assert value not in output, f"the user's {name} is visible in a terminal"
    assert run("printenv", "ACP_TEST_SECRET_TOKEN") == ("", 1)
    assert run("printenv", "PWD") == (cwd + "\n", 0)
    assert run("echo", "$ACP_TEST_SECRET_TOKEN") == ("$ACP_TEST_SECRET_TOKEN\n", 0)  # no expansion
    assert run("sh", "-c", f"touch {made}; cat /etc/passwd") == ("", 0)  # nothing runs
    assert run("touch", str(made)) == ("", 0)
    assert not made.exists()


def test_process_environment_is_not_touched_by_terminals() -> None:
    before = dict(os.environ)
    VirtualTerminals().create({"command": "env", "env": [{"name": "PATH", "value": "/evil"}]})
    assert dict(os.environ) == before
