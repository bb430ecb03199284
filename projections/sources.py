"""Documents under ``sources/`` as events: what the cold tier knows of a file, the log says.

``register_sources`` compares the files with the last ``source_indexed`` event of each path (in
airsspec's own session, ``airsspec.memory``) and appends one event per file added, changed or
removed: its path, size and SHA-256 (both null when removed). The cold tier indexes a document
when it folds its event, and only while the file still holds that content, so:

- which documents were known, when, and with what content is in the audit log;
- a rebuild ``--as-of`` a past moment shows the documents registered by then (those whose
  content is still on disk), never one registered later;
- a rebuild equals the incremental tier, as for every other row.

A document under ``sources/users/USER/`` is owned by USER: its events name the user
(``user``), ``forget --user USER`` deletes the folder and every copy derived from its
documents, and the next registration records their removal. Others are owned by no one. A
folder there whose name is not a user name (``eventlog.names``) is not indexed (each of its
documents is named in a warning); the other documents are.

Symbolic links (to files or folders) are not followed: a link to a file outside the workspace
is never registered (each is named in a warning).
"""

from __future__ import annotations

import fcntl
import hashlib
import logging
import os
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import orjson

from eventlog.errors import InvalidNameError, UnsafePathError
from eventlog.layout import read_nofollow
from eventlog.log import Log
from eventlog.names import check_name
from eventlog.recovery import TailState
from eventlog.schema import MEMORY_SESSION, Record, SourceIndexedRecord
from projections.checkpoints import file_identity
from projections.files import atomic_write
from projections.units import SOURCE_SUFFIXES

logger = logging.getLogger(__name__)
RACY_NS = 2_000_000_000  # a file modified this recently is hashed again on the next call


def source_files(folder: Path | None) -> list[Path]:
    """Indexable files under ``folder`` (markdown and text), links not followed."""
    if folder is None or not folder.is_dir():
        return []
    found = []
    for parent, dirs, files in os.walk(folder, followlinks=False):
        for name in sorted(dirs) + sorted(files):
            path = Path(parent) / name
            if path.is_symlink():
                logger.warning("%s is a symbolic link; not indexed", path)
            elif name in files and path.suffix.lower() in SOURCE_SUFFIXES:
                found.append(path)
    return sorted(found)


USERS_FOLDER = "users"
"""Documents under ``sources/users/USER/`` are owned by USER (their events name it)."""


def source_owner(path: str) -> str | None:
    """The user owning the document at ``path`` (relative to ``sources/``), or None."""
    parts = path.split("/")
    return parts[1] if len(parts) > 2 and parts[0] == USERS_FOLDER and parts[1] else None


def owner_problem(path: str) -> str | None:
    """Why the document at ``path`` cannot be registered (None: it can): its folder under
    ``sources/users/`` is not a user name (``eventlog.names``). Such a document is skipped
    alone, named in a warning; it is never registered as unowned (it was put there as
    someone's)."""
    user = source_owner(path)
    try:
        if user is not None:
            check_name(user, f"{USERS_FOLDER}/{user}/")
    except InvalidNameError as exc:
        return str(exc)
    return None


def _owned(path: str) -> dict[str, str]:
    user = source_owner(path)
    return {} if user is None else {"user": user}


def owned_sources(log: Log, user: str) -> dict[str, SourceIndexedRecord]:
    """Every document ``user`` owns that the log registered: path -> its last registration
    (one whose ``sha256`` is null: removed since)."""
    found: dict[str, SourceIndexedRecord] = {}
    if MEMORY_SESSION not in log.sessions():
        return found
    for located in log.read(MEMORY_SESSION):
        record = located.record
        if isinstance(record, SourceIndexedRecord) and user in (
            record.user,
            source_owner(record.path),
        ):
            found[record.path] = record
    return found


def read_source(sources_dir: Path, path: str, sha256: str) -> str | None:
    """The text of ``sources_dir / path`` if the file still holds the content whose SHA-256 is
    ``sha256`` (None when it changed, went missing or became a link, or when ``path`` would
    leave ``sources_dir``: a log edited by hand cannot point the tier at another file)."""
    parts = Path(path).parts
    if not parts or Path(path).is_absolute() or ".." in parts:
        return None
    try:
        data = read_nofollow(sources_dir / path)
    except (OSError, UnsafePathError):
        return None
    if hashlib.sha256(data).hexdigest() != sha256:
        return None
    return data.decode("utf-8", errors="replace")


def register_sources(log: Log, sources_dir: Path, state: Path) -> list[SourceIndexedRecord]:
    """Append a ``source_indexed`` event for each file under ``sources_dir`` added, changed or
    removed since its last event; returns the records appended. ``state`` caches what the log
    says (and each file's size, mtime and inode, so an unchanged file is not read again); it is
    brought up to date from the log first, so events another process appended count."""
    lock = state.with_suffix(".lock")
    lock.parent.mkdir(parents=True, exist_ok=True)
    with lock.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        known, stored = _known(log, state)
        events: list[dict[str, Any]] = []
        seen = set()
        for file in source_files(sources_dir):
            path = file.relative_to(sources_dir).as_posix()
            if (problem := owner_problem(path)) is not None:
                logger.warning("%s: not indexed: %s", file, problem)
                continue
            seen.add(path)
            entry = known["files"].get(path)
            identity = file_identity(file)
            if entry is not None and entry.get("identity") == identity:
                continue
            try:
                data = read_nofollow(file)
            except (OSError, UnsafePathError) as exc:  # replaced by a link since it was listed
                logger.warning("%s", exc)
                continue
            sha = hashlib.sha256(data).hexdigest()
            if entry is None or entry["sha256"] != sha:
                events.append(
                    {"type": "source_indexed", "path": path, "size": len(data), "sha256": sha}
                    | _owned(path)
                )
            # a file changed within the clock's granularity of its listing may change again
            # with the same size and mtime: its identity is not kept, so it is read next time
            racy = identity is None or time.time_ns() - identity[1] < RACY_NS
            known["files"][path] = {"sha256": sha, "identity": None if racy else identity}
        for path in sorted(set(known["files"]) - seen):
            events.append(
                {"type": "source_indexed", "path": path, "size": None, "sha256": None}
                | _owned(path)
            )
            del known["files"][path]
        records = list(log.append_many(MEMORY_SESSION, events, system=True)) if events else []
        if records:
            _fold(known, records, log.head(MEMORY_SESSION))
        if (data := orjson.dumps(known, option=orjson.OPT_SORT_KEYS)) != stored:
            atomic_write(state, data)  # only when it changed: a query calls this every time
        return [r for r in records if isinstance(r, SourceIndexedRecord)]  # all of them, typed


def _known(log: Log, state: Path) -> tuple[dict[str, Any], bytes | None]:
    """What the log says of each path (``files``: path -> sha256 and the identity last seen),
    read from ``state`` and brought up to date with the records appended since; and the bytes
    ``state`` held."""
    head, stored = log.head(MEMORY_SESSION), None
    try:
        stored = read_nofollow(state)
        known = orjson.loads(stored)
        start = (known["offset"], known["seq"] + 1)
        if not isinstance(known["files"], dict):
            raise TypeError("files")
        if head.seq < known["seq"]:
            raise ValueError("the log was replaced")
    except (OSError, ValueError, KeyError, TypeError):  # missing, damaged or stale: read the log
        known, start = {"offset": 0, "seq": 0, "files": {}}, (0, 1)
    later = log.read(MEMORY_SESSION, offset=start[0], offset_seq=start[1])
    _fold(known, (located.record for located in later), head)
    return known, stored


def _fold(known: dict[str, Any], records: Iterable[Record], head: TailState) -> None:
    """Fold ``source_indexed`` records into ``known``, which then reflects the log up to
    ``head`` (a file whose content changed loses its remembered identity: it is read again)."""
    for record in records:
        if not isinstance(record, SourceIndexedRecord):
            continue
        if record.sha256 is None:
            known["files"].pop(record.path, None)
        elif known["files"].get(record.path, {}).get("sha256") != record.sha256:
            known["files"][record.path] = {"sha256": record.sha256, "identity": None}
    known["seq"], known["offset"] = head.seq, head.size
