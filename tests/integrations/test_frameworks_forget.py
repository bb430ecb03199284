"""With ``[privacy] encrypt`` on, what the framework adapters write is sealed like every other
record (an agents SDK item, a store value, a checkpoint and its writes: no plaintext in the
log), and ``forget --user`` shreds it: the adapters then read nothing of that user, no file of
the workspace holds the plaintext, and ``verify`` stays green."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, TypedDict

import pytest

pytest.importorskip("agents", reason="the openai-agents extra is not installed")
pytest.importorskip("langgraph", reason="the langgraph extra is not installed")

from langgraph.graph import StateGraph

from airsspec.integrations.langgraph import AirsspecSaver, AirsspecStore
from airsspec.integrations.openai_agents import AirsspecSession
from airsspec.memory import Memory
from tests.conftest import init_encrypted


class State(TypedDict):
    note: str


def _files_holding(root: Path, needle: bytes) -> list[str]:
    return [str(p) for p in root.rglob("*") if p.is_file() and needle in p.read_bytes()]


def test_adapters_writes_are_sealed_and_forget_user_shreds_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AIRSSPEC_COLD_EMBEDDER", "hash")
    init_encrypted(tmp_path)
    config: Any = {"configurable": {"thread_id": "ana-thread"}}
    with Memory.open(tmp_path) as memory:
        ana = memory.scoped(user="ana")
        session = AirsspecSession("ana-chat", ana)
        asyncio.run(session.add_items([{"role": "user", "content": "CANARY-item"}]))
        store = AirsspecStore(ana)
        store.put(("notes",), "k", {"text": "CANARY-store"})
        graph = StateGraph(State).add_node("n", lambda s: {"note": s["note"] + " seen"})
        graph = graph.set_entry_point("n").compile(checkpointer=AirsspecSaver(ana))
        graph.invoke({"note": "CANARY-checkpoint"}, config)
        assert store.search(("notes",), query="CANARY-store")[0].score is not None
        memory.project()  # every tier holds what it can of the user's data
        assert _files_holding(tmp_path / ".airsspec" / "contexts", b"CANARY") == []
        assert _files_holding(tmp_path / ".airsspec", b"CANARY")  # the projections' copies

        memory.forget(user="ana", by="admin")
        assert asyncio.run(session.get_items()) == []
        assert store.get(("notes",), "k") is None and store.search(("notes",)) == []
        assert AirsspecSaver(ana).get_tuple(config) is None
        assert _files_holding(tmp_path, b"CANARY") == []
        assert memory.verify().ok
