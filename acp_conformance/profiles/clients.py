"""Client profiles: how to drive a headless client under test.

A client certification run starts the client under test once per test.
The suite scripts the agent side itself; what it cannot do on its own is
*act as the user of the client*: make it send a prompt, cancel a turn,
choose how permission requests are answered.  A profile (a small TOML
file) tells the harness how, for one client.  See
``docs/client-certification.md`` for the format; the bundled profiles
(``acpx``, ``python-sdk-client``, ``mock-client``) are examples.

Placeholders in the ``--acp-client`` command line:

``{agent}``
    the agent command line (the relay the client must launch), shell-quoted
    as one word; inside a word it is substituted in place.
``{agent_argv}``
    as a word of its own: the agent's program and arguments as separate words.
``{prompt}``
    the prompt text, as one word (profiles with ``prompt.via = "argv"``).
``{permission}``
    as a word of its own: the arguments that select the permission policy
    the test wants (see ``[permission]``).
``{tmp}``
    the test's private temporary directory (also usable in ``[env]``).
``{actions}``
    as a word of its own: the arguments of the user actions a test asks for (``[actions]``);
    without it they go right after the ``{permission}`` arguments.

``[actions]`` says how to make the client do what only its user can ask for: authenticate with the
agent, list its sessions, continue a saved session, attach a file to the prompt.  Each entry is a list
of arguments (``{value}`` is the action's value: a session id, a file path), or a table with ``args``
and ``env`` (variables set for that run only).  A test needing an action the profile lacks is
NOT_APPLICABLE, with the reason.

Bad profiles are ``ConfigurationError``\\ s naming the file, the line and
the key.
"""

from __future__ import annotations

import re
import shlex
import signal
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from acp_conformance.errors import ConfigurationError

__all__ = [
    "ACTIONS",
    "USER_ACTIONS",
    "BUNDLED",
    "PERMISSION_POLICIES",
    "ClientProfile",
    "PermissionNotSelectable",
    "bundled_profiles",
    "default_profile",
    "describe",
    "has_agent_placeholder",
    "load_profile",
    "parse_profile",
    "substitute",
]

PERMISSION_POLICIES = ("allow", "reject", "hold")
PROMPT_VIA = ("argv", "stdin", "none")
CANCEL_VIA = ("signal", "stdin", "command", "none")
#: What only a user can make a client do, by name (``[actions]``), with what ``{value}`` holds.
USER_ACTIONS: dict[str, str] = {
    "authenticate": "log in with the agent when it requires it (an authMethods entry it can drive)",
    "list-sessions": "list the agent's sessions (session/list, every page)",
    "continue-session": "continue the saved session {value} (session/load or session/resume) and prompt in it",
    "attach": "attach the file {value} to the prompt",
    "set-mode": "switch the session to the mode named {value} before prompting",
    "set-config": "set the config option {value} (OPTION=CHOICE, by their names) before prompting",
}
#: Driver actions a test may need: prompt, second-prompt, cancel, permission:<policy>, and the user actions.
ACTIONS = ("prompt", "second-prompt", "cancel", *(f"permission:{p}" for p in PERMISSION_POLICIES), *USER_ACTIONS)
BUNDLED = ("acpx", "python-sdk-client", "mock-client")

_SCHEMA: dict[str, dict[str, type]] = {
    "client": {"name": str, "description": str, "tested_version": str, "example": str, "notes": str},
    "prompt": {"via": str, "text": str},
    "permission": {"allow": list, "reject": list, "hold": list, "default": str, "notes": str},
    "cancel": {"via": str, "signal": str, "text": str, "command": str, "reason": str},
    "env": {},  # free-form KEY = "value"
    "actions": {},  # name = [args] or {args = [...], env = {...}}
}
_PLACEHOLDER = re.compile(r"\{(agent|agent_argv|prompt|permission|tmp)\}")


@dataclass(frozen=True)
class UserAction:
    """How a profile makes its client perform one user action: arguments (``{value}`` filled in) and
    environment variables for that run."""

    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()

    def argv(self, value: str | None) -> list[str]:
        return [a.replace("{value}", value or "") for a in self.args]

    def environment(self, value: str | None) -> dict[str, str]:
        return {k: v.replace("{value}", value or "") for k, v in self.env}


@dataclass(frozen=True)
class ClientProfile:
    """How to drive one headless client (see the module docstring)."""

    name: str
    source: str
    description: str = ""
    tested_version: str = ""
    example: str = ""
    prompt_via: str = "argv"
    prompt_text: str = "hello"
    permission: dict[str, list[str]] = field(default_factory=dict)
    permission_default: str = ""
    cancel_via: str = "none"
    cancel_signal: str = "SIGINT"
    cancel_text: str = ""
    cancel_command: str = ""
    cancel_reason: str = ""
    env: dict[str, str] = field(default_factory=dict)
    actions: dict[str, UserAction] = field(default_factory=dict)

    # ------------------------------------------------------------ actions
    def unsupported(self, action: str, command: str = "{permission}") -> str | None:
        """Why this profile cannot perform ``action`` with ``command`` (None when it can)."""
        if action in USER_ACTIONS:
            spec = self.actions.get(action)
            if spec is None:
                return (
                    f"the client profile {self.name!r} has no [actions] entry {action!r} "
                    f"(how to make the client {USER_ACTIONS[action].replace(' {value}', '')})"
                )
            if spec.args and not _action_slot(command):
                return (
                    f"the client command has no {{actions}} (or {{permission}}) placeholder for the arguments "
                    f"of the action {action!r}"
                )
            return None
        if action == "prompt":
            if self.prompt_via == "none":
                return f"the client profile {self.name!r} has no way to make the client send a prompt"
            return None
        if action == "second-prompt":
            if self.prompt_via != "stdin":
                return (
                    f"the client profile {self.name!r} passes one prompt per run (prompt.via = "
                    f'{self.prompt_via!r}); a second prompt on the same session needs prompt.via = "stdin"'
                )
            return None
        if action == "cancel":
            if self.cancel_via == "none":
                why = self.cancel_reason or "it declares no way to cancel a turn ([cancel] via)"
                return f"the client profile {self.name!r} cannot cancel a running turn: {why}"
            return None
        if action.startswith("permission:"):
            policy = action.split(":", 1)[1]
            if policy not in self.permission:
                known = ", ".join(sorted(self.permission)) or "none"
                return (
                    f"the client profile {self.name!r} has no arguments selecting the permission policy "
                    f"{policy!r} (it knows: {known})"
                )
            try:
                self.build_argv(command, agent_argv=[], permission=policy)
            except PermissionNotSelectable as exc:
                return f"{exc} (add {{permission}} to --acp-client)"
            return None
        raise ValueError(f"unknown driver action {action!r}; known: {', '.join(ACTIONS)}")

    def signal_number(self) -> int:
        return int(getattr(signal, self.cancel_signal))

    # ------------------------------------------------------------ command
    def build_argv(
        self,
        command: str,
        *,
        agent_argv: list[str] | None,
        prompt: str | None = None,
        permission: str | None = None,
        tmp: str = "",
        actions: Mapping[str, str | None] | None = None,
    ) -> list[str]:
        """The client's argv for one run (see ``substitute``).

        ``permission`` None means the profile's default policy, where the
        command has a place for it (else the command as given).  ``actions``: the user
        actions of this run, by name, with their values.
        """
        policy = permission or self.permission_default or None
        others = [args for name, args in self.permission.items() if name != policy and args]
        action_args = [w for name, value in (actions or {}).items() for w in self.actions[name].argv(value)]

        def build(args: list[str] | None) -> list[str]:
            return substitute(
                command,
                agent_argv=agent_argv,
                prompt=prompt if prompt is not None else self.prompt_text,
                permission_args=args,
                other_permission_args=others,
                tmp=tmp,
                action_args=action_args,
            )

        if policy is None or policy not in self.permission:
            if permission is not None:
                raise PermissionNotSelectable(f"the profile {self.name!r} has no permission policy {permission!r}")
            return build(None)
        try:
            return build(self.permission[policy])
        except PermissionNotSelectable:
            if permission is None:
                return build(None)
            raise

    def environment(self, tmp: str, actions: Mapping[str, str | None] | None = None) -> dict[str, str]:
        env = {k: v.replace("{tmp}", tmp) for k, v in self.env.items()}
        for name, value in (actions or {}).items():
            env.update(self.actions[name].environment(value))
        return env


def _action_slot(command: str) -> bool:
    """Whether the command has a word the action arguments can take the place of (or follow)."""
    return "{actions}" in command.split() or "{permission}" in command.split()


def has_agent_placeholder(command: str) -> bool:
    return "{agent}" in command or "{agent_argv}" in command


def substitute(
    command: str,
    *,
    agent_argv: list[str] | None,
    prompt: str = "hello",
    permission_args: list[str] | None = None,
    other_permission_args: list[list[str]] | None = None,
    tmp: str = "",
    action_args: list[str] | None = None,
) -> list[str]:
    """Split ``command`` (shell-style) and fill in the placeholders.

    ``permission_args`` (when not None) select a permission policy: they
    replace a ``{permission}`` word; without one, they replace the first
    occurrence of any policy's arguments already in the command (and the
    others are removed).  ``PermissionNotSelectable`` when neither exists.
    ``action_args`` replace an ``{actions}`` word, or follow the ``{permission}`` arguments.
    """
    try:
        words = shlex.split(command)
    except ValueError as exc:
        raise ConfigurationError(f"cannot parse the client command {command!r}: {exc}") from None
    if not words:
        raise ConfigurationError("the client command is empty")
    agent_line = shlex.join(agent_argv) if agent_argv is not None else ""
    values = {"agent": agent_line, "prompt": prompt, "tmp": tmp, "agent_argv": agent_line, "permission": ""}
    out: list[str] = []
    saw_permission = False
    has_action_slot = "{actions}" in words
    for word in words:
        if word == "{agent_argv}":
            out.extend(agent_argv or [])
            continue
        if word == "{actions}":
            out.extend(action_args or [])
            continue
        if word == "{permission}":
            saw_permission = True
            out.extend(permission_args or [])
            if not has_action_slot:
                out.extend(action_args or [])
            continue
        out.append(_PLACEHOLDER.sub(lambda m: values[m.group(1)], word))
    if permission_args is not None and not saw_permission:
        known = [a for a in [permission_args, *(other_permission_args or [])] if a]
        hits = [(i, seq) for seq in known for i in _find_sequence(out, seq)]
        if not hits:
            raise PermissionNotSelectable(
                "the client command has no {permission} placeholder and none of the profile's permission "
                "arguments, so the suite cannot choose how it answers permission requests"
            )
        first, seq = min(hits, key=lambda h: h[0])
        head, tail = out[:first], out[first + len(seq) :]
        for other in known:
            head, tail = _remove_sequence(head, other), _remove_sequence(tail, other)
        out = head + list(permission_args) + tail
    return out


class PermissionNotSelectable(ConfigurationError):
    """The command gives the harness no place to put permission arguments."""


def _find_sequence(words: list[str], seq: list[str]) -> list[int]:
    n = len(seq)
    return [i for i in range(1, len(words) - n + 1) if words[i : i + n] == seq]


def _remove_sequence(words: list[str], seq: list[str]) -> list[str]:
    n = len(seq)
    if n == 0:
        return words
    out: list[str] = []
    i = 0
    while i < len(words):
        if words[i : i + n] == seq:
            i += n
            continue
        out.append(words[i])
        i += 1
    return out


# ----------------------------------------------------------------- loading
def default_profile() -> ClientProfile:
    """What the harness assumes without ``--acp-client-profile``: the prompt is in
    the command line, nothing else is known."""
    return ClientProfile(
        name="(none)",
        source="<built-in default>",
        description="no profile: the command is run as given; one prompt per run, in the command line",
        prompt_via="argv",
        cancel_via="none",
        cancel_reason="no client profile given (--acp-client-profile)",
    )


def bundled_profiles() -> dict[str, Path]:
    base = resources.files("acp_conformance.profiles")
    return {name: Path(str(base.joinpath(f"{name}.toml"))) for name in BUNDLED}


def load_profile(spec: str) -> ClientProfile:
    """A bundled profile by name, or a profile file by path."""
    bundled = bundled_profiles()
    if spec in bundled:
        path = bundled[spec]
    else:
        path = Path(spec)
        if not path.is_file():
            raise ConfigurationError(
                f"client profile {spec!r}: no such file and not a bundled profile (bundled: {', '.join(BUNDLED)})"
            )
    text = path.read_text("utf-8")
    return parse_profile(text, str(path))


def _line_of(text: str, table: str | None, key: str | None) -> int | None:
    """1-based line of ``key`` in ``[table]`` (or of the table header)."""
    current: str | None = None
    header_line = None
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        m = re.match(r"^\[\s*([A-Za-z0-9_.-]+)\s*\]", line)
        if m:
            current = m.group(1)
            if current == table:
                header_line = n
            continue
        if current == table and key is not None and re.match(rf"^\"?{re.escape(key)}\"?\s*=", line):
            return n
    return header_line


def parse_profile(text: str, origin: str) -> ClientProfile:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigurationError(f"client profile {origin}: invalid TOML: {exc}") from None

    def fail(table: str | None, key: str | None, problem: str) -> ConfigurationError:
        line = _line_of(text, table, key)
        where = f"{origin}:{line}" if line else origin
        name = ".".join(p for p in (table, key) if p)
        return ConfigurationError(f"client profile {where}: {name or '(top level)'}: {problem}")

    for top, value in data.items():
        if top not in _SCHEMA:
            raise fail(None, None, f"unknown table or key {top!r} (known tables: {', '.join(_SCHEMA)})")
        if not isinstance(value, dict):
            raise fail(None, None, f"{top!r} must be a table ([{top}])")
        for key, item in value.items():
            if top == "actions":
                continue  # checked below: each entry is a list or a table
            if top == "env":
                if not isinstance(item, str):
                    raise fail(top, key, f"must be a string, got {type(item).__name__}")
                continue
            want = _SCHEMA[top].get(key)
            if want is None:
                raise fail(top, key, f"unknown key (known: {', '.join(_SCHEMA[top])})")
            if not isinstance(item, want):
                raise fail(top, key, f"must be a {getattr(want, '__name__', want)}, got {type(item).__name__}")
            if isinstance(item, list) and not all(isinstance(w, str) for w in item):
                raise fail(top, key, "must be a list of strings (command-line arguments)")
    client = data.get("client", {})
    if "name" not in client:
        raise fail("client", None, "missing required key 'name'")
    prompt = data.get("prompt", {})
    via = prompt.get("via", "argv")
    if via not in PROMPT_VIA:
        raise fail("prompt", "via", f"must be one of {', '.join(PROMPT_VIA)}, got {via!r}")
    perm = data.get("permission", {})
    policies = {k: list(v) for k, v in perm.items() if k in PERMISSION_POLICIES}
    default = perm.get("default", "")
    if default and default not in PERMISSION_POLICIES:
        raise fail("permission", "default", f"must be one of {', '.join(PERMISSION_POLICIES)}, got {default!r}")
    cancel = data.get("cancel", {})
    cvia = cancel.get("via", "none")
    if cvia not in CANCEL_VIA:
        raise fail("cancel", "via", f"must be one of {', '.join(CANCEL_VIA)}, got {cvia!r}")
    sig = cancel.get("signal", "SIGINT")
    if not isinstance(getattr(signal, sig, None), int) or not sig.startswith("SIG"):
        raise fail("cancel", "signal", f"unknown signal {sig!r} (e.g. SIGINT)")
    if cvia == "stdin" and not cancel.get("text"):
        raise fail("cancel", "text", 'cancel.via = "stdin" needs the text to write (cancel.text)')
    if cvia == "command" and not cancel.get("command"):
        raise fail("cancel", "command", 'cancel.via = "command" needs cancel.command')
    actions = _parse_actions(data.get("actions", {}), fail)
    return ClientProfile(
        name=client["name"],
        source=origin,
        description=client.get("description", ""),
        tested_version=client.get("tested_version", ""),
        example=client.get("example", ""),
        prompt_via=via,
        prompt_text=prompt.get("text", "hello"),
        permission=policies,
        permission_default=default,
        cancel_via=cvia,
        cancel_signal=sig,
        cancel_text=cancel.get("text", ""),
        cancel_command=cancel.get("command", ""),
        cancel_reason=cancel.get("reason", ""),
        env=dict(data.get("env", {})),
        actions=actions,
    )


def _parse_actions(
    table: dict[str, Any], fail: Callable[[str | None, str | None, str], Exception]
) -> dict[str, UserAction]:
    actions: dict[str, UserAction] = {}
    for name, spec in table.items():
        if name not in USER_ACTIONS:
            raise fail("actions", name, f"unknown action (known: {', '.join(USER_ACTIONS)})")
        if isinstance(spec, dict):
            extra = set(spec) - {"args", "env"}
            if extra:
                raise fail("actions", name, f"unknown key(s) {sorted(extra)} (an action table has args and env)")
            args, env = spec.get("args", []), spec.get("env", {})
        else:
            args, env = spec, {}
        if not isinstance(args, list) or not all(isinstance(w, str) for w in args):
            raise fail("actions", name, "arguments must be a list of strings")
        if not isinstance(env, dict) or not all(isinstance(v, str) for v in env.values()):
            raise fail("actions", name, "env must be a table of strings")
        actions[name] = UserAction(tuple(args), tuple(sorted(env.items())))
    return actions


def describe(profile: ClientProfile) -> dict[str, Any]:
    """For reports: what the driver could and could not do."""
    return {
        "name": profile.name,
        "source": profile.source,
        "tested_version": profile.tested_version,
        "prompt": profile.prompt_via,
        "permission": sorted(profile.permission),
        "cancel": profile.cancel_via,
        "actions": sorted(profile.actions),
    }
