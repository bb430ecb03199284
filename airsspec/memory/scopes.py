"""Scoped access, a service of the facade (``memory.scopes``): who owns each session, what a
reader scope may see or write.

A ``Memory`` has a scope (``projections.scopes.Scope``; unscoped unless ``Memory.open(user=...)``
or ``memory.scoped(...)`` names one). Every read checks it (``check_session`` refuses another
owner's session with ``ScopeError``; lists, searches and learnings keep what the scope may see)
and every write to a session owned by someone else is refused, as is a verdict, archive or
restore of a learning the scope may not see (``guard_learning``). A scoped memory that appends
to a new session records its scope there first (a ``session_started`` event), so the session
is the writer's from its first record.

Owners are read from the learnings projection, a fold of the log (``info["owner"]``); a
session's owner never changes once recorded, so a named owner is cached for the life of the
workspace object (an unowned one is looked up again: ``sessions.start`` may still give it one).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from airsspec.errors import ScopeError
from eventlog.schema import MEMORY_SESSION
from projections.scopes import Scope

if TYPE_CHECKING:
    from airsspec.memory.core import Memory
    from projections.learning_rules import Assessed


class Scopes:
    """The scope checks of one ``Memory`` (see the module)."""

    def __init__(self, memory: Memory) -> None:
        self._memory = memory

    @property
    def scope(self) -> Scope:
        """The scope this memory reads and writes as."""
        return self._memory.scope

    def view(
        self, user: str | None = None, agent: str | None = None, project: str | None = None
    ) -> Memory:
        """A view of this memory (the same open workspace, log and embedder) whose reads
        default to the scope named, and whose writes to another owner's session are refused.
        A view narrows: naming a value this memory's scope already names otherwise is a
        ``ScopeError``. Closing a view leaves the workspace open."""
        given = Scope(user, agent, project)
        for name, value in given.to_fields().items():
            current = getattr(self.scope, name)
            if current is not None and current != value:
                raise ScopeError(f"a memory scoped to {name}={current} cannot widen to {value}")
        return self._memory._view(self.scope.within(given))

    def owners(self) -> dict[str, Scope]:
        """Every session's owner (``Scope()`` for an unowned session)."""
        memory = self._memory
        memory.project(("learnings",), warn=False)
        (projector,) = memory.workspace.projectors(("learnings",))
        found = {state.session: Scope.of(state.info.get("owner")) for state in projector.states()}
        memory._owners_seen.update({s: o for s, o in found.items() if o.named})
        return found

    def owner(self, session: str) -> Scope:
        """The owner of ``session`` (``Scope()``: unowned, or not in the log yet)."""
        memory = self._memory
        if (known := memory._owners_seen.get(session)) is not None:
            return known
        if session not in memory.workspace.log.sessions():
            return Scope()
        memory.project(("learnings",), sessions=[session], warn=False)
        (projector,) = memory.workspace.projectors(("learnings",))
        loaded = projector.state_store.load(session)
        found = Scope.of(loaded[0].info.get("owner")) if loaded else Scope()
        if found.named:
            memory._owners_seen[session] = found
        return found

    def narrowed(self, scope: Scope | None) -> Scope:
        """``scope`` (default: this memory's), refused (``ScopeError``) unless it keeps every
        value this memory's scope names: like ``view``, an argument narrows, never widens."""
        scope = self.scope if scope is None else scope
        for name, value in self.scope.to_fields().items():
            if getattr(scope, name) != value:
                raise ScopeError(f"a memory scoped to {self.scope} cannot read as {scope}")
        return scope

    def visible(self, scope: Scope | None = None) -> set[str] | None:
        """The sessions ``scope`` (default: this memory's; it narrows) may read; None: all."""
        scope = self.narrowed(scope)
        if not scope.named:
            return None
        return {s for s, owner in self.owners().items() if scope.matches(owner)}

    def reader(self, session: str) -> Scope:
        """The scope reads made for ``session`` run in: this memory's, narrowed to the
        session's owner, so a user's session is never given another user's memory."""
        return self.scope.within(self.owner(session))

    def guard(self, session: str, *, writing: bool = False) -> None:
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

    def guard_learning(self, learning: Assessed, owner: Scope, doing: str) -> None:
        """Refuse (``ScopeError``) a change (``doing``: confirm, reject, archive, restore) to
        a learning outside this memory's scope: one whose owner (the session's, or the
        scope recorded with a learning of the workspace's own log) is another user's, agent's
        or project's, or a global one nobody owns. Reading it may be allowed; changing what
        every reader is given is not."""
        if not self.scope.named:
            return
        if not owner.named or not self.scope.matches(owner):
            whose = f"owned by {owner}" if owner.named else "global (owned by no one)"
            raise ScopeError(
                f"learning {learning.id} is {whose}; a memory scoped to {self.scope} cannot "
                f"{doing} it"
            )

    def opening(self, session: str) -> list[dict[str, Any]]:
        """What a write to ``session`` brings first: nothing for a session this memory may
        write to (``ScopeError`` for another owner's), and for a session it creates, its scope
        (a ``session_started`` event, written in the same batch)."""
        memory = self._memory
        if not self.scope.named or session == MEMORY_SESSION:
            return []
        if session in memory.workspace.log.sessions():
            self.guard(session, writing=True)
            return []
        return [{"type": "session_started", **self.scope.to_fields()}]
