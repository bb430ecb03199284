"""The access gate, a service of the facade (``memory.scopes``): who may read or write what.

Every door (the CLI, ``Memory``, the HTTP API, the MCP tools, the viewer, the hooks) reaches the
log through a ``Memory`` whose principal is its scope (``projections.scopes.Scope``) and whether
it is read-only; the decisions below are the only ones made about access:

- **an admin** is an unscoped memory (the CLI's, ``Memory.open`` without a user, an admin token
  of ``airsspec serve``): it reads and writes everything;
- **a user** (a scoped memory) reads what its values own and the team's (what no user owns:
  ``Scope.reads``), and writes only to what its values own (``Scope.matches``); a session it may
  not read is answered as one that does not exist (``NoSuchSessionError``), so no one learns
  who owns which id; one it may read but not write is refused (``ScopeError``);
- **the workspace's own log** (``MEMORY_SESSION``) is read by a user only as its filtered view
  (``reads_record``: its own access records and documents, the learnings and verdicts it may
  read), and written by no caller directly: only airsspec's services append there;
- **global learnings** reach every reader, so only an admin adds them;
- **a read-only principal** (a read-only token) writes nothing: a write is refused
  (``ReadOnlyTokenError``) and the access records a read would add (``memory_accessed``) are
  not written (``records_access``).

A scoped memory that appends to a new session records its scope there first (a
``session_started`` event), so the session is the writer's from its first record.

Owners are read from the learnings projection, a fold of the log (``info["owner"]``: the first
scope recorded, replaced by a ``session_assigned`` event). A named owner is cached with the
session's head, so an assignment made by another process is seen at the next call.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from airsspec.errors import NoSuchSessionError, ReadOnlyTokenError, ScopeError
from eventlog.schema import MEMORY_SESSION
from projections.scopes import Scope

if TYPE_CHECKING:
    from airsspec.memory.core import Memory
    from eventlog.schema import Record
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
        self,
        user: str | None = None,
        agent: str | None = None,
        project: str | None = None,
        *,
        read_only: bool = False,
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
        return self._memory._view(self.scope.within(given), read_only=read_only)

    def owners(self) -> dict[str, Scope]:
        """Every session's owner (``Scope()`` for an unowned session)."""
        memory = self._memory
        memory.project(("learnings",), warn=False)
        (projector,) = memory.workspace.projectors(("learnings",))
        return {state.session: Scope.of(state.info.get("owner")) for state in projector.states()}

    def owner(self, session: str) -> Scope:
        """The owner of ``session`` (``Scope()``: unowned, or not in the log yet)."""
        memory = self._memory
        log = memory.workspace.log
        if session not in log.sessions():
            return Scope()
        head = log.head(session).seq
        known = memory._owners_seen.get(session)
        if known is not None and known[1] == head:
            return known[0]
        memory.project(("learnings",), sessions=[session], warn=False)
        (projector,) = memory.workspace.projectors(("learnings",))
        loaded = projector.state_store.load(session)
        found = Scope.of(loaded[0].info.get("owner")) if loaded else Scope()
        memory._owners_seen[session] = (found, head)
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
        # the workspace's own log is read only through its filtered view (``reads_record``)
        owners = self.owners()
        return {s for s, o in owners.items() if s != MEMORY_SESSION and scope.reads(o)}

    def reader(self, session: str) -> Scope:
        """The scope reads made for ``session`` run in: this memory's, narrowed to the
        session's owner, so a user's session is never given another user's memory."""
        return self.scope.within(self.owner(session))

    @property
    def admin(self) -> bool:
        """Whether this memory is an admin's (unscoped): it reads and writes everything."""
        return not self.scope.named

    def writable(self) -> None:
        """Refuse (``ReadOnlyTokenError``) any write by a read-only principal."""
        if self._memory.read_only:
            raise ReadOnlyTokenError(f"{self.scope or 'this memory'} is read-only; this writes")

    def records_access(self) -> bool:
        """Whether a read records what it gave (``memory_accessed``): not for a read-only
        principal, whose reads change nothing."""
        return not self._memory.read_only

    def guard(self, session: str, *, writing: bool = False) -> None:
        """Refuse a session this memory may not touch: one it may not read is answered as
        missing (``NoSuchSessionError``), one it may read but not write is ``ScopeError``;
        every write by a read-only principal is ``ReadOnlyTokenError``."""
        if writing:
            self.writable()
        if session == MEMORY_SESSION:
            if writing:  # only airsspec's services append there (they do not come here)
                raise ScopeError(f"{MEMORY_SESSION!r} is the workspace's own log; append elsewhere")
            return  # read as each reader's filtered view (``reads_record``)
        if self.admin:
            return
        owner = self.owner(session)
        if not self.scope.reads(owner):
            raise NoSuchSessionError(f"no session {session!r} in this workspace")
        if writing and not (owner.named and self.scope.matches(owner)):
            whose = "the team's (owned by no user)" if not owner.user else "not yours"
            raise ScopeError(
                f"session {session!r} is {whose}; a memory scoped to {self.scope} cannot write "
                "to it (an admin can: airsspec session assign)"
            )

    def reads_record(self, record: Record, owners: dict[str, Scope]) -> bool:
        """Whether a record of the workspace's own log reaches this reader (``owners``: each
        learning's owner, ``learning_owners``): a learning it may read, a verdict, archive or
        restore of such learnings, its own access records and documents; nothing else (who
        was forgotten, another user's queries and reasons) but to an admin."""
        if self.admin:
            return True
        fields: dict[str, Any] = record.__dict__
        kind = record.type
        if kind == "learning":
            item = {"scope": fields.get("scope"), "source": fields.get("source")}
            from projections.scopes import learning_visible

            return learning_visible(self.scope, Scope.of(fields), item)
        if kind in ("learning_feedback", "restored", "archived"):
            ids = fields.get("learning_ids") or [fields.get("learning_id")]
            return all(i in owners and self.scope.reads(owners[i]) for i in ids)
        if kind == "memory_accessed":
            by = Scope.of(fields)
            return by.named and self.scope.matches(by)
        if kind == "source_indexed":
            user = fields.get("user")
            return user is None or self.scope.matches(Scope(user=user))
        return False

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
        if session in memory.workspace.log.sessions() or session == MEMORY_SESSION:
            self.guard(session, writing=True)
            return []
        self.writable()
        if self.admin:
            return []
        return [{"type": "session_started", **self.scope.to_fields()}]
