"""Curating learnings from the viewer's forms: a confirm or reject is taken only from this
server's own page, through the signed-in user's scoped memory (the gate decides whose learning
they may change), and is recorded as a ``learning_feedback`` event; a refused one writes
nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from airsspec.memory import MEMORY_SESSION, Memory
from airsspec.serve.tokens import TokenStore
from tests.airsspec.test_serve_hostile import http


@pytest.fixture
def memory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("AIRSSPEC_COLD_EMBEDDER", "hash")
    for name in ("USER", "AGENT", "PROJECT", "TOKEN"):
        monkeypatch.delenv(f"AIRSSPEC_{name}", raising=False)
    with Memory.open(tmp_path / "ws", create=True) as memory:
        yield memory


def feedback(memory: Memory) -> list[tuple[str, str]]:
    """The verdicts recorded (in the workspace's own log, if it has been written)."""
    if MEMORY_SESSION not in memory.sessions.names():
        return []
    return [
        (r.learning_id, r.verdict)
        for r in memory.replay(MEMORY_SESSION)
        if r.type == "learning_feedback"
    ]


def test_a_learning_is_confirmed_only_from_our_own_page(server, memory) -> None:
    url, served = server
    learning = memory.learnings.add("run the linter before committing").learning_id
    with http(url, served.local_token) as client:
        path = f"/learnings/{learning}/confirmed"
        assert client.post(path, data={"reason": "x"}).status_code == 403  # no Origin at all
        foreign = client.post(path, data={}, headers={"Origin": "http://evil.example"})
        assert foreign.status_code == 403
        assert feedback(memory) == []
        taken = client.post(path, data={"reason": "agreed"}, headers={"Origin": url})
        assert taken.status_code == 303 and taken.headers["location"].startswith("/learnings")
        wrong = client.post(f"/learnings/{learning}/maybe", data={}, headers={"Origin": url})
        assert wrong.status_code == 400 and "verdict" in wrong.text
    assert feedback(memory) == [(learning, "confirmed")]


def test_a_user_cannot_curate_anothers_learning_nor_a_read_only_token(server, memory) -> None:
    url, _ = server
    bobs = memory.scoped(user="bob")
    bobs.append_many("bobs", [{"type": "user", "content": "hello"}])
    learning = bobs.learnings.add("bob likes tabs", session="bobs").learning_id
    store = TokenStore(memory.root)
    alice, reader = store.create("alice")[1], store.create("bob", read_only=True)[1]
    for token in (alice, reader):
        with http(url, token) as client:
            answer = client.post(
                f"/learnings/{learning}/rejected", data={}, headers={"Origin": url}
            )
            assert answer.status_code in (400, 403, 404), answer.text
            assert "Not done" in answer.text and str(memory.root) not in answer.text
    assert feedback(memory) == []
