"""The compaction algorithm on small fixed inputs, the warm library it produces, and what verify
checks of it."""

from __future__ import annotations

import shutil

import pytest

from airsspec.workspace import Workspace
from eventlog.verify import verify
from projections.engine import Runner
from tests.compactor.conftest import users
from tests.conftest import snapshot


def project(ws: Workspace) -> None:
    Runner(ws.log, ws.projectors()).catch_up()


def test_oldest_half_in_chunks_then_link_and_recent_half(small_ws: Workspace) -> None:
    ws = small_ws
    ws.log.append_many("s", users(6))  # seq 1-6: the window (size 6) is full
    compactor = ws.compactor()
    first = compactor.compact("s", force=True)
    assert first is not None and first.reason == "forced"
    assert (first.from_seq, first.to_seq, first.messages) == (1, 3, 3)
    assert [(c.from_seq, c.to_seq, c.messages) for c in first.chunks] == [(1, 2, 2), (3, 3, 1)]
    assert first.library_no == 1 and first.previous_library_no is None
    assert first.seq == 7  # appended to the session's log
    project(ws)
    window = ws.load_hot("s")
    assert [e.seq for e in window.entries] == [4, 5, 6]
    assert window.summary["link"] == "knowledge/library/history-001.md"
    assert window.summary["to_seq"] == 3 and window.covered_until == 3
    assert compactor.compact("s") is None  # three messages: not due

    ws.log.append_many("s", users(3, start=6))  # seq 8-10: window 4,5,6,8,9,10 is full again
    second = compactor.compact("s", force=True)
    assert (second.from_seq, second.to_seq) == (4, 6)  # right after the previous range
    assert [(c.from_seq, c.to_seq) for c in second.chunks] == [(4, 5), (6, 6)]
    assert second.previous_library_no == 1 and second.library_no == 2
    # the new master folds in the previous one: what was kept from #1-#3 is still there
    assert "#1" in second.summary and "#4" in second.chunks[0].summary
    project(ws)
    assert [e.seq for e in ws.load_hot("s").entries] == [8, 9, 10]
    assert (ws.layout.library_dir / "history-002.md").exists()
    assert verify(ws.log).ok


def test_messages_that_scrolled_out_are_covered_too(small_ws: Workspace) -> None:
    """Messages that scrolled out of the window stay visible until a compaction covers them."""
    ws = small_ws
    ws.log.append_many("s", users(10))  # window holds 5-10; 1-4 scrolled out uncompacted
    ws.log.append("s", {"type": "action", "tool": "bash", "params": {"cmd": "ls"}})  # seq 11
    project(ws)
    window = ws.load_hot("s")
    assert [e.seq for e in window.overflow] == [1, 2, 3, 4, 5]
    assert [e.seq for e in window.entries] == [6, 7, 8, 9, 10, 11]
    record = ws.compactor().compact("s", force=True)
    # 11 messages uncovered -> the oldest half ends at 5; coverage starts at 1
    assert (record.from_seq, record.to_seq, record.messages) == (1, 5, 5)
    assert [(c.from_seq, c.to_seq) for c in record.chunks] == [(1, 2), (3, 4), (5, 5)]


def test_threshold_trigger_and_force(tmp_path) -> None:
    from airsspec.workspace import init_workspace

    init_workspace(tmp_path)
    (tmp_path / "airsspec.toml").write_text(
        "[memory]\nhot_window_size = 30\nhot_token_budget = 100\ncompression_threshold = 0.8\n"
        'chunk_size = 3\n[compactor]\nsummarizer = "extractive"\n'
    )
    with Workspace.open(config=tmp_path / "airsspec.toml") as ws:
        ws.log.append_many("s", users(3))
        compactor = ws.compactor()
        assert compactor.due("s") is None and compactor.compact("s") is None
        forced = compactor.compact("s", force=True)
        # the oldest half (#1), then #2 too: what is kept may hold a quarter of the budget at most
        # here (half the budget less the summary's 2,000 tokens is less than that)
        assert forced.reason == "forced" and (forced.from_seq, forced.to_seq) == (1, 2)
        ws.log.append_many("s", users(8, start=3))  # about 20 tokens each: over 80 tokens
        assert compactor.due("s").startswith("threshold")
        assert compactor.compact("s").reason.startswith("threshold")


@pytest.mark.slow
def test_rebuilding_the_warm_tier_gives_identical_library(small_ws: Workspace) -> None:
    ws = small_ws
    compactor = ws.compactor()
    for round_ in range(4):
        ws.log.append_many("s", users(6, start=round_ * 6))
        ws.log.append_many("t", users(7, start=round_ * 7))
        compactor.compact("s", force=True)
        compactor.compact("t", force=True)
        project(ws)  # incremental, between compactions
    library = snapshot(ws.layout.library_dir)
    hot = snapshot(ws.state_dir / "hot")
    assert sorted(library) == [f"history-{n:03d}.md" for n in range(1, 9)]
    shutil.rmtree(ws.root / "knowledge")
    shutil.rmtree(ws.state_dir)
    Runner(ws.log, ws.projectors()).rebuild()
    assert snapshot(ws.layout.library_dir) == library
    assert snapshot(ws.state_dir / "hot") == hot
    text = (ws.layout.library_dir / "history-001.md").read_text()
    assert text.startswith('---\nlibrary_no: 1\nsession: "s"\n')
    assert "first_hash:" in text and "### Chunk 1: #1-#2" in text


def test_verify_rejects_compaction_events_that_do_not_match_the_log(small_ws: Workspace) -> None:
    ws = small_ws
    ws.log.append_many("s", users(6))
    good = ws.compactor().compact("s", force=True)
    assert verify(ws.log).ok
    event = {
        k: v
        for k, v in good.model_dump().items()
        if k not in ("v", "id", "session", "seq", "ts", "prev", "hash", "batch", "redacted")
    }
    cases = {
        "gap": {
            **event,
            "from_seq": 5,
            "to_seq": 5,
            "chunks": [{**event["chunks"][0], "from_seq": 5, "to_seq": 5}],
        },
        "hash": {
            **event,
            "from_seq": 4,
            "to_seq": 5,
            "first_hash": "0" * 64,
            "chunks": [{**event["chunks"][0], "from_seq": 4, "to_seq": 5}],
        },
    }
    for name, bad in cases.items():
        other = f"bad-{name}"
        shutil.copy(ws.log_dir / "s.jsonl", ws.log_dir / f"{other}.jsonl")
        # re-chain the copy under its own session name, then append the inconsistent event
        lines = (ws.log_dir / "s.jsonl").read_bytes().splitlines()[:6]
        (ws.log_dir / f"{other}.jsonl").unlink()
        for line in lines:
            import json

            data = json.loads(line)
            ws.log.append(other, {"type": "user", "content": data["content"]})
        ws.log.append_many(other, [bad], system=True)  # a faulty writer, not a user
        report = verify(ws.log, [other])
        assert not report.ok, name
        assert "compaction" in report.sessions[0].problem.message
