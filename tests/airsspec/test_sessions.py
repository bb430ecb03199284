"""Memory across sessions as a user meets it: a correction made in one session reaches the next
one's context, a rejected learning never reaches a prompt again, anchors outlive compaction,
housekeeping never changes a byte of any log, and the CLI's errors are one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from airsspec import Memory
from eventlog.errors import InvalidEventError, LearningError, ScopeError
from eventlog.schema import MEMORY_SESSION
from tests.conftest import snapshot
from tests.support.cli import run_cli

CORRECTION = "No, never use default exports. Use named exports instead."


@pytest.fixture
def memory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("AIRSSPEC_COLD_EMBEDDER", "hash")
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with Memory.open(tmp_path, create=True) as opened:
        yield opened


def _first_session(memory: Memory) -> None:
    memory.sessions.start("mon", task="add the users endpoint")
    for event in (
        {"type": "user", "content": "Add a users endpoint to the API."},
        {"type": "assistant", "content": "Adding it with a default export in users.ts."},
        {"type": "user", "content": CORRECTION},
        {"type": "action", "tool": "Edit", "params": {"file_path": "src/users.ts"}},
        {"type": "observation", "result": "ok"},
    ):
        memory.append("mon", event)
    memory.sessions.end("mon")


def _learning_of(memory: Memory, text: str):
    (found,) = [a for a in memory.learnings.list().learnings if text in a.text]
    return found


def test_a_correction_reaches_the_next_sessions_context(memory: Memory) -> None:
    _first_session(memory)
    memory.sessions.start("fri", task="write the orders module")
    text = memory.context("fri", budget=1500)
    assert CORRECTION in text
    assert "write the orders module" in text and "Phase: discover" in text
    info = memory.sessions.info("mon")
    assert info["status"] == "done" and info["files_changed"] == ["src/users.ts"]
    # the build was recorded: the learning's access count went up
    assert _learning_of(memory, CORRECTION).access_count == 1


def test_a_rejected_learning_never_reaches_a_prompt_again(memory: Memory) -> None:
    _first_session(memory)
    learning = _learning_of(memory, CORRECTION)
    hits = memory.search("default exports", kinds=["learning"])["hits"]
    assert hits[0]["meta"]["learning_id"] == learning.id
    memory.learnings.feedback(learning.id, "rejected", reason="we use default exports after all")
    for session in ("fri", "mon"):
        for query in (None, "default exports"):
            text = memory.context(session, budget=3000, query=query)
            # neither as a learning nor recalled as one (the user's message itself is history)
            assert learning.id not in text and f"mon #{learning.seq}-" not in text
    hits = memory.search("default exports", kinds=["learning"])["hits"]
    assert learning.id not in [h["meta"]["learning_id"] for h in hits]
    assert _learning_of(memory, CORRECTION).status == "rejected"


def test_anchors_survive_any_number_of_compactions(memory: Memory) -> None:
    first = "I am the API owner; build the billing service with idempotent endpoints."
    memory.sessions.start("long")
    memory.append("long", {"type": "user", "content": first})
    for round_ in range(4):
        memory.append_many(
            "long",
            [{"type": "assistant", "content": f"round {round_} step {i} " * 20} for i in range(30)],
        )
        memory.learnings.extract("long", force=True)
        assert memory.compact("long", force=True) is not None
    text = memory.context("long", budget=2000)
    assert first in text
    assert memory.workspace.load_hot("long").summary["library_no"] == 4


def test_housekeeping_changes_what_is_loaded_and_never_a_byte_of_any_log(
    memory: Memory, tmp_path: Path
) -> None:
    _first_session(memory)
    log_dir = memory.workspace.log_dir
    before = snapshot(log_dir)
    learning = _learning_of(memory, CORRECTION)
    assert memory.learnings.archive("0d") == [learning.id]
    # what the memory block loads (the ended session's summary quotes the user apart)
    assert CORRECTION not in memory.memory_block("next", budget=1500)
    memory.learnings.restore(learning.id)
    assert CORRECTION in memory.memory_block("next", budget=1500)
    memory.learnings.feedback(learning.id, "rejected")
    assert memory.learnings.gc(dry_run=True) == {learning.id: "rejected"}
    assert memory.learnings.gc() == {learning.id: "rejected"}
    after = snapshot(log_dir)
    for name, data in before.items():
        assert after[name][: len(data)] == data  # only ever appended to
    grew = {n for n in after if after[n] != before.get(n)}
    assert grew <= {f"{MEMORY_SESSION}.jsonl", f"{MEMORY_SESSION}.head"}
    assert memory.verify().ok


def test_the_workspace_log_only_takes_airsspecs_own_events(memory: Memory) -> None:
    with pytest.raises(ScopeError, match="own log"):
        memory.append(MEMORY_SESSION, {"type": "user", "content": "hi"})
    with pytest.raises(InvalidEventError, match="written by airsspec itself"):
        memory.append(
            "s1",
            {
                "type": "learning",
                "learning_id": "L1",
                "kind": "preference",
                "text": "x",
                "scope": "project",
                "source": "user",
            },
        )
    with pytest.raises(LearningError, match="unknown phase"):
        memory.sessions.start("s1", phase="ship")
    assert memory.sessions.list() == []


def test_extraction_is_never_repeated_and_a_rerun_finds_nothing_new(memory: Memory) -> None:
    _first_session(memory)  # the end of the session extracted it
    count = len(memory.learnings.list().learnings)
    assert count >= 2
    assert memory.learnings.extract("mon", force=True) == []  # nothing new to read
    memory.append("mon", {"type": "user", "content": "From now on, always write tests first."})
    appended = memory.learnings.extract("mon", force=True)
    assert [r.type for r in appended] == ["learning", "extracted"]
    assert len(memory.learnings.list().learnings) == count + 1


@pytest.mark.slow
def test_cli_learnings_session_and_health(tmp_path: Path) -> None:
    env = {"AIRSSPEC_COLD_EMBEDDER": "hash", "ANTHROPIC_API_KEY": ""}

    def cli(*args: str):
        return run_cli(*args, cwd=tmp_path, env=env)

    assert cli("init").returncode == 0
    assert cli("session", "start", "s1", "--task", "tidy the API").returncode == 0
    stdin = b'{"type": "user", "content": "Always use snake_case for JSON fields."}\n'
    assert run_cli("append", "s1", cwd=tmp_path, stdin=stdin, env=env).returncode == 0
    not_due = cli("extract", "--json")
    assert not_due.returncode == 0 and json.loads(not_due.stdout) == {"sessions": {}}
    ended = cli("session", "end", "s1", "--json")
    assert ended.returncode == 0, ended.stderr
    more = b'{"type": "user", "content": "We decided to keep v1 of the API."}\n'
    assert run_cli("append", "s1", cwd=tmp_path, stdin=more, env=env).returncode == 0
    forced = cli("extract", "s1", "--force", "--json")
    assert forced.returncode == 0 and json.loads(forced.stdout) == {"sessions": {"s1": 1}}
    listed = json.loads(cli("learnings", "--json").stdout)["learnings"]
    (pref,) = [item for item in listed if item["kind"] == "preference"]
    added = json.loads(
        cli("learnings", "add", "Never use snake_case for JSON fields.", "--json").stdout
    )
    assert cli("project").returncode == 0
    health = cli("health", "--json")
    report = json.loads(health.stdout)
    # the user's own (explicit) statement is also the newer one: it wins, nothing is open
    assert report["conflicts"][0]["winner"] == added["learning_id"]
    assert health.returncode == 0 and report["attention"] == []
    log_before = snapshot(tmp_path / ".airsspec" / "contexts")
    bad = cli("learnings", "confirm", "Lnope")
    assert bad.returncode == 2 and bad.stderr.decode().count("\n") == 1
    assert bad.stderr.startswith(b"airsspec: error: no learning 'Lnope'")
    assert cli("archive", "--older-than", "soon").returncode == 2
    assert snapshot(tmp_path / ".airsspec" / "contexts") == log_before
    shown = json.loads(cli("learnings", "show", pref["id"], "--json").stdout)
    assert shown["status"] == "superseded" and shown["conflicts"]


def test_reextract_replays_elsewhere_and_reports_only_what_differs(
    memory: Memory, tmp_path: Path
) -> None:
    _first_session(memory)
    memory.append_many(
        "mon", [{"type": "assistant", "content": f"step {i} " * 30} for i in range(40)]
    )
    assert memory.compact("mon", force=True) is not None
    memory.learnings.extract("mon", force=True)
    found_by_a_model = {
        "type": "learning",
        "learning_id": "Lmodel",
        "kind": "pattern",
        "scope": "project",
        "text": "The user reviews exports before merging.",
        "source": "anthropic",
    }
    memory.workspace.log.append_many("mon", [found_by_a_model], system=True)
    before = snapshot(memory.root)
    diff = memory.learnings.reextract(tmp_path / "replayed", extractor="rules")
    assert snapshot(memory.root) == before  # the live workspace is only read
    assert diff["summaries"] == {"added": [], "removed": [], "changed": []}  # deterministic
    assert diff["learnings"]["added"] == []
    assert diff["learnings"]["removed"] == [
        {"session": "mon", "kind": "pattern", "text": found_by_a_model["text"]}
    ]
    with pytest.raises(Exception, match="not empty"):
        memory.learnings.reextract(tmp_path / "replayed")
