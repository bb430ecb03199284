"""A second, static embedding model beside MiniLM: does it lift recall held out?

WordLlama (package ``wordllama``, MIT: ``l2_supercat_256``, a Llama-2 tokenizer's 32,000 token
embeddings reduced to 256 dimensions; a text's vector is the mean of its tokens', unit length)
is weak alone but unlike MiniLM: a bag of trained word vectors, no attention, no 256-token cut.
The weights and tokenizer ship in the wheel; they are read from the installed package's files,
checked against pinned SHA-256 (the package's own loader asks the Hugging Face hub for the
tokenizer and logs at import: not used).

Two uses are measured on the five dev units of ``bench/generalise.py`` (three LoCoMo
conversations, turn-level recall of evidence turns; two RealMem personas, session-level
recall of evidence sessions), each knob chosen leaving one unit out (the mean of the LoCoMo
mean and the RealMem mean of the other four; ties: the smaller weights) and measured on it,
beside BM25 in the same run:

1. a score part: ``weight_static * cosine(query)`` and ``weight_static_focus *
   cosine(focus)`` added to each candidate's score (the defaults' six parts and session
   diversity unchanged), on the pools ``query_memory`` ranks today;
2. a fourth candidate search: the static model's ``candidates`` nearest neighbours of the
   query (exact, within the question's ``until``) added to each pool, then scored as 1.
   The share of evidence present anywhere in the pool (the ceiling any ranking can reach) is
   reported before and after.

Its cost: model load, the query's embeddings (query and focus) and the static part's work per
query, the time per text at projection, and the vector bytes per 10k records beside MiniLM's.
Timings on a shared machine: compare the ratios.

    pip install wordllama==0.4.0.post1   # the [static] extra: its weights are in the wheel
    python bench/static.py [--work DIR] [--cache-dir DIR]

``--work`` and ``--cache-dir`` as ``bench/generalise.py`` takes them (workspaces and embedding
caches reused between runs).
"""

from __future__ import annotations

import copy
import hashlib
import importlib.util
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from typing_extensions import override

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import print_table
from bench.generalise import (
    DEFAULTS,
    DIALOGUE,
    LOCOMO_CATEGORIES,
    REALMEM_IMPLICIT,
    Unit,
    arguments,
    dev_units,
    recall,
)
from bench.pools import Pool, PoolRecall, rescore
from projections.policies import RecallWeights
from projections.recall import _Candidate, query_focus

K = 10
SAMPLE = 256  # texts MiniLM embeds again per unit, for its time per text beside the static one
WEIGHTS_SEEN = RecallWeights()
STATIC_WEIGHTS = (0.0, 0.05, 0.1, 0.2, 0.3, 0.5, 0.75, 1.0)
GRID = [(q, f) for q in STATIC_WEIGHTS for f in STATIC_WEIGHTS]  # (weight_static, _focus)
WEIGHTS_FILE = ("weights", "l2_supercat_256.safetensors")
TOKENIZER_FILE = ("tokenizers", "l2_supercat_tokenizer_config.json")
PINNED = {  # the files of wordllama 0.4.0.post1
    WEIGHTS_FILE: "64b47a2dc493cb8e85944076601189739852d7b64e0e1eedcb1937a251cd9fd5",
    TOKENIZER_FILE: "93248f2a9ec36c7b35f700a033d5f36228aae48db61aee31007fa49062cdeb68",
}


class StaticModel:
    """WordLlama l2_supercat_256: the mean of a text's token embeddings, unit length."""

    def __init__(self) -> None:
        spec = importlib.util.find_spec("wordllama")  # located, not imported
        if spec is None or not spec.submodule_search_locations:
            raise SystemExit("wordllama is not installed: pip install wordllama==0.4.0.post1")
        from safetensors.numpy import load_file  # a dependency of wordllama
        from tokenizers import Tokenizer

        root = Path(next(iter(spec.submodule_search_locations)))
        for parts, expected in PINNED.items():
            actual = hashlib.sha256(root.joinpath(*parts).read_bytes()).hexdigest()
            if actual != expected:
                raise SystemExit(f"{root.joinpath(*parts)} has SHA-256 {actual}")
        table = load_file(str(root.joinpath(*WEIGHTS_FILE)))["embedding.weight"]
        self.table = np.ascontiguousarray(table, dtype=np.float32)
        self.tokenizer = Tokenizer.from_file(str(root.joinpath(*TOKENIZER_FILE)))
        self.tokenizer.no_truncation()
        self.tokenizer.no_padding()

    def embed(self, texts: list[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.table.shape[1]), dtype=np.float32)
        for row, encoding in enumerate(
            self.tokenizer.encode_batch(texts, add_special_tokens=False)
        ):
            if encoding.ids:
                out[row] = self.table[encoding.ids].mean(axis=0)
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return out / np.where(norms == 0, 1, norms)


@dataclass
class Corpus:
    """A unit's cold table in memory: every row's id, time, text, kinds, MiniLM vector, and
    its static vector."""

    ids: list[str]
    ts: list[str]
    text: list[str]
    kind: list[str]
    type: list[str]
    vectors: np.ndarray
    static: np.ndarray
    index: dict[str, int] = field(default_factory=dict)
    embed_seconds: float = 0.0  # the static model, every row
    minilm_seconds: float = 0.0  # MiniLM, the first ``SAMPLE`` rows

    @classmethod
    def read(cls, recall_: PoolRecall, model: StaticModel) -> Corpus:
        table = recall_.store.open()
        if table is None:
            raise SystemExit(f"{recall_.store} has no cold table: project the workspace first")
        rows = table.to_arrow().select(["unit_id", "ts", "text", "kind", "type", "vector"])
        data = rows.to_pydict()
        dim = next(len(v) for v in data["vector"] if v is not None)
        vectors = np.array(
            [v if v is not None else [0.0] * dim for v in data["vector"]], dtype=np.float32
        )
        started = time.perf_counter()
        static = model.embed(data["text"])
        took = time.perf_counter() - started
        corpus = cls(
            data["unit_id"], data["ts"], data["text"], data["kind"], data["type"], vectors, static
        )
        corpus.index = {u: i for i, u in enumerate(corpus.ids)}
        corpus.embed_seconds = took
        if recall_.embedder is not None:
            started = time.perf_counter()
            recall_.embedder.embed(data["text"][:SAMPLE])
            corpus.minilm_seconds = time.perf_counter() - started
        return corpus


class StaticPoolRecall(PoolRecall):
    """``PoolRecall`` whose pool carries each candidate's static cosines with the query and
    its focus (parts ``static``, ``static_focus``, outside the six the score uses), and, with
    ``search``, the static model's nearest neighbours of the query added as candidates."""

    def __init__(self, base: PoolRecall, model: StaticModel, corpus: Corpus, search: bool) -> None:
        super().__init__(base.store, base.embedder, base.weights, base.log)
        self.model, self.corpus, self.search = model, corpus, search
        self.until: str | None = None
        self.static_ms: list[float] = []
        self.embed_ms: list[float] = []
        self.added: set[str] = set()  # the last query's candidates only the static search found
        self._minilm: tuple[Any, Any] = (None, None)

    @override
    def _embed_query(self, query: str) -> Any:
        embedded = super()._embed_query(query)
        self._minilm = (embedded[0], embedded[1])
        return embedded

    @override
    def _rank(
        self, query: str, candidates: dict[str, _Candidate]
    ) -> list[tuple[str, float, dict[str, float]]]:
        started = time.perf_counter()
        focus = query_focus(query)
        vectors = self.model.embed([query] if focus == query else [query, focus])
        self.embed_ms.append((time.perf_counter() - started) * 1000)
        q, f = vectors[0], vectors[-1]
        c = self.corpus
        if self.search:
            cosines = c.static @ q
            if self.until:
                cosines = np.where(np.array(c.ts) <= self.until, cosines, -np.inf)
            qv, fv = self._minilm
            self.added = set()
            for i in np.argsort(-cosines)[: self.weights.candidates]:
                if cosines[i] == -np.inf or c.ids[i] in candidates:
                    continue
                found = _Candidate(c.ts[i], c.text[i], c.kind[i], c.type[i])
                found.semantic = float(c.vectors[i] @ qv)
                found.focus = float(c.vectors[i] @ fv)
                candidates[c.ids[i]] = found
                self.added.add(c.ids[i])
        ranked = super()._rank(query, candidates)
        rows = [c.index[u] for u, _ in self.last_pool]
        on_query, on_focus = c.static[rows] @ q, c.static[rows] @ f
        for (_, parts), a, b in zip(self.last_pool, on_query, on_focus, strict=True):
            parts["static"] = max(float(a), 0.0)
            parts["static_focus"] = max(float(b), 0.0)
        self.static_ms.append((time.perf_counter() - started) * 1000)
        return ranked


@dataclass
class Scored:
    """A question's pool and its static parts (in the pool's order: by unit id)."""

    pool: Pool
    static: np.ndarray  # (candidates, 2): cosine with the query, with its focus
    keys: set[Any]
    added: np.ndarray  # (candidates,): found by the static search only


def scored(candidates: list[dict[str, Any]], added: set[str]) -> Scored:
    ordered = sorted(candidates, key=lambda c: c["unit_id"])
    static = np.array(
        [[c["parts"]["static"], c["parts"]["static_focus"]] for c in ordered], dtype=float
    ).reshape(-1, 2)
    flags = np.array([c["unit_id"] in added for c in ordered], dtype=bool)
    return Scored(Pool(candidates), static, {c["key"] for c in candidates}, flags)


def ranking(s: Scored, weights: tuple[float, float], pool: Pool | None = None) -> list[Any]:
    """The keys of the best 10 of ``s`` with the static parts weighted so (of ``pool``: the
    same pool with other keys)."""
    extra = s.static @ np.array(weights) if len(s.static) else None
    return rescore(
        pool or s.pool,
        DEFAULTS,
        WEIGHTS_SEEN.session_diversity,
        reach=WEIGHTS_SEEN.diversity_reach,
        dialogue=DIALOGUE,
        extra=extra,
    )


@dataclass
class Measured:
    unit: Unit
    pools: dict[str, list[Scored]] = field(default_factory=dict)  # "today" | "searched"
    corpus: Corpus | None = None
    plain_ms: list[float] = field(default_factory=list)
    static_ms: list[float] = field(default_factory=list)
    minilm_embed_ms: list[float] = field(default_factory=list)
    embed_ms: list[float] = field(default_factory=list)


def measure(unit: Unit, model: StaticModel) -> Measured:
    from airsspec import Memory

    key = "dia_id" if unit.kind == "locomo" else "realmem_session"
    out = Measured(unit)
    with Memory.open(unit.root) as memory:
        plain = memory.workspace.recall()
        defaults = {
            name: getattr(WEIGHTS_SEEN, name)
            for name in ("session_diversity", "diversity_reach", "diversity_dialogue")
        }
        base = PoolRecall(
            plain.store, plain.embedder, plain.weights.model_copy(update=defaults), plain.log
        )
        corpus = Corpus.read(base, model)
        out.corpus = corpus
        for label, search in (("today", False), ("searched", True)):
            recall_ = StaticPoolRecall(base, model, corpus, search)
            recall_.query_memory("warm up", k=K)
            recall_.static_ms.clear()
            recall_.embed_ms.clear()
            for text, _, _, until in unit.questions:
                recall_.until = until
                started = time.perf_counter()
                answer = recall_.query_memory(text, k=K, until=until)
                took = (time.perf_counter() - started) * 1000
                pool = scored(recall_.pool(key), recall_.added)
                out.pools.setdefault(label, []).append(pool)
                if not search:
                    out.plain_ms.append(took - recall_.static_ms[-1])
                    out.minilm_embed_ms.append(answer.timings_ms.get("embed", 0.0))
            if not search:
                out.static_ms = list(recall_.static_ms)
                out.embed_ms = list(recall_.embed_ms)
    return out


def mean(values: Any) -> float:
    values = list(values)
    return statistics.fmean(values) if values else float("nan")


def unit_scores(measured: list[Measured], label: str) -> dict[tuple[str, Any], float]:
    """Each unit's recall@10 at each static weight pair of ``GRID``."""
    return {
        (m.unit.name, w): mean(
            recall(ranking(s, w), q[2])
            for q, s in zip(m.unit.questions, m.pools[label], strict=True)
        )
        for m in measured
        for w in GRID
    }


def added_in_top(s: Scored, weights: tuple[float, float]) -> int:
    """How many of the best 10 only the static search found."""
    indexed = copy.copy(s.pool)
    indexed.keys = list(range(len(s.pool.keys)))
    return int(sum(s.added[i] for i in ranking(s, weights, indexed)))


def held_out(
    measured: list[Measured], scores: dict[tuple[str, Any], float]
) -> dict[str, tuple[float, float]]:
    """The static weights chosen for each unit on the other four."""
    chosen = {}
    for m in measured:
        others = [o for o in measured if o is not m]
        kinds = {o.unit.kind for o in others}

        def objective(
            w: tuple[float, float], others: list[Measured] = others, kinds: set[str] = kinds
        ) -> float:
            return mean(
                mean(scores[(o.unit.name, w)] for o in others if o.unit.kind == kind)
                for kind in kinds
            )

        chosen[m.unit.name] = max(GRID, key=lambda w: (round(objective(w), 6), -sum(w)))
    return chosen


def row(
    name: str,
    measured: list[Measured],
    label: str,
    weights: dict[str, tuple[float, float]],
    bm25: dict[str, list[float]],
) -> list[Any]:
    lc, rm, implicit, implicit_bm25 = [], [], [], []
    for m in measured:
        w = weights[m.unit.name]
        for i, (q, s) in enumerate(zip(m.unit.questions, m.pools[label], strict=True)):
            value = recall(ranking(s, w), q[2])
            if m.unit.kind == "locomo":
                lc.append((q[1], value))
            else:
                rm.append(value)
                if q[1] == REALMEM_IMPLICIT:
                    implicit.append(value)
                    implicit_bm25.append(bm25[m.unit.name][i])
    rm_bm25 = [v for m in measured if m.unit.kind == "realmem" for v in bm25[m.unit.name]]
    return [
        name,
        f"{mean(v for _, v in lc):.3f}",
        *(f"{mean(v for c, v in lc if c == cat):.3f}" for cat in LOCOMO_CATEGORIES),
        f"{mean(rm):.3f}",
        f"{mean(rm) - mean(rm_bm25):+.3f}",
        f"{mean(implicit) - mean(implicit_bm25):+.3f}",
    ]


def ceiling(measured: list[Measured], label: str, kind: str) -> str:
    values = [
        pool_recall(s.keys, q[2])
        for m in measured
        if m.unit.kind == kind
        for q, s in zip(m.unit.questions, m.pools[label], strict=True)
    ]
    sizes = [len(s.pool.keys) for m in measured if m.unit.kind == kind for s in m.pools[label]]
    return f"{mean(values):.3f} ({mean(sizes):.0f} candidates)"


def added_share(measured: list[Measured], weights: dict[str, tuple[float, float]]) -> str:
    """The mean count, per question, of hits in the best 10 only the static search found."""
    counts = [added_in_top(s, weights[m.unit.name]) for m in measured for s in m.pools["searched"]]
    return f"{mean(counts):.3f}"


def pool_recall(keys: set[Any], evidence: tuple[str, ...]) -> float:
    return sum(e in keys for e in evidence) / len(evidence)


def costs(model_seconds: list[float], measured: list[Measured], model: StaticModel) -> None:
    rows_total = sum(len(m.corpus.ids) for m in measured if m.corpus)
    seconds = sum(m.corpus.embed_seconds for m in measured if m.corpus)
    plain = statistics.median(t for m in measured for t in m.plain_ms)
    added = statistics.median(t for m in measured for t in m.static_ms)
    dim = model.table.shape[1]
    embed = statistics.median(t for m in measured for t in m.embed_ms)
    minilm = statistics.median(t for m in measured for t in m.minilm_embed_ms)
    sampled = sum(min(SAMPLE, len(m.corpus.ids)) for m in measured if m.corpus)
    minilm_text = 1000 * sum(m.corpus.minilm_seconds for m in measured if m.corpus) / sampled
    print_table(
        "Cost of the static model (shared machine: compare the ratios)",
        ["what", "static model", "MiniLM / baseline", "ratio"],
        [
            ["load, s (median of 3)", statistics.median(model_seconds), "-", "-"],
            ["query_memory today, ms p50", "-", plain, "-"],
            ["query embedding (query and focus), ms p50", embed, minilm, f"{embed / minilm:.3f}"],
            [
                "added per query (embed query+focus, parts, search), ms p50",
                added,
                plain,
                added / plain,
            ],
            [
                "per text at projection, ms",
                1000 * seconds / rows_total,
                minilm_text,
                f"{1000 * seconds / rows_total / minilm_text:.4f}",
            ],
            [
                "vector bytes per 10k records, MB",
                dim * 4 * 10_000 / 1e6,
                384 * 4 * 10_000 / 1e6,
                dim / 384,
            ],
        ],
    )


def main() -> None:
    args = arguments(__doc__)
    loads = []
    for _ in range(3):
        started = time.perf_counter()
        model = StaticModel()
        loads.append(time.perf_counter() - started)
    with tempfile.TemporaryDirectory(prefix="bench-static-") as tmp:
        work = (args.work or Path(tmp)).resolve()
        units, bm25 = dev_units(work, args.cache_dir.resolve() if args.cache_dir else None)
        measured = []
        for unit in units:
            measured.append(measure(unit, model))
            print(f"measured {unit.name}", file=sys.stderr, flush=True)
    zero = {m.unit.name: (0.0, 0.0) for m in measured}
    scores = {label: unit_scores(measured, label) for label in ("today", "searched")}
    chosen = {label: held_out(measured, scores[label]) for label in scores}
    rm_bm25 = mean(v for m in measured if m.unit.kind == "realmem" for v in bm25[m.unit.name])
    print_table(
        "Recall@10 held out: LoCoMo dev (turns) and RealMem dev (sessions); the static weights "
        "chosen on the other four units, the defaults' other weights and diversity unchanged",
        [
            "method",
            "LoCoMo",
            *LOCOMO_CATEGORIES.values(),
            "RealMem",
            f"minus BM25 ({rm_bm25:.3f})",
            "Implicit Preference minus BM25",
        ],
        [
            row("today (MiniLM pool, no static part)", measured, "today", zero, bm25),
            row("+ static part, held out", measured, "today", chosen["today"], bm25),
            row("+ static search, no part", measured, "searched", zero, bm25),
            row(
                "+ static search and part, held out", measured, "searched", chosen["searched"], bm25
            ),
        ],
    )
    print_table(
        "(weight_static, weight_static_focus) chosen on the other four units",
        ["unit left out", "static part", "static search and part"],
        [
            [m.unit.name, chosen["today"][m.unit.name], chosen["searched"][m.unit.name]]
            for m in measured
        ],
    )
    shown = [(0.0, 0.2), (0.0, 0.5), (0.0, 1.0), (0.2, 0.0), (0.5, 0.0), (0.2, 0.2)]
    today = scores["today"]
    print_table(
        "Each unit's recall@10 at fixed static weights, minus its recall without (no choice: is"
        " the change the same sign on every unit?)",
        ["unit", "without", *(str(w) for w in shown)],
        [
            [
                m.unit.name,
                f"{today[(m.unit.name, (0.0, 0.0))]:.3f}",
                *(
                    f"{today[(m.unit.name, w)] - today[(m.unit.name, (0.0, 0.0))]:+.3f}"
                    for w in shown
                ),
            ]
            for m in measured
        ],
    )
    print_table(
        "Pool ceiling: the share of evidence present anywhere in the pool; hits per question "
        "in the best 10 that only the static search found",
        ["pool", "LoCoMo (turns)", "RealMem (sessions)", "static-only hits in the top 10"],
        [
            [
                "today",
                ceiling(measured, "today", "locomo"),
                ceiling(measured, "today", "realmem"),
                "-",
            ],
            [
                "+ static search",
                ceiling(measured, "searched", "locomo"),
                ceiling(measured, "searched", "realmem"),
                f"{added_share(measured, zero)} (no part), "
                f"{added_share(measured, chosen['searched'])} (held out)",
            ],
        ],
    )
    costs(loads, measured, model)


if __name__ == "__main__":
    main()
