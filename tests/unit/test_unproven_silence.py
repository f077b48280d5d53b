"""``suite._support.unless_answered_elsewhere``: which failed waits a check may not judge.

A stray (a response under an id matching nothing we sent) may have been the answer: every check
gives up on such a silence.  An exit with nothing showing the request was read proves nothing
only about the request's own answer; for another clause the exit itself may be the finding."""

from __future__ import annotations

import pytest

from acp_conformance.errors import PeerExited, PeerTimeout
from acp_conformance.plugin.outcomes import Inconclusive
from acp_conformance.suite._support import unless_answered_elsewhere

STRAY = "a response under id 424242, which matches no request we sent, came meanwhile"
UNREAD = "nothing shows it had read the request (it answered nothing we sent after it)"


@pytest.mark.parametrize("own_answer", [False, True])
def test_a_stray_makes_any_silence_unproven(own_answer: bool) -> None:
    for exc in (
        PeerTimeout(f"no response; {STRAY}", unproven=STRAY),
        PeerExited(f"closed; {STRAY}", read_proven=True, unproven=STRAY),
    ):
        with pytest.raises(Inconclusive, match="424242"):
            unless_answered_elsewhere(exc, own_answer=own_answer)


def test_an_unread_exit_is_unproven_only_for_the_requests_own_answer() -> None:
    unread = PeerExited(f"closed; {UNREAD}", read_proven=False, unproven=UNREAD)
    unless_answered_elsewhere(unread)  # another clause: the exit may be its finding
    with pytest.raises(Inconclusive, match="nothing shows it had read"):
        unless_answered_elsewhere(unread, own_answer=True)


@pytest.mark.parametrize("own_answer", [False, True])
def test_a_proven_silence_is_left_to_the_check(own_answer: bool) -> None:
    unless_answered_elsewhere(PeerTimeout("no response"), own_answer=own_answer)
    unless_answered_elsewhere(PeerExited("closed", read_proven=True), own_answer=own_answer)
