"""Readable text of records: for ``replay``, and for anything that shows or indexes messages.

``record_text`` is the content of a record as a person (or an embedder) would read it: actions as
``tool(params)``, observations as their result, unknown types as their JSON minus the envelope.
It is a pure function of the record.
"""

from __future__ import annotations

from typing import Any

import orjson

from eventlog.schema import ActionRecord, ImportedRecord, ObservationRecord, Record

ENVELOPE = frozenset(
    {"v", "id", "session", "seq", "ts", "type", "prev", "hash", "meta", "batch", "origin"}
)


def _json(value: Any) -> str:
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()


def record_text(record: Record) -> str:
    """The readable content of one record."""
    if isinstance(record, ActionRecord):
        return f"{record.tool}({_json(record.params)})"
    if isinstance(record, ObservationRecord):
        result = record.result if isinstance(record.result, str) else _json(record.result)
        return f"ERROR: {result}" if record.is_error else result
    if isinstance(record, ImportedRecord):
        return f"[{record.kind}] {record.text}".rstrip()
    content = getattr(record, "content", None)
    if isinstance(content, str):
        return content
    fields = {k: v for k, v in record.model_dump().items() if k not in ENVELOPE}
    return _json(fields)


def format_record(
    record: Record, seq_of_id: dict[str, int] | None = None, *, full_meta: bool = False
) -> str:
    """A replay block: a header line (seq, time, type) and the indented text.

    ``seq_of_id`` maps event ids seen so far to their seq, so an observation can name the
    action it answers by seq. Long ``meta`` is summarised unless ``full_meta``.
    """
    header = f"#{record.seq:<5} {record.ts}  {record.type}"
    if isinstance(record, ObservationRecord) and record.action_id:
        target = (seq_of_id or {}).get(record.action_id)
        header += f"  (answers #{target})" if target else f"  (answers {record.action_id})"
    if record.origin is not None:
        header += f"  from {record.origin.format} {record.origin.source}#{record.origin.index}"
    if record.meta:
        meta = _json(record.meta)
        short = len(meta) <= 100 or full_meta
        header += f"  meta={meta}" if short else f"  meta: {len(record.meta)} keys (--meta)"
    if isinstance(record, ImportedRecord) and record.kind.endswith("compact_boundary"):
        header += "\n    ---- compaction boundary: the conversation was compacted here ----"
    elif (record.meta or {}).get("kind") == "compact_summary":
        header += "\n    ---- compaction summary (what the agent kept of the history) ----"
    body = "\n".join(f"    {line}" for line in record_text(record).splitlines() or [""])
    return f"{header}\n{body}"
