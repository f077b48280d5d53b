"""The reference ACP v1 agent: small, deterministic and fully conforming.

``python -m mock_agent`` speaks ACP v1 over stdio (stdout carries only
protocol frames, logs go to stderr) and exits with status 0 when stdin
reaches EOF.  ``MockAgent`` is also the base class of the deliberately
broken agents used to test the suite: every message it sends is built and
sent by a small overridable method, so a subclass breaks exactly one
behaviour by overriding one method (see ``MockAgent``'s docstring).

Prompt keywords
===============

A prompt turn is chosen from the prompt's text blocks (joined, matched
case-insensitively); the first rule that matches, in this order, wins:

``acp:refuse``
    one ``agent_message_chunk``, then stopReason ``refusal``.
``acp:max-tokens``
    one ``agent_message_chunk``, then stopReason ``max_tokens``.
``acp:max-turn-requests``
    one ``agent_message_chunk``, then stopReason ``max_turn_requests``.
``acp:long``
    a long turn: ``agent_message_chunk`` "tick 1" .. "tick 3", then it waits
    (no polling) for ``session/cancel`` / ``$/cancel_request`` and ends
    ``cancelled``; if nothing comes within 60 s it sends "tick done" and
    ends ``end_turn``.
``acp:tool`` or the phrase ``use a tool``
    a tool turn: ``tool_call`` (kind ``edit``, status ``pending``, location
    ``<cwd>/acp-probe.txt``), then ``session/request_permission`` with the
    options ``allow-once``, ``allow-always``, ``reject-once``,
    ``reject-always`` (kinds ``allow_once`` ... ``reject_always``).

    * allow: ``tool_call_update`` ``in_progress``; ``fs/write_text_file`` of
      ``<cwd>/acp-probe.txt`` with ``"hello from the mock agent\\n"`` if the
      client advertised ``fs.writeTextFile``; ``fs/read_text_file`` of that
      file (line 1, limit 1) if it advertised ``fs.readTextFile``;
      ``terminal/create`` (``echo hello``, cwd) + ``terminal/wait_for_exit``
      + ``terminal/output`` + ``terminal/release`` if it advertised
      ``terminal``; then ``tool_call_update`` ``completed`` (with a ``diff``
      item when the file was written), a closing ``agent_message_chunk`` and
      ``end_turn``.  ``allow_always`` is remembered for the session (later
      tool turns skip the permission request); ``allow_once`` is not.
    * reject (``reject_once`` / ``reject_always``, never remembered):
      ``tool_call_update`` ``failed``, no side effect, ``end_turn``.
    * outcome ``cancelled`` (or a cancel while waiting): stopReason
      ``cancelled``.
    * fs/terminal methods are never called unless advertised; every
      terminal created is released, also on cancel or error.
anything else (the default turn)
    one ``agent_thought_chunk``, one ``plan`` (complete entry list), then the
    reply "You said: <text>" as two or more ``agent_message_chunk``
    (image/audio/resource/resource_link blocks are acknowledged in the
    reply), stopReason ``end_turn``.

Every turn checks for cancellation between steps and then answers
``{"stopReason": "cancelled"}`` (never an error); all of a turn's updates
precede its ``session/prompt`` response.

Sessions
========

``session/new`` returns modes (``ask`` current, ``code``) and config options
``model`` (select, category ``model``, values ``fast``/``smart``, current
``fast``) and ``mode`` (select, category ``mode``, mirrors the session mode).
Sessions live in memory for the life of the process: ``session/load``
replays the history (user prompts as ``user_message_chunk`` plus every
conversation update as originally sent) before answering, ``session/resume``
answers without replay, ``session/list`` lists them (exact ``cwd`` filter,
single page), ``session/close`` cancels a running turn and forgets the
session, ``session/delete`` forgets it too and is idempotent.

Authentication
==============

By default no authentication is required (``authMethods`` is empty).  With
``--require-auth`` (``MockAgent(require_auth=True)``) the agent advertises one
method, ``token`` (type ``agent``, accepted for anyone), and
``agentCapabilities.auth.logout``; ``session/new``, ``session/load``,
``session/resume`` and ``session/list`` are refused with -32000
(auth_required) until ``authenticate`` succeeds, and again after ``logout``.
Certify it with ``--acp-auth-method=token``.
"""

from acp_conformance import __version__ as _package_version
from mock_agent.agent import (
    CLIENT_REQUEST_TIMEOUT,
    PROBE_CONTENT,
    PROBE_FILE,
    AgentPeer,
    ClientCaps,
    MockAgent,
    Session,
    Turn,
)
from mock_agent.cli import build_parser, main

__version__: str = _package_version

__all__ = [
    "CLIENT_REQUEST_TIMEOUT",
    "PROBE_CONTENT",
    "PROBE_FILE",
    "AgentPeer",
    "ClientCaps",
    "MockAgent",
    "Session",
    "Turn",
    "__version__",
    "build_parser",
    "main",
]
