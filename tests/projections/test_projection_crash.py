"""A projector process SIGKILLed mid-write leaves a consistent state; the next run completes it
and the result equals a clean rebuild, byte for byte."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import init_workspace, kill_runs_at_random, snapshot
from tests.support.cli import run_cli
from tests.support.logs import write_synthetic_log

pytestmark = pytest.mark.slow  # each test projects with the real embedder, or kills


def test_sigkilled_projection_resumes_to_the_same_bytes(tmp_path: Path) -> None:
    init_workspace(tmp_path)
    log_dir = tmp_path / ".airsspec" / "contexts" / "agent"
    write_synthetic_log(log_dir, sessions=60, per_session=400, content="a message " * 8)
    kills = kill_runs_at_random("project", cwd=tmp_path, runs=6, delay=(0.3, 1.5), seed=3)
    finished = run_cli("project", cwd=tmp_path)
    assert finished.returncode == 0, finished.stderr
    hot_dir = tmp_path / ".airsspec" / "state" / "hot"
    assert not list(hot_dir.glob(".tmp-*"))  # a killed writer's temporaries are cleaned up
    clean = tmp_path / "clean"
    rebuilt = run_cli(  # the hot projection only: the one compared
        "rebuild",
        "--projection",
        "hot",
        "--as-of",
        "2100-01-01T00:00:00Z",
        "--out",
        str(clean),
        cwd=tmp_path,
    )
    assert rebuilt.returncode == 0, rebuilt.stderr
    assert snapshot(hot_dir) == snapshot(clean / "state" / "hot")
    assert kills >= 1, "no run was killed: the workload finished too fast to test anything"
