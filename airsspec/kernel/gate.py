"""The access gate (``kernel.gate``, ``memory.scopes``): who may read or write what.

Every door (the CLI, ``Memory``, the HTTP API, the MCP tools, the viewer, the hooks) reaches the
log through a ``Memory`` over a ``Kernel`` whose principal is its scope
(``projections.scopes.Scope``) and whether it is read-only; the decisions below are the only
ones made about access:

- **an admin** is an unscoped memory (the CLI's, ``Memory.open`` without a user, an admin token
  of ``airsspec serve``): it reads and writes everything;
- **a user** (a scoped memory) reads what its values own and the team's (what no user owns:
  ``Scope.reads``), and writes only to what its values own (``Scope.matches``); a session it may
  not read is answered as one that does not exist (``NoSuchSessionError``), so no one learns
  who owns which id; one it may read but not write is refused (``ScopeError``);
- **the workspace's own log** (``MEMORY_SESSION``) is read by a user only as its filtered view
  (``reads_record``: its own access records and documents, the learnings and verdicts it may
  read), and written by no caller directly: only airsspec's services append there;
- **global learnings** reach every reader, so only an admin adds them (or makes one global);
- **the server's tokens**, and forgetting through the server, are an admin's alone
  (``guard_admin``);
- **an integration's own sessions** (``OWN_SESSION_BASES``: a LangGraph store's) are named
  after their principal's scope, and only that principal (or an admin) creates one;
- **memory files** (``/memories``) are a tree per user and project (``memory_tree``): a
  principal reads and writes its own tree only, and replays only its own tree's changes;
- **a read-only principal** (a read-only token) writes nothing: a write is refused
  (``ReadOnlyTokenError``) and the access records a read would add (``memory_accessed``) are
  not written (``records_access``).

A scoped memory that appends to a new session records its scope there first (a
``session_started`` event), so the session is the writer's from its first record.

Owners are read from the learnings projection, a fold of the log (``info["owner"]``: the first
scope recorded, replaced by a ``session_assigned`` event), through its owners index
(``LearningsProjector.owners``). A named owner is cached with the head
its fold reached, so an assignment made by another process is seen at the next call, even one
appended after a read had brought the learnings current.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from airsspec.errors import CorruptLogError, NoSuchSessionError, ReadOnlyTokenError, ScopeError
from airsspec.kernel.freshness import NEEDS
from eventlog.layout import MEMORY_SESSION
from projections.memory_files import MEMORY_FILE_TYPES, tree_key
from projections.scopes import TEAM, Scope, shared

# The integrations' per-principal sessions (``Gate.own_session``): ``BASE`` is the team's (an
# admin's), ``BASE-DIGEST`` a scope's. Their names are computable by anyone, so only the
# principal a name belongs to (or an admin) may create one: nobody can take or block another's.
OWN_SESSION_BASES = ("langgraph-store",)
_OWN_NAME = re.compile(
    r"(?P<base>{})(?:-[0-9a-f]{{16}})?".format("|".join(map(re.escape, OWN_SESSION_BASES)))
)

if TYPE_CHECKING:
    from collections.abc import Collection

    from airsspec.kernel import Kernel
    from eventlog.schema import Record
    from projections.engine import RunReport
    from projections.learning_rules import Assessed


def _missing(session: str) -> NoSuchSessionError:
    """What a session this kernel may not read is answered with: what a missing one is."""
    return NoSuchSessionError(f"no session {session!r} in this workspace")


class Gate:
    """The access gate of one ``Kernel``: every decision of who may read or write what."""

    def __init__(self, kernel: Kernel) -> None:
        kernel.scope.as_reader()  # a principal is never named ``*`` (what every user shares)
        self._kernel = kernel

    @property
    def scope(self) -> Scope:
        """The scope this kernel reads and writes as."""
        return self._kernel.scope

    def narrow(
        self, user: str | None = None, agent: str | None = None, project: str | None = None
    ) -> Scope:
        """The scope of a view naming ``user``, ``agent`` and ``project`` (``Memory.scoped``):
        a view narrows; naming a value this scope already names otherwise is a
        ``ScopeError``."""
        given = Scope(user, agent, project)  # its kernel's gate refuses a principal named *
        for name, value in given.to_fields().items():
            current = getattr(self.scope, name)
            if current is not None and current != value:
                raise ScopeError(f"a memory scoped to {name}={current} cannot widen to {value}")
        return self.scope.within(given)

    def all_owners(self) -> dict[str, Scope]:
        """Every folded session's owner (``Scope()``: no one's), whoever asks: the gate's own
        input, and ``forget``'s (a user's session given to another is forgotten with them).
        Never an answer to a reader: what it may read is ``owners``. A session the learnings
        projection could not fold is not in it."""
        kernel = self._kernel
        kernel.catch_up(NEEDS["owners"], warn=False)
        owners = kernel.projector("learnings").owners()  # its index: one file, not every state
        # a workspace has thousands of sessions and a few owners: each owner's scope is made
        # once per call, not once per session (every read with a named scope asks)
        made: dict[tuple[tuple[str, str], ...], Scope] = {}
        found: dict[str, Scope] = {}
        for session, owner in owners.items():
            key = tuple(sorted(owner.items()))
            scope = made.get(key)
            if scope is None:
                scope = made[key] = Scope.of(owner)
            found[session] = scope
        return found

    def _owner(self, session: str) -> Scope | None:
        """The owner of ``session`` whoever asks (``Scope()``: no one's, or not in the log
        yet; None: unknown, its log could not be folded far enough to say)."""
        kernel = self._kernel
        log = kernel.log
        if not log.has(session):
            return Scope()
        try:
            head = log.head(session).seq
        except CorruptLogError:
            return None  # its last record cannot be read: neither can its owner
        known = kernel.owners_seen.get(session)
        if known is not None and known[1] == head:
            return known[0]
        kernel.catch_up(NEEDS["owners"], sessions=[session], warn=False)
        loaded = kernel.projector("learnings").state_store.load(session)
        if not loaded or not loaded[0].info:
            return None  # nothing folded: who owns it cannot be told
        found = Scope.of(loaded[0].info.get("owner"))
        # cached with the head its fold reached, not the log's: a fold behind the log (a read
        # brings each projection current once, and an assignment may land after) is read
        # again at the next call, never taken for the owner at the newer head
        kernel.owners_seen[session] = (found, loaded[1].seq)
        return found

    def owners(self) -> dict[str, Scope]:
        """The owner of every session this kernel may read (``Scope()``: the team's)."""
        found = self.all_owners()
        if self.admin:
            return found
        readable = {o for o in set(found.values()) if self.scope.reads(o)}
        return {s: o for s, o in found.items() if s != MEMORY_SESSION and o in readable}

    def owner(self, session: str) -> Scope:
        """The owner of ``session`` (``Scope()``: the team's, the workspace's own log, or
        not in the log yet; and for a session this kernel may not read, as for a missing
        one)."""
        found = None if session == MEMORY_SESSION else self._owner(session)
        if found is None or not (self.admin or self.scope.reads(found)):
            return Scope()
        return found

    def narrowed(self, scope: Scope | None) -> Scope:
        """``scope`` (default: this kernel's), refused (``ScopeError``) unless it keeps every
        value this kernel's scope names: like ``view``, an argument narrows, never widens."""
        scope = self.scope if scope is None else scope
        for name, value in self.scope.to_fields().items():
            if getattr(scope, name) != value:
                raise ScopeError(f"a memory scoped to {self.scope} cannot read as {scope}")
        return scope

    def visible(self, scope: Scope | None = None) -> set[str] | None:
        """The sessions ``scope`` (default: this kernel's; it narrows) may read; None: all."""
        return self.visible_share(scope)[0]

    def visible_share(self, scope: Scope | None = None) -> tuple[set[str] | None, float]:
        """``visible``, and the share of the workspace's sessions it is (1.0: every one): how
        much of the cold table a search under the reader's filter may keep. Read anew at
        each call, within a read too (``Kernel.reading``): the owners it is made of must be no
        older than what it filters, which other processes fold meanwhile (a session assigned to
        another user while a context is built, and written to, reaches the cold table and the
        summaries before the read's search and its other sessions' summaries are read)."""
        scope = self.narrowed(scope)
        if not scope.named:
            return None, 1.0
        # the workspace's own log is read only through its filtered view (``reads_record``)
        owners = self.all_owners()
        readable = {o for o in set(owners.values()) if scope.reads(o)}  # the read rule per owner
        found = {s for s, o in owners.items() if s != MEMORY_SESSION and o in readable}
        return found, len(found) / max(1, len(owners.keys() - {MEMORY_SESSION}))

    def reader(self, session: str) -> Scope:
        """The scope reads made for ``session`` run in: this kernel's, narrowed to the
        session's owner, so a user's session is never given another user's memory, and the
        team's session (no user owns it) only the team's (``TEAM``), whoever asks: what an
        agent is given there, every user of the workspace reads."""
        reader = self.scope.within(self.owner(session))
        return reader if reader.user is not None else replace(reader, user=TEAM)

    def reports(self, reports: list[RunReport]) -> list[RunReport]:
        """Projection reports as this kernel may see them: no outcome of a session it may
        not read (an admin's: as they are)."""
        if self.admin:
            return reports
        named = {o.session for r in reports for o in r.outcomes}
        # only the sessions named are asked about (an append's report names one): not every
        # owner of the workspace, on the path of every write
        shown = {s for s in named if s != MEMORY_SESSION and self.reads_session(s)}
        return [replace(r, outcomes=[o for o in r.outcomes if o.session in shown]) for r in reports]

    @property
    def admin(self) -> bool:
        """Whether this kernel is an admin's (unscoped): it reads and writes everything."""
        return not self.scope.named

    def guard_admin(self, doing: str) -> None:
        """Refuse (``ScopeError``) ``doing`` to anyone but an admin (an unscoped memory):
        what reaches past one user's memory, such as managing the server's tokens or
        forgetting through the server."""
        if not self.admin:
            raise ScopeError(f"only an admin may {doing} (a memory scoped to {self.scope} cannot)")

    def writable(self) -> None:
        """Refuse (``ReadOnlyTokenError``) any write by a read-only principal."""
        if self._kernel.read_only:
            raise ReadOnlyTokenError(f"{self.scope or 'this kernel'} is read-only; this writes")

    def records_access(self) -> bool:
        """Whether a read records what it gave (``memory_accessed``): not for a read-only
        principal, whose reads change nothing."""
        return not self._kernel.read_only

    def guard(self, session: str, *, writing: bool = False) -> None:
        """Refuse a session this kernel may not touch: one it may not read is answered as
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
        owner = self._owner(session)
        if owner is None or not self.scope.reads(owner):
            raise _missing(session)
        if writing and not self.writes(owner):
            whose = "the team's (owned by no user)" if not owner.user else "not yours"
            raise ScopeError(
                f"session {session!r} is {whose}; a memory scoped to {self.scope} cannot write "
                "to it (an admin can: airsspec session assign)"
            )

    def reads_session(self, session: str) -> bool:
        """Whether this kernel may read ``session`` (an admin any; a user its own and the
        team's, never one whose owner cannot be told)."""
        if self.admin or session == MEMORY_SESSION:
            return True
        owner = self._owner(session)
        return owner is not None and self.scope.reads(owner)

    def writes(self, owner: Scope) -> bool:
        """Whether this kernel may write to what ``owner`` owns: an admin anything; a user
        what its values own, the user named exactly (a session shared with every user,
        ``*``, is read by all and written by none of them; a scope naming no user writes to
        no user's session)."""
        if self.admin:
            return True
        if owner.user is not None and owner.user != self.scope.user:
            return False
        return owner.named and self.scope.matches(owner)

    def guard_writes(self, session: str) -> None:
        """``guard(session, writing=True)`` for a session that must exist (a write that does
        not create one: a learning, a compaction, a forget): missing is missing."""
        if session != MEMORY_SESSION and not self._kernel.log.has(session):
            raise _missing(session)
        self.guard(session, writing=True)

    def reads_record(self, record: Record, readable: Collection[str]) -> bool:
        """Whether a record of the workspace's own log reaches this reader (``readable``: the
        ids of the learnings it may read, ``Learnings.readable``): a learning it may read, a
        verdict, edit, archive or restore of such learnings, its own access records and
        documents; nothing else (who was forgotten, another user's queries and reasons) but to
        an admin."""
        if self.admin:
            return True
        fields: dict[str, Any] = record.__dict__
        kind = record.type
        if kind in ("learning", "learning_feedback", "learning_edited", "restored", "archived"):
            ids = fields.get("learning_ids") or [fields.get("learning_id")]
            return all(i in readable for i in ids)
        if kind == "memory_accessed":
            by = Scope.of(fields)
            return by.named and self.scope.matches(by)
        if kind == "source_indexed":
            return self.scope.reads_document(fields.get("user"))
        if kind in MEMORY_FILE_TYPES:
            return self.memory_tree() == tree_key(Scope.of(fields))
        return False

    def own_session(self, base: str) -> str:
        """The session this principal keeps its own records of ``base`` in (an integration's
        store: ``base`` for an admin, ``base-DIGEST`` of the scope otherwise, since names may
        hold characters a session id may not). Its name is computable by anyone, so another
        scope may have written there first and own it: then it is refused (``ScopeError``),
        never shared, since what this principal put there its owner would read."""
        base = self._own_name(base)
        # no owner recorded (None: none folded) is the team's, an admin's
        owner = (self._owner(base) or Scope()) if self._kernel.log.has(base) else self.scope
        if owner != self.scope:
            raise ScopeError(
                f"session {base!r} was written first by {owner or 'the team'}, not "
                f"{self.scope or 'the team'}: "
                "it cannot hold this memory's own records"
            )
        return base

    def _own_name(self, base: str) -> str:
        """This principal's name for the integration session ``base`` (one of
        ``OWN_SESSION_BASES``)."""
        if base not in OWN_SESSION_BASES:
            raise ValueError(f"{base!r} is not declared in OWN_SESSION_BASES")
        fields = self.scope.to_fields()
        if not fields:
            return base
        named = "\0".join(f"{k}={v}" for k, v in sorted(fields.items()))
        import hashlib  # here: loading OpenSSL (3 ms) is for the commands that hash

        return f"{base}-{hashlib.sha256(named.encode()).hexdigest()[:16]}"

    def memory_tree(self) -> str:
        """The ``/memories`` tree this principal reads and writes (``projections.memory_files``):
        its own user's and project's, never another's; an admin's is the team's (no user),
        and another's only through a view scoped to it."""
        return tree_key(self.scope)

    def changes_learning(self, learning: Assessed, owner: Scope) -> bool:
        """Whether this kernel may change (confirm, reject, edit, archive, restore) a learning
        owned by ``owner`` (the session's, or the scope recorded with a learning of the
        workspace's own log): what it may write (``writes``, the rule of sessions), and never a
        global one (given to every reader: an admin's to change), whoever owns it."""
        if not self.scope.named:
            return True
        return not _shared(learning) and self.writes(owner)

    def guard_learning(self, learning: Assessed, owner: Scope, doing: str) -> None:
        """Refuse (``ScopeError``) a change (``doing``) this kernel may not make
        (``changes_learning``). Reading the learning may be allowed; changing what every reader
        is given is not."""
        if self.changes_learning(learning, owner):
            return
        whose = (
            "global (every reader is given it: an admin's to change)"
            if _shared(learning)
            else f"owned by {owner}"
            if owner.named
            else "the team's (owned by no one)"
        )
        raise ScopeError(
            f"learning {learning.id} is {whose}; a memory scoped to {self.scope} cannot {doing} it"
        )

    def opening(self, session: str) -> list[dict[str, Any]]:
        """What a write to ``session`` brings first: nothing for a session this kernel may
        write to (``ScopeError`` for another owner's), and for a session it creates, its scope
        (a ``session_started`` event, written in the same batch)."""
        if session == MEMORY_SESSION or self._kernel.log.has(session):
            self.guard(session, writing=True)
            return []
        self.writable()
        if self.admin:
            return []
        if (own := _OWN_NAME.fullmatch(session)) and session != self._own_name(own["base"]):
            raise ScopeError(
                f"session {session!r} is the name of another principal's {own['base']}: "
                f"a memory scoped to {self.scope} cannot create it"
            )
        return [{"type": "session_started", **self.scope.to_fields()}]


def _shared(learning: Assessed) -> bool:
    return shared(learning.scope, learning.source)
