"""Who owns each session, as the log says: what ``eventlog.crypto`` seals a record for.

With ``[privacy] encrypt = "user"`` a session's records are sealed under a key of the user owning
the session when each record lands in the log: the first ``session_started`` naming a user, then
each ``session_assigned`` (an admin gave the session to another user). Those fields are never
sealed, so the owners are read from the stored lines, incrementally. Invariants: a batch is
sealed for the owner it lands after (checked again under the session's lock: ``moved``); what a
batch being sealed names counts only once it is written; lines read and then cut off (a torn
tail, a failed write) are never taken for the log's.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

import orjson


class Owners(Protocol):
    """Who owns each session: ``mode = "user"`` seals a session's records under the key of the
    user owning it when they are appended (``SessionOwners`` reads it from the log)."""

    def now(self, session: str) -> str | None:
        """The user owning ``session`` now (None: no user)."""
        ...

    def ever(self, session: str) -> tuple[str, ...]:
        """Every user that has owned ``session``, the first first."""
        ...

    def remember(self, session: str, user: str, *, assigned: bool) -> None:
        """A batch being sealed starts ``session`` for ``user`` (``assigned``: gives it to
        ``user``); its next records are sealed for that user."""
        ...

    def unlearn(self, session: str) -> None:
        """Forget what ``remember`` was told of ``session`` (its batch was refused)."""
        ...

    def moved(self, session: str, size: int) -> bool:
        """Whether ``session``'s owner may have changed since its records were last sealed:
        an owning record another writer appended that this process had not read, in the
        ``size`` bytes its file holds (asked under the session's lock, before a sealed batch
        is written). When it may have, what ``remember`` was told of the batch is dropped:
        the batch is sealed again."""
        ...

    def appended(self, session: str, start: int, data: bytes) -> None:
        """This process wrote ``data`` at byte ``start`` of ``session``'s file (a batch whose
        owners it remembered while sealing it): nothing there is to be read again."""
        ...


class NoOwners:
    """No session has an owner (a sealer of ``mode = "session"``, or one that only opens)."""

    def now(self, session: str) -> str | None:
        return None

    def ever(self, session: str) -> tuple[str, ...]:
        return ()

    def remember(self, session: str, user: str, *, assigned: bool) -> None:
        return None

    def unlearn(self, session: str) -> None:
        return None

    def moved(self, session: str, size: int) -> bool:
        return False

    def appended(self, session: str, start: int, data: bytes) -> None:
        return None


OWNING_TYPES = ("session_started", "session_assigned")
"""Types that name a session's owner (``Owners``): the first ``session_started`` naming a user,
then each ``session_assigned`` (an admin gave the session to another user)."""


OWNER_RECHECK_SECONDS = 0.05
"""How long a process seals a session's records for the owner it read without reading the
session's new lines again before sealing (reading at every append would halve the rate of
single appends); under the session's lock, ``moved`` then reads what other writers appended
since, so a batch lands sealed for the owner it follows (``eventlog.crypto.Sealer.sealed_now``)."""


class SessionOwners:
    """Who owns each session (``Owners``), read from the stored lines (those fields are never
    sealed): the first ``session_started`` naming a user, then each ``session_assigned``. Each
    session's file is read once, then only past what was read: ``ever`` at each call, ``now``
    once ``OWNER_RECHECK_SECONDS`` have passed (an assignment this process appends is known at
    once), ``moved`` when the file is longer than what was read (this process's own batches are
    read past: ``appended``). Lines read outside the session's lock may be cut off after (a torn
    tail quarantined, a failed write truncated): the file is read again from its start when the
    line that ended what was read is no longer there (its hash names all before it). The owners
    a batch being sealed names are kept apart from those read until it is written: a start
    another writer wrote first makes the session theirs, not the batch's."""

    def __init__(self, log_dir: Path, fetch: Callable[[str], None] | None = None) -> None:
        self.log_dir = log_dir
        # on a bucket, ``log_dir`` is its cache: ``fetch`` brings a session's records there
        # before this process first seals for it
        self.fetch = fetch
        self._owners: dict[str, list[str]] = {}  # every user that owned each session, in order
        self._scanned: dict[str, int] = {}  # bytes read of each session's file
        self._marks: dict[str, bytes] = {}  # the last bytes read of each (its last line's hash)
        self._checked: dict[str, float] = {}  # when each session's file was last read
        # what the batch being sealed of each session names (user, assigned), until written
        self._pending: dict[str, list[tuple[str, bool]]] = {}

    def now(self, session: str) -> str | None:
        checked = self._checked.get(session)
        if checked is None or time.monotonic() - checked >= OWNER_RECHECK_SECONDS:
            self._read(session, fetch=checked is None)
        owners = self._with_pending(session)
        return owners[-1] if owners else None

    def ever(self, session: str) -> tuple[str, ...]:
        # from the records as read (on a bucket, its cache as the caller's reads synced it: a
        # fetch per session would be a request each for every session ``forget`` looks at)
        self._read(session)
        return tuple(self._with_pending(session))

    def remember(self, session: str, user: str, *, assigned: bool) -> None:
        # the owners the file holds first: an assignment learnt before they were read would
        # stand for the session's whole history (its first owner missing from ``ever``)
        if session not in self._checked:
            self._read(session, fetch=True)
        self._pending.setdefault(session, []).append((user, assigned))

    def unlearn(self, session: str) -> None:
        self._owners.pop(session, None)
        self._scanned.pop(session, None)
        self._marks.pop(session, None)
        self._checked.pop(session, None)
        self._pending.pop(session, None)

    def moved(self, session: str, size: int) -> bool:
        if self._scanned.get(session) == size:  # read to its end already: one lookup
            return False
        known = list(self._with_pending(session))
        self._read(session)
        if self._with_pending(session) == known:
            return False
        self._pending.pop(session, None)  # sealed again: its owners are remembered again
        return True

    def appended(self, session: str, start: int, data: bytes) -> None:
        pending = self._pending.get(session)
        if self._scanned.get(session) == start and data:  # read up to this batch: on past it
            self._scanned[session] = start + len(data)
            self._marks[session] = data[-_MARK:]
            if pending:
                self._owners[session] = self._with_pending(session)
        # else its lines are read from the file, after those of other writers before them
        self._pending.pop(session, None)

    def _with_pending(self, session: str) -> list[str]:
        """The owners read of ``session``, then those its batch being sealed names (a start
        counts only in a session no one owned before)."""
        owners = self._owners.get(session, [])
        pending = self._pending.get(session)
        if not pending:
            return owners
        found = list(owners)
        for user, assigned in pending:
            if assigned or not found:  # read again from its line, the owner is only repeated
                found.append(user)
        return found

    def _read(self, session: str, *, fetch: bool = False) -> list[str]:
        from eventlog.layout import reader_nofollow, session_path

        if fetch and self.fetch is not None:
            self.fetch(session)
        owners = self._owners.setdefault(session, [])
        start = self._scanned.get(session, 0)
        mark = self._marks.get(session, b"")
        self._checked[session] = time.monotonic()
        try:
            with reader_nofollow(session_path(self.log_dir, session)) as f:
                size = os.fstat(f.fileno()).st_size
                f.seek(start - len(mark))
                data = f.read(max(size - start, 0) + len(mark))
                if not data.startswith(mark):  # what was read is cut off: read it all again
                    owners.clear()
                    start, mark = 0, b""
                    f.seek(0)
                    data = f.read(size)
        except FileNotFoundError:
            return owners
        data = data[len(mark) :]
        end = data.rfind(b"\n") + 1
        if b'"session_assigned"' in data or (not owners and b'"session_started"' in data):
            for line in data[:end].splitlines():
                if b'"session_started"' not in line and b'"session_assigned"' not in line:
                    continue
                body = orjson.loads(line)
                user, kind = body.get("user"), body.get("type")
                if not user or not isinstance(user, str) or kind not in OWNING_TYPES:
                    continue
                if kind == "session_assigned" or not owners:
                    owners.append(user)
        self._scanned[session] = start + end
        if end:
            self._marks[session] = (mark + data[:end])[-_MARK:]
        return owners


_MARK = 80
"""Bytes kept of the end of what ``SessionOwners`` read of a file: its last line's hash, which
covers every line before it."""
