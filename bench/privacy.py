"""What ``[privacy] encrypt`` and ``forget`` cost.

1. Append throughput with content encryption on (``encrypt = "user"``: AES-GCM per record, a key
   per user) next to off, same run, same records (``append_many`` batches of 100 user messages of
   about 200 bytes, ``durability = "off"`` so the encoding and sealing are what is measured), and
   the read side (``EventLog.read`` of the same log, records opened). Medians of ``--repeats``.
2. Append throughput with encryption off next to the log as it was before encryption existed
   (``--baseline``, a commit: checked out into a temporary git worktree with its C extension
   built there), the same append loop run alternately in subprocesses, one importing each tree
   (timed inside, around the loop only, by the wall clock and by the process's CPU time;
   every other round in reverse order). Medians of ``--repeats`` (at least 5).
3. ``forget --user`` of a user with ``--target`` records (10 sessions) among ``--others`` other
   users of ``--per-other`` records each, every tier projected (cold with the hash embedder:
   the model's cost would only add to projecting, not to forgetting's own work), next to a
   rebuild of every tier of the same workspace (what forgetting would cost if it rebuilt
   everything instead of refolding the subject's sessions; ``--no-rebuild`` skips it); then
   every file under the workspace is read to prove the target's marker is in none (the bytes
   scanned, and how long that took).

    python bench/privacy.py [--records 20000] [--repeats 5] [--baseline 3038a64 ...]
        [--target 10000] [--others 9] [--per-other 1000] [--no-rebuild] [--only forget]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import print_table

MARK = "FORGETMEZQX"  # in every record of the forgotten user, and nowhere else
TEXT = "The invoices module rounds totals per line, not per invoice; keep that. " * 3


def _log(root: Path, encrypt: bool):
    from eventlog.crypto import FileKeyStore, Sealer
    from eventlog.log import EventLog
    from eventlog.owners import SessionOwners

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


WORKER = """
import sys, time
from pathlib import Path
from eventlog.log import EventLog
folder, records = Path(sys.argv[1]), int(sys.argv[2])
text = sys.argv[3]
batch = [{"type": "user", "content": f"{text} #{i}"} for i in range(100)]
with EventLog(folder / "warm", durability="off") as log:  # validators and imports warmed up
    log.append_many("s", batch)
with EventLog(folder / "log", durability="off") as log:
    begun, cpu = time.perf_counter(), time.process_time()
    for _ in range(records // 100):
        log.append_many("s", batch)
    print(records / (time.perf_counter() - begun), records / (time.process_time() - cpu))
"""


def _tree(rev: str) -> Path:
    """A git worktree of ``rev`` in a temporary folder, its C extension built there."""
    import sysconfig

    repo = Path(__file__).resolve().parent.parent
    sha = subprocess.run(
        ["git", "-C", str(repo), "rev-parse", "--short", rev],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    tree = Path(tempfile.gettempdir()) / f"airsspec-baseline-{sha}"
    if not tree.exists():
        subprocess.run(
            ["git", "-C", str(repo), "worktree", "add", "--detach", str(tree), sha],
            check=True,
            capture_output=True,
        )
    suffix = sysconfig.get_config_var("EXT_SUFFIX")
    built = tree / "eventlog" / f"_lines{suffix}"
    if not built.exists():
        include = sysconfig.get_paths()["include"]
        source = tree / "eventlog" / "_lines.c"
        build = ["gcc", "-O2", "-shared", "-fPIC", f"-I{include}", str(source), "-lcrypto"]
        subprocess.run([*build, "-o", str(built)], check=True)
    return tree


def against_baselines(records: int, repeats: int, revs: list[str]) -> None:
    """This tree with encryption off against each of ``revs``: the same loop, each tree in
    turn within every round, so all see the same load; every other round in reverse order, so
    no tree always runs first (or right after another's run)."""
    repo = Path(__file__).resolve().parent.parent
    trees = {"this tree": repo, **{rev: _tree(rev) for rev in revs}}
    rates: dict[str, list[list[float]]] = {name: [] for name in trees}  # [wall, cpu] per run
    try:
        with tempfile.TemporaryDirectory() as folder:
            for run in range(repeats):
                order = list(trees.items())
                for name, tree in order if run % 2 == 0 else order[::-1]:
                    where = f"{folder}/{run}-{tree.name}"
                    done = subprocess.run(
                        [sys.executable, "-c", WORKER, where, str(records), TEXT],
                        env={**os.environ, "PYTHONPATH": str(tree)},
                        capture_output=True,
                        text=True,
                        check=True,
                        cwd=tree,
                    )
                    rates[name].append([float(rate) for rate in done.stdout.split()])
    finally:
        for rev in revs:  # the worktrees were for this run only
            remove = ["git", "-C", str(repo), "worktree", "remove", "--force", str(trees[rev])]
            subprocess.run(remove, check=True)
    subject = {
        rev: subprocess.run(
            ["git", "-C", str(repo), "log", "-1", "--format=%s", rev],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.split(":")[0]
        for rev in revs
    }
    clocks = ("wall clock", "CPU time")
    rows = []
    for rev in revs:
        for clock, label in enumerate(clocks):
            ours = statistics.median(r[clock] for r in rates["this tree"])
            base = statistics.median(r[clock] for r in rates[rev])
            rows.append((f"{rev} ({subject[rev]}), {label}", ours, base, f"{ours / base:.3f}x"))
    print_table(
        f"append_many x100 with encryption off, against earlier commits of the log: "
        f"{records:,} records, records/s (median of {repeats}, alternate runs; by the wall "
        "clock, and per second of the appending process's CPU time, which other work on the "
        "machine slows far less)",
        ("baseline commit (its area)", "this tree, encrypt = off", "baseline", "ratio"),
        rows,
    )
    for clock, label in enumerate(clocks):
        spread = {
            n: f"{min(r[clock] for r in runs):,.0f}-{max(r[clock] for r in runs):,.0f}"
            for n, runs in rates.items()
        }
        print(f"\nrange of the runs, {label}: {spread}")


def _scan(root: Path, needles: tuple[bytes, ...]) -> tuple[int, int, float, list[str]]:
    """Read every file under ``root``: files and bytes read, seconds, files holding a needle."""
    begun = time.perf_counter()
    files = size = 0
    holding = []
    for path in root.rglob("*"):
        if path.is_file() and not path.is_symlink():
            data = path.read_bytes()
            files, size = files + 1, size + len(data)
            if any(needle in data for needle in needles):
                holding.append(str(path.relative_to(root)))
    return files, size, time.perf_counter() - begun, holding


def forget(target: int, others: int, per_other: int, rebuild: bool = True) -> None:
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
                        {
                            "type": "user",
                            "content": f"{user} {MARK if user == 'target' else ''} {TEXT} {i}",
                        }
                        for i in range(count // sessions)
                    ]
                    for start in range(0, len(events), 500):
                        view.append_many(f"{user}-{s}", events[start : start + 500], project=False)
            total = target + others * per_other
            begun = time.perf_counter()
            memory.project()
            projected = time.perf_counter() - begun
            before = _scan(root, (MARK.encode(), MARK.lower().encode()))
            done = memory.forget(user="target", by="bench")
            after = _scan(root, (MARK.encode(), MARK.lower().encode()))
            rebuilt = float("nan")
            if rebuild:
                begun = time.perf_counter()
                memory.rebuild()
                rebuilt = time.perf_counter() - begun
    if after[3]:
        raise SystemExit(f"the target's marker is still in: {after[3]}")
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
        f"{done.cache_entries_removed:,} cached embeddings; the marker was in {len(before[3])} "
        f"file(s) before, in none after: {after[0]:,} files, {after[1] / 1e6:,.1f} MB read in "
        f"{after[2]:.2f}s to prove it"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=20_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument(
        "--baseline",
        action="append",
        help="a commit before encryption existed (repeatable; default 3038a64)",
    )
    parser.add_argument("--target", type=int, default=10_000)
    parser.add_argument("--others", type=int, default=9)
    parser.add_argument("--per-other", type=int, default=1_000)
    parser.add_argument("--no-rebuild", action="store_true", help="skip the rebuild baseline")
    parser.add_argument("--only", choices=("appends", "forget"), help="one part only")
    args = parser.parse_args()
    if args.only != "forget":
        appends(args.records, args.repeats)
        against_baselines(args.records, args.repeats, args.baseline or ["3038a64"])
    if args.only != "appends":
        forget(args.target, args.others, args.per_other, rebuild=not args.no_rebuild)


if __name__ == "__main__":
    main()
