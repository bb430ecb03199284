"""A server answers every ``status`` and search from what it kept of the files unchanged since
it last read them (each log's tail and session info, where each checkpoint stands in the log,
each output's digest, each session's count of memory files): after each change below, in
the same process, the answer equals the one read afresh (every kept value forgotten, as a
new process starts), for the whole workspace and for one user's scoped view, which sees no
more of it than before."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from airsspec import Memory
from airsspec.memory import sessions as sessions_module
from projections import checkpoints, memory_files, table_files
from projections.files import ParsedOnce

# Every value kept between requests, by module and name (kept at once here: files written by a
# test are younger than the second a server waits before keeping what it read of them).
KEPT = [
    (checkpoints, "_DIGESTS"),
    (checkpoints, "_TAILS"),
    (checkpoints, "_MATCHES"),
    (sessions_module, "_INFOS"),
    (memory_files, "_COUNTS"),
    (table_files, "_DIGESTS"),
]


def _say(text: str) -> dict[str, str]:
    return {"type": "user", "content": text}


@contextmanager
def _afresh() -> Iterator[None]:
    """Every kept value forgotten for the block, as in a new process."""
    with pytest.MonkeyPatch.context() as patch:
        for module, name in KEPT:
            patch.setattr(module, name, ParsedOnce())
        yield


def _rewrite_in_place(path: Path, change: Callable[[bytes], bytes]) -> None:
    """``path``'s bytes changed in place, its size and mtime kept (its ctime is the kernel's)."""
    before = path.stat()
    data = change(path.read_bytes())
    assert len(data) == before.st_size
    with open(path, "r+b") as file:
        file.write(data)
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))


def _flip_last_hash_digit(data: bytes) -> bytes:
    at = data.rindex(b'"hash":"') + len(b'"hash":"')
    return data[:at] + (b"0" if data[at : at + 1] != b"0" else b"1") + data[at + 1 :]


def test_status_and_search_kept_between_requests_equal_them_read_afresh(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AIRSSPEC_COLD_EMBEDDER", "hash")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "")
    for module, name in KEPT:
        monkeypatch.setattr(module, name, ParsedOnce())  # settled at once
    with Memory.open(tmp_path, create=True) as memory:
        ann = memory.scoped(user="ann")
        bo = memory.scoped(user="bo")
        log_dir = memory.log_dir
        state = memory.root / "state"

        def answers() -> list[Any]:
            found = memory.search_now("webhook retries", k=5)
            return [
                memory.overview(),
                ann.overview(),
                found["hits"],
                found["unindexed"],
                ann.search_now("webhook retries", k=5)["hits"],
            ]

        steps: list[Callable[[], object]] = [
            lambda: ann.append_many("anns", [_say(f"ann's webhook retries {i}") for i in range(4)]),
            lambda: bo.append_many("bos", [_say(f"bo's webhook retries {i}") for i in range(3)]),
            lambda: memory.project(),
            lambda: ann.append("anns", _say("one more webhook retry for ann")),
            lambda: memory.project("hot"),
            lambda: _rewrite_in_place(
                state / "hot" / "bos.json", lambda b: b.replace(b"bo", b"BO")
            ),
            lambda: memory.project(),
            lambda: _rewrite_in_place(log_dir / "bos.jsonl", _flip_last_hash_digit),
            lambda: (log_dir / "stray.jsonl").write_bytes(b"not a record\n"),
            lambda: bo.append("bos2", _say("a second session of bo's")),
        ]
        for number, step in enumerate(steps):
            step()
            answers()  # what a read folds first (a search's catch-up of the hot tier)
            kept = answers()  # from what was kept
            with _afresh():
                assert kept == answers(), f"after step {number}"
            # ann's view names her session only, and none of bo's hits
            assert kept[1]["log"]["sessions"] == 1
            assert all(h["session"] == "anns" for h in kept[4])
        degraded = " ".join(memory.overview()["degraded"])
        assert "bos" in degraded and "stray" in degraded  # the changes above were seen
