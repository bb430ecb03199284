"""The first search after a large import answers at once and leaves the catch-up to a worker.

``airsspec search`` on a workspace whose cold tier is far behind (10k records just imported)
answers from what is indexed plus a full-text scan of the rest, says so, and starts one
detached ``airsspec project --tier cold`` that holds ``state/catch-up.lock`` until it is done;
a search while one runs starts no other. The tests wait for the worker by what it does (the
tier caught up) and by taking its lock (granted when it exits), never by sleeping.
"""

from __future__ import annotations

import fcntl
import json
import subprocess
from pathlib import Path

import pytest

from airsspec.memory import Memory
from tests.conftest import wait_for
from tests.support.cli import run_cli

RECORDS = 10_000


@pytest.fixture
def imported(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A workspace with 10k records in 10 sessions, none in the cold tier yet."""
    monkeypatch.setenv("AIRSSPEC_COLD_EMBEDDER", "hash")
    Memory.init(tmp_path)
    with Memory.open(tmp_path) as memory:
        for s in range(10):
            events = [
                {"type": "user", "content": f"job {s}-{i}: the webhook retries back off"}
                for i in range(RECORDS // 10)
            ]
            memory.append_many(f"import-{s}", events, project=False)
        memory.append_many("kept", [{"type": "user", "content": "zebra crossing near school"}])
    return tmp_path


def search(root: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    env = {"AIRSSPEC_COLD_EMBEDDER": "hash", "AIRSSPEC_NO_SERVER": "1"}
    return run_cli("search", *args, "--json", cwd=root, env=env)


def lock_of(root: Path) -> Path:
    return root / ".airsspec" / "state" / "catch-up.lock"


def unindexed(root: Path) -> int:
    with Memory.open(root) as memory:
        return int(memory.search_now("zebra")["unindexed"])


@pytest.mark.slow
def test_the_first_search_answers_from_a_scan_and_a_worker_completes_the_index(
    imported: Path,
) -> None:
    done = search(imported, "zebra crossing")
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    assert answer["unindexed"] > RECORDS // 2  # it did not wait for the catch-up
    assert answer["hits"][0]["text"] == "zebra crossing near school"  # found by the scan
    # The worker the search started brings the tier up to date (nothing else projects here:
    # were none started, the count would stay where the answer left it). Whether it is still
    # running when the search returns depends on the machine: 10k records take it seconds.
    assert wait_for(lambda: unindexed(imported) == 0, 120), "no worker indexed the rest"
    with lock_of(imported).open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # granted once the worker has exited
    assert workers(imported) == []  # and exited
    again = json.loads(search(imported, "zebra crossing").stdout)
    assert again["unindexed"] == 0 and again["hits"][0]["text"] == "zebra crossing near school"


@pytest.mark.slow
def test_no_second_worker_starts_while_one_holds_the_lock(imported: Path) -> None:
    lock_of(imported).parent.mkdir(parents=True, exist_ok=True)
    with lock_of(imported).open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # stands for a worker at work
        done = search(imported, "webhook retries")
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)["unindexed"] > RECORDS // 2
        assert workers(imported) == []  # 10k records take a worker far longer than this


def workers(root: Path) -> list[int]:
    """The processes running ``airsspec project`` on the workspace under ``root``."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:  # not a process, or gone
            continue
        if b"project" in argv and str(root / ".airsspec").encode() in argv:
            found.append(int(entry.name))
    return found
