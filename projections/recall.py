"""``query_memory``: hybrid retrieval over the cold tier, with provenance and graceful degradation.

Candidates come from three searches of the cold table under the same filters: nearest neighbours
of the query's embedding and of its focus's (below), and full-text (BM25) matches. Each
candidate is scored

    score = weight_semantic * cosine + weight_focus * focus_cosine
          + weight_lexical * bm25 / best_bm25
          + weight_recency * 0.5 ** (age / half_life) + weight_anchor * anchors_matched
          + weight_speaker * speaker_named

where age is measured from the newest candidate (so a query's answer depends on the memory, not on
the wall clock), anchors are the query's exact tokens (names, numbers, identifiers, paths, quoted
text), and ``speaker_named`` is 1 for a message whose speaker label ("Caroline: ...") is one of
them: what a person did is told mostly by that person. The query is read as two sub-queries: the
exact one (its anchors, matched as text) and its focus, the query without its anchors
(``query_focus``), whose embedding meets what is asked about without the names: "What does Melanie
do to destress?" otherwise lands nearest to every turn that greets Melanie; the focus's own nearest
neighbours are candidates too. Weights live in ``airsspec.toml`` ``[cold]``; the defaults were
chosen by measuring recall on LoCoMo leave-one-conversation-out (bench/cold.py).

Filters (session, time, kinds, the reader's scope) apply inside each search, before its
candidates are cut, so a search with ``until`` still finds k earlier passages when they exist.
Recency breaks ties only (the newer passage first), unless ``weight_recency`` is set. The hits
are picked best first, each one's score lowered by ``session_diversity`` for every hit already
picked from its session, so several passages of one session leave room for other sessions
(questions answered by whole sessions: RealMem's assistant chats, bench/realmem.py), except a
message whose speaker the query names: a question about what Caroline said or did is answered by
Caroline's turns, often several in one session (LoCoMo, where lowering them costs); and only
hits scoring at least ``diversity_reach`` times the best are lifted so, never a weak passage over
a relevant one. Both were chosen leaving out each LoCoMo conversation and RealMem persona in turn
(bench/generalise.py: 0.3 and 0.3). Diversity applies only to a query whose best hits are
mostly conversation turns (``diversity_dialogue``): on an agent's coding sessions, whose hits are
tool calls, their output and thoughts, it lifted short unrelated messages of other sessions over
the session that did the work (the example workspace's questions, tests/support/example.py).

Invariants: every hit carries its provenance (session, seq range, event ids, record hashes,
``meta``; a summary hit also lists the records it covers; a source hit names its file and lines).
A query never raises into the agent because an index, the table or the embedder failed: it
answers from what works (full-text search, or a scan of the log itself) and says what degraded.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Callable, Collection, Iterable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any, ClassVar

import numpy as np
import pyarrow as pa

from eventlog.ids import normalize_ts
from eventlog.log import Log
from eventlog.schema import Record
from projections import cold_read
from projections.bm25 import BM25
from projections.cold import TABLE, ColdStore, quote
from projections.embedders import Embedder
from projections.policies import RecallWeights
from projections.sources import USERS_FOLDER
from projections.units import (
    TURN_TYPES,
    UNIT_FIELDS,
    UNIT_KINDS,
    Unit,
    record_units,
    unit_values,
)

KINDS = UNIT_KINDS
NPROBES = 20  # IVF partitions (about sqrt(rows) of them) an indexed vector search visits
REFINE_FACTOR = 2  # PQ candidates re-ranked with exact distances, per row returned
DIALOGUE_HITS = 20  # the best hits whose kinds tell a chat from an agent's work (``_dialogue``)
_QUOTED = re.compile(r"\"([^\"]+)\"|`([^`]+)`")
_INNER_MARK = re.compile(r"\w[_./:@#-]\w")
# a message opening with a speaker's name: "Caroline: ...", "Jon Snow: ..."
_SPEAKER = re.compile(r"([A-Z][\w'.-]*(?: [A-Z][\w'.-]*){0,2}):\s")
# the pronoun "I" and its contractions: capitalised anywhere, and in nearly every text
_FIRST_PERSON = re.compile(r"I(?:['\u2019](?:m|ve|d|ll))?")


@dataclass(frozen=True, slots=True)
class Hit(Unit):
    """One passage query_memory returns: the unit's text and provenance, its score and its
    parts, and the tier that answered (``warm`` for summaries, ``cold``, or ``log``)."""

    score: float = 0.0
    parts: dict[str, float] = field(default_factory=dict)
    tier: str = "cold"


@dataclass
class QueryResult:
    """query_memory's answer: hits, how it was found, warnings and timings."""

    query: str
    hits: list[Hit]
    warnings: list[str] = field(default_factory=list)
    mode: str = "hybrid"  # "hybrid" | "full-text" | "semantic" | "log-scan"
    timings_ms: dict[str, float] = field(default_factory=dict)

    @property
    def degraded(self) -> bool:
        """True when part of the memory could not answer."""
        return bool(self.warnings)

    def to_json(self) -> dict[str, Any]:
        """The answer as ``query --json`` prints it."""
        data = asdict(self)
        data["degraded"] = self.degraded
        return data


def query_anchors(query: str) -> list[str]:
    """The query's exact tokens, lowercased and unique: quoted text, anything with a digit,
    identifiers and paths, acronyms, and capitalised words that do not start a sentence (the
    pronoun "I" aside)."""
    found = [text for groups in _QUOTED.findall(query) for text in groups if text]
    words = query.split()
    for index, raw in enumerate(words):
        token = raw.strip("\"'`()[]{},;:!?.")
        if not token:
            continue
        sentence_start = index == 0 or words[index - 1].endswith((".", "!", "?"))
        if (
            any(c.isdigit() for c in token)
            or _INNER_MARK.search(token)
            or sum(c.isupper() for c in token) >= 2
            or (token[0].isupper() and not sentence_start and not _FIRST_PERSON.fullmatch(token))
        ):
            found.append(token)
    return list(dict.fromkeys(t.lower() for t in found))


def query_focus(query: str) -> str:
    """``query`` without its anchors (``query_anchors``): what it asks about, not whom or what
    it names. The query itself when it has no anchors or nothing else."""
    anchors = set(query_anchors(query))
    kept = [
        word
        for word in query.split()
        if (token := word.strip("\"'`()[]{},;:!?.").lower()) not in anchors
        and token.removesuffix("'s") not in anchors
    ]
    return " ".join(kept) if kept else query


def _speaker(candidate: _Candidate) -> str | None:
    """The lowercase speaker label a message opens with ("Caroline: ..."), if any."""
    if candidate.kind != "message" or not (match := _SPEAKER.match(candidate.text)):
        return None
    return match.group(1).lower()


def _age_days(newest: str, ts: str | None) -> float:
    if ts is None:
        return 0.0
    delta = datetime.fromisoformat(newest) - datetime.fromisoformat(ts)
    return max(delta.total_seconds(), 0.0) / 86_400


class Recall:
    """Answers ``query_memory`` from a cold store (and, as a last resort, from the log)."""

    def __init__(
        self,
        store: ColdStore,
        embedder: Embedder | None,
        weights: RecallWeights | None = None,
        log: Log | None = None,
    ) -> None:
        self.store = store
        self.embedder = embedder
        self.weights = weights or RecallWeights()
        self.log = log

    def query_memory(
        self,
        query: str,
        k: int = 10,
        session: str | None = None,
        since: str | None = None,
        until: str | None = None,
        kinds: Collection[str] | None = None,
        sessions: Collection[str] | None = None,
        user: str | None = None,
        learnings: Collection[str] | None = None,
        share: float = 0.0,
    ) -> QueryResult:
        """The ``k`` best units for ``query`` within the filters, best first. ``sessions``
        (a reader scope's sessions, ``projections.scopes``) keeps units of those sessions
        only, the workspace's documents, and learnings; with ``user`` (the reader's,
        ``Scope.documents_user``), documents another user owns (under
        ``sources/users/OTHER/``) are left out too, and
        ``learnings`` (the unit ids of the learnings the reader may see) keeps only those,
        before anything is ranked, so another reader's learning never takes a place.
        ``share``: the share of the workspace's sessions ``sessions`` holds, when known
        (``_Wider``)."""
        started = time.perf_counter()
        if kinds is not None and (unknown := set(kinds) - set(KINDS)):
            raise ValueError(f"unknown kinds {sorted(unknown)}; available: {', '.join(KINDS)}")
        since = normalize_ts(since) if since else None
        until = normalize_ts(until) if until else None
        result = QueryResult(query, [])
        # The model loads (a first query: a third of a second) while Lance is imported and the
        # table opened, when a local table is there to search (a cheap look, no Lance).
        local = self.store.local
        early = None
        if local is not None and (local / f"{TABLE}.lance").is_dir():
            early = _pool().submit(self._embed_query, query)
        dataset = self.store.dataset()
        if dataset is None:
            if early is not None:
                early.cancel()
            result.warnings.append(
                "the cold table is missing or unreadable; answered by scanning the log "
                "(run `airsspec project` to rebuild it)"
            )
            result.mode = "log-scan"
            filters = (session, since, until, kinds, sessions, user, learnings)
            result.hits = self._scan_log(query, k, *filters)
        else:
            filters = (session, since, until, kinds, sessions, user, learnings)
            embedding = early or _pool().submit(self._embed_query, query)
            n = max(self.weights.candidates, k)
            wider = _Wider.of(n, share, *filters)
            self._search(dataset, result, k, embedding, wider, *filters)
        result.timings_ms["total"] = round((time.perf_counter() - started) * 1000, 3)
        return result

    # ---------------------------------------------------------------- the cold table

    def _search(
        self,
        dataset: Any,
        result: QueryResult,
        k: int,
        embedding: Future[_Embedded],
        wider: _Wider | None,
        *filters: Any,
    ) -> None:
        where = _where(*filters)
        n = max(self.weights.candidates, k)
        # Full-text search needs no embedding: it runs while the query is embedded.
        text_search = _pool().submit(_text_rows, dataset, result.query, where, n, _SEARCHED, wider)
        query_vector, focus_vector, problem, took = embedding.result()
        if problem is not None:
            result.warnings.append(problem)
        if took is not None:
            result.timings_ms["embed"] = took
        begun = time.perf_counter()
        vector_rows: list[pa.Table] = []
        if query_vector is not None:
            try:  # the focus is a sub-query of its own: its nearest neighbours are candidates
                first, *others = _distinct_vectors(query_vector, focus_vector)
                # the focus's search on the pool (its other worker ran the full-text search,
                # finished by now or nearly) while the query's runs here
                pending = [
                    _pool().submit(_vector_rows, dataset, v, where, n, _SEARCHED, wider)
                    for v in others
                ]
                vector_rows = [_vector_rows(dataset, first, where, n, _SEARCHED, wider)]
                vector_rows += [future.result() for future in pending]
            except Exception as exc:  # lance raises many kinds; a failed index must not escape
                query_vector = None
                result.warnings.append(f"vector search failed ({exc}); full-text results only")
        try:
            text_rows = text_search.result()
        except Exception as exc:
            if query_vector is None:
                result.warnings.append(f"full-text search failed ({exc}); scanned the log")
                result.mode = "log-scan"
                result.hits = self._scan_log(result.query, k, *filters)
                return
            result.warnings.append(f"full-text search failed ({exc}); semantic results only")
            text_rows = None
        result.timings_ms["search"] = round((time.perf_counter() - begun) * 1000, 3)
        result.mode = (
            "full-text" if query_vector is None else "semantic" if text_rows is None else "hybrid"
        )
        candidates = _candidates(vector_rows, text_rows, query_vector, focus_vector)
        ranked = _one_per_message(self._rank(result.query, candidates), candidates)
        ranked = [r for r in ranked if r[1] > 0 and r[1] >= self.weights.min_score]
        w = self.weights
        turns = {u: c.type in TURN_TYPES for u, c in candidates.items() if c.kind == "message"}
        diversity = w.session_diversity if _dialogue(ranked, turns, w) else 0.0
        ranked = _diversified(ranked, diversity, 2 * k, w.diversity_reach)
        # a repeated text may be a restatement (see _distinct): read a row more for each
        texts = [candidates[u].text for u, _, _ in ranked[: 2 * k]]
        ranked = ranked[: k + len(texts) - len(set(texts))]
        try:  # the winners' full rows, as the searches returned them
            by_id = _full_rows([*vector_rows, text_rows], {u for u, _, _ in ranked})
            hits = [self._hit(by_id[u], score, parts) for u, score, parts in ranked]
            result.hits = _distinct(hits)[:k]
            self._list_covered(dataset, result.hits)
        except Exception as exc:
            result.warnings.append(f"reading the cold table failed ({exc}); scanned the log")
            result.mode = "log-scan"
            result.hits = self._scan_log(result.query, k, *filters)

    def _embed_query(self, query: str) -> _Embedded:
        """The embeddings of the query and of its focus (the same vector when the focus is the
        query), what degraded (None: nothing) and the milliseconds it took (None: no embedder).
        One text a call: a single text is embedded on one core, leaving the other to the
        full-text search running meanwhile (a batch would take every core). It runs on the
        pool, so it reports rather than writes into the result."""
        if self.embedder is None:
            return None, None, "no embedder is available; full-text results only", None
        begun = time.perf_counter()
        focus = query_focus(query)
        try:
            vector = self.embedder.embed([query])[0]
            other = vector if focus == query else self.embedder.embed([focus])[0]
            return vector, other, None, _ms_since(begun)
        except Exception as exc:  # any embedder failure degrades; never raises
            problem = f"the embedder failed ({exc}); full-text results only"
            return None, None, problem, _ms_since(begun)

    def _rank(
        self, query: str, candidates: dict[str, _Candidate]
    ) -> list[tuple[str, float, dict[str, float]]]:
        """(unit id, score, score parts) of every candidate, best first (ties: the newest
        first, then by unit id)."""
        w = self.weights
        best_lexical = max((c.lexical for c in candidates.values()), default=0.0) or 1.0
        newest = max((c.ts for c in candidates.values() if c.ts), default=None)
        anchors = query_anchors(query)
        names = {a.removesuffix("'s") for a in anchors}
        ranked = []
        for unit_id, candidate in candidates.items():
            text = candidate.text.lower()
            parts = {
                "semantic": max(candidate.semantic, 0.0),
                "focus": max(candidate.focus, 0.0),
                "lexical": candidate.lexical / best_lexical,
                "recency": 0.0
                if newest is None
                else math.pow(0.5, _age_days(newest, candidate.ts) / w.recency_half_life_days),
                "anchor": sum(a in text for a in anchors) / len(anchors) if anchors else 0.0,
                "speaker": float(_speaker(candidate) in names),
            }
            score = w.score(parts)
            parts = {name: round(value, 6) for name, value in parts.items()}
            ranked.append((unit_id, round(score, 6), parts))
        # ties: the newer passage first (recency breaks ties only), then by unit id
        ranked.sort(key=lambda item: item[0])
        ranked.sort(key=lambda item: candidates[item[0]].ts or "", reverse=True)
        ranked.sort(key=lambda item: -item[1])
        return ranked

    @staticmethod
    def _hit(row: dict[str, Any], score: float, parts: dict[str, float]) -> Hit:
        tier = "warm" if row["kind"] == "summary" else "cold"
        return Hit(**unit_values(row), score=score, parts=parts, tier=tier)

    @staticmethod
    def _list_covered(dataset: Any, hits: list[Hit]) -> None:
        """A summary hit lists the records it covers (seq, id, hash), read from message rows."""
        for hit in hits:
            if hit.covers is None:
                continue
            rows = cold_read.rows(
                dataset,
                f"kind = 'message' AND session = {quote(hit.covers['session'])} AND "
                f"record_seq BETWEEN {hit.covers['from_seq']} AND {hit.covers['to_seq']}",
                ["record_seq", "event_ids", "hashes"],
            )
            seen = {r["record_seq"]: (r["event_ids"][0], r["hashes"][0]) for r in rows}
            hit.covers["records"] = [
                {"seq": seq, "id": seen[seq][0], "hash": seen[seq][1]} for seq in sorted(seen)
            ]

    # ---------------------------------------------------------------- last resort: the log

    def _scan_log(
        self,
        query: str,
        k: int,
        session: str | None,
        since: str | None,
        until: str | None,
        kinds: Collection[str] | None,
        sessions: Collection[str] | None = None,
        user: str | None = None,  # documents are not in the log: nothing of theirs to filter
        learnings: Collection[str] | None = None,
    ) -> list[Hit]:
        if self.log is None:
            return []
        log = self.log
        names = log.sessions()
        if session:
            names = [session] if session in names else []
        records = (located.record for name in names for located in log.read(name))
        return scan(
            records,
            query,
            k,
            kinds=kinds,
            since=since,
            until=until,
            sessions=sessions,
            learnings=learnings,
        )


def scan(
    records: Iterable[Record],
    query: str,
    k: int,
    *,
    kinds: Collection[str] | None = None,
    since: str | None = None,
    until: str | None = None,
    sessions: Collection[str] | None = None,
    learnings: Collection[str] | None = None,
) -> list[Hit]:
    """The ``k`` best passages of ``records`` for ``query`` by BM25 (best = 1.0), one per
    message (a long message's chunks are one passage): recall where no index answers (the
    log scan of ``Recall``, and the records the cold index has not reached yet). Only units of
    ``kinds``, within ``since``/``until``, of ``sessions`` (a learning: among ``learnings``,
    by unit id) are ranked."""
    if kinds is not None and not {"message", "summary", "learning"} & set(kinds):
        return []
    units = []
    for record in records:
        for unit in record_units(record):
            if kinds is not None and unit.kind not in kinds:
                continue
            if unit.kind == "learning":
                if learnings is not None and unit.unit_id not in learnings:
                    continue
            elif sessions is not None and unit.session not in sessions:
                continue
            if (since and unit.ts and unit.ts < since) or (until and unit.ts and unit.ts > until):
                continue
            units.append(unit)
    ranked = BM25([u.text for u in units]).top(query, 4 * k) if units else []
    firsts: dict[Any, int] = {}
    for i, _ in ranked:
        unit = units[i]
        firsts.setdefault(
            (unit.session, unit.record_seq) if unit.kind == "message" else unit.unit_id, i
        )
    keep = set(firsts.values())
    ranked = [(i, score) for i, score in ranked if i in keep and score > 0][:k]
    best = ranked[0][1] if ranked else 1.0
    return [
        Hit(
            **{name: getattr(units[i], name) for name in UNIT_FIELDS},
            score=round(score / best, 6),
            parts={"lexical": round(score / best, 6)},
            tier="log",
        )
        for i, score in ranked
    ]


def _ms_since(begun: float) -> float:
    return round((time.perf_counter() - begun) * 1000, 3)


# the query's and its focus's embeddings, what degraded, and the milliseconds (Recall._embed_query)
_Embedded = tuple[np.ndarray | None, np.ndarray | None, str | None, float | None]

_POOL: ThreadPoolExecutor | None = None


def _pool() -> ThreadPoolExecutor:
    global _POOL
    if _POOL is None:
        _POOL = ThreadPoolExecutor(max_workers=2, thread_name_prefix="recall")
    return _POOL


# Searches read only what ranking needs; the full rows of the k winners are read after.
_RANK_COLUMNS = ["unit_id", "ts", "text", "kind", "type"]
# What each search returns: the full row too, so the winners' rows are not read again by a
# filter on their ids (a scan of every fragment's index: 30 ms of CPU a search at 10k rows in
# a hundred fragments, against 3 ms for these columns of the rows a search returns).
_SEARCHED = list(dict.fromkeys([*_RANK_COLUMNS, *UNIT_FIELDS, "vector"]))


@dataclass(slots=True)
class _Candidate:
    ts: str | None
    text: str
    kind: str
    type: str
    semantic: float = 0.0
    focus: float = 0.0  # cosine with the query's focus (``query_focus``)
    lexical: float = 0.0


AFTER_SHARE = 0.5
"""A reader who sees at least this share of the workspace's sessions is filtered after a search's
cut, not before (``_Wider``)."""


@dataclass(frozen=True)
class _Wider:
    """A search filtered after its cut. Lance filters before the cut by building the mask of
    every row the filter keeps, and parses the filter's list of sessions: at 1M rows a reader's
    filter naming its 5,000 sessions made a vector search 110 ms against 20-30 unfiltered, a
    full-text search 32 ms against 4. So a reader who sees most of the workspace (``share``
    of its sessions, at least ``AFTER_SHARE``) under no other filter is searched unfiltered for
    ``rows`` (``n / share`` and a tenth more), and those its rule keeps (``keeps``, the rule
    ``_where`` writes in SQL) are taken: when ``n`` are kept, they are the ``n`` best it keeps
    (a better one would be among them); else the search is made again, filtered first."""

    rows: int
    keeps: Callable[[Mapping[str, Any]], bool]
    JUDGED: ClassVar[list[str]] = ["unit_id", "kind", "session", "source"]  # what ``keeps`` reads

    @classmethod
    def of(
        cls,
        n: int,
        share: float,
        session: str | None,
        since: str | None,
        until: str | None,
        kinds: Collection[str] | None,
        sessions: Collection[str] | None,
        user: str | None,
        learnings: Collection[str] | None,
    ) -> _Wider | None:
        """The wider search of ``n`` rows for these filters; None: filtered first."""
        if sessions is None or share < AFTER_SHARE or session or since or until or kinds:
            return None
        return cls(math.ceil(n / min(share, 1.0) * 1.1), _keeps(sessions, user, learnings))

    def searched(self, columns: list[str]) -> list[str]:
        """``columns`` and those ``keeps`` reads."""
        return [*dict.fromkeys([*columns, *self.JUDGED])]

    def kept(self, rows: pa.Table) -> pa.Table:
        """The rows ``keeps`` keeps, in their order."""
        judged = rows.select(self.JUDGED).to_pylist()
        return rows.take([i for i, row in enumerate(judged) if self.keeps(row)])


def _vector_rows(
    dataset: Any,
    vector: np.ndarray,
    where: str,
    n: int,
    columns: list[str] | None = None,
    wider: _Wider | None = None,
) -> pa.Table:
    """The ``n`` nearest rows to ``vector`` among those ``where`` keeps. The filter applies
    before the pool is cut (after it, for a reader who sees most of the workspace, when that
    keeps ``n``: ``_Wider``): an ANN search visits only ``NPROBES`` partitions, so a filter
    (a time window, a session) whose rows lie in other partitions would leave fewer than
    ``n``; then the filtered rows are searched exactly."""
    if wider is not None:
        searched = wider.searched(columns or [*_RANK_COLUMNS, "vector"])
        rows = wider.kept(_nearest(dataset, vector, "", wider.rows, exact=False, columns=searched))
        if rows.num_rows >= n:
            return rows.slice(0, n)
    rows = _nearest(dataset, vector, where, n, exact=False, columns=columns)
    if where and rows.num_rows < n:
        return _nearest(dataset, vector, where, n, exact=True, columns=columns)
    return rows


def _nearest(
    dataset: Any,
    vector: np.ndarray,
    where: str,
    n: int,
    *,
    exact: bool,
    columns: list[str] | None = None,
) -> pa.Table:
    """With an ANN index (not ``exact``), ``REFINE_FACTOR * n`` PQ candidates of the
    ``NPROBES`` partitions visited get exact distances. ``columns``: the ranking's (default)
    or more."""
    return cold_read.nearest(
        dataset,
        vector,
        columns or [*_RANK_COLUMNS, "vector"],
        where,
        n,
        nprobes=NPROBES,
        refine_factor=REFINE_FACTOR,
        exact=exact,
    )


def _text_rows(
    dataset: Any,
    query: str,
    where: str,
    n: int,
    columns: list[str] | None = None,
    wider: _Wider | None = None,
) -> pa.Table:
    """The ``n`` best rows by BM25 among those ``where`` keeps (filtered after the cut for a
    reader who sees most of the workspace, when that keeps ``n``: ``_Wider``; the rows not
    indexed yet are then scored by the whole table's statistics, not the filtered rows')."""
    searched = columns or [*_RANK_COLUMNS, "vector"]
    if wider is not None:
        whole = wider.searched(searched)
        rows = wider.kept(cold_read.full_text(dataset, query, "search_text", whole, "", wider.rows))
        if rows.num_rows >= n:
            return rows.slice(0, n)
    return cold_read.full_text(dataset, query, "search_text", searched, where, n)


def _full_rows(found: list[pa.Table | None], wanted: set[str]) -> dict[str, dict[str, Any]]:
    """The rows (``UNIT_FIELDS``) of the units ``wanted``, by unit id, from the tables the
    searches returned (a unit found by both: the same row, read once)."""
    by_id: dict[str, dict[str, Any]] = {}
    for rows in found:
        if rows is None or not rows.num_rows:
            continue
        ids = rows["unit_id"].to_pylist()
        picked = [i for i, u in enumerate(ids) if u in wanted and u not in by_id]
        if not picked:
            continue
        for row in rows.select(list(UNIT_FIELDS)).take(picked).to_pylist():
            by_id[row["unit_id"]] = row
    return by_id


def _similarities(rows: pa.Table, vector: np.ndarray) -> np.ndarray:
    """The cosine of each row's vector with ``vector`` (0 for a row without one: full-text
    only; vectors are unit length)."""
    column = rows["vector"].combine_chunks()
    if not len(column):
        return np.zeros(0)
    vectors = column.values.to_numpy(zero_copy_only=False).reshape(-1, len(vector))
    return np.where(column.is_null().to_numpy(False), 0.0, vectors @ vector)


def _distinct_vectors(query: np.ndarray, focus: np.ndarray | None) -> list[np.ndarray]:
    """The query's embedding, and its focus's when the focus is another text."""
    return [query] if focus is None or focus is query else [query, focus]


def _candidates(
    vector_rows: list[pa.Table],
    text_rows: pa.Table | None,
    query_vector: np.ndarray | None,
    focus_vector: np.ndarray | None = None,
) -> dict[str, _Candidate]:
    """Each unit found (by the query's or the focus's nearest neighbours, or full text), once,
    with its cosine similarities (query, focus) and BM25 score (0 where unknown)."""
    found: dict[str, _Candidate] = {}
    if focus_vector is None:
        focus_vector = query_vector
    for rows in [*vector_rows, text_rows]:
        if rows is None or not rows.num_rows:
            continue
        semantic = focus = None
        if query_vector is not None and focus_vector is not None:
            semantic = _similarities(rows, query_vector)
            focus = _similarities(rows, focus_vector)
        lexical = rows["_score"].to_pylist() if "_score" in rows.column_names else None
        listed = rows.select(_RANK_COLUMNS).to_pylist()
        for index, row in enumerate(listed):
            candidate = found.get(row["unit_id"])
            if candidate is None:
                candidate = _Candidate(row["ts"], row["text"], row["kind"], row["type"])
                if semantic is not None and focus is not None:
                    candidate.semantic = float(semantic[index])
                    candidate.focus = float(focus[index])
                found[row["unit_id"]] = candidate
            if lexical is not None:
                candidate.lexical = float(lexical[index])
    return found


def _one_per_message(
    ranked: list[tuple[str, float, dict[str, float]]], candidates: dict[str, _Candidate]
) -> list[tuple[str, float, dict[str, float]]]:
    """``ranked`` with one entry per message: the chunks of a long message (unit ids
    ``session:seq:part``) stand for one passage, so only its best chunk keeps a place (its
    score, its text; the hit's provenance, seq and hash, is the whole record's) and the k hits
    are k different passages. Summaries, sources and learnings are passages of their own."""
    seen: set[str] = set()
    kept = []
    for item in ranked:  # best first: the first chunk of a message met is its best
        if candidates[item[0]].kind == "message":
            message = item[0].rsplit(":", 1)[0]
            if message in seen:
                continue
            seen.add(message)
        kept.append(item)
    return kept


def _diversified(
    ranked: list[tuple[str, float, dict[str, float]]], diversity: float, n: int, reach: float = 0.0
) -> list[tuple[str, float, dict[str, float]]]:
    """The first ``n`` of ``ranked`` (best first) picked greedily, each pick the candidate whose
    score less ``diversity`` times the hits already picked from its session (a document's
    chunks: from that document) is best; the rest after, as they were. Only candidates scoring
    at least ``reach`` times the best are picked so: diversity never lifts a passage far weaker
    than the best over a relevant one of a busy session. A message whose speaker the query
    names (score part ``speaker``) is never lowered: such a question is asked about that
    person's turns, not about sessions. Session-level recall counts the sessions the top k
    holds: several passages of one session answer no more than one.

    Each score is its own, capped by the one before it (part ``diversity``: minus what the cap
    took), so scores stay in order, none rises, and none falls under the relevance floor that
    every candidate met: the hits of a single session keep their scores."""
    if not diversity or not ranked:
        return ranked
    least = reach * ranked[0][1]
    pool = [item for item in ranked if item[1] >= least]
    rest = [item for item in ranked if item[1] < least]
    picked: list[tuple[str, float, dict[str, float]]] = []
    per_session: dict[str, int] = {}
    groups = {item[0]: _group(item[0]) for item in pool}  # once each, not once a pick

    def lowered(item: tuple[str, float, dict[str, float]]) -> float:
        exempt = item[2].get("speaker", 0.0)
        return item[1] - diversity * per_session.get(groups[item[0]], 0) * (1 - exempt)

    while pool and len(picked) < n:
        best = max(pool, key=lowered)
        pool.remove(best)
        per_session[groups[best[0]]] = per_session.get(groups[best[0]], 0) + 1
        picked.append(best)
    capped, cap = [], math.inf
    for unit_id, score, parts in picked + pool + rest:
        cap = min(score, cap)
        capped.append((unit_id, cap, {**parts, "diversity": round(cap - score, 6)}))
    return capped


def _dialogue(
    ranked: list[tuple[str, float, dict[str, float]]],
    turns: dict[str, bool],
    weights: RecallWeights,
) -> bool:
    """Whether session diversity applies to ``ranked``: at least ``diversity_dialogue`` of the
    message hits it may reorder (of the first ``DIALOGUE_HITS``, those reaching
    ``diversity_reach`` times the best: the pool's shape, whatever k) are conversation turns
    (``turns``: message unit id -> whether a user or assistant turn). In a memory of chats each
    session is a conversation on its own topic and a question may be answered by several of
    them; an agent's working sessions are mostly tool calls, their output and its
    thoughts, and a question about the work is answered by the passages of the one session that
    did it, where diversity lifted short unrelated messages of other sessions ("T9 done").
    ``diversity_dialogue`` 0 applies it to every query."""
    if not weights.diversity_dialogue or not ranked:
        return bool(ranked)
    least = weights.diversity_reach * ranked[0][1]
    said = [turns[u] for u, score, _ in ranked[:DIALOGUE_HITS] if score >= least and u in turns]
    return bool(said) and sum(said) >= weights.diversity_dialogue * len(said)


def _group(unit_id: str) -> str:
    """A unit's session, or its document (``src:path``): the unit id without ``:seq:part``."""
    return unit_id.rsplit(":", 2)[0]


def _distinct(hits: list[Hit]) -> list[Hit]:
    """``hits`` without restatements: a learning or summary whose text is a message's among the
    hits (an identity-anchor learning quotes its message verbatim) or an earlier hit's would
    take a place from another passage; the message carries the provenance itself. Messages
    always stay: two with the same words are two events."""
    messages = {hit.text for hit in hits if hit.kind == "message"}
    seen: set[str] = set()
    kept = []
    for hit in hits:
        if hit.kind != "message":
            if hit.text in messages or hit.text in seen:
                continue
            seen.add(hit.text)
        kept.append(hit)
    return kept


def _where(
    session: str | None,
    since: str | None,
    until: str | None,
    kinds: Collection[str] | None,
    sessions: Collection[str] | None = None,
    user: str | None = None,
    learnings: Collection[str] | None = None,
) -> str:
    """The SQL filter of a search. The reader's part (``sessions``, ``user``, ``learnings``)
    tests only columns with a scalar index (``ColdStore.maintain``), so Lance answers it from its
    indexes: a function of a column (``starts_with``) or an empty ``IN (NULL)`` makes it read
    and evaluate every row of the table instead (0.4 s at 100k rows, each search)."""
    clauses = []
    if sessions is not None:
        readable = [f"session IN ({_listed(sessions)})"] if sessions else []
        if learnings is None:
            readable.append("kind = 'learning'")
        elif learnings:  # learning units by id: a row of another kind is never kept by its id
            readable.append(f"(kind = 'learning' AND unit_id IN ({_listed(learnings)}))")
        readable.append(_documents(user))
        clauses.append("(" + " OR ".join(readable) + ")")
    if session:
        clauses.append(f"session = {quote(session)}")
    if since:
        clauses.append(f"ts >= {quote(since)}")
    if until:
        clauses.append(f"ts <= {quote(until)}")
    if kinds:
        clauses.append(f"kind IN ({_listed(kinds)})")
    return " AND ".join(clauses)


def _listed(values: Collection[str]) -> str:
    return ", ".join(quote(v) for v in sorted(values))


def _keeps(
    sessions: Collection[str], user: str | None, learnings: Collection[str] | None
) -> Callable[[Mapping[str, Any]], bool]:
    """The reader's part of ``_where`` as a test of one row (its ``session``, ``kind``,
    ``unit_id`` and ``source``), for rows filtered after a search (``_Wider``): the same rule,
    row for row (a test holds them equal)."""
    sessions, listed = frozenset(sessions), None if learnings is None else frozenset(learnings)
    users, mine = f"{USERS_FOLDER}/", f"{USERS_FOLDER}/{user}/"

    def keeps(row: Mapping[str, Any]) -> bool:
        kind, source = row["kind"], row["source"]
        if row["session"] in sessions:
            return True
        if kind == "learning":
            return listed is None or row["unit_id"] in listed
        if kind != "source" or user is None:
            return kind == "source"
        if source is None:
            return False
        return not users <= source < users[:-1] + "0" or mine <= source < mine[:-1] + "0"

    return keeps


def _documents(user: str | None) -> str:
    """The documents ``user`` may read (None: every one): the workspace's, and its own under
    ``users/USER/``, never another user's. A prefix is a range of the indexed ``source``
    column (``'users/'`` up to ``'users0'``, the next byte after ``/``), not ``starts_with``."""
    if user is None:
        return "kind = 'source'"
    users, mine = f"{USERS_FOLDER}/", f"{USERS_FOLDER}/{user}/"
    return (
        f"(kind = 'source' AND (source < {quote(users)} OR source >= {quote(users[:-1] + '0')}"
        f" OR (source >= {quote(mine)} AND source < {quote(mine[:-1] + '0')})))"
    )
