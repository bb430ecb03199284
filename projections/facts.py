"""Facts with validity in time: what sessions decided, required, changed, fixed and left open.

A session's consolidation records its facts in one ``facts_recorded`` event (extractive rules or
Claude: the same event, so a replay never calls a model). The fold (``fold``, run by the
learnings projection for each session: facts are learnings' neighbours, kept in the same
per-session state) keeps each fact as recorded, with the record it came in. Like the learnings'
tiers, validity depends on the time of asking, so it is computed when read: ``timeline`` orders
every fact a reader may see by the time it was said (``since``: its first record's), and a fact
stops holding when a later fact of the same owner (user and project), kind and key was said: it
is kept, marked with ``until`` (that fact's time) and ``superseded_by`` (the session and seq of
the record it came from: the message that changed it). A fact that says the earlier one ended
(a task done) holds nothing itself. A question at ``as_of`` sees only what was said by then, so
it gets the fact that held then.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from projections.bm25 import BM25

if TYPE_CHECKING:
    from collections.abc import Iterable

    from eventlog.schema import FactsRecordedRecord
    from projections.learnings import LearningsState


def fold(state: LearningsState, record: FactsRecordedRecord, *, forgotten: bool) -> None:
    """Fold one ``facts_recorded`` record into its session's state: its facts (none when
    ``forgotten``: their text is gone), and the range it read."""
    for index, fact in enumerate([] if forgotten else record.facts):
        state.facts.append(
            {
                "kind": fact.kind,
                "key": fact.key,
                "text": fact.text,
                "ended": fact.ended,
                "evidence": [{"session": e.session, "seq": e.seq} for e in fact.evidence],
                "session": record.session,
                "seq": record.seq,
                "index": index,
                "since": fact.since,
            }
        )
    state.facts_through = max(state.facts_through, record.to_seq)


@dataclass(frozen=True, slots=True)
class HeldFact:
    """A fact as read at a time: what it says, whose it is, since when it held and, when a
    later fact changed it, until when and which record did."""

    kind: str
    key: str
    text: str
    ended: bool
    evidence: tuple[tuple[str, int], ...]  # (session, seq) of the records it came from
    session: str  # the record that holds it
    seq: int
    since: str
    owner: dict[str, str]
    until: str | None = None
    superseded_by: tuple[str, int] | None = None

    @property
    def current(self) -> bool:
        """Whether it holds at the time it was read for."""
        return self.until is None and not self.ended

    def to_json(self) -> dict[str, Any]:
        """As the doors print it."""
        return {
            "kind": self.kind,
            "key": self.key,
            "text": self.text,
            "current": self.current,
            "since": self.since,
            "until": self.until,
            "superseded_by": (
                None
                if self.superseded_by is None
                else {"session": self.superseded_by[0], "seq": self.superseded_by[1]}
            ),
            "ended": self.ended,
            "owner": self.owner,
            "recorded": {"session": self.session, "seq": self.seq},
            "evidence": [{"session": s, "seq": q} for s, q in self.evidence],
        }


def _subject(fact: dict[str, Any], owner: dict[str, str]) -> tuple[Any, ...]:
    return (
        owner.get("user"),
        owner.get("project"),
        fact["kind"],
        " ".join(fact["key"].split()).casefold(),
    )


def timeline(
    states: Iterable[LearningsState], *, visible: set[str] | None, as_of: str | None
) -> list[HeldFact]:
    """Every fact of the sessions in ``visible`` (None: all) recorded by ``as_of`` (None: by
    now), oldest first, each with its validity as of then (see the module)."""
    found: list[tuple[tuple[Any, ...], dict[str, Any], dict[str, str]]] = []
    for state in states:
        if visible is not None and state.session not in visible:
            continue
        owner = dict(state.info.get("owner") or {})
        for fact in state.facts:
            if as_of is None or fact["since"] <= as_of:
                order = (fact["since"], fact["session"], fact["seq"], fact["index"])
                found.append((order, fact, owner))
    found.sort(key=lambda item: item[0])
    later: dict[tuple[Any, ...], dict[str, Any]] = {}
    held: list[HeldFact] = []
    for _, fact, owner in reversed(found):
        subject = _subject(fact, owner)
        successor = later.get(subject)
        later[subject] = fact
        held.append(
            HeldFact(
                kind=fact["kind"],
                key=fact["key"],
                text=fact["text"],
                ended=fact["ended"],
                evidence=tuple((e["session"], e["seq"]) for e in fact["evidence"]),
                session=fact["session"],
                seq=fact["seq"],
                since=fact["since"],
                owner=owner,
                until=None if successor is None else successor["since"],
                superseded_by=None
                if successor is None
                else (successor["evidence"][0]["session"], successor["evidence"][0]["seq"]),
            )
        )
    held.reverse()
    return held


def search(facts: list[HeldFact], query: str, k: int) -> list[HeldFact]:
    """The ``k`` facts best matching ``query`` (BM25 over their kind, key and text), best
    first."""
    ranker = BM25([f"{f.kind} {f.key} {f.text}" for f in facts])
    return [facts[index] for index, _ in ranker.top(query, k)]
