"""The context builder: what a session should see next, within a token budget.

One algorithm owns the whole budget. In order: the session's memory (its task and phase,
identity anchors verbatim, then the hot and relevant warm learnings, within ``context_share``
of the budget); the facts the latest sessions' consolidations left (``projections.facts``: the
open tasks, then what they decided and required, errors fixed, files changed, newest session
first, within another ``context_share``); these two are the briefing every door starts from
(``briefing``: ``Memory.memory_block`` and the Claude Code hooks' SessionStart read it too); for
a session with no summary yet (or no record at all: an agent starting fresh), the latest
summaries of the ``context_other_sessions`` most recent other sessions (at most a third of the
budget); with a query, the best recalled passages not already visible (at most half of what is
left); then the session's own summary and newest messages in the rest. ``Built.parts`` says how
many tokens each part took.
The newest message is never lost: the parts before it give way (last first) until it has half
the budget, and if it still does not fit whole it is shown cut, with a marker
(``fitting.marker``: ``elided_seqs`` finds it). In an API format, thoughts are left out unless
asked for, and the list is never empty (``context_formats``).

Invariants: the result never exceeds the budget (counted with the workspace's tokenizer, after
joining: tokens can merge across a join, so the history shrinks until the whole fits); nothing
is cut inside a bullet or a token, nor inside a message but the newest; the result is a
function of what the source returns, so of the log. The builder reads through a
``ContextSource`` (the facade supplies one: hot windows, warm summaries, learnings, recall,
records), so this module never opens a log.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Literal, Protocol

from projections.tokens import Tally, most_tokens

if TYPE_CHECKING:
    from eventlog.schema import Record
    from projections.facts import HeldFact
    from projections.hot import HotEntry, HotWindow
    from projections.learning_rules import Assessment
    from projections.tokens import TokenCounter
    from projections.visual_context import Page

ContextFormat = Literal["text", "anthropic", "openai"]
FORMATS: tuple[str, ...] = ("text", "anthropic", "openai")
# The budget of a context no caller sized (the CLI's ``context``, HTTP and MCP alike): room for
# the memory block, recalled passages and a working hot window.
BUDGET = 4000


class ContextSource(Protocol):
    """What the builder reads; every call answers only what the reader scope may see."""

    def window(self, session: str) -> HotWindow | None:
        """The session's hot window, current (None: no such session in the log)."""

    def assessment(self, session: str, cue: str, reader: Any) -> Assessment:
        """Every learning as ``session`` (whose task and ``cue`` decide relevance) sees it."""

    def earlier(self, session: str, reader: Any) -> Iterable[tuple[str, dict[str, Any]]]:
        """(session, latest summary) of the other sessions ``reader`` may see, newest first."""

    def recall(self, query: str, k: int, reader: Any) -> list[dict[str, Any]]:
        """The ``k`` best search hits for ``query`` that ``reader`` may see."""

    def records(self, session: str, from_seq: int) -> dict[int, Record]:
        """The session's records from ``from_seq`` on, by seq."""

    def pages(self, session: str, reader: Any) -> list[Page]:
        """The visual tier's pages of the other sessions ``reader`` may see."""

    def facts(self, session: str, reader: Any) -> list[HeldFact]:
        """The facts ``reader`` may see as they hold now, oldest first (``projections.facts``):
        the current ones and those a later fact changed."""


PARTS: tuple[str, ...] = ("memory", "facts", "earlier", "recalled", "history")
"""A context's parts, in their order: the learnings block, the facts block (the two make the
briefing), the earlier sessions' summaries, the recalled passages, the session's own history."""
FACT_ORDER = ("requirement", "decision", "error_fix", "user", "file")
"""The facts after the open tasks, most needed first (a task is its own heading)."""


def shares(parts: Mapping[str, int], budget: int) -> dict[str, dict[str, float]]:
    """Each part's tokens and share of ``budget``, as the doors answer them (``--json``, the
    HTTP and MCP ``context``)."""
    return {
        name: {"tokens": tokens, "share": round(tokens / budget, 3) if budget else 0.0}
        for name, tokens in parts.items()
    }


class PartTokens(Mapping[str, int]):
    """The tokens each part of a context took (``PARTS``, in order; the joins between parts
    are not counted), counted when first read: a context printed as text never reads them,
    and counting is what loads the encoding."""

    def __init__(self, counter: TokenCounter, kept: list[tuple[str, str]]) -> None:
        self._counter = counter
        self._kept = kept  # (part, text) of each part kept, the history last
        self._counts: dict[str, int] | None = None

    def _counted(self) -> dict[str, int]:
        if self._counts is None:
            counts = dict.fromkeys(PARTS, 0)
            for name, text in self._kept:
                counts[name] += self._counter.count(text)
            self._counts = counts
        return self._counts

    def __getitem__(self, name: str) -> int:
        return self._counted()[name]

    def __iter__(self) -> Iterator[str]:
        return iter(PARTS)

    def __len__(self) -> int:
        return len(PARTS)

    def __repr__(self) -> str:
        return repr(self._counted())


@dataclass(frozen=True)
class Built:
    """A context: text or messages, the learnings its memory block gave (id -> matched), and
    the tokens each part took (``PartTokens``)."""

    context: str | list[dict[str, Any]]
    given: dict[str, bool]
    parts: Mapping[str, int]


class ContextBuilder:
    """The budget algorithm (see the module) over one ``ContextSource``."""

    def __init__(
        self,
        source: ContextSource,
        counter: TokenCounter,
        *,
        context_share: float,
        phases: dict[str, str],
        other_sessions: int,
    ) -> None:
        self.source = source
        self.counter = counter
        self.context_share = context_share
        self.phases = phases
        self.other_sessions = other_sessions

    def build(
        self,
        session: str,
        budget: int,
        *,
        query: str | None = None,
        format: ContextFormat = "text",
        reader: Any = None,
        images: bool = False,
        thoughts: bool = False,
    ) -> Built:
        """The context of ``session`` within ``budget`` tokens, read as ``reader``; in an API
        format, the session's thoughts only with ``thoughts``; with ``images`` (format
        anthropic), the other sessions moved to the visual tier are given as images within a
        third of the budget (``projections.visual_context``), the rest as text in what is left."""
        from projections.hot import render_entry, whole_history

        counter = self.counter
        window = self.source.window(session)
        pages: list[Page] = []
        if images:  # the visual tier's code is imported when pages are asked for
            from projections.visual_context import choose

            pictured = choose(self.source.pages(session, reader), budget // 3, counter)
            budget -= pictured.tokens
            pages = pictured.pages
        held = self.source.facts(session, reader)
        changed = _changed(held)
        named, given = self.briefing(session, budget, query, reader, held, changed)
        block = "\n\n".join(text for _, text in named)
        parts: list[str] = [text for _, text in named]
        recalled = ""
        earlier: list[str] = []
        shown_before = list(parts)  # what a recalled passage must not repeat
        if window is None or window.summary is None:
            skip = {page.session for page in pages}
            # a quote of a fact a later session changed says so (``_marked``)
            earlier = self._earlier_sessions(session, budget // 3, reader, skip, changed)
            shown_before += [text for block in earlier for text in (block, _unmarked(block))]
            parts += earlier
        if query is not None:
            left = budget - counter.count("\n\n".join(parts))
            room = left // 2
            # the history that stays whatever the passages take (at most ``room``): a message
            # it may leave out once they are in is no reason to leave a passage out
            staying = self._history(window, left - room - 2)
            visible = "\n".join([*shown_before, staying])
            for passage in self._recalled(query, visible, room, reader, changed):  # best first
                candidate = f"{recalled}\n{passage}" if recalled else passage
                if counter.count(candidate) <= room:
                    recalled = candidate
            parts += [recalled] if recalled else []
        # the newest message is never lost: what came before it gives way (recalled passages,
        # earlier sessions, then the memory block) until it has at least half the budget
        newest = window.uncovered[-1] if window is not None and window.uncovered else None
        full = "" if window is None else whole_history(window)
        most_need = min(most_tokens(render_entry(newest)), budget // 2) if newest else 0
        if most_tokens("\n\n".join(parts)) + 2 + max(most_need, most_tokens(full)) <= budget:
            # all of it fits, certain from the bytes (``most_tokens``): what the loops below
            # give when nothing gives way, without counting
            history = full
        else:
            history = self._fit(window, parts, budget, newest)
        text = "\n\n".join([*parts, history] if history else parts)
        shown = given if (given and block and text.startswith(block)) else {}
        names = [name for name, _ in named] + ["earlier"] * len(earlier)
        names += ["recalled"] if recalled else []
        kept = list(zip(names, parts, strict=False))  # those kept (the last give way)
        tokens = PartTokens(counter, [*kept, ("history", history)])
        if format == "text":
            return Built(text, shown, tokens)
        messages = self._messages(format, session, window, parts, recalled, history, thoughts)
        if not pages:
            return Built(messages, shown, tokens)
        from projections.visual_context import with_images

        return Built(with_images(messages, pages), shown, tokens)

    def _fit(
        self, window: HotWindow | None, parts: list[str], budget: int, newest: HotEntry | None
    ) -> str:
        """The history beside ``parts`` within ``budget``: the parts give way (last first,
        popped from ``parts``) until the newest message has half the budget, then the history
        shrinks until the whole fits (tokens can merge across a join)."""
        from projections.hot import render_entry

        counter = self.counter
        need = min(counter.count(render_entry(newest)), budget // 2) if newest else 0
        while parts and budget - counter.count("\n\n".join(parts)) - 2 < need:
            parts.pop()
        rest = budget - counter.count("\n\n".join(parts)) - 2
        while True:
            history = self._history(window, rest) if rest > 0 else ""
            text = "\n\n".join([*parts, history] if history else parts)
            if counter.count(text) <= budget:
                return history
            if not history:
                parts.pop()
            rest -= 1

    def _history(self, window: HotWindow | None, budget: int) -> str:
        """The window's summary and newest messages within ``budget`` tokens (the window
        read once per build, never again while packing)."""
        from projections.hot import format_history

        return "" if window is None else format_history(window, budget, self.counter)

    def briefing(
        self,
        session: str,
        budget: int,
        query: str | None,
        reader: Any,
        held: list[HeldFact] | None = None,
        changed: list[HeldFact] | None = None,
    ) -> tuple[list[tuple[str, str]], dict[str, bool]]:
        """What every door starts from: the memory block (``memory``) and the facts block
        (``facts``), each within ``context_share`` of ``budget``, as (part, text) of those not
        empty; and the learnings the memory block gave (id -> matched the cue). ``held``: the
        facts as read for this build (default: read now); ``changed``: those of them a later
        fact changed (``_changed``; default: found now)."""
        if held is None:
            held = self.source.facts(session, reader)
        if changed is None:
            changed = _changed(held)
        stopped = {f.text for f in held if not f.current}  # a later fact changed them
        assessment = self.source.assessment(session, query or "", reader)
        block, given = self.memory_block(
            session, budget, query, reader, stopped, assessment, changed
        )
        # a learning someone rejected or archived never reaches a prompt: nor does a fact
        # saying the same (merged and superseded ones are the learnings' own bookkeeping:
        # which fact holds is the facts' to say)
        withdrawn = [a.text for a in assessment.learnings if a.status in ("rejected", "archived")]
        # nor one a person reworded as a learning the memory block shows: the fact, read from
        # the same record, still says it in the words the person replaced
        reworded = {
            (e["session"], e["seq"])
            for a in assessment.learnings
            if a.id in given and any(c.get("action") == "edited" for c in a.curation)
            for e in a.evidence
        }
        current = [
            f
            for f in held
            if f.current
            and not any(f.text in text for text in withdrawn)
            and reworded.isdisjoint(f.evidence)
        ]
        facts = self.facts_block(current, int(budget * self.context_share), block)
        named = [("memory", block), ("facts", facts)]
        return [(name, text) for name, text in named if text], given

    def facts_block(self, held: list[HeldFact], room: int, shown: str) -> str:
        """The current facts ``held`` (oldest first) within ``room`` tokens, whole lines only,
        each with the record it came from: the open tasks, then the other kinds
        (``FACT_ORDER``), newest first; a fact whose text ``shown`` (the memory block) already
        holds is left out."""
        if room < 16:
            return ""
        held = [f for f in reversed(held) if f.text not in shown]
        sections = [
            ("## Open tasks (left unfinished)", [f for f in held if f.kind == "task"]),
            (
                "## What the latest sessions decided and required",
                sorted(
                    (f for f in held if f.kind != "task"),
                    key=lambda f: FACT_ORDER.index(f.kind) if f.kind in FACT_ORDER else 99,
                ),
            ),
        ]
        lines: list[str] = []
        used = Tally(self.counter, room)
        for heading, facts in sections:
            headed = False
            for fact in facts:
                session_, seq = fact.evidence[0] if fact.evidence else (fact.session, fact.seq)
                kind = "" if fact.kind == "task" else f"{fact.kind}: "
                line = f"- {kind}{fact.text} [{session_} #{seq}]"
                if not headed:
                    line = f"{heading}\n{line}"
                if not used.take(line, 1):
                    continue
                headed = True
                lines.append(line)
        return "\n".join(lines)

    def memory_block(
        self,
        session: str,
        budget: int,
        query: str | None,
        reader: Any,
        ended: Collection[str] = (),
        assessment: Assessment | None = None,
        changed: Collection[HeldFact] = (),
    ) -> tuple[str, dict[str, bool]]:
        """The memory part of a context, and the learnings in it (id -> matched the cue); a
        learning whose text is in ``ended`` (a fact a later one superseded) is left out, and an
        anchor quoting a fact a later one ``changed`` says so (``_marked``). ``assessment``: the
        learnings as read for this build (default: read now)."""
        from projections.fitting import elide

        share = int(budget * self.context_share)
        if share < 16:
            return "", {}
        if assessment is None:
            assessment = self.source.assessment(session, query or "", reader)
        info = assessment.sessions.get(session, {})
        counter = self.counter
        lines = ["## Memory"]
        if info.get("task") or info.get("phase"):
            phase = info.get("phase")
            guidance = self.phases.get(phase or "", "")
            lines.append(f"Task: {info.get('task') or '(none given)'}")
            lines.append(f"Phase: {phase}: {guidance}" if phase else "Phase: (none)")
        anchors = sorted(
            (a for a in assessment.level("hot") if a.kind == "anchor"),
            key=lambda a: (a.session != session, a.ts, a.id),
        )
        learned = assessment.prompt_order()  # the user's rules first, whatever the scores
        given: dict[str, bool] = {}
        headed: set[str] = set()
        used = Tally(counter, share)
        used.take("\n".join(lines), always=True)
        candidates = [("anchor", a) for a in anchors] + [("learned", a) for a in learned]
        heading = {"anchor": "Anchors (verbatim):", "learned": "Learned (airsspec learnings):"}
        for group, a in candidates:
            if a.text in ended:
                continue
            if group == "anchor":
                text = elide(a.text, max(16, share // 2), counter, seq=a.seq, session=a.session)
                text = _marked(text, (f for f in changed if _said_in(f, a.session)))
                where = a.evidence[0]["seq"] if a.evidence else a.seq
                line = f"- [{a.session} #{where}] {text}"
            else:
                line = f"- [{a.kind} {a.id}] {a.text}"
            if group not in headed:
                line = f"{heading[group]}\n{line}"
            if not used.take(line, 1):
                continue
            headed.add(group)
            lines.append(line)
            given[a.id] = a.matched
        if len(lines) == 1:
            return "", {}
        return "\n".join(lines), given

    def _earlier_sessions(
        self,
        session: str,
        budget: int,
        reader: Any,
        skip: set[str],
        changed: Collection[HeldFact] = (),
    ) -> list[str]:
        """The latest summaries of the most recent other sessions (but those in ``skip``:
        given as images), each within its share, its quotes of facts a later session
        ``changed`` marked (before it is fitted: the markers count)."""
        from projections.hot import summary_block

        count = self.other_sessions
        if count == 0 or budget <= 0:
            return []
        blocks = []
        earlier = [(n, s) for n, s in self.source.earlier(session, reader) if n not in skip]
        for name, summary in earlier[:count]:
            text = _marked(summary.get("text", ""), [f for f in changed if _said_in(f, name)])
            summary = {**summary, "text": text}
            block = summary_block(summary, budget // count, self.counter, session=name)
            blocks += [block] if block else []
        return blocks

    def _recalled(
        self,
        query: str,
        visible: str,
        room: int,
        reader: Any,
        changed: Collection[HeldFact] = (),
    ) -> list[str]:
        """Passages for ``query`` not already in ``visible`` (what the context shows besides),
        best first: as many hits as a ``room`` of that many tokens could hold (about 50 tokens
        each, 5 to 50 of them); a quote of a fact of its session that a later one ``changed``
        says so (``_marked``)."""
        hits = self.source.recall(query, max(5, min(50, room // 50)), reader)
        passages = []
        for hit in hits:  # best first
            if _shown(hit["text"], visible):
                continue
            where = hit["source"] or f"{hit['session']} #{hit['seq_from']}-{hit['seq_to']}"
            text = _marked(hit["text"], (f for f in changed if _said_in(f, hit["session"])))
            passages.append(f"[recalled from {where}] {text}")
        return passages

    def _messages(
        self,
        format: Literal["anthropic", "openai"],
        session: str,
        window: HotWindow | None,
        parts: list[str],
        recalled: str,
        history: str,
        thoughts: bool,
    ) -> list[dict[str, Any]]:
        """The context chosen, as that API's ``messages`` (``projections.context_formats``):
        the summary and the newest messages ``history`` holds are split back into the summary
        text and the hot entries."""
        from projections.context_formats import build_messages
        from projections.hot import render_entry, shown_entries

        entries = shown_entries(window, history, self.counter) if window else []
        shown = "\n".join(render_entry(e) for e in entries)
        summary = history[: len(history) - len(shown)].strip("\n") if shown else history
        records = self.source.records(session, entries[0].seq) if entries else {}
        shown_recalled = recalled if recalled and recalled in parts else ""
        lead = [p for p in parts if p is not recalled] + ([summary] if summary else [])
        return build_messages(
            format,
            lead=lead,
            recalled=shown_recalled,
            entries=entries,
            records=records,
            thoughts=thoughts,
        )


def _changed(held: list[HeldFact]) -> list[HeldFact]:
    """The facts of ``held`` a later one changed, each with ``superseded_by`` naming the first
    later fact that says otherwise: one that only said it again (the same words) changed
    nothing, so a fact whose successors all repeat it is left out. A successor is looked for
    by its record and its kind and key (one message may say several facts)."""
    said_at: dict[tuple[tuple[str, int], str, str], HeldFact] = {}
    for fact in held:
        for where in ((fact.session, fact.seq), *fact.evidence):
            said_at.setdefault((where, fact.kind, _words(fact.key)), fact)
    found = []
    for fact in held:
        words, by, seen = _words(fact.text), fact.superseded_by, set()
        subject = (fact.kind, _words(fact.key))
        while by is not None and by not in seen:  # the chain of restatements, walked once
            seen.add(by)
            later = said_at.get((by, *subject))
            if later is None or _words(later.text) != words:
                found.append(replace(fact, superseded_by=by))
                break
            by = later.superseded_by
    return found


def _words(text: str) -> str:
    """``text`` as its words say it (case and spacing aside)."""
    return " ".join(text.casefold().split())


def _marked(text: str, changed: Iterable[HeldFact]) -> str:
    """``text`` with each quote of a fact in ``changed`` marked as changed, naming the record
    that changed it, once: where quotes overlap ("Note: X." holds "X.") the longest is marked,
    never one inside a word ("tabs" in "tabsized") nor a fact of no word at all (a text that
    words it otherwise is left as it is)."""
    marks: dict[str, str] = {}
    for fact in changed:
        if fact.superseded_by is not None and re.search(r"\w", fact.text):
            by, seq = fact.superseded_by
            marks[fact.text] = f" (changed later: {by} #{seq})"
    quoted = sorted((t for t in marks if t in text), key=len, reverse=True)
    if not quoted:
        return text
    pattern = "|".join(_standing(t) for t in quoted)  # the longest first, one pass
    return re.sub(pattern, lambda found: found.group(0) + marks[found.group(0)], text)


def _unmarked(text: str) -> str:
    """``text`` without the markers ``_marked`` added (what the summary said)."""
    return re.sub(r" \(changed later: [^()\n]* #\d+\)", "", text)


def _standing(quote: str) -> str:
    """A pattern of ``quote`` on its own: not continuing a word at either end."""
    before = r"(?<!\w)" if re.match(r"\w", quote) else ""
    after = r"(?!\w)" if re.search(r"\w$", quote) else ""
    return f"{before}{re.escape(quote)}{after}"


def _shown(text: str, visible: str) -> bool:
    """Whether ``visible`` shows ``text`` as said, not merely holds its words ("ok" inside
    "token"): as a whole line, or the rest of one after its prefix (``- #3: ``, ``[#3 user] ``,
    ``- [decision L1] ``) up to what the line adds (`` [s1 #3]``, a marker); a text longer
    than a piece's overlap (a piece of a long message: ``units.split_text``) anywhere."""
    from projections.units import OVERLAP_CHARS

    if len(text) > OVERLAP_CHARS:
        return text in visible
    whole = rf"(?:^|(?<=: )|(?<=\] )){re.escape(text)}(?=$| \[| \()"
    return re.search(whole, visible, re.MULTILINE) is not None


def _said_in(fact: HeldFact, session: str) -> bool:
    """Whether ``fact`` came from a record of ``session``."""
    return fact.session == session or any(s == session for s, _ in fact.evidence)
