"""``StateIndex``: what every read asks of each session's saved state, in one file.

Some reads want one small value from every session's state (the learnings' owner of each
session, the library files each warm state lists): a new process would open and parse every
state file for them, 100 files for 100 sessions, on each command. An index keeps, beside the
states (``{tier}.{name}.json``), each session's value with the identity (size, mtime, inode)
of the state file it was read from: a value whose state file still has that identity is taken
from the index; any other is read from its state, and the index written again. An entry that is
damaged or written by hand fails ``valid`` and is read again from its state, never trusted.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Collection
from pathlib import Path
from typing import Any

import orjson

from eventlog.layout import read_nofollow
from projections.files import ParsedOnce, atomic_write

# each index as parsed, once while its file is unchanged
_PARSED: ParsedOnce[dict[str, list[Any]]] = ParsedOnce()

FOLLOW_AT = 8
"""Entries read from states that wait before an index is written again (``StateIndex.follow``)."""

# each index's path -> the entries read from states since it was last written
_PENDING: dict[str, dict[str, list[Any]]] = {}


class StateIndex:
    """The index at ``path``: session -> ``[state identity, value]``, each value ``valid``."""

    def __init__(self, path: Path, valid: Callable[[object], bool]) -> None:
        self.path = path
        self.valid = valid

    def read(self) -> dict[str, list[Any]]:
        """The entries (shared: never changed by a caller); empty when the file is missing
        or unreadable."""
        try:
            return _PARSED.get(self.path, self._parse)
        except (OSError, ValueError):
            return {}

    def write(self, entries: dict[str, list[Any]]) -> None:
        """Replace the entries; in a read-only folder the states are read again next time."""
        if entries != self.read():
            with contextlib.suppress(OSError):
                atomic_write(self.path, orjson.dumps(entries, option=orjson.OPT_SORT_KEYS))

    def wait(self, read: dict[str, list[Any]]) -> None:
        """Keep ``read`` (entries just read from states) for the next ``follow``."""
        _PENDING.setdefault(str(self.path), {}).update(read)

    def follow(self, read: dict[str, list[Any]], current: Callable[[str], object]) -> None:
        """Take ``read`` and what waits (``wait``) into the index. Written again once
        ``FOLLOW_AT`` wait (or when there is no index yet): a new process reads the few still
        waiting from their states, and a server, which reads back each session it changes,
        does not write an index of every session after each change. Only entries whose
        identity is ``current(session)``'s, the state file's now, are written: one whose
        state was dropped since (forgotten, its log gone, by this process or another) or
        replaced is left out, so no value outlives its state in the index."""
        self.wait(read)
        pending = _PENDING[str(self.path)]
        if len(pending) < FOLLOW_AT and self.path.exists():
            return
        merged = {**self.read(), **pending}
        pending.clear()
        self.write({s: e for s, e in merged.items() if e[0] is not None and e[0] == current(s)})

    def purge(self, sessions: Collection[str]) -> None:
        """Drop ``sessions``' entries (``forget``: the index names them no longer)."""
        pending = _PENDING.get(str(self.path), {})
        for session in sessions:
            pending.pop(session, None)
        index = self.read()
        if index.keys() & set(sessions):
            self.write({s: entry for s, entry in index.items() if s not in sessions})

    def remove(self) -> None:
        """Delete the index, and what waits to be written to it (a reset: every state goes)."""
        _PENDING.pop(str(self.path), None)
        self.path.unlink(missing_ok=True)

    def _parse(self) -> dict[str, list[Any]]:
        data = orjson.loads(read_nofollow(self.path))
        if not isinstance(data, dict):
            return {}
        return {
            s: v
            for s, v in data.items()
            if isinstance(v, list) and len(v) == 2 and _is_identity(v[0]) and self.valid(v[1])
        }


def _is_identity(value: object) -> bool:
    return isinstance(value, list) and all(type(n) is int for n in value)
