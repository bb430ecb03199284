"""Session-level recall on RealMem's long assistant chats, leave-one-persona-out, beside BM25.

Each persona of ``realmem-dev`` (months of sessions between one user and an assistant) is
appended through ``Memory`` into its own workspace as ``tests.support.realmem`` converts it (one
log session per RealMem session, one event per turn, every query turn and the answer after it
left out), and the cold tier projected. Then one search per query, ``k = 10``, ``until`` just
before the query's own session (only earlier sessions may answer). Recall@10 is the share of the
query's evidence sessions among the sessions of the top 10 hits, averaged over queries, overall
and per category. BM25 (``projections.bm25``: no stemming, no stop words) ranks the same
ingested turns under the same time filter, in the same run. Knobs are chosen
leave-one-persona-out: on one persona, measured on the other, both ways. ``session_diversity``
is measured through ``Memory.search`` with the value chosen on the other persona; the other
knobs by re-scoring each question's whole candidate pool in process (``bench.pools``: a pool
cut to the best k by the defaults would favour them).

    python bench/realmem.py [--work DIR] [--cache FILE]

``--work`` keeps the projected workspaces between runs (an existing one is reused), ``--cache``
an embedding cache (copied into each new workspace before it is projected, and back).
"""

from __future__ import annotations

import argparse
import itertools
import os
import statistics
import sys
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, nullcontext
from datetime import datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import print_table
from bench.pools import WEIGHTS, Pool, PoolRecall, rescore
from projections.bm25 import BM25
from projections.policies import RecallWeights
from tests.support.realmem import DATA, Persona, Query, load

K = 10
CATEGORIES = (
    "Dynamic Incremental",
    "Dynamic Updating",
    "Implicit Preference",
    "Temporal-reasoning",
)


def ingest(persona: Persona, root: Path, cache: Path | None) -> None:
    """The persona's sessions appended through ``Memory`` and the cold tier projected (a
    workspace already projected under ``root`` is reused)."""
    from airsspec import Memory
    from bench.cold import _copy_cache, workspace_cache

    done = root / "projected"
    if done.exists():
        return
    with Memory.open(root, create=True) as memory:
        for name, _, events in persona.sessions:
            if not memory.has_session(name):
                memory.append_many(name, events, project=False)
        if cache is not None:
            _copy_cache(cache, workspace_cache(root))
        memory.project(["cold"])
    if cache is not None:
        _copy_cache(workspace_cache(root), cache)
    done.touch()


def searched(
    root: Path, queries: list[Query], diversity: float | None = None
) -> list[list[str | None]]:
    """Each query's top-10 RealMem sessions (one per hit, in order) through ``Memory.search``,
    with ``session_diversity`` set as a user sets it (``AIRSSPEC_COLD_SESSION_DIVERSITY``;
    None: the default)."""
    from airsspec import Memory

    ranked = []
    setting = (
        nullcontext()
        if diversity is None
        else _setting("AIRSSPEC_COLD_SESSION_DIVERSITY", str(diversity))
    )
    with setting, Memory.open(root) as memory:
        for query in queries:
            answer = memory.search(query.text, k=K, until=query.until, fresh=False)
            ranked.append([(h["meta"] or {}).get("realmem_session") for h in answer["hits"]])
    return ranked


@contextmanager
def _setting(name: str, value: str) -> Iterator[None]:
    before = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if before is None:
            del os.environ[name]
        else:
            os.environ[name] = before


def pools(root: Path, queries: list[Query]) -> list[Pool]:
    """Each query's whole candidate pool under the same filter, with score parts (defaults)."""
    from airsspec import Memory

    found = []
    with Memory.open(root) as memory:
        recall = memory.workspace.recall()
        pooled = PoolRecall(recall.store, recall.embedder, recall.weights, recall.log)
        for query in queries:
            pooled.query_memory(query.text, k=K, until=query.until)
            found.append(Pool(pooled.pool("realmem_session")))
    return found


def bm25(persona: Persona, queries: list[Query]) -> list[list[Any]]:
    """Plain BM25 over the same turns, each query limited to turns before its ``until``."""
    turns = [
        (e["ts"], e["meta"]["realmem_session"], e["content"])
        for *_, es in persona.sessions
        for e in es
    ]
    index = BM25([text for *_, text in turns])
    out = []
    for query in queries:
        until = datetime.fromisoformat(query.until)
        found = [
            turns[i][1]
            for i, _ in index.top(query.text, len(turns))
            if datetime.fromisoformat(turns[i][0]) <= until
        ]
        out.append(found[:K])
    return out


def recall(ranked: Sequence[str | None], evidence: tuple[str, ...]) -> float:
    top = set(ranked[:K])
    return sum(e in top for e in evidence) / len(evidence)


def row(name: str, queries: list[Query], rankings: list[list[Any]]) -> list[object]:
    scores = [recall(r, q.evidence) for q, r in zip(queries, rankings, strict=True)]
    cells: list[object] = [name, len(queries), f"{statistics.fmean(scores):.3f}"]
    for category in CATEGORIES:
        values = [s for q, s in zip(queries, scores, strict=True) if q.category == category]
        cells.append(f"{statistics.fmean(values):.3f} ({len(values)})" if values else "-")
    cells.append(f"{statistics.fmean(len(set(r[:K])) for r in rankings):.1f}")
    cells.append(f"{statistics.fmean(min(len(r), K) for r in rankings):.1f}")
    return cells


HEADER = ["method", "queries", "recall@10", *CATEGORIES, "sessions in top 10", "hits"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work", type=Path, help="keep the workspaces here (reused when present)")
    parser.add_argument("--cache", type=Path, help="an embedding cache kept between runs")
    args = parser.parse_args()
    files = sorted(DATA.glob("*_dialogues_256k.json"))
    if not files:
        sys.exit(f"{DATA} is absent: the RealMem measurements need the dev data")
    with tempfile.TemporaryDirectory(prefix="bench-realmem-") as tmp:
        work = (args.work or Path(tmp)).resolve()
        cache = args.cache.resolve() if args.cache else None
        measured: dict[str, dict[str, Any]] = {}
        for path in files:
            persona = load(path)
            root = work / persona.name
            root.mkdir(parents=True, exist_ok=True)
            ingest(persona, root, cache)
            measured[persona.name] = {
                "root": root,
                "queries": persona.queries,
                "ours": searched(root, persona.queries),
                "pools": pools(root, persona.queries),
                "bm25": bm25(persona, persona.queries),
            }
        report(measured)


def report(measured: dict[str, dict[str, Any]]) -> None:
    """The tables: the defaults, ``session_diversity`` chosen on the other persona (both through
    ``Memory.search``) and BM25, per persona and for both; then each knob chosen on one persona
    and measured on the other by re-scoring the pools."""
    names = list(measured)

    def score(knob: tuple[Any, ...], name: str) -> float:
        m = measured[name]
        return statistics.fmean(
            recall(rescore(pool, *knob), q.evidence)
            for q, pool in zip(m["queries"], m["pools"], strict=True)
        )

    for name, other in itertools.permutations(names, 2):  # chosen on the other persona
        best = max(DIVERSITY, key=lambda d: score((DEFAULTS, d), other))
        m = measured[name]
        m["diverse"] = (best, searched(m["root"], m["queries"], best))
    rows = []
    for name in names:
        m = measured[name]
        chosen, diverse = m["diverse"]
        rows.append(row(f"{name}: query_memory (defaults, Memory.search)", m["queries"], m["ours"]))
        rows.append(
            row(
                f"{name}: + session_diversity {chosen} (chosen on the other persona)",
                m["queries"],
                diverse,
            )
        )
        rows.append(row(f"{name}: BM25, same turns, same run", m["queries"], m["bm25"]))
    every = [q for n in names for q in measured[n]["queries"]]
    for label, ranking_of in (
        ("query_memory (defaults)", lambda m: m["ours"]),
        ("+ session_diversity, held out", lambda m: m["diverse"][1]),
        ("BM25", lambda m: m["bm25"]),
    ):
        rows.append(
            row(f"both: {label}", every, [r for n in names for r in ranking_of(measured[n])])
        )
    print_table("RealMem dev, session-level recall@10 (query turns never ingested)", HEADER, rows)

    held = []
    for label, knobs in KNOBS.items():
        for chosen_on, measured_on in itertools.permutations(names, 2):
            pick = max(knobs, key=lambda knob: score(knob, chosen_on))
            m = measured[measured_on]
            ranked = [rescore(pool, *pick) for pool in m["pools"]]
            gain = statistics.fmean(
                recall(r, q.evidence) - recall(b, q.evidence)
                for q, r, b in zip(m["queries"], ranked, m["bm25"], strict=True)
            )
            cells = row(f"{label}: {pick} on {chosen_on}", m["queries"], ranked)
            held.append([*cells[:3], f"{gain:+.3f}", *cells[3:]])
    print_table(
        "Leave-one-persona-out: a knob chosen on one persona, measured on the other (weights:"
        " semantic, focus, lexical, recency, anchor, speaker; then session diversity)",
        [*HEADER[:3], "minus BM25", *HEADER[3:]],
        held,
    )


DEFAULTS = tuple(getattr(RecallWeights(), n) for n in WEIGHTS)
GRID = [
    weights
    for weights in itertools.product(
        (0.0, 0.25, 0.5),
        (0.0, 0.25, 0.5, 0.75),
        (0.0, 0.25, 0.5, 0.75),
        (0.0,),
        (0.0, 0.1),
        (0.15,),
    )
    if sum(weights[:3]) > 0
]
DIVERSITY = (0.0, 0.05, 0.1, 0.2, 0.3, 0.5, 1.0)
KNOBS: dict[str, list[tuple[Any, ...]]] = {  # (weights, diversity, similarity, same session, cap)
    "defaults (re-scored pools)": [(DEFAULTS,)],
    "session diversity": [(DEFAULTS, d) for d in DIVERSITY],
    "weights": [(w,) for w in GRID],
    "weights and diversity": [(w, d) for w in GRID for d in (0.0, 0.2, 0.5, 1.0)],
    "MMR (cosine with the hits picked)": [(DEFAULTS, 0.0, s) for s in (0.0, 0.05, 0.1, 0.2, 0.3)],
    "MMR within a session": [(DEFAULTS, 0.0, s, True) for s in (0.0, 0.05, 0.1, 0.2, 0.3, 0.5)],
    "at most N hits a session": [(DEFAULTS, 0.0, 0.0, False, n) for n in (0, 1, 2, 3, 4, 5)],
}


if __name__ == "__main__":
    main()
