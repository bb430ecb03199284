"""The one search operation on the facade: ``search``, and ``query_memory`` (the tool-shaped call).

``search`` takes keyword arguments, ``query_memory`` a ``QueryMemoryInput`` (the one declaration
of a query: the agent tool's schema, ``query --batch`` lines and the MCP/HTTP tool are all
generated from it); both answer with the same JSON-ready shape. Only what the reader scope may
see is ranked: sessions outside it never reach the index query, and a learning hit is kept
only while that learning is active for the scope.

``search_now`` never waits for the cold projection: it answers from what is indexed, then reads
the records each visible session holds beyond the cold checkpoint (at most ``SCAN_LIMIT``),
ranks their passages with BM25 as the log scan of recall does, and merges them in (``tier:
"log"``); ``unindexed`` counts those records and ``warnings`` says so in words. Provenance is
the same as any hit's: session, seq range, time, ids and hashes.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from airsspec.errors import InvalidQueryError, NoSuchSessionError, field_of
from eventlog.bound import Bound
from projections.memory_tool import QueryMemoryInput
from projections.scopes import Scope

if TYPE_CHECKING:
    from airsspec.memory.core import Memory

SCAN_LIMIT = 5000  # unindexed records read per query at most (the cold projection catches up)


def request(query: str, **fields: Any) -> QueryMemoryInput:
    """A validated ``QueryMemoryInput``; ``InvalidQueryError`` naming the first bad field."""
    kinds = fields.get("kinds")
    if kinds is not None:
        fields["kinds"] = list(kinds)
    try:
        return QueryMemoryInput(query=query, **fields)
    except ValidationError as exc:
        error = exc.errors()[0]
        raise InvalidQueryError(f"{field_of(error, 'query')}: {error['msg']}") from exc


def query_memory(
    memory: Memory,
    given: QueryMemoryInput | dict[str, Any],
    *,
    fresh: bool = True,
    scope: Scope | None = None,
) -> dict[str, Any]:
    """See ``Memory.query_memory``."""
    if isinstance(given, QueryMemoryInput):
        chosen = given
    else:
        fields = dict(given)
        chosen = request(fields.pop("query", ""), **fields)
    scope = memory.scopes.narrowed(scope)
    if chosen.session is not None:
        memory.check_session(chosen.session)
        if not scope.reads(memory.scopes.owner(chosen.session)):  # a narrower scope asked
            raise NoSuchSessionError(f"no session {chosen.session!r} in this workspace")
    since, until = Bound.time(chosen.since, "since"), Bound.time(chosen.until, "until")
    if fresh:
        memory.project(("cold",))
    allowed = memory.scopes.visible(scope)
    readable = None  # the unit ids of the learnings this reader may see: filtered before ranking
    if allowed is not None and (chosen.kinds is None or "learning" in chosen.kinds):
        seen = memory.learnings.list(scope=scope).learnings
        readable = {f"{a.session}:{a.seq}:0" for a in seen}
    answer = (
        memory.workspace.recall()
        .query_memory(
            chosen.query,
            chosen.k,
            chosen.session,
            since,
            until,
            chosen.kinds,
            allowed,
            scope.user,
            readable,
        )
        .to_json()
    )
    if any(hit["kind"] == "learning" for hit in answer["hits"]):
        learnings = memory.learnings.list(scope=scope).learnings
        live = {a.id for a in learnings if a.status == "active"}
        answer["hits"] = [
            hit
            for hit in answer["hits"]
            if hit["kind"] != "learning" or (hit["meta"] or {}).get("learning_id") in live
        ]
    return answer


def _behind(memory: Memory, session: str | None) -> dict[str, tuple[int, int]]:
    """The sessions the cold projection lags on (of those visible): first unindexed seq, head."""
    from projections.checkpoints import log_tail

    log = memory.workspace.log
    (cold,) = memory.workspace.projectors(("cold",))
    manifest = cold.state_store.read_manifest()
    names = [session] if session else [info.session for info in memory.sessions.list()]
    behind = {}
    for name in names:
        entry = manifest.get(name)
        done = entry.checkpoint.seq if entry is not None and entry.checkpoint else 0
        head = log_tail(log, name).seq
        if head > done:
            behind[name] = (done + 1, head)
    return behind


def _tail_hits(
    memory: Memory, behind: dict[str, tuple[int, int]], chosen: QueryMemoryInput
) -> list[dict[str, Any]]:
    """The best passages of the unindexed records for the query (BM25, best = 1.0)."""
    from projections.bm25 import BM25
    from projections.recall import Hit
    from projections.units import UNIT_FIELDS, record_units

    units, read = [], 0
    since, until = Bound.time(chosen.since, "since"), Bound.time(chosen.until, "until")
    for name, (first, _) in behind.items():
        for record in memory.replay(name, from_seq=first):
            read += 1
            for unit in record_units(record):
                if chosen.kinds is not None and unit.kind not in chosen.kinds:
                    continue
                if (since and unit.ts and unit.ts < since) or (
                    until and unit.ts and unit.ts > until
                ):
                    continue
                units.append(unit)
            if read >= SCAN_LIMIT:
                break
    ranked = BM25([u.text for u in units]).top(chosen.query, chosen.k) if units else []
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


def search_now(
    memory: Memory, query: str, *, k: int = 10, kinds: Iterable[str] | None = None, **filters: Any
) -> dict[str, Any]:
    """See ``Memory.search_now`` and the module."""
    chosen = request(query, k=k, kinds=kinds, **filters)
    answer = memory.query_memory(chosen, fresh=False)
    behind = _behind(memory, chosen.session)
    lag = sum(head - first + 1 for first, head in behind.values())
    answer["unindexed"] = lag
    if lag:
        extra = _tail_hits(memory, behind, chosen)
        seen = {hit["unit_id"] for hit in answer["hits"]}
        merged = answer["hits"] + [hit for hit in extra if hit["unit_id"] not in seen]
        answer["hits"] = sorted(merged, key=lambda hit: -hit["score"])[:k]
        answer["warnings"].append(
            f"{lag} recent record(s) not indexed yet; searched them in the log (full text)"
        )
    return answer
