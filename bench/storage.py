"""The log on an S3-compatible bucket next to the local folder: append rate and p99 latency
with 1 and 4 writers (on one session, and each on its own), and how long machine B takes to
see machine A's append.

The bucket is a moto server on loopback (started here), so the figures measure the protocol's
requests (create-only PUT per batch, head PUT, LIST and GET to catch up) against a Python S3
emulator sharing this machine's cores, not a real store's latency. Local appends are measured
in each durability mode (``always``: fdatasync before returning; ``batch``: group commit;
``off``); a bucket's append is durable when its PUT returns, so it has one mode. Each writer is
a process with its own cache (its own machine). Rates and percentiles are medians over
``--repeats`` runs; the baseline of each row is the local folder with ``always`` (the default).

    python bench/storage.py [--seconds 3] [--repeats 3] [--visibility 1000]
    python bench/storage.py --writers-check 60   # the done-when at full length: 2 machines x 2
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import print_table
from eventlog.log import EventLog
from tests.support.s3 import KEYS, moto_server, new_bucket, two_machines

CONTENT = "Run the failing test again with -x and show me the first traceback line."


MODES = ("always", "batch", "off")


def open_log(target: str, endpoint: str, cache: Path, durability: str = "always"):
    """The local log in folder ``target`` (with ``durability``), or the object log on bucket
    url ``target``."""
    if not target.startswith("s3://"):
        return EventLog(target, durability=durability)
    from eventlog.storage.log import ObjectStoreLog
    from eventlog.storage.objects import ObjectStore

    return ObjectStoreLog(ObjectStore(target, cache, endpoint=endpoint, **KEYS))


def _writer(args: tuple[str, str, str, str, float, mp.Queue, Any, str]) -> None:
    target, endpoint, cache, session, seconds, out, ready, durability = args
    log = open_log(target, endpoint, Path(cache), durability)
    log.append(session, {"type": "user", "content": "warm-up"})
    ready.wait()  # every writer starts timing together, after its imports and first append
    latencies = []
    deadline = time.monotonic() + seconds
    i = 0
    while time.monotonic() < deadline:
        start = time.perf_counter()
        log.append(session, {"type": "user", "content": CONTENT, "meta": {"i": i}})
        latencies.append(time.perf_counter() - start)
        i += 1
    log.close()  # a batch-mode log's group commit stops here
    out.put(latencies)


def run_writers(
    target: str, endpoint: str, writers: int, shared: bool, seconds: float, durability: str
):
    """(appends per second over all writers, p99 latency in ms) of one run."""
    ctx = mp.get_context("spawn")
    out, ready = ctx.Queue(), ctx.Barrier(writers)
    with tempfile.TemporaryDirectory() as tmp:
        procs = [
            ctx.Process(
                daemon=True,
                target=_writer,
                args=(
                    (
                        target,
                        endpoint,
                        f"{tmp}/c{w}",
                        "s" if shared else f"s{w}",
                        seconds,
                        out,
                        ready,
                        durability,
                    ),
                ),
            )
            for w in range(writers)
        ]
        for p in procs:
            p.start()
        results = [out.get(timeout=seconds + 120) for _ in procs]
        for p in procs:
            p.join()
    latencies = sorted(x for r in results for x in r)
    p99 = latencies[int(0.99 * (len(latencies) - 1))] * 1000
    return len(latencies) / seconds, p99


def appends_table(endpoint: str, seconds: float, repeats: int) -> None:
    rows = []
    for writers, shared in ((1, True), (4, True), (4, False)):
        where = "one session" if shared else "own sessions"
        figures: dict[str, list[tuple[float, float]]] = {}
        for _ in range(repeats):
            for mode in MODES:
                with tempfile.TemporaryDirectory() as folder:
                    run = run_writers(folder, endpoint, writers, shared, seconds, mode)
                figures.setdefault(f"local, {mode}", []).append(run)
            run = run_writers(new_bucket(endpoint), endpoint, writers, shared, seconds, "always")
            figures.setdefault("bucket (PUT acknowledged)", []).append(run)
        base = statistics.median(r for r, _ in figures["local, always"])
        for store, runs in figures.items():
            rate = statistics.median(r for r, _ in runs)
            p99 = statistics.median(p for _, p in runs)
            rows.append((f"{writers}, {where}", store, rate, p99, rate / base))
    print_table(
        f"appends of one ~370-byte event, {seconds:g} s per run, median of {repeats}; "
        "baseline: local, always",
        ["writers", "store, durability", "appends/s", "p99 ms", "ratio to baseline"],
        rows,
    )


def _watcher(args: tuple[str, str, str, int, mp.Queue]) -> None:
    target, endpoint, cache, count, out = args
    log = open_log(target, endpoint, Path(cache))
    seen: dict[int, float] = {}
    last = 0
    deadline = time.monotonic() + 120
    while last < count and time.monotonic() < deadline:
        seq = log.head("v").seq
        now = time.time()
        for s in range(last + 1, seq + 1):
            seen[s] = now
        last = max(last, seq)
    out.put(seen)


def visibility(target: str, endpoint: str, count: int) -> tuple[float, float]:
    """(p50, p99) ms from the start of A's append to B's first sight of it (from its
    acknowledgement, a local reader can be quicker than the writer's own sync: a negative
    delay)."""
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    with tempfile.TemporaryDirectory() as tmp:
        writer = open_log(target, endpoint, Path(tmp) / "a")
        writer.append("v", {"type": "user", "content": "start"})
        watcher = ctx.Process(target=_watcher, args=((target, endpoint, f"{tmp}/b", count, out),))
        watcher.start()
        time.sleep(1.0)  # let B import and reach its polling loop before the clock starts
        acked: dict[int, float] = {}
        for i in range(count - 1):
            begun = time.time()
            record = writer.append("v", {"type": "user", "content": f"{i}"})
            acked[record.seq] = begun
            time.sleep(0.01)
        seen = out.get(timeout=180)
        watcher.join()
    delays = sorted((seen[s] - t) * 1000 for s, t in acked.items() if s in seen)
    return statistics.median(delays), delays[int(0.99 * (len(delays) - 1))]


def visibility_table(endpoint: str, count: int) -> None:
    with tempfile.TemporaryDirectory() as folder:
        local = visibility(folder, endpoint, count)
    bucket = visibility(new_bucket(endpoint), endpoint, count)
    print_table(
        f"machine B sees machine A's append, from its start (B polls the session's end), "
        f"{count} appends",
        ["store", "p50 ms", "p99 ms", "p50 ratio to local"],
        [("bucket", *bucket, bucket[0] / local[0]), ("local folder", *local, 1.0)],
    )


def writers_check(endpoint: str, seconds: float) -> None:
    """2 machines x 2 writer processes on shared and private sessions: the done-when."""
    from eventlog.verify import verify

    url = new_bucket(endpoint)
    with tempfile.TemporaryDirectory() as tmp:
        acked = two_machines(url, endpoint, Path(tmp), seconds)
        third = open_log(url, endpoint, Path(tmp) / "machine-C")
        rows = []
        for session, acks in sorted(acked.items()):
            stored = [(r.record.seq, r.record.id) for r in third.read(session)]
            seqs = [s for s, _ in stored]
            gaps = sum(b - a - 1 for a, b in zip([0, *seqs], seqs, strict=False) if b > a + 1)
            dups = len(seqs) - len(set(seqs)) + len(stored) - len({i for _, i in stored})
            same = "yes" if sorted(acks) == stored else f"no: {sorted(set(acks) ^ set(stored))}"
            rows.append((session, len(acks), len(stored), same, gaps, dups))
        report = verify(third)
    print_table(
        f"2 machines x 2 writers for {seconds:g} s; read and verified from a third cache",
        ["session", "acknowledged", "stored", "same records", "gaps", "duplicates"],
        rows,
    )
    print(f"\nverify from machine C: {'OK' if report.ok else 'FAILED'}, {report.records} records")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--visibility", type=int, default=1000, metavar="APPENDS")
    parser.add_argument("--writers-check", type=float, metavar="SECONDS")
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))  # so the moto server is stopped
    with moto_server() as (endpoint, _):
        if args.writers_check:
            writers_check(endpoint, args.writers_check)
            return
        appends_table(endpoint, args.seconds, args.repeats)
        visibility_table(endpoint, args.visibility)


if __name__ == "__main__":
    main()
