"""The projector contract and the runner that keeps projections at the head of the log.

A projector folds a session's records, in order, into a state: ``apply(state, record) -> state``.
Its output and its checkpoint (seq, hash and byte end of the last record folded) are saved
together, atomically, so after a crash a projection is either before or after a save, and resumes
exactly from its checkpoint. Invariants the runner upholds:

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

import hashlib
import logging
import multiprocessing
import os
import sys
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ProcessPoolExecutor
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Generic, TypeVar

import orjson

from eventlog.errors import CorruptLogError, DamagedOutputError, UnsafePathError
from eventlog.layout import (
    LOG_SUFFIX,
    open_nofollow,
    read_nofollow,
    reader_nofollow,
    session_path,
    validate_session_id,
)
from eventlog.log import EventLog, Located
from eventlog.recovery import TailState, inspect_tail, record_ending_at
from eventlog.schema import Record
from projections.files import atomic_write, folder_size, remove_stale_temporaries, writer_lock

logger = logging.getLogger(__name__)

S = TypeVar("S")
# Libraries whose background runtime can deadlock a forked child: once one is loaded, sessions are
# folded in this process.
FORK_UNSAFE_MODULES = frozenset({"lancedb"})


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """Position after the last record folded: its seq, its hash, and the byte offset after it."""

    seq: int
    hash: str | None
    end: int

    def to_json(self) -> dict[str, Any]:
        """The checkpoint as stored."""
        return {"seq": self.seq, "hash": self.hash, "end": self.end}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Checkpoint:
        """A checkpoint from its stored form."""
        return cls(int(data["seq"]), data["hash"], int(data["end"]))


START = Checkpoint(0, None, 0)
OUTPUT_CHANGED = "its output was deleted or changed after it was written"


@dataclass(frozen=True, slots=True)
class ManifestEntry:
    """What a catch-up left for a session: its checkpoint, the identity of its output files and
    of the log file (size, mtime, inode) at that time, and the SHA-256 of its output files.
    While both identities are unchanged, nothing was appended, replaced or damaged, and the
    session is skipped without reading; a deep check also compares the digest."""

    checkpoint: Checkpoint
    output: list[int] | None
    log: list[int] | None
    digest: str | None = None


def file_identity(path: str | Path) -> list[int] | None:
    """(size, mtime_ns, inode) of a file, or None if it is missing."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return [st.st_size, st.st_mtime_ns, st.st_ino]


# Decides whether a record is past the point a projection should stop at (time travel).
StopAt = Callable[[Record], bool]


class Projector(ABC, Generic[S]):
    """One tier's fold. Subclasses keep their state per session under ``out_dir``."""

    name: ClassVar[str]
    parallel: ClassVar[bool] = True  # may sessions be folded in forked workers?
    # Save every this many records rather than once per catch-up, so a
    # projector whose state grows with what it has not written yet keeps memory bounded.
    save_every: ClassVar[int | None] = None

    def __init__(self, out_dir: Path) -> None:
        self.out_dir = out_dir

    @abstractmethod
    def empty(self, session: str) -> S:
        """The state before any record."""

    @abstractmethod
    def apply(self, state: S, record: Record) -> S:
        """Fold one record into the state (pure: no I/O)."""

    @abstractmethod
    def load(self, session: str) -> tuple[S, Checkpoint] | None:
        """The saved state and its checkpoint; None if absent, unreadable, or made under other
        settings (see ``fingerprint``)."""

    @abstractmethod
    def save(self, session: str, state: S, checkpoint: Checkpoint) -> None:
        """Persist state and checkpoint together, atomically."""

    @abstractmethod
    def drop(self, session: str) -> None:
        """Delete the session's output."""

    @abstractmethod
    def sessions(self) -> list[str]:
        """Sessions this projector has output for."""

    def has_output(self, session: str) -> bool:
        """Whether the session has saved output."""
        return session in self.sessions()

    def warm_up(self) -> None:
        """Load what folding needs (models, encodings) now, so forked workers inherit it."""

    def finish(self) -> None:
        """Work after each catch-up, once its sessions are saved (index upkeep, say)."""

    def exclusive(self) -> AbstractContextManager[object]:
        """Held for a whole catch-up: one writer of this projection at a time, across threads
        and processes, so a writer that folded less never saves over one that folded more
        (nor records a manifest entry for output another wrote)."""
        return writer_lock(self.out_dir.with_name(f"{self.out_dir.name}.lock"))

    def reset(self) -> None:
        """Delete every output of this projector (before a rebuild)."""
        for session in self.sessions():
            self.drop(session)
        self.manifest_path.unlink(missing_ok=True)

    def fingerprint(self) -> dict[str, Any]:
        """Settings the output depends on; a saved state with another fingerprint is rebuilt."""
        return {}

    def item_count(self) -> int:
        """Items in the projection (for ``status``)."""
        return len(self.sessions())

    def damage(self) -> list[str]:
        """What is wrong with files the tier's sessions share, each named, found by reading them
        whole (a deep check: ``status``, ``verify --tiers``, ``project``). Empty by default:
        per-session files are compared with their digests (``output_changed``)."""
        return []

    def repair(self, problems: list[str]) -> bool:
        """Repair the ``damage`` found in place, if this tier can (True); else (the default)
        the runner rebuilds the tier from the log."""
        return False

    def disk_bytes(self) -> int:
        """Bytes the projection takes on disk (for ``status``)."""
        return folder_size(self.out_dir)

    # The manifest: a cache of checkpoints, so an idle catch-up does not open every state file.

    @property
    def manifest_path(self) -> Path:
        """Beside the output folder, not in it: the folder holds only deterministic output."""
        return self.out_dir.with_name(f"{self.out_dir.name}.manifest.json")

    def output_files(self, session: str) -> list[str]:
        """The files holding the session's saved output; empty for a projector that keeps none
        per session."""
        return []

    def output_state(self, session: str, *, digest: bool) -> tuple[list[int] | None, str | None]:
        """The identity of the session's output files (size, mtime, inode each) and, when
        ``digest`` is asked, the SHA-256 over their bytes; (None, None) if there is none or one
        is missing. The files are listed once (a warm listing reads its state file)."""
        files = self.output_files(session)
        identity: list[int] = []
        for path in files:
            found = file_identity(path)
            if found is None:
                return None, None
            identity += found
        if not files:
            return None, None
        if not digest:
            return identity, None
        sha = hashlib.sha256()
        for path in files:
            try:
                data = read_nofollow(path)
            except OSError:
                return None, None
            sha.update(len(data).to_bytes(8, "big"))
            sha.update(data)
        return identity, sha.hexdigest()

    def output_changed(self, session: str, cached: ManifestEntry | None, *, deep: bool) -> bool:
        """Was the session's output deleted or changed after the catch-up that ``cached``
        records? Identities only, or (``deep``) the content's digest too. An idle catch-up
        trusts the manifest only while this is false."""
        if cached is None or cached.output is None:
            return False
        deep = deep and cached.digest is not None
        identity, digest = self.output_state(session, digest=deep)
        return cached.output != identity or (deep and cached.digest != digest)

    def read_manifest(self) -> dict[str, ManifestEntry]:
        """Cached entries per session; empty if missing, unreadable or written under other
        settings."""
        try:
            data = orjson.loads(read_nofollow(self.manifest_path))
            if data["fingerprint"] != self.fingerprint():
                return {}
            return {
                s: ManifestEntry(Checkpoint.from_json(e), e["output"], e["log"], e.get("digest"))
                for s, e in data["sessions"].items()
            }
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return {}

    def write_manifest(self, entries: dict[str, ManifestEntry]) -> None:
        """Save the manifest after the outputs it describes."""
        data = {
            "fingerprint": self.fingerprint(),
            "sessions": {
                s: {**e.checkpoint.to_json(), "output": e.output, "log": e.log, "digest": e.digest}
                for s, e in entries.items()
            },
        }
        atomic_write(self.manifest_path, orjson.dumps(data, option=orjson.OPT_SORT_KEYS))


class FilePerSessionProjector(Projector[S]):
    """A projector whose state for a session is one file, ``{out_dir}/{session}{suffix}``,
    holding output and checkpoint together (written atomically by ``save``)."""

    suffix: ClassVar[str]

    def __init__(self, out_dir: Path) -> None:
        super().__init__(out_dir)
        self._out = str(out_dir)

    def path(self, session: str) -> Path:
        """The session's output file."""
        return self.out_dir / f"{validate_session_id(session)}{self.suffix}"

    def drop(self, session: str) -> None:
        self.path(session).unlink(missing_ok=True)

    def has_output(self, session: str) -> bool:
        return self.path(session).exists()

    def output_files(self, session: str) -> list[str]:
        # ``session`` comes from the log's listing (already validated): skip Path overhead,
        # this runs for every session on every catch-up.
        return [os.path.join(self._out, session + self.suffix)]

    def sessions(self) -> list[str]:
        if not self.out_dir.is_dir():
            return []
        return sorted(
            p.name[: -len(self.suffix)]
            for p in self.out_dir.glob(f"*{self.suffix}")
            if not p.name.startswith(".")
        )


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


def with_line(exc: CorruptLogError) -> CorruptLogError:
    """``exc`` naming the line of the log file its byte offset is on, counted from the file
    (the offset alone does not tell a person where to look)."""
    lines = 1
    try:
        with reader_nofollow(exc.path) as handle:
            left = exc.offset
            while left > 0 and (block := handle.read(min(left, 1 << 20))):
                lines += block.count(b"\n")
                left -= len(block)
    except OSError:
        return exc
    return CorruptLogError(
        exc.path, seq=exc.seq, offset=exc.offset, reason=f"line {lines}: {exc.reason}"
    )


Progress = Callable[[str, int, int], None]  # (projector, sessions done, sessions total)


def log_tail(log: EventLog, session: str) -> TailState:
    """The log's current end (without taking the append lock; complete records only)."""
    path = session_path(log.log_dir, session)
    fd = open_nofollow(path, os.O_RDONLY)
    try:
        return inspect_tail(fd, path, os.fstat(fd).st_size)[1]
    finally:
        os.close(fd)


def record_at(log: EventLog, session: str, checkpoint: Checkpoint) -> str | None:
    """Why ``checkpoint`` does not match the log (None when it does)."""
    path = session_path(log.log_dir, session)
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        return "the session's log is gone"
    if checkpoint.end > size:
        return f"checkpoint at byte {checkpoint.end} is past the end of the log ({size} bytes)"
    fd = open_nofollow(path, os.O_RDONLY)
    try:
        found = record_ending_at(fd, path, checkpoint.end)
    except CorruptLogError:
        found = (None, None)
    finally:
        os.close(fd)
    if found != (checkpoint.seq, checkpoint.hash):
        return (
            f"checkpoint (seq {checkpoint.seq}, hash {str(checkpoint.hash)[:12]}) does not "
            f"match the log at byte {checkpoint.end} (seq {found[0]}, hash "
            f"{str(found[1])[:12]}): the log was replaced"
        )
    return None


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


def _fold_in_worker(sessions: list[str]) -> list[tuple[str, SessionOutcome, Checkpoint | None]]:
    assert _FORKED is not None
    runner, projector, stop_at = _FORKED
    log = EventLog(runner.log.log_dir, durability="off", sealer=runner.log.sealer)
    local = Runner(log, [projector])
    return [(s, *local._run_session(projector, s, stop_at)) for s in sessions]


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
        log: EventLog,
        projectors: Iterable[Projector[Any]],
        progress: Progress | None = None,
        jobs: int = 1,
        cancel: threading.Event | None = None,
        deep: bool = False,
    ) -> None:
        self.log = log
        self.deep = deep
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
            with projector.exclusive():
                reports.append(self._run(projector, stop_at, only))
        return reports

    @property
    def cancelled(self) -> bool:
        """Has the catch-up been asked to stop?"""
        return self.cancel is not None and self.cancel.is_set()

    def rebuild(self, stop_at: StopAt | None = None) -> list[RunReport]:
        """Reset every projector and fold the log from zero (up to ``stop_at``)."""
        for projector in self.projectors:
            with projector.exclusive():
                projector.reset()
        return self.catch_up(stop_at)

    def _run(
        self, projector: Projector[Any], stop_at: StopAt | None, only: set[str] | None
    ) -> RunReport:
        """One tier's catch-up; a tier whose shared files are damaged (found by a deep check,
        or met while folding) is rebuilt from the log instead, with a warning naming the
        damage. A second failure in the rebuild is raised."""
        problems = projector.damage() if self.deep else []
        if problems and projector.repair(problems):
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
        projector.reset()
        report = self._run_tier(projector, stop_at, None)
        for outcome in report.outcomes:
            outcome.rebuilt_because = (
                outcome.rebuilt_because or f"the tier's files were damaged ({why})"
            )
        return report

    def _run_tier(
        self, projector: Projector[Any], stop_at: StopAt | None, only: set[str] | None
    ) -> RunReport:
        sessions = self.log.sessions()
        manifest = projector.read_manifest()
        if set(manifest) != set(sessions):
            for gone in set(projector.sessions()) - set(sessions):
                projector.drop(gone)
                manifest.pop(gone, None)
        entries: dict[str, ManifestEntry] = {}
        outcomes: dict[str, SessionOutcome] = {}
        todo: dict[str, list[int] | None] = {}  # session -> log identity before folding
        damaged: dict[str, str] = {}  # session -> why its output is rebuilt
        log_dir = str(self.log.log_dir)  # plain strings: this loop runs per session, per catch-up
        for session in sessions:
            cached = manifest.get(session)
            if only is not None and session not in only:
                if cached is not None:
                    entries[session] = cached
                continue
            log_id = file_identity(os.path.join(log_dir, session + LOG_SUFFIX))
            changed = projector.output_changed(session, cached, deep=self.deep)
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
                projector.drop(session)
                damaged[session] = OUTPUT_CHANGED
        if todo:
            remove_stale_temporaries(projector.out_dir)
        for session, outcome, checkpoint in self._fold(
            projector, list(todo), stop_at, len(outcomes), len(outcomes) + len(todo)
        ):
            outcome.rebuilt_because = outcome.rebuilt_because or damaged.get(session)
            outcomes[session] = outcome
            if checkpoint is not None:
                # A fold stopped part way is not at the head: no log identity, so the next
                # catch-up does not take the session for idle.
                log_id = None if outcome.cancelled else todo[session]
                identity, digest = projector.output_state(session, digest=True)
                entries[session] = ManifestEntry(checkpoint, identity, log_id, digest)
        if not self.cancelled:
            projector.finish()
        if entries != manifest:
            projector.write_manifest(entries)
        return RunReport(projector.name, [outcomes[s] for s in sessions if s in outcomes])

    def _fold(
        self,
        projector: Projector[Any],
        sessions: list[str],
        stop_at: StopAt | None,
        done: int,
        total: int,
    ) -> Iterator[tuple[str, SessionOutcome, Checkpoint | None]]:
        forkable = projector.parallel and not FORK_UNSAFE_MODULES & sys.modules.keys()
        if self.jobs == 1 or len(sessions) < 2 or not forkable:
            for session in sessions:
                if self.cancelled:
                    return
                yield (session, *self._run_session(projector, session, stop_at))
                done += 1
                if self.progress:
                    self.progress(projector.name, done, total)
            return
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
                max_workers=self.jobs,
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
        loaded = projector.load(session)
        if loaded is None:
            state, checkpoint = projector.empty(session), START
            if projector.has_output(session):
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
        for located in self.log.read(session, offset=checkpoint.end, offset_seq=checkpoint.seq + 1):
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
                projector.save(session, state, checkpoint)
                saved, unsaved = last, 0
            if self.cancelled:
                outcome.cancelled = True
                break
        if last is not None and last is not saved:
            checkpoint = Checkpoint(last.record.seq, last.record.hash, last.end)
            projector.save(session, state, checkpoint)
        elif checkpoint is START and loaded is None:
            projector.save(session, state, checkpoint)  # an empty projection is still an output
        return outcome, checkpoint


def stop_after(seq: int | None = None, ts: str | None = None) -> StopAt:
    """Stop before the first record past ``seq`` or later than ``ts`` (normalised UTC): the
    ``eventlog.bound.Bound`` of either."""
    from eventlog.bound import Bound

    return Bound(seq=seq, ts=ts).passed
