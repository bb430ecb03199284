"""The live projector daemon (``airsspec watch``): keeps every tier current while agents work.

It notices appends and new sessions with watchfiles (inotify), brings the changed sessions' tiers
up to date (hot first, so new records are visible promptly), compacts a session once it passes its
threshold, and lets warm and token tiers follow. The cold tier (embedding) is brought up to date by
a thread beside the main loop, so it never delays the others; it also registers changed files under
``sources/`` at each step (``projections.sources``), and a change under ``sources/`` alone starts
one. Invariants: one daemon per workspace (a lock file naming the holder's pid); it only ever
resumes from checkpoints, so after a crash or SIGKILL a restart loses and duplicates nothing;
SIGINT/SIGTERM stop it within seconds, after the record being folded, the cold tier included (it
embeds and commits in steps of a few hundred records), with what was done saved. A failing step is
logged and retried on the next change, never crashing the daemon.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import signal
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import watchfiles

from airsspec.errors import DaemonBusyError, NoSuchSessionError
from airsspec.memory import LOG_SUFFIX, MEMORY_SESSION, CompactionRecord, Memory

log = logging.getLogger("airsspec.watch")
COLD_NICE = 10  # the cold tier embeds with the CPU left over
STOP_WAIT_S = 10.0  # how long a stop waits for the cold tier's index upkeep


class Daemon:
    """The ``watch`` loop over one workspace, driving it through its ``Memory``."""

    def __init__(self, memory: Memory, *, debounce_ms: int = 20) -> None:
        self.memory = memory
        self.debounce_ms = debounce_ms
        self.stop_event = threading.Event()
        self.lock_path = memory.workspace.layout.locks_dir / "watch.lock"
        self._lock_fd: int | None = None
        self.cold = ColdIndexer(memory, self.stop_event)
        # Held around each step: ``airsspec serve`` runs this loop beside its requests, and
        # gives its memory's lock here so a step and a request never fold one tier at once.
        self.step_lock: contextlib.AbstractContextManager[Any] = contextlib.nullcontext()

    # ------------------------------------------------------------------ lock

    def acquire(self, holder: str = "watch") -> None:
        """Take the workspace's watch lock for ``holder`` (the command holding it: ``watch``,
        or ``serve``, which runs the same work inside the server), or raise
        ``DaemonBusyError`` naming the process that holds it and what it is."""
        self.lock_path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError as exc:
            pid, _, kind = os.pread(fd, 64, 0).decode(errors="replace").strip().partition(" ")
            os.close(fd)
            if kind == "serve":  # the server runs the watch work itself
                what = f"is held by airsspec serve (pid {pid or '?'}), which keeps it current"
            else:
                what = f"is already watched by another 'airsspec watch' (pid {pid or '?'})"
            raise DaemonBusyError(f"{self.memory.root} {what}; stop it first") from exc
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()} {holder}\n".encode(), 0)
        self._lock_fd = fd

    def release(self) -> None:
        """Give the watch lock back."""
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    # ------------------------------------------------------------------ work

    def step(self, sessions: Iterable[str] | None = None) -> None:
        """Bring ``sessions`` (None: all) up to date, compacting those that are due."""
        only = None if sessions is None else sorted(set(sessions))
        cancel = self.stop_event
        logged = set()
        for report in self.memory.project(("hot",), sessions=only, cancel=cancel):
            for outcome in report.outcomes:
                if outcome.applied:
                    self._log_hot(outcome.session, outcome.applied)
                    logged.add(outcome.session)
                if outcome.rebuilt_because:
                    log.warning("hot: rebuilt %s: %s", outcome.session, outcome.rebuilt_because)
        # a session's policies bring its window up too (their freshness) when the hot pass read
        # its log before the append landed: its progress is logged all the same
        unlogged = {s: self._hot_seq(s) for s in only or () if s not in logged}
        for session in only if only is not None else self.memory.sessions.names():
            if cancel.is_set():
                return
            if session == MEMORY_SESSION:  # the workspace's own log: nothing to compact there
                continue
            try:
                appended = self.memory.run_policies(session)
            except NoSuchSessionError as exc:
                log.debug("policies %s: %s", session, exc)
                continue
            if session in unlogged and (now := self._hot_seq(session)) > unlogged[session]:
                self._log_hot(session, now - unlogged[session], now)
            for record in appended.get("compact", []):
                assert isinstance(record, CompactionRecord)  # what the compactor appends
                log.info(
                    "compacted %s: history-%03d.md covers #%d-#%d (%s)",
                    session,
                    record.library_no,
                    record.from_seq,
                    record.to_seq,
                    record.reason,
                )
            if extracted := appended.get("extract"):
                found = sum(r.type == "learning" for r in extracted)
                log.info(
                    "extracted %s: %d learning(s) up to #%d", session, found, extracted[-1].seq
                )
        self.memory.project(("warm", "tokens", "learnings"), sessions=only, cancel=cancel)
        self.cold.request(only)
        log.debug("step done for %s", "all sessions" if only is None else ", ".join(only))

    def _hot_seq(self, session: str) -> int:
        """The last seq ``session``'s hot window holds (0: none, or no such session)."""
        try:
            checkpoint = self.memory.hot(session, fresh=False).checkpoint
        except NoSuchSessionError:
            return 0
        return checkpoint.seq if checkpoint else 0

    def _log_hot(self, session: str, applied: int, seq: int | None = None) -> None:
        log.info(
            "hot: %s up to seq %s (+%d)",
            session,
            self._hot_seq(session) if seq is None else seq,
            applied,
        )

    def run(self) -> None:
        """Watch until stopped. The lock must be held (``acquire``)."""
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda *_: self.stop_event.set())
        self.cold.start()
        self.watch()
        stopped_cleanly = self.cold.stop()
        if not stopped_cleanly:
            log.warning("cold tier busy with index upkeep; it resumes at the next start")
        log.info("stopped")
        if not stopped_cleanly:
            self.release()
            logging.shutdown()
            os._exit(0)  # every write is checkpointed: as safe as a SIGKILL, which is tested

    def watch(self) -> None:
        """The loop itself, until ``stop_event`` is set: follow the bucket (other machines'
        appends reach the cache), catch up once, then step the sessions whose logs change and
        register changed documents. ``run`` drives it for ``watch``; the server drives it in
        a thread of its own (the cold indexer started and stopped by the caller)."""
        if follow := getattr(getattr(self.memory.workspace.log, "store", None), "follow", None):
            follow(self.stop_event)  # a bucket: other machines' appends reach the cache
        # the log's local layout: the folder, or a bucket's cache (which ``follow`` fills)
        logs, documents = self.memory.workspace.log.log_dir, self.memory.sources_dir
        for folder in (logs, documents):
            folder.mkdir(parents=True, exist_ok=True)

        def relevant(change: watchfiles.Change, path: str) -> bool:
            if Path(path).parent == logs:  # a session log written (a new one, or appended to)
                return path.endswith(LOG_SUFFIX) and change != watchfiles.Change.deleted
            return Path(path).is_relative_to(documents)  # a document added, changed, removed

        caught_up = False
        for changes in watchfiles.watch(
            logs,
            documents,
            stop_event=self.stop_event,
            debounce=self.debounce_ms,
            step=5,
            raise_interrupt=False,
            watch_filter=relevant,
            yield_on_timeout=True,  # the first pass, changes or not, is the catch-up below
            rust_timeout=1000,
        ):
            if not caught_up:  # the watcher is registered: nothing appended from now is missed,
                caught_up = True  # and what landed before is caught up here, in one step
                self._safe_step(None)
                log.info("watching %s and %s", logs, documents)
                continue
            paths = [Path(path) for _, path in changes]
            sessions = {p.name[: -len(LOG_SUFFIX)] for p in paths if p.parent == logs}
            if sessions:
                self._safe_step(sessions)
            if any(p.parent != logs for p in paths):  # a document: the cold tier registers it
                self.cold.request([MEMORY_SESSION])

    def _safe_step(self, sessions: set[str] | None) -> None:
        try:
            with self.step_lock:
                self.step(sessions)
        except Exception:  # degrade, never crash: the next change retries from checkpoints
            log.exception("step failed; will retry on the next change")


class ColdIndexer(threading.Thread):
    """Brings the cold tier up to date beside the main loop, so embedding never delays the hot
    tier. Requests made while it works are merged into its next catch-up."""

    def __init__(self, memory: Memory, cancel: threading.Event) -> None:
        super().__init__(name="cold-indexer", daemon=True)
        self.memory = memory
        self.cancel = cancel
        self.wake = threading.Condition()
        self.pending: set[str] | None = set()  # None: every session
        self.stopping = False

    def request(self, sessions: list[str] | None) -> None:
        """Ask for a catch-up of ``sessions`` (None: all); merged with pending ones."""
        with self.wake:
            if sessions is None or self.pending is None:
                self.pending = None
            else:
                self.pending.update(sessions)
            self.wake.notify()

    def stop(self, wait_s: float = STOP_WAIT_S) -> bool:
        """Wait for the catch-up under way to stop (``cancel`` is set): it saves what it
        embedded, at most one step of ``save_every`` records, and the next start resumes
        there. Index upkeep (Lance) cannot be interrupted: if the thread is still busy after
        ``wait_s``, returns False and the caller must end the process with ``os._exit``
        (an interpreter exiting under a running native thread aborts)."""
        with self.wake:
            self.stopping = True
            self.wake.notify()
        self.join(wait_s)
        return not self.is_alive()

    def run(self) -> None:
        """Catch the cold tier up whenever asked, until stopped. The thread runs niced (and so
        do the embedder's and Lance's worker threads, which it starts): embedding uses the
        CPU the writers and the other tiers leave."""
        with contextlib.suppress(OSError, AttributeError):  # Linux: a thread has its own nice
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), COLD_NICE)
        while True:
            with self.wake:
                while self.pending == set() and not self.stopping:
                    self.wake.wait()
                if self.pending == set() or self.cancel.is_set():
                    return
                sessions, self.pending = self.pending, set()
            try:
                reports = self.memory.project(("cold",), sessions=sessions, cancel=self.cancel)
                for report in reports:
                    for outcome in report.outcomes:
                        if outcome.applied:
                            log.info("cold: %s +%d indexed", outcome.session, outcome.applied)
            except Exception:  # degrade, never crash: the next change retries from checkpoints
                log.exception("cold tier step failed; will retry on the next change")
