"""Readable text of records: for ``replay``, and for anything that shows or indexes messages.

``record_text`` is the content of a record as a person (or an embedder) would read it: actions as
``tool(params)``, observations as their result, unknown types as their JSON minus the envelope.
It is a pure function of the record.

``printable`` is how stored text reaches a person: every human-readable output of stored content
(``replay``, ``hot``, ``context``, ``sessions``, ``query``, ``learnings``, ``sql``'s table) passes
it, so a record holding terminal escape sequences (``\x1b]0;...\x07``, ``\x1b[2J``), carriage
returns, Unicode line separators or bidirectional overrides shows them escaped (``\x1b``,
``\u202e``) instead of acting on the terminal. It is applied in text output always, not only on
a terminal (a pager or a later ``cat`` of the file would act on them too); ``--json`` keeps the
exact values (JSON escapes what it must).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from functools import cache
from typing import TYPE_CHECKING, Any

import orjson

from eventlog.fast_input import CONVERSATION_TYPES
from eventlog.plain import modelled

if TYPE_CHECKING:
    from eventlog.plain import Stored
    from eventlog.schema import ActionRecord, ImportedRecord, ObservationRecord, Record

ENVELOPE = frozenset(
    {"v", "id", "session", "seq", "ts", "type", "prev", "hash", "meta", "batch", "origin"}
)


# C0 controls but newline and tab, DEL, C1 controls, line and paragraph separators, and the
# bidirectional embeddings, overrides and isolates.
_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: str) -> str:
    """``text`` safe to show a person: control characters (but newline and tab) and the
    characters that reorder or break lines invisibly, written as ``\\xNN`` / ``\\uNNNN``."""
    return _UNSAFE.sub(_escape, text) if _UNSAFE.search(text) else text


def _json(value: Any) -> str:
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()


@cache
def _kinds() -> tuple[type[ActionRecord], type[ObservationRecord], type[ImportedRecord]]:
    """The record classes shown their own way, imported when a record is shown (there is one,
    so the schema is loaded): ``printable`` alone (``sessions``) imports no pydantic."""
    from eventlog.schema import ActionRecord, ImportedRecord, ObservationRecord

    return ActionRecord, ObservationRecord, ImportedRecord


PLAIN_TEXT = CONVERSATION_TYPES
"""The types whose text is shown from their stored dict (``eventlog.plain.Stored``): the
messages and imported records; any other record is shown from its model (its text is every
field, defaults included)."""


def _plain_text(record: Stored) -> str:
    """``record_text`` of a checked stored dict of a ``PLAIN_TEXT`` type (defaults filled in)."""
    kind = record["type"]
    if kind == "action":
        return f"{record['tool']}({_json(record['params'])})"
    if kind == "observation":
        result = record["result"]
        result = result if isinstance(result, str) else _json(result)
        return f"ERROR: {result}" if record["is_error"] else result
    if kind == "imported":
        return f"[{record['kind']}] {record['text']}".rstrip()
    return record["content"]  # type: ignore[no-any-return]


def record_text(record: Record | Stored) -> str:
    """The readable content of one record (a model, or a stored dict of a ``PLAIN_TEXT``
    type)."""
    if isinstance(record, dict):
        if record["type"] in PLAIN_TEXT:
            return _plain_text(record)
        record = modelled(record)
    action, observation, imported = _kinds()
    if isinstance(record, action):
        return f"{record.tool}({_json(record.params)})"
    if isinstance(record, observation):
        result = record.result if isinstance(record.result, str) else _json(record.result)
        return f"ERROR: {result}" if record.is_error else result
    if isinstance(record, imported):
        return f"[{record.kind}] {record.text}".rstrip()
    content = getattr(record, "content", None)
    if isinstance(content, str):
        return content
    fields = {k: v for k, v in record.model_dump().items() if k not in ENVELOPE}
    return _json(fields)


def _shown(record: Record | Stored) -> tuple[str | None, tuple[str, str, int] | None, str | None]:
    """What a replay header shows beyond the envelope: the action an observation answers, the
    origin (format, source, index), an imported record's kind."""
    if isinstance(record, dict):
        kind, origin = record["type"], record.get("origin")
        return (
            record.get("action_id") if kind == "observation" else None,
            None if origin is None else (origin["format"], origin["source"], origin["index"]),
            record["kind"] if kind == "imported" else None,
        )
    _, observation, imported = _kinds()
    at = record.origin
    return (
        record.action_id if isinstance(record, observation) else None,
        None if at is None else (at.format, at.source, at.index),
        record.kind if isinstance(record, imported) else None,
    )


def format_record(
    record: Record | Stored, seq_of_id: dict[str, int] | None = None, *, full_meta: bool = False
) -> str:
    """A replay block: a header line (seq, time, type) and the indented text, ``printable``.

    ``seq_of_id`` maps event ids seen so far to their seq, so an observation can name the
    action it answers by seq. Long ``meta`` is summarised unless ``full_meta``.
    """
    answers, origin, kind = _shown(record)
    header = f"#{record.seq:<5} {record.ts}  {record.type}"
    if answers:
        target = (seq_of_id or {}).get(answers)
        header += f"  (answers #{target})" if target else f"  (answers {answers})"
    if origin is not None:
        header += f"  from {origin[0]} {origin[1]}#{origin[2]}"
    if record.meta:
        meta = _json(record.meta)
        short = len(meta) <= 100 or full_meta
        header += f"  meta={meta}" if short else f"  meta: {len(record.meta)} keys (--meta)"
    if kind is not None and kind.endswith("compact_boundary"):
        header += "\n    ---- compaction boundary: the conversation was compacted here ----"
    elif (record.meta or {}).get("kind") == "compact_summary":
        header += "\n    ---- compaction summary (what the agent kept of the history) ----"
    lines = record_text(record).split("\n")  # only \n: other separators are shown escaped
    if len(lines) > 1 and not lines[-1]:
        lines.pop()
    body = "\n".join(f"    {line}" for line in lines)
    return printable(f"{header}\n{body}")


def replay_lines(
    pairs: Iterable[tuple[Record | Stored, bytes]],
    from_seq: int = 1,
    *,
    stored: bool = False,
    full_meta: bool = False,
) -> Iterator[tuple[int, str]]:
    """(seq, line) for each of ``pairs`` (a session's records with their stored lines, from its
    first) from ``from_seq``: the ``format_record`` block, or with ``stored`` the line exactly
    as stored. What ``airsspec replay`` prints, whichever process reads the log. A record
    may be a stored dict (``EventLog.read(plain=True)``): one of a type outside ``PLAIN_TEXT``
    is made a model to be shown."""
    seq_of_id: dict[str, int] = {}  # a record shown links to the seq of one it refers to
    for record, raw in pairs:
        seq_of_id[record.id] = record.seq
        if record.seq >= from_seq:
            if not stored and isinstance(record, dict) and record["type"] not in PLAIN_TEXT:
                record = modelled(record)
            shown = (
                raw.decode("utf-8")
                if stored
                else format_record(record, seq_of_id, full_meta=full_meta)
            )
            yield record.seq, shown
