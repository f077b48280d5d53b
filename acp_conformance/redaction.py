"""Masking secrets, and the machine's own paths, in anything a report or a terminal shows.

A peer can print its API key on stderr, echo an environment variable in a
frame, or hold a credential in a config file it quotes back: every string
that leaves the run (transcripts, reports, terminal summaries) goes through
``redactor()`` first.  Layer 0 (stdlib only), because the process transport
registers the secrets it hands to the peer and the transcript masks what it
records; neither may depend on the other.

Reports are read by strangers and committed to repositories, so they also carry no
path of the machine that produced them (``machine_paths``): the checkout, the Python
environment, the home and temporary directories become placeholders, and a path
inside the checkout (a scenario file, a pinned peer) becomes relative to it.
"""

from __future__ import annotations

import functools
import json
import os
import re
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

__all__ = ["REDACTED", "machine_paths", "redact_data", "redactor", "register_secrets"]

#: Names whose values are taken for secrets: API keys, tokens, passwords, credentials...
_SECRET_NAME = re.compile(
    r"(KEY|TOKEN|SECRET|PASSWORD|PASSWD|PASSPHRASE|CREDENTIAL|AUTH|COOKIE|SESSION_ID|PRIVATE|(?:^|_)PASS(?:$|_))",
    re.I,
)
#: Shorter values are left alone: masking them would mangle ordinary text.
_MIN_SECRET_LEN = 6
#: Well-known shapes of credentials, masked wherever they appear, even when no
#: variable of ours holds them (an agent may read its own config files).
_SECRET_SHAPES = (
    r"\bsk-(?:ant-|proj-)?[A-Za-z0-9_\-]{20,}",  # OpenAI / Anthropic keys
    r"\bgh[pousr]_[A-Za-z0-9]{30,}",  # GitHub tokens
    r"\bgithub_pat_[A-Za-z0-9_]{22,}",
    r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b",  # AWS access key ids
    r"\bxox[abprs]-[A-Za-z0-9\-]{10,}",  # Slack tokens
    r"\bAIza[0-9A-Za-z_\-]{35}",  # Google API keys
    r"-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?(?:-----END [A-Z ]*PRIVATE KEY-----|$)",
    r"(?<=Bearer )[A-Za-z0-9._~+/=\-]{16,}",  # an Authorization header's credential
)
REDACTED = "[REDACTED]"

#: Values registered at run time (``register_secrets``), e.g. from ``--acp-agent-env``.
_registered: set[str] = set()


def _is_secret(name: str, value: str) -> bool:
    return bool(_SECRET_NAME.search(name)) and len(value) >= _MIN_SECRET_LEN


def register_secrets(env: Mapping[str, str]) -> None:
    """Redact, from now on and in this process, the values of ``env``'s secret-looking names.

    ``redactor()`` sees ``os.environ``; the variables given to the peer only
    (``--acp-agent-env``, a peer profile's) are not there, so whoever builds the
    peer's environment registers them (``transport.process.spawn`` does).
    """
    _registered.update(v for k, v in env.items() if _is_secret(k, v))


def _forms(value: str) -> set[str]:
    """A value as it may appear in text: as is, and JSON-escaped (a frame carries it
    that way if it holds a quote, a backslash, a control or, with ``ensure_ascii`` -
    Python's ``json`` default - a non-ASCII character)."""
    return {value, json.dumps(value)[1:-1], json.dumps(value, ensure_ascii=False)[1:-1]}


#: Substrings every match of a shape contains: a cheap test before the regex, which
#: matters because every stderr line of a flooding agent goes through here.
_SHAPE_HINTS = (
    *("sk-", "ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_", "AKIA", "ASIA", "xox", "AIza"),
    *("PRIVATE KEY-----", "Bearer "),
)
_SHAPES = re.compile("|".join(_SECRET_SHAPES))


@functools.lru_cache(maxsize=64)
def _compiled(values: frozenset[str]) -> Callable[[str], str]:
    forms = tuple(sorted({f for v in values for f in _forms(v)}, key=len, reverse=True))  # longest first
    literal = re.compile("|".join(re.escape(f) for f in forms)) if forms else None

    def redact(text: str) -> str:
        if literal is not None and any(f in text for f in forms):
            text = literal.sub(REDACTED, text)
        if any(h in text for h in _SHAPE_HINTS):
            text = _SHAPES.sub(REDACTED, text)
        return text

    return redact


def redactor(env: Mapping[str, str] | None = None) -> Callable[[str], str]:
    """Return ``f(text) -> text`` that masks secrets with ``[REDACTED]``.

    Secrets: values (at least 6 characters) of secret-looking names in ``env``
    (default ``os.environ``) or registered with ``register_secrets``, in their
    literal and JSON-escaped forms, plus well-known credential shapes (API keys,
    tokens, private keys, bearer credentials).  Redact before cutting text, so a
    truncated line never shows a secret's prefix.
    """
    source = os.environ if env is None else env
    return _compiled(frozenset({v for k, v in source.items() if _is_secret(k, v)} | _registered))


def redact_data(data: Any, redact: Callable[[str], str] | None = None) -> Any:
    """A copy of JSON-like ``data`` with every string (keys included) redacted."""
    redact = redact or redactor()
    if isinstance(data, str):
        return redact(data)
    if isinstance(data, dict):
        return {redact_data(k, redact): redact_data(v, redact) for k, v in data.items()}
    if isinstance(data, (list, tuple)):
        return [redact_data(v, redact) for v in data]
    return data


#: The directory holding the ``acp_conformance`` package: the checkout, or site-packages.
_PACKAGE_PARENT = Path(__file__).resolve().parent.parent
#: pytest's temporary directory under ``<tmp>``, whole (``/pytest-of-<user>/pytest-<n>/``) or
#: what is left of one cut short ("<tmp>/pytest-of-root/pytest-8..." in a clipped frame that a
#: peer echoed): the user's name must not stay.
_PYTEST_TMP = re.compile(r"<tmp>/pytest-of-[^/\s\"'\\]+(?:/pytest-\d+/|/pytest-\d*)?")
#: Any environment's packages and interpreters, not only ours (a peer may run from another venv).
_ANY_SITE_PACKAGES = re.compile(r"(?:/[^/\s\"'<>]+)+/(?:site|dist)-packages/")
#: Any installation of npm packages: a peer's stack trace names its files under node_modules.
_ANY_NODE_MODULES = re.compile(r"(?:/[^/\s\"'<>]+)+/node_modules/")
_ANY_INTERPRETER = re.compile(r"(?:/[^/\s\"'<>]+)+/bin/((?:python|node|pypy)[0-9.]*)\b")


@functools.cache
def _machine_roots() -> tuple[tuple[str, str], ...]:
    """``(prefix, placeholder)``, longest prefix first, so the most specific one wins."""
    # Imported here: tempfile (with shutil and random) costs a mock agent's start-up ~5 ms, and
    # only masking a path needs it.
    import sysconfig
    import tempfile

    roots: dict[str, str] = {}

    def add(path: str | os.PathLike[str] | None, placeholder: str) -> None:
        if not path:
            return
        for form in {str(path), os.path.realpath(path)}:
            if len(form) > 1:  # never "/"
                roots.setdefault(form.rstrip("/") + "/", placeholder)

    for key in ("purelib", "platlib"):
        add(sysconfig.get_paths().get(key), "<site-packages>/")
    add(os.path.join(sys.prefix, "bin"), "")  # ".../venv/bin/python -m x" reads as "python -m x"
    add(sys.prefix, "<python>/")
    add(sys.base_prefix, "<python>/")
    if (_PACKAGE_PARENT / "pyproject.toml").is_file():  # a checkout: its paths become relative
        add(_PACKAGE_PARENT, "")
    add(tempfile.gettempdir(), "<tmp>/")
    add(os.getcwd(), "")
    add(os.path.expanduser("~"), "~/")
    return tuple(sorted(roots.items(), key=lambda kv: len(kv[0]), reverse=True))


def machine_paths(text: str) -> str:
    """``text`` with this machine's checkout, environment, home and temporary paths masked.

    A report must read the same on any machine that ran the same peer: what stays is
    what the peer and the suite did, not where they were installed.
    """
    if "/" not in text:
        return text
    for prefix, placeholder in _machine_roots():
        if prefix in text:
            text = text.replace(prefix, placeholder)
        bare = prefix[:-1]  # the root itself, not followed by a slash
        if bare in text:
            text = re.sub(re.escape(bare) + r"(?![\w.-])", placeholder.rstrip("/") or ".", text)
    text = _ANY_SITE_PACKAGES.sub("<site-packages>/", text)
    text = _ANY_NODE_MODULES.sub("node_modules/", text)
    text = _ANY_INTERPRETER.sub(r"\1", text)
    return _PYTEST_TMP.sub("<tmp>/", text)
