"""Open files: a log keeps a bounded number of sessions' files open (the least recently used
one no call is using is closed when another is needed), and gives them all back when it is
closed or collected. A long-running writer serves any number of sessions."""

from __future__ import annotations

import gc
import os
import random
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from eventlog.log import EventLog
from eventlog.verify import verify


def open_under(folder: Path) -> int:
    """This process's descriptors of files under ``folder``."""
    fds = Path("/proc/self/fd")
    return sum(
        os.readlink(fds / fd).startswith(str(folder))
        for fd in os.listdir(fds)
        if (fds / fd).is_symlink()
    )


def contents(log: EventLog, session: str) -> list[str]:
    """The contents of ``session``'s records, checking their seqs run 1, 2, 3 ..."""
    located = list(log.read(session))
    assert [loc.record.seq for loc in located] == list(range(1, len(located) + 1))
    return [loc.record.content for loc in located]


@settings(max_examples=40, deadline=None)
@given(
    appends=st.lists(st.tuples(st.integers(0, 7), st.integers(1, 3)), min_size=1, max_size=30),
    max_open=st.integers(1, 4),
    durability=st.sampled_from(["always", "batch", "off"]),
)
def test_appends_through_a_small_table_read_back_whole_and_hold_few_files(
    tmp_path_factory: pytest.TempPathFactory,
    appends: list[tuple[int, int]],
    max_open: int,
    durability: str,
) -> None:
    log_dir = tmp_path_factory.mktemp("log")
    expected: dict[str, list[str]] = {}
    with EventLog(log_dir, durability=durability, max_open=max_open) as log:
        for step, (which, count) in enumerate(appends):
            session = f"s{which}"
            batch = [f"{step}.{i}" for i in range(count)]
            log.append_many(session, [{"type": "user", "content": c} for c in batch])
            expected.setdefault(session, []).extend(batch)
            other = f"s{(which + 1) % 8}"  # a read between the appends
            assert log.head(other).seq == len(expected.get(other, []))
            assert open_under(log_dir) <= 2 * max_open
        for session, wanted in expected.items():
            assert contents(log, session) == wanted
    assert open_under(log_dir) == 0
    assert verify(EventLog(log_dir)).ok


def test_threads_appending_to_more_sessions_than_the_table_holds_lose_nothing(
    tmp_path: Path,
) -> None:
    """Four threads, twelve sessions, two open at once: handles are closed and reopened under
    the threads all the time, never one a thread is using."""
    log_dir = tmp_path / "log"
    written: dict[str, dict[str, list[str]]] = {}  # writer -> session -> contents in order
    with EventLog(log_dir, durability="batch", max_open=2) as log:

        def writer(name: str) -> None:
            chooser, mine = random.Random(name), written.setdefault(name, {})
            for i in range(60):
                session = f"s{chooser.randrange(12)}"
                log.append(session, {"type": "user", "content": f"{name}:{i}"})
                mine.setdefault(session, []).append(f"{name}:{i}")
                log.head(f"s{chooser.randrange(12)}")  # a reader among the writers

        threads = [threading.Thread(target=writer, args=(f"w{n}",)) for n in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert open_under(log_dir) <= 4
        stored = {session: contents(log, session) for session in log.sessions()}
    assert sum(map(len, stored.values())) == 240
    for name, sessions in written.items():
        for session, wanted in sessions.items():
            assert [c for c in stored[session] if c.startswith(f"{name}:")] == wanted
    assert verify(EventLog(log_dir)).ok


def test_a_process_with_few_descriptors_appends_to_many_sessions(tmp_path: Path) -> None:
    """Under a limit of 128 descriptors (macOS allows 256 by default), one log appends to 500
    sessions: it keeps what the limit leaves room for open, not every session it has seen."""
    child = f"""
import resource
from eventlog.log import EventLog
resource.setrlimit(resource.RLIMIT_NOFILE, (128, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
with EventLog({str(tmp_path / "log")!r}, durability="batch") as log:
    for i in range(500):
        log.append(f"s{{i}}", {{"type": "user", "content": f"record {{i}}"}})
    print(log.max_open)
"""
    done = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "16"  # an eighth of 128
    log = EventLog(tmp_path / "log")
    assert len(log.sessions()) == 500
    assert contents(log, "s0") == ["record 0"] and contents(log, "s499") == ["record 499"]


@pytest.mark.parametrize("durability", ["always", "batch"])
def test_a_log_left_unclosed_gives_its_descriptors_back_when_collected(
    tmp_path: Path, durability: str
) -> None:
    """A log dropped without ``close`` (a caller that verifies or appends through a fresh
    ``EventLog`` each time) does not keep its files open: a long-running process would run
    out of descriptors."""
    log_dir = tmp_path / "log"
    with EventLog(log_dir) as log:
        log.append("s", {"type": "user", "content": "first"})
    for i in range(50):
        dropped = EventLog(log_dir, durability=durability)
        dropped.append("s", {"type": "user", "content": f"again {i}"})
        assert len(list(dropped.read("s"))) == i + 2
        assert open_under(log_dir) >= 1  # held while it lives
        del dropped
    gc.collect()
    assert open_under(log_dir) == 0
    with EventLog(log_dir) as log:
        assert contents(log, "s")[-1] == "again 49"
