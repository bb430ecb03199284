"""A disk-full campaign (a benchmark, not a test): the workspace lives on a small tmpfs, a
filler file leaves a random few bytes to a few hundred KB free, and a command runs: append,
project, compact, import, export. After each:

- the command exited 0, or 1 with ``airsspec: error:`` lines and no traceback;
- ``verify`` passes, and every record a successful append or import acknowledged is there;
- once the filler is gone, ``project`` succeeds and every tier equals a rebuild.

Needs root (to mount the tmpfs); without it the campaign says so and exits 0.

    python bench/diskfull.py [--rounds 100] [--seed 1] [--size-mb 24]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import print_table, use_extractive_summarizer
from bench.faults import transcript

REPO = Path(__file__).resolve().parent.parent
ENV = {**os.environ, "AIRSSPEC_COLD_EMBEDDER": "hash", "PYTHONPATH": str(REPO)}
CLI = [sys.executable, "-m", "airsspec"]


def run(root: Path, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CLI, *args], cwd=root, env=ENV, capture_output=True, text=True, input=stdin
    )


def fill(root: Path, leave: int) -> Path:
    """A file taking all but ``leave`` bytes of the file system's free space."""
    filler = root / "filler"
    free = shutil.disk_usage(root).free
    with filler.open("wb") as f:
        f.truncate(0)
        remaining = max(0, free - leave)
        block = b"\0" * (1 << 20)
        while remaining > 0:
            remaining -= f.write(block[: min(len(block), remaining)])
    return filler


def snapshot(folder: Path) -> dict[str, bytes]:
    if not folder.is_dir():
        return {}
    return {
        p.relative_to(folder).as_posix(): p.read_bytes()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=100)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--size-mb", type=int, default=24)
    args = parser.parse_args()
    mount = Path(tempfile.mkdtemp(prefix="airsspec-bench-diskfull-"))
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={args.size_mb}m", "tmpfs", str(mount)],
        capture_output=True,
        text=True,
    )
    if mounted.returncode != 0:
        print(f"disk-full campaign skipped: cannot mount a tmpfs ({mounted.stderr.strip()})")
        return
    rng = random.Random(args.seed)
    outcomes: Counter[tuple[str, str]] = Counter()
    problems: list[str] = []
    try:
        root = mount / "project"
        root.mkdir()
        assert run(root, "init").returncode == 0
        config = root / "airsspec.toml"
        use_extractive_summarizer(config)
        source = mount / "source"
        source.mkdir()
        acked: dict[str, int] = Counter()
        n = 0
        for round_no in range(args.rounds):
            op = rng.choice(["append", "append", "project", "compact", "import", "export"])
            session = f"s{rng.randrange(3)}"
            if op == "import":
                name = source / f"t{round_no % 4}.jsonl"
                transcript(name, n, rng.randint(5, 40))
                n += 40
            filler = fill(root, rng.choice([0, 512, 4096, 32768, 262144]))
            if op == "append":
                count = rng.randint(1, 50)
                lines = "".join(
                    json.dumps({"type": "user", "content": f"{session} m{n + i} " + "w " * 100})
                    + "\n"
                    for i in range(count)
                )
                n += count
                done = run(root, "append", session, "-", stdin=lines)
                if done.returncode == 0:
                    acked[session] += count
            elif op == "project":
                done = run(root, "project")
            elif op == "compact":
                done = run(root, "compact", "--force", session)
            elif op == "import":
                done = run(root, "import", "claude-code", str(name))
            else:
                done = run(root, "export", "parquet", str(mount / f"out{round_no}"))
            filler.unlink()
            shutil.rmtree(mount / f"out{round_no}", ignore_errors=True)
            outcomes[(op, "ok" if done.returncode == 0 else f"exit {done.returncode}")] += 1
            err = done.stderr
            if done.returncode not in (0, 1, 2) or "Traceback" in err:
                problems.append(f"round {round_no} {op}: exit {done.returncode}: {err[-300:]}")
            elif done.returncode != 0 and not err.startswith("airsspec: error:"):
                problems.append(f"round {round_no} {op}: no one-line error: {err[-300:]}")
            if run(root, "verify").returncode != 0:
                problems.append(f"round {round_no} {op}: verify failed")
        # every acknowledged append is there (imports are checked by verify and re-import)
        for session, count in acked.items():
            listed = run(root, "replay", session, "--json")
            if listed.returncode != 0 or len(listed.stdout.splitlines()) < count:
                problems.append(f"{session}: fewer records than the {count} acknowledged")
        if run(root, "project").returncode != 0:
            problems.append("project failed with free space")
        ws = root / ".airsspec"
        live = {t: snapshot(ws / "state" / t) for t in ("hot", "warm", "tokens")}
        live["library"] = snapshot(ws / "knowledge" / "library")
        for tier in ("hot", "warm", "tokens"):
            if run(root, "rebuild", "--tier", tier).returncode:
                problems.append(f"rebuild of {tier} failed")
        again = {t: snapshot(ws / "state" / t) for t in ("hot", "warm", "tokens")}
        again["library"] = snapshot(ws / "knowledge" / "library")
        mismatches = [t for t in live if live[t] != again[t]]
        problems += [f"tier {t}: incremental differs from a rebuild" for t in mismatches]
    finally:
        subprocess.run(["umount", str(mount)], check=False)
        shutil.rmtree(mount, ignore_errors=True)
    ops = sorted({op for op, _ in outcomes})
    print_table(
        f"Disk-full campaign: {args.rounds} rounds on a {args.size_mb} MB tmpfs (seed {args.seed})",
        ["command", "succeeded", "exit 1 (disk full, one-line error)", "other exits"],
        [
            [
                op,
                outcomes[(op, "ok")],
                outcomes[(op, "exit 1")],
                sum(v for (o, r), v in outcomes.items() if o == op and r not in ("ok", "exit 1")),
            ]
            for op in ops
        ],
    )
    print_table(
        "Checks",
        ["tracebacks / bad errors / verify failures / lost records", "tier mismatches"],
        [[len(problems) - len(mismatches), len(mismatches)]],
    )
    for problem in problems[:20]:
        print("  -", problem)


if __name__ == "__main__":
    main()
