"""Appends from many asyncio tasks, threads and processes at once, through ``Memory`` and
``AsyncMemory``: every call either succeeds or raises an ``AirsspecError``, every acknowledged
record is in the log exactly once, and the hot tier ends current. A projection step that fails
after a durable append does not turn the acknowledged append into a failure."""

from __future__ import annotations

import asyncio
import json
import logging
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from airsspec import AsyncMemory, Memory
from eventlog.log import EventLog
from tests.conftest import REPO

HASH = {"AIRSSPEC_COLD_EMBEDDER": "hash"}

WRITER = """
import json, sys
from airsspec import Memory
root, name, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
errors = []
with Memory.open(root) as memory:
    for i in range(count):
        try:
            memory.append("shared", {"type": "user", "content": f"{name}-{i}"})
        except Exception as exc:
            errors.append(f"{type(exc).__name__}: {exc}")
print(json.dumps(errors))
"""


def stored_contents(memory: Memory, session: str) -> list[str]:
    """The contents of the session's records, in log order (the log verified first)."""
    assert memory.verify([session]).ok
    records = list(memory.replay(session))
    assert [r.seq for r in records] == list(range(1, len(records) + 1))
    return [r.content for r in records]


def hot_seq(memory: Memory, session: str) -> int:
    """The seq the session's hot file was last saved at."""
    saved = json.loads((memory.workspace.layout.tier_dir("hot") / f"{session}.json").read_bytes())
    return saved["checkpoint"]["seq"]


def test_concurrent_async_appends_raise_nothing_lose_nothing_duplicate_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AIRSSPEC_COLD_EMBEDDER", "hash")
    tasks, each = 8, 25

    async def main() -> list[BaseException | None]:
        async with await AsyncMemory.open(tmp_path, create=True) as memory:

            async def writer(t: int) -> None:
                for i in range(each):
                    await memory.append("shared", {"type": "user", "content": f"t{t}-{i}"})
                    await memory.append(f"own-{t}", {"type": "user", "content": f"t{t}-{i}"})

            return await asyncio.gather(*(writer(t) for t in range(tasks)), return_exceptions=True)

    outcomes = asyncio.run(main())
    assert [o for o in outcomes if o is not None] == []
    with Memory.open(tmp_path) as memory:
        expected = {f"t{t}-{i}" for t in range(tasks) for i in range(each)}
        shared = stored_contents(memory, "shared")
        assert Counter(shared).most_common(1)[0][1] == 1  # no duplicate
        assert set(shared) == expected  # nothing lost
        for t in range(tasks):
            assert stored_contents(memory, f"own-{t}") == [f"t{t}-{i}" for i in range(each)]
        # The last append's own projection brought the hot tier to the head (no writer left
        # an older state on top of a newer one).
        assert hot_seq(memory, "shared") == tasks * each
        assert not list(memory.workspace.layout.tier_dir("hot").glob(".tmp-*"))


@pytest.mark.slow
def test_concurrent_process_appends_raise_nothing_lose_nothing_duplicate_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AIRSSPEC_COLD_EMBEDDER", "hash")
    Memory.open(tmp_path, create=True).close()
    processes, each = 4, 60
    env = {"PYTHONPATH": str(REPO), "AIRSSPEC_COLD_EMBEDDER": "hash", "PATH": "/usr/bin:/bin"}
    writers = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, str(tmp_path), f"p{n}", str(each)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for n in range(processes)
    ]
    for writer in writers:
        out, err = writer.communicate(timeout=300)
        assert writer.returncode == 0, err
        assert json.loads(out) == []  # no append raised
    with Memory.open(tmp_path) as memory:
        shared = stored_contents(memory, "shared")
        assert sorted(shared) == sorted(f"p{n}-{i}" for n in range(processes) for i in range(each))
        memory.project(("hot",))
        assert hot_seq(memory, "shared") == processes * each


def test_a_failed_hot_projection_after_a_durable_append_is_a_warning_not_a_failure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("AIRSSPEC_COLD_EMBEDDER", "hash")
    from projections.state_store import JsonStore  # the hot tier's store

    def full_disk(*args: object) -> None:
        raise OSError(28, "No space left on device")

    with Memory.open(tmp_path, create=True) as memory:
        monkeypatch.setattr(JsonStore, "save", full_disk)
        with caplog.at_level(logging.WARNING):
            record = memory.append("s1", {"type": "user", "content": "kept"})
        assert record.seq == 1  # acknowledged: a retry would store it twice
        assert "hot projection" in caplog.text and "No space left" in caplog.text
        monkeypatch.undo()
        assert [r.content for r in memory.replay("s1")] == ["kept"]
        assert "kept" in memory.context("s1", budget=200)  # the tier catches up on next read


CREATOR = """
import json, sys
from eventlog.errors import SessionExistsError
from eventlog.log import EventLog
log_dir, name = sys.argv[1], sys.argv[2]
sys.stdin.readline()  # every creator starts at once
with EventLog(log_dir) as log:
    try:
        log.append_many("race", [{"type": "user", "content": name}], new=True)
        print("won")
    except SessionExistsError:
        print("lost")
"""


def test_of_processes_creating_one_session_at_once_exactly_one_writes(tmp_path: Path) -> None:
    env = {"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"}
    creators = [
        subprocess.Popen(
            [sys.executable, "-c", CREATOR, str(tmp_path), f"p{n}"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for n in range(4)
    ]
    outcomes = [c.communicate("go\n", timeout=120) for c in creators]
    assert [c.returncode for c in creators] == [0] * 4, [err for _, err in outcomes]
    assert sorted(out.strip() for out, _ in outcomes) == ["lost", "lost", "lost", "won"]
    with EventLog(tmp_path) as log:
        (record,) = [located.record for located in log.read("race")]
    winner = next(f"p{n}" for n, (out, _) in enumerate(outcomes) if out.strip() == "won")
    assert record.content == winner
