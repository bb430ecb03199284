"""Projector states published on a bucket: what publishing costs an append, and what it saves
a machine that starts with an empty ``state/``.

Two figures, each beside its baseline from the same run (a workspace whose states stay in its
folder): (1) ``Memory.append`` on a bucket workspace, whose hot tier follows every append
(publishing adds a GET and a conditional PUT); (2) bringing hot, tokens and learnings up to the
log's end on a second machine (its own folder and cache), from the published states versus
folding from zero. The bucket is a moto server on loopback sharing this machine's cores, so the
figures count requests, not a real store's latency. Medians over ``--repeats`` runs.

    python bench/shared_checkpoints.py [--appends 20] [--sessions 20] [--records 200]
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

from bench.common import print_table
from tests.support.s3 import moto_server, new_bucket, storage_section

TIERS = ("hot", "tokens", "learnings")


def _config(root: Path, url: str, endpoint: str) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "airsspec.toml").write_text(storage_section(url, endpoint))
    return root / "airsspec.toml"


def _open(config: Path, shared: bool) -> Any:
    from airsspec.memory import Memory

    memory = Memory.open(config=config)
    if not shared:  # the baseline: states stay in the machine's folder
        memory.workspace._share = lambda projector: None
    return memory


def append_ms(endpoint: str, appends: int, shared: bool) -> float:
    """Median milliseconds of one ``Memory.append`` (the hot tier following it)."""
    with tempfile.TemporaryDirectory() as tmp:
        config = _config(Path(tmp), new_bucket(endpoint), endpoint)
        with _open(config, shared) as memory:
            memory.append("s1", {"type": "user", "content": "warm up"})
            times = []
            for i in range(appends):
                start = time.perf_counter()
                memory.append("s1", {"type": "user", "content": f"message {i}"})
                times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def second_machine_s(endpoint: str, sessions: int, records: int, shared: bool) -> float:
    """Seconds for a second machine to bring the tiers to the log's end after a first did."""
    from projections.engine import Runner

    with tempfile.TemporaryDirectory() as tmp:
        url = new_bucket(endpoint)
        with _open(_config(Path(tmp) / "a", url, endpoint), shared) as first:
            for s in range(sessions):
                events = [{"type": "user", "content": f"s{s} message {i}"} for i in range(records)]
                first.append_many(f"s{s}", events, project=False)
            ws = first.workspace
            Runner(ws.log, ws.projectors(TIERS)).catch_up()
        with _open(_config(Path(tmp) / "b", url, endpoint), shared) as second:
            ws = second.workspace
            ws.log.sessions()  # the log cache is fetched first: not what is measured
            start = time.perf_counter()
            Runner(ws.log, ws.projectors(TIERS)).catch_up()
            return time.perf_counter() - start


def main() -> None:
    """Print the two tables."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--appends", type=int, default=20)
    parser.add_argument("--sessions", type=int, default=20)
    parser.add_argument("--records", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    with moto_server() as (endpoint, _):
        rows = []
        ours = [append_ms(endpoint, args.appends, True) for _ in range(args.repeats)]
        base = [append_ms(endpoint, args.appends, False) for _ in range(args.repeats)]
        o, b = statistics.median(ours), statistics.median(base)
        rows.append(("append, hot tier following (ms)", o, b, o / b))
        ours = [
            second_machine_s(endpoint, args.sessions, args.records, True)
            for _ in range(args.repeats)
        ]
        base = [
            second_machine_s(endpoint, args.sessions, args.records, False)
            for _ in range(args.repeats)
        ]
        o, b = statistics.median(ours), statistics.median(base)
        label = f"second machine catch-up, {args.sessions} x {args.records} records (s)"
        rows.append((label, o, b, o / b))
    print_table(
        "Projector states on the bucket (published) vs kept per machine (baseline)",
        ["figure", "published", "per machine", "ratio"],
        rows,
    )


if __name__ == "__main__":
    main()
