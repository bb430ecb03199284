"""Projector states shared on a bucket: ``BucketStore``, a ``StateStore`` for machines that
project one log kept in an object store (``[storage] url``).

Each machine folds into its own folder (a ``FileStateStore``: what its readers open), and
publishes each saved state file (the cold tier: each checkpoint, whose rows are in the table
on the bucket already), byte for byte, to ``projections/{tier}/{file}`` on the bucket,
so a machine that starts later (or lost its folder) resumes from the furthest checkpoint any
machine published instead of folding from zero. Invariants:

- A state is written to the local folder first, then published with a conditional PUT: on the
  ETag this machine last read or wrote (``If-Match``), or create-only (``If-None-Match: *``)
  when it saw none. Of two machines publishing over one version, exactly one wins; nothing is
  ever overwritten unseen, so a published object is always a whole state file some fold wrote.
- The loser reads the winner's object: a checkpoint at or past its own is kept (and copied to the
  loser's folder when past: it discards its own); a checkpoint behind it is replaced, again on
  the ETag just read. A published checkpoint never moves back, as the log's head never does.
- Folds are deterministic, so whichever machine publishes a session's state at seq N publishes
  the bytes a rebuild from the log up to N gives. ``load`` takes the published state when there
  is no local one (a new machine, a lost folder); the runner still checks its checkpoint against
  the log before folding on.
- ``drop`` and ``reset`` delete the published objects too (a session refolded from zero, after
  forgetting say, must not resume from a state that holds what was forgotten).
"""

from __future__ import annotations

import contextlib
import logging
from contextlib import AbstractContextManager
from typing import Any, TypeVar

from obstore.exceptions import AlreadyExistsError, NotFoundError, PreconditionError

from eventlog.layout import read_nofollow
from eventlog.overrides import override
from projections.checkpoints import Checkpoint
from projections.state_store import FileStateStore, StateStore

S = TypeVar("S")
PREFIX = "projections"
# Tiers whose state file says where their output stands whole: hot, tokens, learnings and
# memory files hold it all, the cold checkpoint names rows of the table every machine shares.
# Not warm: its library files live beside its state, per machine.
SHARED_TIERS = frozenset({"hot", "tokens", "learnings", "memory_files", "cold"})
logger = logging.getLogger(__name__)


class BucketStore(StateStore[S]):
    """``local`` (the machine's folder), each save published to ``store`` (an
    ``eventlog.storage.objects.ObjectStore``) under ``projections/{tier}/``."""

    # Its object-store client runs a runtime of its own that a forked worker must not inherit.
    forkable = False

    def __init__(
        self,
        local: FileStateStore[S],
        store: Any,
        tier: str,
        seen: dict[str, tuple[str | None, int]] | None = None,
    ) -> None:
        """``seen``: what this process last knew of the published objects, kept by the caller
        across catch-ups, so a save after the first needs one conditional PUT only."""
        super().__init__(local.out_dir, local.fold)
        self.local = local
        self.store = store
        self.tier = tier
        # session -> (ETag, checkpoint seq) of the published object as last read or written;
        # (None, 0) when there was none
        self._seen: dict[str, tuple[str | None, int]] = {} if seen is None else seen
        self.lost = 0  # publications that lost a race (for tests and benchmarks)

    def key(self, session: str) -> str:
        """The published object of ``session``'s state."""
        return f"{PREFIX}/{self.tier}/{self.local.path(session).name}"

    def fetch(self, session: str) -> tuple[bytes | None, tuple[S, Checkpoint] | None]:
        """The published bytes of ``session`` and what they hold (None when absent, unreadable
        or made under other settings); remembers their ETag and seq."""
        got = self.store._get(self.key(session))
        if got is None:
            self._seen[session] = (None, 0)
            return None, None
        data, etag = got
        found = self.local.read(session, data)
        self._seen[session] = (etag, found[1].seq if found else 0)
        return data, found

    @override
    def load(self, session: str) -> tuple[S, Checkpoint] | None:
        local = self.local.load(session)
        if local is not None:
            return local  # folding on from it is correct; a further winner is met at publish
        data, remote = self.fetch(session)
        if data is not None and remote is not None:
            self.local.write(session, data)  # resume from the published state
        return remote

    @override
    def save(self, session: str, state: S, checkpoint: Checkpoint) -> None:
        self.local.save(session, state, checkpoint)
        self.publish(session, read_nofollow(self.local.path(session)), checkpoint)

    def publish(self, session: str, data: bytes, checkpoint: Checkpoint) -> None:
        """Put ``data`` (the state at ``checkpoint``) unless the published state is at or past
        it; on a lost race, keep the winner's when it is at or past ``checkpoint``."""
        key = self.key(session)
        for _ in range(50):
            if session not in self._seen:
                self.fetch(session)
            etag, seq = self._seen[session]
            if etag is not None and seq >= checkpoint.seq:
                return  # never moved back (an equal seq is the same bytes: folds are pure)
            mode: Any = "create" if etag is None else {"e_tag": etag}
            try:
                put = self.store._call("PUT", key, _put, key, data, mode=mode)
            except (AlreadyExistsError, PreconditionError, NotFoundError, FileNotFoundError):
                self.lost += 1  # another machine published (or removed) it since we read it
                won, winner = self.fetch(session)
                if won is not None and winner is not None and winner[1].seq > checkpoint.seq:
                    self.local.write(session, won)  # the winner is further: ours is discarded
                continue
            self._seen[session] = (put["e_tag"] or "", checkpoint.seq)
            return
        logger.warning("%s/%s: not published (too many concurrent writers)", self.tier, session)

    @override
    def drop(self, session: str) -> None:
        self.local.drop(session)
        self._delete(self.key(session))
        self._seen[session] = (None, 0)

    def _delete(self, key: str) -> None:
        with contextlib.suppress(NotFoundError, FileNotFoundError):  # already gone
            self.store.delete_object(key)

    @override
    def reset(self) -> None:
        super().reset()
        for meta in self.store._list(f"{PREFIX}/{self.tier}/"):
            self._delete(meta["path"])
        self._seen.clear()

    @override
    def sessions(self) -> list[str]:
        return self.local.sessions()

    @override
    def has_output(self, session: str) -> bool:
        return self.local.has_output(session)

    @override
    def output_files(self, session: str) -> list[str]:
        return self.local.output_files(session)

    @override
    def exclusive(self) -> AbstractContextManager[object]:
        return self.local.exclusive()

    @override
    def disk_bytes(self) -> int:
        return self.local.disk_bytes()

    @override
    def damage(self) -> list[str]:
        return self.local.damage()

    @override
    def repair(self, problems: list[str]) -> bool:
        return self.local.repair(problems)

    @override
    def finish(self) -> None:
        self.local.finish()


def _put(store: Any, key: str, data: bytes, *, mode: Any) -> Any:
    import obstore

    return obstore.put(store, key, data, mode=mode)
