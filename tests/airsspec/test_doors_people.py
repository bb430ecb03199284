"""The doors as a person meets them over HTTP: a read that records nothing is a GET as well
(through the same gate), ``context`` answers a messages format as ``messages`` like the CLI, a
read-only token is listed only the MCP tools that read, the MCP server names the package's
version, and a wrong argument is refused in one line naming the field."""

from __future__ import annotations

from typing import Any

import httpx

import airsspec
from airsspec.serve.ops import OPS
from airsspec.serve.tokens import TokenStore

ACCEPT = {"Accept": "application/json, text/event-stream"}


def rpc(url: str, token: str, method: str, params: dict[str, Any] | None = None) -> Any:
    request = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params or {}}
    headers = {"Authorization": f"Bearer {token}", **ACCEPT}
    answer = httpx.post(f"{url}/mcp", json=request, headers=headers, timeout=60)
    assert answer.status_code == 200, answer.text
    return answer.json()["result"]


def test_a_read_only_token_is_listed_only_the_reads(server, memory) -> None:
    url, _ = server
    store = TokenStore(memory.root)
    writer, reader = store.create("ana")[1], store.create("ana", read_only=True)[1]
    every = {t["name"] for t in rpc(url, writer, "tools/list")["tools"]}
    reads = {t["name"] for t in rpc(url, reader, "tools/list")["tools"]}
    assert every == {op.name for op in OPS}
    assert reads == {op.name for op in OPS if op.read_only}
    assert "append" in every and "append" not in reads


def test_the_server_reports_the_package_version(server) -> None:
    url, served = server
    hello = {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "test", "version": "1"},
    }
    info = rpc(url, served.local_token, "initialize", hello)["serverInfo"]
    assert info["name"] == "airsspec-memory"
    assert info["version"] == airsspec.__version__ and info["version"]


def test_a_wrong_argument_is_refused_in_one_line_naming_the_field(server) -> None:
    url, served = server
    call = {"name": "context", "arguments": {"session": "s1", "budget": "lots"}}
    result = rpc(url, served.local_token, "tools/call", call)
    assert result["isError"] is True
    text = result["content"][0]["text"]
    assert "\n" not in text and "budget" in text
    assert "pydantic.dev" not in text


EVENTS = [
    {"type": "user", "content": "add a token bucket to the upload API"},
    {"type": "assistant", "content": "done in upload.py"},
]


def test_replay_learnings_and_search_answer_a_get_as_their_post(server, memory) -> None:
    url, _ = server
    store = TokenStore(memory.root)
    ana, bo = store.create("ana")[1], store.create("bo")[1]
    memory.scoped(user="bo").append_many("bos", EVENTS)
    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {ana}"}) as http:
        http.post("/v1/sessions/s1/events", json={"events": EVENTS}).raise_for_status()
        posted = http.post("/v1/sessions/s1/replay", json={"from_seq": 2}).json()
        got = http.get("/v1/sessions/s1/replay", params={"from_seq": 2})
        assert got.status_code == 200 and got.json() == posted
        assert [r["seq"] for r in posted] == [2, 3]  # after the owner's session_started
        learned = http.post("/v1/learnings/query", json={}).json()
        got = http.get("/v1/learnings/query").json()
        assert {**got, "now": None} == {**learned, "now": None}  # "now": when it was asked
        search = {"query": "token bucket", "kinds": ["message"]}
        found = http.get("/v1/search", params=search)
        assert found.status_code == 200, found.text
        assert http.get("/v1/search", params={**search, "kinds": ["summary"]}).json()["hits"] == []
        assert "token bucket" in found.json()["hits"][0]["text"]
        assert http.get("/v1/sessions/s1/replay", params={"limit": "x"}).status_code == 400
        refused = http.get("/v1/sessions/bos/replay")  # bo's session: the gate, as for POST
        assert refused.status_code in (403, 404) and "token bucket" not in refused.text
        assert http.get("/v1/sessions/s1/context").status_code == 405  # it records a read
    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {bo}"}) as http:
        assert http.get("/v1/sessions/bos/replay").status_code == 200


def test_context_answers_messages_like_the_cli(server, memory) -> None:
    url, served = server
    memory.append_many("s1", EVENTS)
    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {served.local_token}"}) as h:
        text = h.post("/v1/sessions/s1/context", json={"budget": 500}).json()
        listed = h.post(
            "/v1/sessions/s1/context", json={"budget": 500, "format": "anthropic"}
        ).json()
    assert isinstance(text["context"], str) and "messages" not in text
    assert listed["messages"] == memory.context("s1", 500, format="anthropic")
    assert listed["context"] == listed["messages"]  # the older key, until the next release
