"""The cold tier: retrieval quality on LoCoMo, embedding throughput, rebuild with a warm and a
cold embedding cache, and query latency at 10k, 100k and 1M rows.

Quality: each LoCoMo conversation is imported into its own workspace with ``airsspec import
locomo`` (one session per conversation session, one event per turn, ``dia_id`` in ``meta``),
projected with ``airsspec project --tier cold``, and every category 1-4 question is asked through
``airsspec query --batch``. Recall@k is the share of a question's evidence turns among the top k
hits. Baselines over the same units, in the same run: plain BM25 (no stemming, no stop words),
plain dense (MiniLM cosine, exact), and their reciprocal-rank fusion. The weight grid re-scores
each question's whole candidate pool (the 50 + 50 + 50 a k=10 query ranks, read in process with
their score parts: a pool cut to the best k under the default weights would favour the
defaults). The held-out row picks weights on two conversations by that grid and measures the
third through ``query --batch`` with those weights set in the environment.

Throughput: texts a second for 1,000 LoCoMo turns, whole and cut to 120 characters, for MiniLM,
the opt-in mpnet embedder when its extra is installed, and the hash embedder.

Latency: synthetic tables of real-language rows (LoCoMo turns with a row number; vectors are
MiniLM embeddings of those turns plus noise), queried through ``Recall.query_memory`` with the
MiniLM embedder; the embedding time is shown apart. Baseline: exact cosine search in numpy over
the same vectors, in memory. At 100k rows a second table also takes 10,000 one-row commits,
with the upkeep the projector runs after each, before it is queried.

    python bench/cold.py [--sizes 10000,100000,1000000] [--repeats 3] [--skip-latency]
                         [--only quality|searchable|throughput|latency]
"""

from __future__ import annotations

import argparse
import functools
import itertools
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import median_seconds, print_table
from bench.locomo_data import DATA, Conversation, Question, load
from bench.pools import WEIGHTS
from eventlog.errors import EmbedderUnavailable
from projections.bm25 import BM25
from projections.cold import ColdStore
from projections.embedders import HashEmbedder, make_embedder
from projections.embedding_cache import CachedEmbedder
from projections.recall import Recall, RecallWeights, _vector_rows
from projections.units import Unit

CATEGORIES = (1, 2, 3, 4)
KS = (5, 10)


def cli(*args: str, cwd: Path, stdin: bytes | None = None, env: dict | None = None) -> bytes:
    done = subprocess.run(
        [sys.executable, "-m", "airsspec", *args],
        cwd=cwd,
        input=stdin,
        capture_output=True,
        check=False,
        env={**os.environ, **(env or {})},
    )
    if done.returncode != 0:
        sys.exit(f"airsspec {' '.join(args)} failed: {done.stderr.decode()}")
    return done.stdout


def recall_at(ranked: list[str | None], evidence: tuple[str, ...], k: int) -> float:
    top = set(ranked[:k])
    return sum(e in top for e in evidence) / len(evidence)


# ---------------------------------------------------------------------------- quality


CACHE: Path | None = None
"""An embedding cache kept between runs (``--cache``): copied into each workspace before it is
projected and back after, so a rerun measures quality without embedding the turns again."""


def _copy_cache(source: Path, target: Path) -> None:
    import sqlite3

    if not source.exists():
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    with sqlite3.connect(source) as src, sqlite3.connect(target) as dst:
        src.backup(dst)


def workspace_cache(root: Path) -> Path:
    return root / ".airsspec" / "state" / "caches" / "embeddings.sqlite"


def import_conversation(raw: dict, root: Path) -> None:
    cli("init", str(root), cwd=root)
    source = root / f"{raw['sample_id']}.json"
    source.write_text(json.dumps([raw]))
    cli("import", "locomo", str(source), cwd=root)
    if CACHE is not None:
        _copy_cache(CACHE, workspace_cache(root))


def ask(root: Path, questions: list[Question], k: int, env: dict | None = None) -> list[dict]:
    """Every question through ``airsspec query --batch``, one result per question."""
    batch = "".join(json.dumps({"query": q.text, "k": k}) + "\n" for q in questions)
    out = cli("query", "--batch", "-", "--stale", cwd=root, stdin=batch.encode(), env=env)
    return [json.loads(line) for line in out.splitlines()]


class _PoolRecall(Recall):
    """``query_memory`` that keeps every candidate it ranked, with its score parts."""

    last_pool: list[tuple[str, str | None, dict[str, float]]]  # (unit id, session, parts)

    def _rank(self, query, candidates):
        ranked = super()._rank(query, candidates)
        # a unit id is "session:seq:part"
        self.last_pool = [(u, u.rsplit(":", 2)[0], parts) for u, _, parts in ranked]
        return ranked


def candidate_pools(root: Path, questions: list[Question]) -> list[dict]:
    """The whole pool a k=10 ``query_memory`` ranks, per question (query --batch returns only
    the best k; a pool cut by the default weights would favour them when the grid re-scores)."""
    from airsspec.workspace import Workspace

    with Workspace.open(config=root / "airsspec.toml") as ws:
        plain = ws.recall()
        memory = _PoolRecall(plain.store, plain.embedder, plain.weights, plain.log)
        rows = memory.store.open().to_arrow().select(["unit_id", "meta"]).to_pylist()
        meta = {r["unit_id"]: json.loads(r["meta"]) if r["meta"] else None for r in rows}
        pools = []
        for question in questions:
            memory.query_memory(question.text, k=10)
            pools.append(
                {
                    "hits": [
                        {"unit_id": u, "session": s, "parts": p, "meta": meta[u]}
                        for u, s, p in memory.last_pool
                    ]
                }
            )
    return pools


def asked(conversation: Conversation) -> list[Question]:
    return [q for q in conversation.questions if q.category in CATEGORIES and q.evidence]


def dia_ids(result: dict) -> list[str | None]:
    return [(h["meta"] or {}).get("dia_id") for h in result["hits"]]


def baselines(root: Path, questions: list[Question]) -> dict[str, list[list[str | None]]]:
    """Plain BM25, plain dense and their RRF over the workspace's message rows."""
    from airsspec.workspace import Workspace

    with Workspace.open(config=root / "airsspec.toml") as ws:
        embedder = ws.embedder()  # the workspace's own ([cold] embedder)
        table = ColdStore(ws.cold_location, embedder.model_id, embedder.dim).open()
    rows = table.to_arrow().to_pylist()
    ids = [json.loads(r["meta"])["dia_id"] for r in rows]
    vectors = np.array([r["vector"] for r in rows], dtype=np.float32)
    bm25 = BM25([r["text"] for r in rows])
    queries = embedder.embed([q.text for q in questions])
    out: dict[str, list[list[str | None]]] = {"BM25": [], "dense": [], "BM25+dense RRF": []}
    for question, query_vector in zip(questions, queries, strict=True):
        lexical = [i for i, _ in bm25.top(question.text, 50)]
        dense = list(np.argsort(-(vectors @ query_vector), kind="stable")[:50])
        fused: dict[int, float] = {}
        for ranking in (lexical, dense):
            for rank, index in enumerate(ranking):
                fused[index] = fused.get(index, 0.0) + 1 / (60 + rank)
        rrf = sorted(fused, key=lambda i: -fused[i])
        for name, ranking in (("BM25", lexical), ("dense", dense), ("BM25+dense RRF", rrf)):
            out[name].append([ids[i] for i in ranking[:10]])
    return out


def rescore(
    candidates: dict, weights: tuple[float, ...], diversity: float = 0.0, relative: bool = False
) -> list[str | None]:
    """The best 10 of a question's candidate pool under other weights: (semantic, focus, lexical,
    recency, anchor, speaker) scored as ``query_memory`` scores them (one hit per message, none
    under the relevance floor; ``relative``, measured and not adopted: each cosine divided by the
    pool's best, the floor still on the cosines), and an optional seventh, the weight of a
    session-support signal that was measured and not adopted (the mean score of the two best
    candidates from the unit's session, a missing second counting 0). ``diversity`` (measured, not
    adopted) picks the 10 greedily, each pick's score lowered by ``diversity`` for every hit already
    picked from its session."""
    ranked = _rescored(candidates, weights, relative)
    if not diversity:
        return [dia for _, dia, _ in ranked][:10]
    picked: list[str | None] = []
    per_session: dict[str, int] = {}
    pool = list(ranked)
    while pool and len(picked) < 10:
        best = min(pool, key=lambda item: item[0] + diversity * per_session.get(item[2], 0))
        pool.remove(best)
        picked.append(best[1])
        per_session[best[2]] = per_session.get(best[2], 0) + 1
    return picked


def _rescored(
    candidates: dict, weights: tuple[float, ...], relative: bool = False
) -> list[tuple[float, str | None, str]]:
    """(minus score, dia_id, LoCoMo session) of each message of the pool, best first."""
    hits = candidates["hits"]
    weights4 = RecallWeights(**dict(zip(WEIGHTS, weights[: len(WEIGHTS)], strict=True)))
    session = weights[len(WEIGHTS)] if len(weights) > len(WEIGHTS) else 0.0
    scored_parts = [hit["parts"] for hit in hits]
    if relative:
        best = {p: max(parts[p] for parts in scored_parts) or 1.0 for p in ("semantic", "focus")}
        scored_parts = [
            {**parts, **{p: parts[p] / best[p] for p in best}} for parts in scored_parts
        ]
    base = [weights4.score(parts) for parts in scored_parts]
    relevant = [weights4.score(hit["parts"]) >= weights4.min_score for hit in hits]
    support: dict[str, list[float]] = {}
    if session:
        for hit, value in zip(hits, base, strict=True):
            support.setdefault(hit["session"], []).append(value)
        support = {k: sorted(v, reverse=True)[:2] for k, v in support.items()}
    scored = sorted(
        (
            -round(value + (session * sum(support[hit["session"]]) / 2 if session else 0), 6),
            hit["unit_id"],
            (hit["meta"] or {}).get("dia_id"),
        )
        for hit, value, floor_met in zip(hits, base, relevant, strict=True)
        if floor_met
    )
    out, seen = [], set()
    for minus, unit_id, dia in scored:
        message = unit_id.rsplit(":", 1)[0]
        if message in seen or -minus <= 0:
            continue
        seen.add(message)
        out.append((minus, dia, (dia or "").split(":")[0]))
    return out


SPEAKER = (0.0, 0.05, 0.1, 0.15)
"""Speaker weights the grid tries: above 0.15, a question that quotes a passage word for word and
names someone three times meets that person's own messages first
(tests/projections/test_recall_focus.py); 0.25-0.75 were measured too (README)."""
GRID = [
    (s, f, lex, r, a, speaker)
    for s, f, lex, r, a, speaker in itertools.product(
        (0.0, 0.25, 0.5, 0.75, 1.0),
        (0.0, 0.25, 0.5, 0.75),
        (0.0, 0.25, 0.5, 0.75, 1.0),
        (0.0, 0.1),
        (0.0, 0.1, 0.2),
        SPEAKER,
    )
    if s + f + lex > 0
]
SESSIONS = (0.1, 0.2, 0.4)
DIVERSITY = (0.0, 0.02, 0.05, 0.1, 0.2, 0.5)


def weights_env(weights: tuple[float, ...]) -> dict[str, str]:
    """``airsspec.toml`` ``[cold]`` weights as environment overrides."""
    return {f"AIRSSPEC_COLD_{n.upper()}": str(w) for n, w in zip(WEIGHTS, weights, strict=True)}


def quality(work: Path) -> None:
    raw_items = {item["sample_id"]: item for item in json.loads(DATA.read_text())}
    conversations = load()
    methods: dict[str, dict[str, list[tuple[int, list[float]]]]] = {}
    per_conversation_candidates: dict[str, list[tuple[Question, dict]]] = {}
    timings = []

    def add(method: str, sample: str, question: Question, ranked: list[str | None]) -> None:
        top = [dia for dia in ranked[:10] if dia]  # a dia_id is "D<session>:<turn>"
        scores = [recall_at(ranked, question.evidence, k) for k in KS]
        scores += [len(set(top)), len({dia.split(":")[0] for dia in top})]
        methods.setdefault(method, {}).setdefault(sample, []).append((question.category, scores))

    for conversation in conversations:
        root = work / conversation.sample_id
        root.mkdir(parents=True)
        import_conversation(raw_items[conversation.sample_id], root)
        started = time.perf_counter()
        cli("project", "--tier", "cold", cwd=root)
        timings.append(
            (conversation.sample_id, len(conversation.turns), time.perf_counter() - started)
        )
        questions = asked(conversation)
        results = ask(root, questions, 10)
        candidates = candidate_pools(root, questions)
        if CACHE is not None:
            _copy_cache(workspace_cache(root), CACHE)
        per_conversation_candidates[conversation.sample_id] = list(
            zip(questions, candidates, strict=True)
        )
        for question, result in zip(questions, results, strict=True):
            add(
                "query_memory (defaults, via query --batch)",
                conversation.sample_id,
                question,
                dia_ids(result),
            )
        for name, rankings in baselines(root, questions).items():
            for question, ranked in zip(questions, rankings, strict=True):
                add(name, conversation.sample_id, question, ranked)

    # held out: weights chosen on the other conversations, measured on this one
    samples = list(per_conversation_candidates)

    @functools.cache
    def r10(weights: tuple[float, ...], sample: str, relative: bool = False) -> tuple[float, ...]:
        return tuple(
            recall_at(rescore(c, weights, relative=relative), q.evidence, 10)
            for q, c in per_conversation_candidates[sample]
        )

    def mean_r10(weights, chosen_samples) -> float:
        return statistics.fmean(v for s in chosen_samples for v in r10(weights, s))

    def leading(others: list[str]) -> list[tuple[float, ...]]:
        """The 20 best weights of the grid on ``others``: what the extra signals build on."""
        return sorted(GRID, key=lambda w: -mean_r10(w, others))[:20]

    chosen: dict[str, list[tuple[str, tuple]]] = {}
    grid_scores = sorted(((mean_r10(w, samples), w) for w in GRID), reverse=True)
    for label, session_support in (
        ("query_memory, weights tuned on the other conversations (query --batch)", False),
        ("  + session support (re-scored pools; measured, not adopted)", True),
    ):
        for sample in samples:
            others = [s for s in samples if s != sample]
            grid = [(*w, v) for w in leading(others) for v in SESSIONS] if session_support else GRID
            best = max(grid, key=lambda w: mean_r10(w, others))
            chosen.setdefault(label, []).append((sample, best))
            pairs = per_conversation_candidates[sample]
            if not session_support:  # measured through the CLI with the chosen weights
                questions = [q for q, _ in pairs]
                results = ask(work / sample, questions, 10, weights_env(best))
                ranked = [dia_ids(result) for result in results]
            else:
                ranked = [rescore(c, best) for _, c in pairs]
            for (question, _), ranking in zip(pairs, ranked, strict=True):
                add(label, sample, question, ranking)
    for label, grid, relative in (
        ("  no speaker part (re-scored pools)", [w for w in GRID if not w[-1]], False),
        ("  + cosines relative to the best (re-scored pools; not adopted)", GRID, True),
    ):
        for sample in samples:
            others = [s for s in samples if s != sample]
            pick = max(
                grid, key=lambda w: statistics.fmean(v for s in others for v in r10(w, s, relative))
            )
            chosen.setdefault(label, []).append((sample, pick))
            for question, c in per_conversation_candidates[sample]:
                add(label, sample, question, rescore(c, pick, relative=relative))
    label = "  + session diversity (re-scored pools; measured, not adopted)"
    for sample in samples:
        others = [s for s in samples if s != sample]
        best_div = max(
            ((w, d) for w in leading(others) for d in DIVERSITY),
            key=lambda wd: statistics.fmean(
                recall_at(rescore(c, wd[0], wd[1]), q.evidence, 10)
                for s in others
                for q, c in per_conversation_candidates[s]
            ),
        )
        chosen.setdefault(label, []).append((sample, best_div))
        for question, c in per_conversation_candidates[sample]:
            add(label, sample, question, rescore(c, *best_div))

    header = [
        "method",
        "questions",
        "recall@5",
        "recall@10",
        *(f"cat {c} r@10" for c in CATEGORIES),
        "messages in top 10",
        "sessions in top 10",
    ]
    table = []
    for method, by_sample in methods.items():
        scored = [item for items in by_sample.values() for item in items]
        row = [method, len(scored)]
        row += [f"{statistics.fmean(s[i] for _, s in scored):.3f}" for i in range(len(KS))]
        for category in CATEGORIES:
            values = [s[1] for c, s in scored if c == category]
            row.append(f"{statistics.fmean(values):.3f}" if values else "-")
        row += [f"{statistics.fmean(s[2 + i] for _, s in scored):.1f}" for i in range(2)]
        table.append(row)
    print_table(
        "Retrieval on LoCoMo dev, categories 1-4: recall of the evidence turns", header, table
    )
    print_table(
        "Per conversation, recall@10",
        ["method", *samples],
        [
            [m, *(f"{statistics.fmean(s[1] for _, s in by[sample]):.3f}" for sample in samples)]
            for m, by in methods.items()
        ],
    )
    print_table(
        "Weight grid (semantic, focus, lexical, recency, anchor, speaker), recall@10 over all "
        "questions",
        ["weights", "recall@10"],
        [[str(w), f"{r:.3f}"] for r, w in grid_scores[:8]]
        + [
            [f"{w} (the original design)", f"{mean_r10(w, samples):.3f}"]
            for w in [(0.3, 0.0, 0.0, 0.5, 0.2, 0.0)]
        ]
        + [
            [f"{w} (semantic only)", f"{mean_r10(w, samples):.3f}"]
            for w in [(1.0, 0.0, 0.0, 0.0, 0.0, 0.0)]
        ]
        + [
            [f"{w} (full-text only)", f"{mean_r10(w, samples):.3f}"]
            for w in [(0.0, 0.0, 1.0, 0.0, 0.0, 0.0)]
        ],
    )
    print_table(
        "Weights chosen on the other two conversations (semantic, focus, lexical, recency, anchor,"
        " speaker[, session])",
        ["method", *samples],
        [[label, *(str(w) for _, w in picks)] for label, picks in chosen.items()],
    )
    print_table(
        "Cold projection of each conversation (airsspec project --tier cold, "
        + ("embeddings from --cache)" if CACHE else "empty cache)"),
        ["conversation", "turns", "seconds", "turns/s"],
        [[s, n, t, n / t] for s, n, t in timings],
    )


# ---------------------------------------------------------------------------- speed


def throughput(repeats: int) -> None:
    turns = [e["content"] for c in load() for e in c.turns][:1000]
    minilm = make_embedder("minilm")
    minilm.embed(["load the model first"])
    models: list[tuple[str, Any]] = [("minilm (int8 ONNX)", minilm)]
    try:  # the [mpnet] extra, when installed
        mpnet = make_embedder("mpnet")
        mpnet.embed(["load the model first"])
        models.append(("mpnet (float32 ONNX)", mpnet))
    except EmbedderUnavailable as exc:
        print(f"mpnet not measured: {exc}", file=sys.stderr)
    models.append(("hash (no model)", HashEmbedder()))
    rows = []
    for texts, what in ((turns, "whole turns"), ([t[:120] for t in turns], "first 120 chars")):
        tokens = statistics.fmean(len(e.ids) for e in minilm._load()[0].encode_batch(texts))
        for name, embedder in models:
            rate = len(texts) / median_seconds(lambda e=embedder, t=texts: e.embed(t), repeats)
            rows.append([name, what, len(texts), tokens, rate])
    print_table(
        f"Embedding throughput on LoCoMo turns (median of {repeats}); reference: ~260 texts/s",
        ["embedder", "texts", "count", "mean tokens", "texts/s"],
        rows,
    )


def rebuild_with_and_without_cache(work: Path, repeats: int) -> None:
    """All LoCoMo conversations in one workspace; ``rebuild --tier cold`` from an empty cache,
    then with the cache the first rebuild filled."""
    root = work / "rebuild"
    root.mkdir(parents=True)
    cli("init", str(root), cwd=root)
    cli("import", "locomo", str(DATA), cwd=root)
    cache = root / ".airsspec" / "state" / "caches" / "embeddings.sqlite"
    turns = sum(len(c.turns) for c in load())

    def cold_cache() -> None:
        for leftover in cache.parent.glob("embeddings.sqlite*"):
            leftover.unlink()
        cli("rebuild", "--tier", "cold", cwd=root)

    cold = median_seconds(cold_cache, repeats)
    warm = median_seconds(lambda: cli("rebuild", "--tier", "cold", cwd=root), repeats)
    print_table(
        f"Rebuild of the cold tier, {turns:,} turns in one workspace (median of {repeats})",
        ["embedding cache", "seconds", "turns/s", "speed-up"],
        [
            ["empty (cold)", cold, turns / cold, 1.0],
            ["filled (warm)", warm, turns / warm, cold / warm],
        ],
    )


CLAUDE_CODE = DATA.parents[1] / "claude-code"


def searchable(work: Path, repeats: int) -> None:
    """The dev Claude Code transcripts (``compact/`` included) imported into a fresh workspace,
    then ``project --tier cold`` from an empty embedding cache, timed (process start included),
    under the default indexing policy and under the old one (every part of a tool output
    embedded whole), in the same run."""
    megabytes = sum(p.stat().st_size for p in CLAUDE_CODE.rglob("*.jsonl")) / 2**20
    rows = []
    for policy in ("head", "all"):
        seconds, facts = [], {}
        for attempt in range(repeats):
            root = work / f"searchable-{policy}-{attempt}"
            root.mkdir(parents=True)
            cli("init", str(root), cwd=root)
            cli("import", "claude-code", str(CLAUDE_CODE), cwd=root)
            env = {"AIRSSPEC_COLD_TOOL_EMBED": policy}
            started = time.perf_counter()
            cli("project", "--tier", "cold", cwd=root, env=env)
            seconds.append(time.perf_counter() - started)
            model = make_embedder("minilm").model_id
            store = ColdStore(root / ".airsspec" / "knowledge" / "vectors", model, 384)
            table = store.open()
            facts = {
                "records": sum(
                    len(p.read_bytes().splitlines())
                    for p in (root / ".airsspec" / "contexts").rglob("*.jsonl")
                ),
                "rows": table.count_rows(),
                "embedded": table.count_rows("vector IS NOT NULL"),
            }
            shutil.rmtree(root)
        took = statistics.median(seconds)
        rows.append([policy, facts["records"], facts["rows"], facts["embedded"], took])
    baseline = rows[1][4]
    print_table(
        f"Claude Code dev transcripts ({megabytes:.1f} MB) searchable from an empty cache "
        f"(project --tier cold, median of {repeats})",
        ["tool_embed", "records", "rows", "texts embedded", "seconds", "MB/s", "time ratio"],
        [[*r, megabytes / r[4], r[4] / baseline] for r in rows],
    )


def synthetic_unit(i: int, texts: list[str]) -> Unit:
    """Row ``i`` of a synthetic table: a real turn with its row number, 1,000 rows a session."""
    return Unit(
        unit_id=f"s{i // 1000:04d}:{i % 1000 + 1}:0",
        kind="message",
        type="user",
        text=f"{texts[i % len(texts)]} (row {i})",
        session=f"s{i // 1000:04d}",
        seq_from=i % 1000 + 1,
        seq_to=i % 1000 + 1,
        record_seq=i % 1000 + 1,
        ts=f"2026-{1 + i // 100_000 % 12:02d}-01T00:00:00.{i % 1_000_000:06d}Z",
        event_ids=(f"e{i}",),
        hashes=(f"h{i}",),
    )


def synthetic_table(root: Path, rows: int, texts: list[str], vectors: np.ndarray) -> ColdStore:
    """``rows`` rows cycling through real turns, each with a row number and a perturbed vector,
    written through the cold store in batches of 100,000 (1,000 rows a session)."""
    rng = np.random.default_rng(7)
    store = ColdStore(root, make_embedder("minilm").model_id, 384)
    store.create()
    for start in range(0, rows, 100_000):
        index = np.arange(start, min(start + 100_000, rows))
        noisy = vectors[index % len(texts)] + rng.normal(scale=0.02, size=(len(index), 384))
        noisy /= np.linalg.norm(noisy, axis=1, keepdims=True)
        units = [synthetic_unit(i, texts) for i in index.tolist()]
        store.add(units, list(noisy.astype(np.float32)), [""] * len(units))
    store.maintain(ann_min_rows=20_000)
    return store


def append_one_at_a_time(store: ColdStore, count: int, texts: list[str], vectors) -> None:
    """``count`` more rows, one commit each, with the projector's index upkeep after each (as
    the daemon does for a session that receives one message at a time)."""
    start = store.open().count_rows()
    started = time.perf_counter()
    for i in range(start, start + count):
        store.add([synthetic_unit(i, texts)], [vectors[i % len(texts)]], [""])
        store.maintain(ann_min_rows=20_000)
    seconds = time.perf_counter() - started
    print(f"{count:,} single appends with index upkeep: {seconds:.1f} s ({count / seconds:.0f}/s)")


def _row_number(unit_id: str) -> int:
    session, seq, _ = unit_id.split(":")
    return int(session[1:]) * 1000 + int(seq) - 1


def latency(work: Path, sizes: list[int], repeats: int, appends: int = 10_000) -> None:
    conversations = load()
    texts = [e["content"] for c in conversations for e in c.turns]
    minilm = CachedEmbedder(make_embedder("minilm"), work / "cache.sqlite")
    vectors = minilm.embed(texts)
    questions = [q.text for c in conversations for q in c.questions][:100]
    question_vectors = minilm.embed(questions)
    rows = []
    runs = [(size, 0) for size in sizes]
    if 100_000 in sizes and appends:
        runs.insert(sizes.index(100_000) + 1, (100_000, appends))
    for size, single in runs:
        started = time.perf_counter()
        store = synthetic_table(work / f"latency-{size}", size, texts, vectors)
        build = time.perf_counter() - started
        if single:
            append_one_at_a_time(store, single, texts, vectors)
        reader = ColdStore(store.directory, store.embedder_id, 384, timedelta(seconds=1))
        memory = Recall(reader, make_embedder("minilm"), RecallWeights())  # no cache: real embeds
        memory.query_memory("warm up", k=10)
        passes = []
        for _ in range(repeats):
            searched, embedded, totals = [], [], []
            for question in questions:
                result = memory.query_memory(question, k=10)
                assert result.mode == "hybrid" and not result.warnings, result.warnings
                embedded.append(result.timings_ms["embed"])
                totals.append(result.timings_ms["total"])
                searched.append(totals[-1] - embedded[-1])
            passes.append(
                (
                    np.percentile(searched, 50),
                    np.percentile(searched, 95),
                    np.percentile(embedded, 50),
                    np.percentile(totals, 95),
                )
            )
        dump = store.open().to_arrow().select(["unit_id", "vector"])
        matrix = dump["vector"].combine_chunks().values.to_numpy().reshape(-1, 384)
        # rows are noisy copies of LoCoMo turns: the ANN is judged by the turns among its 50
        # candidates, against the turns among the exact 50
        base = [_row_number(u) % len(texts) for u in dump["unit_id"].to_pylist()]
        flat, found = [], []
        for query_vector in question_vectors:
            begun = time.perf_counter()
            scores = matrix @ query_vector
            exact = np.argpartition(-scores, 50)[:50]  # the baseline: what query_memory asks
            flat.append((time.perf_counter() - begun) * 1000)
            exact_turns = {base[i] for i in exact}
            ann = _vector_rows(reader.open(), query_vector, "", 50)["unit_id"].to_pylist()
            ann_turns = {_row_number(u) % len(texts) for u in ann}
            found.append(len(exact_turns & ann_turns) / len(exact_turns))
        del matrix, dump
        indexes = sorted(i.index_type for i in store.open().list_indices())
        p50, p95, embed, total = (statistics.median(p[i] for p in passes) for i in range(4))
        target = {100_000: 20, 1_000_000: 50}.get(size, "-")
        rows.append(
            [
                f"{size:,}" + (f" + {single:,} single appends" if single else ""),
                ", ".join(indexes),
                build,
                p50,
                p95,
                target,
                total,
                embed,
                np.percentile(flat, 50),
                np.percentile(flat, 95),
                statistics.fmean(found),
            ]
        )
        shutil.rmtree(work / f"latency-{size}")
    print_table(
        f"query_memory latency, ms (k=10, 50+50+50 candidates; {len(questions)} LoCoMo questions, "
        f"median of {repeats} passes); embedding of the query shown apart",
        [
            "rows",
            "indexes",
            "build s",
            "search p50",
            "search p95",
            "target p95",
            "with embedding p95",
            "embed p50",
            "numpy exact p50",
            "numpy exact p95",
            "ANN recall of exact top-50 turns",
        ],
        rows,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="10000,100000,1000000")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--skip-latency", action="store_true")
    parser.add_argument(
        "--cache", type=Path, help="an embedding cache kept between runs (quality only)"
    )
    parser.add_argument(
        "--only",
        choices=("quality", "searchable", "throughput", "latency"),
        help="run one measurement",
    )
    args = parser.parse_args()
    global CACHE
    CACHE = args.cache.resolve() if args.cache else None
    if not DATA.exists():
        sys.exit(f"{DATA} is absent: the LoCoMo measurements need ../shared/data")
    with tempfile.TemporaryDirectory(prefix="bench-cold-") as tmp:
        work = Path(tmp)
        if args.only == "quality":
            quality(work / "quality")
            return
        if args.only == "searchable":
            searchable(work, args.repeats)
            return
        if args.only == "throughput":
            throughput(args.repeats)
            return
        if args.only == "latency":
            latency(work, [int(s) for s in args.sizes.split(",")], args.repeats)
            return
        quality(work / "quality")
        if CLAUDE_CODE.is_dir():
            searchable(work, args.repeats)
        throughput(args.repeats)
        rebuild_with_and_without_cache(work, args.repeats)
        if not args.skip_latency:
            latency(work, [int(s) for s in args.sizes.split(",")], args.repeats)


if __name__ == "__main__":
    main()
