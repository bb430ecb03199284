"""The hot tier: per session, the last ``hot_window_size`` messages, with their token counts.

State (``state/hot/{session}.json``, canonical JSON, saved with its checkpoint): the window's
entries (seq, id, ts, type, text, tokens, hash, meta: each points back to its record), the total
tokens, the number of messages seen, and once the session has been compacted the link to the
latest summary, whose covered records never re-enter the window.

Invariants: the window never holds more than ``hot_window_size`` entries; ``tokens`` equals the sum
of the entries' counts, which are computed once per record (lazily, only for records still in
the window when the state is saved) and kept in the state; a compaction event removes the
messages it covers and sets the summary link; the file is a function of the records folded and
the fingerprint (window size, message types, encoding), nothing else.
"""

from __future__ import annotations

import os
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from eventlog.layout import read_nofollow, validate_session_id
from eventlog.render import record_text
from eventlog.schema import CompactionRecord, Record
from projections.engine import Checkpoint, FilePerSessionProjector
from projections.files import atomic_write
from projections.tokens import TokenCounter, token_counter
from projections.warm import library_file_name

STATE_VERSION = 1


@dataclass(frozen=True, slots=True)
class HotEntry:
    """One message of a hot window, with its tokens and provenance (seq, id, hash)."""

    seq: int
    id: str
    ts: str
    type: str
    text: str
    tokens: int
    hash: str
    meta: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class HotWindow:
    """What ``load_hot`` returns: the window of one session as of its checkpoint."""

    session: str
    entries: tuple[HotEntry, ...]
    tokens: int
    messages_seen: int
    summary: dict[str, Any] | None
    covered_until: int
    checkpoint: Checkpoint


@dataclass(slots=True)
class HotState:
    """The fold's state: window items are records until saved, then their entries (dicts)."""

    session: str
    window: deque[Record | dict[str, Any]]
    messages_seen: int = 0
    summary: dict[str, Any] | None = None
    covered_until: int = 0  # seq up to which a summary covers the session


def _seq(item: Record | dict[str, Any]) -> int:
    return item["seq"] if isinstance(item, dict) else item.seq


class HotProjector(FilePerSessionProjector[HotState]):
    """Folds a session into its hot window (see the module)."""

    name = "hot"
    suffix = ".json"

    def __init__(
        self, out_dir: Path, *, window_size: int, message_types: tuple[str, ...], encoding: str
    ) -> None:
        super().__init__(out_dir)
        self.window_size = window_size
        self.message_types = frozenset(message_types)
        self.encoding = encoding
        self._counter: TokenCounter | None = None

    @property
    def counter(self) -> TokenCounter:
        """The token counter of the projector's encoding."""
        if self._counter is None:
            self._counter = token_counter(self.encoding)
        return self._counter

    def warm_up(self) -> None:
        _ = self.counter

    def fingerprint(self) -> dict[str, Any]:
        return {
            "version": STATE_VERSION,
            "window_size": self.window_size,
            "message_types": sorted(self.message_types),
            "encoding": self.encoding,
        }

    def empty(self, session: str) -> HotState:
        return HotState(session, deque(maxlen=self.window_size))

    def apply(self, state: HotState, record: Record) -> HotState:
        if isinstance(record, CompactionRecord):
            # The summary now covers everything up to to_seq: those messages leave the window,
            # the link to the latest library file takes their place.
            state.covered_until = record.to_seq
            kept = [item for item in state.window if _seq(item) > record.to_seq]
            state.window = deque(kept, maxlen=self.window_size)
            state.summary = {
                "library_no": record.library_no,
                "link": f"knowledge/library/{library_file_name(record.library_no)}",
                "from_seq": 1,
                "to_seq": record.to_seq,
                "text": record.summary,
                "tokens": record.summary_tokens,
                "event_seq": record.seq,
                "event_hash": record.hash,
            }
        elif record.type in self.message_types and record.seq > state.covered_until:
            state.window.append(record)  # rendered and counted only if still here at save
            state.messages_seen += 1
        return state

    def _entry(self, item: Record | dict[str, Any]) -> dict[str, Any]:
        if isinstance(item, dict):
            return item
        text = record_text(item)
        return {
            "seq": item.seq,
            "id": item.id,
            "ts": item.ts,
            "type": item.type,
            "text": text,
            "tokens": self.counter.count(text),
            "hash": item.hash,
            "meta": item.meta,
        }

    # --------------------------------------------------------------- persistence

    def _serialise(self, state: HotState, checkpoint: Checkpoint) -> bytes:
        entries = [self._entry(item) for item in state.window]
        state.window = deque(entries, maxlen=self.window_size)
        data = {
            "session": state.session,
            "checkpoint": checkpoint.to_json(),
            "fingerprint": self.fingerprint(),
            "entries": entries,
            "tokens": sum(e["tokens"] for e in entries),
            "messages_seen": state.messages_seen,
            "summary": state.summary,
            "covered_until": state.covered_until,
        }
        return orjson.dumps(data, option=orjson.OPT_SORT_KEYS)

    def save(self, session: str, state: HotState, checkpoint: Checkpoint) -> None:
        atomic_write(self.path(session), self._serialise(state, checkpoint))

    def load(self, session: str) -> tuple[HotState, Checkpoint] | None:
        try:
            data = orjson.loads(read_nofollow(self.path(session)))
            if data["fingerprint"] != self.fingerprint():
                return None
            state = HotState(
                session,
                deque(data["entries"], maxlen=self.window_size),
                data["messages_seen"],
                data["summary"],
                data["covered_until"],
            )
            return state, Checkpoint.from_json(data["checkpoint"])
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def item_count(self) -> int:
        return sum(len(w.entries) for s in self.sessions() if (w := load_hot(self.out_dir, s)))


# ------------------------------------------------------------------- reading the tier

_cache: dict[Path, tuple[tuple[int, int, int], HotWindow]] = {}


def load_hot(hot_dir: Path, session: str) -> HotWindow | None:
    """The hot window of ``session`` as last projected (None if it has not been projected, or
    if its file is damaged: a derived file, which the next projection rebuilds).

    Parsed windows are cached by file identity (inode, mtime, size); a new projection replaces the
    file (new inode), so a cached window is never stale.
    """
    path = hot_dir / f"{validate_session_id(session)}.json"
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    key = (st.st_ino, st.st_mtime_ns, st.st_size)
    hit = _cache.get(path)
    if hit is not None and hit[0] == key:
        return hit[1]
    try:
        data = orjson.loads(read_nofollow(path))
        window = HotWindow(
            session=data["session"],
            entries=tuple(HotEntry(**e) for e in data["entries"]),
            tokens=data["tokens"],
            messages_seen=data["messages_seen"],
            summary=data["summary"],
            covered_until=data["covered_until"],
            checkpoint=Checkpoint.from_json(data["checkpoint"]),
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if len(_cache) > 4096:
        _cache.clear()
    _cache[path] = (key, window)
    return window


def render_entry(entry: HotEntry) -> str:
    """One hot entry as prompt text."""
    return f"[#{entry.seq} {entry.type}] {entry.text}"


def format_history(window: HotWindow, budget_tokens: int, counter: TokenCounter) -> str:
    """The text an agent puts in its prompt: the latest summary first, then the hot messages,
    keeping the newest when the budget forces a cut. Never exceeds ``budget_tokens``. When not
    everything fits, the summary gets at most half the budget, so recent messages stay."""
    if budget_tokens <= 0:
        return ""
    blocks = [render_entry(e) for e in window.entries]
    summary = ""
    if window.summary:
        s = window.summary
        summary = (
            f"[summary of #{s['from_seq']}-#{s['to_seq']} {s.get('link', '')}]".replace(" ]", "]")
            + f"\n{s.get('text', '')}"
        )
        whole = counter.count("\n".join([summary, *blocks]))
        if whole > budget_tokens and blocks and counter.count(summary) > budget_tokens // 2:
            summary = counter.truncate(summary, budget_tokens // 2)
    parts = [summary] if summary else []
    # Greedy from the newest message, estimating with per-block counts, then check exactly.
    chosen: list[str] = []
    used = counter.count(summary) if summary else 0
    for block in reversed(blocks):
        separator = 1 if (summary or chosen) else 0  # the newline joining it to the rest
        cost = counter.count(block) + separator
        if used + cost > budget_tokens:
            break
        chosen.append(block)
        used += cost
    chosen.reverse()
    text = "\n".join(parts + chosen)
    while chosen and counter.count(text) > budget_tokens:
        chosen.pop(0)
        text = "\n".join(parts + chosen)
    # The estimate can also run high (tokens merge across a join): add older blocks while the
    # exact count allows.
    older = blocks[: len(blocks) - len(chosen)]
    while older:
        wider = "\n".join([*parts, older[-1], *chosen])
        if counter.count(wider) > budget_tokens:
            break
        chosen.insert(0, older.pop())
        text = wider
    if counter.count(text) > budget_tokens:  # the summary alone does not fit: cut it
        text = counter.truncate(text, budget_tokens)
    return text
