"""``hooks install`` checks what it writes: a warning (and ``command_runs: false``) when the
command a hook runs does not run where Claude Code will run it (``airsspec`` not on PATH for a
project install), and one when the hooks are installed at another scope too, where every event
would be recorded twice."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from tests.support.cli import run_cli


def install(project: Path, scope: str, path: str) -> tuple[dict, str]:
    env = {
        "HOME": str(project / "home"),
        "PATH": path,
        "PYTHONPATH": os.environ.get("PYTHONPATH", ""),
    }
    done = run_cli("hooks", "install", "--scope", scope, "--json", cwd=project, env=env)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout), done.stderr.decode()


def test_install_warns_when_its_command_does_not_run_or_runs_twice(tmp_path: Path) -> None:
    assert run_cli("init", str(tmp_path), cwd=tmp_path).returncode == 0
    bare = "/usr/bin:/bin"  # no airsspec console script here
    answer, said = install(tmp_path, "project", bare)
    assert answer["command_runs"] is False and answer["also_installed"] == []
    assert "'airsspec' must be on PATH" in said and said.count("\n") == 1
    answer, said = install(tmp_path, "local", bare)  # this interpreter: it runs
    assert answer["command_runs"] is True
    assert answer["also_installed"] == ["project"]
    assert "recorded twice" in said and "hooks uninstall --scope project" in said
    venv = f"{Path(sys.executable).parent}:{bare}"
    answer, said = install(tmp_path, "project", venv)  # with the console script on PATH
    assert answer["command_runs"] is True and "must be on PATH" not in said
