"""The MCP server end to end: a real MCP client (the official SDK) starts ``airsspec mcp`` over
stdio, lists the tools, calls each one, and gets a tool error (not a crash) for a bad argument."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from airsspec.serve.ops import OPS
from tests.conftest import MCP_INITIALIZE, init_workspace

TOOLS = {op.name for op in OPS}  # the tools are the operations the HTTP API offers too


def _json(result) -> object:
    """A tool's structured result (a list comes wrapped as ``{"result": [...]}``)."""
    assert not result.is_error, result.content
    data = result.structured_content
    assert data is not None, result.content
    return data["result"] if set(data) == {"result"} else data


async def _session_run(workspace: Path) -> None:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "airsspec", "-w", str(workspace), "mcp"],
        env={**os.environ, "AIRSSPEC_COLD_EMBEDDER": "hash"},
    )
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        listed = await session.list_tools()
        assert {t.name for t in listed.tools} == TOOLS
        schema = next(t for t in listed.tools if t.name == "query_memory").input_schema
        assert schema["required"] == ["query"]

        events = [
            {"type": "user", "content": "Please add rate limiting to the public API"},
            {"type": "assistant", "content": "I will use a token bucket per API key"},
        ]
        appended = _json(await session.call_tool("append", {"session": "s1", "events": events}))
        assert appended["seqs"] == [1, 2]
        listed_sessions = _json(await session.call_tool("sessions", {}))
        assert [s["session"] for s in listed_sessions] == ["s1"]
        hits = _json(await session.call_tool("query_memory", {"query": "token bucket", "k": 2}))
        assert hits["hits"][0]["text"] == "I will use a token bucket per API key"
        assert hits["hits"][0]["session"] == "s1"
        context = await session.call_tool("context", {"session": "s1", "budget": 200})
        assert "rate limiting" in context.content[0].text
        replayed = _json(await session.call_tool("replay", {"session": "s1", "from_seq": 2}))
        assert [r["seq"] for r in replayed] == [2]
        health = _json(await session.call_tool("health", {}))
        assert {t["projection"] for t in health["projections"]} >= {"hot", "cold"}

        for name, arguments, expected in [
            ("query_memory", {"query": "x", "k": 0}, "greater than or equal to 1"),
            ("append", {"session": "s1", "events": [{"type": "nope"}]}, "unknown event type"),
            ("replay", {"session": "missing"}, "no session 'missing'"),
            ("context", {"session": "../x", "budget": 10}, "invalid session id"),
        ]:
            bad = await session.call_tool(name, arguments)
            assert bad.is_error, name
            assert expected in bad.content[0].text, bad.content[0].text
        still = _json(await session.call_tool("sessions", {}))  # the server is still up
        assert still[0]["records"] == 2


@pytest.mark.slow
def test_a_real_mcp_client_calls_every_tool_over_stdio(tmp_path: Path) -> None:
    init_workspace(tmp_path)
    asyncio.run(asyncio.wait_for(_session_run(tmp_path / ".airsspec"), timeout=120))


def test_requests_piped_in_are_all_answered_though_the_input_ends_at_once(tmp_path: Path) -> None:
    """A script pipes its requests and closes the input: every request is still answered,
    the slow ones (a query catching the cold tier up) included, then the server exits 0."""
    import json
    import subprocess

    init_workspace(tmp_path)
    events = [{"type": "user", "content": f"note {i} on the token bucket"} for i in range(300)]
    calls = [
        ("append", {"session": "s1", "events": events}),
        ("query_memory", {"query": "token bucket", "k": 3}),
        ("sessions", {}),
        ("nope", {}),  # an unknown tool: answered with an error
    ]
    messages = [
        MCP_INITIALIZE,
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        *(
            {
                "jsonrpc": "2.0",
                "id": i,
                "method": "tools/call",
                "params": {"name": n, "arguments": a},
            }
            for i, (n, a) in enumerate(calls, start=2)
        ),
    ]
    done = subprocess.run(
        [sys.executable, "-m", "airsspec", "mcp"],
        cwd=tmp_path,
        input=b"".join(json.dumps(m).encode() + b"\n" for m in messages),  # then EOF
        capture_output=True,
        env={**os.environ, "AIRSSPEC_COLD_EMBEDDER": "hash"},
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    answers = {a["id"]: a for a in map(json.loads, done.stdout.splitlines())}
    assert sorted(answers) == [1, 2, 3, 4, 5], done.stdout
    hits = answers[3]["result"]["structuredContent"]["hits"]
    assert hits and "token bucket" in hits[0]["text"]
    assert answers[5]["result"]["isError"] is True
