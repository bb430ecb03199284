"""What ``[privacy] encrypt`` and ``forget`` cost.

1. Append throughput with content encryption on (``encrypt = "user"``: AES-GCM per record, a key
   per user) next to off, same run, same records (``append_many`` batches of 100 user messages of
   about 200 bytes, ``durability = "off"`` so the encoding and sealing are what is measured), and
   the read side (``EventLog.read`` of the same log, records opened). Medians of ``--repeats``.
2. ``forget --user`` of a user with ``--target`` records (10 sessions) among ``--others`` other
   users of ``--per-other`` records each, every tier projected (cold with the hash embedder),
   next to a rebuild of every tier of the same workspace (what forgetting would cost if it
   rebuilt everything instead of refolding the subject's sessions).

    python bench/privacy.py [--records 20000] [--target 10000] [--others 9] [--per-other 1000]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import print_table

TEXT = "The invoices module rounds totals per line, not per invoice; keep that. " * 3


def _log(root: Path, encrypt: bool):
    from eventlog.crypto import FileKeyStore, Sealer, SessionOwners
    from eventlog.log import EventLog

    sealer = Sealer("user", FileKeyStore(root / "keys"), SessionOwners(root / "log"))
    return EventLog(root / "log", durability="off", sealer=sealer if encrypt else None)


def appends(records: int, repeats: int) -> None:
    """Runs alternate (off, on, off, on...) so both see the same load on a shared machine."""
    batch = [{"type": "user", "content": f"{TEXT} #{i}"} for i in range(100)]
    rates: dict[bool, dict[str, list[float]]] = {
        e: {"append": [], "read": []} for e in (False, True)
    }
    with tempfile.TemporaryDirectory() as folder:
        for run in range(repeats + 1):  # the first round warms up (validators, keys): not kept
            for encrypt in (False, True):
                root = Path(folder) / f"{run}-{encrypt}"
                begun = time.perf_counter()
                with _log(root, encrypt) as log:
                    log.append_many("s", [{"type": "session_started", "user": "ana"}], system=True)
                    for _ in range(records // 100):
                        log.append_many("s", batch)
                wrote = records / (time.perf_counter() - begun)
                begun = time.perf_counter()
                with _log(root, encrypt) as log:
                    count = sum(1 for _ in log.read("s"))
                read = count / (time.perf_counter() - begun)
                if run:
                    rates[encrypt]["append"].append(wrote)
                    rates[encrypt]["read"].append(read)
    rows = []
    for label, key in (("append_many x100, records/s", "append"), ("read, records/s", "read")):
        ours, base = (statistics.median(rates[e][key]) for e in (True, False))
        rows.append((label, ours, base, f"{ours / base:.2f}x"))
    print_table(
        f"Content encryption: {records:,} records of ~230 bytes (median of {repeats})",
        ("measure", "encrypt = user", "encrypt = off", "ratio"),
        rows,
    )


def forget(target: int, others: int, per_other: int) -> None:
    from airsspec import Memory

    os.environ.update({"AIRSSPEC_COLD_EMBEDDER": "hash", "ANTHROPIC_API_KEY": ""})
    os.environ["AIRSSPEC_LOG_DURABILITY"] = "off"
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        with Memory.open(root, create=True) as memory:
            config = root / "airsspec.toml"
            config.write_text(config.read_text() + '\n[privacy]\nencrypt = "user"\n')
        with Memory.open(root) as memory:
            population = [("target", target, 10)] + [
                (f"user{n}", per_other, 2) for n in range(others)
            ]
            for user, count, sessions in population:
                view = memory.scoped(user=user)
                for s in range(sessions):
                    events = [
                        {"type": "user", "content": f"{user} {TEXT} {i}"}
                        for i in range(count // sessions)
                    ]
                    for start in range(0, len(events), 500):
                        view.append_many(f"{user}-{s}", events[start : start + 500], project=False)
            total = target + others * per_other
            begun = time.perf_counter()
            memory.project()
            projected = time.perf_counter() - begun
            done = memory.forget(user="target", by="bench")
            begun = time.perf_counter()
            memory.rebuild()
            rebuilt = time.perf_counter() - begun
    print_table(
        f"forget --user: {target:,} records in 10 sessions among {others} other users of "
        f"{per_other:,} records ({total:,} records; hash embedder; one run)",
        ("measure", "seconds", "baseline: rebuild every tier", "ratio"),
        [
            ("forget --user target", done.seconds, rebuilt, f"{done.seconds / rebuilt:.2f}x"),
            ("(first projection of every tier)", projected, rebuilt, f"{projected / rebuilt:.2f}x"),
        ],
    )
    print(
        f"\nforgot {done.records_forgotten:,} records, {done.keys_destroyed} keys, "
        f"{done.cache_entries_removed:,} cached embeddings"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=20_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--target", type=int, default=10_000)
    parser.add_argument("--others", type=int, default=9)
    parser.add_argument("--per-other", type=int, default=1_000)
    args = parser.parse_args()
    appends(args.records, args.repeats)
    forget(args.target, args.others, args.per_other)


if __name__ == "__main__":
    main()
