"""A graph framework's state, folded from the log: a thread's checkpoints, and a store's items.

Both are pure folds of records an adapter appended (``airsspec.integrations.langgraph``), so a
thread's history and a store's contents can be read as of any point of the log (fold the
records up to it) and are rebuilt from the log alone. A record whose content was forgotten
(``eventlog.crypto``) contributes nothing.

- ``fold_thread``: a thread's session -> its checkpoints by namespace (in the order written),
  the channel values each wrote (``blobs``, by namespace, channel and version: a checkpoint
  stores only the channels it changed) and the pending writes of each checkpoint. A
  ``thread_deleted`` record empties all three.
- ``fold_store``: a store's session -> its live items by (namespace, key): the last value put,
  when it was created and updated, and its time to live, counted from its last write or touch.
  A deletion removes the item; an item whose time to live ran out by ``now`` is left out.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from eventlog.crypto import is_forgotten
from eventlog.errors import UnreadableRecordError
from eventlog.ids import parse_ts
from eventlog.schema import (
    CheckpointRecord,
    CheckpointWritesRecord,
    Record,
    StoreDeletedRecord,
    StorePutRecord,
    StoreTouchedRecord,
    ThreadDeletedRecord,
)

WriteKey = tuple[str, int]  # (task id, index of the write)


@dataclass
class Thread:
    """A thread's checkpoints as folded (``fold_thread``)."""

    checkpoints: dict[str, dict[str, CheckpointRecord]] = field(default_factory=dict)
    blobs: dict[tuple[str, str, str], Any] = field(default_factory=dict)
    writes: dict[tuple[str, str], dict[WriteKey, dict[str, Any]]] = field(default_factory=dict)


def fold_thread(records: Iterable[Record]) -> Thread:
    """The checkpoints, channel values and pending writes of a thread's ``records``;
    ``UnreadableRecordError`` naming a record the saver could not have written (a blob or a
    write without its version or index, appended by hand)."""
    thread = Thread()
    for record in records:
        if isinstance(record, ThreadDeletedRecord):
            thread = Thread()
        elif is_forgotten(record):
            continue
        elif isinstance(record, CheckpointRecord | CheckpointWritesRecord):
            try:
                _fold_checkpoint(thread, record)
            except (KeyError, TypeError, ValueError, AttributeError) as exc:
                raise UnreadableRecordError.of(record, exc) from exc
    return thread


def _fold_checkpoint(thread: Thread, record: CheckpointRecord | CheckpointWritesRecord) -> None:
    ns = record.checkpoint_ns
    if isinstance(record, CheckpointRecord):
        blobs = {
            (ns, channel, str(b["version"])): b.get("value") for channel, b in record.blobs.items()
        }
        thread.checkpoints.setdefault(ns, {})[record.checkpoint_id] = record
        thread.blobs.update(blobs)
        return
    writes = {
        (record.task_id, int(w["idx"])): {
            **w,
            "task_id": record.task_id,
            "task_path": record.task_path,
        }
        for w in record.writes
    }
    thread.writes.setdefault((ns, record.checkpoint_id), {}).update(writes)


@dataclass(frozen=True)
class StoredItem:
    """A store's live item: its value, when it was created and updated, and its TTL."""

    namespace: tuple[str, ...]
    key: str
    value: dict[str, Any]
    created_at: datetime
    updated_at: datetime
    seq: int  # the record of its last put
    ttl: float | None = None  # minutes
    touched_at: datetime | None = None  # last write or refresh: when its TTL started

    def expired(self, now: datetime) -> bool:
        """Whether its time to live ran out by ``now`` (never, for one that ends past the
        last date a ``datetime`` holds: the log takes any positive ``ttl``)."""
        if self.ttl is None:
            return False
        start = self.touched_at or self.updated_at
        try:
            return now >= start + timedelta(minutes=self.ttl)
        except OverflowError:
            return False


def fold_store(
    records: Iterable[Record], now: datetime | None = None
) -> dict[tuple[tuple[str, ...], str], StoredItem]:
    """The live items of a store's ``records`` by (namespace, key); with ``now``, those whose
    time to live ran out by then are left out."""
    items: dict[tuple[tuple[str, ...], str], StoredItem] = {}
    for record in records:
        if is_forgotten(record):
            continue
        when = parse_ts(record.ts)
        if isinstance(record, StorePutRecord):
            ident = (tuple(record.namespace), record.key)
            before = items.get(ident)
            items[ident] = StoredItem(
                ident[0],
                record.key,
                record.value,
                before.created_at if before else when,
                when,
                record.seq,
                record.ttl,
                when,
            )
        elif isinstance(record, StoreDeletedRecord):
            items.pop((tuple(record.namespace), record.key), None)
        elif isinstance(record, StoreTouchedRecord):
            for namespace, key in record.items:
                ident = (tuple(namespace), key)
                if (item := items.get(ident)) is not None and item.ttl is not None:
                    items[ident] = StoredItem(**{**item.__dict__, "touched_at": when})
    if now is None:
        return items
    return {ident: item for ident, item in items.items() if not item.expired(now)}
