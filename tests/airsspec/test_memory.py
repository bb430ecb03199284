"""The Memory facade as a library user meets it: open (or refuse to invent) a workspace, append
and see it at once, search with keyword filters validated like the CLI, context within budget,
and the same through AsyncMemory."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from pathlib import Path

import pytest

from airsspec import AsyncMemory, Memory
from eventlog.errors import AirsspecError, InvalidQueryError, NoSuchSessionError, NotAWorkspaceError

HASH = {"AIRSSPEC_COLD_EMBEDDER": "hash"}


@pytest.fixture
def memory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("AIRSSPEC_COLD_EMBEDDER", "hash")
    with Memory.open(tmp_path, create=True) as opened:
        yield opened


def test_open_refuses_a_folder_that_is_not_a_workspace_and_creates_nothing(tmp_path: Path) -> None:
    with pytest.raises(NotAWorkspaceError, match="not an airsspec workspace"):
        Memory.open(tmp_path / "typo")
    assert not (tmp_path / "typo").exists()
    assert issubclass(NotAWorkspaceError, AirsspecError)


def test_an_append_is_in_the_context_at_once(memory: Memory) -> None:
    memory.append("s1", {"type": "user", "content": "Add rate limiting to the upload API"})
    record = memory.append("s1", {"type": "assistant", "content": "Token bucket it is"})
    assert record.seq == 2
    text = memory.context("s1", budget=100)
    assert "rate limiting" in text and "Token bucket" in text
    messages = memory.context("s1", budget=100, format="anthropic")
    assert messages == [
        {
            "role": "user",
            "content": [{"type": "text", "text": "Add rate limiting to the upload API"}],
        },
        {"role": "assistant", "content": [{"type": "text", "text": "Token bucket it is"}]},
    ]


def test_context_recalls_what_is_not_visible_within_budget(memory: Memory) -> None:
    memory.append(
        "old", {"type": "user", "content": "The staging database password rotates on Mondays"}
    )
    memory.append_many(
        "s1", [{"type": "user", "content": f"step {i} of the migration"} for i in range(40)]
    )
    for budget in (40, 80, 200):
        text = memory.context("s1", budget=budget, query="when does the database password rotate")
        assert memory.workspace.token_counter().count(text) <= budget
    assert "rotates on Mondays" in text and "recalled from old" in text


def test_search_filters_are_keyword_only_and_validated_like_the_cli(memory: Memory) -> None:
    memory.append(
        "s1",
        {"type": "user", "content": "the quokka lives on Rottnest", "ts": "2026-01-01T10:00:00Z"},
    )
    memory.append("s2", {"type": "user", "content": "a quokka photo", "ts": "2026-03-01T10:00:00Z"})
    since = datetime(2026, 2, 1, tzinfo=UTC)
    hits = memory.search("quokka", k=5, since=since)["hits"]
    assert [h["session"] for h in hits] == ["s2"]
    assert [h["session"] for h in memory.search("quokka", session="s1")["hits"]] == ["s1"]
    with pytest.raises(TypeError):
        memory.search("quokka", 5, "s1")  # type: ignore[misc]
    for bad in ({"k": 0}, {"since": "yesterday"}, {"since": datetime(2026, 1, 1)}):
        with pytest.raises(InvalidQueryError):
            memory.search("quokka", **bad)
    with pytest.raises(InvalidQueryError):
        memory.search("")
    with pytest.raises(NoSuchSessionError):
        memory.search("quokka", session="s3")


def test_async_memory_does_the_same(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIRSSPEC_COLD_EMBEDDER", "hash")

    async def run() -> tuple[int, str]:
        async with await AsyncMemory.open(tmp_path, create=True) as memory:
            await memory.append("s1", {"type": "user", "content": "hello from asyncio"})
            return len(await memory.sessions.list()), await memory.context("s1", 50)

    count, text = asyncio.run(run())
    assert count == 1 and "hello from asyncio" in text
