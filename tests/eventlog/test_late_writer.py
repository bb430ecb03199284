"""A writer that joins a busy shared session late still gets its batches stored: three writers
append to one session in tight loops on a bucket (a moto server), a fourth joins after them
and stores its batches without losing more races in a row than the turns' bound
(``eventlog.storage.turns``), and every acknowledged record is stored once.

Run as a script, this module is one writer: it prints, per append, the races it lost and how
long the append took.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from eventlog.storage.turns import LOSSES_BEFORE_QUEUING
from tests.conftest import REPO
from tests.support.s3 import KEYS

pytestmark = [pytest.mark.s3, pytest.mark.slow]

BUSY, LATE = 3, 1
LATE_BATCHES = 20
WRITERS = BUSY + LATE
# lost before queuing, one re-chain after waiting, then at most two per other writer
BOUND = LOSSES_BEFORE_QUEUING + 1 + 2 * (WRITERS - 1)


def start_writer(url: str, endpoint: str, cache: Path, until: str) -> subprocess.Popen:
    """A writer process appending to session ``shared`` until ``until``: a number of batches,
    or a file that exists."""
    args = ["-m", "tests.eventlog.test_late_writer", url, endpoint, str(cache), until]
    return subprocess.Popen([sys.executable, *args], cwd=REPO, stdout=subprocess.PIPE)


def test_a_late_writer_of_a_busy_session_loses_at_most_the_bound_in_a_row(
    tmp_path: Path, moto_endpoint: str, bucket_url: str
) -> None:
    from eventlog.storage.log import ObjectStoreLog
    from eventlog.storage.objects import ObjectStore

    stop = tmp_path / "stop"
    busy = [
        start_writer(bucket_url, moto_endpoint, tmp_path / f"b{i}", str(stop)) for i in range(3)
    ]
    try:
        seed = ObjectStoreLog(
            ObjectStore(bucket_url, tmp_path / "seed", endpoint=moto_endpoint, **KEYS)
        )
        deadline = time.monotonic() + 120
        while seed.head("shared").seq < 30:  # the busy writers are appending: now join
            assert time.monotonic() < deadline and all(p.poll() is None for p in busy)
            time.sleep(0.05)
        late = start_writer(bucket_url, moto_endpoint, tmp_path / "late", str(LATE_BATCHES))
        out = late.communicate(timeout=300)[0]
        assert late.returncode == 0, f"the late writer exited {late.returncode}"
        assert all(p.poll() is None for p in busy), "the busy writers kept writing throughout"
    finally:
        stop.touch()
    results = {"late": [json.loads(line) for line in out.splitlines()]}
    for i, proc in enumerate(busy):
        got = proc.communicate(timeout=120)[0]
        assert proc.returncode == 0, f"busy writer {i} exited {proc.returncode}"
        results[f"busy{i}"] = [json.loads(line) for line in got.splitlines()]
    appends = results["late"]
    assert len(appends) == LATE_BATCHES
    worst = max(a["lost"] for a in appends)
    assert worst <= BOUND, f"the late writer lost {worst} races in a row (bound {BOUND})"
    stored = [r.record.seq for r in seed.read("shared")]
    acked = sorted(a["seq"] for rows in results.values() for a in rows)
    assert acked == stored == list(range(1, len(stored) + 1)), "acknowledged == stored, no gap"
    waits = sorted(a["wait_s"] for a in appends)
    print(
        f"late writer: {len(appends)} batches, worst {worst} lost in a row, "
        f"wait p50 {waits[len(waits) // 2]:.3f} s, max {waits[-1]:.3f} s; busy: "
        + ", ".join(str(len(results[f"busy{i}"])) for i in range(BUSY))
    )


def _write(url: str, endpoint: str, cache: str, until: str) -> None:
    from eventlog.storage.log import ObjectStoreLog
    from eventlog.storage.objects import ObjectStore

    log = ObjectStoreLog(ObjectStore(url, Path(cache), endpoint=endpoint, **KEYS))
    done = 0
    while not (Path(until).exists() if not until.isdigit() else done >= int(until)):
        before, start = log.conflicts, time.perf_counter()
        record = log.append("shared", {"type": "user", "content": f"from {cache}"})
        wait = time.perf_counter() - start
        row = {"seq": record.seq, "lost": log.conflicts - before, "wait_s": wait}
        sys.stdout.write(json.dumps(row) + "\n")
        sys.stdout.flush()
        done += 1


if __name__ == "__main__":
    _write(*sys.argv[1:5])
