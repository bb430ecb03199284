"""A real failing disk: an ext4 file system on a loop device whose backing file lives on a
small tmpfs, so once the tmpfs is full the device fails its writes and ``fdatasync`` of a log
file fails, as on a dying or thin-provisioned disk. Linux reports such a failure once; the
log must keep it, not lose it."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from eventlog.errors import LogSyncError, LogWriteError
from eventlog.log import EventLog

BIG = "x" * 100_000  # ~100 KB per record: the disk has about 1.7 MB of room


def _run(*command: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(part) for part in command], capture_output=True, text=True)


@pytest.fixture
def failing_disk(tmp_path: Path) -> Iterator[Path]:
    """A folder on a file system whose device fails writes after a couple of MB; unmounted
    and detached afterwards (a test that leaves a file open under it fails here)."""
    if os.geteuid() != 0:
        pytest.skip("mounting a file system on a loop device needs root")
    tools = ("mount", "umount", "losetup", "mkfs.ext4")
    missing = [tool for tool in tools if not shutil.which(tool)]
    if missing:
        pytest.skip(f"needs {', '.join(missing)}")
    backing, disk = tmp_path / "backing", tmp_path / "disk"
    backing.mkdir()
    disk.mkdir()
    undo: list[tuple[str | Path, ...]] = []
    try:
        _setup(["mount", "-t", "tmpfs", "-o", "size=6M", "tmpfs", backing], "mount a tmpfs")
        undo.append(("umount", backing))
        image = backing / "disk.img"
        with image.open("wb") as file:
            file.truncate(32 << 20)  # sparse: the device is larger than the room behind it
        device = _setup(["losetup", "-f", "--show", image], "attach a loop device").strip()
        undo.append(("losetup", "-d", device))
        _setup(["mkfs.ext4", "-q", device], "make a file system")
        _setup(["mount", device, disk], "mount a loop device")
        undo.append(("umount", disk))
        yield disk
    finally:
        failed = [" ".join(map(str, step)) for step in reversed(undo) if _run(*step).returncode]
    assert not failed, f"left behind: {failed}"


def _setup(command: list[str | Path], what: str) -> str:
    done = _run(*command)
    if done.returncode:
        pytest.skip(f"cannot {what} here: {done.stderr.strip()}")
    return done.stdout


def test_a_failed_sync_under_always_is_raised_and_later_appends_are_refused(
    failing_disk: Path,
) -> None:
    log = EventLog(failing_disk / "log", durability="always")
    path = failing_disk / "log" / "s.jsonl"
    acknowledged = 0
    with pytest.raises(LogSyncError) as failed:
        for _ in range(100):  # 10 MB: far more than the disk holds
            log.append("s", {"type": "user", "content": BIG})
            acknowledged += 1
    assert isinstance(failed.value, LogWriteError)  # the CLI's one-line "failed" exit
    assert failed.value.errno is not None
    assert 0 < acknowledged < 100
    assert f"{path}: fdatasync failed" in str(failed.value)
    assert f"from seq {acknowledged + 1} on" in str(failed.value)

    size = path.stat().st_size
    with pytest.raises(LogSyncError, match="takes no more appends"):
        log.append("s", {"type": "user", "content": "after the failure"})
    assert path.stat().st_size == size  # refused before anything was written
    with pytest.raises(LogSyncError):
        log.close()
    with pytest.raises(RuntimeError, match="closed"):
        log.append("s", {"type": "user", "content": "closed"})


def test_a_background_sync_failure_under_batch_is_kept_until_raised(failing_disk: Path) -> None:
    """The group commit's failure happens in its thread, where nobody waits for it: Linux then
    reports the file as synced, so unless the log keeps the failure, ``close`` succeeds and
    the records are silently gone."""
    # An hour's interval: the thread never syncs on its own; the test runs its step instead.
    log = EventLog(failing_disk / "log", durability="batch", batch_interval_ms=3_600_000)
    path = failing_disk / "log" / "s.jsonl"
    for _ in range(40):  # 4 MB into the page cache: each append returns at once
        log.append("s", {"type": "user", "content": BIG})

    log._sync_dirty()  # what the thread runs each interval: it keeps the failure, raises none
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fdatasync(fd)  # the OS reported the failure once: it now says all is well
    finally:
        os.close(fd)

    size = path.stat().st_size
    with pytest.raises(LogSyncError, match="from seq 1 on may not be on disk"):
        log.append("s", {"type": "user", "content": "after the failure"})
    assert path.stat().st_size == size
    with pytest.raises(LogSyncError):
        log.flush()
    with pytest.raises(LogSyncError):
        log.close()


def test_a_sync_failure_found_when_a_session_is_closed_for_room_is_kept_for_its_file(
    failing_disk: Path,
) -> None:
    """With one session open at a time, appending to another closes the first, running its
    pending sync then: the failure it reports is the first file's, which takes no more
    appends when it is opened again."""
    log = EventLog(
        failing_disk / "log", durability="batch", batch_interval_ms=3_600_000, max_open=1
    )
    path = failing_disk / "log" / "s.jsonl"
    try:
        for _ in range(40):  # 4 MB into the page cache, never synced by the thread
            log.append("s", {"type": "user", "content": BIG})
        log.append("t", {"type": "user", "content": "another session"})  # closes s, syncing it

        size = path.stat().st_size
        with pytest.raises(LogSyncError, match=f"{path}: fdatasync failed.*from seq 1 on"):
            log.append("s", {"type": "user", "content": "after the failure"})
        assert path.stat().st_size == size
        with pytest.raises(LogSyncError):
            log.close()
    finally:
        with contextlib.suppress(LogSyncError):
            log.close()  # even after a failed assertion: the disk must unmount
