"""Session-end consolidation, a service of the facade: when a session ends, one compaction event
(``compactor.compactor.Compactor.consolidate``) covers what no summary covers yet, and one
``facts_recorded`` event (``compactor.facts.FactRecorder``) its decisions, requirements, files,
errors and fixes, open tasks and facts about the user, so the next session's ``context`` starts
from what this one decided, required and left open. Both are recorded: a replay reads the
events and never calls a model again.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from airsspec.errors import CompactionBusyError, NothingToCompactError

if TYPE_CHECKING:
    from airsspec.kernel import Kernel


def consolidate(kernel: Kernel, session: str) -> None:
    """Consolidate ``session`` (a write the gate checks), then fold what follows; nothing is
    summarized when its window holds no message or another compaction of it is running, and
    no facts are recorded twice for one record."""
    from compactor.compactor import Compactor
    from compactor.facts import FactRecorder, facts_backend

    compactor = kernel.policy("compact")
    assert isinstance(compactor, Compactor)
    kernel.gate.guard_writes(session)  # derived events written to the session
    extractor = kernel.policy("extract")
    recorder = FactRecorder(
        kernel.log,
        kernel.projector("learnings"),
        kernel.workspace.layout.locks_dir,
        facts_backend(getattr(extractor, "backend", None)),
    )
    if recorder.run(session):
        kernel.written("extract", session)
    try:
        compacted = compactor.consolidate(session)
    except (NothingToCompactError, CompactionBusyError):
        return
    if compacted is not None:
        kernel.written("compact", session)
