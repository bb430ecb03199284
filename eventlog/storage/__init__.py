"""Where a log's bytes are kept: a storage protocol with two implementations.

``SessionStore`` is what a log needs of its storage: append a batch of encoded lines to a
session given the previous head it was chained to (compare-and-append: the append fails with
``SeqTakenError`` when that head is no longer the session's end), read a session's bytes from a
position, list sessions, keep each session's head, keep seals (create-only) and claim session
ids (case-folded, create-only, so two ids that differ only in case never both exist).

- ``FolderStore`` (``eventlog.storage.folder``): the local folder, the files ``EventLog``
  writes (``{session}.jsonl``, ``{session}.head``), under the same ``flock``.
- ``ObjectStore`` (``eventlog.storage.objects``): an S3-compatible bucket; one immutable object
  per batch, created only if absent, so whoever creates the object of seq N owns seq N.

Invariant: the bytes of a session are the same on both: the concatenation of a session's
objects in key order is exactly the local log file, so ``verify`` and every reader of the
local layout work on either (``local_dir`` holds that layout: the folder itself, or the
object store's read-through cache). ``ObjectStoreLog`` (``eventlog.storage.log``) is the log
over any ``SessionStore``.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Protocol, runtime_checkable

from eventlog.heads import Head
from eventlog.recovery import TailState

_BUCKET = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]")  # S3's rule for bucket names
_SEGMENT = re.compile(r"[A-Za-z0-9!_.*'()-]+")  # S3's safe characters for a key


def parse_url(url: str) -> tuple[str, str]:
    """``s3://bucket/prefix`` as (bucket, prefix); ``ValueError`` naming what is wrong.

    Only a plain bucket and prefix: a bucket named as S3 names them, and prefix segments of S3's
    safe characters, none empty (one trailing ``/`` aside), ``.`` or ``..``. Every key the log
    writes is derived under the prefix, so nothing in the url can point a key anywhere else (a
    store would normalise ``..`` or refuse it halfway through a command)."""
    if not url.startswith("s3://"):
        raise ValueError(f"storage url {url!r}: use s3://bucket/prefix")
    bucket, _, prefix = url[5:].partition("/")
    if not _BUCKET.fullmatch(bucket) or ".." in bucket:
        raise ValueError(
            f"storage url {url!r}: the bucket must be 3 to 63 lowercase letters, digits, '.' "
            "or '-', starting and ending with a letter or digit, no '..'"
        )
    body = prefix.removesuffix("/")
    segments = body.split("/") if prefix else []  # "s3://bucket//": one empty segment
    for segment in segments:
        if not _SEGMENT.fullmatch(segment) or segment in (".", ".."):
            raise ValueError(
                f"storage url {url!r}: the prefix must be segments of letters, digits and "
                f"!_.*'()- (not empty, '.' or '..'); got {segment!r}"
            )
    return bucket, body


@runtime_checkable
class SessionStore(Protocol):
    """What a log needs of its storage (see the module)."""

    @property
    def local_dir(self) -> Path:
        """A folder holding every synced session in the local layout (log and head files)."""
        ...

    def tail(self, session: str) -> TailState:
        """The session's end now: bytes, last seq, hash and time (seq 0 when it is empty)."""
        ...

    def append(self, session: str, after: TailState, data: bytes) -> None:
        """Store ``data`` (whole encoded lines chained to ``after``) as the records following
        ``after``; ``SeqTakenError`` if ``after`` is no longer the end, nothing stored."""
        ...

    def read_bytes(self, session: str, start: int = 0) -> bytes:
        """The session's bytes from byte ``start`` on (the local log file's bytes)."""
        ...

    def sessions(self) -> list[str]:
        """Sessions with records, sorted."""
        ...

    def head(self, session: str) -> Head | None:
        """The stored head (last acknowledged seq and hash; it may lag the end, never lead)."""
        ...

    def set_head(self, session: str, seq: int, digest: str) -> bool:
        """Advance the head to ``seq`` (never moves it back); True when another writer had
        moved it since this store last did (the session has other writers now)."""
        ...

    def claim(self, session: str) -> None:
        """Claim a new session id, case-folded; ``InvalidSessionIdError`` when another id that
        differs only in case holds it."""
        ...

    def put_seal(self, name: str, data: bytes) -> None:
        """Keep a seal under ``name``, create-only (``SealExistsError`` if it exists)."""
        ...

    def get_seal(self, name: str) -> bytes:
        """A kept seal's bytes (``FileNotFoundError`` if there is none)."""
        ...

    def sync(self, sessions: list[str] | None = None, *, full: bool = False) -> None:
        """Bring ``local_dir`` up to date for ``sessions`` (default: all); ``full`` also checks
        what was cached against the store (a cut or replaced object is then mirrored)."""
        ...

    def close(self) -> None:
        """Release files and connections."""
        ...
