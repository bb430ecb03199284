"""The visual tier: a session's oldest history as PNG pages a vision model reads.

When the visual policy (``compactor.visual_policy``) moves a session out of the warm part of
its project's context, it appends a ``visualized`` event to the session naming the library page
it moves (the session's latest ``history-NNN.md``: its master summary covers the session from
#1). This projector renders that page, from the ``compaction`` event folded before it (never a
file, never a summarizer), as ``knowledge/visual/summary-NNN.png`` (``summary-NNN-2.png`` ...
when it does not fit one page; ``projections.pages`` lays it out), with a sidecar
``summary-NNN.json``. The page's provenance (library number, session, seq range, the hashes of
the records it renders and of the two events) is in the sidecar and in each PNG's text chunks.

A rebuild renders the same bytes (``projections.pages``: a pinned font, no time in the file);
the fingerprint holds the density and what the bytes depend on, so a change of either
re-renders rather than reports damage. Nothing is deleted: the library page and the log stay.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from eventlog.overrides import override
from eventlog.schema import CompactionRecord, Record, VisualizedRecord
from projections.fold import Projector
from projections.pages import DENSITIES, Density, engine, image_tokens, png_size, render
from projections.warm import OwnedFilesStore, library_file_name, render_library_file

STATE_VERSION = 1


def summary_file_names(library_no: int, pages: int) -> list[str]:
    """``summary-NNN.png``, then ``summary-NNN-2.png`` ... for ``pages`` pages."""
    stem = f"summary-{library_no:03d}"
    return [f"{stem}.png" if n == 1 else f"{stem}-{n}.png" for n in range(1, pages + 1)]


def sidecar_name(library_no: int) -> str:
    """``summary-NNN.json``: the provenance and pages of library page ``library_no``."""
    return f"summary-{library_no:03d}.json"


def page_text(record: CompactionRecord) -> str:
    """What a page shows of a compaction: one line naming it, then its library file's text
    without the front matter (which the page's provenance carries whole)."""
    text = render_library_file(record)
    body = text.split("\n---\n", 1)[1].lstrip("\n")
    head = (
        f"{library_file_name(record.library_no)} | session {record.session} | "
        f"#{record.from_seq}-#{record.to_seq} | {record.ts}"
    )
    return f"{head}\n\n{body}"


def provenance(record: CompactionRecord, moved: VisualizedRecord) -> dict[str, Any]:
    """Where a page comes from: its library page, session, range and the hashes it renders."""
    return {
        "library_no": record.library_no,
        "library_file": library_file_name(record.library_no),
        "session": record.session,
        "covers": {"from_seq": 1, "to_seq": record.to_seq},
        "compaction": {
            "from_seq": record.from_seq,
            "to_seq": record.to_seq,
            "first_hash": record.first_hash,
            "last_hash": record.last_hash,
            "event": {"seq": record.seq, "hash": record.hash},
        },
        "visualized": {"seq": moved.seq, "hash": moved.hash, "reason": moved.reason},
    }


@dataclass(slots=True)
class VisualState:
    """The visual projector's state of one session: the compactions it may render, its pages."""

    session: str
    compactions: dict[str, dict[str, Any]] = field(default_factory=dict)  # library_no -> record
    files: list[dict[str, Any]] = field(default_factory=list)  # one per file written, in order
    pending: dict[str, bytes] = field(default_factory=dict)  # file name -> bytes to write


class VisualProjector(Projector[VisualState]):
    """Renders a session's library page as PNG pages when it is ``visualized`` (the module)."""

    name = "visual"

    def __init__(self, out_dir: Path, visual_dir: Path, density: str = "dense") -> None:
        self.visual_dir = visual_dir
        self.density: Density = DENSITIES[density]
        self.state_store = OwnedFilesStore(out_dir, visual_dir, self, "summary-*")

    @override
    def fingerprint(self) -> dict[str, Any]:
        return {"version": STATE_VERSION, "density": self.density.name, **engine()}

    @override
    def empty(self, session: str) -> VisualState:
        return VisualState(session)

    @override
    def apply(self, state: VisualState, record: Record) -> VisualState:
        if isinstance(record, CompactionRecord):
            state.compactions[str(record.library_no)] = record.model_dump(mode="json")
        elif isinstance(record, VisualizedRecord):
            found = state.compactions.get(str(record.library_no))
            if found is not None:  # the policy names only a page folded before it
                self._render(state, CompactionRecord.model_validate(found), record)
        return state

    def _render(
        self, state: VisualState, record: CompactionRecord, moved: VisualizedRecord
    ) -> None:
        origin = provenance(record, moved)
        pages = render(page_text(record), self.density, {"airsspec:provenance": origin})
        names = summary_file_names(record.library_no, len(pages))
        described = []
        for name, data in zip(names, pages, strict=True):
            width, height = png_size(data)
            described.append(
                {
                    "file": name,
                    "width": width,
                    "height": height,
                    "image_tokens": image_tokens(width, height),
                    "sha256": hashlib.sha256(data).hexdigest(),
                }
            )
            state.pending[name] = data
        sidecar = {**origin, "density": self.density.name, "pages": described}
        side = sidecar_name(record.library_no)
        state.pending[side] = orjson.dumps(
            sidecar, option=orjson.OPT_SORT_KEYS | orjson.OPT_INDENT_2
        )
        where = {"library_no": record.library_no, "to_seq": record.to_seq, "ts": record.ts}
        state.files += [{**d, **where} for d in described]
        state.files.append({"file": side, "library_no": record.library_no, "sidecar": True})

    def dump(self, state: VisualState) -> dict[str, Any]:
        """The state as stored (``JsonStore``); its pages are written beside it."""
        return {"session": state.session, "compactions": state.compactions, "files": state.files}

    def restore(self, session: str, data: dict[str, Any]) -> VisualState:
        """The state from what ``dump`` stored."""
        return VisualState(session, data["compactions"], data["files"])

    @override
    def item_count(self) -> int:
        return len(list(self.visual_dir.glob("summary-*.png"))) if self.visual_dir.is_dir() else 0

    def pages(self) -> list[dict[str, Any]]:
        """Every page (PNG) with its session, ordered by library number then page."""
        found = []
        for session in self.state_store.sessions():
            loaded = self.state_store.load(session)
            files = loaded[0].files if loaded else []
            found += [{**f, "session": session} for f in files if not f.get("sidecar")]
        return sorted(found, key=lambda f: (f["library_no"], f["file"]))

    def moved(self) -> dict[str, int]:
        """Session -> the newest library number moved to this tier."""
        latest: dict[str, int] = {}
        for page in self.pages():
            latest[page["session"]] = max(latest.get(page["session"], 0), page["library_no"])
        return latest
