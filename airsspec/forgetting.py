"""Forgetting a user or a session: destroy its keys, record that, and purge every derived copy.

The log is never rewritten (an invariant), so forgetting is crypto-shredding: with
``[privacy] encrypt`` on, a subject's content is stored only as ciphertext under its keys
(``eventlog.crypto``). ``forget`` then:

1. reads the subject's records one last time (while the keys exist) for the embedding cache's
   keys of their texts, and counts records written before encryption was on (they stay readable:
   the report says how many);
2. drops every derived copy of those sessions while the keys still exist (each tier's output,
   the cold table's rows, old versions and indexes, their cached embeddings, DuckDB's spill
   folder), so a crash after step 3 leaves nothing in the clear that ``project`` would not fold
   again as forgotten;
3. destroys the keys: the user's key and each of its sessions' (or the one session's), and the
   key of each of their learnings that was given a verdict (its reason is sealed under it); a
   session the user started meanwhile is the user's too (its key goes, its copies in step 5).
   Then it counts what it forgot: the records sealed under those keys that cannot be read now
   and could before (one appended meanwhile counts, one an earlier forget took does not);
4. appends a ``forgotten`` event to the workspace's own log: whom, who asked, which sessions and
   keys (the time is the record's);
5. drops the sessions again (a daemon may have folded them between 2 and 3) and folds them
   (their records now read ``[forgotten]``: no units, no learnings), then removes the cold
   table's new old versions. Running ``forget`` again after a crash completes it.

Other subjects' records, summaries and recall are untouched (each tier refolds only the
sessions named). Parquet written by ``export parquet`` reads the stored lines, so it holds
ciphertext only, never content.

Every other machine sharing the log (``[storage] url``) follows: each ``project`` (which every
read runs first, and the daemon after each change) ends with ``follow``, which reads the
workspace log's ``forgotten`` events past ``state/forgotten.json`` and, for each, drops those
sessions from this machine's tiers, its embedding cache (by session: the texts can no longer
be read to hash them) and its copy of the user's documents, then folds them again, forgotten.
Its keys were destroyed where they are shared (the bucket's key store), so nothing of the
subject is read again. The machine that ran ``forget`` marks its own event followed.
"""

from __future__ import annotations

import contextlib
import getpass
import logging
import os
import shutil
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from airsspec.errors import (
    CorruptLogError,
    ForgetError,
    InvalidNameError,
    InvalidSessionIdError,
    ScopeError,
    UnsafePathError,
)
from eventlog.crypto import (
    CONTENT_FIELDS,
    DROPPED_FIELDS,
    is_forgotten,
    key_id,
    kid_parts,
    learning_subject,
)
from eventlog.layout import read_nofollow, validate_session_id
from eventlog.names import check_name, name_folder
from eventlog.schema import MEMORY_SESSION

if TYPE_CHECKING:
    from airsspec.memory import Memory

logger = logging.getLogger(__name__)
_following = threading.local()  # the memories this thread is following forgets for


@dataclass
class Forgotten:
    """What ``forget`` did (``airsspec forget --json`` prints it)."""

    subject: str  # user or session
    name: str
    by: str
    sessions: list[str]
    keys_destroyed: int
    records_forgotten: int  # records this forget made unreadable (counted once the keys went)
    records_in_clear: int  # written before encryption was on: still readable in the log
    cache_entries_removed: int
    documents: list[str] = field(default_factory=list)  # removed from sources/users/USER/
    seconds: float = 0.0
    tiers: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        """As a JSON object."""
        return asdict(self)


def _sealed_kid(raw: bytes) -> str | None:
    if b'"sealed"' not in raw:
        return None
    sealed = orjson.loads(raw).get("sealed")
    return sealed.get("kid") if isinstance(sealed, dict) else None


def _has_content(record: Any) -> bool:
    names = (*CONTENT_FIELDS.get(record.type, {}), *DROPPED_FIELDS)
    return any(getattr(record, n, None) not in (None, "", {}, []) for n in names)


def forget(
    memory: Memory, *, user: str | None = None, session: str | None = None, by: str | None = None
) -> Forgotten:
    """Forget ``user`` (every session it owns, and what it added outside one) or ``session``
    (see the module); a scoped memory may forget only itself or a session it may write to
    (the access gate), and a read-only one nothing."""
    started = time.perf_counter()
    if (user is None) == (session is None):
        raise ForgetError("name one subject to forget: a user or a session")
    memory.scopes.writable()
    # names are values, never paths: checked before anything is read or changed, and the
    # user's folder of documents derived inside sources/users/ with links refused
    asker = _asker(memory, by)
    folder = None if user is None else _documents_folder(memory, check_name(user, "user"))
    log = memory.workspace.log
    sealer = log.sealer
    if sealer is None:
        raise _in_the_clear()
    if user is not None:
        if not memory.scopes.admin and memory.scope.user != user:
            raise ScopeError(f"a memory scoped to {memory.scope} cannot forget user {user}")
        owners = memory.scopes.owners()
        sessions = sorted(s for s, owner in owners.items() if owner.user == user)
        subjects = [f"user:{user}", *(f"session:{s}" for s in sessions)]
        owned = None
    else:
        assert session is not None
        memory.check_session(session)
        memory.scopes.guard_writes(session)  # the team's session is not a user's to shred
        owned = memory.scopes.owner(session).user
        sessions = [session]
        subjects = [f"session:{session}"]
    kids = {key_id(subject) for subject in subjects}
    if sealer.mode == "off" and not any(sealer.keys.key(kid, create=False) for kid in kids):
        raise _in_the_clear()  # off, and no key of an earlier setting: nothing to shred
    # a session's records sealed under its user's key alone (before keys were nested) can
    # only be forgotten with the user: refused before anything is changed
    whole_user = key_id(f"user:{owned}") if user is None and owned is not None else None
    only_user = 0

    # 1. the last reading: cache keys of the texts, and what stays in the clear (the cold
    #    tier is opened only after the request is known to be one that can be done)
    from projections.units import record_units

    units = []
    in_clear = 0
    touched = set(sessions)
    unreadable: dict[str, set[int]] = {}  # seqs an earlier forget made unreadable already
    for name in [*sessions, MEMORY_SESSION]:
        if name not in log.sessions():
            continue
        for located in log.read(name):
            kid = _sealed_kid(located.raw)
            mine = kid is not None and not kids.isdisjoint(kid_parts(kid))
            if name == MEMORY_SESSION and not mine:
                continue
            if kid is not None and kid == whole_user and name != MEMORY_SESSION:
                only_user += 1
            touched.add(name)
            if is_forgotten(located.record):
                unreadable.setdefault(name, set()).add(located.record.seq)
            if located.record.type == "learning":
                # what was said of it (a verdict's reason) is sealed under its own key; it
                # follows its learning (a learning precedes its feedback in the reading order)
                kids.add(key_id(learning_subject(located.record.learning_id)))
            if not mine and _has_content(located.record):
                in_clear += 1
            units.extend(record_units(located.record))

    if only_user:
        raise ForgetError(
            f"{only_user} record(s) of session {session!r} were sealed under the key of user "
            f"{owned} alone (written before session keys were nested in user keys): destroying "
            f"that key would forget every session of {owned}. Nothing was changed; forget the "
            f"user ('forget --user {owned}'), or keep the session"
        )
    cold = _cold_projector(memory)
    hashes: set[str] = set()
    if cold is not None:
        from projections.embedding_cache import text_sha256

        embedded = (cold.policy.embedded_text(unit) for unit in units)
        hashes = {text_sha256(text) for text in embedded if text is not None}
    documents = _documents(memory, user, cold, hashes) if user is not None else []
    unknown = sealer.keys.key(key_id(subjects[0]), create=False) is None
    if user is not None and not sessions and not documents and unknown:
        raise ForgetError(f"nothing is recorded for user {user!r}")

    # 2. drop every derived copy while the keys still exist: a crash past step 3 then leaves
    #    nothing in the clear that a later ``project`` would not fold again as forgotten
    ordered = sorted(touched)
    _drop_documents(folder, documents, cold)
    _drop(memory, ordered, cold)
    removed = cold.embedder.discard(hashes) if cold is not None else _drop_cold(memory)
    shutil.rmtree(memory.workspace.state_dir / "tmp" / "duckdb", ignore_errors=True)

    # 3. destroy the keys, 4. record it (a learning's key exists only once it had feedback)
    named = {key_id(subject) for subject in subjects}
    gone = {kid for kid in sorted(kids) if sealer.forget_key(kid)}
    later: list[str] = []
    if user is not None:
        # a session the user started while this ran is the user's too: its key goes (its
        # records may be sealed under it alone), and its copies in step 5
        owners = memory.scopes.owners()
        later = sorted(s for s, o in owners.items() if o.user == user and s not in sessions)
        more = {key_id(f"session:{s}") for s in later}
        gone |= {kid for kid in sorted(more) if sealer.forget_key(kid)}
        named |= more
        sessions = sorted({*sessions, *later})
        ordered = sorted({*ordered, *later})
    destroyed = len(gone)
    kids = named | gone
    # counted now, not at the last reading: records appended since under the keys just
    # destroyed are forgotten too, and those an earlier forget made unreadable are not again
    forgotten = _newly_forgotten(memory, ordered, kids, unreadable)
    event = {
        "type": "forgotten",
        "subject": "user" if user is not None else "session",
        "name": user or session,
        "by": asker,
        "sessions": sessions,
        "keys": sorted(kids),
    }
    # appended without the facade's refold (which would follow the event at once): it is
    # marked followed here first, then step 5 refolds
    (stored,) = log.append_many(MEMORY_SESSION, [event], system=True)
    _mark_followed(memory, _locate(memory, stored.seq))
    memory.project(("hot", "learnings"), sessions=[MEMORY_SESSION], warn=False)

    # 5. drop again (a daemon may have folded them meanwhile) and fold them, now forgotten
    tiers = _purge(memory, ordered, cold)
    if cold is not None:
        removed += cold.embedder.discard(hashes)
        removed += cold.embedder.discard_owners(later)  # their texts were never read here
    shutil.rmtree(memory.workspace.state_dir / "tmp" / "duckdb", ignore_errors=True)
    return Forgotten(
        subject=event["subject"],
        name=event["name"],
        by=asker,
        sessions=sessions,
        keys_destroyed=destroyed,
        records_forgotten=forgotten,
        records_in_clear=in_clear,
        cache_entries_removed=removed,
        documents=documents,
        seconds=round(time.perf_counter() - started, 3),
        tiers=tiers,
    )


def _newly_forgotten(
    memory: Memory, sessions: list[str], kids: set[str], unreadable: dict[str, set[int]]
) -> int:
    """The records of ``sessions`` (and of the workspace log) sealed under one of ``kids``
    that cannot be read now, but for those that could not be read before (``unreadable``)."""
    log = memory.workspace.log
    count = 0
    listed = set(log.sessions())
    for name in sorted({*sessions, MEMORY_SESSION} & listed):
        before = unreadable.get(name, set())
        for located in log.read(name):
            kid = _sealed_kid(located.raw)
            if kid is None or kids.isdisjoint(kid_parts(kid)):
                continue
            if is_forgotten(located.record) and located.record.seq not in before:
                count += 1
    return count


def _asker(memory: Memory, by: str | None) -> str:
    """Who asks for the forget (recorded): ``by``, else the memory's user, else the login name;
    a name (``eventlog.names``) whichever it is."""
    if by is not None:
        return check_name(by, "by")
    if memory.scope.user is not None:
        return memory.scope.user
    return check_name(getpass.getuser(), "the login name (name who asks with --by)")


def _documents_folder(memory: Memory, user: str) -> Path:
    """``sources/users/USER/``, derived from the checked name; a link there (the folder or
    ``sources/users`` itself) is refused (``UnsafePathError``): a removal stays inside."""
    from projections.sources import USERS_FOLDER

    return name_folder(memory.workspace.sources_dir / USERS_FOLDER, user)


def _documents(memory: Memory, user: str, cold: Any, hashes: set[str]) -> list[str]:
    """The paths of the documents ``user`` owns under ``sources/`` (``projections.sources``),
    adding the cache keys of their indexed texts to ``hashes``."""
    from projections.embedding_cache import text_sha256
    from projections.sources import owned_sources, read_source
    from projections.units import source_units

    owned = owned_sources(memory.workspace.log, user)
    for path, event in owned.items():
        if cold is None or event.sha256 is None:
            continue
        if (text := read_source(memory.workspace.sources_dir, path, event.sha256)) is None:
            continue
        for unit in source_units(event, text):
            if (embedded := cold.policy.embedded_text(unit)) is not None:
                hashes.add(text_sha256(embedded))
    return sorted(owned)


def _drop_documents(folder: Path | None, paths: list[str], cold: Any) -> None:
    """Delete the user's ``folder`` under ``sources/`` (``_documents_folder``; None when a
    session is forgotten) and the cold rows of its documents (the next registration, in step
    5's fold, records their removal in the log)."""
    if folder is None:
        return
    folder = name_folder(folder.parent, folder.name)  # again, right before the removal
    if folder.is_dir():
        shutil.rmtree(folder)  # (rmtree removes a link inside, never what it points to)
    if cold is not None and paths and cold.store.open() is not None:
        from projections.cold import quote

        with cold.state_store.exclusive():
            for path in paths:
                cold.store.delete(f"source = {quote(path)}")


def _cold_projector(memory: Memory) -> Any:
    """The cold tier's projector, or None when its embedder cannot run here (the tier and
    the cache are then removed whole: ``_drop_cold``)."""
    if memory.embedder_problem() is not None:
        return None
    (cold,) = memory.workspace.projectors(("cold",))
    return cold


def _drop_cold(memory: Memory) -> int:
    """With no embedder to refold it, the cold tier and the embedding cache go whole (both
    are projections: ``project`` rebuilds them once the embedder runs); returns 0."""
    ws = memory.workspace
    shutil.rmtree(ws.layout.vectors_dir, ignore_errors=True)
    shutil.rmtree(ws.layout.tier_dir("cold"), ignore_errors=True)
    shutil.rmtree(ws.layout.caches_dir, ignore_errors=True)
    (ws.state_dir / "cold.manifest.json").unlink(missing_ok=True)
    # the record of the table's files goes with the table (``projections.cold``): kept, the
    # deep check would name each of them as missing
    ws.layout.tier_dir("cold").with_name("cold.files.json").unlink(missing_ok=True)
    return 0


def _tiers(cold: Any) -> list[str]:
    from airsspec.workspace import TIERS

    return [t for t in TIERS if t != "cold" or cold is not None]


def _drop(memory: Memory, sessions: list[str], cold: Any, *, always: bool = True) -> None:
    """Drop ``sessions`` from every tier; the cold table then keeps no old version, deletion
    file or index holding them (rebuilding its indexes is most of the cost: without
    ``always``, only when it held rows of them)."""
    held = always or _holds(cold, sessions)
    for projector in memory.workspace.projectors(tuple(_tiers(cold))):
        with projector.state_store.exclusive():
            for session in sessions:
                projector.state_store.drop(session)
    if held:
        _compact_cold(cold, reindex=True)


def _holds(cold: Any, sessions: list[str]) -> bool:
    """Whether the cold table has rows of ``sessions``."""
    from projections.cold import quote

    if cold is None or (table := cold.store.open()) is None or not sessions:
        return False
    return table.count_rows(f"session IN ({', '.join(quote(s) for s in sessions)})") > 0


def _purge(memory: Memory, sessions: list[str], cold: Any) -> list[str]:
    """Drop ``sessions`` from every tier and fold them again (forgotten records add nothing):
    a second drop, as a daemon may have folded them since the first."""
    tiers = _tiers(cold)
    _drop(memory, sessions, cold, always=False)
    memory.project(tuple(tiers), sessions=sessions, warn=False)
    _compact_cold(cold, reindex=False)  # the refold wrote versions of its own
    return tiers


def _compact_cold(cold: Any, *, reindex: bool) -> None:
    """Remove every old version of the cold table (they hold the rows just deleted), its
    record of files updated with what Lance removed (``ColdProjector.remove_old_versions``);
    with ``reindex``, its indexes rebuilt (the full-text index holds their words)."""
    if cold is not None:
        cold.remove_old_versions(reindex=reindex)


def follow(memory: Memory, *, fresh: bool = False) -> list[str]:
    """Apply here the ``forgotten`` events another machine appended since this one last looked
    (see the module); returns the sessions dropped and folded again. One ``stat`` when the
    workspace log has not grown; ``fresh`` first brings a bucket's copy of it up to date (a
    request), as a registration of documents needs. The refold after each event runs
    ``project``, whose own ``follow`` returns at once: the events are taken one after another,
    never one inside the refold of the other (hundreds would pass the recursion limit)."""
    active = _following.__dict__.setdefault("memories", set())
    if id(memory) in active:
        return []
    active.add(id(memory))
    try:
        return _follow(memory, fresh)
    finally:
        active.discard(id(memory))


def _follow(memory: Memory, fresh: bool) -> list[str]:
    from eventlog.layout import session_path

    if fresh:
        memory.workspace.log.head(MEMORY_SESSION)
    path = session_path(memory.workspace.log.log_dir, MEMORY_SESSION)
    mark = _read_mark(memory)
    try:
        if path.stat().st_size <= mark["offset"]:
            return []
    except FileNotFoundError:
        return []
    followed: list[str] = []
    try:
        for located in _read_from(memory, mark, mark["seq"] + 1):
            # (another thread or process may have followed it meanwhile)
            if located.record.type == "forgotten" and _read_mark(memory)["offset"] < located.end:
                if (problem := _unfollowable(located.record)) is not None:
                    logger.warning(
                        "forget event %s of the workspace log not followed: %s",
                        located.record.seq,
                        problem,
                    )
                else:
                    sessions, complete = _follow_one(memory, located)
                    followed += sessions
                    if not complete:  # followed again at the next read, from this event
                        break
            mark = {"seq": located.record.seq, "offset": located.end}
    except CorruptLogError as exc:  # named by status and verify; every other read goes on
        logger.warning("forget events not followed (the workspace log is damaged): %s", exc)
    if mark["offset"] > _read_mark(memory)["offset"]:
        _write_mark(memory, mark)
    return followed


def _read_from(memory: Memory, mark: dict[str, int], seq: int) -> Any:
    """The workspace log's records from ``seq`` on, read from ``mark`` (not from its start)."""
    return memory.workspace.log.read(
        MEMORY_SESSION, from_seq=seq, offset=mark["offset"], offset_seq=mark["seq"] + 1
    )


def _locate(memory: Memory, seq: int) -> Any:
    """The workspace log's record ``seq``, with where it is stored."""
    return next(iter(_read_from(memory, _read_mark(memory), seq)), None)


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


def _follow_one(memory: Memory, located: Any) -> tuple[list[str], bool]:
    """Drop what ``forget`` named (its sessions, the user's documents) from this machine's
    tiers and caches, mark the event followed, then fold the sessions again (forgotten).
    Returns the sessions and whether it was followed whole: a user's folder of documents
    behind a link is not removed (warned; the event is left unmarked, taken again once the
    link is gone), everything else is."""
    from projections.sources import owned_sources

    record = located.record
    cold = _cold_projector(memory)
    sessions = sorted({*record.sessions, MEMORY_SESSION})
    owners = list(sessions)
    complete = True
    if record.subject == "user":
        owned = owned_sources(memory.workspace.log, record.name)
        owners += [f"src:{path}" for path in owned]
        since = {  # registered after the forget, and present (not its removal, recorded then)
            path
            for path, event in owned.items()
            if event.seq > record.seq and event.sha256 is not None
        }
        try:
            _remove_documents(memory, record.name, since)
        except UnsafePathError as exc:
            complete = False
            logger.warning(
                "the documents of forgotten user %s are not removed here: %s; the forget is "
                "followed again once the link is gone",
                record.name,
                exc,
            )
    _drop(memory, sessions, cold, always=False)
    if cold is not None:
        cold.embedder.discard_owners(owners)
    else:  # as ``forget`` does: the cold files here (checkpoints, the cache) go whole
        _drop_cold(memory)
    shutil.rmtree(memory.workspace.state_dir / "tmp" / "duckdb", ignore_errors=True)
    if complete:
        _mark_followed(memory, located)
    _purge(memory, sessions, cold)
    return sessions, complete


def _remove_documents(memory: Memory, user: str, since: set[str]) -> None:
    """Remove ``user``'s folder under ``sources/`` (``_documents_folder``: links refused) as
    ``forget`` did where it ran, but for the documents registered after its event (``since``:
    added since, not forgotten; a follow run again, its mark lost, must not take them)."""
    sources = memory.workspace.sources_dir
    folder = _documents_folder(memory, user)
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


def _read_mark(memory: Memory) -> dict[str, int]:
    """Where ``follow`` resumes: the last record of the workspace log it read, and the byte
    just after it; the start when this machine never looked, or when the mark names no record
    of the log (it is derived state: damaged or edited, it is never trusted to skip one)."""
    try:
        mark = orjson.loads(read_nofollow(memory.workspace.layout.forgotten_path))
        seq, offset = mark["seq"], mark["offset"]
    except (OSError, ValueError, KeyError, TypeError):
        return {"seq": 0, "offset": 0}
    if type(seq) is not int or type(offset) is not int or not _ends_record(memory, seq, offset):
        return {"seq": 0, "offset": 0}
    return {"seq": seq, "offset": offset}


def _ends_record(memory: Memory, seq: int, offset: int) -> bool:
    """Whether the workspace log's line ending just before byte ``offset`` is record ``seq``
    (or both are 0: its start)."""
    from eventlog.layout import reader_nofollow, session_path

    if seq <= 0 or offset <= 0:
        return seq == offset == 0
    try:
        with reader_nofollow(session_path(memory.workspace.log.log_dir, MEMORY_SESSION)) as f:
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


def _write_mark(memory: Memory, mark: dict[str, int]) -> None:
    from projections.files import atomic_write

    atomic_write(memory.workspace.layout.forgotten_path, orjson.dumps(mark))


def _mark_followed(memory: Memory, located: Any) -> None:
    """Record ``located`` (a ``forgotten`` event) as followed here, unless the mark is past it."""
    if located is not None and _read_mark(memory)["offset"] < located.end:
        _write_mark(memory, {"seq": located.record.seq, "offset": located.end})


def _in_the_clear() -> ForgetError:
    return ForgetError(
        'content is not encrypted here ([privacy] encrypt = "off"): the log keeps it in '
        'the clear and cannot forget it; set encrypt = "user" or "session" first'
    )
