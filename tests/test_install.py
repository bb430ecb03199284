"""A plain ``pip install`` of the built wheel, into a fresh venv, with no Makefile step: init,
append, project and query work outside the repository (the embedder's tokenizer is absent, so
search says it is degraded and still answers), and ``models fetch`` brings semantic search."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO


def _run(*cmd: str | Path, cwd: Path, env: dict[str, str] | None = None, stdin: str | None = None):
    done = subprocess.run(
        [str(c) for c in cmd],
        cwd=cwd,
        # Without PYTHONPATH: a checkout on it (its egg-info) reads to pip as installed already.
        env={**{k: v for k, v in os.environ.items() if k != "PYTHONPATH"}, **(env or {})},
        input=stdin,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert done.returncode == 0, (cmd, done.stdout[-2000:], done.stderr[-2000:])
    return done


@pytest.mark.slow
def test_the_built_wheel_installs_and_works_outside_the_repository(tmp_path: Path) -> None:
    wheels, venv, project = tmp_path / "wheels", tmp_path / "venv", tmp_path / "project"
    _run(
        sys.executable,
        "-m",
        "pip",
        "wheel",
        "--quiet",
        "--no-deps",
        "-w",
        wheels,
        REPO,
        cwd=tmp_path,
    )
    (wheel,) = wheels.glob("airsspec_memory-*.whl")
    _run(sys.executable, "-m", "venv", venv, cwd=tmp_path)
    # --no-compile: what is installed is the same; byte-compiling ~17,000 files of the
    # dependencies ahead of a run costs a quarter of the test.
    _run(
        venv / "bin" / "python", "-m", "pip", "install", "--quiet", "--no-compile", wheel,
        cwd=tmp_path,
    )  # fmt: skip
    airsspec = venv / "bin" / "airsspec"
    project.mkdir()
    # A models folder of its own: the user's cache is not this test's business.
    env = {"AIRSSPEC_MODELS": str(tmp_path / "models"), "PYTHONPATH": ""}
    _run(airsspec, "init", cwd=project, env=env)
    _run(
        airsspec,
        "append",
        "s1",
        cwd=project,
        env=env,
        stdin='{"type": "user", "content": "Add rate limiting to the upload API"}\n',
    )
    projected = _run(airsspec, "project", cwd=project, env=env)
    assert "airsspec models fetch" in projected.stderr  # one clear warning, exit 0
    degraded = json.loads(
        _run(airsspec, "query", "rate limiting", "--json", cwd=project, env=env).stdout
    )
    assert degraded["degraded"] and degraded["hits"][0]["text"].startswith("Add rate limiting")
    _run(airsspec, "models", "fetch", cwd=project, env=env)
    _run(airsspec, "project", cwd=project, env=env)
    semantic = json.loads(
        _run(airsspec, "query", "throttle uploads", "--json", cwd=project, env=env).stdout
    )
    assert semantic["mode"] == "hybrid" and not semantic["degraded"]
    assert semantic["hits"][0]["parts"]["semantic"] > 0.3
    # the installed code is the wheel's, not this checkout's
    where = _run(
        venv / "bin" / "python", "-c", "import airsspec; print(airsspec.__file__)", cwd=project
    )
    assert str(venv) in where.stdout
