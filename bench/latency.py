"""In-process latency of the reads an agent makes every turn, at 10k, 100k and 1M records.

The seed's targets (issue 46), each measured through ``Memory.open`` in one process, warm (after
a first call), as medians and p95 over repeated calls:

- the hot window of a session (``memory.hot``) under 1 ms;
- the warm library context (``memory.context`` without a query: the memory block, the earlier
  sessions' latest summaries from the library, the session's summary and newest messages)
  under 50 ms;
- a cold search (``memory.search(q, fresh=False)``, 100 LoCoMo questions, the query embedded by
  MiniLM) p95 under 200 ms;
- the full ``memory.context(session, 2000, query=q)`` under 100 ms.

Each size is a workspace of 200-record sessions (user, thought, tool call, tool output,
assistant in turn; the texts are LoCoMo turns, so the projections index and summarize real
language), written in the log's own encoding, every session compacted once (extractive
summarizer: the warm library holds one file per session), all tiers projected. It is built once
and kept under the temporary folder (``--cache``), keyed by size. Baselines from the same run:
reading the session's JSONL file with orjson (hot), reading the session's newest library file
(warm), exact cosine over the cold table's vectors in numpy plus the query's embedding (cold),
and the hot and cold baselines together (full context).

    python bench/latency.py [--sizes 10000,100000,1000000] [--repeats 50] [--cache DIR]
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from airsspec.memory import Memory
from bench.common import print_table, use_extractive_summarizer, write_synthetic_log
from bench.locomo_data import DATA, load
from projections.embedders import make_embedder

PER_SESSION = 200
BUDGET = 2000
TARGETS_MS = {"hot": 1.0, "warm": 50.0, "cold p95": 200.0, "full": 100.0}


def build(root: Path, size: int, texts: list[str], jobs: int = 2) -> float:
    """The workspace of ``size`` records at ``root`` (see the module), built unless a finished
    one is there; the seconds it took (0 when it was kept). The log is written whole, in its
    own encoding, one file per session; each session is compacted (the compactor's catch-ups
    read that session only); the tiers are folded once, in ``jobs`` processes. The texts'
    embeddings come from a smaller workspace built before (``seed_embeddings``): every size
    cycles the same LoCoMo turns, and embedding them is most of a first build."""
    done = root / "built"
    if done.exists():
        return 0.0
    started = time.perf_counter()
    config, _ = Memory.init(root)
    use_extractive_summarizer(config, ('durability = "always"', 'durability = "off"'))
    sessions = size // PER_SESSION
    with Memory.open(root) as memory:
        write_synthetic_log(memory.log_dir, sessions, PER_SESSION, "", texts)
        seed_embeddings(root, memory.workspace.layout.embedding_cache_path)
        for number in range(sessions):
            memory.compact(f"s{number:04d}", force=True)
            if number % 500 == 499 or number + 1 == sessions:
                elapsed = time.perf_counter() - started
                print(f"  compacted {number + 1:,}/{sessions:,} sessions ({elapsed:,.0f} s)")
        memory.project(jobs=jobs, progress=_progress())
    done.write_text("ok")
    return time.perf_counter() - started


def seed_embeddings(root: Path, cache: Path) -> None:
    """Start ``cache`` (the embedding cache of the workspace at ``root``, not created yet) as
    a copy of the largest one among the workspaces built beside ``root``, without its owners
    (which session embedded what: forgetting's index, not this workspace's). The vectors are
    the same model's for the same texts, so the cold tier is what embedding them again gives."""
    import shutil
    import sqlite3
    from contextlib import closing

    where = cache.relative_to(root)
    built = [p for p in root.parent.glob("records-*") if (p / "built").exists()]
    donors = [p / where for p in built if (p / where).exists()]
    if not donors or cache.exists():
        return
    donor = max(donors, key=lambda d: d.stat().st_size)
    cache.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(donor, cache)
    with closing(sqlite3.connect(cache)) as db, db:
        db.execute("DELETE FROM owners")
    print(f"  embeddings seeded from {donor.relative_to(root.parent)}", flush=True)


def _progress() -> Callable[[str, int, int], None]:
    """A progress line per tier, every tenth of its sessions."""

    def said(tier: str, done: int, total: int) -> None:
        if total and (done == total or done % max(1, total // 10) == 0):
            print(f"  {tier}: {done:,}/{total:,} sessions", flush=True)

    return said


def timed_ms(call: Callable[[], object], repeats: int) -> list[float]:
    """Milliseconds of ``repeats`` calls of ``call``, after one call that is not counted."""
    call()
    out = []
    for _ in range(repeats):
        started = time.perf_counter()
        call()
        out.append((time.perf_counter() - started) * 1000)
    return out


def p95(values: list[float]) -> float:
    return float(np.percentile(values, 95))


def measure(root: Path, questions: list[str], repeats: int) -> list[list[object]]:
    """The four rows of one size: (read, p50, p95, target, baseline p50, ratio)."""
    embedder = make_embedder("minilm")
    rows: list[list[object]] = []
    with Memory.open(root) as memory:
        sessions = sorted(p.stem for p in memory.log_dir.glob("*.jsonl"))
        session = sessions[len(sessions) // 2]
        log_file = memory.log_dir / f"{session}.jsonl"
        library = [e for e in memory.library() if e["session"] == session]
        newest = next(root.rglob(library[-1]["file"]))

        def hot_floor() -> object:
            return [orjson.loads(line) for line in log_file.read_bytes().splitlines()]

        def warm_floor() -> object:
            return newest.read_text()

        table = memory.workspace.recall().store.dataset()
        if table is None:
            sys.exit(f"{root}: the cold table is missing; delete the folder to build it again")
        matrix = table.to_table(columns=["vector"])["vector"].combine_chunks()
        vectors = matrix.values.to_numpy().reshape(len(matrix), -1)
        asked = itertools.cycle(questions)

        def cold_floor() -> object:
            query = embedder.embed([next(asked)])[0]
            scores = vectors @ query
            return np.argpartition(-scores, 50)[:50]

        def cold() -> object:
            return memory.search(next(asked), fresh=False)

        def full() -> object:
            return memory.context(session, BUDGET, query=next(asked))

        def full_floor() -> object:
            return hot_floor(), cold_floor()

        for name, ours, floor in (
            ("hot", lambda: memory.hot(session), hot_floor),
            ("warm", lambda: memory.context(session, BUDGET), warm_floor),
            ("cold p95", cold, cold_floor),
            ("full", full, full_floor),
        ):
            mine = timed_ms(ours, repeats)
            base = timed_ms(floor, repeats)
            figure = p95(mine) if name == "cold p95" else statistics.median(mine)
            rows.append(
                [
                    name,
                    statistics.median(mine),
                    p95(mine),
                    TARGETS_MS[name],
                    "yes" if figure < TARGETS_MS[name] else "NO",
                    statistics.median(base),
                    statistics.median(mine) / statistics.median(base),
                ]
            )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="10000,100000,1000000")
    parser.add_argument("--repeats", type=int, default=50)
    parser.add_argument(
        "--cache",
        type=Path,
        default=Path(tempfile.gettempdir()) / "airsspec-bench-latency",
        help="where the workspaces are built once and kept (one folder per size)",
    )
    args = parser.parse_args()
    if not DATA.exists():
        sys.exit(f"{DATA} is absent: the workspaces' texts are LoCoMo turns")
    conversations = load()
    texts = [e["content"] for c in conversations for e in c.turns]
    questions = [q.text for c in conversations for q in c.questions][:100]
    for size in (int(s) for s in args.sizes.split(",")):
        root = args.cache / f"records-{size}"
        print(f"workspace of {size:,} records: {root}", flush=True)
        seconds = build(root, size, texts)
        if seconds:
            print(f"  built in {seconds:,.0f} s", flush=True)
        print_table(
            f"{size:,} records, {size // PER_SESSION:,} sessions: ms per call, warm, "
            f"{args.repeats} calls (hot: memory.hot; warm: context without a query; cold: "
            f"search fresh=False; full: context({BUDGET}, query=...))",
            ["read", "p50", "p95", "target", "met", "baseline p50", "ratio p50"],
            measure(root, questions, args.repeats),
        )


if __name__ == "__main__":
    main()
