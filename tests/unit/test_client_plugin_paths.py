"""``--acp-client`` commands typed relative to where pytest runs still work, although each test starts
the client in a directory of its own (``plugin.state.absolutize``)."""

from __future__ import annotations

import shlex
from pathlib import Path

from acp_conformance.plugin.state import absolutize
from acp_conformance.profiles import substitute


def test_relative_paths_that_exist_become_absolute(tmp_path: Path) -> None:
    (tmp_path / "node_modules" / ".bin").mkdir(parents=True)
    (tmp_path / "node_modules" / ".bin" / "acpx").write_text("")
    (tmp_path / "examples").mkdir()
    (tmp_path / "examples" / "client.py").write_text("")
    out = absolutize("node_modules/.bin/acpx {permission} --agent {agent} exec {prompt}", tmp_path)
    words = shlex.split(out)
    assert words[0] == str(tmp_path / "node_modules" / ".bin" / "acpx")
    assert words[1:] == ["{permission}", "--agent", "{agent}", "exec", "{prompt}"]
    out = absolutize("python examples/client.py {agent_argv}", tmp_path)
    assert shlex.split(out) == ["python", str(tmp_path / "examples" / "client.py"), "{agent_argv}"]


def test_everything_else_is_left_alone(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    command = "my-client --agent={agent} --opt a/b --cfg=a 'say a/ hi' /abs/path -x a/"
    # "a/" exists: only that whole word changes; options, placeholders and absent paths stay.
    words = shlex.split(absolutize(command, tmp_path))
    assert words[:6] == ["my-client", "--agent={agent}", "--opt", "a/b", "--cfg=a", "say a/ hi"]
    assert words[6:8] == ["/abs/path", "-x"]
    assert words[8] == str(tmp_path / "a")
    assert absolutize("my-client --agent {agent}", tmp_path) == "my-client --agent {agent}"


def test_placeholders_survive_the_round_trip(tmp_path: Path) -> None:
    (tmp_path / "bin").mkdir()
    out = absolutize("bin/ --agent {agent} {agent_argv} {permission}", tmp_path)
    argv = substitute(out, agent_argv=["py", "-m", "relay"], permission_args=["--yes"])
    assert argv == [str(tmp_path / "bin"), "--agent", "py -m relay", "py", "-m", "relay", "--yes"]
