"""Scopes: whose memory a session is (a user, an agent, a project), as data of the log.

A session's owner is recorded in its log: the first ``session_started`` event that names any of
``user``, ``agent`` or ``project`` fixes it (later ones cannot change it; the facade refuses to
write to a session owned by someone else). A session with none recorded is *unowned*.

A reader has a scope too (``Memory.scoped``, ``Memory.open(user=...)``, ``AIRSSPEC_USER`` and
``AIRSSPEC_AGENT`` for the CLI and the MCP server). The rule, one place (``Scope.matches``): every
field the reader names must be the owner's value of that field, or the owner's field is
``SHARED`` (``"*"``: recorded on purpose as shared with every reader). A field the reader leaves
out is not a restriction. So:

- the unscoped reader (no field named) is an admin: it reads and writes every session;
- a scoped reader reads sessions owned by its values (or shared) and the team's: a session whose
  owner names no user (written by the CLI, the hooks or ``Memory`` without a user) belongs to
  the workspace's project, so every user of it reads it (``Scope.reads``); it writes only to
  sessions its values own (``Scope.matches`` on a named owner). An admin gives a session to a
  user with a ``session_assigned`` event (``airsspec session assign``), which makes it private.

Learnings follow their session's owner (a learning added outside any session records the scope
of the memory that added it). A learning an admin adds with ``scope="global"`` is shared with
every reader on purpose; an inferred one never is, whatever scope the extractor gave it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from eventlog.names import SHARED, check_name, check_scope_value

__all__ = ["ENV_NAMES", "SHARED", "TEAM", "Scope", "check_name", "learning_visible", "shared"]

TEAM = "(team)"
"""A reader's user that is no one's (never a name: the rule refuses parentheses): what the
context of a session no user owns is built as, so it holds only what every user may read."""

ENV_NAMES = {"user": "AIRSSPEC_USER", "agent": "AIRSSPEC_AGENT", "project": "AIRSSPEC_PROJECT"}
"""The environment variables that give the CLI's and the MCP server's default scope."""


@dataclass(frozen=True, slots=True)
class Scope:
    """Who a session belongs to, or whose memory a reader may see (None: not named)."""

    user: str | None = None
    agent: str | None = None
    project: str | None = None

    def __post_init__(self) -> None:
        # identities are checked where a scope is made (``eventlog.names``): a flag, the
        # environment, a header, a token and a record read back all become a Scope here
        for name in ("user", "agent", "project"):
            value = getattr(self, name)
            if value is not None and not (name == "user" and value == TEAM):
                check_scope_value(value, name)

    @classmethod
    def names(cls) -> tuple[str, ...]:
        """The scope's fields (the same names as the ``session_started`` fields)."""
        return _NAMES  # every access check asks: derived once, below the class

    @classmethod
    def of(cls, data: Mapping[str, Any] | None) -> Scope:
        """The scope named by ``data``'s scope fields (a record body, an info dict)."""
        if not data:
            return cls()
        return cls(**{name: data.get(name) for name in cls.names()})

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Scope:
        """The scope the environment names (``ENV_NAMES``; empty values are not a scope)."""
        env = os.environ if env is None else env
        values = {name: env.get(var) or None for name, var in ENV_NAMES.items()}
        for name, value in values.items():
            if value is not None:
                check_name(value, ENV_NAMES[name])
        return cls(**values)

    def as_reader(self) -> Scope:
        """This scope as a principal's (who reads and writes), refused with
        ``InvalidNameError`` when a value is ``SHARED``: ``*`` is an owner's value an admin
        records (shared with every reader), never who someone is; a principal named so would
        write into every shared session and make sessions every user reads."""
        for name, value in self.to_fields().items():
            if value == SHARED:
                check_name(value, name)  # the rule refuses it: one line naming the field
        return self

    @property
    def named(self) -> bool:
        """Whether any field is named (an unscoped reader sees everything)."""
        return any(getattr(self, name) is not None for name in self.names())

    def to_fields(self) -> dict[str, str]:
        """The named fields only (what a ``session_started`` event records)."""
        return {n: v for n in self.names() if (v := getattr(self, n)) is not None}

    def matches(self, owner: Scope) -> bool:
        """Whether a reader with this scope may see what ``owner`` owns (see the module)."""
        for name in self.names():
            wanted = getattr(self, name)
            if wanted is not None and getattr(owner, name) not in (wanted, SHARED):
                return False
        return True

    def reads(self, owner: Scope) -> bool:
        """Whether a reader with this scope may read what ``owner`` owns: the read rule of
        the access gate. What this scope ``matches``, and the team's: what no user owns (a
        session written without a user belongs to the workspace's project), when the other
        fields this reader names (an agent, a project it narrows to) match. Writing keeps the
        stricter ``matches``: only an unscoped memory (an admin) writes what no user owns."""
        if self.matches(owner):
            return True
        return owner.user is None and Scope(None, self.agent, self.project).matches(owner)

    def reads_document(self, user: str | None) -> bool:
        """Whether a reader with this scope may read a document under ``sources/`` owned by
        ``user`` (None: the workspace's, under no user's folder): the workspace's reach every
        reader; a user's (``sources/users/USER/``) only an admin (no field named) and a reader
        naming that user. A document has no agent or project, so a reader naming no user (a
        project's, an agent's) reads no user's document. The rule of a search's hits and of
        a view of the workspace's own log (``source_indexed`` records) alike."""
        return user is None or not self.named or self.user == user

    @property
    def documents_user(self) -> str | None:
        """The user whose documents a search by this reader keeps besides the workspace's
        (``reads_document`` as a filter): None for an admin (every user's), else its user,
        or ``TEAM`` when it names none (no folder has that name: no user's)."""
        if not self.named:
            return None
        return self.user if self.user is not None else TEAM

    def within(self, owner: Scope) -> Scope:
        """This reader's scope narrowed to a session's owner: the fields this one leaves out
        are the owner's. A context built for a user's session is that user's, whoever asks."""
        return Scope(**{n: getattr(self, n) or getattr(owner, n) for n in self.names()})

    def __bool__(self) -> bool:
        return self.named

    def __str__(self) -> str:
        named = self.to_fields()
        return ", ".join(f"{k}={v}" for k, v in named.items()) if named else "unscoped"


_NAMES: tuple[str, ...] = tuple(f.name for f in fields(Scope))


def learning_visible(reader: Scope, owner: Scope, item: Mapping[str, Any]) -> bool:
    """Whether a learning (a fold item: ``scope``, ``source``) owned by ``owner`` reaches
    ``reader``: the reader may read its owner's (``Scope.reads``), or an admin shared it
    with ``scope="global"``."""
    return shared(item.get("scope"), item.get("source")) or reader.reads(owner)


def shared(scope: str | None, source: str | None) -> bool:
    """Whether a learning of ``scope`` and ``source`` is an admin's shared with every reader
    (``scope="global"``, added by a person): what only an admin changes."""
    return scope == "global" and source == "user"
