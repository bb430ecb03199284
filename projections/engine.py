"""The runner that keeps projections at the head of the log (or at a point in time).

A projector (``projections.fold``) folds a session's records, in order, into a state:
``apply(state, record) -> state``; its store (``projections.state_store``) saves the state and
its checkpoint (seq, hash and byte end of the last record folded) together, atomically, so
after a crash a projection is either before or after a save, and resumes exactly from its
checkpoint. Invariants the runner upholds:

- A checkpoint is trusted only if the log still holds a record with that seq and hash ending at
  that byte; otherwise (log replaced, workspace copied, settings changed) the session's projection
  is rebuilt from zero and the reason is reported.
- Folding is deterministic and saved bytes depend only on the records folded, so incremental runs
  over any split of the log, with restarts in between, equal one rebuild, byte for byte.
- A catch-up with nothing new reads no record: a per-projector manifest (a cache of the
  checkpoints and output file identities, written after them, kept beside the output folder) is
  compared with the log files' ends and the output files.
- The manifest also holds a SHA-256 of each session's output files as written. A deep catch-up
  (``project``, ``status``, ``verify --tiers``) compares it too, so an edit that keeps a file's
  size and mtime is still found and repaired; the daemon's catch-ups compare identities only.
- Files a tier's sessions share (the cold tier's table) are checked whole by ``damage`` in a deep
  catch-up; damage found there, or met while folding (``DamagedOutputError``), rebuilds that
  tier from the log, once per catch-up, with a warning naming it.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from eventlog.errors import CorruptLogError, DamagedOutputError, UnsafePathError
from eventlog.layout import LOG_SUFFIX, session_path
from eventlog.log import EventLog, Located, Log
from projections.checkpoints import (
    START,
    Checkpoint,
    ManifestEntry,
    file_identity,
    record_at,
    with_line,
)
from projections.files import remove_stale_temporaries
from projections.fold import Projector

if TYPE_CHECKING:  # the record classes are imported when there are records to fold
    from eventlog.schema import Record

logger = logging.getLogger(__name__)

# Libraries whose background runtime can deadlock a forked child: once one is loaded, sessions are
# folded in this process.
FORK_UNSAFE_MODULES = frozenset({"lancedb"})


OUTPUT_CHANGED = "its output was deleted or changed after it was written"

# Decides whether a record is past the point a projection should stop at (time travel).
StopAt = Callable[["Record"], bool]


@dataclass
class SessionOutcome:
    """What one catch-up did to one session: records applied, why it was rebuilt, or why it
    was skipped (a damaged log: the tier keeps its last good state, the others go on)."""

    session: str
    applied: int = 0
    rebuilt_because: str | None = None
    failed: str | None = None
    cancelled: bool = False  # stopped early on request; saved where it stopped
    error: CorruptLogError | UnsafePathError | None = field(default=None, compare=False)


@dataclass
class RunReport:
    """What one projector's catch-up did, session by session."""

    projector: str
    outcomes: list[SessionOutcome] = field(default_factory=list)

    @property
    def applied(self) -> int:
        """Records folded, over every session."""
        return sum(o.applied for o in self.outcomes)

    @property
    def failed(self) -> list[SessionOutcome]:
        """Sessions skipped because their log could not be read."""
        return [o for o in self.outcomes if o.failed]

    @property
    def rebuilt(self) -> list[SessionOutcome]:
        """Sessions projected again from zero, with why."""
        return [o for o in self.outcomes if o.rebuilt_because]

    def raise_failed(self) -> None:
        """Raise why the first skipped session's log could not be read (for a caller that
        asked for one session's tier, which must not answer from a stale state)."""
        for outcome in self.failed:
            if outcome.error is not None:
                raise outcome.error


Progress = Callable[[str, int, int], None]  # (projector, sessions done, sessions total)


# Set in the parent just before worker processes fork, read by ``_fold_in_worker``: forked
# workers inherit the runner, its projector and stop_at (lambdas included) without pickling.
_FORKED: tuple[Runner, Projector[Any], StopAt | None] | None = None


def _die_with_parent(parent: int) -> None:
    """In a pool worker: be killed when the parent dies (even by SIGKILL), so no worker is
    left blocked on the pool's queue with nobody to feed it."""
    if sys.platform.startswith("linux"):
        import ctypes
        import signal

        pr_set_pdeathsig = 1
        ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGKILL)
    if os.getppid() != parent:  # the parent died before the line above took effect
        os._exit(1)


def _keys_forkable(log: Any) -> bool:
    """Whether a forked worker may open the log's sealed records: not through a key store
    whose client a forked process must not inherit (one on a bucket)."""
    sealer = getattr(log, "sealer", None)
    return sealer is None or getattr(sealer.keys, "forkable", True)


def _fold_in_worker(sessions: list[str]) -> list[tuple[str, SessionOutcome, Checkpoint | None]]:
    assert _FORKED is not None
    runner, projector, stop_at = _FORKED
    log = EventLog(runner.log.log_dir, durability="off", sealer=runner.log.sealer)
    local = Runner(log, [projector])
    return [(s, *local._run_session(projector, s, stop_at)) for s in sessions]


@dataclass
class Glance:
    """What one read saw of the log (``airsspec.kernel.Kernel.reading``): its sessions and the
    identity of each one's file, taken by the first whole catch-up that asks and kept for the
    others in the read, so a read of several tiers lists the log and stats each file once."""

    sessions: list[str] | None = None
    identities: dict[str, list[int] | None] = field(default_factory=dict)


class Runner:
    """Brings projectors up to the head of the log (or to a point in time).

    With ``jobs > 1``, sessions that need work are folded in that many worker processes (each
    session in exactly one); the parent then writes the manifest. Outputs are the same bytes.
    ``cancel``, once set, stops a catch-up after the record being folded: what was folded is
    saved (a later catch-up resumes there) and the remaining sessions wait (one job only).
    ``deep`` compares each idle session's output with the digest it was written with (reading
    every output file) rather than trusting unchanged file identities.
    """

    def __init__(
        self,
        log: Log,
        projectors: Iterable[Projector[Any]],
        progress: Progress | None = None,
        jobs: int = 1,
        cancel: threading.Event | None = None,
        deep: bool = False,
        glance: Glance | None = None,
    ) -> None:
        self.log = log
        self.deep = deep
        self.glance = glance  # a whole catch-up's look at the log, shared within a read
        self.projectors = list(projectors)
        self.progress = progress
        self.jobs = max(1, jobs)
        self.cancel = cancel
        self.forked = False  # did a fold run in worker processes?

    def catch_up(
        self, stop_at: StopAt | None = None, sessions: Iterable[str] | None = None
    ) -> list[RunReport]:
        """Fold what is new; ``sessions`` limits the work to those sessions."""
        only = set(sessions) if sessions is not None else None
        reports = []
        for projector in self.projectors:
            with projector.state_store.exclusive():
                reports.append(self._run(projector, stop_at, only))
        return reports

    @property
    def cancelled(self) -> bool:
        """Has the catch-up been asked to stop?"""
        return self.cancel is not None and self.cancel.is_set()

    def rebuild(self, stop_at: StopAt | None = None) -> list[RunReport]:
        """Reset every projector and fold the log from zero (up to ``stop_at``)."""
        for projector in self.projectors:
            with projector.state_store.exclusive():
                projector.state_store.reset()
        return self.catch_up(stop_at)

    def _run(
        self, projector: Projector[Any], stop_at: StopAt | None, only: set[str] | None
    ) -> RunReport:
        """One tier's catch-up; a tier whose shared files are damaged (found by a deep check,
        or met while folding) is rebuilt from the log instead, with a warning naming the
        damage. A second failure in the rebuild is raised."""
        store = projector.state_store
        problems = store.damage() if self.deep else []
        if problems and store.repair(problems):
            problems = []
        if not problems:
            try:
                return self._run_tier(projector, stop_at, only)
            except DamagedOutputError as exc:
                problems = [str(exc)]
        why = problems[0] + (f" and {len(problems) - 1} more" if len(problems) > 1 else "")
        logger.warning(
            "%s: its files are damaged (%s); rebuilding the tier from the log",
            projector.name,
            why,
        )
        store.reset()
        report = self._run_tier(projector, stop_at, None)
        for outcome in report.outcomes:
            outcome.rebuilt_because = (
                outcome.rebuilt_because or f"the tier's files were damaged ({why})"
            )
        return report

    def _run_tier(
        self, projector: Projector[Any], stop_at: StopAt | None, only: set[str] | None
    ) -> RunReport:
        store = projector.state_store
        manifest = store.read_manifest()
        stored = dict(manifest)  # as written: a gone session popped below is written away
        entries: dict[str, ManifestEntry] = {}
        if only is not None:
            # a read of a few sessions touches only theirs (a stat each), not every session's:
            # the others' entries stay as they are, and output of a session whose log is gone
            # waits for the next whole catch-up
            sessions = sorted(s for s in only if self.log.has(s))
            entries.update(manifest)
        else:
            glance = self.glance or Glance()
            if glance.sessions is None:
                glance.sessions = self.log.sessions()
            sessions = glance.sessions
            if set(manifest) != set(sessions):
                for gone in set(store.sessions()) - set(sessions):
                    store.drop(gone)
                    manifest.pop(gone, None)
        outcomes: dict[str, SessionOutcome] = {}
        todo: dict[str, list[int] | None] = {}  # session -> log identity before folding
        damaged: dict[str, str] = {}  # session -> why its output is rebuilt
        # plain strings, joined by hand: this loop runs per session, per catch-up
        log_dir = os.path.join(str(self.log.log_dir), "")
        # a few sessions (a write's) are looked at now; a whole catch-up, as its read saw them
        seen = self.glance.identities if only is None and self.glance is not None else {}
        for session in sessions:
            cached = manifest.get(session)
            if session in seen:
                log_id = seen[session]
            else:
                log_id = seen[session] = file_identity(log_dir + session + LOG_SUFFIX)
            changed = store.output_changed(session, cached, deep=self.deep)
            if (
                stop_at is None
                and cached is not None
                and cached.log == log_id
                and cached.output is not None
                and not changed
                and (cached.digest is not None or not self.deep)
            ):
                entries[session] = cached  # idle: nothing new, output as we wrote it
                outcomes[session] = SessionOutcome(session)
                continue
            todo[session] = log_id
            if changed:
                # A derived file was deleted or edited after it was written: folding on from
                # the checkpoint would keep the damage, so the session is projected again.
                store.drop(session)
                damaged[session] = OUTPUT_CHANGED
        if todo:
            remove_stale_temporaries(store.out_dir)
        for session, outcome, checkpoint in self._fold(
            projector, list(todo), stop_at, len(outcomes), len(outcomes) + len(todo)
        ):
            outcome.rebuilt_because = outcome.rebuilt_because or damaged.get(session)
            outcomes[session] = outcome
            if checkpoint is not None:
                # A fold stopped part way is not at the head: no log identity, so the next
                # catch-up does not take the session for idle.
                log_id = None if outcome.cancelled else todo[session]
                identity, digest = store.output_state(session, digest=True)
                entries[session] = ManifestEntry(checkpoint, identity, log_id, digest)
        if not self.cancelled:
            store.finish()
        if entries != stored:
            store.write_manifest(entries)
        return RunReport(projector.name, [outcomes[s] for s in sessions if s in outcomes])

    def _fold(
        self,
        projector: Projector[Any],
        sessions: list[str],
        stop_at: StopAt | None,
        done: int,
        total: int,
    ) -> Iterator[tuple[str, SessionOutcome, Checkpoint | None]]:
        forkable = (
            projector.parallel
            and projector.state_store.forkable
            and _keys_forkable(self.log)
            and not FORK_UNSAFE_MODULES & sys.modules.keys()
        )
        if self.jobs == 1 or len(sessions) < 2 or not forkable:
            for session in sessions:
                if self.cancelled:
                    return
                yield (session, *self._run_session(projector, session, stop_at))
                done += 1
                if self.progress:
                    self.progress(projector.name, done, total)
            return
        import multiprocessing  # here: a catch-up in this process alone never forks
        from concurrent.futures import ProcessPoolExecutor

        # Balance by log size: biggest first, dealt round-robin into small groups.
        by_size = sorted(sessions, key=lambda s: -session_path(self.log.log_dir, s).stat().st_size)
        groups = [by_size[i :: self.jobs * 4] for i in range(min(len(by_size), self.jobs * 4))]
        projector.warm_up()
        self.forked = True
        global _FORKED
        _FORKED = (self, projector, stop_at)
        try:
            context = multiprocessing.get_context("fork")
            with ProcessPoolExecutor(
                max_workers=min(self.jobs, len(groups)),  # --jobs may exceed the work
                mp_context=context,
                initializer=_die_with_parent,
                initargs=(os.getpid(),),
            ) as pool:
                for results in pool.map(_fold_in_worker, groups):
                    yield from results
                    done += len(results)
                    if self.progress:
                        self.progress(projector.name, done, total)
        finally:
            _FORKED = None

    def _run_session(
        self, projector: Projector[Any], session: str, stop_at: StopAt | None
    ) -> tuple[SessionOutcome, Checkpoint | None]:
        """Fold what is new in ``session``; a damaged log skips the session (reported in the
        outcome) and leaves its projection at its last good checkpoint."""
        try:
            return self._fold_session(projector, session, stop_at)
        except (CorruptLogError, UnsafePathError) as exc:
            error = with_line(exc) if isinstance(exc, CorruptLogError) else exc
            return SessionOutcome(session, failed=str(error), error=error), None

    def _fold_session(
        self, projector: Projector[Any], session: str, stop_at: StopAt | None
    ) -> tuple[SessionOutcome, Checkpoint | None]:
        outcome = SessionOutcome(session)
        store = projector.state_store
        loaded = store.load(session)
        if loaded is None:
            state, checkpoint = projector.empty(session), START
            if store.has_output(session):
                outcome.rebuilt_because = "saved state unreadable or made under other settings"
        else:
            state, checkpoint = loaded
            reason = record_at(self.log, session, checkpoint)
            if reason is not None:
                outcome.rebuilt_because = reason
                state, checkpoint = projector.empty(session), START
        last = saved = None
        unsaved = 0
        batch: list[Located] = []  # with stop_at: a batch is seen whole or not at all
        read = self.log.read(
            session, offset=checkpoint.end, offset_seq=checkpoint.seq + 1, plain=projector.plain
        )
        for located in read:
            if stop_at is not None:
                if stop_at(located.record):
                    break
                part = located.record.batch
                if part is not None and part[0] < part[1]:
                    batch.append(located)
                    continue
            for item in (*batch, located):
                state = projector.apply(state, item.record)
            outcome.applied += len(batch) + 1
            unsaved += len(batch) + 1
            batch.clear()
            last = located
            # Saving or stopping inside an atomic batch is as safe as the save at the end of a
            # fold (which may land in a batch still being written): a batch a crash cut short
            # is quarantined, and a checkpoint naming a record no longer there rebuilds. With
            # ``stop_at``, a batch is applied whole, so this point is always at its end.
            if projector.save_every is not None and unsaved >= projector.save_every:
                checkpoint = Checkpoint(last.record.seq, last.record.hash, last.end)
                store.save(session, state, checkpoint)
                saved, unsaved = last, 0
            if self.cancelled:
                outcome.cancelled = True
                break
        if last is not None and last is not saved:
            checkpoint = Checkpoint(last.record.seq, last.record.hash, last.end)
            store.save(session, state, checkpoint)
        elif checkpoint is START and loaded is None:
            store.save(session, state, checkpoint)  # an empty projection is still an output
        return outcome, checkpoint


def stop_after(seq: int | None = None, ts: str | None = None) -> StopAt:
    """Stop before the first record past ``seq`` or later than ``ts`` (normalised UTC): the
    ``eventlog.bound.Bound`` of either."""
    from eventlog.bound import Bound

    return Bound(seq=seq, ts=ts).passed
