"""The MCP server end to end: a real MCP client (the official SDK) starts ``airsspec mcp`` over
stdio, lists the tools, calls each one, and gets a tool error (not a crash) for a bad argument."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from airsspec.serve.ops import OPS
from tests.conftest import MCP_INITIALIZE, init_workspace, snapshot

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
        assert hits["hits"][0]["from"].startswith("s1 #")
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
    calls = [
        _call(4, "sessions", {}),
        _call(5, "nope", {}),  # an unknown tool: answered with an error
    ]
    answers = {a["id"]: a for a in _pipe(tmp_path, [*_slow_query(tmp_path, 3), *calls])}
    assert sorted(answers) == [2, 3, 4, 5], answers
    hits = answers[3]["result"]["structuredContent"]["hits"]
    assert hits and "token bucket" in hits[0]["text"]
    assert answers[5]["result"]["isError"] is True


def test_a_line_the_sdk_does_not_take_for_a_request_is_not_awaited_when_the_input_ends(
    tmp_path: Path,
) -> None:
    """Lines with an id and a method that the SDK reads as a notification (an id that is
    null, a float, an object) or refuses (no jsonrpc, params not an object) are never
    answered: the end of the input does not wait for them, and the server exits 0."""
    init_workspace(tmp_path)
    never_answered = [
        {"id": 7, "method": "ping"},
        {"jsonrpc": "2.0", "id": None, "method": "ping"},
        {"jsonrpc": "2.0", "id": 2.5, "method": "ping"},
        {"jsonrpc": "2.0", "id": {"a": 1}, "method": "ping"},
        {"jsonrpc": "2.0", "id": 8, "method": "tools/call", "params": 5},
    ]
    answers = _pipe(tmp_path, [*never_answered, {"jsonrpc": "2.0", "id": 9, "method": "ping"}])
    assert [a["id"] for a in answers] == [9]


def _pipe(workspace: Path, messages: list[dict]) -> list[dict]:
    """``messages`` piped into ``airsspec mcp`` after the handshake, then EOF: the answers,
    once the server has exited 0 (a server still waiting after 60 s is killed, checked gone,
    and fails the test)."""
    import json
    import subprocess

    from tests.conftest import children, wait_for

    lines = [MCP_INITIALIZE, {"jsonrpc": "2.0", "method": "notifications/initialized"}]
    proc = subprocess.Popen(
        [sys.executable, "-m", "airsspec", "mcp"],
        cwd=workspace,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "AIRSSPEC_COLD_EMBEDDER": "hash"},
    )
    data = b"".join(
        _line(m["raw"] if "raw" in m else json.dumps(m)) + b"\n" for m in [*lines, *messages]
    )  # ``{"raw": line}``: a line sent as written (bytes: as they are)
    try:
        out, err = proc.communicate(data, timeout=60)
    except subprocess.TimeoutExpired:
        started = children(proc.pid)
        proc.kill()
        out, err = proc.communicate()
        assert wait_for(lambda: not any(Path(f"/proc/{c}").exists() for c in started), 10)
        pytest.fail(f"the server still waited at the end of its input: {out.decode()[-500:]}")
    assert proc.returncode == 0, err.decode()[-2000:]
    return [json.loads(line) for line in out.splitlines()][1:]  # after initialize's


def _line(text: str | bytes) -> bytes:
    return text if isinstance(text, bytes) else text.encode()


def _call(request_id: object, name: str, arguments: dict) -> dict:
    params = {"name": name, "arguments": arguments}
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}


def _slow_query(workspace: Path, request_id: object) -> list[dict]:
    """An append of 300 messages (id 2), then a ``query_memory`` (``request_id``) that runs a
    while: it catches the cold tier up first."""
    init_workspace(workspace)
    events = [{"type": "user", "content": f"note {i} on the token bucket"} for i in range(300)]
    return [
        _call(2, "append", {"session": "s1", "events": events}),
        _call(request_id, "query_memory", {"query": "token bucket"}),
    ]


def test_a_request_cancelled_by_its_id_written_as_a_string_is_not_awaited(tmp_path: Path) -> None:
    """The SDK takes ``"3"`` and ``3`` for one id: cancelling request 3 as ``"3"`` cancels it
    (it is never answered), and the end of the input does not wait for it."""
    cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "3"}}
    answers = _pipe(tmp_path, [*_slow_query(tmp_path, 3), cancel])
    assert [a["id"] for a in answers] == [2]


def test_two_requests_with_one_id_are_both_answered_though_the_input_ends(tmp_path: Path) -> None:
    """A client reusing an id while its first request runs gets both answers: the first one
    written does not count for the other, still running when the input ends."""
    ping = {"jsonrpc": "2.0", "id": 5, "method": "ping"}
    answers = _pipe(tmp_path, [*_slow_query(tmp_path, 5), ping])
    assert sorted(str(a["id"]) for a in answers) == ["2", "5", "5"], answers
    assert any("hits" in a.get("result", {}).get("structuredContent", {}) for a in answers)


def test_a_write_and_a_read_sharing_an_id_are_both_answered_the_read_after_the_write(
    tmp_path: Path,
) -> None:
    """A client reusing the append's id for a query piped after it (its mistake) gets both
    answers, the query's finding what the append wrote, and the server exits."""
    append, _ = _slow_query(tmp_path, 2)
    answers = _pipe(tmp_path, [append, _call(2, "query_memory", {"query": "token bucket"})])
    assert [a["id"] for a in answers] == [2, 2], answers
    found = [a["result"]["structuredContent"] for a in answers]
    assert [r["seqs"][:2] for r in found if "seqs" in r] == [[1, 2]]
    assert any("token bucket" in r["hits"][0]["text"] for r in found if r.get("hits"))


def test_a_call_read_after_a_write_waits_for_it_and_reads_never_wait() -> None:
    """The SDK starts every call at once; over stdio a call waits (holding no thread) until
    every write read before it is answered (one fresh-clone run's query, piped after an
    append, found nothing: the query ran first)."""
    import anyio

    from airsspec.mcp_server import _Order

    async def scenario() -> None:
        order = _Order()
        order.read(1, "query_memory")  # a read, before the write: never waits
        order.read(2, "append")
        order.read(2, "sessions")  # the same id again (a client's mistake): waits for the append
        order.read(3, "query_memory")
        await order.turn(1, writes=False)
        await order.turn(2, writes=True)  # the append waits for nothing read before it
        entered = anyio.Event()

        async def query() -> None:
            await order.turn(3, writes=False)
            await order.turn(2, writes=False)
            entered.set()

        async with anyio.create_task_group() as tasks:
            tasks.start_soon(query)
            await anyio.wait_all_tasks_blocked()
            assert not entered.is_set()  # the append (2) is not answered yet
            order.answered(2)
        assert entered.is_set()

    anyio.run(scenario)


def test_more_calls_waiting_for_a_write_than_the_sdk_has_threads_are_all_answered(
    tmp_path: Path,
) -> None:
    """Sixty appends then sixty reads piped at once: the calls waiting their turn hold every
    thread of the SDK's pool (about forty), yet each write's answer is still written, so the
    next one runs, and every read sees all sixty appends (the answers once waited for a
    thread, and the server hung)."""
    init_workspace(tmp_path)
    event = {"type": "user", "content": "a note"}
    appends = [_call(i, "append", {"session": "s1", "events": [event]}) for i in range(2, 62)]
    reads = [_call(i, "sessions", {}) for i in range(100, 160)]
    answers = {a["id"]: a["result"]["structuredContent"] for a in _pipe(tmp_path, appends + reads)}
    assert sorted(answers) == [*range(2, 62), *range(100, 160)]
    assert {answers[i]["result"][0]["records"] for i in range(100, 160)} == {60}


def test_a_line_with_a_key_given_twice_is_answered_an_error_and_never_read(tmp_path: Path) -> None:
    """The SDK parses a line keeping one of a key's two values (an append's session given twice
    was stored under the last). Such a request is answered a JSON-RPC error naming it and the
    key, a notification so written is dropped (none is answered), nothing is appended, and the
    requests around them are answered as ever."""
    init_workspace(tmp_path)
    before = snapshot(tmp_path / ".airsspec" / "contexts")
    twice = _call(3, "append", {"session": "s1", "events": [{"type": "user", "content": "x"}]})
    line = json.dumps(twice).replace('"session": "s1"', '"session": "s1", "session": "s2"')
    note = '{"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"a": 1, "a": 2}}'
    answers = _pipe(
        tmp_path, [{"raw": line}, {"raw": note}, {"jsonrpc": "2.0", "id": 4, "method": "ping"}]
    )
    assert [a["id"] for a in answers] == [3, 4]
    assert answers[0]["error"]["code"] == -32600
    assert "'session' is given twice" in answers[0]["error"]["message"]
    assert answers[1]["result"] == {}
    assert snapshot(tmp_path / ".airsspec" / "contexts") == before


def test_a_line_only_the_sdk_parser_reads_is_answered_an_error_and_never_read(
    tmp_path: Path,
) -> None:
    """``NaN``, ``Infinity`` and a number beyond a double are not JSON, but the SDK reads them
    (as floats), and with them a key given twice elsewhere in the line: each such request is
    answered a JSON-RPC error naming it, nothing is appended, and the server exits 0 once the
    requests around them are answered."""
    init_workspace(tmp_path)
    before = snapshot(tmp_path / ".airsspec" / "contexts")
    twice = _call(3, "append", {"session": "s1", "events": [{"type": "user", "content": "x"}]})
    line = json.dumps(twice).replace('"session": "s1"', '"session": "s1", "session": "s2"')
    odd = [
        {"raw": line.replace('"params": {', '"params": {"_meta": {"x": ' + value + "}, ")}
        for value in ("NaN", "Infinity", "-Infinity", "1e400")
    ]
    for number, message in enumerate(odd):
        message["raw"] = message["raw"].replace('"id": 3', f'"id": {10 + number}')
    answers = _pipe(tmp_path, [*odd, {"jsonrpc": "2.0", "id": 4, "method": "ping"}])
    assert sorted(a["id"] for a in answers) == [4, 10, 11, 12, 13], answers
    assert all(a["error"]["code"] == -32600 for a in answers if a["id"] != 4), answers
    assert snapshot(tmp_path / ".airsspec" / "contexts") == before


def test_a_line_that_is_not_utf8_is_answered_an_error_and_never_read(tmp_path: Path) -> None:
    """A byte that is not UTF-8 in a line was read as U+FFFD and an append stored that, not
    what was sent. Such a request is answered a JSON-RPC error naming it, a notification so
    written is dropped, nothing is appended, and the server exits 0 once every request around
    them is answered."""
    init_workspace(tmp_path)
    before = snapshot(tmp_path / ".airsspec" / "contexts")
    append = _call(3, "append", {"session": "s1", "events": [{"type": "user", "content": "cafe"}]})
    line = json.dumps(append).encode().replace(b"cafe", b"caf\xe9")
    note = b'{"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"a": "\xff"}}'
    answers = _pipe(
        tmp_path, [{"raw": line}, {"raw": note}, {"jsonrpc": "2.0", "id": 4, "method": "ping"}]
    )
    assert sorted(a["id"] for a in answers) == [3, 4], answers
    refused = next(a for a in answers if a["id"] == 3)
    assert refused["error"]["code"] == -32600 and "UTF-8" in refused["error"]["message"]
    assert snapshot(tmp_path / ".airsspec" / "contexts") == before
