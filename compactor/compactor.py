"""The compactor: keeps a session's hot window inside its budget by tree-reducing its oldest half
into a summary, recorded in the log as a compaction event.

Algorithm: when the messages no summary covers yet (the hot
window and its overflow) and the latest summary pass ``threshold`` of the token budget, or on
``force``: take the oldest 50% of those messages (more when the rest would hold over half the
budget less the summary's: a few huge tool results), split them into chunks of ``chunk_size``,
summarize each chunk, then merge the previous master summary and the chunk summaries, in groups
when they do not fit one call, level by level, until one master summary remains. The window
continues with [summary link] + the recent messages. Every prompt the compactor builds holds
each message capped at ``message_cap_tokens`` (head, tail and a marker naming the cut).

Invariants: the compactor never writes the library; it appends one event holding everything needed
to write ``history-NNN.md``. The covered range always starts right after the previous one, so a
rerun never duplicates or skips. One compactor per session at a time (a session lock); library
numbers are allocated under a workspace lock, from the warm projection brought to the head of the
log first. A crash before the append leaves no event; the append itself is atomic.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from compactor.summarizers import ExtractiveSummarizer, Message, Summarizer
from eventlog.errors import CompactionBusyError, NothingToCompactError, SummarizerError
from eventlog.log import Log
from eventlog.render import record_text
from eventlog.schema import (
    ActionRecord,
    ChunkSummary,
    CompactionRecord,
    ObservationRecord,
    Record,
    SummarizerInfo,
)
from projections.engine import Runner
from projections.fitting import elide
from projections.hot import HotProjector, HotWindow, load_hot, most_tokens_of, tokens_of
from projections.tokens import TokenCounter
from projections.warm import WarmProjector


@dataclass(frozen=True, slots=True)
class CompactionSettings:
    """The compactor's budgets, from ``[memory]`` and ``[compactor]``."""

    token_budget: int
    threshold: float
    chunk_size: int
    chunk_summary_tokens: int
    summary_tokens: int
    merge_input_tokens: int
    message_cap_tokens: int = 1000


def compaction_reason(
    window: HotWindow, settings: CompactionSettings, counter: TokenCounter
) -> str | None:
    """Why the window needs compacting now (its tokens passed the threshold), or None. The
    messages are counted only when their bytes pass it (``most_tokens_of``): below, so are
    their tokens, and the answer is the one counting gives."""
    limit = settings.threshold * settings.token_budget
    summary = (window.summary or {}).get("tokens", 0)
    if most_tokens_of(window) + summary <= limit:
        return None
    used = sum(tokens_of(e, counter) for e in window.uncovered) + summary
    if used > limit:
        return f"threshold: {used} tokens > {settings.threshold:g} x {settings.token_budget} budget"
    return None


def to_message(record: Record, counter: TokenCounter, cap_tokens: int) -> Message:
    """A log record as the summarizers see it, its text capped at ``cap_tokens``."""
    text = elide(record_text(record), cap_tokens, counter, seq=record.seq, session=record.session)
    return Message(
        seq=record.seq,
        type=record.type,
        text=text,
        meta=record.meta,
        is_error=isinstance(record, ObservationRecord) and record.is_error,
        tool=record.tool if isinstance(record, ActionRecord) else None,
        id=record.id,
        action_id=record.action_id if isinstance(record, ObservationRecord) else None,
        params=record.params if isinstance(record, ActionRecord) else None,
    )


@contextmanager
def file_lock(path: Path, *, wait: bool, holder: str = "compactor") -> Iterator[None]:
    """Hold an exclusive lock on ``path`` (a session's: one writer of derived events at a time);
    without ``wait``, ``CompactionBusyError`` when another ``holder`` has it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except BlockingIOError as exc:
            raise CompactionBusyError(
                f"another {holder} is working on this session ({path})"
            ) from exc
        yield
    finally:
        os.close(fd)


CONSOLIDATION = "session ended"  # the reason of a session end's compaction (``consolidate``)


class Compactor:
    """Compacts a session's hot window into a compaction event (see the module)."""

    def __init__(
        self,
        log: Log,
        hot: HotProjector,
        warm: WarmProjector,
        lock_dir: Path,
        summarizer: Summarizer,
        counter: TokenCounter,
        settings: CompactionSettings,
    ) -> None:
        self.log = log
        self.hot = hot
        self.warm = warm
        self.lock_dir = lock_dir
        self.summarizer = summarizer
        self.extractive = ExtractiveSummarizer(counter)
        self.counter = counter
        self.settings = settings

    def due(self, session: str) -> str | None:
        """Why ``session`` needs compacting now (after bringing its hot window up to date)."""
        Runner(self.log, [self.hot]).catch_up(sessions=[session])
        window = load_hot(self.hot.out_dir, session)
        return compaction_reason(window, self.settings, self.counter) if window else None

    def run(self, session: str, *, force: bool = False) -> list[Record]:
        """The policy contract (as ``compactor.extractor.Extractor.run``): compact if due (or
        ``force``); return what was appended."""
        record = self.compact(session, force=force)
        return [record] if record is not None else []

    def consolidate(self, session: str) -> CompactionRecord | None:
        """At session end: one compaction event covering every message no summary covers yet
        (the summarizer's, or the extractive one; recorded, so a replay never calls a model),
        so the next session starts from what this one decided and left open; None when the
        window holds no message."""
        return self.compact(session, force=True, whole=True)

    def compact(
        self, session: str, *, force: bool = False, whole: bool = False
    ) -> CompactionRecord | None:
        """Compact ``session`` if it is due (or ``force``); return the appended event.
        ``whole``: every uncovered message, not the oldest half (``consolidate``)."""
        with file_lock(self.lock_dir / f"compact-{session}.lock", wait=False):
            (report,) = Runner(self.log, [self.hot]).catch_up(sessions=[session])
            report.raise_failed()  # a damaged log is named, never taken for a missing session
            window = load_hot(self.hot.out_dir, session)
            if window is None:
                raise NothingToCompactError(f"no session {session!r}")
            reason = compaction_reason(window, self.settings, self.counter)
            if reason is None and not force:
                return None
            uncovered = window.uncovered
            if whole:
                if not uncovered:
                    return None
                reason = CONSOLIDATION
                event = self._build(session, window, uncovered[-1].seq, reason)
                return self._append(session, event)
            old_count = len(uncovered) // 2
            if old_count == 0:
                raise NothingToCompactError(
                    f"{session}: {len(uncovered)} message(s) in the hot window; need 2"
                )
            # The oldest half, and more while the rest and the summary would hold over half the
            # budget (a few huge tool results): after a compaction the window fits its budget
            # with room to grow before the next one.
            room = max(
                self.settings.token_budget // 4,
                self.settings.token_budget // 2 - self.settings.summary_tokens,
            )
            sizes = [tokens_of(e, self.counter) for e in uncovered]
            kept = sum(sizes[old_count:])
            while old_count < len(uncovered) - 1 and kept > room:
                kept -= sizes[old_count]
                old_count += 1
            event = self._build(session, window, uncovered[old_count - 1].seq, reason or "forced")
            return self._append(session, event)

    def _append(self, session: str, event: dict[str, Any]) -> CompactionRecord:
        """Append a compaction event under the next library number."""
        with file_lock(self.lock_dir / "library.lock", wait=True):
            Runner(self.log, [self.warm]).catch_up()
            event["library_no"] = self.warm.max_library_no() + 1
            (record,) = self.log.append_many(session, [event], system=True)
        assert isinstance(record, CompactionRecord)
        return record

    # ------------------------------------------------------------------ the tree-reduce

    def _build(self, session: str, window: HotWindow, to_seq: int, reason: str) -> dict:
        from_seq = window.covered_until + 1
        covered = [
            loc.record
            for loc in self.log.read(session, from_seq=from_seq)
            if loc.record.seq <= to_seq
        ]
        cap = self.settings.message_cap_tokens
        messages = [
            to_message(r, self.counter, cap) for r in covered if r.type in self.hot.message_types
        ]
        # The hot window counted each of them already, capped the same way.
        counted = {e.seq: tokens_of(e, self.counter) for e in window.uncovered}
        sizes = [counted.get(m.seq) or self.counter.count(m.text) for m in messages]
        previous = window.summary
        whole = reason == CONSOLIDATION
        try:
            chunks, summary, info = self._reduce(self.summarizer, messages, sizes, previous, whole)
        except SummarizerError as exc:
            chunks, summary, info = self._reduce(self.extractive, messages, sizes, previous, whole)
            info = info.model_copy(
                update={
                    "fallback_from": self.summarizer.info.backend,
                    "fallback_error": str(exc)[:500],
                }
            )
        summary_tokens = self.counter.count(summary)
        kept = [e for e in window.uncovered if e.seq > to_seq]
        # What the prompt would need without this compaction: the previous summary, every covered
        # message (some may have scrolled out of the window already) and the messages kept.
        before = (
            (previous or {}).get("tokens", 0)
            + sum(tokens_of(e, self.counter) for e in kept)
            + sum(sizes)
        )
        return {
            "type": "compaction",
            "from_seq": from_seq,
            "to_seq": to_seq,
            "first_hash": covered[0].hash,
            "last_hash": covered[-1].hash,
            "messages": len(messages),
            "chunks": [c.model_dump() for c in chunks],
            "summary": summary,
            "summary_tokens": summary_tokens,
            "previous_library_no": previous["library_no"] if previous else None,
            "summarizer": info.model_dump(exclude_none=True),
            "tokens_before": before,
            "tokens_after": summary_tokens + sum(tokens_of(e, self.counter) for e in kept),
            "reason": reason,
            "library_no": 1,  # replaced under the library lock
        }

    def _reduce(
        self,
        summarizer: Summarizer,
        messages: list[Message],
        sizes: list[int],
        previous: dict | None,
        whole: bool = False,
    ) -> tuple[list[ChunkSummary], str, SummarizerInfo]:
        """Summarize ``messages`` (of ``sizes`` tokens each) chunk by chunk, then merge;
        ``whole``: a session end's consolidation (``_budget``)."""
        size = self.settings.chunk_size
        chunks = []
        for start in range(0, len(messages), size):
            part = messages[start : start + size]
            source = sum(sizes[start : start + size])
            text = summarizer.summarize(
                part, self._budget(self.settings.chunk_summary_tokens, source, whole)
            )
            chunks.append(
                ChunkSummary(
                    from_seq=part[0].seq,
                    to_seq=part[-1].seq,
                    messages=len(part),
                    summary=text,
                    tokens=self.counter.count(text),
                )
            )
        level = ([previous["text"]] if previous else []) + [c.summary for c in chunks]
        # The master may keep all of the previous one, plus half of what the new messages hold.
        source = sum(sizes)
        carried = previous["tokens"] if previous else 0
        budget = self._budget(self.settings.summary_tokens, 2 * carried + source, whole)
        return chunks, self._merge(summarizer, level, budget), summarizer.info

    @staticmethod
    def _budget(limit: int, source_tokens: int, whole: bool = False) -> int:
        """A summary never takes more than half the tokens of what it summarizes (nor less than
        32, so a tiny chunk still gets a line or two). A session end's consolidation (``whole``)
        may take as many as its source, within ``limit``: it is all the next session gets of
        the session, and a short one's requests would otherwise leave no room for its
        decisions, files, errors and open tasks."""
        return max(32, min(limit, source_tokens if whole else source_tokens // 2))

    def _merge(self, summarizer: Summarizer, summaries: list[str], budget: int) -> str:
        """Merge level by level, in groups that fit one call, until one summary remains."""
        if len(summaries) == 1 and self.counter.count(summaries[0]) <= budget:
            return summaries[0]
        while True:
            groups: list[list[str]] = [[]]
            used = 0
            for summary in summaries:
                cost = self.counter.count(summary)
                if groups[-1] and used + cost > self.settings.merge_input_tokens:
                    groups.append([])
                    used = 0
                groups[-1].append(summary)
                used += cost
            merged = [summarizer.merge(group, budget) for group in groups]
            if len(merged) == 1:
                return merged[0]
            if len(merged) >= len(summaries):  # no progress possible: merge pairwise
                merged = [
                    summarizer.merge(merged[i : i + 2], budget) for i in range(0, len(merged), 2)
                ]
            summaries = merged
