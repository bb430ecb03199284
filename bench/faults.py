"""A SIGKILL campaign (a benchmark, not a test): kill real processes at random moments across
every writing path, and check after each kill that nothing was lost or left behind.

Paths: append (always and batch durability, single and batched appends, through the process
that acknowledges each record), import of a real-shaped transcript, project (one job and two),
compact, the cold tier, and the daemon. After every kill: no process the killed one started is
still running; ``verify`` passes; every record acknowledged before the kill is in the log. Every
``--check-every`` kills, and at the end: the incrementally projected tiers equal a rebuild.

    python bench/faults.py [--kills 1000] [--seed 1] [--check-every 25]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import print_table, use_extractive_summarizer

REPO = Path(__file__).resolve().parent.parent
APPENDER = REPO / "tests" / "eventlog" / "appender.py"
ENV = {**os.environ, "AIRSSPEC_COLD_EMBEDDER": "hash", "PYTHONPATH": str(REPO)}
CLI = [sys.executable, "-m", "airsspec"]


def children(pid: int) -> list[int]:
    try:
        return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except (FileNotFoundError, ProcessLookupError):
        return []


def gone(pids: list[int], seconds: float = 10.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not any(Path(f"/proc/{p}").exists() for p in pids):
            return True
        time.sleep(0.01)
    return False


def transcript(path: Path, start: int, count: int) -> None:
    with path.open("a") as f:
        for i in range(start, start + count):
            record = {
                "type": "user" if i % 2 else "assistant",
                "uuid": f"u{i}",
                "timestamp": f"2026-11-01T10:{(i // 60) % 60:02d}:{i % 60:02d}.000Z",
                "message": {"role": "user", "content": f"turn {i}: " + "words " * 200},
            }
            f.write(json.dumps(record) + "\n")


class Campaign:
    """One workspace, many kills; counts what was checked and what failed."""

    def __init__(self, root: Path, seed: int) -> None:
        self.root = root
        self.ws = root / ".airsspec"
        self.logs = self.ws / "contexts" / "agent"
        self.rng = random.Random(seed)
        self.acked: dict[str, set[str]] = {}
        self.kills = Counter[str]()
        self.landed = Counter[str]()  # kills that hit a running process
        self.failures: list[str] = []
        self.orphans = 0
        self.transcript_lines = 0
        subprocess.run([*CLI, "init"], cwd=root, env=ENV, check=True, capture_output=True)
        config = root / "airsspec.toml"
        use_extractive_summarizer(config, ("hot_window_size = 30", "hot_window_size = 12"))

    def _start(self, cmd: list[str], stdin: str | None = None) -> subprocess.Popen[str]:
        return subprocess.Popen(
            cmd,
            cwd=self.root,
            env=ENV,
            stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )

    def _kill(self, name: str, proc: subprocess.Popen[str], delay: float) -> str:
        time.sleep(delay)  # picks where the kill lands; nothing waits on it
        self.kills[name] += 1
        started = children(proc.pid)
        if proc.poll() is None:
            self.landed[name] += 1
            proc.send_signal(signal.SIGKILL)
        out, _ = proc.communicate(timeout=120)
        if started and not gone(started):
            self.orphans += 1
            self.failures.append(f"{name}: children {started} outlived the kill")
        return out or ""

    def append(self, durability: str) -> None:
        session = f"log-{durability}"
        writer = f"w{self.kills['append-' + durability]}"
        proc = self._start(
            [
                sys.executable,
                str(APPENDER),
                str(self.logs),
                session,
                durability,
                writer,
                "100000",
                "0",  # small records: the log stays small enough to verify after every kill
            ]
        )
        out = self._kill(f"append-{durability}", proc, self.rng.uniform(0.15, 0.9))
        self.acked.setdefault(session, set()).update(
            line.split()[1] for line in out.splitlines() if len(line.split()) == 2
        )

    def cli(self, name: str, args: list[str], upper: float) -> None:
        self._kill(name, self._start([*CLI, *args]), self.rng.uniform(0.05, upper))

    def import_transcript(self) -> None:
        path = self.root / "t.jsonl"
        transcript(path, self.transcript_lines, 200)
        self.transcript_lines += 200
        self.cli("import", ["import", "claude-code", str(path)], 0.6)

    def daemon(self) -> None:
        self.cli("watch", ["watch", "--log-level", "warning"], 2.5)

    def check(self, deep: bool) -> None:
        verify = subprocess.run(
            [*CLI, "verify", "--json"], cwd=self.root, env=ENV, capture_output=True, text=True
        )
        if verify.returncode != 0:
            self.failures.append(f"verify failed: {verify.stdout[-500:]}")
        for session, ids in self.acked.items():
            path = self.logs / f"{session}.jsonl"
            # a writer killed before its first append left no file (and acknowledged nothing)
            lines = path.read_text().splitlines() if path.exists() else []
            stored = {json.loads(line)["id"] for line in lines}
            if missing := ids - stored:
                self.failures.append(f"{session}: {len(missing)} acknowledged records missing")
        if deep:
            self.compare_with_rebuild()

    def compare_with_rebuild(self) -> None:
        """The tiers brought up to date incrementally equal a rebuild from zero."""
        copy = self.root.parent / "rebuilt"
        shutil.rmtree(copy, ignore_errors=True)
        for verb, where in (("project", self.root), ("rebuild", copy)):
            if verb == "rebuild":
                shutil.copytree(self.root, copy, symlinks=True)
            for tier in ("hot", "warm"):
                subprocess.run(
                    [*CLI, verb, "--tier", tier],
                    cwd=where,
                    env=ENV,
                    capture_output=True,
                    check=False,
                )

        def files(folder: Path) -> dict[str, bytes]:
            return {
                p.name: p.read_bytes()
                for p in folder.glob("*")
                if p.is_file() and not p.name.startswith(".")
            }

        for sub in ("state/hot", "knowledge/library"):
            if files(self.ws / sub) != files(copy / ".airsspec" / sub):
                self.failures.append(f"{sub}: incremental differs from a rebuild")
        shutil.rmtree(copy, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--kills", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--check-every", type=int, default=25)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="airsspec-faults-")) / "project"
    root.mkdir()
    campaign = Campaign(root, args.seed)
    operations = [
        lambda: campaign.append("always"),
        lambda: campaign.append("batch"),
        campaign.import_transcript,
        lambda: campaign.cli("project-1", ["project", "--jobs", "1"], 1.5),
        lambda: campaign.cli("project-2", ["rebuild", "--tier", "hot", "--jobs", "2"], 0.8),
        lambda: campaign.cli("compact", ["compact", "--force"], 1.5),
        lambda: campaign.cli("cold", ["project", "--tier", "cold"], 2.0),
        campaign.daemon,
    ]
    started = time.perf_counter()
    try:
        for n in range(args.kills):
            operations[n % len(operations)]()
            campaign.check(deep=(n + 1) % args.check_every == 0)
        campaign.check(deep=True)
    finally:
        seconds = time.perf_counter() - started
        rows = [
            [name, campaign.kills[name], campaign.landed[name]] for name in sorted(campaign.kills)
        ]
        rows.append(["all", sum(campaign.kills.values()), sum(campaign.landed.values())])
        print_table(
            f"SIGKILL campaign: {args.kills} kills in {seconds:.0f} s (seed {args.seed})",
            ["path", "kills", "landed mid-run"],
            rows,
        )
        acked = sum(len(ids) for ids in campaign.acked.values())
        print_table(
            "After every kill",
            ["acknowledged records", "lost", "orphan processes", "verify / rebuild mismatches"],
            [
                [
                    acked,
                    sum("missing" in f for f in campaign.failures),
                    campaign.orphans,
                    sum("missing" not in f and "outlived" not in f for f in campaign.failures),
                ]
            ],
        )
        for failure in campaign.failures[:20]:
            print("FAILURE:", failure)
        shutil.rmtree(root.parent, ignore_errors=True)


if __name__ == "__main__":
    main()
