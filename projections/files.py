"""Atomic file output for projections: write a temporary file, then rename it over the target.

A reader (or a restart after SIGKILL) sees either the old file or the new one, never a mix.
Projection files are not fsynced: they are derived, and a file damaged by a power loss fails
to load and is rebuilt from the log.

Each temporary belongs to one call of one writer: its name carries the writer's pid, thread
and a per-process counter (``.tmp-{pid}-{thread}-{n}-{name}``), so writers in several threads
and processes never share one. ``remove_stale_temporaries`` deletes only those whose owning
process is gone (a live writer's temporary is about to be renamed, and deleting it would fail
that writer's rename). ``writer_lock`` serialises the writers of one projection across
threads and processes.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import itertools
import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Generic, TypeVar

import orjson

from eventlog.layout import read_nofollow

T = TypeVar("T")

_TMP_MARK = ".tmp-"
_calls = itertools.count()  # next() on a count is atomic under the interpreter lock
_live: set[str] = set()  # this process's temporaries being written (set.add/discard are atomic)


class ParsedOnce(Generic[T]):
    """What files held, kept for this process: a file's parse is given again while its size,
    mtime, inode and ctime (and those of the files ``beside`` it that the parse also read) are
    unchanged (a write replaces the file or changes its ctime; no write keeps ctime). For the
    files every read asks for (manifests, indexes, a log's tail). A value given is shared: a
    caller never changes it. ``settle_ns``: a parse is kept only once every stat's times are
    that old, so a change within the file system's clock tick of the stat, which leaves the
    times as they were, is never mistaken for no change. ``key``: one of several answers about
    the same file (a record at one offset or another), each kept while the file is unchanged
    and all forgotten together when it changes."""

    def __init__(self, settle_ns: int = 0) -> None:
        self._kept: dict[str, tuple[tuple[tuple[int, int, int, int], ...], dict[object, T]]] = {}
        self._settle_ns = settle_ns

    def get(
        self,
        path: str | Path,
        parse: Callable[[], T],
        beside: tuple[Path, ...] = (),
        key: object = None,
        stats: list[os.stat_result] | None = None,
    ) -> T:
        """``parse()``'s value for the file at ``path`` (and ``key``), parsed again only when
        it changed. ``OSError`` when a file is missing; what ``parse`` raises is raised and not
        kept. ``stats``: those of ``path`` and ``beside``, taken just now by the caller."""
        if stats is None:
            stats = [os.stat(p) for p in (path, *beside)]
        seen = tuple((st.st_size, st.st_mtime_ns, st.st_ino, st.st_ctime_ns) for st in stats)
        kept = self._kept.get(str(path))
        values = kept[1] if kept is not None and kept[0] == seen else {}
        if key in values:
            return values[key]
        value = parse()
        newest = max(max(st.st_mtime_ns, st.st_ctime_ns) for st in stats)
        if not self._settle_ns or time.time_ns() - newest > self._settle_ns:
            # a new dict, never one a reader in another thread may be looking in
            self._kept[str(path)] = (seen, {**values, key: value})
        return value


KEPT_SETTLE_NS = 1_000_000_000
"""A file's value is kept on disk once its times are this old (``KeptOnDisk``): a write within
the file system's clock tick of a stat leaves the times as they were."""


def kept_digest(value: object) -> str:
    """A SHA-256 as ``KeptOnDisk`` keeps it (anything else is read again)."""
    if not isinstance(value, str) or len(value) != 64 or value.strip("0123456789abcdef"):
        raise TypeError(f"not a digest: {value!r}")
    return value


class KeptOnDisk(Generic[T]):
    """What a parse of each of many files gave, kept across processes in one file (``path``:
    derived, and deleted, every file is parsed again): a file's value is given while its size,
    mtime, inode and ctime are those it was parsed at (a write replaces the file or changes its
    ctime; no call sets a ctime back), and those of the files ``beside`` it that the parse also
    read, kept once they are ``KEPT_SETTLE_NS`` old. For the answers a new process would read
    every session's file for (``sessions``, a tier's item count, the digests ``status``
    compares: 5,000 files at 1M records). ``encode``/``decode``: a value to JSON and back.
    ``save`` writes what was parsed since (an unwritable folder: parsed again next time)."""

    def __init__(
        self,
        path: Path,
        encode: Callable[[T], object],
        decode: Callable[[object], T],
    ) -> None:
        self.path = path
        self._encode, self._decode = encode, decode
        self._kept: dict[str, list[object]] | None = None
        self._changed = False
        self._asked: set[str] = set()

    def _entries(self) -> dict[str, list[object]]:
        if self._kept is None:
            try:
                data = orjson.loads(read_nofollow(self.path))
            except (OSError, ValueError):
                data = None
            self._kept = data if isinstance(data, dict) else {}
        return self._kept

    def get(
        self,
        file: str | Path,
        parse: Callable[[], T],
        fits: Callable[[T], bool] | None = None,
        beside: tuple[Path, ...] = (),
        stats: list[os.stat_result] | None = None,
    ) -> T:
        """``parse()``'s value for ``file``, parsed again only when it (or a file ``beside``
        it) changed since it was kept, or when the kept value does not ``fits`` it (a value of
        another file). ``OSError`` when one is missing; what ``parse`` raises is raised and not
        kept. ``stats``: those of ``file`` and ``beside``, taken just now by the caller."""
        self._asked.add(str(file))
        if stats is None:
            stats = [os.stat(p) for p in (file, *beside)]
        seen: list[object] = [
            n for st in stats for n in (st.st_size, st.st_mtime_ns, st.st_ino, st.st_ctime_ns)
        ]
        kept = self._entries().get(str(file))
        if isinstance(kept, list) and len(kept) == len(seen) + 1 and kept[:-1] == seen:
            try:
                value = self._decode(kept[-1])
            except (TypeError, ValueError, KeyError):
                pass  # an entry edited by hand: parsed again
            else:
                if fits is None or fits(value):
                    return value
        value = parse()
        newest = max(max(st.st_mtime_ns, st.st_ctime_ns) for st in stats)
        if time.time_ns() - newest > KEPT_SETTLE_NS:
            self._entries()[str(file)] = [*seen, self._encode(value)]
            self._changed = True
        return value

    def save(self) -> None:
        """Write what was parsed since the file was read (nothing when nothing was), without
        the entries of files gone since (a session's log removed)."""
        if self._changed and self._kept is not None:
            for gone in [f for f in self._kept if f not in self._asked and not os.path.exists(f)]:
                del self._kept[gone]
            with contextlib.suppress(OSError):
                atomic_write(self.path, orjson.dumps(self._kept))
            self._changed = False


def temporary_name(name: str) -> str:
    """A temporary's name for ``name``, unique to this process, thread and call."""
    return f"{_TMP_MARK}{os.getpid()}-{threading.get_ident()}-{next(_calls)}-{name}"


def atomic_write(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` (a link planted at ``path`` is replaced, never followed)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(temporary_name(path.name))
    tmp.unlink(missing_ok=True)  # only something planted can have this call's name
    _live.add(tmp.name)
    try:
        fd = os.open(
            tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644
        )
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.replace(tmp, path)
        except BaseException:
            tmp.unlink(missing_ok=True)  # a failed write (disk full) leaves nothing behind
            raise
    finally:
        _live.discard(tmp.name)


def _owner_alive(tmp_name: str) -> bool:
    """Is the process that named this temporary still running? A name without a pid has no
    owner to wait for."""
    pid = tmp_name[len(_TMP_MARK) :].split("-", 1)[0]
    if not pid.isdigit() or int(pid) <= 0:
        return False
    if int(pid) == os.getpid():
        # Ours: alive while a call writes it (one left by an earlier process that had this
        # pid is stale).
        return tmp_name in _live
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # a process of another user has that pid
    return True


def remove_stale_temporaries(folder: Path) -> int:
    """Delete temporaries a killed writer left behind (their owning process is gone); return
    how many. A live writer's temporary is left for it to rename."""
    if not folder.is_dir():
        return 0
    removed = 0
    for tmp in folder.glob(f"{_TMP_MARK}*"):
        if not _owner_alive(tmp.name):
            tmp.unlink(missing_ok=True)
            removed += 1
    return removed


@contextmanager
def writer_lock(path: Path) -> Iterator[None]:
    """Hold an exclusive lock on ``path`` (created if missing) for the block: one writer at a
    time, whether in another thread (each call opens its own file description) or process.
    The kernel drops it when the holder dies, so a killed writer never leaves it held."""
    fd = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    except OSError as exc:
        # A read-only workspace: nobody can write here, so an idle catch-up (which writes
        # nothing) needs no lock; one that must write fails on its own write.
        if exc.errno not in (errno.EROFS, errno.EACCES, errno.EPERM):
            raise
    if fd is None:
        yield
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def folder_size(folder: Path | str) -> int:
    """Bytes of every file under ``folder`` (as ``rglob``: into no linked folder), with
    ``os.scandir``: a folder of a thousand files (a cold table) is read in a third of the
    time ``pathlib`` takes, and ``status`` reads every tier's."""
    total = 0
    try:
        with os.scandir(folder) as listing:
            entries = list(listing)
    except (FileNotFoundError, NotADirectoryError, PermissionError):
        return 0
    for entry in entries:
        try:
            if entry.is_dir(follow_symlinks=False):
                total += folder_size(entry.path)
            elif entry.is_file():
                total += entry.stat().st_size
        except FileNotFoundError:  # removed meanwhile (a compaction's old files)
            continue
    return total
