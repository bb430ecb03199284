"""The MCP door as a person meets it over HTTP: a read-only token is listed only the tools that
read, the server names the package's version, and a wrong argument is refused in one line
naming the field."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

import airsspec
from airsspec.memory import Memory
from airsspec.serve.ops import OPS
from airsspec.serve.tokens import TokenStore

ACCEPT = {"Accept": "application/json, text/event-stream"}


@pytest.fixture
def memory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("AIRSSPEC_COLD_EMBEDDER", "hash")
    with Memory.open(tmp_path / "ws", create=True) as memory:
        yield memory


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
