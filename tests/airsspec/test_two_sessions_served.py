"""The two-session check through a real server (uvicorn, in process): session 1 is written and
ended through HTTP or MCP by a user's token, and session 2's ``context(..., 800)`` through the
same door holds session 1's rules, requirements and open tasks, with each part's token share,
within the budget; another user's token sees none of it."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from airsspec.memory import Memory
from airsspec.serve.tokens import TokenStore
from tests.airsspec.test_serve import client, mcp_session
from tests.compactor.test_consolidation import CARRIED, SESSION_1

EVENTS = [{"type": who, "content": text} for who, text in SESSION_1]
PARTS = {"memory", "facts", "earlier", "recalled", "history"}


@pytest.fixture
def memory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("AIRSSPEC_COLD_EMBEDDER", "hash")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "")
    with Memory.open(tmp_path, create=True) as memory:
        yield memory


@pytest.fixture
def tokens(memory: Memory) -> dict[str, str]:
    store = TokenStore(memory.root)
    return {"alice": store.create("alice")[1], "bob": store.create("bob")[1]}


def _check(answer: dict, memory: Memory) -> None:
    context = answer["context"]
    for text in CARRIED:
        assert text in context, text
    assert memory.token_counter().count(context) <= 800
    parts = answer["parts"]
    assert set(parts) == PARTS and parts["facts"]["tokens"] > 0
    assert sum(p["tokens"] for p in parts.values()) <= 800
    assert parts["facts"]["share"] == round(parts["facts"]["tokens"] / 800, 3)


def test_http(server, memory: Memory, tokens) -> None:
    url, _ = server
    with client(url, tokens["alice"]) as http:
        written = http.post("/v1/sessions/agent-1/events", json={"events": EVENTS})
        assert written.status_code == 200, written.text
        before = http.post("/v1/sessions/agent-2/context", json={"budget": 800}).json()
        assert not all(text in before["context"] for text in CARRIED)
        ended = http.post("/v1/sessions/agent-1/end", json={})
        assert ended.status_code == 200, ended.text
        answer = http.post("/v1/sessions/agent-2/context", json={"budget": 800})
        assert answer.status_code == 200, answer.text
        facts = http.post("/v1/facts/query", json={"kinds": ["task"]}).json()["facts"]
    _check(answer.json(), memory)
    seqs = written.json()["seqs"]  # a scoped writer's new session starts with its owner
    said = [[{"session": "agent-1", "seq": seqs[i]}] for i in (8, 10)]  # the two TODOs
    assert [f["evidence"] for f in facts] == said
    with client(url, tokens["bob"]) as http:
        theirs = http.post("/v1/sessions/bob-2/context", json={"budget": 800}).json()
        nothing = http.post("/v1/facts/query", json={}).json()
    assert not any(text in theirs["context"] for text in CARRIED)
    assert nothing["facts"] == []


def test_mcp(server, memory: Memory, tokens) -> None:
    url, _ = server

    async def run(token: str, write: bool) -> dict:
        async with mcp_session(url, token) as session:
            if write:
                appended = await session.call_tool(
                    "append", {"session": "agent-1", "events": EVENTS}
                )
                assert not appended.is_error, appended.content
                ended = await session.call_tool("end_session", {"session": "agent-1"})
                assert not ended.is_error, ended.content
            answer = await session.call_tool("context", {"session": "agent-2", "budget": 800})
            assert not answer.is_error, answer.content
            return dict(answer.structured_content)

    _check(asyncio.run(asyncio.wait_for(run(tokens["alice"], True), 120)), memory)
    theirs = asyncio.run(asyncio.wait_for(run(tokens["bob"], False), 120))
    assert not any(text in theirs["context"] for text in CARRIED)
