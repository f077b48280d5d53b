"""Installed like any pytest plugin: from a built wheel, in a fresh virtual environment, with no
checkout and no Node.js, it certifies exactly what a checkout certifies.

The wheel and the sdist are built from this checkout (``python -m build``), the wheel is installed
into a new venv (its dependencies from the package index, as a user gets them), and everything
then runs from an empty directory with only that venv on ``PATH`` and an empty schema cache: the
plugin fetches the pinned schema tarball from the npm registry itself, checks its sha256, and the
bundled suite certifies the bundled reference agent.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

from tests.e2e._suite_run import ROOT

pytestmark = [pytest.mark.slow, pytest.mark.skipif(sys.platform == "win32", reason="POSIX venv layout")]


def run(argv: list[str], *, cwd: Path, env: dict[str, str], timeout: float = 600) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, f"{argv} exited {done.returncode}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done


def collected(out: str) -> int:
    found = re.search(r"(\d+) tests? collected", out)
    assert found, out[-2000:]
    return int(found.group(1))


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel and the sdist, built once from this checkout."""
    out = tmp_path_factory.mktemp("dist")
    built = subprocess.run(
        [sys.executable, "-m", "build", "--sdist", "--wheel", "--outdir", str(out), str(ROOT)],
        cwd=out,
        env=BASE,
        capture_output=True,
        text=True,
        timeout=600,
    )
    if built.returncode != 0 and "No module named build" in built.stderr:
        pytest.skip("the `build` package is not installed (it comes with the dev extras: ./run setup)")
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    return out


BASE = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "PYTHON", "ACP_", "VIRTUAL_ENV"))}


def fresh_venv(where: Path, requirement: str) -> Path:
    venv = where / "venv"
    run([sys.executable, "-m", "venv", str(venv)], cwd=where, env=BASE)
    run([str(venv / "bin" / "pip"), "install", "-q", requirement], cwd=where, env=BASE, timeout=900)
    return venv


def test_a_wheel_in_a_fresh_venv_certifies_like_the_checkout(dist: Path, tmp_path: Path) -> None:
    wheel = next(dist.glob("acp_conformance-*.whl"))
    sdist = next(dist.glob("acp_conformance-*.tar.gz"))
    names = zipfile.ZipFile(wheel).namelist()
    assert any(n.startswith("acp_conformance/scenario/library/agent/") for n in names), "no scenario library"
    assert any(n.endswith("LICENSE") for n in names) and "mock_agent/__main__.py" in names
    with tarfile.open(sdist) as tar:
        assert any(n.endswith("/LICENSE") for n in tar.getnames())

    venv = fresh_venv(tmp_path, f"{wheel}[suite]")
    empty = tmp_path / "empty"
    empty.mkdir()
    # Only the venv on PATH (no node, no npm), an empty schema cache, no checkout anywhere near.
    env = {**BASE, "PATH": str(venv / "bin"), "XDG_CACHE_HOME": str(tmp_path / "cache"), "HOME": str(tmp_path)}
    argv = ["acp-conformance", "agent", "-q", "-n", "2", "--acp-report-json=report.json", "--"]
    cli = run([*argv, "python", "-m", "mock_agent"], cwd=empty, env=env)
    report = json.loads((empty / "report.json").read_text("utf-8"))
    assert report["verdict"]["conformant"] is True, cli.stdout[-3000:]
    assert report["schema"].get("pinned") is True, report["schema"]
    assert (tmp_path / "cache" / "acp-conformance").is_dir(), "the schema was not fetched into the cache"
    ran = report["verdict"]["tests"]

    plain = run(["pytest", "--co", "-q", "--acp-agent=python -m mock_agent"], cwd=empty, env=env)
    from_checkout = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            "--co",
            "-q",
            f"--acp-agent={sys.executable} -m mock_agent",
        ],
        cwd=tmp_path,
        env={k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert collected(plain.stdout) == collected(from_checkout.stdout) == ran, (plain.stdout[-1500:], ran)


def test_the_mocks_alone_install_without_the_suite_and_run(dist: Path, tmp_path: Path) -> None:
    """``pip install acp-conformance`` (no extra): no pytest-xdist, Hypothesis or Faker, and the
    reference client drives the reference agent through a turn; what needs the suite says so."""
    wheel = next(dist.glob("acp_conformance-*.whl"))
    venv = fresh_venv(tmp_path, str(wheel))
    listed = run([str(venv / "bin" / "pip"), "list", "--format=freeze"], cwd=tmp_path, env=BASE).stdout.lower()
    installed = {line.split("==")[0] for line in listed.splitlines()}
    assert not installed & {"pytest-xdist", "hypothesis", "faker", "pytest", "pydantic"}, sorted(installed)
    env = {**BASE, "PATH": str(venv / "bin"), "XDG_CACHE_HOME": str(tmp_path / "cache"), "HOME": str(tmp_path)}
    turn = run(
        [
            "python",
            "-m",
            "mock_client",
            "--agent",
            "python -m mock_agent",
            "--prompt",
            "acp:tool",
            "--caps",
            "fs",
            "--cwd",
            str(tmp_path),
            "--report",
            "run.json",
            "--quiet",
        ],
        cwd=tmp_path,
        env=env,
    )
    account = json.loads((tmp_path / "run.json").read_text("utf-8"))
    assert account["turns"][0]["stopReason"] == "end_turn" and not account.get("agent_violations"), turn.stderr
    refused = subprocess.run(
        ["acp-conformance", "agent", "--", "python", "-m", "mock_agent"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert refused.returncode == 2 and "pip install 'acp-conformance[suite]'" in refused.stderr, refused.stderr
    assert "Traceback" not in refused.stderr
