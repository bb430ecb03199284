"""Session-end consolidation, a service of the facade: when a session ends, one compaction event
(``compactor.compactor.Compactor.consolidate``) covers what no summary covers yet, so the next
session's ``context`` starts from what this one decided, required and left open. Recorded like
any compaction: a replay reads the event and never calls a model again.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from airsspec.errors import CompactionBusyError, NothingToCompactError

if TYPE_CHECKING:
    from airsspec.kernel import Kernel


def consolidate(kernel: Kernel, session: str) -> None:
    """Consolidate ``session`` (a write the gate checks), then fold what follows; nothing when
    its window holds no message or another compaction of it is running."""
    from compactor.compactor import Compactor

    compactor = kernel.policy("compact")
    assert isinstance(compactor, Compactor)
    kernel.gate.guard_writes(session)  # a derived event written to the session
    try:
        compacted = compactor.consolidate(session)
    except (NothingToCompactError, CompactionBusyError):
        return
    if compacted is not None:
        kernel.written("compact", session)
