"""Where a workspace's files live (``Layout``), which session ids are allowed, and how files
are opened.

``Layout`` declares every folder of a workspace once, derived from its root, and the one rule
for whether a folder is a workspace.

``{log_dir}/{session}.jsonl`` is the frozen log of one session; ``{session}.jsonl.quarantine``
next to it receives the bytes of torn tails; ``{session}.head`` holds the seq and hash of the last
acknowledged record, kept outside the log so that a log cut at a record boundary is caught.

A session id must be a portable file name that cannot escape ``log_dir``: 1-128 characters of
``A-Z a-z 0-9 . _ -``, starting with a letter or digit, not ending with a dot, not a name Windows
reserves (``CON``, ``NUL``, ``COM0``-``COM9``...), and not equal, ignoring case, to an existing
session (two such files would be one file on a case-insensitive file system). Names airsspec
keeps for its own logs (``RESERVED_SESSIONS``) are compared case-folded too: only airsspec writes
them, and no variant of them can be created (it would block the real one). A new session's id
is also checked for secrets by the log (an id is stored in every record and in file names).

Files under a workspace are opened with ``O_NOFOLLOW``: a symbolic link planted where a log,
head, quarantine or state file belongs is refused (``UnsafePathError``), never followed out of
the workspace.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import stat
import time
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, ClassVar

from eventlog.errors import InvalidEventError, InvalidSessionIdError, UnsafePathError

LOG_SUFFIX = ".jsonl"
QUARANTINE_SUFFIX = ".jsonl.quarantine"
HEAD_SUFFIX = ".head"

MEMORY_SESSION = "airsspec.memory"
"""The workspace's own log: learnings a user adds without a session, feedback on learnings,
what each context build and recall returned, archives and restores. Only airsspec writes it."""
RESERVED_SESSIONS = frozenset({MEMORY_SESSION})
"""Session ids only airsspec writes (compared case-folded)."""

_SESSION_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
_RESERVED = {"con", "prn", "aux", "nul"} | {f"{p}{i}" for p in ("com", "lpt") for i in range(10)}


def validate_session_id(session: object) -> str:
    """Return ``session`` if it is a safe session id, else raise ``InvalidSessionIdError``."""
    if not isinstance(session, str) or not _SESSION_RE.match(session):
        raise InvalidSessionIdError(
            f"invalid session id {session!r}: use 1-128 characters of letters, digits, '.', '_'"
            " or '-', starting with a letter or digit"
        )
    if session.endswith(".") or session.split(".")[0].lower() in _RESERVED:
        raise InvalidSessionIdError(f"invalid session id {session!r}: not a portable file name")
    return session


def reserved_session(session: str) -> str | None:
    """The reserved name ``session`` equals ignoring case (``RESERVED_SESSIONS``), or None."""
    folded = session.casefold()
    return next((name for name in RESERVED_SESSIONS if name.casefold() == folded), None)


def check_writer(session: str, *, system: bool) -> None:
    """Refuse a write to a reserved session by anyone but airsspec (``system``:
    ``InvalidEventError``), and a write to a case variant of one by anyone
    (``InvalidSessionIdError``)."""
    reserved = reserved_session(session)
    if reserved is None or (system and session == reserved):
        return
    if session != reserved:
        raise InvalidSessionIdError(
            f"invalid session id {session!r}: {reserved!r} is reserved for airsspec's own log "
            "(session ids are compared ignoring case)"
        )
    raise InvalidEventError(
        f"session {reserved!r} is airsspec's own log of learnings and feedback; write to it "
        "with the learnings commands",
        field="session",
    )


def check_new_session(log_dir: Path, session: str) -> None:
    """Refuse a new session whose id equals an existing one ignoring case."""
    folded = session.casefold()
    for existing in list_sessions(log_dir):
        if existing != session and existing.casefold() == folded:
            raise InvalidSessionIdError(
                f"invalid session id {session!r}: session {existing!r} exists and differs only "
                "in case (they would be one file on a case-insensitive file system)"
            )


def session_path(log_dir: Path, session: str) -> Path:
    """The log file of ``session``."""
    return log_dir / f"{validate_session_id(session)}{LOG_SUFFIX}"


def quarantine_path(log_dir: Path, session: str) -> Path:
    """The file that receives the torn tails of ``session``."""
    return log_dir / f"{validate_session_id(session)}{QUARANTINE_SUFFIX}"


def head_path(log_dir: Path, session: str) -> Path:
    """The head file of ``session`` (seq and hash of its last acknowledged record)."""
    return log_dir / f"{validate_session_id(session)}{HEAD_SUFFIX}"


def open_nofollow(path: Path | str, flags: int, mode: int = 0o644) -> int:
    """``os.open`` that refuses a symbolic link or a non-regular file at ``path``. It opens
    without blocking (a FIFO planted there would hold the open until someone wrote to it),
    and blocks again once the file is known to be a regular one."""
    try:
        fd = os.open(path, flags | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK, mode)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise UnsafePathError(Path(path)) from exc
        if exc.errno == errno.ENXIO:  # a FIFO opened to write, with no reader
            raise UnsafePathError(Path(path), "not a regular file") from exc
        raise
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise UnsafePathError(Path(path), "not a regular file")
    if not flags & os.O_NONBLOCK:
        os.set_blocking(fd, True)
    return fd


def reader_nofollow(path: Path | str) -> BinaryIO:
    """The regular file at ``path`` opened for binary reading, never through a symbolic link."""
    return os.fdopen(open_nofollow(path, os.O_RDONLY), "rb")


def read_nofollow(path: Path | str) -> bytes:
    """The bytes of the regular file at ``path``, never through a symbolic link."""
    with reader_nofollow(path) as f:
        return f.read()


# Each log folder's sessions as last listed in this process, with the folder's size, mtime,
# inode, ctime and device then: a file made, removed or renamed in it changes its mtime and
# ctime (and a file system mounted over it, its device).
_LISTED: dict[str, tuple[tuple[int, int, int, int, int], list[str]]] = {}
LISTED_SETTLE_NS = 1_000_000_000
"""A listing is kept once the folder's times are this old: a change within the file system's
clock tick of the listing, which leaves the times as they were, is never taken for none."""


def list_sessions(log_dir: Path) -> list[str]:
    """Sessions with a log file, sorted by id (a symbolic link is not a session's log). The
    listing is kept while the folder is unchanged (every read of every session lists it: 10,000
    entries at 1M records, 8 ms)."""
    try:
        st = os.stat(log_dir)
    except FileNotFoundError:
        return []
    seen = (st.st_size, st.st_mtime_ns, st.st_ino, st.st_ctime_ns, st.st_dev)
    kept = _LISTED.get(str(log_dir))
    if kept is not None and kept[0] == seen:
        return list(kept[1])
    try:
        entries = list(os.scandir(log_dir))
    except FileNotFoundError:
        return []
    names = []
    for entry in entries:
        if entry.name.endswith(LOG_SUFFIX) and entry.is_file(follow_symlinks=False):
            name = entry.name[: -len(LOG_SUFFIX)]
            if _SESSION_RE.match(name):
                names.append(name)
    names.sort()
    if time.time_ns() - max(st.st_mtime_ns, st.st_ctime_ns) > LISTED_SETTLE_NS:
        _LISTED[str(log_dir)] = (seen, names)
    return list(names)


def linked_sessions(log_dir: Path) -> list[Path]:
    """Symbolic links where a session's log would be (reported by ``verify``, never followed)."""
    try:
        entries = list(os.scandir(log_dir))
    except FileNotFoundError:
        return []
    return sorted(Path(e.path) for e in entries if e.name.endswith(LOG_SUFFIX) and e.is_symlink())


# ------------------------------------------------------------------- the workspace's folders


def _make_within(root: Path, parts: tuple[str, ...]) -> None:
    """Make ``root/parts...`` (those missing), each folder in its parent's descriptor, none
    followed if it is a link (``UnsafePathError``); another failure names the full path."""
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    here = root
    try:
        for part in parts:
            here = here / part
            try:
                with contextlib.suppress(FileExistsError):
                    os.mkdir(part, dir_fd=fd)
                inner = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
            except OSError as exc:
                if os.path.islink(here):
                    raise UnsafePathError(here) from exc
                raise type(exc)(exc.errno, exc.strerror, str(here)) from exc
            os.close(fd)
            fd = inner
    finally:
        os.close(fd)


@dataclass(frozen=True)
class Layout:
    """Every path of a workspace, derived from its root (one declaration: nothing else spells
    them). ``contexts/agent/`` holds the frozen logs (the only source of truth);
    ``knowledge/`` and ``state/`` hold projections that can be deleted and rebuilt;
    ``sources/`` holds documents the user adds."""

    root: Path

    # The folders ``init`` makes; a workspace's folders are its own (see ``check``).
    FOLDERS: ClassVar[tuple[str, ...]] = (
        "contexts/agent",
        "knowledge/library",
        "knowledge/vectors",
        "sources",
        "state",
    )
    # Folders whose entries are each a folder of the workspace's own (a tier's state, DuckDB's
    # temp folder): a link directly inside one is refused too.
    HOLDERS: ClassVar[tuple[str, ...]] = ("knowledge", "state", "state/tmp")
    # What makes a folder a workspace: one of these folders in it (a workspace whose log is on
    # a bucket may have no ``contexts/`` here).
    MARKERS: ClassVar[tuple[str, ...]] = ("contexts", "state", "knowledge")

    @staticmethod
    def is_workspace(path: Path) -> bool:
        """Is ``path`` a workspace folder (``airsspec init`` made it, or it was used as one)?"""
        return any((path / marker).is_dir() for marker in Layout.MARKERS)

    def check(self) -> None:
        """Refuse (``UnsafePathError``) a symbolic link at any folder of the layout
        (``contexts/``, ``contexts/agent/``, ``knowledge/`` ..., ``sources/``, ``state/``) or
        directly inside a holder (``knowledge/``, ``state/``, ``state/tmp/``): following one
        would read or write outside the workspace (through DuckDB's temp folder, SQL would read
        what it points to). The root itself may be a link: it is where the user put it."""
        folders = {str(Path(sub).parent) for sub in self.FOLDERS if "/" in sub}
        for folder in sorted(folders | set(self.FOLDERS)):
            if (self.root / folder).is_symlink():
                raise UnsafePathError(self.root / folder)
        for holder in self.HOLDERS:
            try:
                with os.scandir(self.root / holder) as entries:
                    linked = sorted(Path(e.path) for e in entries if e.is_symlink())
            except (FileNotFoundError, NotADirectoryError):
                continue
            if linked:
                raise UnsafePathError(linked[0])

    def create(self) -> None:
        """Make the layout's folders (those missing), never through a link: a link at one of
        them is refused first (``check``), and each is made in its parent opened without
        following one, so a link planted meanwhile is refused too, with nothing made where it
        points. The root may be a link (where the user put it)."""
        self.check()
        self.root.mkdir(parents=True, exist_ok=True)
        for sub in self.FOLDERS:
            _make_within(self.root, Path(sub).parts)

    @property
    def log_dir(self) -> Path:
        """``contexts/agent``: the frozen logs."""
        return self.root / "contexts" / "agent"

    @property
    def library_dir(self) -> Path:
        """``knowledge/library``: the warm tier's history files."""
        return self.root / "knowledge" / "library"

    @property
    def visual_dir(self) -> Path:
        """``knowledge/visual``: the visual tier's pages (``summary-NNN.png``) and sidecars."""
        return self.root / "knowledge" / "visual"

    @property
    def vectors_dir(self) -> Path:
        """``knowledge/vectors``: the cold tier's Lance tables."""
        return self.root / "knowledge" / "vectors"

    @property
    def sources_dir(self) -> Path:
        """``sources``: documents the user adds for recall."""
        return self.root / "sources"

    @property
    def state_dir(self) -> Path:
        """``state``: checkpoints, hot windows, caches."""
        return self.root / "state"

    def tier_dir(self, tier: str) -> Path:
        """``state/{tier}``: a tier's saved states (its manifest and lock beside it)."""
        return self.state_dir / tier

    @property
    def locks_dir(self) -> Path:
        """``state/locks``: the locks of processes that append derived events or watch."""
        return self.state_dir / "locks"

    @property
    def keys_dir(self) -> Path:
        """``state/keys``: per-subject keys of sealed content."""
        return self.state_dir / "keys"

    @property
    def objects_dir(self) -> Path:
        """``state/objects``: the cache of a log on a bucket."""
        return self.state_dir / "objects"

    @property
    def forgotten_path(self) -> Path:
        """``state/forgotten.json``: how far this machine has followed the ``forgotten``
        events of the workspace's own log (a ``forget`` run on another machine sharing it)."""
        return self.state_dir / "forgotten.json"

    @property
    def caches_dir(self) -> Path:
        """``state/caches``: caches (embeddings), shared by as-of copies."""
        return self.state_dir / "caches"

    @property
    def embedding_cache_path(self) -> Path:
        """``state/caches/embeddings.sqlite``: the embeddings already computed, by text."""
        return self.caches_dir / "embeddings.sqlite"

    @property
    def key_cache_dir(self) -> Path:
        """``state/objects/keys``: the bucket's key store, cached here (``[storage] url``)."""
        return self.objects_dir / "keys"

    @property
    def serve_info_path(self) -> Path:
        """``state/serve.json``: how local clients reach the running server (its discovery
        file; ``airsspec.client`` spells it too, to stay light)."""
        return self.state_dir / "serve.json"

    @property
    def catch_up_lock(self) -> Path:
        """``state/catch-up.lock``: held by the background cold catch-up a search starts."""
        return self.lock_path("catch-up")

    @property
    def duckdb_temp_dir(self) -> Path:
        """``state/tmp/duckdb``: DuckDB's spill folder (emptied after a ``forget``)."""
        return self.state_dir / "tmp" / "duckdb"

    @property
    def sources_registry_path(self) -> Path:
        """``state/sources.json``: what ``sources/`` held at its last registration."""
        return self.state_dir / "sources.json"

    def lock_path(self, name: str) -> Path:
        """``state/{name}.lock``: a lock of the workspace's own processes (``import``,
        ``session-end``)."""
        return self.state_dir / f"{name}.lock"

    @property
    def hook_jobs_log(self) -> Path:
        """``state/hook-jobs.log``: what background hook jobs reported."""
        return self.state_dir / "hook-jobs.log"

    def cold_paths(self) -> list[Path]:
        """What the cold projection keeps here: its table, checkpoints, manifest, record of
        the table's files, and the embedding cache (removed whole when no embedder can fold
        them again)."""
        return [
            self.vectors_dir,
            self.tier_dir("cold"),
            self.caches_dir,
            self.state_dir / "cold.manifest.json",
            self.state_dir / "cold.files.json",
        ]

    @property
    def analytics_dir(self) -> Path:
        """``analytics/events``: the analytics Delta table of a workspace without a bucket."""
        return self.root / "analytics" / "events"
