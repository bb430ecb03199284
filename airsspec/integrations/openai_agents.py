"""The OpenAI Agents SDK's ``Session`` over a ``Memory``: an agent's conversation kept on the log.

``AirsspecSession(session_id, memory)`` is a ``SessionABC`` whose ``session_id`` names a session
of the workspace. ``add_items`` appends each item as the record that says the same thing (a
user or assistant message, an action, an observation, a thought, else ``imported``), the item
itself kept exactly in the record's ``meta`` (``airsspec.memory.item_event``): the items are
read, searched, compacted and forgotten like every other message, and come back equal (but for
a secret in one: redacted at append, as in every record).
``pop_item`` and ``clear_session`` are events too (``item_popped``, ``items_cleared``): the log
stays append-only and ``replay`` shows what was removed and when. ``get_items`` is a fold of
the session's records (``airsspec.memory.agent_items``).

With ``compaction``, each ``add_items`` runs this workspace's compactor on the session when
its hot window is over budget, and ``get_items`` gives the summary in place of the items it
covers (the SDK's own ``OpenAIResponsesCompactionSession`` does the same through the
Responses API; here the summary is an event of the log, replayed, never asked for again).

Reads and writes go through ``memory``'s scope gate: a scoped memory's session is its own,
and another user's reads as an empty one and refuses writes as a missing one
(``NoSuchSessionError``: no one learns whose it is).

    from agents import Agent, Runner
    from airsspec.integrations.openai_agents import AirsspecSession
    from airsspec.memory import Memory

    session = AirsspecSession("support-42", Memory.open(".", create=True, user="ana"))
    await Runner.run(Agent(name="helper"), "Hello", session=session)
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING, Any

from airsspec.errors import CompactionBusyError, NothingToCompactError, SessionMovedError
from airsspec.memory import Memory, agent_items, item_event, validate_session_id

try:
    from agents.memory.session import SessionABC
    from agents.memory.session_settings import SessionSettings, resolve_session_limit
except ImportError as exc:  # the optional extra
    raise ImportError(
        f"{exc}: the OpenAI Agents adapter needs pip install 'airsspec-memory[openai-agents]'"
    ) from exc

if TYPE_CHECKING:
    from agents.items import TResponseInputItem


POP_ATTEMPTS = 100  # reads a pop makes while other writers keep landing before its own


class AirsspecSession(SessionABC):
    """An OpenAI Agents SDK session kept in ``memory``'s session ``session_id`` (see the
    module); ``compaction``: summarize it with the workspace's compactor when due."""

    def __init__(
        self,
        session_id: str,
        memory: Memory,
        *,
        compaction: bool = False,
        session_settings: SessionSettings | None = None,
    ) -> None:
        self.session_id = validate_session_id(session_id)
        self.memory = memory
        self.compaction = compaction
        self.session_settings = session_settings

    # ------------------------------------------------------------------ the fold and its edits

    def _held(self) -> tuple[list[tuple[int, dict[str, Any]]], int]:
        """The session's items with the seq each was added as, and the seq of its last record
        (none and 0 for a session this memory has not, or may not read)."""
        if not self.memory.has_session(self.session_id):
            return [], 0
        records = list(self.memory.replay(self.session_id))
        last = records[-1].seq if records else 0
        return agent_items(records, compacted=self.compaction), last

    def items(self, limit: int | None = None) -> list[TResponseInputItem]:
        """The latest ``limit`` items (all when None), oldest first: ``get_items``, blocking."""
        limit = resolve_session_limit(limit, self.session_settings)
        held = [item for _, item in self._held()[0]]
        if limit is None:
            return held
        return held[-limit:] if limit > 0 else []

    def add(self, items: list[TResponseInputItem]) -> None:
        """Append ``items`` in one atomic batch (then compact when due): ``add_items``."""
        if not items:
            return
        self.memory.append_many(self.session_id, [item_event(dict(item)) for item in items])
        if self.compaction:
            # nothing over budget yet, or another process compacts it now: both are fine
            with contextlib.suppress(NothingToCompactError, CompactionBusyError):
                self.memory.compact(self.session_id)

    def pop(self) -> TResponseInputItem | None:
        """Remove the latest item and return it (None when empty): ``pop_item``. The pop is
        appended only after the record it read last, so two writers popping at once take two
        items, never one twice (the one that lost reads again, at most ``POP_ATTEMPTS``
        times: a session that moved after every read is ``SessionMovedError``)."""
        for _ in range(POP_ATTEMPTS - 1):
            with contextlib.suppress(SessionMovedError):
                return self._pop_latest()
        return self._pop_latest()

    def _pop_latest(self) -> TResponseInputItem | None:
        """Read the session once and pop its latest item, appended after the record read
        last (``SessionMovedError`` when another writer's record landed since)."""
        held, last = self._held()
        if not held:
            return None
        seq, item = held[-1]
        self.memory.append(self.session_id, {"type": "item_popped", "of_seq": seq}, after=last)
        return item

    def clear(self) -> None:
        """Remove every item: ``clear_session`` (an event; nothing when the session is new)."""
        if self.memory.has_session(self.session_id):
            self.memory.append(self.session_id, {"type": "items_cleared"})

    # ------------------------------------------------------------------ the SDK's protocol

    async def get_items(self, limit: int | None = None) -> list[TResponseInputItem]:
        """The latest ``limit`` items (all when None), in chronological order."""
        return await asyncio.to_thread(self.items, limit)

    async def add_items(self, items: list[TResponseInputItem]) -> None:
        """Add ``items`` to the conversation, in order."""
        await asyncio.to_thread(self.add, items)

    async def pop_item(self) -> TResponseInputItem | None:
        """Remove and return the most recent item (None when the session is empty)."""
        return await asyncio.to_thread(self.pop)

    async def clear_session(self) -> None:
        """Remove every item of the session (the log keeps them, and the clearing)."""
        await asyncio.to_thread(self.clear)
