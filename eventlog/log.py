"""The frozen log: append (locked, hash-chained, durable) and read (validated, resumable).

Invariants:
- A session file only grows by whole records appended under an exclusive OS lock (``flock``)
  on the file itself, so many processes may append to one session: no interleaved lines, and
  ``seq`` is gap-free and duplicate-free.
- ``append_many`` is atomic: every event is validated and encoded before the file is touched; a
  failed write is truncated back to the previous length; a crash mid-batch leaves a tail that
  recovery quarantines whole (see ``recovery``).
- Durability: ``always`` fdatasyncs before ``append`` returns; ``batch`` returns once the bytes are
  in the OS page cache and a background thread fdatasyncs every ``batch_interval_ms`` (group
  commit: appends in one interval share one sync; ``flush()`` waits for it); ``off`` leaves syncing
  to the OS. A process crash loses nothing acknowledged in any mode; a power loss loses nothing
  under ``always``, at most one interval under ``batch``. A failed sync is never forgotten: the
  OS reports it once, so the log keeps it (``LogSyncError``), refuses further appends to that
  file and raises it again from ``flush`` and ``close``.
- Readers never yield a partial record or a part of an unfinished batch.
- A log may be shared by threads (``close`` from several at once closes once) and survives a
  fork: the child drops the descriptors it inherited (a lock taken through a shared descriptor
  would not exclude the parent) and its locks, held perhaps by a thread it does not have, and
  opens its own at its first append.
- Open files are bounded: a log keeps at most ``max_open`` sessions' files open (by default
  an eighth of the process's descriptor limit), closing the least recently used one that no
  call is using (its pending sync run first) when it needs another, so a long-running writer
  serves any number of sessions. Threads using more sessions at once than that may hold more
  for as long as their calls last; the table is back within ``max_open`` when they are done.
  A file whose sync failed is remembered when it is closed: reopened, it still refuses appends.
"""

from __future__ import annotations

import fcntl
import os
import resource
import stat
import threading
import weakref
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol, overload

import orjson

from eventlog.canonical import encode_batch
from eventlog.errors import (
    CorruptLogError,
    InvalidBoundError,
    LogSyncError,
    LogWriteError,
    SessionExistsError,
    SessionMovedError,
    field_of,
)
from eventlog.fast_input import SCHEMA_VERSION
from eventlog.group_commit import GroupCommit
from eventlog.heads import HEAD_SIZE, decode_head_seq, encode_head
from eventlog.ids import new_event_ids, utc_now
from eventlog.layout import (
    check_new_session,
    head_path,
    list_sessions,
    open_nofollow,
    quarantine_path,
    reader_nofollow,
    session_path,
    validate_session_id,
)
from eventlog.native import SyncThread
from eventlog.overrides import override
from eventlog.prepare import bodies_to_append
from eventlog.recovery import TailState, recover
from eventlog.secrets import Redactor

if TYPE_CHECKING:
    from eventlog.crypto import Sealer
    from eventlog.schema import Event, Record

_READ_CHUNK = 1 << 22


class Durability(StrEnum):
    """What ``append`` promises when it returns (see the module)."""

    ALWAYS = "always"
    BATCH = "batch"
    OFF = "off"


class Located(NamedTuple):
    """A record with where it is stored: ``offset`` of its line, ``end`` just after it, and the
    exact stored bytes of the line (without the newline)."""

    record: Record
    offset: int
    end: int
    raw: bytes


class StoredRecords(Sequence["Record"]):
    """The records an append stored, built into models only when read: most callers only need
    the count or one of them, and the bodies were validated on the way in."""

    __slots__ = ("_bodies", "_hashes", "_models")

    def __init__(self, bodies: list[dict[str, Any]], hashes: list[str]) -> None:
        self._bodies, self._hashes = bodies, hashes
        self._models: list[Record | None] = [None] * len(bodies)

    def __len__(self) -> int:
        return len(self._bodies)

    @overload
    def __getitem__(self, index: int) -> Record: ...

    @overload
    def __getitem__(self, index: slice) -> StoredRecords: ...

    def __getitem__(self, index: int | slice) -> Record | StoredRecords:
        if isinstance(index, slice):  # still unbuilt
            part = StoredRecords(self._bodies[index], self._hashes[index])
            part._models = self._models[index]
            return part
        model = self._models[index]
        if model is None:
            from eventlog.schema import validation

            body = self._bodies[index] | {"hash": self._hashes[index]}
            model = self._models[index] = validation.record_from_dict(body)
        return model

    def stored(self) -> list[dict[str, Any]]:
        """The records as the log holds them (no model is built): each body with its hash,
        the fields it was stored without left out."""
        return [body | {"hash": h} for body, h in zip(self._bodies, self._hashes, strict=True)]

    def seq(self, index: int) -> int:
        """The seq of one record, read from what was stored (no model is built)."""
        return self._bodies[index]["seq"]  # type: ignore[no-any-return]

    def __eq__(self, other: object) -> bool:
        return list(self) == list(other) if isinstance(other, Sequence) else NotImplemented

    def __repr__(self) -> str:
        return f"StoredRecords({len(self)} records)"


@dataclass(frozen=True, slots=True)
class SessionInfo:
    """A session's size and time span (``problem`` names why it could not be read)."""

    session: str
    records: int
    first_ts: str | None
    last_ts: str | None
    bytes: int
    problem: str | None = None

    @classmethod
    def of(cls, session: str, head: TailState, path: Path) -> SessionInfo:
        """The info of ``session`` from its head and the first line of its file at ``path``
        (never read through a symbolic link)."""
        first_ts = None
        if head.seq:
            with reader_nofollow(path) as f:
                first_ts = orjson.loads(f.readline()).get("ts")
        return cls(session, head.seq, first_ts, head.ts, head.size)


@dataclass(slots=True)
class _Handle:
    path: str
    fd: int
    head_fd: int | None  # opened (and created) by the first append: readers never create it
    ino: int
    mutex: threading.Lock
    tail: TailState | None = None
    failed: LogSyncError | None = None  # a sync of this file failed: no more appends
    users: int = 0  # calls using it (``EventLog._handle`` to ``_done``): never closed under them
    retired: bool = False  # out of the table, closed by its last user

    def close(self) -> None:
        """Close the log and head file descriptors."""
        os.close(self.fd)
        if self.head_fd is not None:
            os.close(self.head_fd)


_held: list[EventLog] = []  # the logs whose handle tables a fork in progress holds


def _before_fork() -> None:
    """Hold every log's handle table through a fork: a descriptor is opened and entered in
    the table (or removed and closed) under its lock, so the child's table names exactly the
    descriptors it inherited, and it closes them all."""
    _held[:] = list(_open_logs)
    for log in _held:
        log._handles_mutex.acquire()


def _after_fork_in_parent() -> None:
    for log in _held:
        log._handles_mutex.release()
    _held.clear()


def _after_fork_in_child() -> None:
    _held.clear()
    for log in list(_open_logs):
        log._forked()


def _release(handles: dict[int, _Handle], commit: SyncThread | None) -> None:
    """What a log left unclosed holds, given back when it is collected: the pending syncs
    are run (a failure is lost with the log: ``close`` is where it is raised), the group
    commit stopped and every descriptor closed. ``close`` does all this itself."""
    if commit is not None:
        commit.run_once()
        commit.close()
    for handle in handles.values():
        handle.close()
    handles.clear()


def default_max_open() -> int:
    """Sessions a log keeps open at once unless told: an eighth of this process's descriptor
    limit (two descriptors each), at least 16 and at most 1,024."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return 1024
    return max(16, min(1024, soft // 8))


_open_logs: weakref.WeakSet[EventLog] = weakref.WeakSet()
os.register_at_fork(
    before=_before_fork, after_in_parent=_after_fork_in_parent, after_in_child=_after_fork_in_child
)


def _again(failure: LogSyncError) -> LogSyncError:
    """A fresh copy of a kept sync failure, to raise again."""
    return LogSyncError(failure.errno, failure.strerror)


def check_after(after: object) -> int | None:
    """``after`` of an append, checked (None: no condition): a seq is a whole number, 0 or
    more, else ``InvalidBoundError``. Never a bool (an int to Python: ``True`` would land
    after seq 1) nor text (never equal to a seq: refused as moved however often the caller
    read the session again)."""
    if after is None or (isinstance(after, int) and not isinstance(after, bool) and after >= 0):
        return after
    raise InvalidBoundError(f"after: {after!r} is not a seq (a whole number, 0 or more)")


class AppendFlags(NamedTuple):
    """How a batch may be appended (``Appends.append_many``'s keyword arguments)."""

    system: bool = False
    keep_secrets: bool = False
    imported: bool = False
    new: bool = False
    after: int | None = None


class Appends(Protocol):
    """The append calls of every log (the folder's ``EventLog``, the object store's
    ``ObjectStoreLog``), declared once; each log writes a batch its own way (``_append_batch``)."""

    sealer: Sealer | None

    def append(
        self, session: str, event: Event | dict[str, Any], *, after: int | None = None
    ) -> Record:
        """Append one event; return the stored record (``after``: see ``append_many``)."""
        return self._append_sealed(session, [event], AppendFlags(after=check_after(after)))[0]

    def append_many(
        self,
        session: str,
        events: Iterable[Event | dict[str, Any]],
        *,
        system: bool = False,
        keep_secrets: bool = False,
        imported: bool = False,
        new: bool = False,
        after: int | None = None,
    ) -> StoredRecords:
        """Append events atomically (all or none); return the stored records in order.

        ``new``: only if the session has no record yet, checked in the same step as the write
        (under the session's lock; on an object store, a create-only claim of seq 1); else
        ``SessionExistsError`` and nothing is written (a writer creating a session with its
        owner's first record cannot then land after another's). ``after``: only if the
        session's last record is seq ``after`` (0: it has none), checked in the same step;
        else ``SessionMovedError`` and nothing is written (a writer that read the session
        decides on what it read: a pop of its last item, say).

        Event types that only the system writes (``SYSTEM_TYPES``: a compaction) are refused
        unless ``system`` is set, which only their writers (the compactor) do; fields only
        importers set (``origin``) unless ``imported`` (or ``system``) is. With a
        ``redactor``, secrets are replaced before anything is written (the record's
        ``redacted`` says where) unless ``keep_secrets`` is set.
        """
        flags = AppendFlags(system, keep_secrets, imported, new, check_after(after))
        return self._append_sealed(session, events, flags)

    def _append_sealed(
        self, session: str, events: Iterable[Event | dict[str, Any]], flags: AppendFlags
    ) -> StoredRecords:
        """``_append_batch``; a batch that fails (refused, or its write failed) leaves none of
        the owners it named (``Owners.remember``, while sealing it) known to the sealer."""
        try:
            return self._append_batch(session, events, flags)
        except BaseException:
            if self.sealer is not None:
                self.sealer.owners.unlearn(session)
            raise

    def _append_batch(
        self, session: str, events: Iterable[Event | dict[str, Any]], flags: AppendFlags
    ) -> StoredRecords:
        raise NotImplementedError


class Reads(Protocol):
    """The read calls of every log, written once: a log gives a session's file in the local
    layout (``_session_file``) and reads records from it its own way (``_read_file``)."""

    sealer: Sealer | None

    def head(self, session: str) -> TailState: ...

    def info(self, session: str) -> SessionInfo:
        """Counts, first/last time and size of a session, from its first and last lines only."""
        return SessionInfo.of(session, self.head(session), self._session_file(session))

    def read(
        self,
        session: str,
        *,
        from_seq: int = 1,
        offset: int = 0,
        offset_seq: int = 1,
        plain: bool = False,
    ) -> Iterator[Located]:
        """Records of ``session`` with ``seq >= from_seq``, validated, with their byte offsets.

        ``offset``/``offset_seq`` resume from a known position (the line at ``offset`` has seq
        ``offset_seq``), so a projector does not rescan what it has already seen. With
        ``plain``, a record whose every field checks without pydantic is its stored dict
        (``eventlog.plain.Stored``) and any other is its model; a sealed log reads models.
        """
        plain = plain and self.sealer is None
        return self._read_file(session, offset, offset_seq, from_seq, plain)

    def _session_file(self, session: str) -> Path:
        raise NotImplementedError

    def _read_file(
        self, session: str, offset: int, offset_seq: int, from_seq: int, plain: bool
    ) -> Iterator[Located]:
        raise NotImplementedError

    def _opened(self, reader: _SessionReader) -> Iterator[Located]:
        """The records ``reader`` reads, opened first when the log is sealed."""
        return iter(reader) if self.sealer is None else opened(self.sealer, reader)


class Log(Appends, Reads, Protocol):
    """What every log offers, the folder's ``EventLog`` and the bucket's ``ObjectStoreLog``
    alike (the appends, and these): what the projections, the compactor and the kernel may
    call on either."""

    redactor: Redactor | None
    sealer: Sealer | None

    @property
    def log_dir(self) -> Path:
        """The sessions' files in the local layout (a bucket's, synced first)."""
        ...

    def sessions(self) -> list[str]: ...
    def has(self, session: str) -> bool: ...
    def recover(self, session: str) -> int: ...
    def flush(self) -> None: ...
    def close(self) -> None: ...


class EventLog(Appends, Reads):
    """Append to and read from the session logs under ``log_dir``."""

    def __init__(
        self,
        log_dir: Path | str,
        *,
        durability: Durability | str = Durability.ALWAYS,
        batch_interval_ms: float = 5.0,
        redactor: Redactor | None = None,
        sealer: Sealer | None = None,
        max_open: int | None = None,
    ) -> None:
        self.log_dir = Path(log_dir)
        # sessions with open files at once (see the module)
        self.max_open = default_max_open() if max_open is None else max_open
        if self.max_open < 1:
            raise ValueError("max_open must be at least 1")
        self.redactor = redactor
        self.sealer = sealer  # eventlog.crypto: sealed at append, opened at read
        self.durability = Durability(durability)
        self.batch_interval = batch_interval_ms / 1000.0
        self._handles: OrderedDict[str, _Handle] = OrderedDict()  # least recently used first
        self._handles_mutex = threading.Lock()
        self._open: dict[int, _Handle] = {}  # every open handle by log descriptor, retired too
        self._sync_failure: LogSyncError | None = None  # the first sync of this log that failed
        self._failed_files: dict[str, LogSyncError] = {}  # files that take no more appends
        self._closed = False
        self._closing = threading.Lock()  # held through close: every file is closed once
        self._sync_each = self.durability is Durability.ALWAYS
        self._commit = (
            GroupCommit(self.batch_interval) if self.durability is Durability.BATCH else None
        )
        _open_logs.add(self)
        self._finalizer = weakref.finalize(self, _release, self._open, self._commit)

    def _forked(self) -> None:
        """In a forked child: fresh locks and no inherited descriptors (the group commit
        drops the parent's files on its own; their failures are the parent's)."""
        self._handles_mutex = threading.Lock()
        self._closing = threading.Lock()
        if self._commit is not None:
            self._commit.collect()
        for handle in self._open.values():
            handle.close()
        self._open.clear()
        self._handles.clear()

    # ----------------------------------------------------------------- lifecycle

    def __enter__(self) -> EventLog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Flush, stop the group commit, and close every file (one an append in another
        thread is still writing, when it is done); raises ``LogSyncError`` (after closing) if
        a sync of this log failed. Closing again, from any thread, does nothing; a closed log
        opens no file again (``RuntimeError``), though ``read`` still reads whole records."""
        with self._closing:
            if self._closed:
                return
            try:
                self.flush()
            finally:
                self._closed = True
                if self._commit is not None:
                    self._commit.close()
                with self._handles_mutex:
                    for handle in list(self._open.values()):
                        handle.retired = True
                        if not handle.users:  # else closed by its last user
                            del self._open[handle.fd]
                            handle.close()
                    self._handles.clear()
                self._finalizer.detach()

    def flush(self) -> None:
        """Make everything appended through this log durable now; raises ``LogSyncError`` if
        a sync of this log failed, now or in the background."""
        self._sync_dirty()
        if self._sync_failure is not None:
            raise _again(self._sync_failure)

    def _sync_dirty(self) -> None:
        """One group-commit round now, in this thread (the round its thread runs each
        interval): sync the files appended to since their last sync; failures are kept, not
        raised."""
        if self._commit is not None:
            self._commit.run_once()
            self._collect()

    def _collect(self) -> None:
        """Keep the group commit's failed syncs on their handles and the log."""
        with self._handles_mutex:  # no descriptor is closed (and its number reused) meanwhile
            self._collected()

    def _collected(self) -> None:
        """``_collect`` with ``_handles_mutex`` held."""
        assert self._commit is not None
        for fd, errno, first in self._commit.collect():
            self._failed(self._open[fd], first, errno)

    def _sync(self, handle: _Handle, first: int) -> None:
        """fdatasync ``handle``'s file, keeping a failure on the handle and the log (records
        from seq ``first`` on are the ones it may have lost)."""
        try:
            os.fdatasync(handle.fd)
        except OSError as exc:
            self._failed(handle, first, exc.errno or 0)

    def _failed(self, handle: _Handle, first: int, errno: int) -> None:
        failure = LogSyncError(
            errno,
            f"{handle.path}: fdatasync failed ({os.strerror(errno)}): records from seq {first} "
            "on may not be on disk, so this log takes no more appends to the file; check the "
            "disk, then run verify",
        )
        handle.failed = handle.failed or failure
        self._failed_files.setdefault(handle.path, handle.failed)
        self._sync_failure = self._sync_failure or failure

    # ----------------------------------------------------------------- handles and locks

    def _handle(self, session: str) -> _Handle:
        """The open files of ``session``, in use by the caller until it calls ``_done``."""
        with self._handles_mutex:
            if self._closed:
                raise RuntimeError("EventLog is closed")
            handle = self._handles.get(session)
            if handle is not None:
                handle.users += 1
                self._handles.move_to_end(session)
        if handle is not None:
            try:
                same = os.lstat(handle.path).st_ino == handle.ino
            except FileNotFoundError:
                same = False
            except BaseException:
                self._done(handle)  # given back on any other error too
                raise
            if same:
                return handle
            self._done(handle)
        path = session_path(self.log_dir, session)
        with self._handles_mutex:
            if self._closed:
                raise RuntimeError("EventLog is closed")
            handle = self._handles.get(session)
            if handle is not None:
                try:
                    if os.lstat(path).st_ino == handle.ino:
                        handle.users += 1
                        return handle
                except FileNotFoundError:
                    pass
                self._retire(session, handle)  # the file was replaced or removed under us
            self.log_dir.mkdir(parents=True, exist_ok=True)
            existed = os.path.lexists(path)
            if not existed:
                check_new_session(self.log_dir, session)
                if self.redactor is not None:
                    self.redactor.refuse_secret_id(session)
            self._make_room()
            fd = open_nofollow(path, os.O_RDWR | os.O_APPEND | os.O_CREAT)
            if not existed and self.durability is not Durability.OFF:
                dir_fd = os.open(self.log_dir, os.O_RDONLY)
                try:
                    os.fsync(dir_fd)
                finally:
                    os.close(dir_fd)
            handle = _Handle(str(path), fd, None, os.fstat(fd).st_ino, threading.Lock(), users=1)
            handle.failed = self._failed_files.get(handle.path)
            self._handles[session] = self._open[fd] = handle
            return handle

    def _done(self, handle: _Handle) -> None:
        """The caller of ``_handle`` no longer uses ``handle``; a retired one is closed by its
        last user."""
        with self._handles_mutex:
            handle.users -= 1
            if handle.retired and not handle.users and self._open.get(handle.fd) is handle:
                self._close_handle(handle)
            elif not handle.users and len(self._handles) > self.max_open:
                self._make_room(0)  # the table outgrew max_open while every entry was in use

    def _make_room(self, more: int = 1) -> None:
        """With ``_handles_mutex`` held: retire the least recently used sessions no call is
        using until ``more`` sessions fit (calls in progress may hold more than ``max_open``:
        their files are never closed under them, and the last one done trims the table)."""
        over = len(self._handles) + more - self.max_open
        for session, handle in list(self._handles.items()):
            if over <= 0:
                return
            if not handle.users:
                self._retire(session, handle)
                over -= 1

    def _retire(self, session: str, handle: _Handle) -> None:
        """With ``_handles_mutex`` held: take ``handle`` out of the table; closed now if no call
        uses it, else by its last user."""
        del self._handles[session]
        handle.retired = True
        if not handle.users:
            self._close_handle(handle)

    def _close_handle(self, handle: _Handle) -> None:
        """With ``_handles_mutex`` held: sync what the group commit has pending on ``handle``
        (a failure is kept for its file: it takes no more appends), then close it."""
        if self._commit is not None:
            self._commit.forget(handle.fd)
            self._collected()
        del self._open[handle.fd]
        handle.close()

    def _locked_tail(self, session: str, handle: _Handle) -> TailState:
        """With the lock held: the current tail, recovering a torn one first."""
        size = os.lseek(handle.fd, 0, os.SEEK_END)  # the size (cheaper than ``fstat``)
        if handle.tail is None or handle.tail.size != size:
            handle.tail, _ = self._recover(session, handle)
        return handle.tail

    def _recover(self, session: str, handle: _Handle) -> tuple[TailState, int]:
        """With the lock held: quarantine a torn tail, never a record the head acknowledged."""
        return recover(
            handle.fd,
            session_path(self.log_dir, session),
            quarantine_path(self.log_dir, session),
            acknowledged=decode_head_seq(self._read_head(session, handle)),
        )

    def _head_fd(self, session: str, handle: _Handle, create: bool) -> int | None:
        """``handle``'s head file (None while there is none, unless ``create``), opened the
        first time under the table's lock, as the log file is: a fork sees both or neither."""
        if handle.head_fd is None:
            flags = os.O_RDWR | (os.O_CREAT if create else 0)
            with self._handles_mutex:
                try:
                    handle.head_fd = open_nofollow(head_path(self.log_dir, session), flags)
                except FileNotFoundError:
                    return None
        return handle.head_fd

    def _read_head(self, session: str, handle: _Handle) -> bytes:
        fd = self._head_fd(session, handle, create=False)
        return b"" if fd is None else os.pread(fd, HEAD_SIZE, 0)

    def recover(self, session: str) -> int:
        """Quarantine a torn tail of ``session`` if it has one; return the bytes moved."""
        handle = self._handle(session)
        try:
            with handle.mutex:
                fcntl.flock(handle.fd, fcntl.LOCK_EX)
                try:
                    handle.tail, moved = self._recover(session, handle)
                    return moved
                finally:
                    fcntl.flock(handle.fd, fcntl.LOCK_UN)
        finally:
            self._done(handle)

    def head(self, session: str) -> TailState:
        """The last record's seq and hash (seq 0 for an empty or missing session)."""
        validate_session_id(session)
        if not session_path(self.log_dir, session).exists():
            return TailState(0, 0, None)
        handle = self._handle(session)
        try:
            with handle.mutex:
                fcntl.flock(handle.fd, fcntl.LOCK_EX)
                try:
                    return self._locked_tail(session, handle)
                finally:
                    fcntl.flock(handle.fd, fcntl.LOCK_UN)
        finally:
            self._done(handle)

    # ----------------------------------------------------------------- append

    @override
    def _append_batch(
        self, session: str, events: Iterable[Event | dict[str, Any]], flags: AppendFlags
    ) -> StoredRecords:
        return StoredRecords(*self._append(session, events, *flags))

    def _append(
        self,
        session: str,
        events: Iterable[Event | dict[str, Any]],
        system: bool,
        keep_secrets: bool,
        imported: bool,
        new: bool,
        after: int | None = None,
    ) -> tuple[list[dict[str, Any]], list[str]]:
        """``append_many``, returning the stored records' bodies (without ``hash``) and hashes."""
        if self._closed:
            raise RuntimeError("EventLog is closed")
        if session not in self._handles:
            validate_session_id(session)
        bodies, clear = bodies_to_append(self, session, events, system, keep_secrets, imported)
        if not bodies:
            return [], []
        if after and not self.has(session):  # made after a record it does not hold: no file
            raise SessionMovedError(session, after, 0)
        handle = self._handle(session)
        try:
            return self._append_to(session, handle, bodies, clear, new, after)
        finally:
            self._done(handle)

    def _append_to(
        self,
        session: str,
        handle: _Handle,
        bodies: list[dict[str, Any]],
        clear: list[dict[str, Any]] | None,
        new: bool,
        after: int | None = None,
    ) -> tuple[list[dict[str, Any]], list[str]]:
        """``_append`` of validated ``bodies`` through ``handle``, which the caller holds."""
        if self._commit is not None and self._commit.failed:
            self._collect()
        if handle.failed is not None:
            raise _again(handle.failed)
        with handle.mutex:
            fcntl.flock(handle.fd, fcntl.LOCK_EX)
            try:
                tail = self._locked_tail(session, handle)
                if new and tail.seq:
                    raise SessionExistsError(session)
                if after is not None and tail.seq != after:
                    raise SessionMovedError(session, after, tail.seq)
                if clear is not None and self.sealer is not None:  # for the owner it lands after
                    bodies = self.sealer.sealed_now(session, tail.size, bodies, clear)
                stored, data, hashes = encode_batch(
                    bodies,
                    SCHEMA_VERSION,
                    session,
                    tail.seq,
                    utc_now(),
                    new_event_ids(len(bodies)),
                    tail.hash,
                )
                self._write(session, handle, tail.size, data)
                if self.sealer is not None:
                    self.sealer.owners.appended(session, tail.size, data)
                handle.tail = head = TailState(
                    tail.size + len(data), tail.seq + len(bodies), hashes[-1], stored[-1]["ts"]
                )
                head_fd = self._head_fd(session, handle, create=True)  # once written to
            finally:
                fcntl.flock(handle.fd, fcntl.LOCK_UN)
        first = tail.seq + 1
        if self._sync_each:
            self._sync(handle, first)
            if handle.failed is not None:
                raise _again(handle.failed)
        elif self._commit is not None:
            self._commit.mark(handle.fd, first)
        # The head names the last acknowledged record; written after the durability point, so
        # it never claims more than the log holds (two writers racing may leave the older of
        # their heads: a lower bound, which is all ``verify`` needs).
        assert head_fd is not None
        os.pwrite(head_fd, encode_head(session, head.seq, head.hash), 0)
        if clear is not None:  # the caller gets what it appended, opened
            return [_unsealed(s, c) for s, c in zip(stored, clear, strict=True)], hashes
        return stored, hashes

    def _write(self, session: str, handle: _Handle, size: int, data: bytes) -> None:
        view = memoryview(data)
        try:
            while view:
                written = os.write(handle.fd, view)
                view = view[written:]
        except OSError as exc:
            os.ftruncate(handle.fd, size)  # leave the log exactly as it was
            handle.tail = None
            path = session_path(self.log_dir, session)
            raise LogWriteError(
                exc.errno, f"{path}: append failed, nothing written: {exc.strerror}"
            ) from exc

    # ----------------------------------------------------------------- read

    def sessions(self) -> list[str]:
        """Sessions with a log, sorted by id."""
        return list_sessions(self.log_dir)

    def has(self, session: str) -> bool:
        """Whether ``session`` (a valid id) has a log here: one ``stat`` (a symbolic link is
        not a session's log, as for ``sessions``)."""
        try:
            return stat.S_ISREG(os.lstat(session_path(self.log_dir, session)).st_mode)
        except FileNotFoundError:
            return False

    @override
    def _session_file(self, session: str) -> Path:
        return session_path(self.log_dir, session)

    @override
    def _read_file(
        self, session: str, offset: int, offset_seq: int, from_seq: int, plain: bool
    ) -> Iterator[Located]:
        """The records (``Reads.read``), read on past an unfinished tail once recovered."""
        path = self._session_file(session)
        if not os.path.lexists(path):
            return
        position, seq = offset, offset_seq
        while True:
            reader = _SessionReader(path, session, position, seq, from_seq, plain)
            yield from self._opened(reader)
            if not reader.incomplete_tail:
                return
            # An unfinished line or batch: either a write in progress or a crash. Under the lock
            # we can tell: recovery quarantines a real torn tail, then we read on from there.
            try:
                self.recover(session)
            except PermissionError:
                return  # read-only access: stop before the incomplete tail
            if os.path.getsize(path) <= reader.position:
                return
            position, seq = reader.position, reader.seq


def opened(sealer: Sealer, located: Iterable[Located]) -> Iterator[Located]:
    """``located`` with sealed records opened (``eventlog.crypto``); ``raw`` stays the stored
    bytes, so hashes and exact output are those of the ciphertext. Every log reads through it."""
    from eventlog.schema import validation

    for item in located:
        extra = item.record.__pydantic_extra__
        if extra and "sealed" in extra:
            data = sealer.open(orjson.loads(item.raw))
            item = item._replace(record=validation.record_from_dict(data))
        yield item


def _unsealed(stored: dict[str, Any], clear: dict[str, Any]) -> dict[str, Any]:
    """A stored record's envelope with the body as it was before sealing."""
    if "sealed" not in stored:
        return stored
    envelope = {k: v for k, v in stored.items() if k not in clear and k != "sealed"}
    return {**envelope, **clear}


class _SessionReader:
    """One pass over a session file from a position; stops before any incomplete tail."""

    def __init__(
        self, path: Path, session: str, offset: int, seq: int, from_seq: int, plain: bool = False
    ) -> None:
        self.path = path
        self.plain = plain  # records as ``eventlog.plain.Stored`` dicts where they check
        self.session = session
        self.position = offset  # end of the last record yielded (or skipped)
        self.seq = seq  # seq expected at ``position``
        self.from_seq = from_seq
        self.incomplete_tail = False

    def __iter__(self) -> Iterator[Located]:
        pending: list[Located] = []  # parts of a batch not yet complete
        session, from_seq = self.session, self.from_seq
        seq, position = self.seq, self.position  # written back when the pass ends
        make = tuple.__new__  # Located(...) without its Python-level __new__

        with reader_nofollow(self.path) as f:
            validate = self._validator(os.fstat(f.fileno()).st_size - position)
            f.seek(position)
            buf = b""
            base = position
            while chunk := f.read(_READ_CHUNK):
                buf = buf + chunk if buf else chunk
                start = 0
                find = buf.find
                while (nl := find(b"\n", start)) >= 0:
                    expected = seq + len(pending)
                    end = base + nl + 1
                    if expected < from_seq:
                        seq, position = expected + 1, end
                        start = nl + 1
                        continue
                    raw = buf[start:nl]
                    try:  # the fast path inline; _parse handles unknown types and failures
                        record = validate(raw)
                    except ValueError:
                        record = self._parse(raw, base + start, expected)
                    if record.seq != expected or record.session != session:
                        raise self._misplaced(record, base + start, expected)
                    located = make(Located, (record, base + start, end, raw))
                    part = record.batch
                    if part is not None and part[0] < part[1]:
                        pending.append(located)
                    else:
                        if pending:
                            yield from pending
                            pending.clear()
                        seq, position = expected + 1, end
                        yield located
                    start = nl + 1
                buf = buf[start:]
                base += start
            self.seq, self.position = seq, position
            self.incomplete_tail = bool(buf) or bool(pending)

    def _validator(self, reading: int) -> Any:
        """Line -> record, raising ``ValueError`` for a line ``_parse`` must decide: the
        models' fast validator, or with ``plain`` the checked dict (no pydantic imported)."""
        if self.plain:
            from eventlog.plain import stored_record

            def plain(line: bytes) -> Any:
                record = stored_record(line)
                if record is None:
                    raise ValueError("not plainly valid")
                return record

            return plain
        from eventlog.schema import validation

        return validation.record_validator(reading=reading)

    def _parse(self, line: bytes, offset: int, expected: int) -> Record:
        from pydantic import ValidationError

        from eventlog.schema import validation

        try:
            record = validation.parse_record(line)
        except (ValidationError, ValueError) as exc:
            reason = exc.errors()[0]["msg"] if isinstance(exc, ValidationError) else str(exc)
            if isinstance(exc, ValidationError):
                reason = f"{field_of(exc.errors()[0])}: {reason}"
            raise CorruptLogError(
                self.path, seq=expected, offset=offset, reason=f"unreadable record ({reason})"
            ) from exc
        return record

    def _misplaced(self, record: Record, offset: int, expected: int) -> CorruptLogError:
        return CorruptLogError(
            self.path,
            seq=expected,
            offset=offset,
            reason=f"expected session {self.session!r} seq {expected}, found "
            f"session {record.session!r} seq {record.seq}",
        )
