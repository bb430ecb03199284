"""The watch daemon in a real subprocess: appends from another process become visible; a second
daemon is refused; SIGTERM stops it cleanly; SIGKILL then restart loses and duplicates nothing.
The test waits on the daemon's own log lines, never on sleeps."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from queue import Empty, Queue

import pytest

from airsspec.memory import Memory
from airsspec.workspace import Workspace
from eventlog.verify import verify
from projections.engine import Runner
from tests.conftest import REPO, init_workspace, snapshot, wait_for
from tests.support.cli import run_cli

CONFIG = (
    '[log]\ndurability = "off"\n[memory]\nhot_window_size = 8\nhot_token_budget = 200\n'
    "chunk_size = 2\n"
    '[compactor]\nsummarizer = "extractive"\nsummary_tokens = 16\n'
)


STEPS = [
    f"step {i}: checked the deployment plan for the payments service, nothing blocks the "
    "release of this part yet"
    for i in range(12)
]


_STARTED: list[Watcher] = []


class Watcher:
    """A running ``airsspec watch`` whose stderr lines can be awaited. Every one started is
    killed at the end of its test if still running (``_no_watcher_outlives_its_test``): a test
    that fails while waiting must not leave a daemon behind."""

    def __init__(self, root: Path) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "airsspec", "watch", "--log-level", "debug"],
            cwd=root,
            stderr=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            text=True,
            env={**os.environ, "PYTHONPATH": str(REPO)},
        )
        _STARTED.append(self)
        self.lines: Queue[str] = Queue()
        self.seen: list[str] = []
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.put(line)

    def wait_for(self, pattern: str, timeout: float = 60) -> str:
        """The first line matching ``pattern`` within ``timeout`` seconds in all (a daemon that
        keeps logging other lines must not keep the wait going)."""
        regex = re.compile(pattern)
        deadline = time.monotonic() + timeout
        while True:
            try:
                line = self.lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except Empty:
                raise AssertionError(f"daemon never logged {pattern!r}; saw {self.seen}") from None
            self.seen.append(line)
            if regex.search(line):
                return line


@pytest.fixture(autouse=True)
def _no_watcher_outlives_its_test() -> Iterator[None]:
    yield
    while _STARTED:
        proc = _STARTED.pop().proc
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=30)


@pytest.fixture
def root(tmp_path: Path) -> Path:
    init_workspace(tmp_path)
    (tmp_path / "airsspec.toml").write_text(CONFIG)
    return tmp_path


def cold_rows(ws: Workspace) -> list[dict]:
    table = ws.recall().store.open()
    assert table is not None
    return table.to_arrow().sort_by("unit_id").to_pylist()


def append(root: Path, session: str, texts: list[str], kind: str = "user") -> None:
    """Append as a writer that leaves projecting to the daemon (``airsspec append`` brings the
    hot window up to date itself, which would race the daemon for the lines awaited here)."""
    with Memory.open(config=root / "airsspec.toml") as memory:
        memory.append_many(session, [{"type": kind, "content": t} for t in texts], project=False)


def _hot_seqs(root: Path, session: str) -> list[int]:
    """The seqs in ``session``'s hot window as its state holds them now."""
    with Workspace.open(config=root / "airsspec.toml") as ws:
        hot = ws.load_hot(session)
    return [] if hot is None else [e.seq for e in hot.entries]


def test_appends_become_visible_and_sigterm_stops_cleanly(root: Path) -> None:
    watcher = Watcher(root)
    watcher.wait_for("watching")
    append(root, "live", ["first", "second"])
    # the daemon's step brings the window up, or its policies' freshness does (the hot pass
    # read the log before the append landed): the window is what is awaited
    assert wait_for(lambda: _hot_seqs(root, "live") == [1, 2], 60)
    with Workspace.open(config=root / "airsspec.toml") as ws:
        assert [e.text for e in ws.load_hot("live").entries] == ["first", "second"]
    watcher.wait_for(r"cold: live \+2 indexed")  # beside the main loop, after it
    with Workspace.open(config=root / "airsspec.toml") as ws:
        assert [h.seq_from for h in ws.recall().query_memory("second", k=1).hits] == [2]
    second = run_cli("watch", cwd=root)
    assert second.returncode == 1 and b"already watched by another" in second.stderr
    watcher.proc.send_signal(signal.SIGTERM)
    watcher.wait_for("stopped")
    assert watcher.proc.wait(timeout=30) == 0
    again = Watcher(root)  # the lock was released
    again.wait_for("watching")
    again.proc.send_signal(signal.SIGINT)
    assert again.proc.wait(timeout=30) == 0


def test_compaction_runs_when_a_session_is_due(root: Path) -> None:
    watcher = Watcher(root)
    watcher.wait_for("watching")
    append(root, "busy", STEPS[:8], kind="assistant")  # 8 x 24 tokens: over 0.8 x 200
    watcher.wait_for(r"compacted busy: history-001\.md covers #1-#4")
    watcher.wait_for(r"step done for busy")
    with Workspace.open(config=root / "airsspec.toml") as ws:
        assert (ws.layout.library_dir / "history-001.md").exists()
        assert [e.seq for e in ws.load_hot("busy").entries] == [5, 6, 7, 8]
    watcher.proc.send_signal(signal.SIGTERM)
    assert watcher.proc.wait(timeout=30) == 0


def test_sigkill_then_restart_loses_and_duplicates_nothing(root: Path) -> None:
    watcher = Watcher(root)
    watcher.wait_for("watching")
    append(root, "s", STEPS[:6], kind="assistant")
    assert wait_for(lambda: _hot_seqs(root, "s")[-1:] == [6], 60)
    watcher.proc.send_signal(signal.SIGKILL)
    watcher.proc.wait(timeout=30)
    append(root, "s", STEPS[6:11], kind="assistant")  # while no daemon runs: now due
    append(root, "t", ["new session"])
    restarted = Watcher(root)
    restarted.wait_for("watching")  # the first step (a full catch-up) is done by then
    restarted.proc.send_signal(signal.SIGTERM)  # the cold tier may stop part way: it resumes
    assert restarted.proc.wait(timeout=30) == 0
    with Workspace.open(config=root / "airsspec.toml") as ws:
        Runner(ws.log, ws.projectors(("cold",))).catch_up()
        assert verify(ws.log).ok
        compactions = [loc.record for loc in ws.log.read("s") if loc.record.type == "compaction"]
        assert compactions  # the restarted daemon compacted what arrived while it was down
        assert len({(c.from_seq, c.to_seq) for c in compactions}) == len(compactions)
        live = {name: snapshot(ws.state_dir / name) for name in ("hot", "warm", "tokens")}
        library, rows = snapshot(ws.layout.library_dir), cold_rows(ws)
        Runner(ws.log, ws.projectors()).rebuild()
        assert {name: snapshot(ws.state_dir / name) for name in live} == live
        assert snapshot(ws.layout.library_dir) == library
        assert cold_rows(ws) == rows and len(rows) >= 12


@pytest.mark.slow
def test_sigterm_while_the_cold_tier_embeds_stops_at_once_and_resumes(root: Path) -> None:
    """The real embedder with a backlog of 768 records (three of its steps of 256): SIGTERM
    lands mid-embedding (the cold checkpoint is part way), the daemon exits 0 within seconds
    with no abort, and a later catch-up resumes to the rows a rebuild makes."""
    total = 768
    watcher = Watcher(root)
    watcher.wait_for("watching")
    append(root, "big", [f"note {i} on the release plan of service {i % 7}" for i in range(total)])
    watcher.wait_for(r"step done for big")  # the cold tier is asked to catch up
    checkpoint = root / ".airsspec" / "state" / "cold" / "big.json"
    deadline = time.monotonic() + 60
    while not checkpoint.exists():  # the first step of embedding is committed
        assert watcher.proc.poll() is None and time.monotonic() < deadline
        threading.Event().wait(0.05)
    watcher.proc.send_signal(signal.SIGTERM)
    assert watcher.proc.wait(timeout=60) == 0
    watcher.wait_for("stopped")
    assert not any("terminate called" in line or "Traceback" in line for line in watcher.seen)
    stopped_at = json.loads(checkpoint.read_text())["checkpoint"]["seq"]
    # the signal landed mid-embedding, and the daemon stopped at once: it finished the step in
    # flight (256 records) and began no other, so three steps were never all committed
    assert 0 < stopped_at < total
    with Workspace.open(config=root / "airsspec.toml") as ws:
        Runner(ws.log, ws.projectors(("cold",))).catch_up()
        rows = cold_rows(ws)
        assert sum(r["kind"] == "message" for r in rows) == total  # and the summaries' chunks
        Runner(ws.log, ws.projectors(("cold",))).rebuild()
        assert cold_rows(ws) == rows


def test_a_document_dropped_into_sources_is_registered_and_indexed(root: Path) -> None:
    """No session changes: the daemon notices the file itself, appends its ``source_indexed``
    event and indexes it; removing the file removes its rows."""
    watcher = Watcher(root)
    watcher.wait_for("watching")
    doc = root / ".airsspec" / "sources" / "runbook.md"
    doc.write_text("# Failover\nPromote the replica in eu-west before paging the database lead.\n")
    watcher.wait_for(r"cold: airsspec\.memory \+1 indexed")
    with Workspace.open(config=root / "airsspec.toml") as ws:
        hits = ws.recall().query_memory("who to page for a failover", k=1, kinds=["source"]).hits
        assert [h.source for h in hits] == ["runbook.md"]
        (event,) = [loc.record for loc in ws.log.read("airsspec.memory")]
        assert (event.type, event.path, hits[0].event_ids) == (
            "source_indexed",
            "runbook.md",
            (event.id,),
        )
    doc.unlink()
    watcher.wait_for(r"cold: airsspec\.memory \+1 indexed")
    with Workspace.open(config=root / "airsspec.toml") as ws:
        assert not ws.recall().query_memory("failover", k=1, kinds=["source"]).hits
    watcher.proc.send_signal(signal.SIGTERM)
    assert watcher.proc.wait(timeout=30) == 0


def test_a_window_the_policies_bring_up_is_logged_as_the_hot_steps_is(
    root: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """When the hot pass reads a session's log before its append lands, the session's policies
    bring the window up (their freshness): the progress line is logged all the same."""
    from airsspec.daemon import Daemon

    append(root, "late", ["first", "second"])
    with Memory.open(config=root / "airsspec.toml") as memory:
        project = memory.project

        def no_hot_pass(tiers=None, **kwargs):  # the append "lands after" the hot pass
            return [] if tiers == ("hot",) else project(tiers, **kwargs)

        monkeypatch.setattr(memory, "project", no_hot_pass)
        with caplog.at_level("INFO", logger="airsspec.watch"):
            Daemon(memory).step(["late"])
        assert "hot: late up to seq 2 (+2)" in caplog.messages
        assert _hot_seqs(root, "late") == [1, 2]
