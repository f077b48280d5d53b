"""The prompts the suite sends by default (one place: the options, the harness and the
scenario engine take them from here).  The ``acp:`` keywords steer the reference agent and the
scripted model endpoint; real agents are steered with ``--acp-prompt`` and friends."""

from __future__ import annotations

__all__ = [
    "DEFAULT_ELICIT_PROMPT",
    "DEFAULT_ELICIT_URL_PROMPT",
    "DEFAULT_LONG_PROMPT",
    "DEFAULT_PLAN_PROMPT",
    "DEFAULT_PROMPT",
    "DEFAULT_TOOL_PROMPT",
    "dictated_steps",
]

DEFAULT_PROMPT = "Hello! Please reply with a short greeting."
DEFAULT_TOOL_PROMPT = "acp:tool Please create a file named acp-probe.txt containing 'hello' using your tools."
DEFAULT_LONG_PROMPT = "acp:long Please count slowly from one to one thousand, one number per line."
DEFAULT_ELICIT_PROMPT = (
    "acp:elicit Before you answer, ask me which greeting to use (hello or howdy) with your question tool."
)
DEFAULT_ELICIT_URL_PROMPT = (
    "acp:elicit-url Connect the service you need through a page I open in my browser (URL elicitation), then go on."
)
DEFAULT_PLAN_PROMPT = (
    "acp:plan Make a plan with exactly these steps and report it as you go: Read the prompt; Write the reply; "
    "Check the reply"
)


def dictated_steps(prompt: str) -> list[str]:
    """The steps a plan prompt dictates: after its last colon (the ``acp:plan`` keyword aside),
    separated by semicolons.  One rule for the reference agent that plans them and the test that
    holds a plan against them."""
    tail = prompt.replace("acp:plan", " ").rsplit(":", 1)[-1]
    return [step.strip().rstrip(".") for step in tail.split(";") if step.strip().rstrip(".")]
