"""``run_as_program``: a mock leaves without the interpreter's teardown, and loses nothing for it.

The mock agent exits through ``os._exit`` to skip ~20 ms of teardown per process (issue 18).
What must survive that shortcut is what a peer or a user reads: the exit status, every frame
written to stdout (buffered, not yet flushed) and every log line on stderr.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

PROGRAM = textwrap.dedent(
    """
    import atexit, logging, sys
    from acp_conformance._util import run_as_program

    def main() -> int:
        atexit.register(lambda: print("teardown ran", file=sys.stderr))
        logging.basicConfig(stream=sys.stderr, format="%(message)s")
        sys.stdout.write("x" * 100000 + "\\n")  # more than one buffer, the tail unflushed
        sys.stdout.write('{"jsonrpc": "2.0", "method": "last"}\\n')
        logging.getLogger("t").warning("the last log line")
        return 3

    run_as_program(main)
    """
)


def test_status_output_and_logs_survive_the_skipped_teardown() -> None:
    buffered = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}  # as users run it
    proc = subprocess.run(
        [sys.executable, "-c", PROGRAM], capture_output=True, text=True, cwd=REPO, env=buffered, timeout=60, check=False
    )
    assert proc.returncode == 3, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == "x" * 100000 and json.loads(lines[1]) == {"jsonrpc": "2.0", "method": "last"}
    assert "the last log line" in proc.stderr
    assert "teardown ran" not in proc.stderr  # the shortcut was taken: atexit work is skipped


def test_mock_agent_answers_and_exits_zero_when_stdin_closes() -> None:
    init = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": 1}}
    proc = subprocess.run(
        [sys.executable, "-m", "mock_agent", "--no-validate"],
        input=json.dumps(init) + "\n",
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["result"]["protocolVersion"] == 1
