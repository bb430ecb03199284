"""Errors of airsspec memory: one root (``AirsspecError``, here in the lowest layer so every
package can subclass it), and the event log's errors, subclassed by what the caller can do.

- ``InvalidEventError``: the input is wrong (fix the input; nothing was written).
- ``InvalidSessionIdError``: the session id is not a safe, portable file name.
- ``CorruptLogError``: a stored record is damaged in the middle of a log (never repaired
  automatically; ``verify`` shows where).
- ``LogWriteError``: the operating system refused a write (disk full, permissions); the log
  was restored to exactly its previous bytes.
- ``LogSyncError``: a sync to disk failed after a write; the records since the last good sync
  may never reach the disk, so the log takes no more appends to that file.
- ``UnsafePathError``: a file the log would open is a symbolic link (or not a regular file);
  it is never followed, so nothing outside the workspace is read or written through it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


class AirsspecError(Exception):
    """Root of every error airsspec raises on purpose: catch this one to catch them all."""


class EventLogError(AirsspecError):
    """Root of every error raised by the event log."""


class InvalidEventError(EventLogError, ValueError):
    """An event given to ``append`` does not satisfy the schema.

    ``index`` is the position of the event in the batch (0-based), ``field`` the dotted path of
    the offending field when one can be named.
    """

    def __init__(self, message: str, *, index: int = 0, field: str | None = None) -> None:
        self.index = index
        self.field = field
        self.message = message
        where = f"field '{field}': " if field else ""
        super().__init__(f"{where}{message}")

    def __reduce__(self) -> tuple[Any, ...]:
        return _rebuild_invalid, (type(self), self.message, self.index, self.field)


def _rebuild_invalid(
    cls: type[InvalidEventError], message: str, index: int, field: str | None
) -> InvalidEventError:
    error = InvalidEventError.__new__(cls)
    InvalidEventError.__init__(error, message, index=index, field=field)
    return error


class InvalidSessionIdError(EventLogError, ValueError):
    """A session id that could escape the log folder or is not a portable file name."""


class CorruptLogError(EventLogError):
    """A stored record cannot be read: bad JSON, schema violation, or a broken sequence."""

    def __init__(self, path: Path, *, seq: int | None, offset: int, reason: str) -> None:
        self.path = path
        self.seq = seq
        self.offset = offset
        self.reason = reason
        at = f"seq {seq}, " if seq is not None else ""
        super().__init__(f"{path}: {at}byte offset {offset}: {reason}")

    def __reduce__(self) -> tuple[Any, ...]:
        # keyword-only arguments: rebuilt by name, so the error crosses a process pool intact
        return _rebuild_corrupt, (self.path, self.seq, self.offset, self.reason)


def _rebuild_corrupt(path: Path, seq: int | None, offset: int, reason: str) -> CorruptLogError:
    return CorruptLogError(path, seq=seq, offset=offset, reason=reason)


class LogWriteError(EventLogError, OSError):
    """The OS refused to write; the log file was truncated back to its previous length."""


class LogSyncError(LogWriteError):
    """An ``fdatasync`` of a log file failed. The OS reports such a failure once and may drop
    the data it held, so the records appended since the last good sync may be missing from the
    disk even though the file still reads them back: the log that saw the failure refuses every
    later append to that file, and its ``flush`` and ``close`` raise it again."""


class UnsafePathError(EventLogError, OSError):
    """A log, head, state or source file is a symbolic link or not a regular file: refused.

    An ``OSError`` too, so a loader that treats an unreadable derived file as missing (and
    rebuilds it) treats a planted link the same way."""

    def __init__(self, path: Path, what: str = "a symbolic link") -> None:
        self.path = path
        self.what = what
        super().__init__(f"{path}: is {what}; refusing to follow it out of the workspace")

    def __reduce__(self) -> tuple[type, tuple[Path, str]]:
        return type(self), (self.path, self.what)
