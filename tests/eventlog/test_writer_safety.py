"""The append path shared between threads and across a fork, with the C extension and without:
``close`` from two threads at once returns in both, a child forked after a ``batch`` append
can append, flush and close, ``encode_batch`` survives Python code that changes the lists it
was given, a failed sync is kept even when memory runs out, and ``AIRSSPEC_REQUIRE_NATIVE=1``
refuses a build without the extension. Whatever could hang or crash runs in a child process
with a deadline, so a failure is reported, not a frozen or killed test run."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import textwrap

import pytest

from eventlog.group_commit import PyGroupCommit
from eventlog.native import lines
from tests.conftest import REPO

needs_extension = pytest.mark.skipif(
    lines is None, reason="the C extension eventlog._lines is not built here"
)
# The environment a child runs in: the extension, or the pure-Python steps.
IMPLEMENTATIONS = [
    pytest.param({"AIRSSPEC_PURE_PYTHON": "1"}, id="python"),
    pytest.param({}, id="c", marks=needs_extension),
]


def run_child(code: str, env: dict[str, str], seconds: float = 120) -> None:
    """Run ``code`` in a fresh interpreter; it must exit 0 within ``seconds`` (a hang or a
    crash fails the test, naming what the child said). The child's temporary folders go in one
    that is removed after it."""
    with tempfile.TemporaryDirectory() as tmp:
        full_env = {**os.environ, "PYTHONPATH": str(REPO), "TMPDIR": tmp, **env}
        try:
            done = subprocess.run(
                [sys.executable, "-c", textwrap.dedent(code)],
                env=full_env,
                capture_output=True,
                text=True,
                timeout=seconds,
            )
        except subprocess.TimeoutExpired as exc:
            pytest.fail(f"the child hung ({seconds}s): {exc.stderr}")
    assert done.returncode == 0, f"exit {done.returncode}: {done.stdout}{done.stderr}"


@pytest.mark.parametrize("env", IMPLEMENTATIONS)
def test_closing_a_batch_log_from_two_threads_at_once_returns_in_both(env) -> None:
    run_child(
        """
        import tempfile, threading
        from eventlog.log import EventLog
        for round in range(200):
            log = EventLog(tempfile.mkdtemp(), durability="batch", batch_interval_ms=0.1)
            log.append("s", {"type": "user", "content": "x"})
            start = threading.Barrier(2)
            def close():
                start.wait()
                log.close()
            closers = [threading.Thread(target=close) for _ in range(2)]
            for t in closers:
                t.start()
            for t in closers:
                t.join(30)
                assert not t.is_alive(), f"close hung in round {round}"
            log.close()  # and once more: nothing to do
        """,
        env,
    )


@pytest.mark.parametrize("env", IMPLEMENTATIONS)
def test_a_child_forked_after_a_batch_append_appends_flushes_and_closes(env) -> None:
    """Forks land while the group commit's thread is syncing (a 0.1 ms interval and a stream
    of appends); each child must append, flush and close within the deadline."""
    run_child(
        """
        import os, tempfile, threading, time
        from eventlog.log import EventLog
        root = tempfile.mkdtemp()
        log = EventLog(root, durability="batch", batch_interval_ms=0.1)
        stop = threading.Event()
        def stream():
            while not stop.is_set():
                log.append("busy", {"type": "user", "content": "x" * 200})
        writer = threading.Thread(target=stream)
        writer.start()
        try:
            for n in range(40):
                log.append(f"s{n}", {"type": "user", "content": "before fork"})
                pid = os.fork()
                if pid == 0:
                    child = 1
                    try:
                        log.append(f"s{n}", {"type": "user", "content": "in child"})
                        log.flush()
                        log.close()
                        child = 0
                    finally:
                        os._exit(child)
                deadline = time.monotonic() + 20
                while time.monotonic() < deadline:
                    done, status = os.waitpid(pid, os.WNOHANG)
                    if done:
                        break
                    time.sleep(0.005)  # polls the child, up to its deadline
                else:
                    os.kill(pid, 9)
                    os.waitpid(pid, 0)
                    raise SystemExit(f"child {n} hung")
                assert os.waitstatus_to_exitcode(status) == 0, f"child {n} failed"
        finally:
            stop.set()
            writer.join()
        log.close()
        with EventLog(root) as check:
            for n in range(40):
                assert [r.record.content for r in check.read(f"s{n}")] == [
                    "before fork", "in child"
                ]
        """,
        env,
        seconds=240,
    )


@needs_extension
def test_encode_batch_survives_a_dumps_that_empties_the_lists_it_was_given() -> None:
    run_child(
        """
        import gc, orjson
        from eventlog import _lines
        bodies = [{"type": "user", "content": str(i) * 50} for i in range(8)]
        ids = [f"id-{i}" for i in range(8)]
        def dumps(record, option):
            bodies.clear(); ids.clear(); gc.collect()
            return orjson.dumps(record, option=option)
        records, data, hashes = _lines.encode_batch(
            bodies, 2, "s", 0, "2026-01-01T00:00:00Z", ids, None, dumps, orjson.OPT_SORT_KEYS
        )
        assert [r["content"] for r in records] == [str(i) * 50 for i in range(8)]
        assert len(hashes) == 8 and data.count(b"\\n") == 8
        """,
        {},
    )


@needs_extension
def test_encode_batch_survives_a_dict_subclass_that_empties_the_lists_it_was_given() -> None:
    run_child(
        """
        import gc, orjson
        from eventlog import _lines
        class Sly(dict):
            def __iter__(self):
                bodies.clear(); ids.clear(); gc.collect()
                return super().__iter__()
            def keys(self):
                bodies.clear(); ids.clear(); gc.collect()
                return list(super().keys())
        bodies = [Sly(type="user", content=str(i) * 50) for i in range(8)]
        ids = [f"id-{i}" for i in range(8)]
        records, data, hashes = _lines.encode_batch(
            bodies, 2, "s", 0, "2026-01-01T00:00:00Z", ids, None, orjson.dumps,
            orjson.OPT_SORT_KEYS,
        )
        assert [r["content"] for r in records] == [str(i) * 50 for i in range(8)]
        """,
        {},
    )


@needs_extension
def test_a_failed_sync_is_kept_when_memory_to_record_it_runs_out() -> None:
    """A pipe cannot be synced: its sync fails, with the allocator failing meanwhile."""
    commit = lines.GroupCommit(3600.0)
    read_end, write_end = os.pipe()
    try:
        commit.mark(write_end, 4)
        lines._fail_allocations(1)  # the room for the failure must already be there
        commit.run_once()
        assert commit.failed
        lines._fail_allocations(1)  # collect cannot build its list: nothing is dropped
        with pytest.raises(MemoryError):
            commit.collect()
        assert commit.failed
        assert [(fd, first) for fd, _, first in commit.collect()] == [(write_end, 4)]
        assert not commit.failed
        fresh = lines.GroupCommit(3600.0)  # no room allocated yet
        try:
            lines._fail_allocations(2)  # cannot even remember the file: synced at once, kept
            fresh.mark(write_end, 9)
            assert fresh.failed
            assert [(fd, first) for fd, _, first in fresh.collect()] == [(write_end, 9)]
        finally:
            fresh.close()
    finally:
        lines._fail_allocations(0)
        commit.close()
        os.close(read_end)
        os.close(write_end)


@pytest.mark.parametrize(
    "commit_type",
    [
        pytest.param(PyGroupCommit, id="python"),
        pytest.param(lines and lines.GroupCommit, id="c", marks=needs_extension),
    ],
)
def test_a_group_commit_closed_twice_and_used_after_close_does_not_hang(commit_type) -> None:
    commit = commit_type(0.001)
    read_end, write_end = os.pipe()
    try:
        commit.close()
        commit.close()
        commit.mark(write_end, 1)  # no thread: the sync happens at the next round
        commit.run_once()
        assert [first for _, _, first in commit.collect()] == [1]
    finally:
        os.close(read_end)
        os.close(write_end)


def test_require_native_refuses_a_build_without_the_extension() -> None:
    """With the extension made unimportable (as on a machine where it did not build),
    importing ``eventlog.native`` under ``AIRSSPEC_REQUIRE_NATIVE=1`` fails, saying what is
    missing; without the variable the pure-Python steps are chosen."""
    code = textwrap.dedent(
        """
        import sys
        class NotBuilt:
            def find_spec(self, name, path=None, target=None):
                if name == "eventlog._lines":
                    raise ImportError("no module named eventlog._lines")
        sys.meta_path.insert(0, NotBuilt())
        import eventlog.native
        assert eventlog.native.lines is None
        """
    )
    env = {**os.environ, "PYTHONPATH": str(REPO), "AIRSSPEC_REQUIRE_NATIVE": "1"}
    env.pop("AIRSSPEC_PURE_PYTHON", None)
    run = {"env": env, "capture_output": True, "text": True}
    refused = subprocess.run([sys.executable, "-c", code], **run)
    assert refused.returncode != 0
    assert "NativeExtensionMissingError" in refused.stderr
    assert "AIRSSPEC_REQUIRE_NATIVE=1 but the C extension eventlog._lines" in refused.stderr
    env.pop("AIRSSPEC_REQUIRE_NATIVE")
    fallback = subprocess.run([sys.executable, "-c", code], **run)
    assert fallback.returncode == 0, fallback.stderr


@needs_extension
def test_require_native_accepts_the_built_extension() -> None:
    run_child(
        "import eventlog.native as n; assert n.lines is not None",
        {"AIRSSPEC_REQUIRE_NATIVE": "1"},
    )
