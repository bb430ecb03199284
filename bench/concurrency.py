"""Many writers appending at once, through every surface a user has: ``Memory`` from threads,
``AsyncMemory`` from asyncio tasks, ``Memory`` in separate processes, the CLI (one
``airsspec append`` process per event) and the MCP server (one ``airsspec mcp`` per client,
driven by the official MCP SDK client over stdio).

Each row runs N writers at once, all appending to one session or each to its own, then reads
the log back and compares it with what was acknowledged: exceptions (a call that raised or
exited non-zero), duplicates (a content stored more than once), lost (acknowledged but not
stored) and phantom (reported failed yet stored: a retry would duplicate it). Latency is per
call (p50, p99); throughput is acknowledged appends per second of the concurrent phase. The
baseline is the same surface with one writer, same session layout, in the same run; the ratio
is concurrent throughput over it. Each configuration is repeated (``--repeats``) and the median
run is shown; the counts add up over every run.

    python bench/concurrency.py [--writers 8] [--appends 1000] [--cli-appends 25]
                                [--mcp-appends 100] [--repeats 1] [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing as mp
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from airsspec import AsyncMemory, Memory
from bench.common import print_table

REPO = Path(__file__).resolve().parent.parent
ENV = {**os.environ, "AIRSSPEC_COLD_EMBEDDER": "hash", "PYTHONPATH": str(REPO)}


@dataclass
class Outcome:
    """What one writer saw: its acknowledged contents, its failures, each call's latency."""

    acked: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)  # contents whose append was reported failed
    errors: list[str] = field(default_factory=list)
    latencies: list[float] = field(default_factory=list)

    def add(self, other: Outcome) -> None:
        self.acked += other.acked
        self.failed += other.failed
        self.errors += other.errors
        self.latencies += other.latencies


def event(content: str) -> dict:
    return {"type": "user", "content": content}


def session_of(layout: str, writer: int) -> str:
    return "shared" if layout == "one" else f"w{writer}"


def content_of(writer: int, i: int) -> str:
    return f"w{writer}-{i}"


def timed_call(outcome: Outcome, content: str, call) -> None:
    start = time.perf_counter()
    try:
        ok = call()
    except Exception as exc:  # counted: the bench reports every failure, whatever its type
        ok = False
        outcome.errors.append(f"{type(exc).__name__}: {exc}")
    outcome.latencies.append(time.perf_counter() - start)
    (outcome.acked if ok else outcome.failed).append(content)


# ----------------------------------------------------------------------------- the surfaces


def run_threads(root: Path, writers: int, appends: int, layout: str) -> tuple[Outcome, float]:
    outcome, lock = Outcome(), threading.Lock()
    with Memory.open(root) as memory:
        barrier = threading.Barrier(writers + 1)

        def write(w: int) -> None:
            mine = Outcome()
            barrier.wait()
            for i in range(appends):
                c = content_of(w, i)
                timed_call(mine, c, partial(memory.append, session_of(layout, w), event(c)))
            with lock:
                outcome.add(mine)

        threads = [threading.Thread(target=write, args=(w,)) for w in range(writers)]
        for t in threads:
            t.start()
        barrier.wait()
        start = time.perf_counter()
        for t in threads:
            t.join()
        return outcome, time.perf_counter() - start


def run_tasks(root: Path, writers: int, appends: int, layout: str) -> tuple[Outcome, float]:
    async def main() -> tuple[Outcome, float]:
        outcome = Outcome()
        async with await AsyncMemory.open(root) as memory:

            async def write(w: int) -> None:
                for i in range(appends):
                    c = content_of(w, i)
                    start = time.perf_counter()
                    try:
                        await memory.append(session_of(layout, w), event(c))
                        outcome.acked.append(c)
                    except Exception as exc:  # counted, as in timed_call
                        outcome.errors.append(f"{type(exc).__name__}: {exc}")
                        outcome.failed.append(c)
                    outcome.latencies.append(time.perf_counter() - start)

            start = time.perf_counter()
            await asyncio.gather(*(write(w) for w in range(writers)))
            return outcome, time.perf_counter() - start

    return asyncio.run(main())


def _process_writer(root: str, w: int, appends: int, layout: str, barrier, results) -> None:
    mine = Outcome()
    with Memory.open(root) as memory:
        barrier.wait()
        for i in range(appends):
            c = content_of(w, i)
            timed_call(mine, c, partial(memory.append, session_of(layout, w), event(c)))
    results.put(mine)


def run_processes(root: Path, writers: int, appends: int, layout: str) -> tuple[Outcome, float]:
    ctx = mp.get_context("spawn")  # each writer a fresh interpreter, as separate agents are
    barrier, results = ctx.Barrier(writers + 1), ctx.Queue()
    procs = [
        ctx.Process(target=_process_writer, args=(str(root), w, appends, layout, barrier, results))
        for w in range(writers)
    ]
    for p in procs:
        p.start()
    barrier.wait()
    start = time.perf_counter()
    outcome = Outcome()
    for _ in procs:
        outcome.add(results.get())
    elapsed = time.perf_counter() - start
    for p in procs:
        p.join()
    return outcome, elapsed


def run_cli(root: Path, writers: int, appends: int, layout: str) -> tuple[Outcome, float]:
    """Each writer a thread running ``airsspec append`` once per event, one after another."""
    workspace = Memory.open(root).root
    outcome, lock = Outcome(), threading.Lock()

    def write(w: int) -> None:
        mine = Outcome()
        for i in range(appends):
            c = content_of(w, i)
            command = [sys.executable, "-m", "airsspec", "-w", str(workspace), "append"]
            line = f'{{"type": "user", "content": "{c}"}}\n'

            def call(command=command, line=line) -> bool:
                done = subprocess.run(
                    [*command, session_of(layout, w)],
                    input=line,
                    capture_output=True,
                    text=True,
                    env=ENV,
                )
                if done.returncode != 0:
                    raise RuntimeError(done.stderr.strip()[-200:])
                return True

            timed_call(mine, c, call)
        with lock:
            outcome.add(mine)

    threads = [threading.Thread(target=write, args=(w,)) for w in range(writers)]
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return outcome, time.perf_counter() - start


def run_mcp(root: Path, writers: int, appends: int, layout: str) -> tuple[Outcome, float]:
    """Each writer an MCP client with its own ``airsspec mcp`` server over stdio."""
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    workspace = Memory.open(root).root

    async def main() -> tuple[Outcome, float]:
        outcome = Outcome()
        ready = asyncio.Barrier(writers + 1)
        command = ["-m", "airsspec", "-w", str(workspace), "mcp"]
        params = StdioServerParameters(command=sys.executable, args=command, env=ENV)

        async def write(w: int) -> None:
            async with stdio_client(params) as (read, send), ClientSession(read, send) as client:
                await client.initialize()
                # One append first, outside the timing: the server loads what appends need.
                warm_up = {"session": f"warm-up-{w}", "events": [event(f"warm-up-{w}")]}
                await client.call_tool("append", warm_up)
                await ready.wait()
                for i in range(appends):
                    c = content_of(w, i)
                    arguments = {"session": session_of(layout, w), "events": [event(c)]}
                    start = time.perf_counter()
                    try:
                        result = await client.call_tool("append", arguments)
                        if result.is_error:
                            raise RuntimeError(result.content[0].text)
                        outcome.acked.append(c)
                    except Exception as exc:  # counted, as in timed_call
                        outcome.errors.append(f"{type(exc).__name__}: {exc}")
                        outcome.failed.append(c)
                    outcome.latencies.append(time.perf_counter() - start)

        tasks = [asyncio.create_task(write(w)) for w in range(writers)]
        await ready.wait()
        start = time.perf_counter()
        await asyncio.gather(*tasks)
        return outcome, time.perf_counter() - start

    return asyncio.run(main())


SURFACES = {
    "Memory, threads": run_threads,
    "AsyncMemory, tasks": run_tasks,
    "Memory, processes": run_processes,
    "CLI, processes": run_cli,
    "MCP, clients": run_mcp,
}


# ----------------------------------------------------------------------------- checking


@dataclass
class Row:
    exceptions: int = 0
    duplicates: int = 0
    lost: int = 0
    phantom: int = 0
    latencies: list[float] = field(default_factory=list)
    rates: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


def check(root: Path, outcome: Outcome, elapsed: float, row: Row) -> None:
    """Read the log back; add this run's counts to ``row``."""
    with Memory.open(root) as memory:
        assert memory.verify().ok, "the log does not verify"
        stored = Counter(
            r.content for s in memory.workspace.log.sessions() for r in memory.replay(s)
        )
    row.exceptions += len(outcome.errors)
    row.duplicates += sum(n - 1 for n in stored.values() if n > 1)
    row.lost += sum(1 for c in outcome.acked if c not in stored)
    row.phantom += sum(1 for c in outcome.failed if c in stored)
    row.latencies += outcome.latencies
    row.rates.append(len(outcome.acked) / elapsed)
    row.errors += outcome.errors[:3]


def measure(surface: str, writers: int, appends: int, layout: str, repeats: int) -> Row:
    row = Row()
    for _ in range(repeats):
        with tempfile.TemporaryDirectory(prefix="airsspec-concurrency-") as folder:
            root = Path(folder)
            Memory.open(root, create=True).close()
            outcome, elapsed = SURFACES[surface](root, writers, appends, layout)
            check(root, outcome, elapsed, row)
    return row


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--writers", type=int, default=8)
    parser.add_argument("--appends", type=int, default=1000, help="per writer (Memory rows)")
    parser.add_argument("--cli-appends", type=int, default=25, help="per writer (CLI rows)")
    parser.add_argument("--mcp-appends", type=int, default=100, help="per writer (MCP rows)")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--quick", action="store_true", help="a tenth of the appends")
    parser.add_argument("--only", help="surfaces whose name contains this")
    args = parser.parse_args()
    scale = 10 if args.quick else 1
    per_writer = {
        "CLI, processes": max(1, args.cli_appends // scale),
        "MCP, clients": max(1, args.mcp_appends // scale),
    }
    rows = []
    problems = []
    for surface in SURFACES:
        if args.only and args.only.lower() not in surface.lower():
            continue
        appends = per_writer.get(surface, max(1, args.appends // scale))
        for layout in ("one", "many"):
            baseline = measure(surface, 1, appends, layout, args.repeats)
            row = measure(surface, args.writers, appends, layout, args.repeats)
            rate, base = statistics.median(row.rates), statistics.median(baseline.rates)
            ratio = f"{rate / base:.2f}x" if base else "n/a"
            rows.append(
                [
                    surface,
                    "one" if layout == "one" else "one each",
                    f"{args.writers} x {appends:,}",
                    row.exceptions,
                    row.duplicates,
                    row.lost,
                    row.phantom,
                    percentile(row.latencies, 0.5) * 1000,
                    percentile(row.latencies, 0.99) * 1000,
                    rate,
                    base,
                    ratio,
                ]
            )
            problems += [f"{surface} ({layout}): {e}" for e in row.errors + baseline.errors]
            print(f"  done: {surface}, {layout} session(s)", file=sys.stderr, flush=True)
    print_table(
        f"Concurrent appends ({os.cpu_count()} cores): N writers at once; the log read back "
        "and compared with what was acknowledged",
        [
            "surface",
            "session",
            "writers x appends",
            "exceptions",
            "duplicates",
            "lost",
            "phantom",
            "p50 ms",
            "p99 ms",
            "appends/s",
            "1 writer, appends/s",
            "ratio",
        ],
        rows,
    )
    for problem in problems[:10]:
        print(f"  {problem}")


if __name__ == "__main__":
    main()
