"""Checkpoints and the manifest: where a projection stands in the log, and what it left on disk.

A ``Checkpoint`` is the position after the last record folded (its seq, its hash, the byte end
of it in the session's log file); it is stored with the state it describes, atomically.

The manifest is a per-projector cache, beside the output folder (never in it: the folder holds
only deterministic output), of each session's checkpoint, the identity (size, mtime, inode) of
its output files and of its log file, and the SHA-256 of its output files as written. While both
identities are unchanged the session is idle and is skipped without reading; a deep check also
compares the digest, so an edit that keeps size and mtime is still found. The manifest is written
after the outputs it describes, and is discarded whole when written under other settings.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from eventlog.errors import CorruptLogError
from eventlog.layout import open_nofollow, read_nofollow, reader_nofollow, session_path
from eventlog.log import Log
from eventlog.recovery import TailState, inspect_tail, record_ending_at
from projections.files import KeptOnDisk, ParsedOnce, atomic_write


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


def files_state(
    files: list[str], *, digest: bool, kept: KeptOnDisk[str] | None = None
) -> tuple[list[int] | None, str | None]:
    """The identity of ``files`` (size, mtime, inode each) and, when ``digest`` is asked, the
    SHA-256 over their bytes; (None, None) if there is none or one is missing. The digest is
    read again only when a file was written since it was last read here (``_DIGESTS``), or,
    with ``kept``, by any process that kept it there."""
    if not files:
        return None, None
    try:
        stats = [os.stat(path) for path in files]
    except FileNotFoundError:
        return None, None
    identity = [n for st in stats for n in (st.st_size, st.st_mtime_ns, st.st_ino)]
    if not digest:
        return identity, None
    try:
        first, *others = files
        beside = tuple(Path(p) for p in others)
        parse = functools.partial(_sha256, files)
        if kept is not None:
            parse = functools.partial(kept.get, first, parse, None, beside, stats)
        return identity, _DIGESTS.get(first, parse, beside, stats=stats)
    except OSError:
        return None, None


def _sha256(files: list[str]) -> str:
    """The SHA-256 over ``files``' bytes, each after its length (links refused)."""
    import hashlib  # here: loading OpenSSL (3 ms) is for the commands that hash

    sha = hashlib.sha256()
    for path in files:
        data = read_nofollow(path)
        sha.update(len(data).to_bytes(8, "big"))
        sha.update(data)
    return sha.hexdigest()


# Kept once a second old, while the files are unchanged: ``status`` compares every session's
# output of every tier with its digest (a read of each file: 15 ms a request at 10k records, a
# server answering ``status``), and the log's tail and the record at each checkpoint, which
# only a write to the log can change (a file read and parsed per session and tier: 30 ms).
_DIGESTS: ParsedOnce[str] = ParsedOnce(settle_ns=1_000_000_000)
_TAILS: ParsedOnce[TailState] = ParsedOnce(settle_ns=1_000_000_000)
_MATCHES: ParsedOnce[str | None] = ParsedOnce(settle_ns=1_000_000_000)


# each manifest's fingerprint and entries, parsed once while its file is unchanged
_PARSED: ParsedOnce[tuple[Any, dict[str, ManifestEntry]]] = ParsedOnce()


class Manifest:
    """The manifest file ``path`` of a projection whose settings are ``fingerprint``."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def read(self, fingerprint: dict[str, Any]) -> dict[str, ManifestEntry]:
        """Cached entries per session; empty if missing, unreadable or written under other
        settings. The entries parsed last in this process are given again while the file's
        identity and ctime are unchanged (one ``stat``: a read of one session's projection does
        not parse every session's entry; a write replaces the file, and no write keeps ctime)."""
        try:
            written_under, entries = _PARSED.get(self.path, self._parse)
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return {}
        return dict(entries) if written_under == fingerprint else {}

    def _parse(self) -> tuple[Any, dict[str, ManifestEntry]]:
        data = orjson.loads(read_nofollow(self.path))
        entries = {
            s: ManifestEntry(Checkpoint.from_json(e), e["output"], e["log"], e.get("digest"))
            for s, e in data["sessions"].items()
        }
        return data["fingerprint"], entries

    def write(self, entries: dict[str, ManifestEntry], fingerprint: dict[str, Any]) -> None:
        """Save the manifest after the outputs it describes."""
        data = {
            "fingerprint": fingerprint,
            "sessions": {
                s: {**e.checkpoint.to_json(), "output": e.output, "log": e.log, "digest": e.digest}
                for s, e in entries.items()
            },
        }
        atomic_write(self.path, orjson.dumps(data, option=orjson.OPT_SORT_KEYS))

    def remove(self) -> None:
        """Forget every entry (before a rebuild)."""
        self.path.unlink(missing_ok=True)


# Where a checkpoint stands against the log.


def log_tail(log: Log, session: str) -> TailState:
    """The log's current end (without taking the append lock; complete records only), read
    again only when the log file changed (``_TAILS``)."""
    path = session_path(log.log_dir, session)
    try:
        return _TAILS.get(path, functools.partial(_read_tail, path))
    except OSError:  # missing, a link: read as it always was, which says what is wrong
        return _read_tail(path)


def _read_tail(path: Path) -> TailState:
    fd = open_nofollow(path, os.O_RDONLY)
    try:
        return inspect_tail(fd, path, os.fstat(fd).st_size)[1]
    finally:
        os.close(fd)


def record_at(log: Log, session: str, checkpoint: Checkpoint) -> str | None:
    """Why ``checkpoint`` does not match the log (None when it does), read again only when the
    log file changed (``_MATCHES``)."""
    path = session_path(log.log_dir, session)
    try:
        return _MATCHES.get(
            path,
            functools.partial(_record_at, path, checkpoint),
            key=(checkpoint.seq, checkpoint.hash, checkpoint.end),
        )
    except OSError:  # missing, a link: read as it always was, which says what is wrong
        return _record_at(path, checkpoint)


def _record_at(path: Path, checkpoint: Checkpoint) -> str | None:
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        return "the session's log is gone"
    if checkpoint.end > size:
        return f"checkpoint at byte {checkpoint.end} is past the end of the log ({size} bytes)"
    fd = open_nofollow(path, os.O_RDONLY)
    found: tuple[int | None, str | None]
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
