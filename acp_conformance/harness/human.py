"""The person at the terminal, in the editor modes of client certification.

In ``agent-initiated`` and ``manual`` modes a person drives the client under test (launches
the agent from the editor, types the prompt).  pytest captures stdout and stderr, so the
instructions go to ``/dev/tty`` directly (stderr when there is none) and the answers come from
it, on a worker thread so the test's deadlines keep running.
"""

from __future__ import annotations

import sys
from typing import IO

from acp_conformance.errors import ConfigurationError

__all__ = ["MODES", "TerminalHuman", "tty_available"]

#: How a client under test is driven: ``auto`` starts it per test; in ``agent-initiated`` a
#: person launches the agent from the editor and sends one prompt per test; ``manual`` adds
#: guided steps.  (Here, not in the harness, so ``pytest --help`` lists them without importing
#: anyio.)
MODES = ("auto", "agent-initiated", "manual")


def tty_available() -> bool:
    """Whether this process can talk to a person (manual mode needs one)."""
    try:
        with open("/dev/tty", "r+b", buffering=0):
            return True
    except OSError:
        return False


class TerminalHuman:
    """Talks to the person on /dev/tty (stderr when there is none), whatever pytest captures."""

    def __init__(self) -> None:
        self._tty: IO[str] | None = None
        try:
            self._tty = open("/dev/tty", "r+", buffering=1, encoding="utf-8")
        except OSError:
            self._tty = None

    def say(self, text: str) -> None:
        out = self._tty or sys.__stderr__
        if out is None:
            return
        out.write("\n" + "=" * 70 + "\n" + text + "\n" + "=" * 70 + "\n")
        out.flush()

    async def ask(self, question: str, choices: tuple[str, ...]) -> str:
        import anyio.to_thread

        answer: str = await anyio.to_thread.run_sync(self._ask, question, choices, abandon_on_cancel=True)
        return answer

    def _ask(self, question: str, choices: tuple[str, ...]) -> str:
        if self._tty is None:
            raise ConfigurationError("no terminal to ask the question on")
        while True:
            self._tty.write(f"{question} [{'/'.join(choices)}] ")
            self._tty.flush()
            answer = self._tty.readline().strip().lower()
            if answer in choices:
                return answer

    def close(self) -> None:
        if self._tty is not None:
            self._tty.close()
            self._tty = None
