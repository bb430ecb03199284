"""The /memories tree through the doors: the HTTP API (``/v1/memories/...``) and the MCP tools,
both generated from ``OPS``; tokens decide whose tree a caller sees and whether it writes."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from airsspec.memory import MEMORY_SESSION, Memory
from airsspec.serve.tokens import TokenStore
from tests.airsspec.test_serve import client, mcp_session

PATH = "/memories/preferences.md"


@pytest.fixture
def memory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("AIRSSPEC_COLD_EMBEDDER", "hash")
    with Memory.open(tmp_path, create=True) as memory:
        yield memory


@pytest.fixture
def tokens(memory: Memory) -> dict[str, str]:
    store = TokenStore(memory.root)
    return {
        "alice": store.create("alice")[1],
        "bob": store.create("bob")[1],
        "reader": store.create("alice", read_only=True)[1],
    }


def _head(memory: Memory) -> int:
    log = memory.workspace.log
    return log.head(MEMORY_SESSION).seq if MEMORY_SESSION in log.sessions() else 0


def test_memory_files_over_http_with_versions_and_optimistic_concurrency(
    server, memory: Memory, tokens
) -> None:
    url, _ = server
    with client(url, tokens["alice"]) as http:
        made = http.post(
            "/v1/memories/create", json={"path": PATH, "file_text": "- tabs\n", "actor": "claude"}
        )
        assert made.status_code == 200, made.text
        assert made.json()["result"] == f"File created successfully at: {PATH}"
        sha = made.json()["version"]["sha256"]
        edit = {"path": PATH, "old_str": "tabs", "new_str": "tabs, never spaces"}
        assert http.post("/v1/memories/str_replace", json=edit | {"content_sha256": sha}).is_success
        stale = http.post("/v1/memories/str_replace", json=edit | {"content_sha256": sha})
        assert stale.status_code == 409
        assert "has changed since it was read" in stale.json()["detail"]
        viewed = http.post("/v1/memories/view", json={"path": PATH}).json()
        assert viewed["result"].endswith("     1\t- tabs, never spaces\n     2\t")
        history = http.post("/v1/memories/history", json={"path": PATH}).json()
        assert [(v["op"], v["actor"]) for v in history] == [("created", "claude"), ("edited", None)]
        assert http.post("/v1/memories/view", json={"path": "/etc"}).status_code == 400
        spec = http.get("/v1/openapi.json").json()
        assert spec["paths"]["/v1/memories/str_replace"]["post"]["x-read-only"] is False
    with client(url, tokens["bob"]) as http:
        assert http.post("/v1/memories/view", json={}).json()["files"] == {}
        assert http.post("/v1/memories/history", json={"path": PATH}).status_code == 404
    before = _head(memory)
    with client(url, tokens["reader"]) as http:
        assert http.post("/v1/memories/view", json={"path": PATH}).is_success
        for route, body in [
            ("create", {"path": "/memories/x.md", "file_text": "x"}),
            ("str_replace", edit),
            ("insert", {"path": PATH, "insert_line": 0, "insert_text": "x"}),
            ("delete", {"path": PATH}),
            ("rename", {"old_path": PATH, "new_path": "/memories/y.md"}),
        ]:
            refused = http.post(f"/v1/memories/{route}", json=body)
            assert refused.status_code == 403, (route, refused.text)
    assert _head(memory) == before
    assert memory.verify().ok


def test_memory_files_through_the_mcp_tools(server, memory: Memory, tokens) -> None:
    url, _ = server

    async def run(token: str) -> dict:
        async with mcp_session(url, token) as session:
            tools = {t.name: t for t in (await session.list_tools()).tools}
            created = await session.call_tool(
                "memory_create", {"path": PATH, "file_text": "deploy on Thursday\n"}
            )
            viewed = await session.call_tool("memory_view", {"path": "/memories"})
            return {"tools": tools, "created": created, "viewed": viewed}

    done = asyncio.run(asyncio.wait_for(run(tokens["alice"]), 60))
    tools = done["tools"]
    assert tools["memory_view"].annotations.read_only_hint is True
    assert tools["memory_str_replace"].annotations.read_only_hint is False
    assert not done["created"].is_error
    assert done["viewed"].structured_content["files"] == {
        PATH: memory.scoped(user="alice").files.read(PATH).sha256
    }
    read_only = asyncio.run(asyncio.wait_for(run(tokens["reader"]), 60))
    assert read_only["created"].is_error and "read-only" in read_only["created"].content[0].text
    assert memory.scoped(user="alice").files.history(PATH)[-1].text == "deploy on Thursday\n"
