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
from projections import checkpoints, files, learnings, memory_files, table_files
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
    (learnings, "_CHECKED"),
]


def _say(text: str) -> dict[str, str]:
    return {"type": "user", "content": text}


# What is kept on disk across processes, under ``state/`` (and each tier's output digests and
# index verdicts, ``caches/{tier}.digests.json`` and ``.checked.json``): moved aside by
# ``_afresh``.
KEPT_ON_DISK = (
    "caches/sessions.json",
    "caches/cold.files.verified.json",
    "caches/hot.counts.json",
)


@contextmanager
def _afresh(state: Path) -> Iterator[None]:
    """Every kept value forgotten for the block, in this process and on disk: read afresh."""
    kept = [state / name for name in KEPT_ON_DISK] + sorted(
        [*state.glob("caches/*.digests.json"), *state.glob("caches/*.checked.json")]
    )
    aside = [(path, path.with_name(f"{path.name}.aside")) for path in kept]
    for path, moved in aside:
        if path.exists():
            path.rename(moved)
    with pytest.MonkeyPatch.context() as patch:
        for module, name in KEPT:
            patch.setattr(module, name, ParsedOnce())
        patch.setattr(files, "KEPT_SETTLE_NS", 10**18)  # nothing kept on disk meanwhile
        yield
    for path, moved in aside:
        path.unlink(missing_ok=True)
        if moved.exists():
            moved.rename(path)


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
    monkeypatch.setattr(files, "KEPT_SETTLE_NS", 0)  # kept on disk at once too
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
            assert (state / KEPT_ON_DISK[0]).exists(), number  # the sessions' info, kept
            with _afresh(state):
                assert kept == answers(), f"after step {number}"
            # ann's view names her session only, and none of bo's hits
            assert kept[1]["log"]["sessions"] == 1
            assert all(h["session"] == "anns" for h in kept[4])
        assert (state / KEPT_ON_DISK[1]).exists()  # the table's files found equal, kept
        assert (state / KEPT_ON_DISK[2]).exists()  # each hot window's count, kept
        assert (state / "caches" / "hot.digests.json").exists()  # each window's digest, kept
        degraded = " ".join(memory.overview()["degraded"])
        assert "bos" in degraded and "stray" in degraded  # the changes above were seen


def test_a_new_process_answers_status_from_the_digests_kept_on_disk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``status`` compares every session's output of every tier with its digest, and the
    learnings' indexes with the states: a new process takes the digests and the indexes'
    verdict kept on disk (``state/caches/{tier}.digests.json``, ``learnings.checked.json``)
    while the files' size, times and inode are unchanged, reading none of the outputs (35,000
    files at 1M records), and an output rewritten in place, its size and mtime put back, is
    read again (its ctime moved) and found changed."""
    monkeypatch.setenv("AIRSSPEC_COLD_EMBEDDER", "hash")
    monkeypatch.setattr(files, "KEPT_SETTLE_NS", 0)
    with Memory.open(tmp_path, create=True) as memory:
        for name in ("s1", "s2"):
            memory.append_many(name, [_say(f"a note of {name} {i}") for i in range(3)])
        memory.project()
        first = memory.overview()
    assert first["degraded"] == []
    hashed: list[list[str]] = []
    sha256 = checkpoints._sha256
    monkeypatch.setattr(checkpoints, "_sha256", lambda fs: hashed.append(fs) or sha256(fs))

    checked: list[object] = []
    damaged = learnings.LearningsStore._damaged
    monkeypatch.setattr(
        learnings.LearningsStore,
        "_damaged",
        lambda store, *args: checked.append(args) or damaged(store, *args),
    )

    def status() -> dict[str, Any]:
        for name in ("_DIGESTS", "_CHECKED"):  # a new process
            monkeypatch.setattr(
                checkpoints if name == "_DIGESTS" else learnings, name, ParsedOnce()
            )
        with Memory.open(tmp_path) as memory:
            return memory.overview()

    assert status() == first and hashed == [] and checked == []
    window = tmp_path / ".airsspec" / "state" / "hot" / "s2.json"
    _rewrite_in_place(window, lambda b: b.replace(b"note", b"NOTE"))
    found = status()
    assert [Path(f).name for fs in hashed for f in fs] == ["s2.json"]
    assert [d for d in found["degraded"] if "s2" in d] == [
        "hot: s2: its output was deleted or changed after it was written (project repairs it)"
    ]


def test_a_new_process_lists_the_sessions_from_what_was_kept_on_disk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each session's info (records, times, bytes: both ends of its log read) is kept on disk
    with its log's size, times and inode (``state/caches/sessions.json``): a new process lists
    the sessions reading none of their logs (5,000 at 1M records), and a log appended to since
    is read again, alone, its new info given."""
    from eventlog.log import EventLog

    monkeypatch.setenv("AIRSSPEC_COLD_EMBEDDER", "hash")
    monkeypatch.setattr(files, "KEPT_SETTLE_NS", 0)
    with Memory.open(tmp_path, create=True) as memory:
        for name in ("s1", "s2", "s3"):
            memory.append(name, _say(f"a note of {name}"))
        first = memory.sessions.list()
    read: list[str] = []
    info = EventLog.info
    monkeypatch.setattr(EventLog, "info", lambda log, s: read.append(s) or info(log, s))

    def listed() -> list[Any]:
        monkeypatch.setattr(sessions_module, "_INFOS", ParsedOnce())  # a new process
        with Memory.open(tmp_path) as memory:
            return memory.sessions.list()

    assert listed() == first and read == []
    with Memory.open(tmp_path) as memory:
        memory.append("s2", _say("one more"))
    read.clear()
    again = listed()
    assert read == ["s2"]
    assert [s.records for s in again] == [first[0].records, first[1].records + 1, first[2].records]


@pytest.mark.parametrize(
    "change",
    [
        {"records": "lots"},
        {"records": True},
        {"records": -1},
        {"bytes": 1.5},
        {"first_ts": 7},
        {"last_ts": ["x"]},
        {"problem": {"why": "edited"}},
        {"session": "bos"},  # another session's name, in ann's entry
    ],
)
def test_a_session_entry_edited_on_disk_is_read_again_not_given(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, change: dict[str, Any]
) -> None:
    """An entry of ``state/caches/sessions.json`` whose values are not a session's info (a
    count that is not a count, a time that is not a string, another session's name) is parsed
    again from the log, as any entry that cannot be read: a scoped reader never lists a
    session under another's name."""
    import orjson

    monkeypatch.setenv("AIRSSPEC_COLD_EMBEDDER", "hash")
    monkeypatch.setattr(files, "KEPT_SETTLE_NS", 0)
    with Memory.open(tmp_path, create=True) as memory:
        ann, bo = memory.scoped(user="ann"), memory.scoped(user="bo")
        ann.sessions.start("anns")
        bo.sessions.start("bos")
        fresh = ann.sessions.list()
    kept = tmp_path / ".airsspec" / "state" / "caches" / "sessions.json"
    entries = orjson.loads(kept.read_bytes())
    (entry,) = [v for k, v in entries.items() if k.endswith("anns.jsonl")]
    entry[4].update(change)
    kept.write_bytes(orjson.dumps(entries))
    monkeypatch.setattr(sessions_module, "_INFOS", ParsedOnce())  # a new process
    with Memory.open(tmp_path) as memory:
        listed = memory.scoped(user="ann").sessions.list()
    assert repr(listed) == repr(fresh)  # True is not the count 1


@pytest.mark.parametrize("edited", [-3, True, 2.0, "7", None])
def test_a_hot_count_edited_on_disk_is_counted_again_not_given(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, edited: object
) -> None:
    """Each hot window's count is kept on disk (``state/caches/hot.counts.json``); one that is
    not a count (edited by hand) is counted again from the window, never given."""
    import json

    monkeypatch.setenv("AIRSSPEC_COLD_EMBEDDER", "hash")
    monkeypatch.setattr(files, "KEPT_SETTLE_NS", 0)
    with Memory.open(tmp_path, create=True) as memory:
        memory.append_many("s1", [_say(f"note {i}") for i in range(3)])
        memory.project("hot")
        (hot,) = memory.kernel.workspace.projectors(("hot",))
        counted = hot.item_count()
        assert counted == 3
        kept = memory.root / "state" / "caches" / "hot.counts.json"
        entries = json.loads(kept.read_text())
        assert len(entries) == 1
        for entry in entries.values():
            entry[4] = edited
        kept.write_text(json.dumps(entries))
        assert hot.item_count() == counted
