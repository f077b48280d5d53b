"""How much a campaign against a live peer fuzzes, from which seed, and how a failure is replayed.

Budget and replay (the plugin options ``--acp-fuzz-examples``,
``--acp-fuzz-seconds``, ``--acp-fuzz-shrink-seconds`` and ``--acp-fuzz-seed`` set the first
four variables;
the plugin resolves ``random`` once, before xdist workers start):

* ``ACP_FUZZ_EXAMPLES`` examples per campaign (default 25);
* ``ACP_FUZZ_SECONDS`` wall-clock budget for generating examples, per
  campaign (default 20); once spent, frames not yet tried count as not
  run; shrinking a failure gets a third of it more (at least 2 s, at most 30 s);
* ``ACP_FUZZ_SHRINK_SECONDS`` the time to shrink one failure instead (a CI
  job, or a proof, that wants the finding rather than the smallest example);
* ``ACP_FUZZ_SEED`` an integer (default 0: every run fuzzes the same
  frames, so results are reproducible and equal under xdist), or ``random``;
* ``ACP_FUZZ_REPLAY`` the ``reproduce_failure`` blob a report names, to
  replay exactly that failing example;
* ``ACP_FUZZ_DATABASE`` a directory for Hypothesis's example database
  (default: none, nothing is written).
"""

from __future__ import annotations

import os
import re
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from hypothesis import settings
    from hypothesis.database import ExampleDatabase

from acp_conformance.errors import ConfigurationError

ENV_EXAMPLES = "ACP_FUZZ_EXAMPLES"
ENV_SECONDS = "ACP_FUZZ_SECONDS"
ENV_SHRINK_SECONDS = "ACP_FUZZ_SHRINK_SECONDS"
ENV_PATIENCE = "ACP_FUZZ_PATIENCE"
ENV_SEED = "ACP_FUZZ_SEED"
ENV_REPLAY = "ACP_FUZZ_REPLAY"
ENV_DATABASE = "ACP_FUZZ_DATABASE"
#: The most a campaign spends shrinking one failure (see ``FuzzBudget.shrink_seconds``).
MAX_SHRINK_SECONDS = 30.0


@dataclass(frozen=True)
class FuzzBudget:
    """How much to fuzz, and from which seed (see the module docstring)."""

    examples: int = 25
    seconds: float = 20.0
    seed: int = 0
    replay: str | None = None
    database: str | None = None
    #: Shrinking time per failure when given (``ACP_FUZZ_SHRINK_SECONDS``); see ``shrink_seconds``.
    shrink: float | None = None
    #: How long an example waits for the answer to a frame the spec forbids us to send, while
    #: the peer writes nothing (``ACP_FUZZ_PATIENCE``); at most the deadline, see ``FrameFuzzer.patience``.
    patience: float = 5.0

    @classmethod
    def from_env(cls, environ: Any = None) -> FuzzBudget:
        env = os.environ if environ is None else environ
        examples = _int(env, ENV_EXAMPLES, cls.examples, minimum=1)
        seconds = _float(env, ENV_SECONDS, cls.seconds)
        raw_seed = env.get(ENV_SEED, "").strip()
        if raw_seed.lower() == "random":
            seed = secrets.randbits(32)
        else:
            try:
                seed = _int(env, ENV_SEED, cls.seed, minimum=0)
            except ConfigurationError:
                raise ConfigurationError(
                    f"{ENV_SEED} must be a non-negative integer or 'random', got {raw_seed!r}"
                ) from None
        shrink = _float(env, ENV_SHRINK_SECONDS, 0.0) if env.get(ENV_SHRINK_SECONDS, "").strip() else None
        patience = _float(env, ENV_PATIENCE, cls.patience)
        replay, database = env.get(ENV_REPLAY) or None, env.get(ENV_DATABASE) or None
        return cls(examples, seconds, seed, replay, database, shrink, patience)

    @property
    def shrink_seconds(self) -> float:
        """Time allowed for shrinking one failure: a third of the generation budget, at least 2 s,
        at most ``MAX_SHRINK_SECONDS``.  Against a live peer every try is a whole exchange (a
        wedged peer costs a deadline each), and a budget raised so that examples, not the clock,
        bound the campaign (``--acp-fuzz-seconds=600``) must not buy minutes of shrinking."""
        if self.shrink is not None:
            return self.shrink
        return min(MAX_SHRINK_SECONDS, max(2.0, self.seconds / 3))

    def describe(self) -> str:
        return f"seed {self.seed}, up to {self.examples} examples in {self.seconds:g} s"

    def replay_hint(self, blob: str | None, clause: str, key: str = "", role: str = "agent") -> str:
        line = f"{ENV_SEED}={self.seed}"
        if blob:
            line += f" {ENV_REPLAY}={blob}"
        hint = f"replay: {line} pytest --acp-{role}=... --acp-clause={clause}"
        if self.database:
            hint += f"; saved in the example database {self.database}" + (f" under key {key!r}" if key else "")
        return hint

    def database_obj(self) -> ExampleDatabase | None:
        from hypothesis.database import DirectoryBasedExampleDatabase

        return DirectoryBasedExampleDatabase(self.database) if self.database else None


def _int(env: Any, name: str, default: int, *, minimum: int) -> int:
    raw = env.get(name, "").strip()
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ConfigurationError(f"{name} must be an integer, got {raw!r}") from None
    if value < minimum:
        raise ConfigurationError(f"{name} must be at least {minimum}, got {value}")
    return value


def _float(env: Any, name: str, default: float) -> float:
    raw = env.get(name, "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ConfigurationError(f"{name} must be a number of seconds, got {raw!r}") from None
    if not value > 0:
        raise ConfigurationError(f"{name} must be positive, got {raw!r}")
    return value


@contextmanager
def shrink_time_limit(seconds: float) -> Iterator[None]:
    """Bound the time Hypothesis spends shrinking a failure (against a live peer each try is costly).

    Hypothesis stops shrinking after ``MAX_SHRINKING_SECONDS`` (300 s) and
    reports the smallest failure found so far; this lowers that limit for
    the duration of one campaign.
    """
    from hypothesis.internal.conjecture import engine

    old = getattr(engine, "MAX_SHRINKING_SECONDS", None)
    if old is None:  # pragma: no cover - a Hypothesis without the knob: shrink as it likes
        yield
        return
    engine.MAX_SHRINKING_SECONDS = max(1, int(seconds))
    try:
        yield
    finally:
        engine.MAX_SHRINKING_SECONDS = old


def hypothesis_settings(budget: FuzzBudget, **overrides: Any) -> settings:
    """Settings for a campaign against a live peer: no deadline, the blob printed, the budget's database."""
    import hypothesis

    options: dict[str, Any] = {
        "max_examples": budget.examples,
        "deadline": None,
        "database": budget.database_obj(),
        "derandomize": False,
        "print_blob": True,
        "report_multiple_bugs": True,
        "suppress_health_check": list(hypothesis.HealthCheck),
        "phases": (
            hypothesis.Phase.explicit,
            hypothesis.Phase.reuse,
            hypothesis.Phase.generate,
            hypothesis.Phase.shrink,
        ),
    }
    options.update(overrides)
    return hypothesis.settings(**options)


def replay_blobs(exc: BaseException) -> Iterator[tuple[BaseException, str | None]]:
    """Each failure Hypothesis raised, with its ``reproduce_failure`` blob."""
    if isinstance(exc, BaseExceptionGroup):
        for sub in exc.exceptions:
            yield from replay_blobs(sub)
        return
    blob = None
    for note in getattr(exc, "__notes__", ()):
        m = re.search(r"@reproduce_failure\([^,]+, (b'[^']*'|b\"[^\"]*\")\)", note)
        if m:
            blob = m.group(1)[2:-1]
    yield exc, blob


def with_replay(test: Any, budget: FuzzBudget) -> Any:
    """Apply ``ACP_FUZZ_REPLAY`` (a blob, as the report prints it) to a ``@given`` test."""
    if not budget.replay:
        return test
    blob = budget.replay.strip()
    if blob.startswith(("b'", 'b"')):
        blob = blob[2:-1]
    import hypothesis

    return hypothesis.reproduce_failure(hypothesis.__version__, blob.encode())(test)
