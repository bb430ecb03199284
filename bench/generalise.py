"""Retrieval that generalises: each knob chosen leaving out one LoCoMo conversation or one
RealMem persona at a time, measured on the one left out, beside BM25 in the same run.

The five units (the three LoCoMo dev conversations, turn-level recall of evidence turns; the two
RealMem dev personas, session-level recall of evidence sessions) are ingested as
``bench/cold.py`` and ``bench/realmem.py`` ingest them, and each question's whole candidate pool
is kept (``bench.pools``). For each unit left out, ``session_diversity`` and
``diversity_reach`` are chosen on the other four (the mean of the LoCoMo mean and the RealMem
mean, so each kind weighs the same; ties: the smaller diversity) and that unit's questions are
re-scored with them. The defaults are measured through ``Memory``'s recall too (every question
asked in process), with the added cost: each question's ``query_memory`` time (p50) with the
default diversity and without, in the same run. The tables give recall@10 overall and per
category, BM25 over the same texts, and the distinct sessions and messages in the top 10. A
last table measures an agent's coding history, which the five units are not: the example
workspace's questions (``tests/support/example.py``), the answer passages in each top 3 with
the defaults, without diversity, and with diversity applied to every query
(``diversity_dialogue = 0``).

    python bench/generalise.py [--work DIR] [--cache-dir DIR]

``--work`` keeps the projected workspaces between runs (reused when present); ``--cache-dir``
keeps the embedding caches (``locomo.sqlite``, ``realmem.sqlite``). With
``AIRSSPEC_COLD_EMBEDDER=mpnet`` (the ``[mpnet]`` extra) every workspace embeds with
all-mpnet-base-v2 instead: give that run a ``--work`` and ``--cache-dir`` of its own.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import bench.cold as cold
from bench.common import print_table
from bench.locomo_data import DATA as LOCOMO
from bench.locomo_data import load as load_locomo
from bench.pools import WEIGHTS, Pool, PoolRecall, rescore
from bench.realmem import bm25 as realmem_bm25
from bench.realmem import ingest as ingest_persona
from projections.policies import RecallWeights
from tests.support.realmem import DATA as REALMEM
from tests.support.realmem import load as load_persona

K = 10
DIVERSITY = (0.0, 0.05, 0.1, 0.2, 0.3, 0.5, 1.0)
REACH = (0.0, 0.3, 0.4, 0.5, 0.6, 0.7)
GRID = [(d, r) for d in DIVERSITY for r in REACH if d or not r]  # (session_diversity, reach)
DEFAULTS = tuple(getattr(RecallWeights(), n) for n in WEIGHTS)
DIALOGUE = RecallWeights().diversity_dialogue
LOCOMO_CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
REALMEM_IMPLICIT = "Implicit Preference"


@dataclass
class Unit:
    """One conversation or persona: its questions, their pools, and the rankings measured."""

    name: str
    kind: str  # "locomo" | "realmem"
    root: Path
    questions: list[Any]  # (text, category, evidence, until)
    pools: list[Pool] = field(default_factory=list)
    rankings: dict[str, list[list[Any]]] = field(default_factory=dict)  # method -> keys
    sessions: dict[str, list[list[Any]]] = field(default_factory=dict)  # method -> log sessions
    latency_ms: dict[str, list[float]] = field(default_factory=dict)


def recall(keys: list[Any], evidence: tuple[str, ...]) -> float:
    top = set(keys[:K])
    return sum(e in top for e in evidence) / len(evidence)


def locomo_units(work: Path, cache: Path | None) -> list[Unit]:
    raw = {item["sample_id"]: item for item in json.loads(LOCOMO.read_text())}
    cold.CACHE = cache
    units = []
    for conversation in load_locomo():
        root = work / "locomo" / conversation.sample_id
        if not (root / "projected").exists():
            root.mkdir(parents=True, exist_ok=True)
            cold.import_conversation(raw[conversation.sample_id], root)
            cold.cli("project", "--tier", "cold", cwd=root)
            if cache is not None:
                cold._copy_cache(cold.workspace_cache(root), cache)
            (root / "projected").touch()
        questions = [(q.text, q.category, q.evidence, None) for q in cold.asked(conversation)]
        units.append(Unit(conversation.sample_id, "locomo", root, questions))
    return units


def realmem_units(work: Path, cache: Path | None) -> tuple[list[Unit], dict[str, list[float]]]:
    units, bm25 = [], {}
    for path in sorted(REALMEM.glob("*_dialogues_256k.json")):
        persona = load_persona(path)
        root = work / "realmem" / persona.name
        root.mkdir(parents=True, exist_ok=True)
        ingest_persona(persona, root, cache)
        questions = [(q.text, q.category, q.evidence, q.until) for q in persona.queries]
        units.append(Unit(persona.name, "realmem", root, questions))
        ranked = realmem_bm25(persona, persona.queries)
        bm25[persona.name] = [
            recall(r, q.evidence) for q, r in zip(persona.queries, ranked, strict=True)
        ]
    return units, bm25


def measure(unit: Unit) -> None:
    """Each question through ``Memory.search``'s recall with the default diversity and
    without (timed in process), and its whole pool kept for re-scoring."""
    from airsspec import Memory

    key = "dia_id" if unit.kind == "locomo" else "realmem_session"
    with Memory.open(unit.root) as memory:
        plain = memory.workspace.recall()
        defaults = {  # the code's defaults, whatever the workspace's airsspec.toml was given
            name: getattr(RecallWeights(), name)
            for name in ("session_diversity", "diversity_reach", "diversity_dialogue")
        }
        weights = plain.weights.model_copy(update=defaults)
        pooled = PoolRecall(plain.store, plain.embedder, weights, plain.log)
        off = PoolRecall(
            plain.store, plain.embedder, plain.weights.model_copy(update={"session_diversity": 0})
        )
        pooled.query_memory("warm up", k=K)
        for text, _, _, until in unit.questions:
            for label, recall_ in (("defaults", pooled), ("diversity 0", off)):
                started = time.perf_counter()
                answer = recall_.query_memory(text, k=K, until=until)
                took = (time.perf_counter() - started) * 1000
                unit.latency_ms.setdefault(label, []).append(took)
                unit.rankings.setdefault(label, []).append(
                    [(h.meta or {}).get(key) for h in answer.hits]
                )
                unit.sessions.setdefault(label, []).append([h.session for h in answer.hits])
            unit.pools.append(Pool(pooled.pool(key)))


def held_out(units: list[Unit]) -> dict[str, tuple[float, float]]:
    """``session_diversity`` and ``diversity_reach`` chosen for each unit on the other four;
    that unit re-scored with them."""

    def score(unit: Unit, knob: tuple[float, float]) -> float:
        return statistics.fmean(
            recall(rescore(pool, DEFAULTS, knob[0], reach=knob[1], dialogue=DIALOGUE), q[2])
            for q, pool in zip(unit.questions, unit.pools, strict=True)
        )

    scores = {(u.name, knob): score(u, knob) for u in units for knob in GRID}
    chosen = {}
    for unit in units:
        others = [u for u in units if u is not unit]
        kinds = {u.kind for u in others}

        def objective(
            knob: tuple[float, float], others: list[Unit] = others, kinds: set[str] = kinds
        ) -> float:
            return statistics.fmean(
                statistics.fmean(scores[(u.name, knob)] for u in others if u.kind == kind)
                for kind in kinds
            )

        knob = max(GRID, key=lambda knob: (objective(knob), -knob[0], knob[1]))
        chosen[unit.name] = knob
        unit.rankings["held out"] = [
            rescore(p, DEFAULTS, knob[0], reach=knob[1], dialogue=DIALOGUE) for p in unit.pools
        ]
        unit.sessions["held out"] = [rescore_sessions(p, knob) for p in unit.pools]
    return chosen


def rescore_sessions(pool: Pool, knob: tuple[float, float]) -> list[Any]:
    """The log sessions of ``rescore``'s picks (distinct sessions in the top 10)."""
    keyed = Pool.__new__(Pool)
    keyed.__dict__.update(pool.__dict__)
    keyed.keys = [int(s) for s in pool.session]
    return rescore(keyed, DEFAULTS, knob[0], reach=knob[1], dialogue=DIALOGUE)


def report(
    units: list[Unit], bm25: dict[str, list[float]], chosen: dict[str, tuple[float, float]]
) -> None:
    locomo = [u for u in units if u.kind == "locomo"]
    realmem = [u for u in units if u.kind == "realmem"]
    rows = []
    for method in ("defaults", "held out", "diversity 0"):
        lc = [
            (q[1], recall(r, q[2]))
            for u in locomo
            for q, r in zip(u.questions, u.rankings[method], strict=True)
        ]
        rm = [
            (q[1], recall(r, q[2]))
            for u in realmem
            for q, r in zip(u.questions, u.rankings[method], strict=True)
        ]
        rm_bm25 = [v for u in realmem for v in bm25[u.name]]
        implicit = [v for c, v in rm if c == REALMEM_IMPLICIT]
        implicit_bm25 = [
            v
            for u in realmem
            for q, v in zip(u.questions, bm25[u.name], strict=True)
            if q[1] == REALMEM_IMPLICIT
        ]
        sessions = {
            kind: statistics.fmean(
                len(set(s[:K])) for u in units if u.kind == kind for s in u.sessions[method]
            )
            for kind in ("locomo", "realmem")
        }
        messages = statistics.fmean(
            len({k for k in r[:K] if k}) for u in locomo for r in u.rankings[method]
        )
        rows.append(
            [
                method,
                f"{statistics.fmean(v for _, v in lc):.3f}",
                *(
                    f"{statistics.fmean(v for c, v in lc if c == cat):.3f}"
                    for cat in LOCOMO_CATEGORIES
                ),
                f"{sessions['locomo']:.1f} / {messages:.1f}",
                f"{statistics.fmean(v for _, v in rm):.3f}",
                f"{statistics.fmean(v for _, v in rm) - statistics.fmean(rm_bm25):+.3f}",
                f"{statistics.fmean(implicit) - statistics.fmean(implicit_bm25):+.3f}",
                f"{sessions['realmem']:.1f}",
            ]
        )
    rm_bm25 = [v for u in realmem for v in bm25[u.name]]
    print_table(
        "Recall@10: LoCoMo dev (turns, 383 questions) and RealMem dev (sessions, 321 queries); "
        "held out: session_diversity and diversity_reach chosen on the other four units",
        [
            "method",
            "LoCoMo",
            *LOCOMO_CATEGORIES.values(),
            "LoCoMo sessions / messages in top 10",
            "RealMem",
            f"minus BM25 ({statistics.fmean(rm_bm25):.3f})",
            "Implicit Preference minus BM25",
            "RealMem sessions in top 10",
        ],
        rows,
    )
    print_table(
        "(session_diversity, diversity_reach) chosen on the other four units, and recall@10 of the"
        " unit left out",
        ["unit left out", "chosen", "recall@10 held out", "at the default", "BM25"],
        [
            [
                u.name,
                chosen[u.name],
                statistics.fmean(
                    recall(r, q[2])
                    for q, r in zip(u.questions, u.rankings["held out"], strict=True)
                ),
                statistics.fmean(
                    recall(r, q[2])
                    for q, r in zip(u.questions, u.rankings["defaults"], strict=True)
                ),
                statistics.fmean(bm25[u.name]) if u.name in bm25 else "-",
            ]
            for u in units
        ],
    )
    timed = {
        label: [t for u in units for t in u.latency_ms[label]] for label in units[0].latency_ms
    }
    base = statistics.median(timed["diversity 0"])
    print_table(
        "query_memory in process, ms per question (shared machine: compare the ratio)",
        ["setting", "p50", "ratio to diversity 0"],
        [[label, statistics.median(t), statistics.median(t) / base] for label, t in timed.items()],
    )


def coding(work: Path) -> None:
    """The example workspace's questions (an agent's coding sessions) through ``query_memory``:
    the answer passages in each top 3, and the questions with one there."""
    from projections.recall import Recall
    from tests.support.example import QUESTIONS, example_workspace

    root = work / "example"
    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    rows = []
    with example_workspace(root, "minilm") as ws:
        plain = ws.recall()
        for label, update in (
            ("defaults", {}),
            ("diversity 0", {"session_diversity": 0.0}),
            ("diversity on every query", {"diversity_dialogue": 0.0}),
        ):
            weights = plain.weights.model_copy(update=update)
            recall_ = Recall(plain.store, plain.embedder, weights, plain.log)
            found = [
                sum(q.answers(h.session, h.seq_from, h.seq_to) for h in hits)
                for q in QUESTIONS
                for hits in [recall_.query_memory(q.text, k=3).hits]
            ]
            rows.append([label, sum(found), sum(f > 0 for f in found)])
    print_table(
        f"Example workspace (an agent's coding sessions, {len(QUESTIONS)} questions), top 3",
        ["setting", "answer passages", "questions answered"],
        rows,
    )


def arguments(doc: str) -> argparse.Namespace:
    """``--work`` and ``--cache-dir`` (see the module's docstring), once the dev data is
    found."""
    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    parser.add_argument("--work", type=Path, help="keep the workspaces here (reused when present)")
    parser.add_argument("--cache-dir", type=Path, help="keep the embedding caches here")
    args = parser.parse_args()
    if not LOCOMO.exists() or not sorted(REALMEM.glob("*_dialogues_256k.json")):
        sys.exit("the LoCoMo and RealMem dev data are absent: these measurements need them")
    return args


def dev_units(work: Path, caches: Path | None) -> tuple[list[Unit], dict[str, list[float]]]:
    """The five units, ingested under ``work`` (reused when there), and BM25's recall@10 of
    each question by unit: RealMem's over the sessions, LoCoMo's over the same rows, as
    bench/cold.py ranks it."""
    units = locomo_units(work, caches / "locomo.sqlite" if caches else None)
    personas, bm25 = realmem_units(work, caches / "realmem.sqlite" if caches else None)
    for unit in units:
        ranked = cold.baselines(unit.root, [_question(q) for q in unit.questions])
        bm25[unit.name] = [
            recall(r, q[2]) for q, r in zip(unit.questions, ranked["BM25"], strict=True)
        ]
    return units + personas, bm25


def main() -> None:
    args = arguments(__doc__)
    with tempfile.TemporaryDirectory(prefix="bench-generalise-") as tmp:
        work = (args.work or Path(tmp)).resolve()
        units, bm25 = dev_units(work, args.cache_dir.resolve() if args.cache_dir else None)
        for unit in units:
            measure(unit)
            print(f"measured {unit.name}", file=sys.stderr, flush=True)
        chosen = held_out(units)
        report(units, bm25, chosen)
        coding(work)


def _question(q: tuple[Any, ...]) -> Any:
    from bench.locomo_data import Question

    return Question(text=q[0], category=q[1], evidence=q[2], answer="")


if __name__ == "__main__":
    main()
