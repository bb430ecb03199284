"""Parallel folding under faults: a damaged log is reported as clearly as with one job, and a
killed ``project`` leaves no worker behind."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from airsspec.workspace import Workspace, init_workspace
from tests.conftest import children, wait_for
from tests.support.cli import run_cli


def _workspace(root: Path, sessions: int, records: int) -> Workspace:
    init_workspace(root)
    ws = Workspace.open(config=root / "airsspec.toml")
    ws.settings.log  # noqa: B018 - settings load before the log opens
    for s in range(sessions):
        for start in range(0, records, 500):
            ws.log.append_many(
                f"s{s}",
                [{"type": "user", "content": f"message {i}"} for i in range(start, start + 500)],
            )
    return ws


def test_a_damaged_log_is_reported_clearly_with_parallel_jobs(tmp_path: Path) -> None:
    with _workspace(tmp_path, 4, 500) as ws:
        logs = ws.log_dir
    assert run_cli("project", "--tier", "hot", cwd=tmp_path).returncode == 0
    for name in ("s1", "s2"):
        path = logs / f"{name}.jsonl"
        lines = path.read_bytes().splitlines(keepends=True)
        path.write_bytes(b"".join(lines[:100] + lines[101:]))  # a line gone from the middle
        (logs / f"{name}.head").unlink()
    for jobs in ("1", "2"):
        result = run_cli("rebuild", "--tier", "hot", "--jobs", jobs, cwd=tmp_path)
        assert result.returncode == 1, result.stderr
        assert b"Traceback" not in result.stderr
        assert result.stderr.startswith(b"airsspec: error: ")
        assert b"seq 101" in result.stderr


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="needs Linux /proc")
def test_a_killed_parallel_project_leaves_no_worker(tmp_path: Path) -> None:
    _workspace(tmp_path, 6, 6000).close()
    proc = subprocess.Popen(
        [sys.executable, "-m", "airsspec", "rebuild", "--tier", "hot", "--jobs", "2"],
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        assert wait_for(lambda: len(children(proc.pid)) >= 2, 60), "no workers started"
        workers = children(proc.pid)
        assert proc.poll() is None  # the kill lands while the workers run
        os.kill(proc.pid, signal.SIGKILL)
        assert proc.wait(timeout=30) == -signal.SIGKILL
        gone = wait_for(lambda: not any(Path(f"/proc/{w}").exists() for w in workers), 10)
        assert gone, f"workers {workers} outlived their parent"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
