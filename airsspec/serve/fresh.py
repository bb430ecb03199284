"""A search that never waits for the cold tier: what is indexed, plus a scan of the rest.

The server embeds in the background, so a query may arrive before the records just appended
are indexed. ``search_now`` answers from the cold tier as it is (``Memory.search(fresh=False)``),
then reads the records each visible session has beyond the cold tier's checkpoint (at most
``SCAN_LIMIT``, newest first), ranks their passages for the query with BM25 as the log scan of
``query_memory`` does, and merges them into the hits (``tier: "log"``); ``unindexed`` says how
many records were not indexed and ``warnings`` says so in words. Provenance is the same as any
hit's: session, seq range, time, ids and hashes.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

SCAN_LIMIT = 5000  # unindexed records read per query at most (the cold tier catches up anyway)


def _behind(memory: Any, session: str | None) -> dict[str, tuple[int, int]]:
    """The sessions the cold tier lags on (of those visible): first unindexed seq, head."""
    from projections.checkpoints import log_tail

    log = memory.workspace.log
    (cold,) = memory.workspace.projectors(("cold",))
    manifest = cold.state_store.read_manifest()
    names = [session] if session else [info.session for info in memory.sessions()]
    behind = {}
    for name in names:
        entry = manifest.get(name)
        done = entry.checkpoint.seq if entry is not None and entry.checkpoint else 0
        head = log_tail(log, name).seq
        if head > done:
            behind[name] = (done + 1, head)
    return behind


def _tail_hits(
    memory: Any, behind: dict[str, tuple[int, int]], query: str, k: int, filters: dict
) -> list[dict[str, Any]]:
    """The best passages of the unindexed records for ``query`` (BM25, best = 1.0)."""
    from eventlog.ids import normalize_ts
    from projections.bm25 import BM25
    from projections.recall import Hit
    from projections.units import UNIT_FIELDS, record_units

    units, read = [], 0
    kinds = filters.get("kinds")
    since, until = (
        normalize_ts(t) if t else None for t in (filters.get("since"), filters.get("until"))
    )
    for name, (first, _) in behind.items():
        for record in memory.replay(name, from_seq=first):
            read += 1
            for unit in record_units(record):
                if kinds is not None and unit.kind not in kinds:
                    continue
                if (since and unit.ts and unit.ts < since) or (
                    until and unit.ts and unit.ts > until
                ):
                    continue
                units.append(unit)
            if read >= SCAN_LIMIT:
                break
    ranked = BM25([u.text for u in units]).top(query, k) if units else []
    best = ranked[0][1] if ranked else 1.0
    return [
        asdict(
            Hit(
                **{name: getattr(units[i], name) for name in UNIT_FIELDS},
                score=round(score / best, 6),
                parts={"lexical": round(score / best, 6)},
                tier="log",
            )
        )
        for i, score in ranked
        if score > 0
    ]


def search_now(memory: Any, query: str, *, k: int = 10, **filters: Any) -> dict[str, Any]:
    """``Memory.search`` without waiting for the cold tier (see the module)."""
    answer = memory.search(query, k=k, fresh=False, **filters)
    behind = _behind(memory, filters.get("session"))
    lag = sum(head - first + 1 for first, head in behind.values())
    answer["unindexed"] = lag
    if lag:
        extra = _tail_hits(memory, behind, query, k, filters)
        seen = {hit["unit_id"] for hit in answer["hits"]}
        merged = answer["hits"] + [hit for hit in extra if hit["unit_id"] not in seen]
        answer["hits"] = sorted(merged, key=lambda hit: -hit["score"])[:k]
        answer["warnings"].append(
            f"{lag} recent record(s) not indexed yet; searched them in the log (full text)"
        )
    return answer
