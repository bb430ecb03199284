"""The memory files tier: each scope's ``/memories`` tree, every version of every file, as of any
moment, folded from the log.

A memory file (what Claude's memory tool reads and writes, ``airsspec.memory.files``) exists only
as events of the workspace's own log: ``memory_file_written`` (the whole new text, its SHA-256
and the SHA-256 it replaced), ``memory_file_renamed`` and ``memory_file_deleted``. Each event
names the tree it belongs to (``user`` and ``project``: ``tree_key``) and who made the change
(``agent``, ``actor``). The fold keeps, per tree and path, every version in log order, each
pointing back to its record (``seq``, ``hash``); a rename leaves a version at both paths, a
delete a version without text, so ``history(path)`` lists every change and ``tree(as_of=...)``
shows the tree as it stood after any record. A record whose content was forgotten (its user's
key destroyed, ``forget --user``) adds nothing: refolded after a forget, the state holds no
word of it. State file per session (only the workspace's own log holds these events), canonical
JSON, saved with its checkpoint; incremental equals rebuild like every tier.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from eventlog.bound import Bound
from eventlog.crypto import is_forgotten
from eventlog.overrides import override
from projections.files import ParsedOnce
from projections.fold import Projector
from projections.scopes import Scope
from projections.state_store import JsonStore, StateStore

if TYPE_CHECKING:  # the record classes are imported by the fold, when there are records
    from eventlog.schema import Record

STATE_VERSION = 1
MEMORY_FILE_TYPES = frozenset({"memory_file_written", "memory_file_renamed", "memory_file_deleted"})
"""The event types of memory files (their records are read as the tree they name)."""


def tree_key(scope: Scope) -> str:
    """The name of the ``/memories`` tree of ``scope``: its user's and project's (its agent is
    who wrote, not whose: a user's agents share their memory files)."""
    return f"user={scope.user or ''};project={scope.project or ''}"


def under(path: str, folder: str) -> bool:
    """Whether ``path`` is ``folder`` or lies below it."""
    return path == folder or path.startswith(folder.rstrip("/") + "/")


@dataclass(frozen=True, slots=True)
class FileVersion:
    """One change to one path: what the file held after it (``text`` None: gone) and where
    it came from in the log."""

    seq: int
    ts: str
    hash: str
    op: str  # created, edited, renamed_from, renamed_to, deleted
    text: str | None
    sha256: str | None
    agent: str | None = None
    actor: str | None = None
    command: str | None = None  # the memory tool's command, for a write
    other_path: str | None = None  # the path a rename came from or went to

    @property
    def exists(self) -> bool:
        """Whether the file exists after this change."""
        return self.text is not None


@dataclass(slots=True)
class MemoryFilesState:
    """Every tree's files: tree -> path -> versions, in log order."""

    session: str
    trees: dict[str, dict[str, list[dict[str, Any]]]] = field(default_factory=dict)

    def versions(self, tree: str, path: str, as_of: Bound | None = None) -> list[FileVersion]:
        """The versions of ``path`` in ``tree`` (up to ``as_of`` when given), oldest first."""
        found = [FileVersion(**v) for v in self.trees.get(tree, {}).get(path, [])]
        return found if as_of is None else [v for v in found if not as_of.passed(v)]

    def files(self, tree: str, as_of: Bound | None = None) -> dict[str, FileVersion]:
        """The files of ``tree`` that exist (at ``as_of``): path -> its current version."""
        current = {}
        for path in sorted(self.trees.get(tree, {})):
            versions = self.versions(tree, path, as_of)
            if versions and versions[-1].exists:
                current[path] = versions[-1]
        return current


def _version(record: Record, op: str, text: str | None, sha: str | None, **more: Any) -> dict:
    fields: dict[str, Any] = record.__dict__
    return asdict(
        FileVersion(
            seq=record.seq,
            ts=record.ts,
            hash=record.hash,
            op=op,
            text=text,
            sha256=sha,
            agent=fields.get("agent"),
            actor=fields.get("actor"),
            **more,
        )
    )


def fold(state: MemoryFilesState, record: Record) -> MemoryFilesState:
    """Fold one record into the trees (pure)."""
    from eventlog.schema import (
        MemoryFileDeletedRecord,
        MemoryFileRenamedRecord,
        MemoryFileWrittenRecord,
    )

    if (
        record.type not in MEMORY_FILE_TYPES
        or not isinstance(
            record, MemoryFileWrittenRecord | MemoryFileRenamedRecord | MemoryFileDeletedRecord
        )
        or is_forgotten(record)
    ):
        return state
    tree = state.trees.setdefault(tree_key(Scope.of(record.__dict__)), {})
    live = {p: v[-1] for p, v in tree.items() if v[-1]["text"] is not None}
    if isinstance(record, MemoryFileWrittenRecord):
        op = "edited" if record.path in live else "created"
        tree.setdefault(record.path, []).append(
            _version(record, op, record.text, record.content_sha256, command=record.command)
        )
    elif isinstance(record, MemoryFileRenamedRecord):
        for path in [p for p in live if under(p, record.old_path)]:
            moved = record.new_path + path[len(record.old_path) :]
            tree[path].append(_version(record, "renamed_to", None, None, other_path=moved))
            tree.setdefault(moved, []).append(
                _version(
                    record,
                    "renamed_from",
                    live[path]["text"],
                    live[path]["sha256"],
                    other_path=path,
                )
            )
    else:
        for path in [p for p in live if record.all or under(p, record.path)]:
            tree[path].append(_version(record, "deleted", None, None))
    return state


# each session's count of files, while its state file is unchanged (a save replaces it)
_COUNTS: ParsedOnce[int] = ParsedOnce()


class MemoryFilesProjector(Projector[MemoryFilesState]):
    """Folds the memory-file events into every scope's tree (see the module)."""

    name = "memory_files"

    def __init__(self, out_dir: Path) -> None:
        self.state_store: StateStore[MemoryFilesState] = JsonStore(out_dir, self)

    @override
    def fingerprint(self) -> dict[str, Any]:
        return {"version": STATE_VERSION}

    @override
    def empty(self, session: str) -> MemoryFilesState:
        return MemoryFilesState(session)

    @override
    def apply(self, state: MemoryFilesState, record: Record) -> MemoryFilesState:
        return fold(state, record)

    def dump(self, state: MemoryFilesState) -> dict[str, Any]:
        """The state as stored (``JsonStore``)."""
        return {"trees": state.trees}

    def restore(self, session: str, data: dict[str, Any]) -> MemoryFilesState:
        """The state from what ``dump`` stored."""
        return MemoryFilesState(session, data["trees"])

    @override
    def item_count(self) -> int:
        return sum(self._files_in(session) for session in self.state_store.sessions())

    def _files_in(self, session: str) -> int:
        """The files of ``session``'s saved state, counted again only when its file changed
        (``status`` asks every session's, each request of a server)."""
        saved = self.state_store.output_files(session)
        count = partial(self._count, session)
        try:
            return _COUNTS.get(saved[0], count) if len(saved) == 1 else count()
        except OSError:  # gone meanwhile
            return count()

    def _count(self, session: str) -> int:
        loaded = self.state_store.load(session)
        return 0 if loaded is None else sum(len(loaded[0].files(t)) for t in loaded[0].trees)
