"""When the machine refuses a write (a file size limit standing in for a full disk), a command
names the problem in one line and exits 1; the log is untouched, and the next run completes."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import init_workspace, snapshot
from tests.support.cli import run_cli


def _limited(args: list[str], cwd: Path, limit: int) -> subprocess.CompletedProcess[bytes]:
    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return subprocess.run(
        [sys.executable, "-m", "airsspec", *args],
        cwd=cwd,
        capture_output=True,
        preexec_fn=cap,
        env={**os.environ, "AIRSSPEC_COLD_EMBEDDER": "hash"},
        timeout=120,
        check=False,
    )


@pytest.mark.parametrize(
    "command",
    [
        ["project"],
        ["project", "--tier", "cold"],
        ["compact", "--force", "s"],
        ["export", "parquet", "out"],
    ],
)
@pytest.mark.slow
def test_a_refused_write_is_one_line_and_the_next_run_completes(
    tmp_path: Path, command: list[str]
) -> None:
    init_workspace(tmp_path)
    text = "x" * 3000
    lines = "".join(
        json.dumps({"type": "user", "content": f"{i} {text}"}) + "\n" for i in range(40)
    )
    assert run_cli("append", "s", cwd=tmp_path, stdin=lines.encode()).returncode == 0
    before = snapshot(tmp_path / ".airsspec" / "contexts")
    refused = _limited(command, tmp_path, 20_000)
    assert refused.returncode == 1, refused.stderr
    assert b"Traceback" not in refused.stderr
    assert refused.stderr.decode().strip().splitlines()[-1].startswith("airsspec: error:")
    assert snapshot(tmp_path / ".airsspec" / "contexts") == before
    done = run_cli(*command, cwd=tmp_path, env={"AIRSSPEC_COLD_EMBEDDER": "hash"})
    assert done.returncode == 0, done.stderr
    assert run_cli("verify", cwd=tmp_path).returncode == 0


def test_a_quarantine_that_cannot_be_written_moves_nothing(tmp_path: Path) -> None:
    init_workspace(tmp_path)
    assert (
        run_cli(
            "append", "s", cwd=tmp_path, stdin=b'{"type": "user", "content": "kept"}'
        ).returncode
        == 0
    )
    log = tmp_path / ".airsspec" / "contexts" / "agent" / "s.jsonl"
    with log.open("ab") as f:
        f.write(b'{"torn": "' + b"t" * 40_000)  # a write cut short: no newline
    before = snapshot(log.parent)
    refused = _limited(["verify"], tmp_path, 30_000)  # the quarantine entry needs ~55 KB
    assert b"Traceback" not in refused.stderr and b"cannot quarantine" in refused.stderr
    assert snapshot(log.parent) == before  # no empty quarantine file, the tail still there
    done = run_cli("verify", cwd=tmp_path)
    assert done.returncode == 0 and b"moved to quarantine" in done.stdout
    assert (log.parent / "s.jsonl.quarantine").stat().st_size > 40_000
