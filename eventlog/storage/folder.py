"""``FolderStore``: the storage protocol over a local folder, in ``EventLog``'s own files.

The same files, names and lock as ``EventLog``: ``{session}.jsonl`` grows by whole batches
written with ``O_APPEND`` under an exclusive ``flock`` on the file; a torn tail is quarantined
(``recovery``) before the end is read; ``{session}.head`` is rewritten in place after the
write. ``append`` is compare-and-append: under the lock, the file must still end where
``after`` says, else ``SeqTakenError`` and nothing is written. ``durable`` fdatasyncs before
``append`` returns (``EventLog``'s ``always``; its group commit stays in ``EventLog``, which
encodes under the lock and so never needs the retry).

Seals are kept in ``{folder}/seals/{name}``, created with ``O_EXCL``.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

from eventlog.errors import SealExistsError, SeqTakenError
from eventlog.heads import HEAD_SIZE, Head, decode_head_seq, encode_head, read_head
from eventlog.layout import (
    check_new_session,
    head_path,
    list_sessions,
    open_nofollow,
    quarantine_path,
    read_nofollow,
    session_path,
    validate_session_id,
)
from eventlog.recovery import TailState, recover


class FolderStore:
    """A ``SessionStore`` over ``folder`` (see the module)."""

    def __init__(self, folder: Path | str, *, durable: bool = True) -> None:
        self.folder = Path(folder)
        self.durable = durable

    @property
    def local_dir(self) -> Path:
        """The folder itself: it is the local layout."""
        return self.folder

    @contextmanager
    def _locked(self, session: str, *, create: bool) -> Iterator[int]:
        flags = os.O_RDWR | os.O_APPEND | (os.O_CREAT if create else 0)
        fd = open_nofollow(session_path(self.folder, session), flags)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield fd
        finally:
            os.close(fd)  # releases the lock

    def _tail(self, session: str, fd: int) -> TailState:
        raw = b""
        with suppress(FileNotFoundError):
            raw = read_nofollow(head_path(self.folder, session))[:HEAD_SIZE]
        state, _ = recover(
            fd,
            session_path(self.folder, session),
            quarantine_path(self.folder, session),
            acknowledged=decode_head_seq(raw),
        )
        return state

    def tail(self, session: str) -> TailState:
        """The end of the session's file (a torn tail quarantined first)."""
        validate_session_id(session)
        if not session_path(self.folder, session).exists():
            return TailState(0, 0, None)
        with self._locked(session, create=False) as fd:
            return self._tail(session, fd)

    def append(self, session: str, after: TailState, data: bytes) -> None:
        """Write ``data`` if the file still ends at ``after`` (under the lock)."""
        path = session_path(self.folder, session)
        if after.seq == 0:
            self.folder.mkdir(parents=True, exist_ok=True)
            if not path.exists():
                self.claim(session)
        with self._locked(session, create=after.seq == 0) as fd:
            if self._tail(session, fd) != after:
                raise SeqTakenError(f"{path}: another writer appended after seq {after.seq}")
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            if self.durable:
                os.fdatasync(fd)

    def read_bytes(self, session: str, start: int = 0) -> bytes:
        """The file's bytes from ``start``."""
        try:
            with open(session_path(self.folder, session), "rb") as f:
                f.seek(start)
                return f.read()
        except FileNotFoundError:
            return b""

    def sessions(self) -> list[str]:
        """Sessions with a log file."""
        return list_sessions(self.folder)

    def head(self, session: str) -> Head | None:
        """The head file's seq and hash."""
        return read_head(self.folder, session)

    def set_head(self, session: str, seq: int, digest: str) -> bool:
        """Rewrite the head file in place unless it already names a later seq (writers on
        one folder share its lock, never starve: always False)."""
        fd = open_nofollow(head_path(self.folder, session), os.O_RDWR | os.O_CREAT)
        try:
            if decode_head_seq(os.pread(fd, HEAD_SIZE, 0)) < seq:
                os.pwrite(fd, encode_head(session, seq, digest), 0)
        finally:
            os.close(fd)
        return False

    def claim(self, session: str) -> None:
        """Refuse an id equal, ignoring case, to an existing session's (as ``EventLog``)."""
        check_new_session(self.folder, validate_session_id(session))

    def put_seal(self, name: str, data: bytes) -> None:
        """Write ``seals/{name}`` with ``O_EXCL``."""
        folder = self.folder / "seals"
        folder.mkdir(parents=True, exist_ok=True)
        try:
            fd = os.open(folder / validate_session_id(name), os.O_WRONLY | os.O_CREAT | os.O_EXCL)
        except FileExistsError as exc:
            raise SealExistsError(f"{folder / name}: a seal of that name exists") from exc
        try:
            os.write(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)

    def get_seal(self, name: str) -> bytes:
        """The bytes of ``seals/{name}``."""
        return read_nofollow(self.folder / "seals" / validate_session_id(name))

    def sync(self, sessions: list[str] | None = None, *, full: bool = False) -> None:
        """Nothing to do: the folder is the store."""

    def close(self) -> None:
        """Nothing is kept open between calls."""
