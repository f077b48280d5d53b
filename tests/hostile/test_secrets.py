"""Secrets never reach reports or transcripts, wherever a hostile agent puts them.

End to end: the suite runs with a secret-looking variable in its environment
(``HOSTILE_API_KEY``, inherited by the agent) and another given only with
``--acp-agent-env`` (``HOSTILE_SESSION_TOKEN``); the ``secret-echo`` agent
puts both values in agentInfo, stderr, message chunks, error messages, a
schema-invalid update (whose validation message quotes the value) and the
stderr tail of a stalled turn.  In-process: the transcript's own redaction.
"""

from __future__ import annotations

import sys
from pathlib import Path

import orjson
import pytest

from acp_conformance.transcript import Transcript, redactor, register_secrets
from tests.hostile._run import HostileRun, run_hostile

SUITE_SECRET = "sk-hostile-Zq8Rw2Lm5Tx9Vb3N"  # in pytest's environment: HOSTILE_API_KEY
AGENT_SECRET = "tok-hostile-Hf4Kp7Wd2Qs6Jc"  # only in --acp-agent-env: HOSTILE_SESSION_TOKEN

needs_linux = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the hostile agents need Linux")


@pytest.fixture(scope="module")
def leaky(tmp_path_factory: pytest.TempPathFactory) -> HostileRun:
    tests = (
        "test_initialize_v1",
        "test_unknown_method_gets_method_not_found",
        "test_basic_prompt_turn",
        "test_escaped_newlines_in_strings_are_accepted",
    )
    return run_hostile(
        "secret-echo",
        tmp_path_factory.mktemp("secret-echo"),
        "-k",
        " or ".join(tests),
        "--acp-timeout=3",
        "--acp-startup-timeout=5",
        f"--acp-agent-env=HOSTILE_SESSION_TOKEN={AGENT_SECRET}",
        agent_env={"HOSTILE_ECHO_VARS": "HOSTILE_API_KEY,HOSTILE_SESSION_TOKEN"},
        suite_env={"HOSTILE_API_KEY": SUITE_SECRET},
    )


def evidence_of(run: HostileRun) -> str:
    return "\n".join(t.get("evidence", "") for c in run.report["clauses"] for t in c["tests"])


def where(text: str, secret: str) -> str:
    at = text.find(secret)
    return "" if at < 0 else f"...{text[max(0, at - 200) : at + len(secret) + 40]}..."


@needs_linux
def test_the_agent_really_leaked(leaky: HostileRun) -> None:
    """The attack ran: the checks saw the values (otherwise the tests below prove nothing)."""
    statuses = leaky.statuses()
    assert statuses["jsonrpc.unknown-method"] == "WARN"  # its error message carries the secrets
    assert statuses["update.discriminator"] == "FAIL"  # the schema-invalid update names the secret
    assert "[REDACTED]" in evidence_of(leaky)
    assert not leaky.strays


@needs_linux
def test_evidence_redacts_secrets_of_the_suites_environment(leaky: HostileRun) -> None:
    text = evidence_of(leaky)
    assert SUITE_SECRET not in text, where(text, SUITE_SECRET)


@needs_linux
def test_reports_contain_no_secret(leaky: HostileRun) -> None:
    """Neither secret, from anywhere the agent put it: failure messages ("observed ..."),
    schema messages quoting the value, the stderr tail in INCONCLUSIVE messages, agentInfo."""
    for name in ("report.json", "report.md"):
        text = leaky.files[name]
        for secret in (SUITE_SECRET, AGENT_SECRET):
            assert secret not in text, f"{name}: {where(text, secret)}"
    assert "[REDACTED]" in leaky.files["report.json"]


@needs_linux
def test_terminal_output_contains_no_secret(leaky: HostileRun) -> None:
    assert SUITE_SECRET not in leaky.suite.stdout, where(leaky.suite.stdout, SUITE_SECRET)


@needs_linux
def test_secrets_given_with_acp_agent_env_are_redacted(leaky: HostileRun) -> None:
    text = evidence_of(leaky)
    assert AGENT_SECRET not in text, where(text, AGENT_SECRET)


# ----------------------------------------------------------------- in-process
def transcript_with(secret: str, frame: bytes) -> Transcript:
    t = Transcript("agent")
    t.add("in", frame, orjson.loads(frame))
    t.add("stderr", f"debug: using key {secret}")
    t.note(f"the agent said {secret}")
    return t


@pytest.mark.parametrize("name", ["OPENAI_API_KEY", "GITHUB_TOKEN", "DB_PASSWORD", "MY_SECRET", "AWS_CREDENTIALS"])
def test_transcripts_redact_secret_values_everywhere(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    secret = "s3cr3t-value-7a8b9c"
    monkeypatch.setenv(name, secret)
    t = transcript_with(secret, orjson.dumps({"jsonrpc": "2.0", "method": "_x", "params": {"k": secret}}))
    for text in (t.to_jsonl().decode(), t.excerpt(last=10)):
        assert secret not in text
        assert text.count("[REDACTED]") == 3
    # Cut after redacting: a truncated line never shows a secret's prefix either.
    assert secret[:10] not in t.excerpt(last=10, width=30)


@pytest.mark.parametrize(
    ("secret", "why"),
    [
        ('pa"ss\\word-2024', 'a frame carries it JSON-escaped: pa\\"ss\\\\word-2024'),
        ("mötley-crüe-pw-9", "a frame carries it \\u-escaped (ensure_ascii, Python's json default)"),
    ],
)
def test_json_escaped_secrets_are_redacted_too(monkeypatch: pytest.MonkeyPatch, secret: str, why: str) -> None:
    import json

    monkeypatch.setenv("DB_PASSWORD", secret)
    t = transcript_with(secret, json.dumps({"jsonrpc": "2.0", "method": "_x", "params": {"k": secret}}).encode())
    escaped = json.dumps(secret)[1:-1]
    assert escaped != secret
    saved = [orjson.loads(line)["raw"] for line in t.to_jsonl().splitlines()]
    assert escaped not in saved[0], why
    assert escaped not in t.excerpt(last=10), why


def test_pass_suffix_names_are_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SMTP_PASS", "hunter2-hunter2")
    assert redactor()("login with hunter2-hunter2") == "login with [REDACTED]"


def test_short_and_unrelated_values_are_left_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SOME_TOKEN", "abc")  # too short to redact without mangling ordinary text
    monkeypatch.setenv("EDITOR_THEME", "solarized-dark")
    assert redactor()("abc solarized-dark") == "abc solarized-dark"


def test_redaction_works_on_a_saved_transcript_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What goes to disk (to_jsonl) is redacted; loading it back is plain data."""
    monkeypatch.setenv("HOSTILE_API_KEY", SUITE_SECRET)
    t = transcript_with(SUITE_SECRET, orjson.dumps({"jsonrpc": "2.0", "method": "_x", "params": {"k": SUITE_SECRET}}))
    path = tmp_path / "t.jsonl"
    path.write_bytes(t.to_jsonl())
    assert SUITE_SECRET.encode() not in path.read_bytes()
    again = Transcript.from_jsonl(path.read_bytes())
    assert [e.direction for e in again.entries] == ["in", "stderr", "note"]


@pytest.mark.parametrize(
    "shape",
    [
        "sk-ant-api03-Zq8Rw2Lm5Tx9Vb3NpQ7s",
        "ghp_" + "a1B2" * 9,
        "AKIAIOSFODNN7EXAMPLE",
        "xoxb-1234567890-abcdefghij",
        "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEA\n-----END OPENSSH PRIVATE KEY-----",
    ],
)
def test_well_known_credential_shapes_are_redacted_without_any_variable(shape: str) -> None:
    """An agent may print a key it read from its own config: no variable of ours holds it."""
    assert redactor({})(f"using {shape} now") == "using [REDACTED] now"


def test_bearer_credentials_keep_the_scheme() -> None:
    assert redactor({})("Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.e30.sig") == "Authorization: Bearer [REDACTED]"


def test_registered_secrets_are_redacted_and_only_secret_looking_names_count() -> None:
    """What the peer alone gets (``--acp-agent-env``) is registered by ``spawn``; an
    ordinary value (a model name, a path) is not masked."""
    register_secrets({"HOSTILE_TEST_PRIVATE_TOKEN": "reg1stered-t0ken-value", "HOSTILE_MODEL": "plain-model-name"})
    assert redactor({})("reg1stered-t0ken-value plain-model-name") == "[REDACTED] plain-model-name"


def test_report_data_is_redacted_everywhere(monkeypatch: pytest.MonkeyPatch) -> None:
    """``RunResults.to_json`` (hence report.json, report.md and the terminal summary) masks
    secrets in messages, evidence, peer info and the command, keys included."""
    from acp_conformance.clauses import registry
    from acp_conformance.reporting import RunResults, TestRecord
    from acp_conformance.results import ClauseResult, Status

    monkeypatch.setenv("HOSTILE_API_KEY", SUITE_SECRET)
    run = RunResults(registry(), "agent", f"agent --key {SUITE_SECRET}", {"jsonrpc.unknown-method"})
    run.peer = {"info": {"name": f"agent {SUITE_SECRET}", "version": "1", SUITE_SECRET: 1}}
    run.add(
        TestRecord(
            "t::x",
            "failed",
            [ClauseResult("jsonrpc.unknown-method", Status.FAIL, f"observed {SUITE_SECRET!r}", f"<- {SUITE_SECRET}")],
        )
    )
    for text in (orjson.dumps(run.to_json()).decode(), run.to_markdown(), "\n".join(run.terminal_lines())):
        assert SUITE_SECRET not in text, where(text, SUITE_SECRET)
        assert "[REDACTED]" in text


@needs_linux
@pytest.mark.anyio
async def test_peer_stderr_is_redacted_as_it_arrives() -> None:
    """stderr lines reach error messages (``PeerExited``), the transcript and reports: a
    secret given only to the peer is masked before any of them sees it."""
    import anyio

    from acp_conformance.transport import spawn
    from acp_conformance.transport.process import STDERR_LINE_CAP

    seen: list[str] = []
    pad = STDERR_LINE_CAP - 10  # the second line is cut in the middle of the secret
    script = (
        "import os, sys; key = os.environ['HOSTILE_STDERR_TOKEN']; "
        f"print('key=' + key, file=sys.stderr); print('x' * {pad} + key, file=sys.stderr)"
    )
    with anyio.fail_after(10):
        async with spawn(
            [sys.executable, "-c", script], env={"HOSTILE_STDERR_TOKEN": AGENT_SECRET}, on_stderr=seen.append
        ) as tr:
            await tr.process.wait()
    cut = ("x" * pad + "[REDACTED]")[:STDERR_LINE_CAP]
    assert seen == ["key=[REDACTED]", cut]
    assert list(tr.stderr_tail) == seen
