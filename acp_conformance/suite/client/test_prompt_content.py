"""What goes into a prompt, client side: attachments, slash commands, and config options it must cope with.

An attachment needs the profile's ``attach`` action (only a user attaches files); a slash command is
just the prompt text the driver gives; the config options come with ``session/new``.
"""

from __future__ import annotations

import base64
import binascii
from pathlib import Path
from typing import Any

import pytest

from acp_conformance.endpoints.agent import AgentSetup
from acp_conformance.harness.client import ClientHarness
from acp_conformance.results import Status
from acp_conformance.suite._support import inconclusive
from acp_conformance.suite.client._helpers import first_turn, one_turn, require

pytestmark = pytest.mark.anyio

#: A 1x1 PNG: bytes whose base64 form differs from every other text encoding of them.
PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360f80f000001010100057a1bfd0000000049454e44ae426082"
)


@pytest.mark.acp_clause("content.base64")
async def test_an_attached_image_is_sent_base64_encoded(acp_client: ClientHarness) -> None:
    """The agent accepts images; the user attaches a PNG.  An image block's data holds the file's bytes,
    base64-encoded (content.mdx): decoded, it is the file, byte for byte."""
    require(acp_client, "prompt", "attach")
    image = Path(acp_client.workdir).resolve() / "acp-attachment.png"
    image.write_bytes(PNG)
    async with acp_client.connect(AgentSetup(image=True), actions={"attach": str(image)}) as conn:
        turn = await first_turn(acp_client, conn)
        await turn.say("I see the image.")
        await turn.end()
    blocks = [b for b in turn.prompt if isinstance(b, dict) and b.get("type") == "image"]
    if not blocks:
        kinds = sorted({str(b.get("type")) for b in turn.prompt if isinstance(b, dict)})
        acp_client.record(
            "content.base64", Status.NOT_APPLICABLE, f"the client sent the attachment as no image block ({kinds})"
        )
        return
    for block in blocks:
        data, mime = block.get("data"), block.get("mimeType")
        try:
            decoded = base64.b64decode(data, validate=True) if isinstance(data, str) else None
        except (binascii.Error, ValueError):
            decoded = None
        # A client may re-encode the picture (resize, convert): then the bytes are another image,
        # but still an image of the declared type.  Hex or any other text decodes to neither.
        magic = IMAGE_MAGIC.get(str(mime))
        ok = decoded is not None and (decoded == PNG or magic is None or decoded.startswith(magic))
        acp_client.check(
            "content.base64",
            ok,
            f"the image block's data to be the attached image ({mime}), base64-encoded",
            f"data {str(data)[:60]!r}" + ("" if decoded is None else f" (decodes to {decoded[:8]!r}...)"),
        )


#: How each common image type's bytes begin (what base64 of a real image decodes to).
IMAGE_MAGIC = {
    "image/png": b"\x89PNG\r\n\x1a\n",
    "image/jpeg": b"\xff\xd8\xff",
    "image/gif": b"GIF8",
    "image/webp": b"RIFF",
}

COMMAND = "acp-summary"


@pytest.mark.acp_clause("cmd.invoke-as-text")
async def test_a_slash_command_is_sent_as_prompt_text(acp_client: ClientHarness) -> None:
    """The agent announces the command /acp-summary and the user runs it: "Commands are included as regular
    user messages in prompt requests" (slash-commands.mdx), so the prompt is text starting with that slash."""
    require(acp_client, "prompt")
    command = {"name": COMMAND, "description": "Summarize the session", "input": {"hint": "what to summarize"}}
    text = f"/{COMMAND} the last change"
    async with acp_client.connect(AgentSetup(commands=[command]), prompt=text) as conn:
        turn = await first_turn(acp_client, conn)
        await turn.say("Summary: nothing changed.")
        await turn.end()
    texts = [b.get("text") for b in turn.prompt if isinstance(b, dict) and b.get("type") == "text"]
    acp_client.check(
        "cmd.invoke-as-text",
        any(isinstance(t, str) and t.lstrip().startswith(f"/{COMMAND}") for t in texts),
        f"a text block starting with /{COMMAND}",
        f"text blocks {texts!r}",
    )


def _options(category: dict[str, Any]) -> list[dict[str, Any]]:
    values = [{"value": "fast", "name": "Fast"}, {"value": "careful", "name": "Careful"}]
    return [
        {"id": "pace", "name": "Pace", "type": "select", "currentValue": "fast", "options": values, **category},
        {"id": "tone", "name": "Tone", "type": "select", "currentValue": "plain", "options": [
            {"value": "plain", "name": "Plain"}, {"value": "warm", "name": "Warm"}
        ]},
    ]  # fmt: skip


async def _runs_a_turn(acp: ClientHarness, options: list[dict[str, Any]]) -> str | None:
    """None when the client ran a prompt turn with these config options, else why it did not."""
    async with acp.connect(AgentSetup(config_options=options)) as conn:
        return await one_turn(acp, conn, "Configured.")


@pytest.mark.acp_clause("config.category.ux-only")
async def test_unknown_and_missing_config_categories_change_nothing(acp_client: ClientHarness) -> None:
    """session-config-options.mdx: categories "MUST NOT be required for correctness. Clients MUST handle
    missing or unknown categories gracefully".  The baseline has a known category (model); then one option
    has a custom category (_acp_conformance_pace) and the other none: the client works the same."""
    require(acp_client, "prompt")
    failed = await _runs_a_turn(acp_client, _options({"category": "model"}))
    if failed is not None:
        inconclusive(f"the client ran no turn even with a known category ({failed})")
    failed = await _runs_a_turn(acp_client, _options({"category": "_acp_conformance_pace"}))
    acp_client.check(
        "config.category.ux-only",
        failed is None,
        "a prompt turn as with a known category, the options carrying a custom category and none",
        f"no turn: {failed}",
    )


MODES = {
    "currentModeId": "acp-mode-ask",
    "availableModes": [
        {"id": "acp-mode-ask", "name": "Ask", "description": "answers questions"},
        {"id": "acp-mode-code", "name": "Code", "description": "edits files"},
    ],
}


@pytest.mark.acp_clause("mode.set.valid")
async def test_a_mode_the_user_picks_by_name_is_set_by_its_id(acp_client: ClientHarness) -> None:
    """The user switches to the mode named Code: session/set_mode carries its modeId, acp-mode-code, "one of
    the modes listed in availableModes" (session-modes.mdx).  The agent flags any other modeId."""
    require(acp_client, "prompt", "set-mode")
    async with acp_client.connect(AgentSetup(modes=MODES), actions={"set-mode": "Code"}) as conn:
        await one_turn(acp_client, conn)
        sent = conn.peer.requests("session/set_mode")
    if not sent:
        inconclusive("the client was asked to switch to the mode Code and sent no session/set_mode")


OPTIONS = [
    {
        "id": "acp-opt-pace",
        "name": "Pace",
        "type": "select",
        "currentValue": "acp-val-fast",
        "options": [{"value": "acp-val-fast", "name": "Fast"}, {"value": "acp-val-careful", "name": "Careful"}],
    }
]


@pytest.mark.acp_clause("config.set.value")
async def test_a_config_choice_the_user_picks_by_name_is_set_by_its_value(acp_client: ClientHarness) -> None:
    """The user sets Pace to Careful: session/set_config_option carries the option's id and the choice's
    value, acp-val-careful, "one of the values listed in the option's options" (session-config-options.mdx).
    The agent flags any other value."""
    require(acp_client, "prompt", "set-config")
    async with acp_client.connect(AgentSetup(config_options=OPTIONS), actions={"set-config": "Pace=Careful"}) as conn:
        await one_turn(acp_client, conn)
        sent = conn.peer.requests("session/set_config_option")
    if not sent:
        inconclusive("the client was asked to set Pace to Careful and sent no session/set_config_option")
