"""Profiles for @agentclientprotocol/claude-agent-acp, @agentclientprotocol/codex-acp
and @zed-industries/codex-acp, run against a scripted model endpoint.

Everything a profile does is per agent process, inside the directory the
harness gives the setup hook (one per test, shared by the test's
connections, so a second process finds the sessions the first persisted):

* ``home/`` becomes ``HOME`` (Claude Code keeps its sessions under
  ``~/.claude/projects``); ``codex-home/`` becomes ``CODEX_HOME`` with a
  ``config.toml`` naming the stub as the model provider;
* the adapter's model API points at the stub (``ANTHROPIC_BASE_URL`` /
  the custom provider's ``base_url``), with a dummy key, telemetry and
  update checks off, proxy variables routing any other host to the stub
  (recorded there as an egress attempt), and the variables that would
  route Claude Code to Bedrock / Vertex or real credentials blanked;
* ``IS_SANDBOX=1`` when running as root (Claude Code refuses its
  permission-bypass machinery as root otherwise);
* with ``ask_permission`` (the default), the adapter starts its sessions in
  the mode in which it asks ``session/request_permission`` before writing
  (Claude: ``default`` via ``permissions.defaultMode`` in
  ``~/.claude/settings.json``; codex-acp 2.6.0: ``workspace-write`` via
  ``INITIAL_AGENT_MODE``; codex-acp 0.16.0: ``approval_policy =
  "on-request"``).  The mode id is also a hint (``hints["permission_mode"]``)
  for a suite that sets it with ``session/set_mode`` itself.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from acp_conformance.model_stub.script import Script, ScriptError, default_script
from acp_conformance.model_stub.stub import ModelStub, normalize_kind, stable_port

__all__ = [
    "CLAUDE_AGENT_ACP",
    "CODEX_ACP",
    "PROFILES",
    "ZED_CODEX_ACP",
    "AgentProfile",
    "PreparedProfile",
    "ProfileError",
    "Setup",
    "describe",
    "find_profile",
    "find_program",
    "installed_version",
    "profile_of_command",
    "profile_setup",
    "resolve",
]

Kind = Literal["anthropic", "openai"]
Setup = Callable[[Path], AbstractAsyncContextManager["PreparedProfile"]]
#: The checkout this package runs from (its node_modules holds the pinned peers).
REPO = Path(__file__).resolve().parents[2]


class ProfileError(ValueError):
    """A profile cannot be used as asked (not installed, wrong stub kind, bad script)."""


@dataclass(frozen=True)
class Prepared:
    """What a profile's ``prepare`` produced for one process."""

    env: dict[str, str]
    files: list[Path] = field(default_factory=list)


@dataclass(frozen=True)
class AgentProfile:
    """How to run one adapter package offline against a scripted model."""

    name: str
    package: str
    program: str
    kind: Kind
    pinned: str | None
    #: The session mode id in which it asks permission before a write / an escalated command.
    permission_mode: str | None
    #: The mode it starts in when left alone.
    default_mode: str | None
    prepare: Callable[[Path, ModelStub, bool], Prepared]
    aliases: tuple[str, ...] = ()
    notes: str = ""
    #: The bin script inside the package (used when ``.bin/<program>`` belongs to another package).
    entry: str = ""
    #: Directories under ``node_modules`` it may be installed as besides its name (npm aliases).
    npm_aliases: tuple[str, ...] = ()

    def names(self) -> tuple[str, ...]:
        return (self.name, self.package, *self.aliases)

    def install_dirs(self) -> tuple[str, ...]:
        return (self.package, *self.npm_aliases)


def installed_version(package_dir: Path | None) -> str | None:
    """The ``version`` of ``package_dir/package.json``, if readable."""
    if package_dir is None:
        return None
    try:
        version = json.loads((package_dir / "package.json").read_text("utf-8")).get("version")
    except (OSError, ValueError):
        return None
    return str(version) if version else None


# ------------------------------------------------------------------ env
_QUIET_CLAUDE = {
    "DISABLE_TELEMETRY": "1",
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    "DISABLE_AUTOUPDATER": "1",
    "DISABLE_ERROR_REPORTING": "1",
    "DISABLE_BUG_COMMAND": "1",
    "CLAUDE_CODE_ENABLE_TELEMETRY": "0",
    # Blank whatever the user's environment might carry that routes elsewhere.
    "CLAUDE_CODE_USE_BEDROCK": "",
    "CLAUDE_CODE_USE_VERTEX": "",
    "CLAUDE_CODE_USE_FOUNDRY": "",
    "ANTHROPIC_AUTH_TOKEN": "",
    "CLAUDE_CODE_OAUTH_TOKEN": "",
    "ANTHROPIC_BEDROCK_BASE_URL": "",
    "ANTHROPIC_VERTEX_BASE_URL": "",
    "ANTHROPIC_CUSTOM_HEADERS": "",
    "OTEL_EXPORTER_OTLP_ENDPOINT": "",
}


def _is_root() -> bool:
    return hasattr(os, "geteuid") and os.geteuid() == 0


def _home(directory: Path) -> Path:
    home = directory / "home"
    home.mkdir(parents=True, exist_ok=True)
    return home


def _prepare_claude(directory: Path, stub: ModelStub, ask_permission: bool) -> Prepared:
    home = _home(directory)
    files: list[Path] = []
    settings = home / ".claude" / "settings.json"
    settings.parent.mkdir(parents=True, exist_ok=True)
    data: dict[str, object] = {}
    if ask_permission:
        data["permissions"] = {"defaultMode": "default"}
    settings.write_text(json.dumps(data, indent=2) + "\n", "utf-8")
    files.append(settings)
    env = {**_QUIET_CLAUDE, **stub.env, "HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config")}
    if _is_root():
        env["IS_SANDBOX"] = "1"
    return Prepared(env, files)


#: Codex features that reach other hosts (plugin / app sync, ChatGPT connectors), ask the model on
#: the side (auto review) or would make a scripted run less deterministic; all off.
CODEX_FEATURES_OFF = (
    "plugins",
    "remote_plugin",
    "plugin_discovery_prefetch",
    "plugin_sharing",
    "apps",
    "tool_suggest",
    "system_proxy_fallback",
    "unbounded_connection_retries",
    "enable_request_compression",
    "guardian_approval",
    "image_generation",
    "in_app_updates",
    "shell_snapshot",
    "multi_agent",
    "memories",
)


def codex_config(
    stub: ModelStub,
    *,
    model: str = "gpt-5.5",
    approval_policy: str | None = None,
    sandbox_mode: str = "danger-full-access",
    features_off: tuple[str, ...] = CODEX_FEATURES_OFF,
) -> str:
    """``config.toml`` for a Codex whose only model provider is the stub."""
    lines = [
        "# written by acp-conformance: the model is the suite's scripted endpoint on 127.0.0.1",
        'model_provider = "acp_stub"',
        f'model = "{model}"',
        f'sandbox_mode = "{sandbox_mode}"',
        "check_for_update_on_startup = false",
        'web_search = "disabled"',
    ]
    if approval_policy:
        lines.append(f'approval_policy = "{approval_policy}"')
    lines += [
        "",
        "[model_providers.acp_stub]",
        'name = "acp-conformance model stub"',
        f'base_url = "{stub.base_url}"',
        'env_key = "OPENAI_API_KEY"',
        'wire_api = "responses"',
        "request_max_retries = 0",
        "stream_max_retries = 0",
        "stream_idle_timeout_ms = 300000",
        "",
        "[analytics]",
        "enabled = false",
        "",
        "[feedback]",
        "enabled = false",
        "",
        "[features]",
        *(f"{name} = false" for name in features_off),
        "",
    ]
    return "\n".join(lines)


def _prepare_codex(directory: Path, stub: ModelStub, ask_permission: bool, *, zed: bool) -> Prepared:
    home = _home(directory)
    codex_home = directory / "codex-home"
    codex_home.mkdir(parents=True, exist_ok=True)  # a missing CODEX_HOME fails initialize
    config = codex_home / "config.toml"
    if zed and ask_permission:
        # 0.16.0 offers no session modes: the config decides.  "on-request" asks when the model
        # requests escalated permissions (what the default script's exec_command does).
        text = codex_config(stub, approval_policy="on-request", sandbox_mode="workspace-write")
    else:
        # 2.6.0: the session mode (INITIAL_AGENT_MODE, session/set_mode) overrides these.
        text = codex_config(stub, approval_policy="never" if zed else None)
    config.write_text(text, "utf-8")
    env = {
        **stub.env,
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "CODEX_HOME": str(codex_home),
        "CODEX_API_KEY": "",
        "RUST_LOG": os.environ.get("RUST_LOG", "warn"),
    }
    if not zed:
        # codex-acp 2.6.0 picks the initial session mode from here (default: "agent", auto review).
        env["INITIAL_AGENT_MODE"] = "workspace-write" if ask_permission else "agent-full-access"
    return Prepared(env, [config])


CLAUDE_AGENT_ACP = AgentProfile(
    name="claude-agent-acp",
    package="@agentclientprotocol/claude-agent-acp",
    program="claude-agent-acp",
    kind="anthropic",
    pinned="0.101.0",
    permission_mode="default",
    default_mode="auto",
    prepare=_prepare_claude,
    aliases=("claude", "claude-code", "@zed-industries/claude-agent-acp", "@zed-industries/claude-code-acp"),
    entry="dist/index.js",
    notes="Claude Code behind the Claude Agent SDK; modes default, acceptEdits, plan, auto, bypassPermissions",
)

CODEX_ACP = AgentProfile(
    name="codex-acp",
    package="@agentclientprotocol/codex-acp",
    program="codex-acp",
    kind="openai",
    pinned="2.6.0",
    permission_mode="workspace-write",
    default_mode="agent",
    prepare=lambda d, s, a: _prepare_codex(d, s, a, zed=False),
    aliases=("codex",),
    entry="dist/index.js",
    notes="TypeScript adapter driving `codex app-server`; modes read-only, workspace-write, agent, agent-full-access",
)

ZED_CODEX_ACP = AgentProfile(
    name="zed-codex-acp",
    package="@zed-industries/codex-acp",
    program="codex-acp",
    kind="openai",
    pinned="0.16.0",
    permission_mode="auto",
    default_mode=None,
    prepare=lambda d, s, a: _prepare_codex(d, s, a, zed=True),
    aliases=("codex-acp-rs",),
    entry="bin/codex-acp.js",
    npm_aliases=("zed-codex-acp",),
    notes="Rust adapter behind a node shim; does not exit on stdin EOF (the harness kills the group)",
)

PROFILES: tuple[AgentProfile, ...] = (CLAUDE_AGENT_ACP, CODEX_ACP, ZED_CODEX_ACP)


# ------------------------------------------------------------- finding
def find_profile(name: str) -> AgentProfile | None:
    """The profile called ``name`` (or one of its aliases / its npm package name)."""
    key = name.strip().lower()
    for profile in PROFILES:
        if key in (n.lower() for n in profile.names()):
            return profile
    return None


def _search_roots(start: Path | None = None) -> list[Path]:
    here = (start or Path.cwd()).resolve()
    roots = [here, *here.parents]
    if REPO not in roots:
        roots.append(REPO)
    return roots


def find_program(profile: AgentProfile, start: Path | None = None) -> str | None:
    """The command that starts the profile's package, shell-quoted, or ``None``.

    ``node_modules`` of ``start`` (default: the current directory), its parents and
    this checkout: the ``.bin`` link when it points into the profile's package (two
    packages may both install ``.bin/codex-acp``), else the package's bin script
    (which also finds an npm alias install such as ``zed-codex-acp``); then ``PATH``.
    """
    for root in _search_roots(start):
        modules = root / "node_modules"
        for name in profile.install_dirs():
            pkg = modules / name
            if not (pkg / "package.json").is_file():
                continue
            link = modules / ".bin" / profile.program
            if link.exists() and pkg.resolve() in link.resolve().parents:
                return shlex.quote(str(link))
            entry = pkg / profile.entry
            if entry.is_file():
                return shlex.quote(str(entry)) if os.access(entry, os.X_OK) else f"node {shlex.quote(str(entry))}"
    found = shutil.which(profile.program)
    if found and profile_of_command([found])[0] is profile:
        return shlex.quote(found)
    return None


def _package_dir_of(path: str) -> tuple[AgentProfile, Path] | None:
    real = str(Path(path).resolve())
    for profile in PROFILES:
        for name in profile.install_dirs():
            marker = f"{os.sep}node_modules{os.sep}{name}{os.sep}"
            i = real.rfind(marker)
            if i >= 0:
                return profile, Path(real[: i + len(marker) - 1])
    return None


def profile_of_command(argv: list[str]) -> tuple[AgentProfile | None, Path | None]:
    """Which profile a command runs, and its package directory when it can be told.

    Looks at the program and, for ``node script.js``, the script: a path into a
    profile's package decides; otherwise the program's name (``claude-agent-acp``;
    ``codex-acp`` not resolvable to a package counts as @agentclientprotocol/codex-acp).
    """
    for word in argv[:2]:
        path = word if os.sep in word else shutil.which(word)
        if path and os.path.exists(path):
            found = _package_dir_of(path)
            if found is not None:
                return found
    if not argv:
        return None, None
    base = os.path.basename(argv[0])
    candidates = [p for p in PROFILES if p.program == base]
    return (candidates[0] if candidates else None), None


# ---------------------------------------------------------------- setup
class PreparedProfile:
    """Yielded per connection: ``env`` for the agent, ``evidence()`` for reports, ``hints`` for suites."""

    def __init__(
        self,
        profile: AgentProfile | None,
        stub: ModelStub,
        env: dict[str, str],
        files: list[Path],
        hints: dict[str, str],
    ) -> None:
        self.profile = profile
        self.stub = stub
        self.env = env
        self.files = files
        self.hints = hints

    def evidence(self) -> str:
        head = "peer profile: " + ", ".join(f"{k}={v}" for k, v in self.hints.items())
        return head + "\n" + self.stub.evidence()

    def holding(self) -> str | None:
        return self.stub.holding()

    def begin_lease(self) -> None:
        """A pooled process passes to the next test: the stub starts over for it."""
        self.stub.begin_lease()


def profile_setup(
    profile: AgentProfile | None,
    *,
    kind: str | None = None,
    script: Script | None = None,
    ask_permission: bool = True,
    package_dir: Path | None = None,
) -> Setup:
    """An ``AgentConfig.setup`` hook: a fresh stub per process plus the profile's HOME/config."""
    stub_kind: Kind = normalize_kind(kind) if kind else (profile.kind if profile else "anthropic")
    if profile is not None and stub_kind != profile.kind:
        raise ProfileError(f"{profile.name} speaks the {profile.kind} API, not {stub_kind}")
    hints: dict[str, str] = {"model_stub": stub_kind}
    if profile is not None:
        hints["profile"] = profile.name
        version = installed_version(package_dir)
        if version:
            hints["version"] = version
        if profile.pinned:
            hints["pinned"] = profile.pinned
        if profile.permission_mode:
            hints["permission_mode"] = profile.permission_mode
        hints["starts_in_permission_mode"] = "yes" if ask_permission else "no"

    @asynccontextmanager
    async def setup(directory: Path) -> AsyncIterator[PreparedProfile]:
        async with stable_port(directory, stub_kind, script) as stub:
            if profile is None:
                prepared_env, files = dict(stub.env), []
            else:
                prepared = profile.prepare(directory, stub, ask_permission)
                prepared_env, files = prepared.env, prepared.files
            yield PreparedProfile(profile, stub, prepared_env, files, dict(hints))

    return setup


def _split_stub(model_stub: str) -> tuple[str | None, str | None]:
    """``KIND``, ``KIND:script.toml`` or ``script.toml`` (the kind then comes from the profile)."""
    kind, sep, path = model_stub.strip().partition(":")
    if not sep and kind.endswith(".toml"):
        kind, path = "", kind
    return (kind or None), (path or None)


def _load_script(path: str | None, kind: Kind) -> Script | None:
    if path is None:
        return None
    try:
        # The file's rules first, then the default ones; its [default] (if any) replaces the default reply.
        return Script.from_toml(path, base=default_script(kind))
    except ScriptError as exc:
        raise ProfileError(f"--acp-model-stub: {exc}") from None


def resolve(agent_option: str, model_stub: str | None) -> tuple[str, Setup] | None:
    """What the plugin calls: ``(command, setup)`` for a profile / stub, else ``None``.

    * ``agent_option`` is a profile name (``claude-agent-acp``, ``codex-acp``,
      ``zed-codex-acp``, an alias or the npm package name): the installed
      program becomes the command; a ``ProfileError`` says when it is not
      installed.
    * ``agent_option`` is a command whose program is ``claude-agent-acp`` /
      ``codex-acp`` (a path or a PATH name): the command is kept, the profile
      applies.
    * otherwise, with ``model_stub`` given: the command is kept and only a
      stub is served (its environment points common client libraries at it).

    ``model_stub`` is ``KIND`` (anthropic/openai and aliases), ``KIND:FILE.toml``
    or ``FILE.toml`` (a script; the default rules follow its rules), or
    ``none`` (no stub and no profile: ``resolve`` returns ``None``).
    """
    if model_stub is not None and model_stub.strip().lower() in ("none", "off", "no"):
        return None
    kind, script_path = _split_stub(model_stub) if model_stub else (None, None)
    stub_kind: Kind | None = None
    if kind:
        try:
            stub_kind = normalize_kind(kind)
        except ValueError as exc:
            raise ProfileError(f"--acp-model-stub: {exc}") from None
    profile = find_profile(agent_option)
    command = agent_option
    if profile is not None:
        found = find_program(profile)
        if found is None:
            pin = f"@{profile.pinned}" if profile.pinned else ""
            raise ProfileError(
                f"{profile.name}: {profile.package} is not installed (looked in node_modules from {Path.cwd()} "
                f"upwards and in {REPO}, then on PATH for {profile.program}); "
                f"install it with `npm install {profile.package}{pin}`"
            )
        command = found
    try:
        argv = shlex.split(command)
    except ValueError:
        argv = []
    detected, package_dir = profile_of_command(argv)
    if profile is None:
        profile = detected
    if profile is None and model_stub is None:
        return None
    if profile is None and stub_kind is None:
        raise ProfileError(f"--acp-model-stub: say which API to serve for {agent_option!r}: anthropic or openai")
    if profile is not None and stub_kind is not None and stub_kind != profile.kind:
        raise ProfileError(f"--acp-model-stub: {profile.name} speaks the {profile.kind} API, not {stub_kind}")
    effective: Kind = profile.kind if profile is not None else stub_kind  # type: ignore[assignment]
    script = _load_script(script_path, effective)
    return command, profile_setup(profile, kind=effective, script=script, package_dir=package_dir)


def describe() -> list[str]:
    """One line per profile, for ``--help`` style listings."""
    return [f"{p.name} ({p.package}{' ' + p.pinned if p.pinned else ''}): {p.notes}" for p in PROFILES]
