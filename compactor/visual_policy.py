"""The visual policy: which sessions leave the warm part of their project's context for images.

The warm part of a project's context is its sessions whose latest library page (``history-NNN.md``)
has not moved to the visual tier. Once a project holds more than ``warm_sessions`` of them
(``[visual] warm_sessions``, 5), the oldest (by the time of that page) move: the policy appends a
``visualized`` event to each, naming the page; the visual projector renders it
(``projections.visual``). Nothing is deleted: the library page, the log and the cold tier's rows
stay, and a session compacted again is warm again (its newer page is not moved).

``force`` moves the sessions named whatever the count (none named: the oldest warm session of
each project). A session's project is its owner's (``projections.scopes``); sessions without one
are the workspace's own project. One policy run at a time (a workspace lock), so a page is moved
once.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from compactor.compactor import file_lock
from projections.engine import Runner

if TYPE_CHECKING:
    from eventlog.log import Log
    from eventlog.schema import Record
    from projections.scopes import Scope
    from projections.visual import VisualProjector
    from projections.warm import WarmProjector


@dataclass(frozen=True, slots=True)
class Move:
    """A session to move: its latest library page, its project, and why."""

    session: str
    library_no: int
    project: str | None
    reason: str


class VisualPolicy:
    """Moves the oldest warm sessions of a project past ``warm_sessions`` to images."""

    def __init__(
        self,
        log: Log,
        warm: WarmProjector,
        visual: VisualProjector,
        lock_dir: Path,
        warm_sessions: int,
    ) -> None:
        self.log = log
        self.warm = warm
        self.visual = visual
        self.lock_dir = lock_dir
        self.warm_sessions = warm_sessions

    def warm_part(self, owners: Mapping[str, Scope]) -> dict[str | None, list[dict[str, Any]]]:
        """Per project, its warm sessions (each with its latest library entry), oldest first;
        only the sessions of ``owners`` (those the caller may write)."""
        Runner(self.log, [self.warm, self.visual]).catch_up()
        latest: dict[str, dict[str, Any]] = {}
        for entry in self.warm.entries():  # by library number: a session's last one wins
            latest[entry["session"]] = entry
        moved = self.visual.moved()
        projects: dict[str | None, list[dict[str, Any]]] = {}
        for session, entry in latest.items():
            if session not in owners or moved.get(session, 0) >= entry["library_no"]:
                continue
            projects.setdefault(owners[session].project, []).append(entry)
        for entries in projects.values():
            entries.sort(key=lambda e: (e["ts"], e["library_no"]))
        return projects

    def due(
        self,
        owners: Mapping[str, Scope],
        *,
        force: bool = False,
        sessions: Iterable[str] | None = None,
    ) -> list[Move]:
        """The sessions to move now (see the module)."""
        named = set(sessions) if sessions is not None else None
        moves = []
        for project, entries in sorted(self.warm_part(owners).items(), key=lambda p: p[0] or ""):
            over = len(entries) - self.warm_sessions
            if named is not None:
                chosen = [e for e in entries if e["session"] in named]
                chosen = chosen if force else chosen[: max(0, over)]
            else:
                chosen = entries[: max(over, 1 if force else 0)]
            where = f"project {project}" if project else "the workspace"
            reason = (
                f"{len(entries)} warm sessions in {where} > {self.warm_sessions}"
                if over > 0
                else "forced"
            )
            moves += [Move(e["session"], e["library_no"], project, reason) for e in chosen]
        return moves

    def run(
        self,
        owners: Mapping[str, Scope],
        *,
        force: bool = False,
        sessions: Iterable[str] | None = None,
    ) -> list[Record]:
        """Append a ``visualized`` event for each session ``due`` names; what was appended."""
        appended: list[Record] = []
        with file_lock(self.lock_dir / "visual.lock", wait=True, holder="visual policy"):
            for move in self.due(owners, force=force, sessions=sessions):
                event: dict[str, Any] = {
                    "type": "visualized",
                    "library_no": move.library_no,
                    "reason": move.reason,
                }
                if move.project is not None:
                    event["project"] = move.project
                appended += self.log.append_many(move.session, [event], system=True)
        return appended
