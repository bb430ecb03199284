"""What a session sees next, a service of the facade: its hot window, history and context.

``projections.context.ContextBuilder`` owns the budget algorithm; ``KernelSource`` gives it what
it reads (hot windows, the library's latest summaries, learnings, facts, recall, records), each
answered only within the reader scope (the kernel's, narrowed to the session's owner), and
``Context`` records what the memory block gave (a ``memory_accessed`` event: the learnings'
priority counts accesses).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from airsspec.errors import InvalidQueryError, NoSuchSessionError
from airsspec.memory.facts import held
from airsspec.memory.learnings import Learnings
from airsspec.memory.search import search
from airsspec.memory.visual import Visual
from eventlog.layout import MEMORY_SESSION
from projections.context import FORMATS, ContextBuilder, ContextFormat

if TYPE_CHECKING:
    from airsspec.kernel import Kernel
    from eventlog.schema import Record
    from projections.context import Built
    from projections.facts import HeldFact
    from projections.hot import HotWindow
    from projections.learning_rules import Assessment
    from projections.scopes import Scope
    from projections.visual_context import Page


def current_window(kernel: Kernel, session: str) -> HotWindow | None:
    """``session``'s hot window brought current (a session the caller checked at the gate)."""
    for report in kernel.fresh("window", sessions=[session]):
        report.raise_failed()
    return kernel.workspace.load_hot(session)


class KernelSource:
    """``projections.context.ContextSource`` over one ``Kernel``."""

    def __init__(self, kernel: Kernel) -> None:
        self.kernel = kernel

    def window(self, session: str) -> HotWindow | None:
        """The session's current hot window (None: no log yet). Asked only for the session
        being built, which the build checked at the gate first (``Context._reader``)."""
        return current_window(self.kernel, session) if self.kernel.logged(session) else None

    def assessment(self, session: str, cue: str, reader: Scope) -> Assessment:
        """The learnings as ``session`` sees them, within ``reader``."""
        return Learnings(self.kernel).list(reader=session, cue=cue, scope=reader)

    def earlier(self, session: str, reader: Scope) -> Iterator[tuple[str, dict[str, Any]]]:
        """The latest summary of each other session ``reader`` may see, newest first."""
        kernel = self.kernel
        kernel.fresh("earlier")
        latest: dict[str, dict[str, Any]] = {}
        visible = kernel.gate.visible(reader)
        for entry in kernel.projector("warm").entries():  # by number: a session's last wins
            if entry["session"] != session and (visible is None or entry["session"] in visible):
                latest[entry["session"]] = entry
        recent = sorted(latest.values(), key=lambda e: (e["ts"], e["library_no"]), reverse=True)
        for entry in recent:
            window = kernel.workspace.load_hot(entry["session"])
            if window is not None and window.summary is not None:
                yield entry["session"], window.summary

    def recall(self, query: str, k: int, reader: Scope) -> list[dict[str, Any]]:
        """The ``k`` best hits for ``query`` within ``reader``."""
        hits: list[dict[str, Any]] = search(self.kernel, query, k=k, scope=reader)["hits"]
        return hits

    def records(self, session: str, from_seq: int) -> dict[int, Record]:
        """The session's records from ``from_seq``, by seq."""
        read = self.kernel.log.read(session, from_seq=from_seq)
        return {located.record.seq: located.record for located in read}

    def pages(self, session: str, reader: Scope) -> list[Page]:
        """The visual tier's pages of the other sessions ``reader`` may see."""
        return Visual(self.kernel).pages(reader, besides=session)

    def facts(self, session: str, reader: Scope) -> list[HeldFact]:
        """The facts ``reader`` may see as they hold now, oldest first."""
        return held(self.kernel, scope=reader)


class Context:
    """The hot window, history and context of the sessions of one kernel (see the module)."""

    def __init__(self, kernel: Kernel) -> None:
        self._kernel = kernel

    def hot(self, session: str, *, fresh: bool = True) -> HotWindow:
        """The hot window of ``session``, brought up to date first unless ``fresh`` is false
        (then as last saved); in a folder written by ``rebuild(as_of=...)``, which holds
        projections without a log, as saved there. ``NoSuchSessionError`` when there is none;
        ``CorruptLogError`` naming file and line when its log cannot be read."""
        from projections.hot import counted

        return counted(self._saved(session, fresh=fresh), self._kernel.token_counter())

    def _saved(self, session: str, *, fresh: bool = True) -> HotWindow:
        """The window as the fold saved it, its short messages' tokens not counted yet."""
        kernel = self._kernel
        logged = kernel.logged(session)
        if logged:
            kernel.check_session(session)  # the gate, whether fresh or as last saved
        window = current_window(kernel, session) if logged and fresh else None
        window = window or kernel.workspace.load_hot(session)
        if window is None:
            raise NoSuchSessionError(f"no session {session!r} in this workspace")
        return window

    def history(self, session: str, budget: int) -> str:
        """The session's latest summary and newest messages within ``budget`` tokens (the
        last part of ``context``)."""
        from projections.hot import format_history

        window = self._saved(session)
        return format_history(window, budget, self._kernel.token_counter())

    def _builder(self) -> ContextBuilder:
        kernel = self._kernel
        cfg = kernel.settings
        return ContextBuilder(
            KernelSource(kernel),
            kernel.token_counter(),
            context_share=cfg.learnings.context_share,
            phases=cfg.learnings.phases,
            other_sessions=cfg.memory.context_other_sessions,
        )

    def _record_access(self, session: str, given: dict[str, bool], query: str | None) -> None:
        """Record what a context build gave ``session`` (the access count of each learning,
        and which matched its task or query: a cold one that matched becomes warm), with the
        reader's scope; a read-only reader records nothing (the gate)."""
        kernel = self._kernel
        if not given or not kernel.gate.records_access():
            return
        event = {
            **kernel.scope.to_fields(),
            "type": "memory_accessed",
            "learning_ids": sorted(given),
            "matched": sorted(i for i, matched in given.items() if matched),
            "purpose": "context",
            "reader": session,
            "query": query,
        }
        kernel.system_append(MEMORY_SESSION, [event])  # read back by none: no model made

    def _reader(self, session: str) -> Scope:
        """The scope a build for ``session`` reads as (its own sessions only: the gate)."""
        kernel = self._kernel
        kernel.check_reader(session)
        return kernel.gate.reader(session)

    def build(
        self,
        session: str,
        budget: int,
        *,
        query: str | None = None,
        format: ContextFormat = "text",
        images: bool = False,
        thoughts: bool = False,
    ) -> Built:
        """See ``Memory.context`` and ``Memory.context_parts``."""
        if budget < 1:
            raise InvalidQueryError(f"budget must be at least 1 token (got {budget})")
        if format not in FORMATS:
            raise InvalidQueryError(f"format must be text, anthropic or openai (got {format!r})")
        if images and format != "anthropic":
            raise InvalidQueryError(f"images go with format anthropic (got {format!r})")
        with self._kernel.reading():
            reader = self._reader(session)
            builder = self._builder()
            built = builder.build(
                session,
                budget,
                query=query,
                format=format,
                reader=reader,
                images=images,
                thoughts=thoughts,
            )
        self._record_access(session, built.given, query)
        return built

    def memory_block(self, session: str, budget: int, *, query: str | None = None) -> str:
        """The briefing ``context`` starts from, alone: the memory block (task and phase,
        anchors, learnings) and the facts block (open tasks, what the latest sessions decided
        and required), each within the share of ``budget`` that ``context`` gives it; the
        access is recorded."""
        with self._kernel.reading():
            reader = self._reader(session)
            named, given = self._builder().briefing(session, budget, query, reader)
        self._record_access(session, given, query)
        return "\n\n".join(text for _, text in named)
