"""A second retrieval round fed by the first hits, measured leaving one unit out: does
pseudo-relevance feedback lift LoCoMo's multi-hop questions (an answer spread over two
sessions) without costing RealMem?

The units, pools and BM25 are ``bench/generalise.py``'s. Each pool is re-scored
(``bench.pools.rescore``) with the default weights and session diversity, each hit raised by
``feedback`` times its highest cosine with one of the first ``feedback_hits`` hits: a second
round over the candidates the first one found (the pool), which a real second search would widen
but not re-rank differently. For each unit left out, (``feedback_hits``, ``feedback``) is chosen
on the other four (the mean of the LoCoMo mean and the RealMem mean, ties: the smaller feedback)
and that unit re-scored with it. The last table gives the added cost per question, the feedback
step timed on the pools (its matrix product and re-sort), beside the whole re-scoring.

    python bench/feedback.py [--work DIR] [--cache-dir DIR]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import bench.generalise as generalise
from bench.common import print_table
from bench.generalise import DEFAULTS, DIALOGUE, LOCOMO_CATEGORIES, REALMEM_IMPLICIT, Unit, recall
from bench.pools import rescore
from projections.policies import RecallWeights

HITS = (1, 2, 3, 5)
FEEDBACK = (0.05, 0.1, 0.2, 0.3)
GRID = [(0, 0.0), *((m, w) for m in HITS for w in FEEDBACK)]  # (feedback_hits, feedback)
DIVERSITY = RecallWeights().session_diversity
REACH = RecallWeights().diversity_reach


def scored(pool: Any, knob: tuple[int, float]) -> list[object]:
    """One pool ranked with the defaults and the second round ``knob`` (hits, weight)."""
    return rescore(
        pool,
        DEFAULTS,
        DIVERSITY,
        reach=REACH,
        dialogue=DIALOGUE,
        feedback=knob[1],
        feedback_hits=knob[0],
    )


def ranked(unit: Unit, knob: tuple[int, float]) -> list[list[object]]:
    return [scored(pool, knob) for pool in unit.pools]


def scores(unit: Unit, rankings: list[list[object]]) -> list[tuple[object, float]]:
    return [(q[1], recall(r, q[2])) for q, r in zip(unit.questions, rankings, strict=True)]


def held_out(units: list[Unit]) -> dict[str, tuple[int, float]]:
    """(``feedback_hits``, ``feedback``) chosen for each unit on the other four."""
    mean = {
        (u.name, k): statistics.fmean(v for _, v in scores(u, ranked(u, k)))
        for u in units
        for k in GRID
    }
    chosen = {}
    for unit in units:
        others = [u for u in units if u is not unit]
        kinds = {u.kind for u in others}

        def objective(
            knob: tuple[int, float], others: list[Unit] = others, kinds: set[str] = kinds
        ) -> float:
            return statistics.fmean(
                statistics.fmean(mean[(u.name, knob)] for u in others if u.kind == kind)
                for kind in kinds
            )

        chosen[unit.name] = max(GRID, key=lambda k: (objective(k), -k[1], -k[0]))
        unit.rankings["held out"] = ranked(unit, chosen[unit.name])
        unit.rankings["no feedback"] = ranked(unit, (0, 0.0))
    return chosen


def report(
    units: list[Unit], bm25: dict[str, list[float]], chosen: dict[str, tuple[int, float]]
) -> None:
    rows = []
    for method in ("no feedback", "held out"):
        lc = [x for u in units if u.kind == "locomo" for x in scores(u, u.rankings[method])]
        rm = [x for u in units if u.kind == "realmem" for x in scores(u, u.rankings[method])]
        rm_bm25 = statistics.fmean(v for u in units if u.kind == "realmem" for v in bm25[u.name])
        implicit_bm25 = statistics.fmean(
            v
            for u in units
            if u.kind == "realmem"
            for q, v in zip(u.questions, bm25[u.name], strict=True)
            if q[1] == REALMEM_IMPLICIT
        )
        implicit = [v for c, v in rm if c == REALMEM_IMPLICIT]
        rows.append(
            [
                method,
                f"{statistics.fmean(v for _, v in lc):.3f}",
                *(
                    f"{statistics.fmean(v for c, v in lc if c == cat):.3f}"
                    for cat in LOCOMO_CATEGORIES
                ),
                f"{statistics.fmean(v for _, v in rm):.3f}",
                f"{statistics.fmean(v for _, v in rm) - rm_bm25:+.3f}",
                f"{statistics.fmean(implicit) - implicit_bm25:+.3f}",
            ]
        )
    print_table(
        "Recall@10 with a second round in the pool: (feedback_hits, feedback) chosen on the other"
        " four units",
        [
            "method",
            "LoCoMo",
            *LOCOMO_CATEGORIES.values(),
            "RealMem",
            "minus BM25",
            "Implicit minus BM25",
        ],
        rows,
    )
    print_table(
        "Chosen on the other four units, and recall@10 of the unit left out",
        ["unit left out", "(feedback_hits, feedback)", "held out", "no feedback"],
        [
            [
                u.name,
                chosen[u.name],
                statistics.fmean(v for _, v in scores(u, u.rankings["held out"])),
                statistics.fmean(v for _, v in scores(u, u.rankings["no feedback"])),
            ]
            for u in units
        ],
    )
    pools = [p for u in units for p in u.pools]
    timed = {}
    for knob in ((0, 0.0), (5, 0.3)):
        runs = []
        for _ in range(5):
            started = time.perf_counter()
            for pool in pools:
                scored(pool, knob)
            runs.append((time.perf_counter() - started) * 1000 / len(pools))
        timed[knob] = statistics.median(runs)
    print_table(
        "Re-scoring one pool, ms (median of 5 runs; shared machine: compare the ratio)",
        ["setting", "ms per question", "ratio to no feedback"],
        [[str(k), t, t / timed[(0, 0.0)]] for k, t in timed.items()],
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work", type=Path, help="keep the workspaces here (reused when present)")
    parser.add_argument("--cache-dir", type=Path, help="keep the embedding caches here")
    args = parser.parse_args()
    if not generalise.LOCOMO.exists() or not sorted(
        generalise.REALMEM.glob("*_dialogues_256k.json")
    ):
        sys.exit("the LoCoMo and RealMem dev data are absent: these measurements need them")
    with tempfile.TemporaryDirectory(prefix="bench-feedback-") as tmp:
        work = (args.work or Path(tmp)).resolve()
        caches = args.cache_dir.resolve() if args.cache_dir else None
        units = generalise.locomo_units(work, caches / "locomo.sqlite" if caches else None)
        personas, bm25 = generalise.realmem_units(
            work, caches / "realmem.sqlite" if caches else None
        )
        units += personas
        for unit in units:
            generalise.measure(unit)
            print(f"measured {unit.name}", file=sys.stderr, flush=True)
        chosen = held_out(units)
        report(units, bm25, chosen)


if __name__ == "__main__":
    main()
