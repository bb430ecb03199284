"""One compactor per session; a compactor killed mid-way leaves no event or exactly one; a rerun
never duplicates or skips a range."""

from __future__ import annotations

import itertools
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from airsspec.workspace import Workspace, init_workspace
from eventlog.errors import CompactionBusyError
from eventlog.verify import verify
from tests.compactor.conftest import users

HOLD_LOCK = """
import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o644)
fcntl.flock(fd, fcntl.LOCK_EX)
print("locked", flush=True)
sys.stdin.read()
"""


def test_second_compactor_on_a_session_is_refused(small_ws: Workspace) -> None:
    small_ws.log.append_many("s", users(6))
    lock = small_ws.state_dir / "locks" / "compact-s.lock"
    lock.parent.mkdir(parents=True, exist_ok=True)
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_LOCK, str(lock)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "locked"
        with pytest.raises(CompactionBusyError):
            small_ws.compactor().compact("s")
    finally:
        holder.communicate("", timeout=30)
    assert (
        small_ws.compactor().compact("s", force=True) is not None
    )  # free again once the holder is gone


def _compactions(ws: Workspace, session: str) -> list:
    return [loc.record for loc in ws.log.read(session) if loc.record.type == "compaction"]


@pytest.mark.slow
def test_sigkilled_compactor_leaves_zero_or_one_event_and_rerun_continues(tmp_path: Path) -> None:
    init_workspace(tmp_path)
    (tmp_path / "airsspec.toml").write_text(
        '[memory]\nchunk_size = 5\n[compactor]\nsummarizer = "extractive"\n'
    )
    with Workspace.open(config=tmp_path / "airsspec.toml") as ws:
        for start in range(0, 3000, 500):
            ws.log.append_many("big", users(500, start=start))
    rng = random.Random(11)
    outcomes = []
    for _ in range(6):
        with Workspace.open(config=tmp_path / "airsspec.toml") as ws:
            before = len(_compactions(ws, "big"))
            # enough new messages that each run has about a second of summarizing to do
            ws.log.append_many("big", users(2500, start=9000 + before * 3000))
        proc = subprocess.Popen(
            [sys.executable, "-m", "airsspec", "compact", "big", "--force"],
            cwd=tmp_path,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        time.sleep(rng.uniform(0.3, 1.3))  # randomises where the kill lands; nothing waits on it
        killed = proc.poll() is None
        if killed:
            proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=120)
        with Workspace.open(config=tmp_path / "airsspec.toml") as ws:
            added = len(_compactions(ws, "big")) - before
            assert added in (0, 1)
            report = verify(ws.log)
            assert report.ok, report.sessions[0].problem
        outcomes.append((killed, added))
    with Workspace.open(config=tmp_path / "airsspec.toml") as ws:
        record = ws.compactor().compact("big", force=True)
        events = _compactions(ws, "big")
        assert events[-1] == record
        # contiguous coverage from seq 1: no range duplicated, none skipped
        assert events[0].from_seq == 1
        for a, b in itertools.pairwise(events):
            assert b.from_seq == a.to_seq + 1 and b.previous_library_no == a.library_no
        assert verify(ws.log).ok
    assert any(killed for killed, _ in outcomes), "no run was killed mid-way"
