"""``query_memory``: hybrid retrieval over the cold tier, with provenance and graceful degradation.

Candidates come from two searches of the cold table under the same filters: nearest neighbours
of the query's embedding, and full-text (BM25) matches. Each candidate is scored

    score = w_semantic * cosine + w_lexical * bm25 / best_bm25
          + w_recency * 0.5 ** (age / half_life) + w_anchor * anchors_matched

where age is measured from the newest candidate (so a query's answer depends on the memory, not
on the wall clock) and anchors are the query's exact tokens (names, numbers, identifiers, paths,
quoted text). Weights live in ``airsspec.toml`` ``[cold]``; the defaults were chosen by measuring
recall on LoCoMo (bench/cold.py).

Invariants: every hit carries its provenance (session, seq range, event ids, record hashes,
``meta``; a summary hit also lists the records it covers; a source hit names its file and lines).
A query never raises into the agent because an index, the table or the embedder failed: it
answers from what works (full-text search, or a scan of the log itself) and says what degraded.
"""

from __future__ import annotations

import math
import re
import time
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any

import numpy as np
import orjson

from eventlog.ids import normalize_ts
from eventlog.log import EventLog
from projections.bm25 import BM25
from projections.cold import ColdStore, quote
from projections.embedders import Embedder
from projections.units import record_units

KINDS = ("message", "summary", "source")
_RESULT_COLUMNS = [
    "unit_id", "kind", "type", "session", "record_seq", "seq_from", "seq_to", "ts",
    "event_ids", "hashes", "meta", "covers", "source", "line_from", "line_to", "text", "vector",
]  # fmt: skip
_QUOTED = re.compile(r"\"([^\"]+)\"|`([^`]+)`")
_INNER_MARK = re.compile(r"\w[_./:@#-]\w")


@dataclass(frozen=True)
class RecallWeights:
    semantic: float = 0.5
    lexical: float = 0.5
    recency: float = 0.0
    anchor: float = 0.1
    half_life_days: float = 30.0
    candidates: int = 50


@dataclass
class Hit:
    text: str
    score: float
    parts: dict[str, float]
    kind: str
    tier: str
    type: str
    unit_id: str
    session: str | None = None
    seq_from: int | None = None
    seq_to: int | None = None
    ts: str | None = None
    event_ids: list[str] = field(default_factory=list)
    hashes: list[str] = field(default_factory=list)
    meta: dict[str, Any] | None = None
    covers: dict[str, Any] | None = None
    source: str | None = None
    line_from: int | None = None
    line_to: int | None = None


@dataclass
class QueryResult:
    query: str
    hits: list[Hit]
    warnings: list[str] = field(default_factory=list)
    mode: str = "hybrid"  # "hybrid" | "full-text" | "semantic" | "log-scan"
    timings_ms: dict[str, float] = field(default_factory=dict)

    @property
    def degraded(self) -> bool:
        return bool(self.warnings)

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["degraded"] = self.degraded
        return data


def query_anchors(query: str) -> list[str]:
    """The query's exact tokens, lowercased and unique: quoted text, anything with a digit,
    identifiers and paths, acronyms, and capitalised words that do not start a sentence."""
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
            or (token[0].isupper() and not sentence_start)
        ):
            found.append(token)
    return list(dict.fromkeys(t.lower() for t in found))


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
        log: EventLog | None = None,
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
        kinds: list[str] | None = None,
    ) -> QueryResult:
        """The ``k`` best units for ``query`` within the filters, best first."""
        started = time.perf_counter()
        if kinds is not None and (unknown := set(kinds) - set(KINDS)):
            raise ValueError(f"unknown kinds {sorted(unknown)}; available: {', '.join(KINDS)}")
        since = normalize_ts(since) if since else None
        until = normalize_ts(until) if until else None
        result = QueryResult(query, [])
        table = self.store.open()
        if table is None:
            result.warnings.append(
                "the cold table is missing or unreadable; answered by scanning the log "
                "(run `airsspec project` to rebuild it)"
            )
            result.mode = "log-scan"
            result.hits = self._scan_log(query, k, session, since, until, kinds)
        else:
            self._search(table, result, k, session, since, until, kinds)
        result.timings_ms["total"] = round((time.perf_counter() - started) * 1000, 3)
        return result

    # ---------------------------------------------------------------- the cold table

    def _search(self, table: Any, result: QueryResult, k: int, *filters: Any) -> None:
        where = _where(*filters)
        n = max(self.weights.candidates, k)
        query_vector = None
        if self.embedder is not None:
            begun = time.perf_counter()
            try:
                query_vector = self.embedder.embed([result.query])[0]
            except Exception as exc:  # any embedder failure degrades; never raises
                result.warnings.append(f"the embedder failed ({exc}); full-text results only")
            result.timings_ms["embed"] = round((time.perf_counter() - begun) * 1000, 3)
        else:
            result.warnings.append("no embedder is available; full-text results only")
        begun = time.perf_counter()
        candidates: dict[str, dict[str, Any]] = {}
        if query_vector is not None:
            try:
                search = table.search(query_vector, vector_column_name="vector")
                search = search.distance_type("cosine").limit(n)
                search = search.select([*_RESULT_COLUMNS, "_distance"])
                if where:
                    search = search.where(where, prefilter=True)
                for row in search.nprobes(20).refine_factor(4).to_list():
                    candidates[row["unit_id"]] = row
            except Exception as exc:
                query_vector = None
                result.warnings.append(f"vector search failed ({exc}); full-text results only")
        lexical: dict[str, float] = {}
        try:
            search = table.search(result.query, query_type="fts").limit(n)
            search = search.select([*_RESULT_COLUMNS, "_score"])
            if where:
                search = search.where(where, prefilter=True)
            for row in search.to_list():
                lexical[row["unit_id"]] = float(row["_score"])
                candidates.setdefault(row["unit_id"], row)
        except Exception as exc:
            if query_vector is None:
                result.warnings.append(f"full-text search failed ({exc}); scanned the log")
                result.mode = "log-scan"
                result.hits = self._scan_log(result.query, k, *filters)
                return
            result.warnings.append(f"full-text search failed ({exc}); semantic results only")
        result.timings_ms["search"] = round((time.perf_counter() - begun) * 1000, 3)
        if query_vector is None:
            result.mode = "full-text"
        elif not lexical and any("full-text" in w for w in result.warnings):
            result.mode = "semantic"
        ranked = self._rank(result.query, query_vector, candidates, lexical)[:k]
        result.hits = [self._hit(row, score, parts) for row, score, parts in ranked]
        self._list_covered(table, result.hits)

    def _rank(
        self,
        query: str,
        query_vector: np.ndarray | None,
        candidates: dict[str, dict[str, Any]],
        lexical: dict[str, float],
    ) -> list[tuple[dict[str, Any], float, dict[str, float]]]:
        w = self.weights
        best_lexical = max(lexical.values(), default=0.0) or 1.0
        newest = max((r["ts"] for r in candidates.values() if r["ts"]), default=None)
        anchors = query_anchors(query)
        ranked = []
        for unit_id, row in candidates.items():
            parts = {
                "semantic": 0.0
                if query_vector is None
                else max(float(np.dot(query_vector, np.asarray(row["vector"]))), 0.0),
                "lexical": lexical.get(unit_id, 0.0) / best_lexical,
                "recency": 0.0
                if newest is None
                else math.pow(0.5, _age_days(newest, row["ts"]) / w.half_life_days),
                "anchor": sum(a in row["text"].lower() for a in anchors) / len(anchors)
                if anchors
                else 0.0,
            }
            score = (
                w.semantic * parts["semantic"]
                + w.lexical * parts["lexical"]
                + w.recency * parts["recency"]
                + w.anchor * parts["anchor"]
            )
            parts = {name: round(value, 6) for name, value in parts.items()}
            ranked.append((row, round(score, 6), parts))
        ranked.sort(key=lambda item: (-item[1], item[0]["unit_id"]))
        return ranked

    @staticmethod
    def _hit(row: dict[str, Any], score: float, parts: dict[str, float]) -> Hit:
        return Hit(
            text=row["text"],
            score=score,
            parts=parts,
            kind=row["kind"],
            tier="warm" if row["kind"] == "summary" else "cold",
            type=row["type"],
            unit_id=row["unit_id"],
            session=row["session"],
            seq_from=row["seq_from"],
            seq_to=row["seq_to"],
            ts=row["ts"],
            event_ids=list(row["event_ids"] or []),
            hashes=list(row["hashes"] or []),
            meta=orjson.loads(row["meta"]) if row["meta"] else None,
            covers=orjson.loads(row["covers"]) if row["covers"] else None,
            source=row["source"],
            line_from=row["line_from"],
            line_to=row["line_to"],
        )

    @staticmethod
    def _list_covered(table: Any, hits: list[Hit]) -> None:
        """A summary hit lists the records it covers (seq, id, hash), read from message rows."""
        for hit in hits:
            if hit.covers is None:
                continue
            rows = (
                table.search()
                .where(
                    f"kind = 'message' AND session = {quote(hit.covers['session'])} AND "
                    f"record_seq BETWEEN {hit.covers['from_seq']} AND {hit.covers['to_seq']}"
                )
                .select(["record_seq", "event_ids", "hashes"])
                .limit(1_000_000)
                .to_list()
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
        kinds: list[str] | None,
    ) -> list[Hit]:
        if self.log is None or (kinds is not None and not {"message", "summary"} & set(kinds)):
            return []
        units = []
        for name in [session] if session else self.log.sessions():
            if name not in self.log.sessions():
                continue
            for located in self.log.read(name):
                for unit in record_units(located.record):
                    if kinds is not None and unit.kind not in kinds:
                        continue
                    if (since and unit.ts and unit.ts < since) or (
                        until and unit.ts and unit.ts > until
                    ):
                        continue
                    units.append(unit)
        ranked = BM25([u.text for u in units]).top(query, k)
        best = ranked[0][1] if ranked else 1.0
        return [
            Hit(
                text=units[i].text,
                score=round(score / best, 6),
                parts={"lexical": round(score / best, 6)},
                kind=units[i].kind,
                tier="log",
                type=units[i].type,
                unit_id=units[i].unit_id,
                session=units[i].session,
                seq_from=units[i].seq_from,
                seq_to=units[i].seq_to,
                ts=units[i].ts,
                event_ids=list(units[i].event_ids),
                hashes=list(units[i].hashes),
                meta=units[i].meta,
                covers=units[i].covers,
            )
            for i, score in ranked
        ]


def _where(
    session: str | None, since: str | None, until: str | None, kinds: list[str] | None
) -> str:
    clauses = []
    if session:
        clauses.append(f"session = {quote(session)}")
    if since:
        clauses.append(f"ts >= {quote(since)}")
    if until:
        clauses.append(f"ts <= {quote(until)}")
    if kinds:
        clauses.append("kind IN (" + ", ".join(quote(k) for k in kinds) + ")")
    return " AND ".join(clauses)
