"""Every example in the README runs as written: each ```sh and ```python block, in order, in a
project seeded with the example workspace's sessions (a block whose first line says it is not
run, because it calls a paid API, is the only exception)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO, run_cli

BLOCK = re.compile(r"^```(sh|python)\n(.*?)^```$", re.S | re.M)
NOT_RUN = "not run by the README test"


def _blocks() -> list[tuple[str, str]]:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    return [(lang, body) for lang, body in BLOCK.findall(text) if NOT_RUN not in body[:200]]


def test_the_readme_has_examples_to_run() -> None:
    kinds = [lang for lang, _ in _blocks()]
    assert kinds.count("sh") >= 5 and kinds.count("python") >= 2


@pytest.mark.slow
def test_every_readme_example_runs_as_written(tmp_path: Path) -> None:
    assert run_cli("init", str(tmp_path), cwd=tmp_path).returncode == 0
    shutil.copytree(
        REPO / ".airsspec-example" / "contexts",
        tmp_path / ".airsspec" / "contexts",
        dirs_exist_ok=True,
    )
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "AIRSSPEC_COLD_EMBEDDER": "hash",  # the examples' point is the calls, not the model
        "PYTHONPATH": str(REPO),
    }
    for number, (lang, body) in enumerate(_blocks(), start=1):
        command = (
            ["bash", "-euo", "pipefail", "-c", body]
            if lang == "sh"
            else [sys.executable, "-c", body]
        )
        done = subprocess.run(
            command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300, check=False
        )
        assert done.returncode == 0, (
            f"README block {number} ({lang}):\n{body}\n{done.stderr[-3000:]}"
        )
        assert "Traceback" not in done.stderr, body
