"""Real processes: concurrent appenders, SIGKILL at random moments, and a real short write."""

from __future__ import annotations

import base64
import contextlib
import itertools
import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from eventlog.log import EventLog
from eventlog.verify import verify

APPENDER = Path(__file__).with_name("appender.py")
REPO = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": str(REPO)}


def _spawn(
    log_dir: Path, session: str, durability: str, writer: str, count: int, big_every: int = 0
) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [
            sys.executable,
            str(APPENDER),
            str(log_dir),
            session,
            durability,
            writer,
            str(count),
            str(big_every),
        ],
        stdout=subprocess.PIPE,
        env=ENV,
    )


def test_concurrent_processes_produce_gap_free_sequences(tmp_path: Path) -> None:
    log_dir = tmp_path / "log"
    writers = [_spawn(log_dir, "shared", "off", f"w{n}", 150) for n in range(3)]
    acks = []
    for proc in writers:
        out, _ = proc.communicate(timeout=120)
        assert proc.returncode == 0
        acks.extend(out.decode().split())
    with EventLog(log_dir) as log:
        records = [loc.record for loc in log.read("shared")]
        assert verify(log).ok
    assert [r.seq for r in records] == list(range(1, len(records) + 1))
    assert len({r.id for r in records}) == len(records)
    # each writer: 150 single appends + 50 batch extras
    per_writer = {
        f"w{n}": [r.meta["i"] for r in records if r.meta["writer"] == f"w{n}"] for n in range(3)
    }
    for seen in per_writer.values():
        assert len(seen) == 200
        assert seen == sorted(seen)  # a writer's own records keep their order
    # batches stay contiguous even with other writers racing
    for a, b in itertools.pairwise(records):
        if a.batch == (1, 2):
            assert b.batch == (2, 2) and b.meta == a.meta


def _kill_after_acks(proc: subprocess.Popen[bytes], rng: random.Random) -> set[str]:
    """Read acknowledgements until a random count, then SIGKILL at a random moment shortly
    after (the delay randomises where the kill lands; nothing waits on it); return every id
    acknowledged."""
    target = rng.randint(1, 30)
    acked: set[str] = set()
    assert proc.stdout is not None
    while len(acked) < target:
        line = proc.stdout.readline()
        if not line:
            break
        acked.add(line.split()[1].decode())
    time.sleep(rng.uniform(0, 0.15))
    proc.send_signal(signal.SIGKILL)
    rest, _ = proc.communicate(timeout=60)
    # lines flushed before the kill landed are acknowledgements too
    acked.update(line.split()[1] for line in rest.decode().splitlines() if len(line.split()) == 2)
    return acked


def _check_after_crashes(log_dir: Path, session: str, acked: set[str]) -> int:
    with EventLog(log_dir) as log:
        stored = {loc.record.id for loc in log.read(session)}
        report = verify(log)
    assert report.ok, report.sessions
    missing = acked - stored
    assert not missing, f"{len(missing)} acknowledged records lost"
    quarantine = log_dir / f"{session}.jsonl.quarantine"
    torn = 0
    if quarantine.exists():
        for entry in quarantine.read_text().splitlines():
            data = base64.b64decode(json.loads(entry)["bytes_b64"])
            torn += 1
            for line in data.splitlines():  # nothing acknowledged was quarantined
                with contextlib.suppress(json.JSONDecodeError):
                    assert json.loads(line)["id"] not in acked
    return torn


@pytest.mark.slow
def test_sigkill_at_random_moments_loses_nothing_acknowledged(tmp_path: Path) -> None:
    log_dir = tmp_path / "log"
    rng = random.Random(20261121)
    acked: set[str] = set()
    for _ in range(24):
        proc = _spawn(log_dir, "crashy", "always", "w", 10_000, big_every=rng.choice([0, 2, 3]))
        acked |= _kill_after_acks(proc, rng)
    torn = _check_after_crashes(log_dir, "crashy", acked)
    print(f"{len(acked)} acknowledged records, {torn} torn tails quarantined")


def test_sigkill_under_batch_durability_loses_nothing_acknowledged(tmp_path: Path) -> None:
    """A process crash (not a power loss) loses nothing acknowledged in batch mode either."""
    log_dir = tmp_path / "log"
    rng = random.Random(7)
    acked: set[str] = set()
    for _ in range(8):
        acked |= _kill_after_acks(_spawn(log_dir, "b", "batch", "w", 10_000, 4), rng)
    _check_after_crashes(log_dir, "b", acked)


SHORT_WRITE = """
import resource, signal, sys
from eventlog.log import EventLog
from eventlog.errors import LogWriteError
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
log_dir, limit = sys.argv[1], int(sys.argv[2])
resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
try:
    EventLog(log_dir).append_many("s", [{"type": "user", "content": "y" * 400}] * 5)
except LogWriteError as exc:
    print("refused", exc)
    sys.exit(3)
"""


def test_short_write_on_full_file_leaves_log_unchanged(tmp_path: Path) -> None:
    """The OS accepts only part of a batch (file size limit): the log is cut back exactly."""
    log_dir = tmp_path / "log"
    with EventLog(log_dir) as log:
        log.append_many("s", [{"type": "user", "content": "z"} for _ in range(3)])
    before = (log_dir / "s.jsonl").read_bytes()
    limit = len(before) + 700  # room for one and a half of the new records
    proc = subprocess.run(
        [sys.executable, "-c", SHORT_WRITE, str(log_dir), str(limit)],
        capture_output=True,
        env=ENV,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 3, proc.stderr.decode()
    assert b"nothing written" in proc.stdout
    assert (log_dir / "s.jsonl").read_bytes() == before
    with EventLog(log_dir) as log:
        assert verify(log).ok
        assert log.append("s", {"type": "user", "content": "after"}).seq == 4
