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
    the threads all the time, never one a thread is using. Four threads may hold four
    sessions for a moment; once they are done, two sessions' files (four) at most are open."""
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


def pause_appender(monkeypatch: pytest.MonkeyPatch) -> tuple[threading.Event, threading.Event]:
    """From now on, an append in the thread named ``appender`` stops while it holds its
    session's files: the first event is set when it got there, and it goes on once the
    second is set."""
    import eventlog.log as module

    inside, go = threading.Event(), threading.Event()
    real_now = module.utc_now

    def paused_now() -> str:  # called while the append holds its session's files
        if threading.current_thread().name == "appender":
            inside.set()
            assert go.wait(30)
        return real_now()

    monkeypatch.setattr(module, "utc_now", paused_now)
    return inside, go


def test_a_table_outgrown_by_calls_in_progress_is_trimmed_when_they_are_done(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One session's append is paused with its files in use while another session is
    appended to: the table holds both for the moment (a file in use is never closed), one
    more than ``max_open``, and is back to one session's files as soon as a call is done.
    (Threads contending this way used to leave the table over its bound after they joined.)"""
    log_dir = tmp_path / "log"
    with EventLog(log_dir, durability="batch", max_open=1) as log:
        log.append("a", {"type": "user", "content": "a1"})
        inside, go = pause_appender(monkeypatch)
        appender = threading.Thread(
            target=lambda: log.append("a", {"type": "user", "content": "a2"}), name="appender"
        )
        appender.start()
        try:
            assert inside.wait(30)
            log.append("b", {"type": "user", "content": "b1"})
            assert open_under(log_dir) == 2  # b's, closed when done: a's are in use
        finally:
            go.set()
            appender.join(30)
        assert open_under(log_dir) == 2  # a's, the one session the table holds
        assert contents(log, "a") == ["a1", "a2"] and contents(log, "b") == ["b1"]
    assert open_under(log_dir) == 0


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


def test_close_during_an_append_leaves_its_files_to_it_then_closes_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``close`` while an append is writing: the append finishes in its own file (a closed
    descriptor's number, reused by the next file opened, would have taken the record
    elsewhere), and its last step closes the files."""
    log = EventLog(tmp_path / "a", durability="off")
    log.append("a", {"type": "user", "content": "a1"})
    inside, go = pause_appender(monkeypatch)
    result: list[object] = []
    appender = threading.Thread(
        target=lambda: result.append(log.append("a", {"type": "user", "content": "a2"}).seq),
        name="appender",
    )
    appender.start()
    assert inside.wait(30)
    log.close()
    assert open_under(tmp_path / "a") >= 1, "the append's files stay open while it runs"
    with EventLog(tmp_path / "b", durability="off") as other:  # takes any number freed
        other.append("b", {"type": "user", "content": "b1"})
        go.set()
        appender.join(30)
        assert contents(other, "b") == ["b1"]
    assert result == [2]
    assert contents(EventLog(tmp_path / "a"), "a") == ["a1", "a2"]
    assert open_under(tmp_path / "a") == 0
    with pytest.raises(RuntimeError, match="closed"):
        log.head("a")  # a closed log opens no file again
    assert open_under(tmp_path / "a") == 0


def test_an_error_while_checking_a_session_s_file_gives_its_files_back(tmp_path: Path) -> None:
    """The log folder briefly not a folder: the append fails, and the session's files can
    still be closed for room afterwards."""
    log_dir = tmp_path / "log"
    with EventLog(log_dir, durability="off", max_open=1) as log:
        log.append("a", {"type": "user", "content": "a1"})
        log_dir.rename(tmp_path / "moved")
        log_dir.write_text("")
        with pytest.raises(OSError):
            log.append("a", {"type": "user", "content": "a2"})
        log_dir.unlink()
        (tmp_path / "moved").rename(log_dir)
        for i in range(5):
            log.append(f"s{i}", {"type": "user", "content": "x"})
        assert open_under(log_dir) <= 2  # one session's two files: a's were closed for room


FORKED = """
import os, sys
from pathlib import Path
from eventlog.log import EventLog
log_dir = Path(sys.argv[1])

def open_under():
    found = []
    for fd in os.listdir("/proc/self/fd"):
        try:  # the listing's own descriptor is closed by now
            found.append(os.readlink(f"/proc/self/fd/{fd}"))
        except OSError:
            continue
    return [target for target in found if target.startswith(str(log_dir))]
"""


def _fork_child(script: str, log_dir: Path, **env: str) -> list[str]:
    """Run ``script`` (after ``FORKED``) in a fresh interpreter; its output lines."""
    done = subprocess.run(
        [sys.executable, "-c", FORKED + script, str(log_dir)],
        capture_output=True,
        text=True,
        env={**os.environ, **env},
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


def test_a_forked_child_leaves_the_parents_sync_failure_to_the_parent(tmp_path: Path) -> None:
    """A background sync failed and nobody has collected it yet when the process forks: the
    child's appends go on, and the parent still raises the failure."""
    script = """
import errno
real = os.fdatasync
def failing(fd):
    if os.readlink(f"/proc/self/fd/{fd}").endswith("s1.jsonl"):
        raise OSError(errno.EIO, "Input/output error")
    return real(fd)
os.fdatasync = failing
log = EventLog(log_dir, durability="batch", batch_interval_ms=3_600_000)
log.append("s1", {"type": "user", "content": "x"})
log._commit.run_once()  # the thread's round, by hand: s1 fails, kept, not yet collected
pid = os.fork()
if pid == 0:
    os.fdatasync = real
    log.append("s2", {"type": "user", "content": "child"})
    log.close()
    os._exit(0 if not open_under() else 3)
_, status = os.waitpid(pid, 0)
print("child", os.waitstatus_to_exitcode(status))
try:
    log.flush()
    print("parent flushed")
except OSError as exc:
    print("parent", type(exc).__name__)
"""
    lines = _fork_child(script, tmp_path / "log", AIRSSPEC_PURE_PYTHON="1")
    assert lines == ["child 0", "parent LogSyncError"]


def test_a_fork_while_a_file_is_being_opened_leaves_the_child_no_stray_descriptor(
    tmp_path: Path,
) -> None:
    """A thread is between opening a session's file and entering it in the table when
    another forks: the fork waits for the table, so the child knows, and closes, every
    descriptor of the log it inherited."""
    script = """
import threading
import eventlog.log as module
inside, go = threading.Event(), threading.Event()
real_open = module.open_nofollow
def paused_open(path, flags, *args):
    fd = real_open(path, flags, *args)
    if str(path).endswith("s.jsonl") and threading.current_thread().name == "opener":
        inside.set()
        go.wait(30)
    return fd
module.open_nofollow = paused_open
os.register_at_fork(before=go.set)  # runs before the log's own hook: the opener goes on
log = EventLog(log_dir, durability="off")
opener = threading.Thread(target=lambda: log.append("s", {"type": "user", "content": "x"}),
                          name="opener")
opener.start()
inside.wait(30)
pid = os.fork()
if pid == 0:
    os._exit(0 if not open_under() else 3)
_, status = os.waitpid(pid, 0)
opener.join(30)
print("child", os.waitstatus_to_exitcode(status))
"""
    assert _fork_child(script, tmp_path / "log") == ["child 0"]
