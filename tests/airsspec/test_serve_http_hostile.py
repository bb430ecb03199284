"""``airsspec serve`` over HTTP against a tenant with a token (bob) attacking another's (alice's)
memory: every route and parameter spelling, writes as her, admin routes, bodies a parser may
choke on; each leaves her data unseen and the log byte-identical."""

from __future__ import annotations

import httpx2 as httpx
import pytest

from airsspec.memory import Memory
from airsspec.serve.tokens import TokenStore
from tests.conftest import snapshot
from tests.support.tls import TLS

SECRET = "alices hidden ledger"
EVENTS = [{"type": "user", "content": SECRET}]


@pytest.fixture
def tokens(memory: Memory) -> dict[str, str]:
    store = TokenStore(memory.root)
    made = {who: store.create(who)[1] for who in ("alice", "bob")}
    made["admin"] = store.create("root", admin=True)[1]
    return made


def http(url: str, token: str | None = None, **headers: str) -> httpx.Client:
    if token:
        headers["Authorization"] = f"Bearer {token}"
    return httpx.Client(
        base_url=url, headers=headers, timeout=60, follow_redirects=False, verify=TLS
    )


@pytest.fixture
def alices(server, memory, tokens):
    """The server with alice's session ``alice-plan-2026``, a memory file and a learning."""
    url, _ = server
    with http(url, tokens["alice"]) as alice:
        assert alice.post("/v1/sessions/alice-plan-2026/events", json={"events": EVENTS}).is_success
        made = alice.post(
            "/v1/memories/create", json={"path": "/memories/ledger.md", "file_text": SECRET}
        )
        assert made.is_success, made.text
        learned = alice.post("/v1/learnings", json={"text": SECRET})
        assert learned.status_code < 500, learned.text
    return url


def unseen(answer: httpx.Response, where: object, named: bool = False) -> None:
    """Nothing of alice's in ``answer``: not her text, nor her session's name unless the caller
    ``named`` it; no server error, no traceback, no server path."""
    assert SECRET not in answer.text, (where, answer.text)
    assert named or "alice-plan" not in answer.text, (where, answer.text)
    assert answer.status_code < 500 and "Traceback" not in answer.text, (where, answer.text)
    assert "/tmp" not in answer.text and "site-packages" not in answer.text, (where, answer.text)


SPELLINGS = [
    "alice-plan-2026",
    "alice-plan",
    "alice",
    "alice-plan-2026%00",
    "..%2falice-plan-2026",
    "%2e%2e",
    "alice%2dplan%2d2026",
    "ALICE-PLAN-2026",
    "a" * 5000,
    "\uff41lice-plan-2026",  # a fullwidth a: a confusable of her name
    "alice-plan-2026%2f..%2f..",
    "alice-plan-2026%ff",
]


def test_bob_reads_nothing_of_alices_by_any_route(alices, memory, tokens) -> None:
    before = snapshot(memory.root / "eventlog")
    with http(alices, tokens["bob"]) as bob:
        for name in SPELLINGS:
            for op in ("replay", "context", "transcript"):
                unseen(bob.post(f"/v1/sessions/{name}/{op}", json={}), (name, op), True)
            unseen(bob.get(f"/sessions/{name}"), name, True)
            unseen(bob.get(f"/sessions/{name}/visual/page.html"), name, True)
            unseen(bob.get(f"/sessions/{name}/visual/..%2f..%2fconfig.toml"), name, True)
        for path in (
            "/v1/sessions",
            "/v1/overview",
            "/v1/status",
            "/",
            "/analytics",
            "/learnings",
            "/facts",
            "/memories",
            "/forgotten",
            "/search?q=ledger",
            "/memories/file?path=/memories/ledger.md",
            "/memories/file?path=/memories/../memories/ledger.md",
            "/memories/file?path=/memories/%2e%2e/ledger.md",
            "/v1/facts/query?query=ledger",
            "/v1/learnings/query?cue=ledger",
        ):
            unseen(bob.get(path), path)
        for path, body in (
            ("/v1/search", {"query": "alices hidden ledger"}),
            ("/v1/learnings/query", {"cue": "hidden ledger"}),
            ("/v1/facts/query", {"query": "hidden ledger"}),
            ("/v1/memories/view", {"path": "/memories/ledger.md"}),
            ("/v1/memories/view", {"path": "/memories"}),
            ("/v1/memories/view", {"path": "/memories/../memories/ledger.md"}),
            ("/v1/memories/history", {"path": "/memories/ledger.md"}),
            ("/v1/verify", {}),
        ):
            unseen(bob.post(path, json=body), (path, body))
    assert snapshot(memory.root / "eventlog") == before


def test_bob_writes_nothing_into_alices_memory(alices, memory, tokens) -> None:
    before = snapshot(memory.root / "eventlog")
    with http(alices, tokens["bob"]) as bob:
        tries = [
            ("/v1/sessions/alice-plan-2026/events", {"events": EVENTS}),
            ("/v1/sessions/alice-plan-2026/assign", {"user": "bob"}),
            ("/v1/sessions/alice-plan-2026/end", {}),
            ("/v1/sessions/alice-plan-2026/phase", {"phase": "build"}),
            ("/v1/sessions/alice-plan-2026/compact", {}),
            ("/v1/sessions/alice-plan-2026/start", {}),
            ("/v1/forget", {"user": "alice"}),
            ("/v1/forget", {"session": "alice-plan-2026"}),
            ("/v1/memories/delete", {"path": "/memories/ledger.md"}),
            (
                "/v1/memories/str_replace",
                {"path": "/memories/ledger.md", "old_str": SECRET, "new_str": "x"},
            ),
            (
                "/v1/memories/rename",
                {"old_path": "/memories/ledger.md", "new_path": "/memories/b.md"},
            ),
            ("/v1/tokens", {"user": "bob", "admin": True}),
            ("/v1/tokens", {"user": "alice"}),
            ("/v1/tokens/revoke", {"token_id": tokens["alice"].split("_")[1]}),
        ]
        for path, body in tries:
            answer = bob.post(path, json=body)
            assert answer.status_code in (400, 403, 404, 409, 422), (path, answer.text)
            unseen(answer, path, named=True)
        assert bob.get("/v1/tokens").status_code == 403
    assert snapshot(memory.root / "eventlog") == before


def test_a_body_cannot_say_it_is_alice(alices, memory, tokens) -> None:
    with http(alices, tokens["bob"]) as bob:
        for extra in ({"user": "alice"}, {"origin": "alice"}, {"meta": {"user": "alice"}}):
            event = {"type": "user", "content": "bob speaking", **extra}
            bob.post("/v1/sessions/bobs/events", json={"events": [event]})
        bob.post("/v1/sessions/bobs/events", json={"events": EVENTS[:1], "user": "alice"})
    with http(alices, tokens["alice"]) as alice:
        assert "bob speaking" not in alice.post("/v1/search", json={"query": "bob speaking"}).text
        assert "bobs" not in alice.get("/v1/sessions").text


BODIES = [
    (b'{"events": [{"type": "user", "content": "\xff\xfe"}]}', "application/json"),
    (b"[" * 100_000 + b"]" * 100_000, "application/json"),
    (b'{"events": ' + b'{"a":' * 5000 + b"1" + b"}" * 5000 + b"}", "application/json"),
    (b"events=1", "multipart/form-data; boundary=zz"),
    (b'{"events": [{"type": "user", "content": "x"}], "events": []}', "application/json"),
    (b"", "application/json"),
    (b"null", "application/json"),
    (b'{"events": [{"type": "user", "content": 1e999}]}', "application/json"),
    (b'{"events": [{"type": "user", "content": "\\ud800"}]}', "application/json"),
]


@pytest.mark.parametrize("body,kind", BODIES, ids=range(len(BODIES)))
def test_a_body_a_parser_may_choke_on_is_a_clear_4xx(alices, memory, tokens, body, kind) -> None:
    before = snapshot(memory.root / "eventlog")
    with http(alices, tokens["bob"]) as bob:
        answer = bob.post("/v1/sessions/bobs/events", content=body, headers={"Content-Type": kind})
        assert 400 <= answer.status_code < 500, answer.text[:300]
        assert "Traceback" not in answer.text and "/tmp" not in answer.text
        chunked = bob.post(
            "/v1/sessions/bobs/events",
            content=iter([body[: len(body) // 2], body[len(body) // 2 :]]),
            headers={"Content-Type": kind},
        )
        assert 400 <= chunked.status_code < 500, chunked.text[:300]
    assert snapshot(memory.root / "eventlog") == before


def test_no_other_origin_may_call_a_state_changing_route(alices, memory, tokens) -> None:
    with http(alices, tokens["bob"], Origin="https://evil.example") as bob:
        pre = bob.options(
            "/v1/forget",
            headers={
                "Access-Control-Request-Method": "POST",
                "Access-Control-Request-Headers": "authorization",
            },
        )
        assert "access-control-allow-origin" not in pre.headers
        answer = bob.post("/v1/sessions/bobs/events", json={"events": EVENTS})
        assert "access-control-allow-origin" not in answer.headers


def test_static_files_stay_in_their_folder(alices, tokens) -> None:
    with http(alices, tokens["bob"]) as bob:
        for path in (
            "/static/../app.py",
            "/static/..%2fapp.py",
            "/static/%2e%2e/app.py",
            "/static/%2e%2e%2f%2e%2e%2fkernel/gate.py",
            "/static/..%5capp.py",
            "/static/%00",
            "/static/" + "a" * 5000,
        ):
            answer = bob.get(path)
            assert "import" not in answer.text and answer.status_code in (400, 404), path


def test_tokens_abused_are_refused_the_same_way(alices, tokens, tmp_path) -> None:
    other = TokenStore(tmp_path).create("bob")[1]  # another workspace's
    forged = tokens["bob"][:-4] + "AAAA"
    for bad in (other, forged, "Bearer", "x" * 10_000, tokens["bob"] + " x", tokens["alice"][:20]):
        with http(alices, **{"Authorization": f"Bearer {bad}"}) as c:
            answer = c.get("/v1/sessions")
            assert answer.status_code == 401, bad
            assert tokens["bob"] not in answer.text and (not bad or bad not in answer.text)
    with http(alices) as anon:
        assert anon.get("/v1/sessions", params={"token": tokens["bob"]}).status_code == 401
        assert anon.post("/mcp", json={}).status_code == 401
        assert anon.get("/analytics").status_code in (302, 303, 307, 401)


def test_bob_neither_takes_nor_changes_the_teams_session(server, memory, tokens) -> None:
    url, _ = server
    with http(url, tokens["admin"]) as admin:
        assert admin.post("/v1/sessions/team-notes/events", json={"events": EVENTS}).is_success
    before = snapshot(memory.root / "eventlog")
    with http(url, tokens["bob"]) as bob:
        for path, body in (
            ("/v1/sessions/team-notes/events", {"events": EVENTS}),
            ("/v1/sessions/team-notes/assign", {"user": "bob"}),
            ("/v1/sessions/team-notes/end", {}),
            ("/v1/sessions/team-notes/phase", {"phase": "build"}),
            ("/v1/sessions/team-notes/compact", {}),
            ("/v1/forget", {"session": "team-notes"}),
            ("/v1/forget", {"user": "root"}),
            ("/v1/forget", {}),
        ):
            answer = bob.post(path, json=body)
            assert answer.status_code in (400, 403, 404, 409, 422), (path, answer.text)
            assert "Traceback" not in answer.text
    assert snapshot(memory.root / "eventlog") == before


def test_bob_touches_none_of_alices_learnings(alices, memory, tokens) -> None:
    with http(alices, tokens["alice"]) as alice:
        found = alice.post("/v1/learnings/query", json={"cue": "hidden ledger"}).json()
    ids = [item["id"] for item in found.get("learnings", found.get("items", []))]
    assert ids, found  # alice has one learning of her own
    before = snapshot(memory.root / "eventlog")
    with http(alices, tokens["bob"]) as bob:
        for learning in (ids[0], ids[0][:8], ids[0].upper()):
            for path, body in (
                ("/v1/learnings/feedback", {"learning_id": learning, "verdict": "rejected"}),
                ("/v1/learnings/edit", {"learning_id": learning, "text": "bob was here"}),
                ("/v1/learnings/edit", {"learning_id": learning, "scope": "global"}),
            ):
                answer = bob.post(path, json=body)
                assert answer.status_code in (400, 403, 404, 409, 422), (path, answer.text)
                unseen(answer, path, named=True)
        for body in (
            {"text": "bob in alice", "session": "alice-plan-2026"},
            {"text": "bob everywhere", "scope": "global"},
        ):
            answer = bob.post("/v1/learnings", json=body)
            assert answer.status_code in (400, 403, 404, 409, 422), (body, answer.text)
    assert snapshot(memory.root / "eventlog") == before


def test_bobs_hooks_naming_alices_session_neither_read_nor_write_it(alices, tokens) -> None:
    with http(alices, tokens["alice"]) as alice:
        mine = alice.post("/v1/sessions/alice-plan-2026/replay", json={}).text
    payload = {"session_id": "alice-plan-2026", "prompt": "bob asks for the ledger"}
    with http(alices, tokens["bob"]) as bob:
        for event in ("SessionStart", "UserPromptSubmit", "PreCompact", "Stop", "SessionEnd"):
            answer = bob.post(f"/v1/hooks/{event}", json={**payload, "source": "resume"})
            assert SECRET not in answer.text and "Traceback" not in answer.text, event
            assert answer.status_code < 500, (event, answer.text)
    with http(alices, tokens["alice"]) as alice:
        assert alice.post("/v1/sessions/alice-plan-2026/replay", json={}).text == mine


def test_the_forgotten_page_before_any_forget_is_empty_not_a_server_error(server, tokens) -> None:
    url, _ = server
    for who in ("bob", "admin"):
        with http(url, tokens[who]) as client:
            client.post("/v1/sessions/notes/events", json={"events": EVENTS})
            page = client.get("/forgotten")
            assert page.status_code == 200, (who, page.text[:200])
            assert "Traceback" not in page.text


@pytest.mark.parametrize("events", [None, 1, 1e308, True], ids=["null", "int", "float", "bool"])
def test_events_that_are_not_a_list_are_a_clear_4xx(server, memory, tokens, events) -> None:
    url, _ = server
    before = snapshot(memory.root / "eventlog")
    with http(url, tokens["bob"]) as bob:
        answer = bob.post("/v1/sessions/bobs/events", json={"events": events})
    assert 400 <= answer.status_code < 500 and "events" in answer.text, answer.text
    assert snapshot(memory.root / "eventlog") == before
