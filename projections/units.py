"""Text units: what the cold tier embeds and indexes, cut from records and source documents.

A unit is a piece of readable text with its provenance. Pure functions of their input:

- a message record (any record with readable text: user, assistant, thought, action,
  observation, imported) gives one unit, or several overlapping chunks when it is long;
- a compaction record gives one unit for its master summary and one per chunk summary, each
  naming the seq range of the records it covers;
- a ``learning`` record gives one unit (its text; ``meta`` names the learning), so
  ``query_memory`` can search learnings, and so does a ``learning_edited`` record that gives
  a new text (a learning is found by its current text only: ``Assessed.unit``); the other
  memory-management records (session lifecycle, feedback, accesses, housekeeping) give none;
- a ``store_put`` record (a graph store's item) gives the units of the text of the fields it
  indexes, cut as a message's (``meta`` names the namespace and key), none when it indexes
  none; the other records of a framework's state (``STATE_TYPES``: pops, checkpoints...) give
  none;
- a source document (markdown or text under ``sources/``) is split on headings, then by size
  with overlap, each section's secrets redacted as the log redacts them (so the lines stay
  where they were); its units name the file, its SHA-256 and the lines they span.

Every unit is full-text indexed; ``projections.policies.IndexPolicy`` decides which are also
embedded, and from what.

Unit ids are stable: ``{session}:{seq}:{part}`` for log units, ``src:{path}:{part}`` for sources.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any, Literal, get_args

import orjson

if TYPE_CHECKING:  # records are needed only to cut them: declaring a unit stays light
    from eventlog.schema import CompactionRecord, Record, SourceIndexedRecord

CHUNK_CHARS = 1000  # about 250 tokens: what the embedder reads whole
OVERLAP_CHARS = 150
SOURCE_SUFFIXES = (".md", ".markdown", ".txt", ".rst")
_HEADING = re.compile(r"^#{1,6}\s")


UnitKind = Literal["message", "summary", "source", "learning", "store"]
UNIT_KINDS: tuple[UnitKind, ...] = get_args(UnitKind)


@dataclass(frozen=True, slots=True)
class Unit:
    """One row of the cold tier: a piece of text with its provenance. The one declaration of
    that row: the table's columns (``projections.cold.unit_schema``), what is written and read
    back (``row``, ``from_row``) and the hits query_memory returns all derive from its fields."""

    unit_id: str
    kind: UnitKind
    type: str  # record type, "master" / "chunk" for summaries, "document" for sources
    text: str
    session: str | None = None
    seq_from: int | None = None
    seq_to: int | None = None
    record_seq: int | None = None  # the record the unit was cut from
    part: int = 0
    ts: str | None = None
    event_ids: tuple[str, ...] = ()
    hashes: tuple[str, ...] = ()
    meta: dict[str, Any] | None = None
    covers: dict[str, Any] | None = None  # summaries: the records they summarise
    source: str | None = None
    line_from: int | None = None
    line_to: int | None = None

    @property
    def owner(self) -> str:
        """What the unit's text was read from: its session, or ``src:{path}`` for a document
        (the embedding cache lists vectors under it, so forgetting can remove them by name)."""
        return self.session if self.session is not None else f"src:{self.source}"


ToolEmbed = Literal["head", "all", "none"]
TOOL_TYPES = frozenset({"action", "observation"})  # tool calls and their output
TURN_TYPES = frozenset({"user", "assistant"})  # a conversation's turns


UNIT_FIELDS: tuple[str, ...] = tuple(f.name for f in fields(Unit))
_JSON_FIELDS = frozenset(f.name for f in fields(Unit) if str(f.type).startswith("dict"))
_TUPLE_FIELDS = frozenset(f.name for f in fields(Unit) if str(f.type).startswith("tuple"))


def unit_row(unit: Unit) -> dict[str, Any]:
    """``unit`` as a table row: mappings as canonical JSON text, tuples as lists."""
    row: dict[str, Any] = {}
    for name in UNIT_FIELDS:
        value = getattr(unit, name)
        if name in _JSON_FIELDS:
            value = (
                None if value is None else orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()
            )
        elif name in _TUPLE_FIELDS:
            value = list(value)
        row[name] = value
    return row


def unit_values(row: dict[str, Any]) -> dict[str, Any]:
    """The unit fields of a table row, decoded (``row`` may hold other columns too)."""
    values: dict[str, Any] = {}
    for name in UNIT_FIELDS:
        value = row.get(name)
        if name in _JSON_FIELDS:
            value = orjson.loads(value) if value else None
        elif name in _TUPLE_FIELDS:
            value = tuple(value or ())
        values[name] = value
    return values


def split_text(text: str, size: int = CHUNK_CHARS, overlap: int = OVERLAP_CHARS) -> list[str]:
    """Pieces of at most ``size`` characters made of whole words (a word longer than ``size``
    is cut), each starting with the last words of the previous piece that fit in ``overlap``."""
    if not text.strip():
        return []
    if len(text) <= size:
        return [text]
    spans = [  # (start, end) of each word, long words cut into size-long parts
        (at, min(at + size, word.end()))
        for word in re.finditer(r"\S+", text)
        for at in range(word.start(), word.end(), size)
    ]
    pieces, first = [], 0
    while first < len(spans):
        last = first
        while last + 1 < len(spans) and spans[last + 1][1] - spans[first][0] <= size:
            last += 1
        pieces.append(text[spans[first][0] : spans[last][1]])
        if last == len(spans) - 1:
            break
        following = last + 1
        while following - 1 > first and spans[last][1] - spans[following - 1][0] <= overlap:
            following -= 1
        first = following
    return pieces


def record_units(record: Record) -> list[Unit]:
    """The units of one record (none for a record without text, or whose content was
    forgotten: ``eventlog.crypto``)."""
    from eventlog.crypto import is_forgotten
    from eventlog.render import record_text
    from eventlog.schema import (
        MEMORY_TYPES,
        STATE_TYPES,
        CompactionRecord,
        ImportedRecord,
        LearningEditedRecord,
        LearningRecord,
        StorePutRecord,
    )

    if is_forgotten(record):
        return []
    if isinstance(record, CompactionRecord):
        return _summary_units(record)
    if isinstance(record, LearningRecord):
        meta: dict[str, Any] = {"learning_id": record.learning_id, "scope": record.scope}
        return [_unit(record, 0, "learning", record.kind, record.text, meta=meta)]
    if isinstance(record, LearningEditedRecord):  # a person's new text for a learning
        if record.text is None:
            return []
        meta = {"learning_id": record.learning_id, "edited": True}
        return [_unit(record, 0, "learning", record.type, record.text, meta=meta)]
    if isinstance(record, StorePutRecord):
        text = store_text(record.value, record.index)
        meta = {"namespace": record.namespace, "key": record.key}
        pieces = split_text(text) if text else []
        return [_unit(record, i, "store", record.type, p, meta=meta) for i, p in enumerate(pieces)]
    if record.type in MEMORY_TYPES or record.type in STATE_TYPES:
        return []
    if isinstance(record, ImportedRecord) and not record.text.strip():
        return []  # a foreign record with nothing to read (progress, snapshots, ...)
    text = record_text(record).strip()
    if not text:
        return []
    pieces = split_text(text)
    return [_unit(record, part, "message", record.type, piece) for part, piece in enumerate(pieces)]


def store_text(value: dict[str, Any], index: list[str] | bool) -> str:
    """The searchable text of a store item's ``value``: the string leaves (other leaves as
    JSON) of the fields ``index`` names (dotted paths; ``"$"`` or True: the whole value)."""
    if index is False:
        return ""
    paths = ["$"] if index is True else index
    found: list[str] = []
    for path in paths:
        node: Any = value
        for step in [] if path == "$" else path.split("."):
            node = node.get(step) if isinstance(node, dict) else None
        _leaves(node, found)
    return "\n".join(found).strip()


def _leaves(node: Any, found: list[str]) -> None:
    if isinstance(node, dict):
        for child in node.values():
            _leaves(child, found)
    elif isinstance(node, list):
        for child in node:
            _leaves(child, found)
    elif isinstance(node, str):
        found.append(node)
    elif node is not None:
        found.append(orjson.dumps(node).decode())


def _unit(record: Record, part: int, kind: UnitKind, type: str, text: str, **fields: Any) -> Unit:
    """A unit cut from ``record`` (its provenance filled in); ``fields`` override the rest."""
    return Unit(
        **{
            "unit_id": f"{record.session}:{record.seq}:{part}",
            "kind": kind,
            "type": type,
            "text": text,
            "session": record.session,
            "seq_from": record.seq,
            "seq_to": record.seq,
            "record_seq": record.seq,
            "part": part,
            "ts": record.ts,
            "event_ids": (record.id,),
            "hashes": (record.hash,),
            "meta": record.meta,
            **fields,
        }
    )


def _summary_units(record: CompactionRecord) -> list[Unit]:
    """Part 0 is the master summary (the whole range), parts 1.. the chunk summaries."""
    from projections.warm import library_file_name

    covers = {
        "session": record.session,
        "first_hash": record.first_hash,
        "last_hash": record.last_hash,
        "library_file": library_file_name(record.library_no),
    }
    summaries = [
        ("master", record.summary, record.from_seq, record.to_seq),
        *(("chunk", c.summary, c.from_seq, c.to_seq) for c in record.chunks),
    ]
    return [
        _unit(
            record,
            part,
            "summary",
            kind,
            text,
            seq_from=first,
            seq_to=last,
            covers={**covers, "from_seq": first, "to_seq": last},
        )
        for part, (kind, text, first, last) in enumerate(summaries)
        if text.strip()
    ]


def source_units(event: SourceIndexedRecord, text: str) -> list[Unit]:
    """Units of one source document, registered by ``event`` (a ``source_indexed`` record,
    named by the units with the document's SHA-256 and the time it was registered): sections
    start at headings; long sections are split."""
    from eventlog.secrets import redact_document  # only documents need the detectors

    relative_path = event.path
    hashes = () if event.sha256 is None else (event.sha256,)  # None: a removed file, no text
    lines = text.splitlines()
    sections: list[tuple[int, int]] = []  # [first line, last line], 1-based
    start = 1
    for number, line in enumerate(lines, start=1):
        if _HEADING.match(line) and number > start:
            sections.append((start, number - 1))
            start = number
    if lines:
        sections.append((start, len(lines)))
    units: list[Unit] = []
    for first, last in sections:
        body = redact_document("\n".join(lines[first - 1 : last]).strip())
        if not body:
            continue
        for piece in split_text(body):
            units.append(
                Unit(
                    unit_id=f"src:{relative_path}:{len(units)}",
                    kind="source",
                    type="document",
                    text=piece,
                    part=len(units),
                    ts=event.ts,
                    event_ids=(event.id,),
                    hashes=hashes,
                    source=relative_path,
                    line_from=first,
                    line_to=last,
                )
            )
    return units
