"""Append and read throughput of the log, next to SQLite and a bare write+fsync loop.

Every figure is measured in this process, on the same disk, with the same ~370-byte records.
Appends run in interleaved rounds (every configuration once per round, in a rotated order); a
rate is the median over rounds and a ratio the median of the ratios within a round, so a slow
spell of a shared machine lands on both sides of a comparison.

SQLite's time includes building each line it stores (canonical JSON and SHA-256, as our log
does), so both sides turn the same events into the same bytes; the "lines prebuilt" baselines
give SQLite those bytes for free, the stricter comparison.

    python bench/append.py [--quick] [--read-records N]
    python bench/append.py --profile    # where append_many x100 spends its time, step by step
"""

from __future__ import annotations

import argparse
import itertools
import multiprocessing as mp
import os
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


from bench.common import median_rate, print_table, write_synthetic_log
from eventlog.canonical import batch_json, encode_batch, encode_batch_py, encode_record
from eventlog.ids import new_event_ids, utc_now
from eventlog.importers import import_paths
from eventlog.log import EventLog
from eventlog.native import lines
from eventlog.prepare import prepare_events
from eventlog.schema import SCHEMA_VERSION
from eventlog.secrets import Redactor
from eventlog.verify import verify

SHARED = Path(__file__).resolve().parent.parent.parent / "shared" / "data"
CONTENT = "Run the failing test again with -x and show me the first traceback line."  # ~300 B
BATCH = 100


def event(i: int) -> dict:
    return {"type": "user", "content": CONTENT, "meta": {"i": i}}


def sample_line(i: int) -> bytes:
    body = {
        "v": 1,
        "id": f"{i:036d}",
        "session": "s",
        "seq": i + 1,
        "ts": "2026-11-21T00:00:00.000000Z",
        "type": "user",
        "prev": "0" * 64,
        "content": CONTENT,
        "meta": {"i": i},
    }
    return encode_record(body)[0]


# ----------------------------------------------------------------------------- our log


def run_log(folder: Path, durability: str, n: int, batched: bool) -> int:
    # Secret redaction is on by default, so it is on here: this is what a user's append costs.
    with EventLog(folder, durability=durability, redactor=Redactor()) as log:
        if batched:
            for start in range(0, n, BATCH):
                log.append_many("s", [event(i) for i in range(start, min(n, start + BATCH))])
        else:
            for i in range(n):
                log.append("s", event(i))
    return n


def _worker(folder: str, durability: str, n: int, batched: bool, barrier) -> None:
    barrier.wait()
    run_log(Path(folder), durability, n, batched)


def run_log_two_procs(folder: Path, durability: str, n: int, batched: bool) -> tuple[int, float]:
    ctx = mp.get_context("spawn")
    barrier = ctx.Barrier(3)
    procs = [
        ctx.Process(target=_worker, args=(str(folder), durability, n // 2, batched, barrier))
        for _ in range(2)
    ]
    for p in procs:
        p.start()
    barrier.wait()
    start = time.perf_counter()
    for p in procs:
        p.join()
    return n, time.perf_counter() - start


# ----------------------------------------------------------------------------- baselines


def run_sqlite(
    folder: Path, synchronous: str, n: int, batched: bool, prebuilt: list[bytes] | None = None
) -> int:
    """SQLite storing the same lines as our log. By default building them (canonical JSON and
    SHA-256, what our log stores) is part of its time; with ``prebuilt`` it only inserts."""
    db = sqlite3.connect(folder / "bench.db", isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute(f"PRAGMA synchronous={synchronous}")
    db.execute(
        "CREATE TABLE IF NOT EXISTS events (session TEXT, seq INTEGER, body BLOB, "
        "PRIMARY KEY (session, seq))"
    )
    lines = prebuilt[:n] if prebuilt is not None else [sample_line(i) for i in range(n)]
    step = BATCH if batched else 1
    for start in range(0, n, step):
        db.execute("BEGIN")
        db.executemany(
            "INSERT INTO events VALUES ('s', ?, ?)",
            [(start + k, lines[start + k]) for k in range(min(step, n - start))],
        )
        db.execute("COMMIT")
    db.close()
    return n


def run_bare_fsync(folder: Path, n: int) -> int:
    line = sample_line(0)
    fd = os.open(folder / "bare.jsonl", os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    for _ in range(n):
        os.write(fd, line)
        os.fdatasync(fd)
    os.close(fd)
    return n


# ----------------------------------------------------------------------------- profile


def profile(root: Path, rounds: int, batches: int = 200) -> None:
    """Where ``append_many`` x100 (durability ``off``, redaction on) spends its time, per
    record: the steps of the append path run one after another on each batch, as the call runs
    them (so each finds the batch in cache, as it would there), then the whole call on the same
    events; next to what 2x SQLite NORMAL x100, measured in the same rounds, leaves. Medians
    over ``rounds``."""
    native = "the C extension" if lines is not None else "Python; the extension is not built"
    encoding_name = f"encoding: envelope, canonical JSON, SHA-256, lines ({native})"
    names = [
        "building the events (the caller)",
        "validation: one call per batch",
        "the batch's JSON, for the secret gate",
        "secret gate",
        "ids",
        encoding_name,
        "append_many (the whole call)",
        "  the same encoding in Python (not part of the call)",
    ]
    steps: dict[str, list[float]] = {name: [] for name in [*names, "sqlite"]}
    per_record = 1e6 / (batches * BATCH)
    redactor, clock = Redactor(), time.perf_counter
    for _ in range(rounds):
        spent = [0.0] * len(names)
        with EventLog(fresh(root), durability="off", redactor=redactor) as whole:
            for first in range(0, batches * BATCH, BATCH):
                marks = [clock()]
                events = [event(i) for i in range(first, first + BATCH)]
                marks.append(clock())
                bodies = prepare_events(events)
                marks.append(clock())
                data = batch_json(bodies)
                marks.append(clock())
                redactor.redact_all(bodies, data)
                marks.append(clock())
                ids = new_event_ids(BATCH)
                marks.append(clock())
                encode_batch(bodies, SCHEMA_VERSION, "s", first, utc_now(), ids, None)
                marks.append(clock())
                whole.append_many("s", events)
                marks.append(clock())
                encode_batch_py(bodies, SCHEMA_VERSION, "s", first, utc_now(), ids, None)
                marks.append(clock())
                for index, (a, b) in enumerate(itertools.pairwise(marks)):
                    spent[index] += (b - a) * per_record
        for name, value in zip(names, spent, strict=True):
            steps[name].append(value)
        folder = fresh(root)
        began = clock()
        run_sqlite(folder, "NORMAL", batches * BATCH, True)
        steps["sqlite"].append((clock() - began) * per_record)
        shutil.rmtree(folder)
    us = {name: statistics.median(values) for name, values in steps.items()}
    whole = us.pop("append_many (the whole call)")
    sqlite, in_python = us.pop("sqlite"), us.pop(names[-1])
    caller = us["building the events (the caller)"]
    rest = whole - (sum(us.values()) - caller)  # the call, less the steps timed alone
    figure = caller + whole  # what the throughput table times
    us["lock, write, head, the returned records"] = rest
    rows = [[name, f"{value:.3f}", f"{value / figure:.0%}"] for name, value in us.items()]
    rows += [
        [f"append_many x{BATCH}, as the throughput table times it", f"{figure:.3f}", "100%"],
        [names[-1], f"{in_python:.3f}", f"{in_python / figure:.0%}"],
        [
            f"what 2x SQLite NORMAL x{BATCH} leaves (same rounds)",
            f"{sqlite / 2:.3f}",
            f"{sqlite / 2 / figure:.0%}",
        ],
    ]
    print_table(
        f"Where append_many x{BATCH} spends its time (durability off, redaction on; µs per "
        f"record, each step timed in turn on each of {batches} batches, median of {rounds} rounds)",
        ["step", "µs per record", "share"],
        rows,
    )


# ----------------------------------------------------------------------------- read


def read_all(folder: Path) -> int:
    log = EventLog(folder, durability="off")
    return sum(1 for name in log.sessions() for _ in log.read(name))


# ----------------------------------------------------------------------------- main


def fresh(root: Path) -> Path:
    folder = Path(tempfile.mkdtemp(dir=root))
    return folder


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer records and repeats")
    parser.add_argument(
        "--profile", action="store_true", help="only where append_many x100 spends its time"
    )
    parser.add_argument("--read-records", type=int, default=1_000_000)
    args = parser.parse_args()
    repeats = 3 if args.quick else 5
    n_sync = 1000 if args.quick else 3000
    n_fast = 20_000 if args.quick else 100_000
    root = Path(tempfile.mkdtemp(prefix="airsspec-bench-"))
    try:
        if args.profile:
            profile(root, repeats + 2)
            return
        # Every configuration runs once per round, in a rotated order, and each ratio is the
        # median of the ratios within a round: these shared machines drift by 10-20% over
        # minutes, which would otherwise land on whichever side ran in a slow spell. Each
        # run's files are removed at once, so no run pays for writing back another's pages.
        prebuilt = [sample_line(i) for i in range(n_fast)]
        configs: dict[str, tuple] = {
            "bare": (run_bare_fsync, n_sync),
            "sql FULL x1": (run_sqlite, "FULL", n_sync, False),
            "sql NORMAL x1": (run_sqlite, "NORMAL", n_fast, False),
            "sql FULL x100": (run_sqlite, "FULL", n_fast, True),
            "sql NORMAL x100": (run_sqlite, "NORMAL", n_fast, True),
            "sql NORMAL x1 prebuilt": (run_sqlite, "NORMAL", n_fast, False, prebuilt),
            "sql NORMAL x100 prebuilt": (run_sqlite, "NORMAL", n_fast, True, prebuilt),
        }
        shapes = [
            (mode, n, batched)
            for mode, n in (("always", n_sync), ("batch", n_fast), ("off", n_fast))
            for batched in (False, True)
        ]
        for mode, n, batched in shapes:
            configs[f"{mode} {batched}"] = (run_log, mode, n, batched)
        rates: dict[str, list[float]] = {name: [] for name in configs}
        names = list(configs)
        for round_no in range(repeats):
            shift = round_no % len(names)
            for name in names[shift:] + names[:shift]:
                fn, *fn_args = configs[name]
                folder = fresh(root)
                start = time.perf_counter()
                count = fn(folder, *fn_args)
                rates[name].append(count / (time.perf_counter() - start))
                shutil.rmtree(folder)

        def median(name: str) -> float:
            return statistics.median(rates[name])

        def ratio(name: str, base: str) -> float:
            return statistics.median(a / b for a, b in zip(rates[name], rates[base], strict=True))

        def rate2(durability: str, n: int, batched: bool) -> float:
            results = []
            for _ in range(repeats):
                folder = fresh(root)
                count, seconds = run_log_two_procs(folder, durability, n, batched)
                results.append(count / seconds)
                shutil.rmtree(folder)
            return statistics.median(results)

        rows = []
        for mode, n, batched in shapes:
            name = f"{mode} {batched}"
            level = "FULL" if mode == "always" else "NORMAL"
            base = f"sql {level} x{BATCH if batched else 1}"
            rows.append(
                [
                    mode,
                    f"append_many x{BATCH}" if batched else "append x1",
                    median(name),
                    rate2(mode, n, batched),
                    f"SQLite {level}",
                    median(base),
                    ratio(name, base),
                    ratio(name, f"{base} prebuilt") if level == "NORMAL" else "-",
                    ratio(name, "bare") if mode == "always" and not batched else "-",
                ]
            )
        print_table(
            f"Appends per second (~{len(sample_line(0))}-byte records, median of {repeats} "
            "interleaved rounds; a ratio is the median of the ratios within a round)",
            [
                "durability",
                "call",
                "1 process",
                "2 processes",
                "baseline",
                "baseline/s",
                "ratio vs baseline",
                "ratio vs SQLite, lines prebuilt",
                "ratio vs bare fsync",
            ],
            rows,
        )
        print_table(
            "Baselines measured in the same run",
            ["baseline", "records/s"],
            [
                ["bare write+fdatasync loop", median("bare")],
                ["SQLite WAL synchronous=FULL, 1 insert/txn", median("sql FULL x1")],
                ["SQLite WAL synchronous=NORMAL, 1 insert/txn", median("sql NORMAL x1")],
                [f"SQLite WAL synchronous=FULL, {BATCH} inserts/txn", median("sql FULL x100")],
                [
                    f"SQLite WAL synchronous=NORMAL, {BATCH} inserts/txn",
                    median("sql NORMAL x100"),
                ],
                [
                    "SQLite WAL synchronous=NORMAL, 1 insert/txn, lines prebuilt",
                    median("sql NORMAL x1 prebuilt"),
                ],
                [
                    f"SQLite WAL synchronous=NORMAL, {BATCH} inserts/txn, lines prebuilt",
                    median("sql NORMAL x100 prebuilt"),
                ],
            ],
        )

        read_dir = fresh(root)
        n_read = args.read_records // (10 if args.quick else 1)
        t0 = time.perf_counter()
        write_synthetic_log(read_dir, 100, n_read // 100, CONTENT)
        build_s = time.perf_counter() - t0
        read_rate = median_rate(lambda: read_all(read_dir), 3)
        verify_rate = median_rate(lambda: verify(EventLog(read_dir, durability="off")).records, 3)
        print_table(
            "Read/replay with schema validation, and verify (median of 3 full passes)",
            ["pass", "records", "sessions", "records/s", "target", "ratio", "generate (s)"],
            [
                ["read", n_read, 100, read_rate, 300_000, read_rate / 300_000, build_s],
                ["verify", n_read, 100, verify_rate, "-", "-", "-"],
            ],
        )
        transcript = SHARED / "claude-code" / "compact"
        if transcript.is_dir():
            source = next(transcript.glob("*.jsonl"))
            records = sum(1 for _ in source.open("rb"))

            def import_once() -> int:
                with EventLog(fresh(root), durability="always", redactor=Redactor()) as log:
                    import_paths(log, "claude-code", [source])
                return records

            import_rate = median_rate(import_once, 3)
            size_mb = source.stat().st_size / 1e6
            print_table(
                "Import of a real Claude Code transcript (in process: no start-up; median of 3)",
                ["records", "MB", "records/s", "MB/s"],
                [[records, f"{size_mb:.1f}", import_rate, import_rate * size_mb / records]],
            )
        else:
            print(f"(import row skipped: {transcript} is absent)")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
