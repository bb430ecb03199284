"""A projection is a fold of the log: ``apply(state, record) -> state``, and nothing else.

``Fold`` is the pure part of a tier: the state before any record (``empty``), one step
(``apply``), and the settings its output depends on (``fingerprint``). It reads no file and
writes none, so a fold over the same records under the same settings gives the same state
wherever and whenever it runs; that is what lets a rebuild equal an incremental catch-up.

``Projector`` binds a fold to the ``StateStore`` that keeps its states and checkpoints
(``projections.state_store``); the runner (``projections.engine``) drives the pair.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Collection
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar

if TYPE_CHECKING:
    from eventlog.schema import Record
    from projections.state_store import StateStore

S = TypeVar("S")


class Fold(ABC, Generic[S]):
    """One tier's fold over one session's records (pure: no I/O)."""

    name: ClassVar[str]
    parallel: ClassVar[bool] = True  # may sessions be folded in forked workers?
    # Save every this many records rather than once per catch-up, so a fold whose state grows
    # with what it has not written yet keeps memory bounded.
    save_every: ClassVar[int | None] = None
    # Does ``apply`` take a record as its checked stored dict (``eventlog.plain.Stored``, read
    # without pydantic) as well as a model? The engine then reads the session ``plain``.
    plain: ClassVar[bool] = False

    @abstractmethod
    def empty(self, session: str) -> S:
        """The state before any record."""

    @abstractmethod
    def apply(self, state: S, record: Record) -> S:
        """Fold one record into the state (pure: no I/O)."""

    def fingerprint(self) -> dict[str, Any]:
        """Settings the output depends on; a saved state with another fingerprint is rebuilt."""
        return {}

    def warm_up(self) -> None:
        """Load what folding needs (models, encodings) now, so forked workers inherit it."""


class Projector(Fold[S]):
    """A fold and the store that keeps its states (``state_store``): what the runner drives.
    A tier's projector makes its store; a caller may replace it (a bucket's, say) before
    the first catch-up."""

    state_store: StateStore[S]

    def item_count(self) -> int:
        """Items in the projection (for ``status``)."""
        return len(self.state_store.sessions())

    def purge(self, sessions: Collection[str], *, thorough: bool = True) -> None:
        """Drop ``sessions`` from this projection (``forget``): their states and outputs
        go, and the next catch-up folds them again. ``thorough``: also what a store keeps
        beyond its states (the cold table's old versions), even when it held none of them."""
        with self.state_store.exclusive():
            for session in sessions:
                self.state_store.drop(session)
