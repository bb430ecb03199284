"""Projection temporaries belong to their writer: unique per process, thread and call, and
removed as stale only once the process that named them is gone."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

from projections.files import atomic_write, remove_stale_temporaries, temporary_name
from tests.conftest import wait_for


def test_a_live_writers_temporary_is_kept_and_a_dead_writers_is_removed(tmp_path: Path) -> None:
    alive = subprocess.Popen(
        [sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE
    )
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        check=True,
    )
    try:
        live_tmp = tmp_path / f".tmp-{alive.pid}-1-0-s.json"
        dead_tmp = tmp_path / f".tmp-{dead.stdout.strip()}-1-0-s.json"
        ours = tmp_path / temporary_name("s.json")  # named by this process, not being written
        for tmp in (live_tmp, dead_tmp, ours):
            tmp.write_bytes(b"partial")
        assert remove_stale_temporaries(tmp_path) == 2
        assert [p.name for p in tmp_path.iterdir()] == [live_tmp.name]
    finally:
        alive.communicate(b"")


def test_writers_in_many_threads_never_lose_their_temporaries_to_a_cleanup(tmp_path: Path) -> None:
    target = tmp_path / "s.json"
    errors: list[BaseException] = []
    stop = threading.Event()

    def write(n: int) -> None:
        try:
            for i in range(300):
                atomic_write(target, f"{n}-{i}".encode())
        except BaseException as exc:  # collected for the assertion
            errors.append(exc)

    def clean() -> None:
        while not stop.is_set():
            remove_stale_temporaries(tmp_path)

    cleaner = threading.Thread(target=clean)
    writers = [threading.Thread(target=write, args=(n,)) for n in range(8)]
    cleaner.start()
    for t in writers:
        t.start()
    for t in writers:
        t.join()
    stop.set()
    cleaner.join()
    assert errors == []
    assert [p.name for p in tmp_path.iterdir()] == ["s.json"]


def test_one_projection_writer_at_a_time_across_threads_and_processes(tmp_path: Path) -> None:
    """A catch-up holds its projector's lock: another thread, or another process, waits."""
    from airsspec import Memory

    with Memory.open(tmp_path, create=True) as memory:
        (projector,) = memory.workspace.projectors(("hot",))
    entered = threading.Event()
    with projector.state_store.exclusive():
        other = threading.Thread(
            target=lambda: projector.state_store.exclusive().__enter__() or entered.set()
        )
        other.start()
        held_out = not wait_for(entered.is_set, 0.5)
        code = (
            "import fcntl, sys; f = open(sys.argv[1], 'a'); "
            "fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)"
        )
        lock = projector.out_dir.with_name("hot.lock")
        refused = subprocess.run([sys.executable, "-c", code, str(lock)], capture_output=True)
    assert held_out, "a second thread entered while the first held the lock"
    assert refused.returncode != 0 and b"BlockingIOError" in refused.stderr
    assert wait_for(entered.is_set, 30)  # and it gets in once the first is done
    other.join()
