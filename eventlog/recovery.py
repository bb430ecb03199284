"""Torn-tail detection and recovery.

A write cut short by a crash can leave (a) a final line without its ``\\n`` or (b) complete lines of
a multi-record batch whose last part never arrived (``batch = [i, n]`` with ``i < n`` on the final
record). Neither was acknowledged. Recovery moves those bytes, verbatim, into the quarantine file
next to the log (fsynced first), then truncates the log to the end of the last complete record or
batch. Nothing is dropped. Recovery only runs with the session's lock held, so it never mistakes
a write in progress for a torn one.

A damaged line that *is* complete (bad JSON in the middle or at the end) is corruption, not a torn
tail: it is never repaired here; it is reported as ``CorruptLogError``.
"""

from __future__ import annotations

import base64
import errno
import os
from pathlib import Path
from typing import Any, NamedTuple, cast

import orjson

from eventlog.errors import CorruptLogError, LogWriteError
from eventlog.ids import utc_now
from eventlog.layout import open_nofollow

_FIRST_BLOCK = 4096  # most records are far shorter; grow geometrically for long ones


class TailState(NamedTuple):
    """The end of a session log: its size, and the seq and hash of its last record (a tuple:
    one is made on every append)."""

    size: int
    seq: int
    hash: str | None
    ts: str | None = None


def _after_last_newline(fd: int, limit: int) -> int:
    """Offset just after the last ``\\n`` in bytes [0, limit), or 0 if there is none."""
    pos, block = limit, _FIRST_BLOCK
    while pos > 0:
        lo = max(0, pos - block)
        nl = os.pread(fd, pos - lo, lo).rfind(b"\n")
        if nl >= 0:
            return lo + nl + 1
        pos, block = lo, block * 2
    return 0


def _parse_last(fd: int, path: Path, start: int, end: int) -> dict[str, Any]:
    raw = os.pread(fd, end - start, start)
    try:
        record = orjson.loads(raw)
        if not isinstance(record, dict):
            raise ValueError("not a JSON object")
        return record
    except ValueError as exc:
        raise CorruptLogError(
            path, seq=None, offset=start, reason=f"last record unreadable: {exc}"
        ) from exc


def record_ending_at(fd: int, path: Path, end: int) -> tuple[int, str | None]:
    """(seq, hash) of the record whose line ends at byte ``end`` ((0, None) at 0), whether or
    not it closes its batch; ``CorruptLogError`` if no record line ends there."""
    if end == 0:
        return 0, None
    if os.pread(fd, 1, end - 1) != b"\n":
        raise CorruptLogError(path, seq=None, offset=end, reason="no record ends there")
    last = _parse_last(fd, path, _after_last_newline(fd, end - 1), end)
    return cast("int", last.get("seq")), last.get("hash")  # as stored (unchecked here)


def inspect_tail(fd: int, path: Path, size: int) -> tuple[int, TailState]:
    """Find where the intact log ends. Returns (intact_end, state at intact_end)."""
    end = _after_last_newline(fd, size)
    while end > 0:
        start = _after_last_newline(fd, end - 1)
        last = _parse_last(fd, path, start, end)
        part = last.get("batch")
        if isinstance(part, list) and len(part) == 2 and part[0] < part[1]:
            for _ in range(int(part[0]) - 1):  # step back over the earlier parts of the batch
                start = _after_last_newline(fd, start - 1)
            end = start
            continue
        seq, digest = last.get("seq"), last.get("hash")
        if not isinstance(seq, int) or not isinstance(digest, str):
            raise CorruptLogError(
                path, seq=None, offset=start, reason="last record has no seq/hash"
            )
        return end, TailState(end, seq, digest, last.get("ts"))
    return 0, TailState(0, 0, None)


def quarantine(
    fd: int, log_path: Path, quarantine_file: Path, start: int, size: int, reason: str
) -> None:
    """Move bytes [start, size) of the log into the quarantine file, then truncate the log."""
    torn = os.pread(fd, size - start, start)
    entry = {
        "quarantined_at": utc_now(),
        "log": log_path.name,
        "offset": start,
        "length": len(torn),
        "reason": reason,
        "bytes_b64": base64.b64encode(torn).decode("ascii"),
        "preview": torn[:500].decode("utf-8", errors="replace"),
    }
    existed = os.path.lexists(quarantine_file)
    qfd = open_nofollow(quarantine_file, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    kept = os.fstat(qfd).st_size
    try:
        data = orjson.dumps(entry) + b"\n"
        if os.write(qfd, data) != len(data):
            raise OSError(errno.ENOSPC, "short write to the quarantine file")
        os.fsync(qfd)
    except OSError as exc:
        # Nothing moved: the torn tail stays in the log (recovery retries next time) and the
        # quarantine file goes back to what it was (or away, if this call made it).
        os.ftruncate(qfd, kept)
        if not existed:
            os.unlink(quarantine_file)
        raise LogWriteError(
            exc.errno, f"{quarantine_file}: cannot quarantine a torn tail: {exc.strerror}"
        ) from exc
    finally:
        os.close(qfd)
    os.ftruncate(fd, start)
    os.fsync(fd)


def recover(
    fd: int, log_path: Path, quarantine_file: Path, *, acknowledged: int = 0
) -> tuple[TailState, int]:
    """Recover the log open on ``fd`` (lock held). Returns (tail state, bytes quarantined).

    ``acknowledged`` is the seq the session's head names: records up to it were acknowledged,
    so an unfinished batch that reaches it was not torn by a crash but cut short afterwards;
    that is reported (``CorruptLogError``) and nothing is moved.
    """
    size = os.fstat(fd).st_size
    end, state = inspect_tail(fd, log_path, size)
    if end < size and acknowledged > state.seq:
        raise CorruptLogError(
            log_path,
            seq=state.seq + 1,
            offset=end,
            reason=f"the log ends inside a batch, but its head names seq {acknowledged}, which "
            "was acknowledged: the log was cut (nothing was moved to quarantine)",
        )
    if end < size:
        reason = "incomplete batch" if os.pread(fd, 1, size - 1) == b"\n" else "torn tail"
        quarantine(fd, log_path, quarantine_file, end, size, reason)
    return state, size - end
