"""``batch`` durability's group commit: every interval, fdatasync each file written to since
its last sync, on a background thread; a sync that fails is kept until the log collects it.

``GroupCommit`` is the C extension's (a thread that never takes the interpreter lock), or
``PyGroupCommit`` when the extension is not built. A Python thread costs the appending
thread 10-15% of its throughput under a steady stream of appends: each time it wakes it
must take the interpreter lock back, and while it waits, every system call of the appending
thread releases the lock, wakes it, and takes the lock again first.

Both are safe to share between threads and across a fork: ``close`` may be called from
several threads at once (one stops the thread, the others wait for it, later calls do
nothing), and a child forked while one runs gets a group commit whose locks are free, with
nothing marked (the parent syncs its own writes), whose thread, which the child does not
have, starts again at the child's first ``mark``.
"""

from __future__ import annotations

import os
import threading
import weakref
from collections.abc import Callable

from eventlog.native import SyncThread, lines

_live: weakref.WeakSet[PyGroupCommit] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    for commit in list(_live):
        commit._forked()


os.register_at_fork(after_in_child=_after_fork_in_child)


class PyGroupCommit:
    """The group commit on a Python thread; the extension's ``GroupCommit`` has the same
    methods and promises. Files are named by their descriptors."""

    def __init__(self, interval: float) -> None:
        if not interval > 0:
            raise ValueError("interval must be a positive number of seconds")
        self.interval = interval
        self._dirty: dict[int, int] = {}  # fd -> the first seq written since its last sync
        self._failures: list[tuple[int, int, int]] = []
        self._round = threading.Lock()  # held through a round's syncs
        self._closing = threading.Lock()  # held through close
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._start()
        _live.add(self)

    def _start(self) -> None:
        self._thread = threading.Thread(target=self._loop, daemon=True, name="group-commit")
        self._thread.start()

    def _forked(self) -> None:
        """In a forked child: the parent's thread is not here, and a lock it held stays held."""
        self._round = threading.Lock()
        self._closing = threading.Lock()
        self._thread = None
        self._dirty = {}  # the parent's writes: the parent syncs them

    @property
    def failed(self) -> bool:
        """A sync failed since the last ``collect``."""
        return bool(self._failures)

    def mark(self, fd: int, first: int) -> None:
        """``fd`` has writes not yet synced, from seq ``first`` on."""
        if self._thread is None and not self._stop.is_set():
            with self._closing:
                if self._thread is None and not self._stop.is_set():
                    self._start()  # a forked child's first mark
        self._dirty[fd] = min(first, self._dirty.get(fd, first))

    def run_once(self) -> None:
        """Sync every marked file now, in this thread (after a sync already under way)."""
        with self._round:
            for fd in list(self._dirty):
                self._sync(fd, self._dirty.pop(fd))

    def forget(self, fd: int) -> None:
        """Sync ``fd`` if it is marked, then drop it (before it is closed)."""
        with self._round:
            first = self._dirty.pop(fd, None)
            if first is not None:
                self._sync(fd, first)

    def collect(self) -> list[tuple[int, int, int]]:
        """The failed syncs since the last call: ``(fd, errno, first)`` each."""
        failures, self._failures = self._failures, []
        return failures

    def close(self) -> None:
        """Stop the thread (no final sync: the log flushes first); safe to call again, from
        any thread."""
        with self._closing:
            self._stop.set()
            if self._thread is not None:
                self._thread.join()
                self._thread = None

    def _sync(self, fd: int, first: int) -> None:
        try:
            os.fdatasync(fd)
        except OSError as exc:
            self._failures.append((fd, exc.errno or 0, first))

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            if self._dirty:
                self.run_once()


GroupCommit: Callable[[float], SyncThread] = (
    lines.GroupCommit if lines is not None else PyGroupCommit
)
