"""Purging derived copies, and following ``forget`` events appended on other machines.

``forget`` (``airsspec.forgetting``) destroys keys and records a ``forgotten`` event; what it
asks of the projections is here, so it is asked the same way where it ran and on every other
machine sharing the log: each projection drops the sessions through its own store
(``Projector.purge``; the cold one compacts its table's versions and indexes), then they are
folded again, forgotten.

``follow`` runs at the end of every catch-up (``Kernel.catch_up``): it reads the workspace log's
``forgotten`` events past ``state/forgotten.json`` and, for each, drops those sessions from this
machine's projections, its embedding cache (by session: the texts can no longer be read to hash
them) and its copy of the user's documents, then folds them again. The machine that ran
``forget`` marks its own event followed.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from airsspec.errors import (
    CorruptLogError,
    InvalidNameError,
    InvalidSessionIdError,
    UnsafePathError,
)
from eventlog.layout import MEMORY_SESSION, read_nofollow, validate_session_id
from eventlog.names import check_name, name_folder

if TYPE_CHECKING:
    from airsspec.kernel import Kernel

logger = logging.getLogger(__name__)
_following = threading.local()  # the kernels this thread is following forgets for


def follow(kernel: Kernel, *, fresh: bool = False) -> list[str]:
    """Apply here the ``forgotten`` events another machine appended since this one last looked
    (see the module); returns the sessions dropped and folded again. One ``stat`` when the
    workspace log has not grown; ``fresh`` first brings a bucket's copy of it up to date (a
    request), as a registration of documents needs. The refold after each event runs
    ``project``, whose own ``follow`` returns at once: the events are taken one after another,
    never one inside the refold of the other (hundreds would pass the recursion limit)."""
    active = _following.__dict__.setdefault("kernels", set())
    if id(kernel) in active:
        return []
    active.add(id(kernel))
    try:
        return _follow(kernel, fresh)
    finally:
        active.discard(id(kernel))


def _follow(kernel: Kernel, fresh: bool) -> list[str]:
    from eventlog.layout import session_path

    if fresh:
        kernel.log.head(MEMORY_SESSION)
    path = session_path(kernel.log.log_dir, MEMORY_SESSION)
    mark = _read_mark(kernel)
    try:
        if path.stat().st_size <= mark["offset"]:
            return []
    except FileNotFoundError:
        return []
    followed: list[str] = []
    try:
        for located in _read_from(kernel, mark, mark["seq"] + 1):
            # (another thread or process may have followed it meanwhile)
            if located.record.type == "forgotten" and _read_mark(kernel)["offset"] < located.end:
                if (problem := _unfollowable(located.record)) is not None:
                    logger.warning(
                        "forget event %s of the workspace log not followed: %s",
                        located.record.seq,
                        problem,
                    )
                else:
                    sessions, complete = _follow_one(kernel, located)
                    followed += sessions
                    if not complete:  # followed again at the next read, from this event
                        break
            mark = {"seq": located.record.seq, "offset": located.end}
    except CorruptLogError as exc:  # named by status and verify; every other read goes on
        logger.warning("forget events not followed (the workspace log is damaged): %s", exc)
    if mark["offset"] > _read_mark(kernel)["offset"]:
        _write_mark(kernel, mark)
    return followed


def _read_from(kernel: Kernel, mark: dict[str, int], seq: int) -> Any:
    """The workspace log's records from ``seq`` on, read from ``mark`` (not from its start)."""
    return kernel.log.read(
        MEMORY_SESSION, from_seq=seq, offset=mark["offset"], offset_seq=mark["seq"] + 1
    )


def locate(kernel: Kernel, seq: int) -> Any:
    """The workspace log's record ``seq``, with where it is stored."""
    return next(iter(_read_from(kernel, _read_mark(kernel), seq)), None)


def _unfollowable(record: Any) -> str | None:
    """Why a recorded ``forgotten`` event cannot be followed here (None: it can): its names
    come from the log, written by another machine (or edited by hand), and are checked as any
    name entering is, never turned into a path unchecked."""
    try:
        if record.subject == "user":
            check_name(record.name, "its user")
        for session in record.sessions:
            validate_session_id(session)
    except (InvalidNameError, InvalidSessionIdError) as exc:
        return str(exc)
    return None


def _follow_one(kernel: Kernel, located: Any) -> tuple[list[str], bool]:
    """Drop what ``forget`` named (its sessions, the user's documents) from this machine's
    tiers and caches, mark the event followed, then fold the sessions again (forgotten).
    Returns the sessions and whether it was followed whole: a user's folder of documents
    behind a link is not removed (warned; the event is left unmarked, taken again once the
    link is gone), everything else is."""
    from projections.sources import owned_sources

    record = located.record
    cold = cold_projector(kernel)
    sessions = sorted({*record.sessions, MEMORY_SESSION})
    owners = list(sessions)
    complete = True
    if record.subject == "user":
        owned = owned_sources(kernel.log, record.name)
        owners += [f"src:{path}" for path in owned]
        since = {  # registered after the forget, and present (not its removal, recorded then)
            path
            for path, event in owned.items()
            if event.seq > record.seq and event.sha256 is not None
        }
        try:
            _remove_documents(kernel, record.name, since)
        except UnsafePathError as exc:
            complete = False
            logger.warning(
                "the documents of forgotten user %s are not removed here: %s; the forget is "
                "followed again once the link is gone",
                record.name,
                exc,
            )
    if (sealer := kernel.log.sealer) is not None:  # a key read here before the event, kept
        sealer.uncache(record.keys)  # until its recheck, would fold them again in the clear
    drop(kernel, sessions, cold, always=False)
    if cold is not None:
        cold.embedder.discard_owners(owners)
    else:  # as ``forget`` does: the cold files here (checkpoints, the cache) go whole
        drop_cold(kernel)
    clear_spill(kernel)
    if complete:
        mark_followed(kernel, located)
    purge(kernel, sessions, cold)
    return sessions, complete


def _remove_documents(kernel: Kernel, user: str, since: set[str]) -> None:
    """Remove ``user``'s folder under ``sources/`` (``_documents_folder``: links refused) as
    ``forget`` did where it ran, but for the documents registered after its event (``since``:
    added since, not forgotten; a follow run again, its mark lost, must not take them)."""
    sources = kernel.workspace.sources_dir
    folder = documents_folder(kernel, user)
    if not folder.is_dir():
        return
    if not since:
        shutil.rmtree(folder)
        return
    for parent, folders, files in os.walk(folder, topdown=False):  # never through a link
        here = Path(parent)
        for name in files:
            if (here / name).relative_to(sources).as_posix() not in since:
                (here / name).unlink()
        for name in folders:
            if (here / name).is_symlink():
                (here / name).unlink()
            else:
                with contextlib.suppress(OSError):  # one that keeps a document stays
                    (here / name).rmdir()
    with contextlib.suppress(OSError):
        folder.rmdir()


def documents_folder(kernel: Kernel, user: str) -> Path:
    """``sources/users/USER/``, derived from the checked name; a link there (the folder or
    ``sources/users`` itself) is refused (``UnsafePathError``): a removal stays inside."""
    from projections.sources import USERS_FOLDER

    return name_folder(kernel.workspace.sources_dir / USERS_FOLDER, user)


def _read_mark(kernel: Kernel) -> dict[str, int]:
    """Where ``follow`` resumes: the last record of the workspace log it read, and the byte
    just after it; the start when this machine never looked, or when the mark names no record
    of the log (it is derived state: damaged or edited, it is never trusted to skip one)."""
    try:
        mark = orjson.loads(read_nofollow(kernel.workspace.layout.forgotten_path))
        seq, offset = mark["seq"], mark["offset"]
    except (OSError, ValueError, KeyError, TypeError):
        return {"seq": 0, "offset": 0}
    if type(seq) is not int or type(offset) is not int or not _ends_record(kernel, seq, offset):
        return {"seq": 0, "offset": 0}
    return {"seq": seq, "offset": offset}


def _ends_record(kernel: Kernel, seq: int, offset: int) -> bool:
    """Whether the workspace log's line ending just before byte ``offset`` is record ``seq``
    (or both are 0: its start)."""
    from eventlog.layout import reader_nofollow, session_path

    if seq <= 0 or offset <= 0:
        return seq == offset == 0
    try:
        with reader_nofollow(session_path(kernel.log.log_dir, MEMORY_SESSION)) as f:
            if offset > os.fstat(f.fileno()).st_size:
                return False
            line, start, step = b"", offset, 4096
            while start > 0 and b"\n" not in line[:-1]:  # back to the line's start
                step = min(start, step * 2)
                start -= step
                f.seek(start)
                line = f.read(step) + line
    except OSError:
        return False
    if not line.endswith(b"\n"):
        return False
    try:
        record = orjson.loads(line[:-1].rsplit(b"\n", 1)[-1])
    except orjson.JSONDecodeError:
        return False
    return isinstance(record, dict) and record.get("seq") == seq


def _write_mark(kernel: Kernel, mark: dict[str, int]) -> None:
    from projections.files import atomic_write

    atomic_write(kernel.workspace.layout.forgotten_path, orjson.dumps(mark))


def mark_followed(kernel: Kernel, located: Any) -> None:
    """Record ``located`` (a ``forgotten`` event) as followed here, unless the mark is past it."""
    if located is not None and _read_mark(kernel)["offset"] < located.end:
        _write_mark(kernel, {"seq": located.record.seq, "offset": located.end})


def cold_projector(kernel: Kernel) -> Any:
    """The cold tier's projector, or None when its embedder cannot run here (the tier and
    the cache are then removed whole: ``drop_cold``)."""
    if kernel.embedder_problem() is not None:
        return None
    (cold,) = kernel.workspace.projectors(("cold",))
    return cold


def drop_cold(kernel: Kernel) -> int:
    """With no embedder to refold it, the cold tier and the embedding cache go whole (both
    are projections: ``project`` rebuilds them once the embedder runs); returns 0."""
    for path in kernel.workspace.layout.cold_paths():
        if path.is_dir():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)
    return 0


def clear_spill(kernel: Kernel) -> None:
    """Remove DuckDB's spill folder (it may hold rows of what was just dropped)."""
    shutil.rmtree(kernel.workspace.layout.duckdb_temp_dir, ignore_errors=True)


def _tiers(cold: Any) -> list[str]:
    from airsspec.workspace import TIERS

    return [t for t in TIERS if t != "cold" or cold is not None]


def drop(kernel: Kernel, sessions: list[str], cold: Any, *, always: bool = True) -> None:
    """Drop ``sessions`` from every projection, each through its own store
    (``Projector.purge``): the cold one then keeps no old version, deletion file or index
    holding them (rebuilding its indexes is most of the cost: without ``always``, only when
    it held rows of them)."""
    others = tuple(t for t in _tiers(cold) if t != "cold")
    for projector in [*kernel.workspace.projectors(others), *([cold] if cold else [])]:
        projector.purge(sessions, thorough=always)


def purge(kernel: Kernel, sessions: list[str], cold: Any) -> list[str]:
    """Drop ``sessions`` from every tier and fold them again (forgotten records add nothing):
    a second drop, as a daemon may have folded them since the first."""
    tiers = _tiers(cold)
    drop(kernel, sessions, cold, always=False)
    kernel.project(tuple(tiers), sessions=sessions, warn=False)
    if cold is not None:
        cold.remove_old_versions(reindex=False)  # the refold wrote versions of its own
    return tiers
