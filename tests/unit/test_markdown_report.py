"""The Markdown report explains every finding to a stranger, from the JSON alone."""

from __future__ import annotations

import json
from pathlib import Path

from acp_conformance.__main__ import main
from acp_conformance.clauses import registry
from acp_conformance.reporting import RunResults
from acp_conformance.reporting import TestRecord as Record
from acp_conformance.reporting.markdown import (
    judged_frame,
    label_of,
    render_markdown,
    reproduce_command,
    sequence_diagram,
    spec_links,
)
from acp_conformance.results import ClauseResult, Status

REG = registry()
EVIDENCE = "\n".join(
    [
        '    0.002 -> {"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"s","prompt":[]}}',
        '    0.100 <- {"jsonrpc":"2.0","id":0,"method":"session/request_permission","params":{"tool... (547 chars)',
        '    0.200 -> {"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"s"}}',
        '    0.300 <- {"jsonrpc":"2.0","id":2,"result":{"stopReason":"end_turn"}}',
        '    0.400 -> \x00{"jsonrpc":"2.0"} (a fuzz frame with a NUL)',
        "agent stderr: done",
    ]
)
LONG = "observed " + "a-very-long-observation-word " * 20


def _run() -> RunResults:
    run = RunResults(registry=REG, role="agent", command="node agent.js --acp", checked={"perm.agent-cancel-race"})
    run.add(
        Record(
            "test_cancellation.py::test_cancel_while_permission_pending",
            "failed",
            [ClauseResult("perm.agent-cancel-race", Status.FAIL, LONG, evidence=EVIDENCE)],
        )
    )
    return run


def test_a_finding_says_what_why_where_and_how_to_reproduce() -> None:
    text = _run().to_markdown()
    clause = REG.get("perm.agent-cancel-race")
    assert f"> {clause.text}" in text
    assert "[prompt-turn § Cancellation](https://agentclientprotocol.com/protocol/prompt-turn#cancellation)" in text
    assert "pytest --acp-agent='node agent.js --acp' --acp-clause=perm.agent-cancel-race" in text
    assert "test_cancellation.py::test_cancel_while_permission_pending" in text
    assert f"Usual fix: {clause.hint}" in text and clause.hint  # the registry's one-line fix
    assert "```mermaid" in text and "<details><summary>transcript excerpt</summary>" in text
    assert LONG.strip() in text  # the detail shows all of it
    row = next(line for line in text.splitlines() if line.startswith("| [`perm.agent-cancel-race`]"))
    assert row.endswith(" … |") and "a-very-long-observation-word a-very" in row  # cut between words
    assert '<a id="finding-perm-agent-cancel-race"></a>' in text
    assert "\x00" not in text and "\\x00{" in text  # a text file: control characters escaped


def test_the_sequence_diagram_names_each_frame_and_marks_the_finding() -> None:
    diagram = sequence_diagram(EVIDENCE, "agent", "perm.agent-cancel-race", "FAIL")
    assert diagram is not None
    assert "S->>P: session/prompt (id 2)" in diagram
    assert "P->>S: session/request_permission (id 0) ..." in diagram  # a frame cut in the excerpt
    assert "S->>P: session/cancel" in diagram
    assert "P->>S: result stopReason end_turn (id 2)" in diagram
    assert diagram.rstrip("`\n").endswith("Note over S,P: FAIL perm.agent-cancel-race")
    assert sequence_diagram("no frames here", "agent", "x", "FAIL") is None


def test_spec_links_and_fuzz_replays() -> None:
    assert spec_links("docs/protocol/v1/transports.mdx § (intro); schema:#/$defs/X") == (
        "[transports § (intro)](https://agentclientprotocol.com/protocol/transports); `schema:#/$defs/X`"
    )
    data = {"peer": {"role": "agent", "command": "my-agent"}}
    msg = "... replay: ACP_FUZZ_SEED=0 ACP_FUZZ_REPLAY=AEEA pytest --acp-agent=... --acp-clause=jsonrpc.x (seed 0)"
    assert reproduce_command(data, "jsonrpc.survives-invalid-input", msg) == (
        "ACP_FUZZ_SEED=0 ACP_FUZZ_REPLAY=AEEA pytest --acp-agent=my-agent --acp-clause=jsonrpc.survives-invalid-input"
    )


def test_report_command_renders_the_same_markdown_from_saved_json(tmp_path: Path) -> None:
    run = _run()
    data = run.to_json()
    saved = tmp_path / "peer.json"
    saved.write_text(json.dumps(data))
    assert main(["report", str(saved)]) == 0
    assert (tmp_path / "peer.md").read_text() == render_markdown(data) + "\n"
    bad = tmp_path / "bad.json"
    bad.write_text("[]")
    assert main(["report", str(bad)]) == 2


def test_the_frame_judged_is_not_one_of_our_probes() -> None:
    frames = [
        ("->", '{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{}}'),
        ("<-", '{"jsonrpc":"2.0","id":2,"result":{"stopReason":"end_turn"}}'),
        ("->", '{"jsonrpc":"2.0","id":4,"method":"_acp_conformance/ping","params":{}}'),
        ("<-", '{"jsonrpc":"2.0","id":4,"error":{"code":-32601,"message":"nope"}}'),
    ]
    assert judged_frame(frames) == 1


def test_a_cut_frame_is_labelled_by_its_own_id_not_one_inside_its_result() -> None:
    """Excerpts clip long frames; a response whose ``id`` member comes after its ``result`` (zed's
    codex-acp writes them so) was drawn under the first ``"id"`` of its result: an auth method's
    ("result (id "chatgpt")")."""
    cut = '{"jsonrpc":"2.0","result":{"protocolVersion":1,"authMethods":[{"id":"chatgpt","name":"Login'
    assert label_of(cut) == "result ..."
    assert label_of('{"jsonrpc":"2.0","id":5,"result":{"modes":[{"id":"auto"') == "result (id 5) ..."
    assert label_of('{"jsonrpc":"2.0","id":"a\\"b","method":"session/new","params":{"cwd":"/x') == (
        'session/new (id "a\\"b") ...'
    )
    # A member named "method" inside params is not the frame's method.
    assert label_of('{"jsonrpc":"2.0","result":{"x":{"method":"no"') == "result ..."
    # The probes' answers are recognised by their own id, wherever it comes.
    frames = [
        ("->", '{"jsonrpc":"2.0","id":2,"method":"session/new","params":{}}'),
        ("<-", '{"jsonrpc":"2.0","result":{"sessionId":"s","modes":[{"id":4}]},"id":2}'),
        ("->", '{"jsonrpc":"2.0","id":4,"method":"_acp_conformance/ping","params":{}}'),
        ("<-", '{"jsonrpc":"2.0","error":{"code":-32601,"message":"nope","data":{"id":2}},"id":4}'),
    ]
    assert judged_frame(frames) == 1
