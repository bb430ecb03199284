"""An agents SDK session's items: a fold of its session's records.

An item an agent framework adds (the OpenAI Agents SDK's ``TResponseInputItem``: a message, a
function call or its output, a reasoning item...) is appended as the message record that says the
same thing (``item_event``: a user or assistant message, an action, an observation, a thought; an
item with no such counterpart is ``imported``), with the item itself, exactly as given, in the
record's ``meta`` under ``ITEM_KEY``. So the conversation is read, searched, compacted and
forgotten like any other, and the item comes back equal to what was added.

``items`` folds a session's records into its items, oldest first: an ``item_popped`` record
removes the item it names, ``items_cleared`` removes every item before it, and a record whose
content was forgotten (``eventlog.crypto``) is no item. With ``compacted``, the items a
compaction covers are replaced by one message holding its summary.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import orjson

from eventlog.crypto import is_forgotten
from eventlog.schema import CompactionRecord, ItemPoppedRecord, ItemsClearedRecord, Record

ITEM_KEY = "agents_item"
"""The ``meta`` key an item is kept under, as given."""

_ROLE_TYPES = {"user": "user", "assistant": "assistant"}
_TEXT_PARTS = {"input_text", "output_text", "text", "refusal", "summary_text", "reasoning_text"}


def _text(content: Any) -> str:
    """The readable text of a message's content: a string, or the text of its parts."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    parts = [p for p in content if isinstance(p, dict) and p.get("type") in _TEXT_PARTS]
    return "\n".join(str(p.get("text") or p.get("refusal") or "") for p in parts)


def item_event(item: dict[str, Any]) -> dict[str, Any]:
    """The event that records ``item`` (see the module); ``meta`` holds the item itself."""
    kind = item.get("type", "message")
    meta = {ITEM_KEY: item}
    if kind == "message" and item.get("role") in _ROLE_TYPES:
        body: dict[str, Any] = {
            "type": _ROLE_TYPES[item["role"]],
            "content": _text(item.get("content")),
        }
    elif kind == "function_call":
        try:
            params = orjson.loads(item.get("arguments") or "{}")
        except orjson.JSONDecodeError:
            params = None
        if not isinstance(params, dict):
            params = {"arguments": item.get("arguments")}
        body = {"type": "action", "tool": item.get("name") or "function", "params": params}
    elif kind == "function_call_output":
        output = item.get("output")
        body = {
            "type": "observation",
            "result": output if isinstance(output, str) else _text(output),
        }
    elif kind == "reasoning":
        body = {
            "type": "thought",
            "content": _text(item.get("summary")) or _text(item.get("content")),
        }
    else:  # a system message, a hosted tool's call, an item reference...
        text = _text(item.get("content")) if kind == "message" else ""
        body = {
            "type": "imported",
            "kind": f"{kind}:{item.get('role')}" if kind == "message" else kind,
            "text": text,
        }
    return {**body, "meta": meta}


def items(
    records: Iterable[Record], *, compacted: bool = False
) -> list[tuple[int, dict[str, Any]]]:
    """The items of a session's ``records`` (read in order), oldest first, each with the seq
    of the record it was added as (a summary's: the compaction's)."""
    held: list[tuple[int, dict[str, Any]]] = []
    for record in records:
        if isinstance(record, ItemPoppedRecord):
            held = [(seq, item) for seq, item in held if seq != record.of_seq]
        elif isinstance(record, ItemsClearedRecord):
            held = []
        elif compacted and isinstance(record, CompactionRecord) and not is_forgotten(record):
            summary = {
                "role": "system",
                "content": f"Summary of the earlier conversation:\n{record.summary}",
            }
            held = [(record.seq, summary), *((s, i) for s, i in held if s > record.to_seq)]
        elif record.meta and ITEM_KEY in record.meta and not is_forgotten(record):
            held.append((record.seq, record.meta[ITEM_KEY]))
    return held
