"""LangGraph's long-term store and thread checkpoints kept on the log of a ``Memory``.

``AirsspecStore(memory)`` is a ``BaseStore``: the items of every namespace live in one session
of the workspace, the store's (``store_session``: ``langgraph-store`` for an unscoped memory,
one per scope otherwise, so the scope gate decides who reads which items), as ``store_put``
and ``store_deleted`` events keyed by (namespace, key). ``get``, ``search`` and
``list_namespaces`` read a fold of those events (``airsspec.memory.fold_store``); a ``search``
with a ``query`` asks this memory's own search (``Memory.search``: lexical and semantic, over
the fields each put indexes), and ``filter`` compares values as LangGraph's in-memory store
does. TTL is in the events too: a put's ``ttl`` (minutes), a read with ``refresh_ttl`` records
a ``store_touched`` event (a read-only memory's reads refresh none), an expired item is left
out of every read, and ``sweep_expired`` records its deletion (``reason: expired``).

``AirsspecSaver(memory)`` is a ``BaseCheckpointSaver``: a thread is the session named by its
``thread_id``; each checkpoint is a ``checkpoint`` event (with the values of the channels it
changed: plain JSON as it is, anything else serialized by the saver's serde), each task's
pending writes a ``checkpoint_writes``
event, ``delete_thread`` a ``thread_deleted`` event. So ``airsspec replay THREAD`` shows a
thread's history, and ``saver.as_of(time or seq)`` reads the thread as it was then.

Every write is one append through ``memory`` (its scope gate included); every read folds the
records ``memory`` may read. The async methods run the same calls in a worker thread.

    from langgraph.graph import StateGraph
    from airsspec.integrations.langgraph import AirsspecSaver, AirsspecStore
    from airsspec.memory import Memory

    memory = Memory.open(".", create=True, user="ana")
    graph = builder.compile(checkpointer=AirsspecSaver(memory), store=AirsspecStore(memory))
"""

from __future__ import annotations

import asyncio
import base64
import functools
import logging
import math
from collections.abc import AsyncIterator, Callable, Coroutine, Iterable, Iterator, Sequence
from datetime import UTC, datetime
from typing import Any, Concatenate, ParamSpec, TypeVar

from airsspec.errors import UnreadableRecordError
from airsspec.memory import (
    MEMORY_SESSION,
    SEARCH_MAX_K,
    Memory,
    Record,
    StoredItem,
    Thread,
    fold_store,
    fold_thread,
    validate_session_id,
)

logger = logging.getLogger(__name__)

try:
    from langchain_core.runnables import RunnableConfig
    from langgraph.checkpoint.base import (
        WRITES_IDX_MAP,
        BaseCheckpointSaver,
        ChannelVersions,
        Checkpoint,
        CheckpointMetadata,
        CheckpointTuple,
        get_checkpoint_id,
        get_checkpoint_metadata,
        writes_sort_key,
    )
    from langgraph.checkpoint.serde.base import SerializerProtocol
    from langgraph.store.base import (
        BaseStore,
        GetOp,
        Item,
        ListNamespacesOp,
        Op,
        PutOp,
        Result,
        SearchItem,
        SearchOp,
        TTLConfig,
    )
    from langgraph.store.memory import _compare_values, _does_match
except ImportError as exc:  # the optional extra
    raise ImportError(
        f"{exc}: the LangGraph adapter needs pip install 'airsspec-memory[langgraph]'"
    ) from exc

P = ParamSpec("P")
R = TypeVar("R")
S = TypeVar("S")
F = TypeVar("F", bound=Callable[..., Any])

STORE_SESSION = "langgraph-store"
"""The session of an unscoped memory's store (a scoped memory's adds a digest of its scope)."""


def store_session(memory: Memory) -> str:
    """The session ``memory``'s store keeps its items in: one per scope, so the scope gate
    keeps one user's items from another (``memory.scopes.own_session``: refused when another
    scope wrote there first)."""
    return memory.scopes.own_session(STORE_SESSION)


def _records(memory: Memory, session: str, until: Any = None) -> list[Record]:
    """The records of ``session`` that ``memory`` may read, up to ``until`` (none when it
    has no such session)."""
    if not memory.has_session(session):
        return []
    return list(memory.replay(session, until=until))


# --------------------------------------------------------------------------- the store


class AirsspecStore(BaseStore):
    """LangGraph's ``BaseStore`` over ``memory`` (see the module); ``ttl``: LangGraph's
    ``TTLConfig`` (``default_ttl`` minutes, ``refresh_on_read``); ``clock``: what time it is
    when an item's time to live is compared (an aware datetime; default: now)."""

    supports_ttl = True

    def __init__(
        self,
        memory: Memory,
        *,
        ttl: TTLConfig | None = None,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.memory = memory
        self.ttl_config = ttl
        self.clock = clock

    @property
    def session(self) -> str:
        """The session of this store's items, checked at each use: another scope may write
        there first at any time (``store_session``)."""
        return store_session(self.memory)

    def _items(self, now: datetime) -> dict[tuple[tuple[str, ...], str], StoredItem]:
        return fold_store(_records(self.memory, self.session), now)

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run ``ops`` in order against the store as it was before them; the puts (the last
        per namespace and key) are then appended in one atomic batch, with the TTL refreshes
        the reads asked for."""
        now = self.clock()
        items = self._items(now)
        results: list[Result] = []
        puts: dict[tuple[tuple[str, ...], str], PutOp] = {}
        touched: dict[tuple[tuple[str, ...], str], None] = {}
        for op in ops:
            if isinstance(op, GetOp):
                found = items.get((op.namespace, op.key))
                results.append(_item(found) if found else None)
                if found and op.refresh_ttl and found.ttl is not None:
                    touched[(op.namespace, op.key)] = None
            elif isinstance(op, SearchOp):
                hits = self._search(op, items)
                results.append(hits)
                if op.refresh_ttl:
                    for hit in hits:
                        if items[(hit.namespace, hit.key)].ttl is not None:
                            touched[(hit.namespace, hit.key)] = None
            elif isinstance(op, ListNamespacesOp):
                results.append(_namespaces(op, items))
            elif isinstance(op, PutOp):
                puts[(op.namespace, op.key)] = op
                results.append(None)
            else:
                raise ValueError(f"unknown store operation {type(op).__name__}")
        events = [_put_event(op) for op in puts.values()]
        if touched and not self.memory.read_only:  # a reader who may not write refreshes none
            events.append({"type": "store_touched", "items": [[list(n), k] for n, k in touched]})
        if events:
            self.memory.append_many(self.session, events)
        return results

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """``batch`` in a worker thread."""
        return await asyncio.to_thread(self.batch, list(ops))

    def _search(
        self, op: SearchOp, items: dict[tuple[tuple[str, ...], str], StoredItem]
    ) -> list[SearchItem]:
        """The items under ``op``'s namespace prefix whose values pass its filter; with a
        query, those this memory's search finds first, by its score (then the rest)."""
        size = len(op.namespace_prefix)
        candidates = {
            ident: item
            for ident, item in items.items()
            if ident[0][:size] == op.namespace_prefix
            and all(_compare_values(item.value.get(k), v) for k, v in (op.filter or {}).items())
        }
        scored: dict[tuple[tuple[str, ...], str], float] = {}
        if op.query and candidates:
            # the search gives SEARCH_MAX_K hits at most: past them, the page is unscored
            wanted = min(SEARCH_MAX_K, max(10, 4 * (op.offset + op.limit)))
            found = self.memory.search(op.query, k=wanted, session=self.session, kinds=["store"])
            for hit in found["hits"]:
                meta = hit.get("meta") or {}
                ident = (tuple(meta.get("namespace", ())), meta.get("key"))
                item = candidates.get(ident)  # type: ignore[arg-type]
                if item is not None and item.seq == hit.get("record_seq"):
                    scored.setdefault(ident, float(hit["score"]))  # type: ignore[arg-type]
        order = [*scored, *(ident for ident in candidates if ident not in scored)]
        chosen = order[op.offset : op.offset + op.limit]
        return [_item(candidates[ident], score=scored.get(ident), search=True) for ident in chosen]

    def sweep_expired(self) -> int:
        """Record the deletion of every item whose time to live ran out (``store_deleted``,
        reason ``expired``); how many."""
        now = self.clock()
        held = fold_store(_records(self.memory, self.session)).values()
        expired = [item for item in held if item.expired(now)]
        events = [
            {
                "type": "store_deleted",
                "namespace": list(i.namespace),
                "key": i.key,
                "reason": "expired",
            }
            for i in expired
        ]
        if events:
            self.memory.append_many(self.session, events)
        return len(events)


def _put_event(op: PutOp) -> dict[str, Any]:
    """The event of a put (a deletion when its value is None)."""
    namespace = list(op.namespace)
    if op.value is None:
        return {"type": "store_deleted", "namespace": namespace, "key": op.key}
    index = True if op.index is None else op.index
    event = {"type": "store_put", "namespace": namespace, "key": op.key, "value": dict(op.value)}
    return {**event, "index": list(index) if isinstance(index, list) else index, "ttl": op.ttl}


def _item(stored: StoredItem, *, score: float | None = None, search: bool = False) -> Any:
    """LangGraph's ``Item`` (``SearchItem`` for a search) of a stored item."""
    namespace, key, value = stored.namespace, stored.key, stored.value
    made, updated = stored.created_at, stored.updated_at
    if search:
        return SearchItem(namespace, key, value, made, updated, score)
    return Item(value=value, key=key, namespace=namespace, created_at=made, updated_at=updated)


def _namespaces(
    op: ListNamespacesOp, items: dict[tuple[tuple[str, ...], str], StoredItem]
) -> list[tuple[str, ...]]:
    """The namespaces holding live items that match ``op``'s conditions, sorted, cut at its
    depth and page."""
    held = {namespace for namespace, _ in items}
    matched = [n for n in held if all(_does_match(c, n) for c in op.match_conditions or ())]
    if op.max_depth is not None:
        matched = list({n[: op.max_depth] for n in matched})
    return sorted(matched)[op.offset : op.offset + op.limit]


# --------------------------------------------------------------------------- the checkpointer

_PLAIN_DEPTH = 32  # deeper values go through the serde: the log refuses deep nesting


def _plain(value: Any, depth: int = 0) -> bool:
    """Whether ``value`` is JSON the log stores and gives back exactly, of exactly these
    types (a tuple, a str subclass, a non-finite float or a huge int is not)."""
    kind = type(value)
    if depth > _PLAIN_DEPTH:
        return False
    if kind is str:
        return value.isascii() or not any("\ud800" <= c <= "\udfff" for c in value)
    if kind is int:
        return -(2**63) <= value < 2**64
    if kind is float:
        return math.isfinite(value)
    if kind is bool or value is None:
        return True
    if kind is list:
        return all(_plain(v, depth + 1) for v in value)
    if kind is dict:
        return all(type(k) is str and _plain(v, depth + 1) for k, v in value.items())
    return False


def _twin_of(call: Callable[..., Any], twin: F, how: str) -> F:
    """``twin`` named as LangGraph names ``call``'s (``aput`` for ``put``), ``call``'s
    parameters shown (``inspect.signature``)."""
    functools.update_wrapper(twin, call)
    twin.__name__ = "a" + call.__name__
    twin.__qualname__ = call.__qualname__.removesuffix(call.__name__) + twin.__name__
    twin.__doc__ = f"``{call.__name__}`` {how}."
    return twin


def _in_thread(
    call: Callable[Concatenate[S, P], R],
) -> Callable[Concatenate[Any, P], Coroutine[Any, Any, R]]:
    """The async twin of the saver's ``call`` (LangGraph's interface wants both): the same
    call in a worker thread, with its parameters."""

    async def twin(self: Any, *args: P.args, **kwargs: P.kwargs) -> R:
        return await asyncio.to_thread(call, self, *args, **kwargs)

    return _twin_of(call, twin, "in a worker thread")


def _read_in_thread(
    call: Callable[Concatenate[S, P], Iterator[R]],
) -> Callable[Concatenate[Any, P], AsyncIterator[R]]:
    """``_in_thread`` for a call that yields: read whole in the worker thread, then yielded."""

    async def twin(self: Any, *args: P.args, **kwargs: P.kwargs) -> AsyncIterator[R]:
        for item in await asyncio.to_thread(lambda: list(call(self, *args, **kwargs))):
            yield item

    return _twin_of(call, twin, "read in a worker thread")


def _left_out(exc: UnreadableRecordError, config: RunnableConfig | None) -> None:
    """A listing of one thread raises ``exc``; one of every thread (``config`` None) leaves
    the record out, with a warning: one thread's hand-made record never hides the others'."""
    if config is not None:
        raise exc
    logger.warning("left out of the checkpoints listed: %s", exc)


class AirsspecSaver(BaseCheckpointSaver[int]):
    """LangGraph's ``BaseCheckpointSaver`` over ``memory`` (see the module); ``until``: read
    every thread as of that time or seq (``as_of``)."""

    def __init__(
        self,
        memory: Memory,
        *,
        serde: SerializerProtocol | None = None,
        until: str | int | datetime | None = None,
    ) -> None:
        super().__init__(serde=serde)
        self.memory = memory
        self.until = until

    def as_of(self, until: str | int | datetime) -> AirsspecSaver:
        """This saver reading each thread as it was at ``until`` (a time, or a seq of the
        thread's session); it writes nothing (a write is ``ReadOnlyTokenError``)."""
        return AirsspecSaver(self.memory.scoped(read_only=True), serde=self.serde, until=until)

    def _thread(self, thread_id: str) -> Thread:
        return fold_thread(_records(self.memory, validate_session_id(thread_id), self.until))

    def _dump(self, value: Any) -> dict[str, Any]:
        """``value`` as stored: itself when it is plain JSON (readable in ``replay``), else
        what the saver's serde makes of it (base64)."""
        if _plain(value):
            return {"json": value}
        kind, data = self.serde.dumps_typed(value)
        return {"type": kind, "data": base64.b64encode(data).decode("ascii")}

    def _load(self, stored: dict[str, Any]) -> Any:
        if "json" in stored:
            return stored["json"]
        return self.serde.loads_typed((stored["type"], base64.b64decode(stored["data"])))

    def _tuple(self, thread_id: str, thread: Thread, ns: str, cid: str) -> CheckpointTuple:
        """The checkpoint ``cid`` of ``thread``, with its channel values and pending writes;
        ``UnreadableRecordError`` naming its record when the saver could not have written it
        (appended by hand: the serde, or the checkpoint's own fields, fail on it)."""
        record = thread.checkpoints[ns][cid]
        try:
            return self._loaded(thread_id, thread, ns, cid)
        except Exception as exc:  # a serde raises its own kinds
            raise UnreadableRecordError.of(record, exc) from exc

    def _loaded(self, thread_id: str, thread: Thread, ns: str, cid: str) -> CheckpointTuple:
        record = thread.checkpoints[ns][cid]
        checkpoint: Checkpoint = self._load(record.checkpoint)
        values = {}
        for channel, version in checkpoint["channel_versions"].items():
            blob = thread.blobs.get((ns, channel, str(version)))
            if blob is not None:
                values[channel] = self._load(blob)
        writes = thread.writes.get((ns, cid), {})
        ordered = sorted(
            writes.values(), key=lambda w: writes_sort_key(w["task_path"], w["task_id"], w["idx"])
        )

        def config(checkpoint_id: str) -> RunnableConfig:
            ids = {"thread_id": thread_id, "checkpoint_ns": ns, "checkpoint_id": checkpoint_id}
            return {"configurable": ids}

        return CheckpointTuple(
            config=config(cid),
            checkpoint={**checkpoint, "channel_values": values},
            metadata=self._load(record.metadata),
            parent_config=config(record.parent_id) if record.parent_id else None,
            pending_writes=[(w["task_id"], w["channel"], self._load(w["value"])) for w in ordered],
        )

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """The checkpoint ``config`` names (its thread's latest when it names none)."""
        thread_id = str(config["configurable"]["thread_id"])
        ns = config["configurable"].get("checkpoint_ns", "")
        thread = self._thread(thread_id)
        held = thread.checkpoints.get(ns, {})
        cid = get_checkpoint_id(config) or (max(held) if held else None)
        return self._tuple(thread_id, thread, ns, cid) if cid in held else None

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        """The checkpoints of ``config``'s thread (of every thread ``memory`` may read when
        None), newest first, whose metadata has ``filter``'s values, before ``before``."""
        if config is not None:
            threads: Sequence[str] = [str(config["configurable"]["thread_id"])]
            only_ns = config["configurable"].get("checkpoint_ns")
            only_id = get_checkpoint_id(config)
        else:
            threads = [s for s in self.memory.sessions.names() if s != MEMORY_SESSION]
            only_ns = only_id = None
        before_id = get_checkpoint_id(before) if before else None
        for thread_id in threads:
            try:
                thread = self._thread(thread_id)
            except UnreadableRecordError as exc:
                _left_out(exc, config)
                continue
            for ns, held in thread.checkpoints.items():
                if only_ns is not None and ns != only_ns:
                    continue
                for cid in sorted(held, reverse=True):
                    if (only_id and cid != only_id) or (before_id and cid >= before_id):
                        continue
                    try:
                        found = self._tuple(thread_id, thread, ns, cid)
                    except UnreadableRecordError as exc:
                        _left_out(exc, config)
                        continue
                    if filter and any(found.metadata.get(k) != v for k, v in filter.items()):
                        continue
                    if limit is not None and limit <= 0:
                        return
                    if limit is not None:
                        limit -= 1
                    yield found

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Append ``checkpoint`` to its thread, with the values of the channels it changed."""
        thread_id = str(config["configurable"]["thread_id"])
        ns = config["configurable"].get("checkpoint_ns", "")
        stored = {k: v for k, v in checkpoint.items() if k != "channel_values"}
        values = checkpoint["channel_values"]
        blobs = {
            channel: {
                "version": str(version),
                "value": self._dump(values[channel]) if channel in values else None,
            }
            for channel, version in new_versions.items()
        }
        event = {
            "type": "checkpoint",
            "checkpoint_ns": ns,
            "checkpoint_id": checkpoint["id"],
            "parent_id": config["configurable"].get("checkpoint_id"),
            "checkpoint": self._dump(stored),
            "metadata": self._dump(get_checkpoint_metadata(config, metadata)),
            "blobs": blobs,
        }
        self.memory.append(validate_session_id(thread_id), event)
        ids = {"thread_id": thread_id, "checkpoint_ns": ns, "checkpoint_id": checkpoint["id"]}
        return {"configurable": ids}

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """Append a task's pending writes against ``config``'s checkpoint (a write already
        stored at the same index is kept, except the special channels', which replace)."""
        thread_id = str(config["configurable"]["thread_id"])
        ns = config["configurable"].get("checkpoint_ns", "")
        cid = config["configurable"]["checkpoint_id"]
        held = self._thread(thread_id).writes.get((ns, cid), {})
        kept = []
        for idx, (channel, value) in enumerate(writes):
            at = WRITES_IDX_MAP.get(channel, idx)
            if at >= 0 and (task_id, at) in held:
                continue
            kept.append({"channel": channel, "idx": at, "value": self._dump(value)})
        if kept:
            event = {
                "type": "checkpoint_writes",
                "checkpoint_ns": ns,
                "checkpoint_id": cid,
                "task_id": task_id,
                "task_path": task_path,
                "writes": kept,
            }
            self.memory.append(validate_session_id(thread_id), event)

    def delete_thread(self, thread_id: str) -> None:
        """Record that the thread's checkpoints and writes are deleted (nothing for a thread
        with none): reads no longer see them, ``replay`` still shows them (``forget`` shreds)."""
        session = validate_session_id(str(thread_id))
        if self._thread(session).checkpoints:
            self.memory.append(session, {"type": "thread_deleted"})

    aget_tuple = _in_thread(get_tuple)
    alist = _read_in_thread(list)
    aput = _in_thread(put)
    aput_writes = _in_thread(put_writes)
    adelete_thread = _in_thread(delete_thread)
