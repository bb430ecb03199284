"""``airsspec serve`` end to end: a real uvicorn server on 127.0.0.1 (port 0) in a thread of the
test, called with an HTTP client: the API answers as the Python API does, errors are problem
documents with the CLI's messages, tokens decide who reads and writes what, MCP works over
streamable HTTP through the official SDK's client, and the command itself keeps its discovery
file only while it runs."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx2 as httpx
import pytest

from airsspec.memory import MEMORY_SESSION, Memory
from airsspec.serve.app import check_exposure, serving
from airsspec.serve.core import Served
from airsspec.serve.ops import OPS
from airsspec.serve.tokens import TokenStore
from eventlog.errors import ServeError
from projections.memory_tool import MAX_K, QueryMemoryInput
from tests.conftest import REPO, init_workspace, snapshot, wait_for
from tests.support.cli import run_cli
from tests.support.tls import TLS

EVENTS = [
    {"type": "user", "content": "Please add rate limiting to the public API"},
    {"type": "assistant", "content": "I will use a token bucket per API key"},
]


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


def client(url: str, token: str | None) -> httpx.Client:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return httpx.Client(base_url=url, headers=headers, timeout=60, verify=TLS)


def test_http_answers_are_the_python_apis(server, memory: Memory, tokens) -> None:
    url, _ = server
    with client(url, tokens["alice"]) as http:
        appended = http.post("/v1/sessions/s1/events", json={"events": EVENTS})
        assert appended.status_code == 200, appended.text
        seqs = appended.json()["seqs"]  # a scoped writer's new session starts with its owner
        assert len(seqs) == 2 and seqs[1] == seqs[0] + 1
        replayed = http.post("/v1/sessions/s1/replay", json={}).json()
        listed = http.get("/v1/sessions").json()
        context = http.post("/v1/sessions/s1/context", json={"budget": 200}).json()
    view = memory.scoped(user="alice")
    stored = [r.model_dump(mode="json", exclude_none=True) for r in view.replay("s1")]
    assert replayed == stored
    assert [s["session"] for s in listed] == ["s1"]
    assert context["context"] == view.context("s1", 200)


def test_a_search_finds_what_is_not_indexed_yet_and_says_so(server, memory, tokens) -> None:
    url, _ = server  # no background indexer: nothing appended is indexed
    with client(url, tokens["alice"]) as http:
        http.post("/v1/sessions/s1/events", json={"events": EVENTS}).raise_for_status()
        answer = http.post(
            "/v1/search", json={"query": "token bucket", "k": 1, "detail": True}
        ).json()
        compact = http.post("/v1/search", json={"query": "token bucket", "k": 1}).json()
        elsewhere = http.post(
            "/v1/search", json={"query": "token bucket", "since": "2999-01-01T00:00:00Z"}
        ).json()
    assert answer["unindexed"] >= 2  # (and a scoped writer's session_started)
    assert f"{answer['unindexed']} recent record(s) not indexed yet" in answer["warnings"][-1]
    (hit,) = answer["hits"]
    assert (hit["text"], hit["tier"], hit["session"]) == (EVENTS[1]["content"], "log", "s1")
    stored = [r for r in memory.replay("s1") if getattr(r, "content", None) == hit["text"]]
    assert hit["hashes"] == [stored[0].hash]  # provenance, as any hit's
    assert elsewhere["hits"] == []  # the filters hold for the scanned records too
    assert compact["hits"] == [{"text": hit["text"], "from": f"s1 #{hit['seq_from']} (1.00)"}]


def test_the_background_indexer_makes_an_append_searchable(memory: Memory, tokens) -> None:
    served = Served(memory, local_user="owner")
    with serving(served) as where, client(where["url"], tokens["alice"]) as http:
        http.post("/v1/sessions/s1/events", json={"events": EVENTS}).raise_for_status()

        def found() -> bool:
            hits = http.post("/v1/search", json={"query": "token bucket", "k": 1}).json()
            return bool(hits["hits"]) and hits["hits"][0]["text"] == EVENTS[1]["content"]

        assert wait_for(found, 60)
    assert not served.background.held  # stopped with the server, its lock given back


@pytest.mark.parametrize(
    ("method", "path", "body", "cli", "status"),
    [
        (
            "POST",
            "/v1/sessions/..x/context",
            {"budget": 10},
            ["context", "..x", "--budget", "10"],
            400,
        ),
        ("POST", "/v1/sessions/nope/replay", {}, ["replay", "nope"], 404),
        (
            "POST",
            "/v1/search",
            {"query": "x", "session": "nope"},
            ["query", "x", "--session", "nope"],
            404,
        ),
    ],
)
def test_errors_are_problem_documents_with_the_clis_message(
    server, memory: Memory, tokens, method, path, body, cli, status
) -> None:
    url, _ = server
    with client(url, tokens["alice"]) as http:
        answer = http.request(method, path, json=body)
    assert answer.status_code == status
    assert answer.headers["content-type"] == "application/problem+json"
    printed = run_cli("-w", str(memory.root), *cli, cwd=memory.root).stderr.decode().strip()
    # the same message, but a path of the server's machine is said as "the workspace"
    said = re.sub(re.escape(str(memory.root)) + r"[^\s'\"]*", "the workspace", printed)
    assert said == f"airsspec: error: {answer.json()['detail']}"
    assert str(memory.root) not in answer.text
    assert "Traceback" not in answer.text


def test_unknown_or_out_of_bound_arguments_are_refused(server, tokens) -> None:
    url, _ = server
    with client(url, tokens["alice"]) as http:
        unknown = http.post("/v1/search", json={"query": "x", "bogus": 1})
        bound = http.post("/v1/search", json={"query": "x", "k": MAX_K + 1})
        not_json = http.post("/v1/search", content=b"{")
    assert unknown.status_code == 400 and "bogus" in unknown.json()["detail"]
    assert bound.status_code == 400 and "'k'" in bound.json()["detail"]
    assert not_json.status_code == 400 and "not JSON" in not_json.json()["detail"]


def test_the_openapi_schemas_are_the_models(server, tokens) -> None:
    url, _ = server
    with client(url, tokens["alice"]) as http:
        document = http.get("/v1/openapi.json").json()
    search = document["components"]["schemas"]["QueryMemoryRequest"]
    declared = QueryMemoryInput.model_json_schema()
    assert search["properties"]["k"]["maximum"] == declared["properties"]["k"]["maximum"]
    assert set(search["properties"]) == set(declared["properties"])
    assert search["additionalProperties"] is False
    assert {op.name for op in OPS} <= {
        o["operationId"] for p in document["paths"].values() for o in p.values()
    }
    events = document["components"]["schemas"]["AppendRequest"]["properties"]["events"]
    assert "user" in json.dumps(events["items"])  # the event models, not a bare object


def test_a_request_without_a_token_reads_nothing_and_writes_nothing(
    server, memory: Memory, tokens
) -> None:
    url, _ = server
    with client(url, tokens["alice"]) as http:
        http.post("/v1/sessions/s1/events", json={"events": EVENTS}).raise_for_status()
    before = snapshot(memory.root / "contexts")
    for token in (None, "airs_00000000_forged", tokens["alice"] + "x"):
        with client(url, token) as http:
            for op in OPS:
                path = "/v1" + op.path.replace("{session}", "s1")
                body = {"events": EVENTS, "query": "bucket", "text": "t", "phase": "p"}
                answer = http.request(op.method, path, json=body if op.method == "POST" else None)
                assert answer.status_code == 401, (op.name, answer.text)
                assert "bucket" not in answer.text
            assert http.get("/v1/health").status_code == 200  # liveness stays open
    assert snapshot(memory.root / "contexts") == before


def test_another_users_token_reads_nothing_and_writes_nothing(
    server, memory: Memory, tokens
) -> None:
    url, _ = server
    with client(url, tokens["alice"]) as http:
        http.post("/v1/sessions/s1/events", json={"events": EVENTS}).raise_for_status()
    alice = memory.scoped(user="alice")
    before = [r.hash for r in alice.replay("s1")]
    with client(url, tokens["bob"]) as http:
        assert http.get("/v1/sessions").json() == []
        assert http.post("/v1/sessions/s1/replay", json={}).status_code in (403, 404)
        found = http.post("/v1/search", json={"query": "token bucket"}).json()
        assert found["hits"] == []
        refused = http.post("/v1/sessions/s1/events", json={"events": EVENTS})
        assert refused.status_code == 404, refused.text  # as for a session that is not there
        assert "alice" not in refused.text
    assert [r.hash for r in alice.replay("s1")] == before


def test_a_read_only_token_reads_but_cannot_write(server, memory: Memory, tokens) -> None:
    url, _ = server
    with client(url, tokens["alice"]) as http:
        http.post("/v1/sessions/s1/events", json={"events": EVENTS}).raise_for_status()
    before = snapshot(memory.root / "contexts")
    with client(url, tokens["reader"]) as http:
        refused = http.post("/v1/sessions/s1/events", json={"events": EVENTS})
        assert refused.status_code == 403
        assert "read-only" in refused.json()["detail"]
        assert http.post("/v1/sessions/s1/start", json={}).status_code == 403
        replayed = http.post("/v1/sessions/s1/replay", json={}).json()
        assert [r["content"] for r in replayed if r["type"] in ("user", "assistant")] == [
            e["content"] for e in EVENTS
        ]
    assert snapshot(memory.root / "contexts") == before


def test_a_revoked_token_is_refused_at_once(server, memory: Memory, tokens) -> None:
    url, _ = server
    store = TokenStore(memory.root)
    with client(url, tokens["bob"]) as http:
        assert http.get("/v1/sessions").status_code == 200
        bob = next(e for e in store.entries() if e.user == "bob")
        store.revoke(bob.id)
        assert http.get("/v1/sessions").status_code == 401


def test_tokens_are_stored_hashed_and_shown_once(memory: Memory) -> None:
    made = run_cli("-w", str(memory.root), "token", "create", "--user", "carol", cwd=memory.root)
    token = made.stdout.decode().strip()
    assert made.returncode == 0 and token.startswith("airs_")
    stored = (memory.root / "auth" / "tokens.json").read_text()
    assert token not in stored
    assert os.stat(memory.root / "auth" / "tokens.json").st_mode & 0o077 == 0
    listed = run_cli("-w", str(memory.root), "token", "list", cwd=memory.root).stdout.decode()
    assert "carol" in listed and token not in listed


def test_listening_beyond_loopback_needs_a_token(memory: Memory) -> None:
    served = Served(memory, local_user="owner", background=False)
    with pytest.raises(ServeError, match="no token configured"):
        check_exposure(served, "0.0.0.0", None)
    check_exposure(served, "127.0.0.1", None)  # loopback is fine without
    refused = run_cli("-w", str(memory.root), "serve", "--host", "0.0.0.0", cwd=memory.root)
    assert refused.returncode == 2
    assert "no token configured" in refused.stderr.decode()
    TokenStore(memory.root).create("alice")
    check_exposure(served, "0.0.0.0", None)


@contextlib.asynccontextmanager
async def mcp_session(url: str, token: str):
    """An initialised session of the SDK's client over streamable HTTP, with ``token``."""
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    async with (
        httpx.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60) as http,
        streamable_http_client(f"{url}/mcp", http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


def test_the_mcp_tools_over_http_through_the_sdk_client(server, tokens) -> None:
    url, _ = server

    async def run(token: str) -> dict:
        async with mcp_session(url, token) as session:
            tools = {t.name: t for t in (await session.list_tools()).tools}
            appended = await session.call_tool("append", {"session": "s1", "events": EVENTS})
            extra = await session.call_tool("sessions", {"surprise": 1})
            bounded = await session.call_tool("query_memory", {"query": "x", "k": 0})
            listed = await session.call_tool("sessions", {})
            return {
                "tools": tools,
                "appended": appended,
                "extra": extra,
                "bounded": bounded,
                "listed": listed,
            }

    done = asyncio.run(asyncio.wait_for(run(tokens["alice"]), 60))
    tools = done["tools"]
    assert {op.name for op in OPS} == set(tools)
    assert tools["query_memory"].annotations.read_only_hint is True
    assert tools["append"].annotations.read_only_hint is False
    destructive = {n for n, t in tools.items() if t.annotations.destructive_hint}
    assert destructive == {"forget", "revoke_token"}  # every other write appends
    k = tools["query_memory"].input_schema["properties"]["k"]
    assert (k["minimum"], k["maximum"]) == (1, MAX_K) and k["description"]
    assert not done["appended"].is_error
    assert len(done["appended"].structured_content["seqs"]) == 2
    assert done["extra"].is_error and "surprise" in done["extra"].content[0].text
    assert done["bounded"].is_error
    assert done["listed"].structured_content["result"][0]["records"] >= 2

    read_only = asyncio.run(asyncio.wait_for(run(tokens["reader"]), 60))
    assert read_only["appended"].is_error
    assert "read-only" in read_only["appended"].content[0].text


def test_an_append_after_a_seq_is_a_conflict_once_the_session_moved(
    server, memory: Memory, tokens
) -> None:
    """``after`` through HTTP and MCP: appended while the session's last record is that seq;
    else 409 (an MCP tool error) naming both seqs, and nothing written."""
    url, _ = server
    with client(url, tokens["alice"]) as http:
        seqs = http.post("/v1/sessions/s9/events", json={"events": EVENTS, "after": 0}).json()
        last = seqs["seqs"][-1]
        before = snapshot(memory.log_dir)
        stale = http.post("/v1/sessions/s9/events", json={"events": EVENTS, "after": last - 1})
        assert stale.status_code == 409
        assert f"but its last record is seq {last}" in stale.json()["detail"]

        async def run() -> Any:
            async with mcp_session(url, tokens["alice"]) as session:
                event = {"session": "s9", "events": EVENTS, "after": last - 1}
                return await session.call_tool("append", event)

        refused = asyncio.run(asyncio.wait_for(run(), 60))
        assert refused.is_error and f"seq {last}" in refused.content[0].text
        assert snapshot(memory.log_dir) == before
        done = http.post("/v1/sessions/s9/events", json={"events": EVENTS, "after": last})
        assert done.status_code == 200 and done.json()["seqs"][0] == last + 1


def test_an_after_that_is_not_a_seq_is_refused_by_http(server, memory: Memory, tokens) -> None:
    """JSON ``true``, ``false``, text or a fraction is not a seq: 400 naming ``after``, and
    nothing written (lax parsing made ``false`` "a session with no records" and ``true`` seq
    1, so a client's flag became a condition it never meant)."""
    url, _ = server
    with client(url, tokens["alice"]) as http:
        assert http.post("/v1/sessions/s8/events", json={"events": EVENTS}).status_code == 200
        before = snapshot(memory.log_dir)
        for after in (True, False, "1", 1.0, -1):
            refused = http.post("/v1/sessions/s8/events", json={"events": EVENTS, "after": after})
            assert refused.status_code == 400, (after, refused.text)
            assert "'after'" in refused.json()["detail"], refused.text
        assert snapshot(memory.log_dir) == before


def test_mcp_over_http_needs_a_token(server) -> None:
    url, _ = server
    with client(url, None) as http:
        answer = http.post("/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
    assert answer.status_code == 401


@pytest.mark.slow
def test_the_serve_command_keeps_its_discovery_file_only_while_it_runs(tmp_path: Path) -> None:
    init_workspace(tmp_path)
    state = tmp_path / ".airsspec" / "state" / "serve.json"
    proc = subprocess.Popen(
        [sys.executable, "-m", "airsspec", "serve", "--port", "0"],
        cwd=tmp_path,
        env={**os.environ, "AIRSSPEC_COLD_EMBEDDER": "hash", "PYTHONPATH": str(REPO)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        assert wait_for(state.exists, 60), proc.stderr.read1().decode()
        info = json.loads(state.read_text())
        assert info["pid"] == proc.pid
        assert os.stat(state).st_mode & 0o077 == 0
        with client(info["url"], info["token"]) as http:
            assert wait_for(lambda: _up(http), 60)
            assert http.get("/v1/sessions").json() == []
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(60)
    assert proc.returncode == 0
    assert not state.exists()


def _up(http: httpx.Client) -> bool:
    try:
        return http.get("/v1/health").status_code == 200
    except httpx.TransportError:
        return False


def test_a_hook_posted_to_the_server_imports_the_transcript(server, memory: Memory, tmp_path):
    url, served = server
    transcript = tmp_path / "abc.jsonl"
    line = {
        "type": "user",
        "uuid": "u1",
        "sessionId": "abc",
        "timestamp": "2026-11-01T10:00:01.000Z",
        "message": {"role": "user", "content": "Please add rate limiting to the upload API"},
    }
    transcript.write_text(json.dumps(line) + "\n")
    payload = {
        "session_id": "abc",
        "transcript_path": str(transcript),
        "cwd": str(tmp_path),
        "hook_event_name": "Stop",
    }
    with client(url, served.local_token) as http:
        answer = http.post("/v1/hooks/import", json=payload)
        assert answer.status_code == 200, answer.text
        assert set(answer.json()) == {"answer", "stdout"}
        bad = http.post("/v1/hooks/import", content=b"[1]")
        assert bad.status_code == 400 and "not a JSON object" in bad.json()["detail"]
    texts = [getattr(r, "content", None) for r in memory.replay("abc")]
    assert "Please add rate limiting to the upload API" in texts


@pytest.mark.slow
def test_the_light_client_reaches_a_server_on_a_unix_socket(tmp_path: Path) -> None:
    init_workspace(tmp_path)
    sock = tmp_path / "serve.sock"
    env = {**os.environ, "AIRSSPEC_COLD_EMBEDDER": "hash", "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "airsspec", "serve", "--socket", str(sock)],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        assert proc.stdout is not None
        said = proc.stdout.readline().decode()  # the banner: how a client reaches the socket
        assert f"curl --unix-socket {sock} http://localhost/v1/health" in said
        assert "viewer: http" not in said and "{" not in said
        assert os.stat(sock).st_mode & 0o077 == 0
        line = b'{"type": "user", "content": "over the socket"}\n'
        done = subprocess.run(
            [sys.executable, "-X", "importtime", "-m", "airsspec", "append", "s9"],
            cwd=tmp_path,
            env=env,
            input=line,
            capture_output=True,
            timeout=60,
            check=False,
        )
        assert done.returncode == 0 and b"appended 1 record(s) to s9" in done.stdout
        loaded = {line.split(b"|")[-1].strip() for line in done.stderr.splitlines()}
        assert b"pydantic" not in loaded  # the light client did it, through the socket
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(60)
    assert proc.returncode == 0 and not sock.exists()
    logged = proc.stderr.read().decode() if proc.stderr is not None else ""
    assert f"at the Unix socket {sock}" in logged and "{'" not in logged  # no Python dict


def test_the_owners_token_sees_everything_unless_a_scope_header_narrows_it(
    server, memory: Memory, tokens
) -> None:
    url, served = server
    memory.scoped(user="alice").append_many("sa", EVENTS)
    memory.scoped(user="bob").append_many("sb", EVENTS)
    with client(url, served.local_token) as http:
        everything = {s["session"] for s in http.get("/v1/sessions").json()}
        narrowed = http.get("/v1/sessions", headers={"X-Airsspec-User": "alice"}).json()
    assert everything == {"sa", "sb"}
    assert [s["session"] for s in narrowed] == ["sa"]
    with client(url, tokens["bob"]) as http:  # a token's user cannot be widened by a header
        mine = http.get("/v1/sessions", headers={"X-Airsspec-User": "alice"}).json()
    assert [s["session"] for s in mine] == ["sb"]


def test_another_users_token_reads_nothing_through_mcp_either(server, memory, tokens) -> None:
    url, _ = server
    memory.scoped(user="alice").append_many("s1", EVENTS)

    async def run() -> tuple:
        async with mcp_session(url, tokens["bob"]) as session:
            listed = await session.call_tool("sessions", {})
            replayed = await session.call_tool("replay", {"session": "s1"})
            found = await session.call_tool("query_memory", {"query": "token bucket"})
            written = await session.call_tool("append", {"session": "s1", "events": EVENTS})
            return listed, replayed, found, written

    listed, replayed, found, written = asyncio.run(asyncio.wait_for(run(), 60))
    assert listed.structured_content["result"] == []
    assert replayed.is_error and found.structured_content["hits"] == []
    assert written.is_error
    assert len(list(memory.replay("s1"))) == 3  # alice's session_started and her two events


# ---------------------------------------------------------------------------- /memories

MEMORY_PATH = "/memories/preferences.md"


def _head(memory: Memory) -> int:
    log = memory.workspace.log
    return log.head(MEMORY_SESSION).seq if MEMORY_SESSION in log.sessions() else 0


def test_memory_files_over_http_with_versions_and_optimistic_concurrency(
    server, memory: Memory, tokens
) -> None:
    url, _ = server
    with client(url, tokens["alice"]) as http:
        made = http.post(
            "/v1/memories/create",
            json={"path": MEMORY_PATH, "file_text": "- tabs\n", "actor": "claude"},
        )
        assert made.status_code == 200, made.text
        assert made.json()["result"] == f"File created successfully at: {MEMORY_PATH}"
        sha = made.json()["version"]["sha256"]
        edit = {"path": MEMORY_PATH, "old_str": "tabs", "new_str": "tabs, never spaces"}
        assert http.post("/v1/memories/str_replace", json=edit | {"content_sha256": sha}).is_success
        stale = http.post("/v1/memories/str_replace", json=edit | {"content_sha256": sha})
        assert stale.status_code == 409
        assert "has changed since it was read" in stale.json()["detail"]
        viewed = http.post("/v1/memories/view", json={"path": MEMORY_PATH}).json()
        assert viewed["result"].endswith("     1\t- tabs, never spaces\n     2\t")
        history = http.post("/v1/memories/history", json={"path": MEMORY_PATH}).json()
        assert [(v["op"], v["actor"]) for v in history] == [("created", "claude"), ("edited", None)]
        assert http.post("/v1/memories/view", json={"path": "/etc"}).status_code == 400
        spec = http.get("/v1/openapi.json").json()
        assert spec["paths"]["/v1/memories/str_replace"]["post"]["x-read-only"] is False
    with client(url, tokens["bob"]) as http:
        assert http.post("/v1/memories/view", json={}).json()["files"] == {}
        assert http.post("/v1/memories/history", json={"path": MEMORY_PATH}).status_code == 404
    before = _head(memory)
    with client(url, tokens["reader"]) as http:
        assert http.post("/v1/memories/view", json={"path": MEMORY_PATH}).is_success
        for route, body in [
            ("create", {"path": "/memories/x.md", "file_text": "x"}),
            ("str_replace", edit),
            ("insert", {"path": MEMORY_PATH, "insert_line": 0, "insert_text": "x"}),
            ("delete", {"path": MEMORY_PATH}),
            ("rename", {"old_path": MEMORY_PATH, "new_path": "/memories/y.md"}),
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
                "memory_create", {"path": MEMORY_PATH, "file_text": "deploy on Thursday\n"}
            )
            viewed = await session.call_tool("memory_view", {"path": "/memories"})
            return {"tools": tools, "created": created, "viewed": viewed}

    done = asyncio.run(asyncio.wait_for(run(tokens["alice"]), 60))
    tools = done["tools"]
    assert tools["memory_view"].annotations.read_only_hint is True
    assert tools["memory_str_replace"].annotations.read_only_hint is False
    assert not done["created"].is_error
    assert done["viewed"].structured_content["files"] == {
        MEMORY_PATH: memory.scoped(user="alice").files.read(MEMORY_PATH).sha256
    }
    read_only = asyncio.run(asyncio.wait_for(run(tokens["reader"]), 60))
    assert read_only["created"].is_error and "read-only" in read_only["created"].content[0].text
    assert memory.scoped(user="alice").files.history(MEMORY_PATH)[-1].text == "deploy on Thursday\n"


DUPLICATED = (
    b'{"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "append", '
    b'"arguments": {"session": "s1", "events": [{"type": "user", "content": "one", '
    b'"content": "two"}]}}}'
)


def test_mcp_over_http_refuses_a_key_given_twice(server, memory: Memory, tokens) -> None:
    """The SDK parses a body keeping one of a key's two values: an event's ``content`` given
    twice was stored as its last value. The body is answered 400 with a JSON-RPC error naming
    the request and the key, nothing is appended; the same call given once is taken."""
    url, _ = server
    before = snapshot(memory.log_dir)
    accept = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    with client(url, tokens["alice"]) as http:
        answer = http.post("/mcp", content=DUPLICATED, headers=accept)
        assert answer.status_code == 400, answer.text
        error = answer.json()
        assert error["id"] == 7 and error["error"]["code"] == -32600
        assert "'content' is given twice" in error["error"]["message"]
        assert snapshot(memory.log_dir) == before
        once = DUPLICATED.replace(b'"content": "one", ', b"")
        taken = http.post("/mcp", content=once, headers=accept)
    assert taken.status_code == 200, taken.text
    assert not taken.json()["result"]["isError"]
    assert [r.content for r in memory.scoped(user="alice").replay("s1") if r.type == "user"] == [
        "two"
    ]


@pytest.mark.parametrize("odd", [b"NaN", b"Infinity", b"-Infinity", b"1e400"])
def test_mcp_over_http_refuses_what_only_the_sdk_parser_reads(
    server, memory: Memory, tokens, odd: bytes
) -> None:
    """``NaN``, ``Infinity`` and a number beyond a double are not JSON: the server's parser
    refuses them, the SDK's reads them (as floats no log holds), and with them a key given
    twice elsewhere in the body (the check of the key was skipped, the SDK kept the last
    value). The body is answered 400 with a JSON-RPC error naming the request; nothing is
    appended. A body that no parser reads still gets the SDK's own parse error."""
    url, _ = server
    before = snapshot(memory.log_dir)
    accept = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    body = DUPLICATED.replace(b'"params": {', b'"params": {"_meta": {"x": ' + odd + b"}, ")
    with client(url, tokens["alice"]) as http:
        answer = http.post("/mcp", content=body, headers=accept)
        assert answer.status_code == 400, answer.text
        error = answer.json()
        assert error["id"] == 7 and error["error"]["code"] == -32600, error
        assert snapshot(memory.log_dir) == before
        broken = http.post("/mcp", content=b'{"jsonrpc": "2.0", "id": 8, ', headers=accept)
    assert broken.status_code == 400 and broken.json()["error"]["code"] == -32700, broken.text
    assert snapshot(memory.log_dir) == before
