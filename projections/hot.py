"""The hot tier: per session, every message no summary covers yet, newest ``hot_window_size``
first among them, with their token counts.

State (``state/hot/{session}.json``, canonical JSON, saved with its checkpoint): the window's
entries (seq, id, ts, type, text, tokens, hash, meta: each points back to its record), the
``overflow`` (older messages that left the window but that no compaction covers yet: they stay
visible until one does), the total tokens, the number of messages seen, and once the session has
been compacted the link to the latest summary, whose covered records never re-enter the window.

A message over ``message_cap_tokens`` is kept as its head and tail with a marker naming what was
cut and the ``airsspec replay`` command that shows it whole (``projections.fitting.elide``).

Invariants: the window never holds more than ``hot_window_size`` entries; every message after
the latest summary is in the window or the overflow (no message is ever both uncovered and
invisible); ``tokens`` equals the sum of the entries' and overflow's counts; a compaction event
removes the messages it covers and sets the summary link; the file is a function of the records
folded and the fingerprint (window size, message types, encoding, cap), nothing else.

Counting: a message is counted at save only when its UTF-8 bytes pass the cap (a token is at
least one byte: ``tokens.most_tokens``), since only then may it need cutting; a shorter one is
kept with ``tokens`` null, and the total is null while any is. So an append of everyday messages
folds without loading the encoding (a few times Python's own start). Whether a message is
counted depends on its text and the cap alone, so a rebuild equals the incremental fold. A
reader that needs the numbers counts them (``counted``, ``tokens_of``: the hot command, the
compactor); one that only asks whether the window fits a budget answers from the bytes while
they fit (``most_tokens_of``). Counts found on reading are not written back: the file stays a
function of the records, whichever reads came first. A state saved before (every message
counted) reads the same.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import orjson

from eventlog.layout import read_nofollow, validate_session_id
from eventlog.overrides import override
from eventlog.plain import Stored
from eventlog.render import record_text
from projections.checkpoints import Checkpoint
from projections.files import KeptOnDisk
from projections.fitting import elide, fit_summary, pack, parse_sections, render_sections
from projections.fold import Projector
from projections.state_store import JsonStore, StateStore
from projections.tokens import TokenCounter, most_tokens, token_counter
from projections.warm import library_file_name

if TYPE_CHECKING:  # the record classes are imported when there are records to fold
    from eventlog.schema import CompactionRecord, Record

STATE_VERSION = 4  # 4: a message within the cap by its bytes is not counted at save


@dataclass(frozen=True, slots=True)
class HotEntry:
    """One message of a hot window, with its tokens (None: not counted yet, see the module)
    and provenance (seq, id, hash)."""

    seq: int
    id: str
    ts: str
    type: str
    text: str
    tokens: int | None
    hash: str
    meta: dict[str, Any] | None = None
    elided: int = 0  # tokens cut from the middle of the message (0: it is whole)


@dataclass(frozen=True, slots=True)
class HotWindow:
    """What ``load_hot`` returns: the window of one session as of its checkpoint."""

    session: str
    entries: tuple[HotEntry, ...]
    tokens: int | None  # None while a message is not counted yet
    messages_seen: int
    summary: dict[str, Any] | None
    covered_until: int
    checkpoint: Checkpoint
    overflow: tuple[HotEntry, ...] = ()

    @property
    def uncovered(self) -> tuple[HotEntry, ...]:
        """Every message no summary covers yet, oldest first: the overflow, then the window."""
        return self.overflow + self.entries


@dataclass(slots=True)
class HotState:
    """The fold's state: window items are records until saved, then their entries (dicts)."""

    session: str
    uncovered: list[Record | dict[str, Any]]
    messages_seen: int = 0
    summary: dict[str, Any] | None = None
    covered_until: int = 0  # seq up to which a summary covers the session


def _seq(item: Record | dict[str, Any]) -> int:
    return item["seq"] if isinstance(item, dict) else item.seq


class HotProjector(Projector[HotState]):
    """Folds a session into its hot window (see the module)."""

    name = "hot"
    plain = True  # apply reads records by attribute, models or stored dicts alike

    def __init__(
        self,
        out_dir: Path,
        *,
        window_size: int,
        message_types: tuple[str, ...],
        encoding: str,
        message_cap_tokens: int = 1000,
    ) -> None:
        self.out_dir = out_dir
        self.state_store: StateStore[HotState] = JsonStore(out_dir, self)
        self.window_size = window_size
        self.message_cap_tokens = message_cap_tokens
        self.message_types = frozenset(message_types)
        self.encoding = encoding
        self._counter: TokenCounter | None = None

    @property
    def counter(self) -> TokenCounter:
        """The token counter of the projector's encoding."""
        if self._counter is None:
            self._counter = token_counter(self.encoding)
        return self._counter

    @override
    def warm_up(self) -> None:
        _ = self.counter

    @override
    def fingerprint(self) -> dict[str, Any]:
        return {
            "version": STATE_VERSION,
            "window_size": self.window_size,
            "message_types": sorted(self.message_types),
            "encoding": self.encoding,
            "message_cap_tokens": self.message_cap_tokens,
        }

    @override
    def empty(self, session: str) -> HotState:
        return HotState(session, [])

    @override
    def apply(self, state: HotState, record: Record) -> HotState:
        if record.type == "compaction":  # a model or its stored dict: read by attribute alike
            record = cast("CompactionRecord", record)
            # The summary now covers everything up to to_seq: those messages leave the window,
            # the link to the latest library file takes their place.
            state.covered_until = record.to_seq
            state.uncovered = [item for item in state.uncovered if _seq(item) > record.to_seq]
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
            state.uncovered.append(record)  # rendered and counted only once, at save
            state.messages_seen += 1
        return state

    def _entry(self, item: Record | Stored | dict[str, Any]) -> dict[str, Any]:
        if isinstance(item, dict) and not isinstance(item, Stored):  # an entry already made
            return item
        text = record_text(item)
        entry: dict[str, Any] = {
            "seq": item.seq,
            "id": item.id,
            "ts": item.ts,
            "type": item.type,
            "text": text,
            "tokens": None,  # within the cap by its bytes: never cut, counted when read
            "hash": item.hash,
            "meta": item.meta,
        }
        if most_tokens(text) <= self.message_cap_tokens:
            return entry
        tokens = self.counter.count(text)
        if tokens > self.message_cap_tokens:
            cap = self.message_cap_tokens
            text = elide(text, cap, self.counter, seq=item.seq, session=item.session, tokens=tokens)
            entry.update(text=text, tokens=self.counter.count(text))
            if entry["tokens"] != tokens:
                entry["elided"] = tokens - entry["tokens"]
        else:
            entry["tokens"] = tokens
        return entry

    # --------------------------------------------------------------- persistence

    def dump(self, state: HotState) -> dict[str, Any]:
        """The state as stored (``JsonStore``): each message rendered (and counted if it may
        need cutting) once, here, and kept so (a later save does not render it again)."""
        entries = [self._entry(item) for item in state.uncovered]
        state.uncovered = list(entries)
        cut = max(0, len(entries) - self.window_size)
        counts = [e["tokens"] for e in entries]
        return {
            "session": state.session,
            "entries": entries[cut:],
            "overflow": entries[:cut],
            "tokens": None if None in counts else sum(counts),
            "messages_seen": state.messages_seen,
            "summary": state.summary,
            "covered_until": state.covered_until,
        }

    def restore(self, session: str, data: dict[str, Any]) -> HotState:
        """The state from what ``dump`` stored."""
        return HotState(
            session,
            data["overflow"] + data["entries"],
            data["messages_seen"],
            data["summary"],
            data["covered_until"],
        )

    @override
    def item_count(self) -> int:
        """The messages every session's window holds, each session's count kept with its
        window file's identity (``KeptOnDisk``: a new process's ``status`` at 1M records
        parsed 5,000 windows, 140 MB)."""
        kept = KeptOnDisk(self.out_dir.parent / "caches" / "hot.counts.json", int, _count)
        total = 0
        for session in self.state_store.sessions():
            path = self.out_dir / f"{session}.json"
            with contextlib.suppress(OSError):  # gone meanwhile: nothing to count
                total += kept.get(path, partial(_uncovered, self.out_dir, session))
        kept.save()
        return total


def _uncovered(hot_dir: Path, session: str) -> int:
    """The messages ``session``'s window holds (0 when it cannot be read)."""
    window = load_hot(hot_dir, session)
    return len(window.uncovered) if window is not None else 0


def _count(value: object) -> int:
    """A count as kept on disk (anything else is parsed again)."""
    if type(value) is not int or value < 0:
        raise TypeError(f"not a count: {value!r}")
    return value


# ------------------------------------------------------------------- reading the tier

_cache: dict[Path, tuple[tuple[int, int, int, int], HotWindow]] = {}


def load_hot(hot_dir: Path, session: str) -> HotWindow | None:
    """The hot window of ``session`` as last projected (None if it has not been projected, or
    if its file is damaged: a derived file, which the next projection rebuilds).

    Parsed windows are cached by file identity (inode, mtime, size, ctime); a new projection
    replaces the file (new inode), and an edit in place changes its ctime even when its mtime is
    put back, so a cached window is never stale.
    """
    path = hot_dir / f"{validate_session_id(session)}.json"
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    key = (st.st_ino, st.st_mtime_ns, st.st_size, st.st_ctime_ns)
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
            overflow=tuple(HotEntry(**e) for e in data["overflow"]),
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if len(_cache) > 4096:
        _cache.clear()
    _cache[path] = (key, window)
    return window


def tokens_of(entry: HotEntry, counter: TokenCounter) -> int:
    """The tokens of ``entry``: as stored, or counted now if the fold left them."""
    return counter.count(entry.text) if entry.tokens is None else entry.tokens


def most_tokens_of(window: HotWindow) -> int:
    """At most how many tokens the window's messages hold: their counts where stored, their
    bytes where not (``tokens.most_tokens``); their exact total when every one is counted."""
    if window.tokens is not None:
        return window.tokens
    return sum(most_tokens(e.text) if e.tokens is None else e.tokens for e in window.uncovered)


def counted(window: HotWindow, counter: TokenCounter) -> HotWindow:
    """``window`` with every message's tokens and their total counted (itself when they are):
    the window as a fold that counted everything at save would have stored it."""
    if window.tokens is not None:
        return window

    def count(entries: tuple[HotEntry, ...]) -> tuple[HotEntry, ...]:
        return tuple(replace(e, tokens=tokens_of(e, counter)) for e in entries)

    entries, overflow = count(window.entries), count(window.overflow)
    total = sum(tokens_of(e, counter) for e in overflow + entries)
    return replace(window, entries=entries, overflow=overflow, tokens=total)


def render_entry(entry: HotEntry) -> str:
    """One hot entry as prompt text."""
    return f"[#{entry.seq} {entry.type}] {entry.text}"


def _summary_head(summary: dict[str, Any], session: str | None) -> str:
    whose = f"session {session}: " if session else ""
    head = (
        f"[{whose}summary of #{summary['from_seq']}-#{summary['to_seq']} {summary.get('link', '')}]"
    )
    return head.replace(" ]", "]")


def whole_history(window: HotWindow) -> str:
    """What ``format_history`` gives when all of it fits: the whole summary, then every
    message no summary covers yet."""
    summary = window.summary
    parts = [f"{_summary_head(summary, None)}\n{summary.get('text', '')}"] if summary else []
    return "\n".join(parts + [render_entry(e) for e in window.uncovered])


def summary_block(
    summary: dict[str, Any], budget: int, counter: TokenCounter, *, session: str | None = None
) -> str:
    """A summary as prompt text (a header line naming what it covers, then its text) within
    ``budget``: whole bullets only, the least important dropped first; empty if not even the
    header fits. ``session`` names the session, for a summary shown outside its own."""
    head = _summary_head(summary, session)
    text = f"{head}\n{summary.get('text', '')}"
    if counter.within(text, budget):
        return text
    room = budget - counter.count(head) - 1
    while counter.count(text) > budget:
        if room <= 0:
            return ""
        body = render_sections(fit_summary(parse_sections(summary.get("text", "")), room, counter))
        text = f"{head}\n{body}" if body else head
        room -= 1
    return text


def format_history(window: HotWindow, budget_tokens: int, counter: TokenCounter) -> str:
    """The text an agent puts in its prompt: the latest summary first, then every message no
    summary covers yet, keeping the newest when the budget forces a cut. Never exceeds
    ``budget_tokens``, and never cuts inside a summary bullet or a token: a message that does
    not fit whole is left out (with the older ones), except the newest, which is never lost: if
    it does not fit whole it keeps its head and tail and a marker (``fitting.elide``). The
    summary loses whole bullets, least important first. When not everything fits, the summary
    and the messages share the budget in proportion to how many messages each stands for (each
    at least a third)."""
    if budget_tokens <= 0:
        return ""
    blocks = [render_entry(e) for e in window.uncovered]
    summary = summary_block(window.summary, budget_tokens, counter) if window.summary else ""
    parts = [summary] if summary else []
    whole = "\n".join(parts + blocks)
    if counter.within(whole, budget_tokens):
        return whole
    if summary and blocks:
        # The summary and the messages share the budget by how many messages each stands
        # for, each getting at least a third.
        covered = window.summary["to_seq"]  # type: ignore[index]
        share = min(2 / 3, max(1 / 3, covered / (covered + len(blocks))))
        if counter.count(summary) > int(budget_tokens * share):
            summary = summary_block(window.summary, int(budget_tokens * share), counter)  # type: ignore[arg-type]
            parts = [summary] if summary else []
    # Greedy from the newest message, estimating with per-block counts, then check exactly.
    used = counter.count(summary) if summary else 0
    chosen = pack(reversed(blocks), budget_tokens - used, counter)[::-1]
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
    if blocks and not chosen:  # the newest message, cut to fit what the summary leaves
        if parts and counter.count(parts[0]) > budget_tokens // 2:  # the message's half
            summary = summary_block(window.summary, budget_tokens // 2, counter)  # type: ignore[arg-type]
            parts = [summary] if summary else []
        room = budget_tokens - (counter.count(parts[0]) + 1 if parts else 0)
        newest = fit_entry(window.uncovered[-1], room, counter, window.session)
        text = "\n".join([*parts, newest] if newest else parts)
    return text


def fit_entry(entry: HotEntry, budget: int, counter: TokenCounter, session: str) -> str:
    """``entry`` as prompt text within ``budget`` tokens: whole, or its head and tail and a
    marker naming what was cut; empty if not even its heading and the marker fit."""
    whole = render_entry(entry)
    if counter.count(whole) <= budget:
        return whole
    head = render_entry(replace(entry, text=""))
    text = elide(entry.text, budget - counter.count(head), counter, seq=entry.seq, session=session)
    fitted = head + text
    return fitted if counter.count(fitted) <= budget else ""


def shown_entries(window: HotWindow, history: str, counter: TokenCounter) -> list[HotEntry]:
    """The window's messages that ``history`` (from ``format_history``) shows, oldest first;
    the newest, when shown cut to fit, as it was shown (its ``elided`` counting the cut)."""
    entries = list(window.uncovered)
    newest = entries[-1] if entries else None
    while entries and render_entry(entries[0]) not in history:  # the oldest that fit
        entries.pop(0)
    if newest is not None and not entries:
        head = render_entry(replace(newest, text=""))
        where = history.rfind(head)
        if where >= 0:
            text = history[where + len(head) :]
            whole = tokens_of(newest, counter)
            cut = max(whole - counter.count(text), 1)
            shown = replace(newest, text=text, tokens=whole - cut, elided=newest.elided + cut)
            return [shown]
    return entries
