"""The facade's side of a context build: the source ``projections.context`` reads through.

``projections.context.ContextBuilder`` owns the budget algorithm; this module gives it what it
reads (hot windows, the library's latest summaries, learnings, recall, records), each answered
only within the reader scope (the memory's, narrowed to the session's owner), and records what
the memory block gave (a ``memory_accessed`` event: the learnings' priority counts accesses).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from eventlog.layout import validate_session_id
from projections.context import ContextBuilder, ContextFormat

if TYPE_CHECKING:
    from airsspec.memory.core import Memory
    from eventlog.schema import Record
    from projections.hot import HotWindow
    from projections.learning_rules import Assessment
    from projections.scopes import Scope


class MemorySource:
    """``projections.context.ContextSource`` over one ``Memory``."""

    def __init__(self, memory: Memory) -> None:
        self.memory = memory

    def window(self, session: str) -> HotWindow | None:
        """The session's current hot window (None: no log yet)."""
        return self.memory.hot(session) if self.memory.has_session(session) else None

    def history(self, session: str, budget: int) -> str:
        """Summary and newest messages within ``budget`` (hot is current: ``window`` ran)."""
        return self.memory.workspace.format_history(session, budget)

    def assessment(self, session: str, cue: str, reader: Scope) -> Assessment:
        """The learnings as ``session`` sees them, within ``reader``."""
        return self.memory.learnings.list(reader=session, cue=cue, scope=reader)

    def earlier(self, session: str, reader: Scope) -> Iterator[tuple[str, dict[str, Any]]]:
        """The latest summary of each other session ``reader`` may see, newest first."""
        memory = self.memory
        memory.project(("hot", "warm"), warn=False)
        (warm,) = memory.workspace.projectors(("warm",))
        latest: dict[str, dict[str, Any]] = {}
        visible = memory.scopes.visible(reader)
        for entry in warm.entries():  # by library number: the last one of a session wins
            if entry["session"] != session and (visible is None or entry["session"] in visible):
                latest[entry["session"]] = entry
        recent = sorted(latest.values(), key=lambda e: (e["ts"], e["library_no"]), reverse=True)
        for entry in recent:
            window = memory.workspace.load_hot(entry["session"])
            if window is not None and window.summary is not None:
                yield entry["session"], window.summary

    def recall(self, query: str, k: int, reader: Scope) -> list[dict[str, Any]]:
        """The ``k`` best hits for ``query`` within ``reader``."""
        return self.memory.search(query, k=k, scope=reader)["hits"]

    def records(self, session: str, from_seq: int) -> dict[int, Record]:
        """The session's records from ``from_seq``, by seq."""
        read = self.memory.workspace.log.read(session, from_seq=from_seq)
        return {located.record.seq: located.record for located in read}


def _builder(memory: Memory) -> ContextBuilder:
    cfg = memory.settings
    return ContextBuilder(
        MemorySource(memory),
        memory.workspace.token_counter(),
        context_share=cfg.learnings.context_share,
        phases=cfg.learnings.phases,
        other_sessions=cfg.memory.context_other_sessions,
    )


def _record_access(memory: Memory, session: str, given: dict[str, bool], query: str | None) -> None:
    """Record what a context build gave ``session`` (the access count of each learning, and
    which matched its task or query: a cold one that matched becomes warm), with the
    reader's scope; a read-only reader records nothing (``memory.scopes``)."""
    if not memory.scopes.records_access():
        return
    event = {
        **memory.scope.to_fields(),
        "type": "memory_accessed",
        "learning_ids": sorted(given),
        "matched": sorted(i for i, matched in given.items() if matched),
        "purpose": "context",
        "reader": session,
        "query": query,
    }
    memory._memory_event(event)


def build(
    memory: Memory,
    session: str,
    budget: int,
    *,
    query: str | None = None,
    format: ContextFormat = "text",
) -> str | list[dict[str, Any]]:
    """See ``Memory.context``."""
    validate_session_id(session)
    if memory._logged(session):
        memory.check_session(session)
    built = _builder(memory).build(
        session, budget, query=query, format=format, reader=memory.scopes.reader(session)
    )
    if built.given:
        _record_access(memory, session, built.given, query)
    return built.context


def memory_block(memory: Memory, session: str, budget: int, *, query: str | None = None) -> str:
    """See ``Memory.memory_block``."""
    validate_session_id(session)
    if memory._logged(session):
        memory.check_session(session)  # a scoped memory's own sessions only
    block, given = _builder(memory).memory_block(
        session, budget, query, memory.scopes.reader(session)
    )
    if given:
        _record_access(memory, session, given, query)
    return block
