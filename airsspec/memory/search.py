"""The one search operation on the facade: ``search``, and ``query_memory`` (the tool-shaped call).

``search`` takes keyword arguments, ``query_memory`` a ``QueryMemoryInput`` (the one declaration
of a query: the agent tool's schema, ``query --batch`` lines and the MCP/HTTP tool are all
generated from it); both answer with the same JSON-ready shape. Only what the reader scope may
see is ranked: sessions outside it never reach the index query, and a learning hit is kept
only while that learning is active for the scope, and only by its current text (an edited
learning is found by the edit's text, not the first).

``search_now`` never waits for the cold projection: it answers from what is indexed, then reads
the records each visible session holds beyond the cold checkpoint (at most ``SCAN_LIMIT``;
for a named scope, also the memory session's records of the learnings it sees: an edit just
made), ranks their passages with BM25 as the log scan of recall does, and merges them in (``tier:
"log"``); ``unindexed`` counts those records and ``warnings`` says so in words. Provenance is
the same as any hit's: session, seq range, time, ids and hashes.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import asdict
from datetime import datetime
from itertools import chain, takewhile
from typing import TYPE_CHECKING, Any

from airsspec.errors import CorruptLogError, InvalidQueryError, field_of
from airsspec.memory.learnings import Learnings
from airsspec.memory.records import replay
from airsspec.memory.sessions import Sessions
from eventlog.bound import Bound
from eventlog.layout import MEMORY_SESSION, session_path
from projections.scopes import Scope
from projections.units import record_units

if TYPE_CHECKING:
    from airsspec.kernel import Kernel
    from eventlog.schema import Record
    from projections.memory_tool import QueryMemoryInput

SCAN_LIMIT = 5000  # unindexed records read per query at most (the cold projection catches up)


def request(query: str, **fields: Any) -> QueryMemoryInput:
    """A validated ``QueryMemoryInput``; ``InvalidQueryError`` naming the first bad field.
    The model is imported here: a command that never searches never imports pydantic."""
    from pydantic import ValidationError

    from projections.memory_tool import QueryMemoryInput

    kinds = fields.get("kinds")
    if kinds is not None:
        fields["kinds"] = list(kinds)
    try:
        return QueryMemoryInput(query=query, **fields)
    except ValidationError as exc:
        error = exc.errors()[0]
        raise InvalidQueryError(f"{field_of(error, 'query')}: {error['msg']}") from exc


def search(
    kernel: Kernel,
    query: str,
    *,
    k: int = 10,
    session: str | None = None,
    kinds: Iterable[str] | None = None,
    since: str | datetime | None = None,
    until: str | datetime | None = None,
    fresh: bool = True,
    scope: Scope | None = None,
) -> dict[str, Any]:
    """The ``k`` best passages (messages, summaries, sources, learnings) with provenance,
    the shape of ``airsspec query --json``. ``fresh`` brings the cold projection up to
    date first. Only what ``scope`` (default: this memory's; it narrows) may see."""
    chosen = request(
        query,
        k=k,
        session=session,
        kinds=kinds,
        since=Bound.time(since, "since"),
        until=Bound.time(until, "until"),
    )
    return query_memory(kernel, chosen, fresh=fresh, scope=scope)


def query_memory(
    kernel: Kernel,
    request: QueryMemoryInput | dict[str, Any],
    *,
    fresh: bool = True,
    scope: Scope | None = None,
) -> dict[str, Any]:
    """``search`` for a ``query_memory`` tool call (a ``QueryMemoryInput``, or its
    fields as a dict, validated here: ``InvalidQueryError`` naming the field)."""
    with kernel.reading():
        return _query_memory(kernel, request, fresh=fresh, scope=scope)


def _query_memory(
    kernel: Kernel,
    given: QueryMemoryInput | dict[str, Any],
    *,
    fresh: bool,
    scope: Scope | None,
) -> dict[str, Any]:
    from projections.memory_tool import QueryMemoryInput

    if isinstance(given, QueryMemoryInput):
        chosen = given
    else:
        fields = dict(given)
        chosen = request(fields.pop("query", ""), **fields)
    scope = kernel.gate.narrowed(scope)
    if chosen.session is not None:  # the gate's rule, for the scope asked (it may be narrower)
        kernel.view(scope).check_session(chosen.session)
    since, until = Bound.time(chosen.since, "since"), Bound.time(chosen.until, "until")
    if fresh:
        kernel.fresh("search", warn=True)
    allowed, share = kernel.gate.visible_share(scope)
    readable = None  # the unit ids of the learnings this reader may see: filtered before ranking
    seen = None  # the learnings as they stand for this reader, assessed once
    if allowed is not None and (chosen.kinds is None or "learning" in chosen.kinds):
        seen = Learnings(kernel).seen(scope)
        readable = {a.unit for a in seen}  # each learning by its current text only
    kinds: list[str] | None = None if chosen.kinds is None else list(chosen.kinds)
    asked = chosen.k
    while True:
        answer = (
            kernel.workspace.recall()
            .query_memory(
                chosen.query,
                asked,
                chosen.session,
                since,
                until,
                kinds,
                allowed,
                scope.documents_user,
                readable,
                share,
            )
            .to_json()
        )
        hits = answer["hits"]
        if not any(hit["kind"] == "learning" for hit in hits):
            return answer
        if seen is None:
            seen = Learnings(kernel).seen(scope)
        live = {a.unit for a in seen if a.status == "active"}  # a text edited since: not
        answer["hits"] = [h for h in hits if h["kind"] != "learning" or h["unit_id"] in live]
        # a text left out took a place: asked again for as many more, until k are kept or
        # nothing more ranks
        if len(answer["hits"]) >= chosen.k or len(hits) < asked:
            answer["hits"] = answer["hits"][: chosen.k]
            return answer
        asked += len(hits) - len(answer["hits"])


def _live(kernel: Kernel) -> set[str]:
    """The units of the active learnings this kernel's scope sees, each by its current text:
    the only learning units an answer may give."""
    seen = Learnings(kernel).list(scope=kernel.gate.narrowed(None)).learnings
    return {a.unit for a in seen if a.status == "active"}


def _behind(
    kernel: Kernel, session: str | None, manifest: dict[str, Any]
) -> dict[str, tuple[int, int]]:
    """The sessions the cold projection lags on (of those visible): first unindexed seq, head
    (a session whose end cannot be read is left out, as the projections leave it). A named
    scope's memory session is left out even when asked for by name: only its records of the
    learnings the scope sees are the reader's (``_learnings_behind``), not their count."""
    names = [session] if session else Sessions(kernel).names()  # the listing: nothing read
    if not kernel.gate.admin:
        names = [name for name in names if name != MEMORY_SESSION]
    behind = {}
    for name in names:
        lag = _lag(kernel, manifest, name)
        if lag is not None:
            behind[name] = lag
    return behind


def _lag(kernel: Kernel, manifest: dict[str, Any], name: str) -> tuple[int, int] | None:
    """(first unindexed seq, head) of session ``name``; None when the cold projection is at
    its end or the end cannot be read."""
    from projections.checkpoints import file_identity, log_tail

    entry = manifest.get(name)
    # folded to the end of the log file as it is now (its identity when the fold began): a
    # ``stat``, not a read of its last record (5,000 sessions: 0.3 s)
    path = session_path(kernel.log.log_dir, name)
    if entry is not None and entry.log is not None and entry.log == file_identity(path):
        return None
    done = entry.checkpoint.seq if entry is not None and entry.checkpoint else 0
    try:
        head = log_tail(kernel.log, name).seq
    except CorruptLogError:
        return None
    return (done + 1, head) if head > done else None


def _tail(kernel: Kernel, behind: dict[str, tuple[int, int]]) -> Iterator[Record]:
    """The unindexed records of the sessions ``behind`` names, at most ``SCAN_LIMIT``: each
    session's newest (the cold projection indexes the oldest first, so the scan holds what it
    reaches last), session after session until the limit is read. A session whose log is
    damaged gives what it holds before the damage (the projections skip it the same way, and
    ``status`` and ``verify`` name it)."""
    left = SCAN_LIMIT
    for name, (first, head) in behind.items():
        if left <= 0:
            return
        start = max(first, head - left + 1)
        left -= head - start + 1
        yield from _readable(kernel, name, start)


def _readable(kernel: Kernel, name: str, first: int) -> Iterator[Record]:
    try:
        yield from replay(kernel, name, from_seq=first)
    except CorruptLogError:
        return


def _learnings_behind(kernel: Kernel, live: set[str], first: int) -> list[Record]:
    """For a named scope (its scope does not hold the memory session): the memory session's
    records from ``first`` (not indexed yet) that carry a learning the scope sees (``live``),
    so an edit made a moment ago is found by its new text. The session's other records are
    not the reader's: neither read into the answer nor counted."""
    # a learning unit's id names its record (``session:seq:part``): only those are kept, so
    # the session's other records (the reader's accesses) take no place, and the span read
    # ends at the last; those kept give the units ``live`` names alone, as the index would
    prefix = f"{MEMORY_SESSION}:"
    wanted = {int(u[len(prefix) :].split(":")[0]) for u in live if u.startswith(prefix)}
    wanted = {seq for seq in wanted if seq >= first}
    if not wanted:
        return []
    last = max(wanted)
    records = takewhile(lambda r: r.seq <= last, _readable(kernel, MEMORY_SESSION, min(wanted)))
    return [
        r for r in records if r.seq in wanted and any(u.unit_id in live for u in record_units(r))
    ]


def search_now(
    kernel: Kernel,
    query: str,
    *,
    k: int = 10,
    session: str | None = None,
    kinds: Iterable[str] | None = None,
    since: str | None = None,
    until: str | None = None,
) -> dict[str, Any]:
    """``search`` without waiting for the cold projection: what is indexed, plus a
    full-text scan of the records not indexed yet (``unindexed`` counts them; see the
    module)."""
    chosen = request(query, k=k, session=session, kinds=kinds, since=since, until=until)
    answer = query_memory(kernel, chosen, fresh=False)
    manifest = kernel.projector("cold").state_store.read_manifest()
    behind = _behind(kernel, chosen.session, manifest)
    # a named scope's learnings not indexed yet are in the memory session it does not hold
    named = not kernel.gate.admin and chosen.session in (None, MEMORY_SESSION)
    held = named and kernel.log.has(MEMORY_SESSION)  # no learning yet: no such log
    learnings_lag = _lag(kernel, manifest, MEMORY_SESSION) if held else None
    searched = chosen.kinds is None or "learning" in chosen.kinds
    # assessed only when something is scanned: as the indexed, current and active
    live = _live(kernel) if searched and (behind or learnings_lag) else None
    edits = _learnings_behind(kernel, live, learnings_lag[0]) if live and learnings_lag else []
    lag = sum(head - first + 1 for first, head in behind.values()) + len(edits)
    answer["unindexed"] = lag
    if lag:
        from projections.recall import scan

        since, until = Bound.time(chosen.since, "since"), Bound.time(chosen.until, "until")
        found = scan(
            chain(_tail(kernel, behind), edits),
            chosen.query,
            chosen.k,
            kinds=chosen.kinds,
            since=since,
            until=until,
            learnings=live,
        )
        extra = [asdict(hit) for hit in found]
        seen = {hit["unit_id"] for hit in answer["hits"]}
        merged = answer["hits"] + [hit for hit in extra if hit["unit_id"] not in seen]
        answer["hits"] = sorted(merged, key=lambda hit: -hit["score"])[:k]
        answer["warnings"].append(
            f"{lag} recent record(s) not indexed yet; searched them in the log (full text)"
        )
    return answer
