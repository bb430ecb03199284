"""A node's read-through cache of a bucket's immutable batch objects, in the local layout.

Each session is cached as the concatenation of its objects in key order, ``{session}.jsonl``:
exactly the local log file, so ``verify``, the projectors and every reader of the local layout
read it as they read a folder. ``{session}.objects`` lists the objects it holds, one line each
(first seq, records, bytes, ETag), written after the object's bytes, so a crash between the two
leaves bytes past the index that the next load cuts off; ``{session}.head`` is the store's head
object as last fetched. Objects never change, so cached bytes are never fetched twice; a full
sync compares the index with the store's listing and rebuilds the session from scratch when
they differ (an object removed or replaced in the bucket is mirrored, never hidden).

Processes of one node share the cache: every change holds ``{session}.lock`` (``flock``).
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import NamedTuple

import orjson

from eventlog.layout import HEAD_SUFFIX, LOG_SUFFIX, open_nofollow, session_path
from eventlog.recovery import TailState, _after_last_newline

INDEX_SUFFIX = ".objects"
LOCK_SUFFIX = ".lock"


class Entry(NamedTuple):
    """One cached object: its first seq, how many records and bytes it holds, its ETag."""

    first: int
    records: int
    size: int
    etag: str

    @property
    def last(self) -> int:
        """The seq of its last record."""
        return self.first + self.records - 1


class ObjectCache:
    """The cached sessions of one bucket prefix under ``folder`` (see the module)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def _index(self, session: str) -> Path:
        return self.folder / f"{session}{INDEX_SUFFIX}"

    @contextmanager
    def locked(self, session: str) -> Iterator[None]:
        """Hold the session's cache lock (between processes of this node)."""
        self.folder.mkdir(parents=True, exist_ok=True)
        fd = open_nofollow(self.folder / f"{session}{LOCK_SUFFIX}", os.O_RDWR | os.O_CREAT)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    def entries(self, session: str) -> list[Entry]:
        """With the lock held: the cached objects, after cutting bytes no index line names
        (a crash between the two writes); an index naming more bytes than the file holds is
        dropped whole (the session is fetched again)."""
        try:
            raw = self._index(session).read_bytes()
        except FileNotFoundError:
            raw = b""
        complete = raw[: raw.rfind(b"\n") + 1]
        entries = []
        for line in complete.splitlines():
            first, records, size, etag = line.decode().split(" ", 3)
            entries.append(Entry(int(first), int(records), int(size), etag))
        total = sum(e.size for e in entries)
        path = session_path(self.folder, session)
        held = path.stat().st_size if path.exists() else 0
        if held < total or len(complete) < len(raw):
            self.reset(session)
            return []
        if held > total:
            os.truncate(path, total)
        return entries

    def add(self, session: str, entry: Entry, data: bytes) -> None:
        """With the lock held: append an object's bytes, then its index line."""
        for path, chunk in (
            (session_path(self.folder, session), data),
            (self._index(session), b"%d %d %d %s\n" % (*entry[:3], entry.etag.encode())),
        ):
            fd = open_nofollow(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
            try:
                view = memoryview(chunk)
                while view:
                    view = view[os.write(fd, view) :]
            finally:
                os.close(fd)

    def reset(self, session: str) -> None:
        """With the lock held: forget the session's cached objects."""
        for suffix in (LOG_SUFFIX, INDEX_SUFFIX):
            (self.folder / f"{session}{suffix}").unlink(missing_ok=True)

    def read(self, session: str, entry_index: int, entries: list[Entry]) -> bytes:
        """The cached bytes of ``entries[entry_index]``."""
        start = sum(e.size for e in entries[:entry_index])
        with open(session_path(self.folder, session), "rb") as f:
            f.seek(start)
            return f.read(entries[entry_index].size)

    def tail(self, session: str, entries: list[Entry]) -> TailState:
        """The end of the cached session: size, and the last record's seq, hash and time."""
        if not entries:
            return TailState(0, 0, None)
        size = sum(e.size for e in entries)
        fd = open_nofollow(session_path(self.folder, session), os.O_RDONLY)
        try:
            start = _after_last_newline(fd, size - 1)
            last = orjson.loads(os.pread(fd, size - start, start))
        finally:
            os.close(fd)
        return TailState(size, last["seq"], last["hash"], last.get("ts"))

    def write_head(self, session: str, raw: bytes | None) -> None:
        """Keep the store's head bytes (or remove the copy when the store has none)."""
        path = self.folder / f"{session}{HEAD_SUFFIX}"
        if raw is None:
            path.unlink(missing_ok=True)
            return
        temp = path.with_suffix(".head.tmp")
        temp.write_bytes(raw)
        os.replace(temp, path)
