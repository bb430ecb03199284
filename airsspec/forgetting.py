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
5. once every key read before 3 has expired where another process keeps it, drops the
   sessions again (a daemon may have folded them since 2) and folds them
   (their records now read ``[forgotten]``: no units, no learnings), then removes the cold
   table's new old versions. Running ``forget`` again after a crash completes it.

Other subjects' records, summaries and recall are untouched (each tier refolds only the
sessions named). Parquet written by ``export parquet`` reads the stored lines, so it holds
ciphertext only, never content.

Every other machine sharing the log (``[storage] url``) follows the event at its next catch-up
(``airsspec.kernel.purge.follow``, which also holds the purge both use). Its keys were destroyed
where they are shared (the bucket's key store), so nothing of the subject is read again.
"""

from __future__ import annotations

import shutil
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from airsspec.errors import ForgetError, ScopeError
from airsspec.kernel.purge import (
    clear_spill,
    cold_projector,
    documents_folder,
    drop,
    drop_cold,
    locate,
    mark_followed,
    purge,
)
from eventlog.crypto import (
    CONTENT_FIELDS,
    DROPPED_FIELDS,
    KEY_RECHECK_SECONDS,
    is_forgotten,
    key_id,
    kid_parts,
    learning_subject,
)
from eventlog.names import check_name, name_folder
from eventlog.owners import OWNING_TYPES
from eventlog.schema import MEMORY_SESSION, LearningRecord

if TYPE_CHECKING:
    from airsspec.kernel import Kernel
    from eventlog.log import Log


KEPT_KEY_SECONDS = KEY_RECHECK_SECONDS
"""How long another process that stays open keeps a key it read (``eventlog.crypto``)."""


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
    # theirs, sealed under the key alone of a session since given to another user (written
    # with encrypt = "session"): that key is kept for the new owner, so these stay readable
    records_kept: int = 0
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


def _owner_after(record: Any, owner: str | None) -> str | None:
    """The user owning a session from ``record`` on, ``owner`` before it (``OWNING_TYPES``:
    its first start naming a user, then each assignment)."""
    named = getattr(record, "user", None) if record.type in OWNING_TYPES else None
    return named if named and (record.type == "session_assigned" or owner is None) else owner


def _kept_for_others(log: Log, session: str, user: str, mine: str, owners: tuple[str, ...]) -> bool:
    """Whether ``session`` (``user``'s now) keeps its key when ``user`` is forgotten: it holds
    content appended while it was not theirs (before they were given it: another user's, or
    the team's), and everything appended while it was theirs is sealed under a key nested in
    theirs, so destroying their key forgets it all. Else their forget destroys it as ever.
    ``owners``: every user that owned it (``Owners.ever``)."""
    owner: str | None = None
    others = False
    only_theirs = owners == (user,)  # no assignment to anyone else, ever
    for located in log.read(session):
        record = located.record
        owner = _owner_after(record, owner)
        if only_theirs and owner == user and not others:
            return False  # theirs from its first record on: nothing to read further
        if not _has_content(record):
            continue
        if owner != user:
            others = True
            continue
        kid = _sealed_kid(located.raw)
        if kid is None or mine not in kid_parts(kid):
            return False  # theirs, shredded only with the session's own key
    return others


def forget(
    kernel: Kernel, *, user: str | None = None, session: str | None = None, by: str | None = None
) -> Forgotten:
    """Forget ``user`` (every session it owns, and what it added outside one) or ``session``
    (see the module); a scoped memory may forget only itself or a session it may write to
    (the access gate), and a read-only one nothing."""
    started = time.perf_counter()
    if (user is None) == (session is None):
        raise ForgetError("name one subject to forget: a user or a session")
    kernel.gate.writable()
    # names are values, never paths: checked before anything is read or changed, and the
    # user's folder of documents derived inside sources/users/ with links refused
    asker = kernel.asker(by)  # who asks, recorded
    folder = None if user is None else documents_folder(kernel, check_name(user, "user"))
    log = kernel.log
    sealer = log.sealer
    if sealer is None:
        raise _in_the_clear()
    if user is not None:
        if not kernel.gate.admin and kernel.scope.user != user:
            raise ScopeError(f"a memory scoped to {kernel.scope} cannot forget user {user}")
        owners = kernel.gate.owners()
        theirs = sorted(s for s, owner in owners.items() if owner.user == user)
        # a session given to them holding what others wrote before it was theirs (another
        # user, or the team) is purged and folded again, as one they gave away, its key kept:
        # their own records there go with their key (``_kept_for_others``)
        user_kid = key_id(f"user:{user}")
        received = [
            s for s in theirs if _kept_for_others(log, s, user, user_kid, sealer.owners.ever(s))
        ]
        sessions = [s for s in theirs if s not in received]
        subjects = [f"user:{user}", *(f"session:{s}" for s in sessions)]
        owned = None
        # a session of theirs an admin gave to another user keeps what they wrote there sealed
        # under their key (a record is sealed for the user owning its session when it is
        # appended): it is forgotten with them, so its derived copies are purged and folded
        # again, keeping what the new owner wrote (its own key stays: the session is someone
        # else's); looked for among every session, not those their scope reads: forgetting
        # themselves, the session now another's holds their words all the same
        given: list[str] = sorted(
            {
                *received,
                *(
                    s
                    for s, owner in kernel.gate.all_owners().items()
                    if owner.user not in (None, user)
                    and s != MEMORY_SESSION
                    and user in sealer.owners.ever(s)
                ),
            }
        )
    else:
        assert session is not None
        kernel.check_session(session)
        kernel.gate.guard_writes(session)  # the team's session is not a user's to shred
        owned = kernel.gate.owner(session).user
        sessions = [session]
        subjects = [f"session:{session}"]
        given = []
        user_kid = ""  # no user's records are counted apart
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
    in_clear = kept = 0
    touched = {*sessions, *given}
    unreadable: dict[str, set[int]] = {}  # seqs an earlier forget made unreadable already
    for name in [*sessions, *given, MEMORY_SESSION]:
        if not log.has(name):
            continue
        owner: str | None = None
        for located in log.read(name):
            owner = _owner_after(located.record, owner)
            kid = _sealed_kid(located.raw)
            mine = kid is not None and not kids.isdisjoint(kid_parts(kid))
            if name == MEMORY_SESSION and not mine:
                continue
            if kid is not None and kid == whole_user and name != MEMORY_SESSION:
                only_user += 1
            touched.add(name)
            if is_forgotten(located.record):
                unreadable.setdefault(name, set()).add(located.record.seq)
            if isinstance(located.record, LearningRecord):
                # what was said of it (a verdict's reason) is sealed under its own key; it
                # follows its learning (a learning precedes its feedback in the reading order)
                kids.add(key_id(learning_subject(located.record.learning_id)))
            if (
                kid is None
                and _has_content(located.record)
                and (name not in given or owner == user)
            ):
                in_clear += 1  # (what others wrote in a session given away or to them is theirs)
            elif (
                kid is not None
                and name in given
                and owner == user
                and user_kid not in kid_parts(kid)
                and _has_content(located.record)
            ):
                kept += 1
            units.extend(record_units(located.record))

    if only_user:
        raise ForgetError(
            f"{only_user} record(s) of session {session!r} were sealed under the key of user "
            f"{owned} alone (written before session keys were nested in user keys): destroying "
            f"that key would forget every session of {owned}. Nothing was changed; forget the "
            f"user ('forget --user {owned}'), or keep the session"
        )
    cold = cold_projector(kernel)
    hashes: set[str] = set()
    if cold is not None:
        from projections.embedding_cache import text_sha256

        embedded = (cold.policy.embedded_text(unit) for unit in units)
        hashes = {text_sha256(text) for text in embedded if text is not None}
    documents = _documents(kernel, user, cold, hashes) if user is not None else []
    unknown = sealer.keys.key(key_id(subjects[0]), create=False) is None
    if user is not None and not sessions and not given and not documents and unknown:
        raise ForgetError(f"nothing is recorded for user {user!r}")

    # 2. drop every derived copy while the keys still exist: a crash past step 3 then leaves
    #    nothing in the clear that a later ``project`` would not fold again as forgotten
    ordered = sorted(touched)
    _drop_documents(folder, documents, cold)
    drop(kernel, ordered, cold)
    removed = cold.embedder.discard(hashes) if cold is not None else drop_cold(kernel)
    clear_spill(kernel)

    # 3. destroy the keys, 4. record it (a learning's key exists only once it had feedback)
    named = {key_id(subject) for subject in subjects}
    gone = {kid for kid in sorted(kids) if sealer.forget_key(kid)}
    later: list[str] = []
    if user is not None:
        # a session the user started while this ran is the user's too: its key goes (its
        # records may be sealed under it alone), and its copies in step 5
        owners = kernel.gate.owners()
        later = sorted(s for s, o in owners.items() if o.user == user and s not in theirs)
        more = {key_id(f"session:{s}") for s in later}
        gone |= {kid for kid in sorted(more) if sealer.forget_key(kid)}
        named |= more
        sessions = sorted({*sessions, *later})
        ordered = sorted({*ordered, *later})
    sessions = sorted({*sessions, *given})
    destroyed = len(gone)
    destroyed_at = time.monotonic()
    kids = named | gone
    # counted now, not at the last reading: records appended since under the keys just
    # destroyed are forgotten too, and those an earlier forget made unreadable are not again
    forgotten = _newly_forgotten(kernel, ordered, kids, unreadable)
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
    mark_followed(kernel, locate(kernel, stored.seq))
    kernel.written("system", MEMORY_SESSION)

    # 5. drop again (a daemon may have folded them meanwhile) and fold them, now forgotten;
    #    only once no process can still open them with a key it read before step 3
    _outlive_kept_keys(sealer, destroyed_at)
    tiers = purge(kernel, ordered, cold)
    if cold is not None:
        removed += cold.embedder.discard(hashes)
        removed += cold.embedder.discard_owners(later)  # their texts were never read here
    clear_spill(kernel)
    return Forgotten(
        subject="user" if user is not None else "session",
        name=user or session or "",
        by=asker,
        sessions=sessions,
        keys_destroyed=destroyed,
        records_forgotten=forgotten,
        records_in_clear=in_clear,
        records_kept=kept,
        cache_entries_removed=removed,
        documents=documents,
        seconds=round(time.perf_counter() - started, 3),
        tiers=tiers,
    )


def _outlive_kept_keys(sealer: Any, destroyed_at: float) -> None:
    """Wait until every key read before ``destroyed_at`` has expired wherever it is kept:
    a process that stays open (``watch``, a server) keeps a key for
    ``KEPT_KEY_SECONDS``, a bucket's key store on every machine for its ``recheck``. A
    fold such a process makes after the last drop would otherwise open the records with
    it, and the refold, finding the sessions current, would keep what it wrote."""
    kept = max(KEPT_KEY_SECONDS, float(getattr(sealer.keys, "recheck", 0.0)))
    remaining = destroyed_at + kept - time.monotonic()
    if remaining > 0:
        time.sleep(remaining)


def _newly_forgotten(
    kernel: Kernel, sessions: list[str], kids: set[str], unreadable: dict[str, set[int]]
) -> int:
    """The records of ``sessions`` (and of the workspace log) sealed under one of ``kids``
    that cannot be read now, but for those that could not be read before (``unreadable``)."""
    log = kernel.log
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


def _documents(kernel: Kernel, user: str, cold: Any, hashes: set[str]) -> list[str]:
    """The paths of the documents ``user`` owns under ``sources/`` (``projections.sources``),
    adding the cache keys of their indexed texts to ``hashes``."""
    from projections.embedding_cache import text_sha256
    from projections.sources import owned_sources, read_source
    from projections.units import source_units

    owned = owned_sources(kernel.log, user)
    for path, event in owned.items():
        if cold is None or event.sha256 is None:
            continue
        if (text := read_source(kernel.workspace.sources_dir, path, event.sha256)) is None:
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


def _in_the_clear() -> ForgetError:
    return ForgetError(
        'content is not encrypted here ([privacy] encrypt = "off"): the log keeps it in '
        'the clear and cannot forget it; set encrypt = "user" or "session" first'
    )
