"""The daemon under load (a benchmark): writers append as fast as busy agents would while one
``airsspec watch`` keeps the tiers current. Reports per tier the lag behind the log (records not
yet folded) while the writers run and how long each tier takes to catch up after they stop, the
daemon's resident memory over the run, and how it stops when SIGTERM lands while the cold tier is
busy (exit code, seconds, no abort message, and ``verify`` plus incremental-equals-rebuild after).

The daemon runs with the workspace's default settings (the real embedder; the extractive
summarizer, since the API is out of reach). Each writer is a process appending one record at a
time (durability ``batch``) to its own session at ``--rate / --writers`` records per second.

    python bench/daemon_load.py [--writers 8] [--rate 3300] [--seconds 60] [--drain 600]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import print_table, use_extractive_summarizer
from bench.faults import children

REPO = Path(__file__).resolve().parent.parent
ENV = {**os.environ, "PYTHONPATH": str(REPO)}
TIERS = ("hot", "warm", "tokens", "cold")

WRITER = """
import sys, time
from eventlog.log import EventLog
log_dir, session, rate, seconds = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4])
words = "the agent reads the failing test, edits parser.py and runs pytest again".split()
with EventLog(log_dir, durability="batch") as log:
    start, i = time.monotonic(), 0
    while time.monotonic() - start < seconds:
        time.sleep(max(0.0, start + i / rate - time.monotonic()))
        text = " ".join(words[(i + k) % len(words)] for k in range(24)) + f" (turn {i})"
        kind = ("user", "assistant", "thought")[i % 3]
        log.append(session, {"type": kind, "content": text})
        i += 1
print(i)
"""


def rss_mb(pid: int) -> float:
    """Resident memory of ``pid`` and its children, in MB."""
    total = 0
    for p in [pid, *children(pid)]:
        try:
            for line in Path(f"/proc/{p}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
        except (FileNotFoundError, ProcessLookupError):
            pass
    return total / 1024


def lags(root: Path) -> dict[str, int]:
    """Records each tier has not folded yet: the log heads against the checkpoints the tiers
    saved (their manifests; the cold tier's per-session checkpoints, saved as batches commit)."""
    from eventlog.log import EventLog

    state = root / ".airsspec" / "state"
    with EventLog(root / ".airsspec" / "contexts" / "agent") as log:
        heads = {s: log.head(s).seq for s in log.sessions()}
    done: dict[str, dict[str, int]] = {}
    for tier in ("hot", "warm", "tokens"):
        try:
            sessions = json.loads((state / f"{tier}.manifest.json").read_text())["sessions"]
            done[tier] = {s: e["seq"] for s, e in sessions.items()}
        except (OSError, ValueError, KeyError):
            done[tier] = {}
    done["cold"] = {}
    for path in (state / "cold").glob("*.json"):
        with contextlib.suppress(OSError, ValueError, KeyError):
            done["cold"][path.stem] = json.loads(path.read_text())["checkpoint"]["seq"]
    return {t: sum(h - done[t].get(s, 0) for s, h in heads.items()) for t in TIERS}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--writers", type=int, default=8)
    parser.add_argument("--rate", type=float, default=3300.0, help="records/s, all writers")
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--drain", type=float, default=600.0, help="max seconds to catch up")
    parser.add_argument("--embedder", default=None, help="hash: isolate the embedding model")
    args = parser.parse_args()
    if args.embedder:
        ENV["AIRSSPEC_COLD_EMBEDDER"] = args.embedder

    root = Path(tempfile.mkdtemp(prefix="airsspec-bench-load-"))
    subprocess.run([sys.executable, "-m", "airsspec", "init"], cwd=root, env=ENV, check=True)
    config = root / "airsspec.toml"
    use_extractive_summarizer(config)
    log_dir = root / ".airsspec" / "contexts" / "agent"
    stderr = (root / "watch.log").open("w")
    daemon = subprocess.Popen(
        [sys.executable, "-m", "airsspec", "watch"], cwd=root, env=ENV, stderr=stderr
    )
    samples: list[tuple[float, str, dict[str, int], float]] = []

    def sample(phase: str, t0: float) -> dict[str, int]:
        now = lags(root)
        samples.append((time.monotonic() - t0, phase, now, rss_mb(daemon.pid)))
        return now

    try:
        time.sleep(3)  # let the daemon load its models before the writers start
        rss_idle = rss_mb(daemon.pid)
        t0 = time.monotonic()
        writers = [
            subprocess.Popen(
                [
                    sys.executable,
                    "-c",
                    WRITER,
                    str(log_dir),
                    f"w{i}",
                    str(args.rate / args.writers),
                    str(args.seconds),
                ],
                env=ENV,
                stdout=subprocess.PIPE,
                text=True,
            )
            for i in range(args.writers)
        ]
        while any(w.poll() is None for w in writers):
            sample("writing", t0)
            time.sleep(1)
        written = sum(int(w.communicate()[0]) for w in writers)
        write_seconds = time.monotonic() - t0
        caught: dict[str, float | None] = dict.fromkeys(TIERS)
        t1 = time.monotonic()
        while time.monotonic() - t1 < args.drain:
            now = sample("draining", t0)
            for tier in TIERS:
                if caught[tier] is None and now[tier] == 0:
                    caught[tier] = time.monotonic() - t1
            if all(v is not None for v in caught.values()):
                break
            time.sleep(1)
        rss_end = rss_mb(daemon.pid)

        # SIGTERM while the cold tier is busy: a second burst, then stop mid-embedding.
        burst = subprocess.run(
            [sys.executable, "-c", WRITER, str(log_dir), "burst", "5000", "2"],
            env=ENV,
            capture_output=True,
            text=True,
            check=True,
        )
        deadline = time.monotonic() + 60
        while lags(root)["cold"] == 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.5)
        cold_lag_at_stop = lags(root)["cold"]
        t_stop = time.monotonic()
        daemon.send_signal(signal.SIGTERM)
        rc = daemon.wait(120)
        stop_seconds = time.monotonic() - t_stop
        stderr.close()
        log_text = (root / "watch.log").read_text()
        aborted = "terminate called" in log_text or "Traceback" in log_text
        verify = subprocess.run(
            [sys.executable, "-m", "airsspec", "verify"], cwd=root, env=ENV, capture_output=True
        ).returncode
    finally:
        if daemon.poll() is None:
            daemon.kill()
            daemon.wait()

    peak = {t: max(s[2][t] for s in samples if s[1] == "writing") for t in TIERS}
    print_table(
        f"Daemon under load: {args.writers} writers, {written:,} records in "
        f"{write_seconds:.0f} s ({written / write_seconds:,.0f} records/s)",
        ["tier", "peak lag while writing", "lag when writers stopped", "caught up after (s)"],
        [
            [
                t,
                peak[t],
                [s for s in samples if s[1] == "writing"][-1][2][t],
                "not within drain" if caught[t] is None else f"{caught[t]:.1f}",
            ]
            for t in TIERS
        ],
    )
    rss = [s[3] for s in samples]
    print_table(
        "Daemon resident memory (MB, daemon and its children)",
        ["idle before", "median while writing", "peak", "after catching up"],
        [[rss_idle, sorted(rss)[len(rss) // 2], max(rss), rss_end]],
    )
    print_table(
        f"SIGTERM while the cold tier is busy ({burst.stdout.strip()} records burst)",
        ["cold lag at SIGTERM", "exit code", "seconds to exit", "abort or traceback", "verify"],
        [
            [
                cold_lag_at_stop,
                rc,
                f"{stop_seconds:.2f}",
                "yes" if aborted else "no",
                "ok" if verify == 0 else f"exit {verify}",
            ]
        ],
    )
    timeline = [
        [f"{s[0]:.0f}", s[1], *(s[2][t] for t in TIERS), f"{s[3]:.0f}"]
        for i, s in enumerate(samples)
        if i % 10 == 0 or i == len(samples) - 1
    ]
    print_table("Timeline (every 10th sample)", ["s", "phase", *TIERS, "RSS MB"], timeline)
    shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
