"""The warm tier: ``knowledge/library/history-NNN.md``, one file per compaction event.

Files are materialised from compaction events only (never by calling a summarizer), so a
rebuild reproduces the library byte for byte. NNN is the ``library_no`` the compactor recorded in
the event. Each file has front matter naming the session, the covered seq range and the hashes of
its first and last record, the compaction event itself, the summarizer, token counts and the time
of the event; then the master summary; then each chunk summary with its seq range.

State per session (``state/warm/{session}.json``): the files the session owns and its checkpoint.
Library files are written before the state that lists them, so after a crash a resumed fold
rewrites the same bytes.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import orjson

from eventlog.overrides import override
from eventlog.plain import modelled
from projections.checkpoints import Checkpoint, file_identity
from projections.files import atomic_write, folder_size
from projections.fold import Projector
from projections.state_index import StateIndex
from projections.state_store import JsonStore

if TYPE_CHECKING:  # the record classes are imported when there are records to fold
    from eventlog.schema import CompactionRecord, Record

STATE_VERSION = 1


def library_file_name(library_no: int) -> str:
    """``history-NNN.md`` for library number ``library_no``."""
    return f"history-{library_no:03d}.md"


def _yaml_value(value: Any) -> str:
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()


def render_library_file(record: CompactionRecord) -> str:
    """The markdown of one compaction event: front matter, master summary, chunk summaries."""
    front = {
        "library_no": record.library_no,
        "session": record.session,
        "covers": {
            "from_seq": record.from_seq,
            "to_seq": record.to_seq,
            "messages": record.messages,
        },
        "first_hash": record.first_hash,
        "last_hash": record.last_hash,
        "event": {"id": record.id, "seq": record.seq, "hash": record.hash},
        "previous": (
            library_file_name(record.previous_library_no) if record.previous_library_no else None
        ),
        "summarizer": record.summarizer.model_dump(exclude_none=True),
        "tokens": {
            "before": record.tokens_before,
            "after": record.tokens_after,
            "summary": record.summary_tokens,
        },
        "reason": record.reason,
        "created": record.ts,
    }
    lines = ["---"]
    lines += [f"{key}: {_yaml_value(value)}" for key, value in front.items()]
    lines += [
        "---",
        "",
        f"# {record.session}: summary of #1-#{record.to_seq}",
        "",
        record.summary.strip(),
        "",
        f"## Chunks of this compaction (#{record.from_seq}-#{record.to_seq})",
        "",
    ]
    for number, chunk in enumerate(record.chunks, start=1):
        lines += [
            f"### Chunk {number}: #{chunk.from_seq}-#{chunk.to_seq} "
            f"({chunk.messages} messages, {chunk.tokens} tokens)",
            "",
            chunk.summary.strip(),
            "",
        ]
    return "\n".join(lines)


@dataclass(slots=True)
class WarmState:
    """The warm projector's state of one session: its library files."""

    session: str
    files: list[dict[str, Any]] = field(default_factory=list)  # one per compaction, in order
    pending: dict[str, str] = field(default_factory=dict)  # file name -> markdown to write


def _is_listing(value: object) -> bool:
    """Whether ``value`` is a state's ``files`` as the fold records them, each a plain file
    name in the tier's folder (an index entry written by hand is read again from its state)."""
    return isinstance(value, list) and all(
        isinstance(e, dict)
        and isinstance(e.get("file"), str)
        and os.path.basename(e["file"]) == e["file"]
        and e["file"] not in ("", ".", "..")
        for e in value
    )


# a state file's path -> (its identity when read, the files its state lists)
_LISTED: dict[str, tuple[list[int], list[dict[str, Any]]]] = {}


class OwnedFilesStore(JsonStore[Any]):
    """A tier's store whose sessions own files in a folder beside their states (the library's
    ``history-NNN.md``, the visual tier's pages): a state's ``pending`` files (name -> bytes
    or text) are written before the state that lists them in ``files``, so after a crash a
    resumed fold rewrites the same bytes; ``pattern`` globs the folder's files for a reset."""

    def __init__(self, out_dir: Path, files_dir: Path, fold: Any, pattern: str) -> None:
        super().__init__(out_dir, fold)
        self.files_dir = files_dir
        self._files = str(files_dir)  # ``output_files`` runs per session, per catch-up
        self.pattern = pattern
        self.index = StateIndex(out_dir.with_name(f"{out_dir.name}.listed.json"), _is_listing)
        self.indexes = (self.index,)

    @override
    def save(self, session: str, state: Any, checkpoint: Checkpoint) -> None:
        for name, data in sorted(state.pending.items()):
            atomic_write(self.files_dir / name, data if isinstance(data, bytes) else data.encode())
        state.pending.clear()
        super().save(session, state, checkpoint)

    @override
    def drop(self, session: str) -> None:
        loaded = self.load(session)
        for name in self.owned(loaded[0]) if loaded else []:
            (self.files_dir / name).unlink(missing_ok=True)
        super().drop(session)

    @override
    def finish(self) -> None:
        super().finish()
        # after every catch-up, idle ones too: what ``listed`` read from states
        self.index.follow({}, lambda s: file_identity(self.path(s)))

    @override
    def reset(self) -> None:
        super().reset()
        if self.files_dir.is_dir():
            for stray in self.files_dir.glob(self.pattern):
                stray.unlink()

    @override
    def output_files(self, session: str) -> list[str]:
        own = super().output_files(session)
        return own + [os.path.join(self._files, entry["file"]) for entry in self.listed(session)]

    def listed(self, session: str) -> list[dict[str, Any]]:
        """The files ``session``'s saved state lists (none without a readable state). Every
        idle catch-up asks each session's (its output files), and a compaction and the
        earlier sessions of a context every session's: a state is read once per process while
        its file's identity holds (a save replaces the file), and a new process takes it from
        the index while the identity is the one indexed (``projections.state_index``).
        Shared: never changed by a caller."""
        (path,) = super().output_files(session)
        identity = file_identity(path)
        if identity is None:
            return []
        known = _LISTED.get(path)
        if known is not None and known[0] == identity:
            return known[1]
        indexed = self.index.read().get(session)
        if indexed is not None and indexed[0] == identity:
            files = indexed[1]
        else:
            loaded = self.load(session)
            files = list(loaded[0].files) if loaded else []
            self.index.wait({session: [identity, files]})
        _LISTED[path] = (identity, files)
        return files

    @override
    def disk_bytes(self) -> int:
        return super().disk_bytes() + folder_size(self.files_dir)

    @staticmethod
    def owned(state: Any) -> list[str]:
        """The files ``state`` lists."""
        return [entry["file"] for entry in state.files]


class WarmProjector(Projector[WarmState]):
    """Writes one ``history-NNN.md`` per compaction event (see the module)."""

    name = "warm"
    plain = True  # only a compaction is folded, as its model (``apply``)

    def __init__(self, out_dir: Path, library_dir: Path) -> None:
        self.library_dir = library_dir
        self.state_store = OwnedFilesStore(out_dir, library_dir, self, "history-*.md")

    @override
    def fingerprint(self) -> dict[str, Any]:
        return {"version": STATE_VERSION}

    @override
    def empty(self, session: str) -> WarmState:
        return WarmState(session)

    @override
    def apply(self, state: WarmState, record: Record) -> WarmState:
        if record.type == "compaction":  # the only type folded: made its model
            record = cast("CompactionRecord", modelled(record))
            name = library_file_name(record.library_no)
            state.pending[name] = render_library_file(record)
            state.files.append(
                {
                    "file": name,
                    "library_no": record.library_no,
                    "from_seq": record.from_seq,
                    "to_seq": record.to_seq,
                    "event_seq": record.seq,
                    "event_hash": record.hash,
                    "summary_tokens": record.summary_tokens,
                    "ts": record.ts,
                }
            )
        return state

    def dump(self, state: WarmState) -> dict[str, Any]:
        """The state as stored (``JsonStore``); its library files are written beside it."""
        return {"session": state.session, "files": state.files}

    def restore(self, session: str, data: dict[str, Any]) -> WarmState:
        """The state from what ``dump`` stored."""
        return WarmState(session, data["files"])

    @override
    def item_count(self) -> int:
        return len(list(self.library_dir.glob("history-*.md"))) if self.library_dir.is_dir() else 0

    def entries(self) -> list[dict[str, Any]]:
        """Every library file with its session and range, ordered by library number."""
        store = self.state_store
        found = []
        for session in store.sessions():
            if isinstance(store, OwnedFilesStore):
                files = store.listed(session)
            else:  # a bucket's: a state may be there only
                loaded = store.load(session)
                files = loaded[0].files if loaded else []
            found += [{**e, "session": session} for e in files]
        return sorted(found, key=lambda e: e["library_no"])

    def max_library_no(self) -> int:
        """The highest library number written so far (0 if none)."""
        return max((e["library_no"] for e in self.entries()), default=0)
