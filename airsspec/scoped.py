"""Scoped access on the facade: who owns each session, what a reader scope may see or write.

``Memory`` inherits these calls. A ``Memory`` has a scope (``projections.scopes.Scope``; unscoped
unless ``Memory.open(user=...)`` or ``Memory.scoped(...)`` names one). Every read checks it
(``check_session`` refuses another owner's session with ``ScopeError``; lists, searches and
learnings keep what the scope may see) and every write to a session owned by someone else is
refused. A scoped memory that appends to a new session records its scope there first (a
``session_started`` event), so the session is the writer's from its first record.

Owners are read from the learnings tier, a fold of the log (``info["owner"]``); a session's
owner never changes once recorded, so a named owner is cached for the life of the workspace
object (an unowned one is looked up again: ``start_session`` may still give it one).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from airsspec.errors import ScopeError
from eventlog.schema import MEMORY_SESSION
from projections.scopes import Scope

if TYPE_CHECKING:
    from airsspec.workspace import Workspace
    from projections.analytics import Analytics


class ScopedAccess:
    """The scope checks of ``Memory`` (see the module)."""

    workspace: Workspace
    scope: Scope
    _owners_seen: dict[str, Scope]

    if TYPE_CHECKING:  # provided by Memory

        def project(self, tiers: Any = ..., **kwargs: Any) -> Any: ...
        def _view(self, scope: Scope) -> Any: ...

    def scoped(
        self, user: str | None = None, agent: str | None = None, project: str | None = None
    ) -> Any:
        """A view of this memory (the same open workspace, log and embedder) whose reads
        default to the scope named, and whose writes to another owner's session are refused.
        A view narrows: naming a value this memory's scope already names otherwise is a
        ``ScopeError``. Closing a view leaves the workspace open."""
        given = Scope(user, agent, project)
        for name, value in given.to_fields().items():
            current = getattr(self.scope, name)
            if current is not None and current != value:
                raise ScopeError(f"a memory scoped to {name}={current} cannot widen to {value}")
        return self._view(self.scope.within(given))

    def owners(self) -> dict[str, Scope]:
        """Every session's owner (``Scope()`` for an unowned session)."""
        self.project(("learnings",), warn=False)
        (projector,) = self.workspace.projectors(("learnings",))
        found = {state.session: Scope.of(state.info.get("owner")) for state in projector.states()}
        self._owners_seen.update({s: o for s, o in found.items() if o.named})
        return found

    def owner(self, session: str) -> Scope:
        """The owner of ``session`` (``Scope()``: unowned, or not in the log yet)."""
        if (known := self._owners_seen.get(session)) is not None:
            return known
        if session not in self.workspace.log.sessions():
            return Scope()
        self.project(("learnings",), sessions=[session], warn=False)
        (projector,) = self.workspace.projectors(("learnings",))
        loaded = projector.state_store.load(session)
        found = Scope.of(loaded[0].info.get("owner")) if loaded else Scope()
        if found.named:
            self._owners_seen[session] = found
        return found

    def _narrowed(self, scope: Scope | None) -> Scope:
        """``scope`` (default: this memory's), refused (``ScopeError``) unless it keeps every
        value this memory's scope names: like ``scoped``, an argument narrows, never widens."""
        scope = self.scope if scope is None else scope
        for name, value in self.scope.to_fields().items():
            if getattr(scope, name) != value:
                raise ScopeError(f"a memory scoped to {self.scope} cannot read as {scope}")
        return scope

    def visible_sessions(self, scope: Scope | None = None) -> set[str] | None:
        """The sessions ``scope`` (default: this memory's) may read; None: all of them
        (``_narrowed``: an argument narrows, never widens)."""
        scope = self._narrowed(scope)
        if not scope.named:
            return None
        return {s for s, owner in self.owners().items() if scope.matches(owner)}

    def reader_scope(self, session: str) -> Scope:
        """The scope reads made for ``session`` run in: this memory's, narrowed to the
        session's owner, so a user's session is never given another user's memory."""
        return self.scope.within(self.owner(session))

    def _guard(self, session: str, *, writing: bool = False) -> None:
        """Refuse (``ScopeError``) a session this memory's scope may not touch."""
        if not self.scope.named or session == MEMORY_SESSION:
            return
        owner = self.owner(session)
        if not self.scope.matches(owner):
            whose = f"owned by {owner}" if owner.named else "owned by no user"
            doing = "write to" if writing else "read"
            raise ScopeError(
                f"session {session!r} is {whose}; a memory scoped to {self.scope} cannot {doing} it"
            )

    def _opening(self, session: str) -> list[dict[str, Any]]:
        """What a write to ``session`` brings first: nothing for a session this memory may
        write to (``ScopeError`` for another owner's), and for a session it creates, its scope
        (a ``session_started`` event, written in the same batch)."""
        if not self.scope.named or session == MEMORY_SESSION:
            return []
        if session in self.workspace.log.sessions():
            self._guard(session, writing=True)
            return []
        return [{"type": "session_started", **self.scope.to_fields()}]

    def library_entries(self) -> list[dict[str, Any]]:
        """The warm library's files (``history-NNN.md``, with session and range) of the
        sessions this memory's scope may read, ordered by number."""
        self.project(("warm",))
        (warm,) = self.workspace.projectors(("warm",))
        allowed = self.visible_sessions()
        return [e for e in warm.entries() if allowed is None or e["session"] in allowed]

    def library_file(self, number: int) -> tuple[dict[str, Any], str] | None:
        """Library file ``number``: its entry and text (None: no such file). A file of a
        session this memory's scope may not read is refused (``ScopeError``)."""
        from projections.warm import library_file_name

        (warm,) = self.workspace.projectors(("warm",))
        name = library_file_name(number)
        self.project(("warm",))
        entry = next((e for e in warm.entries() if e["file"] == name), None)
        path = warm.library_dir / name
        if entry is None and self.scope.named:
            return None  # a file no fold names has no owner a scoped reader could match
        if entry is not None:
            self._guard(entry["session"])
        if not path.exists():
            return None
        return entry or {}, path.read_text(encoding="utf-8")

    def analytics(self, parquet_source: str | None = None, sql: str | None = None) -> Analytics:
        """The SQL views (``Workspace.analytics``), holding only the sessions this memory's
        scope may read; the ``sessions`` view names each one's user, agent and project."""
        analytics = self.workspace.analytics(parquet_source, sql=sql)
        allowed = self.visible_sessions()
        if allowed is not None:
            analytics.restrict(allowed)
        return analytics

    def export_parquet(self, target: Path) -> int:
        """The whole log as Parquet under ``target`` (partitioned by session date), with token
        counts; how many records were written. A scoped memory is refused (``ScopeError``): the
        export holds every session."""
        from projections.analytics import export_parquet

        if self.scope.named:
            raise ScopeError(
                f"export parquet holds every session; a memory scoped to {self.scope} "
                "cannot write it"
            )
        self.project(("tokens",))
        log_dir = self.workspace.log.log_dir  # on a bucket: its synced cache
        return export_parquet(log_dir, self.workspace.state_dir / "tokens", target)
