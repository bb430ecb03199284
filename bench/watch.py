"""Append-to-visible latency with the daemon running: the time from ``append`` returning to the
record being in ``load_hot``, over many appends (one at a time, as an agent works).

The daemon runs as a real ``airsspec watch`` subprocess on a fresh workspace with default settings
(so compactions run inside the measured flow whenever a window fills); this process appends with
durability "always" and polls ``load_hot`` (a stat and, on change, one small file read).

    python bench/watch.py [--appends N]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from airsspec.workspace import Workspace, init_workspace
from bench.common import print_table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--appends", type=int, default=1000)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="airsspec-bench-watch-"))
    init_workspace(root)
    (root / "airsspec.toml").write_text('[compactor]\nsummarizer = "extractive"\n')
    daemon = subprocess.Popen(
        [sys.executable, "-m", "airsspec", "watch"], cwd=root, stderr=subprocess.PIPE, text=True
    )
    try:
        assert daemon.stderr is not None
        while "watching" not in (line := daemon.stderr.readline()):
            if not line:
                raise SystemExit(f"the daemon exited: {daemon.wait()}")
        # keep reading its log so a full pipe never blocks the daemon
        threading.Thread(target=lambda: daemon.stderr.read(), daemon=True).start()
        latencies = []
        with Workspace.open(config=root / "airsspec.toml") as ws:
            for i in range(args.appends):
                record = ws.log.append(f"agent-{i % 4}", {"type": "user", "content": f"m{i}"})
                start = time.perf_counter()
                deadline = start + 10
                while True:
                    window = ws.load_hot(record.session)
                    if window is not None and window.checkpoint.seq >= record.seq:
                        break
                    if time.perf_counter() > deadline:
                        raise SystemExit(f"append {i} not visible after 10 s")
                latencies.append((time.perf_counter() - start) * 1000)
        latencies.sort()
        p50 = statistics.median(latencies)
        p95 = latencies[int(len(latencies) * 0.95)]
        print_table(
            f"Append-to-visible latency with 'airsspec watch', {args.appends} appends (ms)",
            ["p50 ms", "p95 ms", "max ms", "target p95 ms"],
            [[f"{p50:.1f}", f"{p95:.1f}", f"{latencies[-1]:.1f}", 200]],
        )
    finally:
        daemon.terminate()
        daemon.wait(timeout=30)
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
