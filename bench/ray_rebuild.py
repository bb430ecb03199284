"""Rebuild of the cold tier: local ``--jobs 2`` against Ray on a two-node loopback cluster.

N records of real conversation text (LoCoMo turns, dealt over sessions of 100 records, repeated
to reach N), the hash embedder (the rebuild's own work, not the model's, is measured), one
workspace: each engine rebuilds it from zero; after each Ray run the table is compared with the
local one, row for row and vector for vector (sorted by unit id), and the number of Lance
versions that added rows is counted. Medians over ``--repeat`` runs; the embedding cache is
deleted before every run so both engines embed everything.

    python -m bench.ray_rebuild                 # 20,000 records
    python -m bench.ray_rebuild --records 2000  # what fits a busy two-core machine
    python -m bench.ray_rebuild --records 1000000 --per-session 1000  # the target size

The hash embedder makes the table measure splitting, folding, fragment writes and the one
commit; with MiniLM, embedding would dominate both engines alike.

On one machine both engines share its cores, so the ratio shows Ray's overhead there; the
target (a million records) is a real cluster's, where the blocks spread over nodes.
"""

from __future__ import annotations

import argparse
import itertools
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from airsspec.memory import Memory
from bench.common import edit_config, print_table
from bench.locomo_data import load

PER_SESSION = 100


def build(root: Path, records: int, per_session: int = PER_SESSION) -> Memory:
    """A workspace of ``records`` LoCoMo turns on the hash embedder, ``per_session`` a session."""
    Memory.open(root, create=True).close()
    config = root / "airsspec.toml"
    edit_config(config, ('embedder = "minilm"', 'embedder = "hash"'))
    memory = Memory.open(root)
    turns = [turn for conversation in load() for turn in conversation.turns]
    # the turns again and again, without their times (a log keeps each session in time order)
    events = [{k: v for k, v in turns[i % len(turns)].items() if k != "ts"} for i in range(records)]
    for start in range(0, records, per_session):
        session = f"s{start // per_session:06d}"
        memory.append_many(session, events[start : start + per_session], project=False)
    return memory


def table(memory: Memory) -> pa.Table:
    """The cold rows sorted by unit id (compared as Arrow: a million rows of vectors as Python
    objects would not fit in memory)."""
    store = memory.workspace.projectors(("cold",))[0].store
    return store.open().to_arrow().sort_by("unit_id")


def data_commits(memory: Memory) -> int:
    """Versions of the cold table that changed its row count."""
    import lance

    store = memory.workspace.projectors(("cold",))[0].store
    dataset = lance.dataset(str(store.directory / "units.lance"))
    counts = [dataset.checkout_version(v["version"]).count_rows() for v in dataset.versions()]
    return sum(a != b for a, b in itertools.pairwise(counts))


def timed(memory: Memory, **how: object) -> float:
    shutil.rmtree(memory.workspace.state_dir / "caches", ignore_errors=True)
    start = time.perf_counter()
    memory.rebuild("cold", **how)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument(
        "--per-session",
        type=int,
        default=PER_SESSION,
        help="records a session (default %(default)s)",
    )
    args = parser.parse_args()
    from ray.cluster_utils import Cluster

    with tempfile.TemporaryDirectory() as tmp:
        memory = build(Path(tmp), args.records, args.per_session)
        local = [timed(memory, jobs=2) for _ in range(args.repeat)]
        expected = table(memory)
        cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
        cluster.add_node(num_cpus=1)
        try:
            ray, same, commits = [], True, set()
            for _ in range(args.repeat):
                ray.append(timed(memory, engine="ray", address=cluster.address))
                got = table(memory)
                commits.add(data_commits(memory))
                same = same and got.num_rows == expected.num_rows and got.equals(expected)
        finally:
            cluster.shutdown()
        memory.close()
    base, ours = statistics.median(local), statistics.median(ray)
    print_table(
        f"cold rebuild, {args.records:,} records, {expected.num_rows:,} rows, hash embedder, "
        f"median of {args.repeat}",
        ["engine", "seconds", "records/s", "rows, vectors equal", "data commits", "speed-up"],
        [
            ["local --jobs 2 (baseline)", base, args.records / base, "-", "-", 1.0],
            [
                "ray, 2-node loopback",
                ours,
                args.records / ours,
                "yes" if same else "NO",
                str(sorted(commits)),
                base / ours,
            ],
        ],
    )


if __name__ == "__main__":
    main()
