"""``ObjectStoreLog``: the event log over a ``SessionStore`` (an S3 bucket, or a folder).

It takes and gives what ``EventLog`` does (``append_many``, ``read``, ``sessions``, ``head``,
``info``, ``recover``, ``log_dir``), so ``verify``, seals, the projectors and the commands run
on it unchanged. Events are validated, redacted and encoded exactly as ``EventLog`` does
(``bodies_to_append``, ``encode_batch``), so a session's bytes are the same.

Append is optimistic: read the tail, encode the batch chained to it, ``store.append``; when
another writer took that seq (``SeqTakenError``), read the new tail and encode again (new
``seq``, ``prev`` and time; the same ids). An append returns once the store acknowledged the
batch (a bucket's PUT is durable when it returns, so ``durability`` has no further say); the
head is advanced after. Readers read the store's local layout (``store.local_dir``): the
folder, or the bucket's read-through cache, brought up to date first.
"""

from __future__ import annotations

import random
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from eventlog.canonical import encode_batch
from eventlog.errors import (
    CorruptLogError,
    SeqTakenError,
    SessionExistsError,
    SessionMovedError,
    StorageError,
)
from eventlog.ids import new_event_ids, utc_now
from eventlog.layout import session_path, validate_session_id
from eventlog.log import (
    AppendFlags,
    Appends,
    Located,
    Reads,
    StoredRecords,
    _SessionReader,
    _unsealed,
)
from eventlog.overrides import override
from eventlog.prepare import bodies_to_append
from eventlog.recovery import TailState
from eventlog.schema import SCHEMA_VERSION, Event
from eventlog.secrets import Redactor
from eventlog.storage import SessionStore

if TYPE_CHECKING:
    from eventlog.crypto import Sealer

_MAX_ATTEMPTS = 10_000  # a writer loses only to another's success: this bounds a livelock
# For this long after another writer was seen on a session, an append first reads the newest
# end instead of trusting its own: a writer whose last append won would otherwise keep winning
# (its tail is current, the losers' must be fetched), starving the others.
_CONTENDED_S = 1.0


class ObjectStoreLog(Appends, Reads):
    """Append to and read from the sessions of ``store`` (see the module)."""

    def __init__(
        self,
        store: SessionStore,
        *,
        redactor: Redactor | None = None,
        sealer: Sealer | None = None,
    ) -> None:
        self.store = store
        self.redactor = redactor
        self.sealer = sealer  # eventlog.crypto: sealed at append, opened at read (as EventLog)
        self._tails: dict[str, TailState] = {}
        self._synced = False
        self._contended: dict[str, float] = {}  # session -> when another writer was last seen
        self._last_append_s = 0.0  # how long the last append took (the pause under contention)
        self.conflicts = 0  # appends that lost a race and were re-chained (for benchmarks)

    @property
    def log_dir(self) -> Path:
        """The sessions in the local layout, fully synced with the store on first use (what
        ``verify`` and the projectors read)."""
        if not self._synced:
            self.store.sync(full=True)
            self._synced = True
        return self.store.local_dir

    def __enter__(self) -> ObjectStoreLog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Release the store."""
        self.store.close()

    def flush(self) -> None:
        """Nothing to do: an append returns once the store acknowledged it."""

    # ----------------------------------------------------------------- append

    @override
    def _append_batch(
        self, session: str, events: Iterable[Event | dict[str, Any]], flags: AppendFlags
    ) -> StoredRecords:
        """One object: all or none. ``flags.new``: only as the session's first object, a
        create-only claim of seq 1; ``flags.after``: only as the object after seq ``after``,
        a create-only claim of the next seq."""
        system, keep_secrets, imported, new, after = flags
        validate_session_id(session)
        bodies, clear = bodies_to_append(self, session, events, system, keep_secrets, imported)
        if not bodies:
            return StoredRecords([], [])
        ids = new_event_ids(len(bodies))
        started = time.monotonic()
        tail = self._tails.get(session)
        if new or after is not None:
            tail = self._first_tail(session)  # the newest end, not a remembered one
            if new and tail.seq:
                raise SessionExistsError(session)
            if after is not None and tail.seq != after:
                raise SessionMovedError(session, after, tail.seq)
        elif tail is None:
            tail = self._first_tail(session)
        elif time.monotonic() - self._contended.get(session, -_CONTENDED_S) < _CONTENDED_S:
            # Others write here too. Give a writer that lost the last round the time to fetch
            # what it lost to (about one append), then start from the newest end.
            time.sleep(random.uniform(0, min(self._last_append_s, 0.05)))
            tail = self.store.tail(session)
        for _ in range(_MAX_ATTEMPTS):
            if clear is not None and self.sealer is not None:  # for the owner it lands after
                bodies = self.sealer.sealed_now(session, tail.size, bodies, clear)
            stored, lines, hashes = encode_batch(
                bodies, SCHEMA_VERSION, session, tail.seq, utc_now(), ids, tail.hash
            )
            try:
                self.store.append(session, tail, lines)
                if self.sealer is not None:
                    self.sealer.owners.appended(session, tail.size, lines)
                break
            except SeqTakenError as taken:
                if new:  # another writer created it first: theirs is the session
                    raise SessionExistsError(session) from taken
                if after is not None:  # another writer took the seq after ``after``
                    last = taken.tail.seq if taken.tail else self.store.tail(session).seq
                    raise SessionMovedError(session, after, last) from taken
                self.conflicts += 1
                self._contended[session] = time.monotonic()
                tail = taken.tail or self.store.tail(session)
        else:
            raise StorageError(f"{session}: no seq could be taken in {_MAX_ATTEMPTS} attempts")
        end = TailState(
            tail.size + len(lines), tail.seq + len(bodies), hashes[-1], stored[-1]["ts"]
        )
        self._tails[session] = end
        self._last_append_s = time.monotonic() - started
        if self.store.set_head(session, end.seq, hashes[-1]):
            self._contended[session] = time.monotonic()
        if clear is not None:  # the caller gets what it appended, opened
            stored = [_unsealed(s, c) for s, c in zip(stored, clear, strict=True)]
        return StoredRecords(stored, hashes)

    def _first_tail(self, session: str) -> TailState:
        """The tail, checked against the stored head (once per session, and by every append
        that reads the newest end: ``new``, ``after``): a head past the last record means
        records were removed, and appending would fill the cut with new ones."""
        head = self.store.head(session)  # first: a head read after the tail could be newer
        tail = self.store.tail(session)
        if head is not None and head.seq > tail.seq:
            raise CorruptLogError(
                session_path(self.store.local_dir, session),
                seq=tail.seq + 1,
                offset=tail.size,
                reason=f"the log ends at seq {tail.seq}, but its head names seq {head.seq}: "
                "records were removed from the end (nothing was appended; run verify)",
            )
        return tail

    # ----------------------------------------------------------------- read

    def sessions(self) -> list[str]:
        """Sessions with records, sorted; their cached layout is brought up to date too (a
        long-running reader, such as a projector's catch-up, lists them first)."""
        names = self.store.sessions()
        self.store.sync(names)
        return names

    def has(self, session: str) -> bool:
        """Whether ``session`` (a valid id) has records in the store."""
        return validate_session_id(session) in self.store.sessions()

    def head(self, session: str) -> TailState:
        """The session's last record now (seq 0 when it has none)."""
        validate_session_id(session)
        return self.store.tail(session)

    def recover(self, session: str) -> int:
        """Bring the session's cached layout up to date; nothing is ever torn in a store whose
        objects are whole, so no byte is quarantined (returns 0)."""
        self.store.sync([session])
        return 0

    @override
    def _session_file(self, session: str) -> Path:
        return session_path(self.store.local_dir, session)

    @override
    def _read_file(
        self, session: str, offset: int, offset_seq: int, from_seq: int, plain: bool
    ) -> Iterator[Located]:
        """The records (``Reads.read``), from the store's layout brought up to date first."""
        self.store.tail(session)
        path = self._session_file(session)
        if path.exists():
            reader = _SessionReader(path, session, offset, offset_seq, from_seq, plain)
            yield from self._opened(reader)
