"""``airsspec serve``'s doors against a hostile tenant of a shared server, once every gate is in
place: alice's and bob's user tokens, alice's read-only token, no token, and an admin narrowed by
headers, each trying the ways around the access gate that the matrix (``test_access_matrix``)
does not walk: the hooks endpoint fed another user's session, the MCP door's other lists, the
viewer's pages with query parameters and odd session segments, the scope headers sent twice,
encoded, raw or too long, bodies beyond the limit on the open routes, the sign-in form, the
discovery file and socket's modes, and the light client run as another user.

Each attack is written as the behaviour the doors promise: a regression test.
"""

from __future__ import annotations

import io
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2 as httpx
import pytest

from airsspec import client as light
from airsspec.memory import Memory
from airsspec.serve import api
from airsspec.serve.app import COOKIE, bind, serving, write_state
from airsspec.serve.core import Served
from tests.airsspec import access_cases as ac
from tests.support.tls import TLS

ALICE, BOB = ac.CANARY["alice"], ac.CANARY["bob"]
MCP_ACCEPT = {"Accept": "application/json, text/event-stream"}


class Hostile:
    """The served world of the access matrix, with the server and its memory at hand."""

    def __init__(self, world: ac.World, served: Served, memory: Memory) -> None:
        self.world = world
        self.served = served
        self.memory = memory
        self.url = world.url

    def client(self, principal: str | None, **headers: Any) -> httpx.Client:
        token = self.world.tokens.get(principal) if principal else None
        if token:
            headers["Authorization"] = f"Bearer {token}"
        return httpx.Client(base_url=self.url, headers=headers, timeout=120, verify=TLS)

    def session_bytes(self, who: str) -> bytes:
        (path,) = self.world.log_dir.rglob(f"{ac.SESSION[who]}.jsonl")
        return path.read_bytes()

    def settle(self) -> None:
        """Wait for the hooks' deferred work (joined, never slept on)."""
        for thread in list(self.served._later):
            thread.join(60)


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Hostile]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("AIRSSPEC_COLD_EMBEDDER", "hash")
        root: Path = tmp_path_factory.mktemp("doors")
        with Memory.open(root, create=True) as memory:
            served = Served(memory, local_user="owner", background=False)
            with serving(served) as where:
                yield Hostile(ac.build(memory, where["url"], served.local_token), served, memory)


def hook(h: Hostile, principal: str, event: str, payload: dict[str, Any]) -> httpx.Response:
    with h.client(principal) as http:
        return http.post(f"/v1/hooks/{event}", json=payload)


# ---------------------------------------------------------------------------- the hooks door


@pytest.mark.parametrize("source", ["startup", "resume", "clear", "compact"])
def test_a_users_session_start_hook_briefs_nothing_of_another_users_session(
    hostile: Hostile, source: str
) -> None:
    before = hostile.session_bytes("bob")
    answer = hook(hostile, "user", "SessionStart", {"session_id": "bob-s", "source": source})
    hostile.settle()
    assert answer.status_code in (200, 404), answer.text
    assert BOB not in answer.text and "bob" not in answer.text.replace("bob-s", "")
    assert hostile.session_bytes("bob") == before


def test_a_users_hook_on_the_workspace_log_briefs_only_its_own(hostile: Hostile) -> None:
    payload = {"session_id": "airsspec.memory", "source": "resume"}
    answer = hook(hostile, "user", "SessionStart", payload)
    assert answer.status_code in (200, 400, 403, 404), answer.text
    assert BOB not in answer.text


WHOSE = ("bob", "team", "workspace")  # another user's session, the team's, the workspace log


@pytest.mark.parametrize("event", ["SessionEnd", "PreCompact", "Stop", "UserPromptSubmit"])
def test_a_users_hook_ending_another_users_or_the_teams_session_writes_nothing(
    hostile: Hostile, event: str
) -> None:
    before = {who: hostile.session_bytes(who) for who in WHOSE}
    sizes = ac.log_size(hostile.world.log_dir)
    for who in WHOSE:
        payload = {"session_id": ac.SESSION[who], "reason": "logout", "prompt": "hi"}
        answer = hook(hostile, "user", event, payload)
        assert answer.status_code < 500, answer.text
        assert BOB not in answer.text
    hostile.settle()
    assert {who: hostile.session_bytes(who) for who in WHOSE} == before
    assert ac.log_size(hostile.world.log_dir) == sizes


def test_a_read_only_tokens_hook_appends_nothing(hostile: Hostile) -> None:
    sizes = ac.log_size(hostile.world.log_dir)
    for event in ("SessionStart", "SessionEnd"):
        answer = hook(hostile, "read_only", event, {"session_id": "alice-s", "source": "resume"})
        assert answer.status_code == 403, answer.text
    hostile.settle()
    assert ac.log_size(hostile.world.log_dir) == sizes


@pytest.mark.parametrize(
    "payload",
    [
        {"session_id": "bob-s", "transcript_path": 0, "source": "resume"},
        {"session_id": "../bob-s", "source": "startup"},
        {"session_id": "bob-s/../alice-s", "source": "startup"},
        {"session_id": ["bob-s"], "source": "startup"},
        {"session_id": "bob-s", "source": {"x": 1}},
    ],
)
def test_a_users_odd_hook_payload_is_refused_or_harmless(hostile: Hostile, payload) -> None:
    answer = hook(hostile, "user", "SessionStart", payload)
    assert answer.status_code in (200, 400, 403, 404), answer.text
    assert answer.headers["content-type"].startswith(("application/json", api.PROBLEM))
    assert BOB not in answer.text


# ---------------------------------------------------------------------------- the MCP door


def mcp(h: Hostile, principal: str | None, method: str, params: dict | None = None):
    request = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params or {}}
    with h.client(principal, **MCP_ACCEPT) as http:
        return http.post("/mcp", json=request)


@pytest.mark.parametrize(
    "method",
    ["tools/list", "resources/list", "resources/templates/list", "prompts/list", "ping"],
)
def test_the_mcp_doors_lists_hold_nothing_of_a_tenant(hostile: Hostile, method: str) -> None:
    answer = mcp(hostile, "user", method)
    assert answer.status_code == 200, answer.text
    for secret in (BOB, ALICE, str(hostile.memory.root)):
        assert secret not in answer.text


def test_the_mcp_door_reads_no_resource_of_the_server(hostile: Hostile) -> None:
    for uri in ("file:///etc/passwd", f"file://{hostile.world.log_dir}/bob-s.jsonl"):
        answer = mcp(hostile, "user", "resources/read", {"uri": uri})
        assert answer.status_code < 500 and BOB not in answer.text and "root:" not in answer.text


def test_the_mcp_door_without_a_token_lists_nothing(hostile: Hostile) -> None:
    assert mcp(hostile, None, "tools/list").status_code == 401


@pytest.mark.parametrize("method", ["DELETE", "PUT"])
def test_the_mcp_doors_other_methods_answer_cleanly(hostile: Hostile, method: str) -> None:
    with hostile.client("user", **MCP_ACCEPT) as http:
        answer = http.request(method, "/mcp")
    assert 400 <= answer.status_code < 500, answer.text


# ---------------------------------------------------------------------------- the viewer


@pytest.fixture
def browser(hostile: Hostile) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=hostile.url, timeout=120) as client:
        signed = client.post(
            "/login", data={"token": hostile.world.tokens["user"]}, headers={"Origin": hostile.url}
        )
        assert signed.status_code == 303
        yield client


QUERIED = (
    "/?user=bob",
    "/?user=b",
    "/?text=secret+canary+plan+of+bob",
    "/?text=bob-s",
    "/?agent=%25&from=0000&to=9999",
    "/search?q=secret+canary+plan+of+bob",
    "/search?q=bob-s",
    "/sessions/airsspec.memory?from=1&to=99999999",
    "/sessions/team-s?from=-5&to=99999999999999999999999",
    "/learnings?session=bob-s",
    "/verify?session=bob-s",
)


@pytest.mark.parametrize("path", QUERIED)
def test_the_viewers_query_parameters_widen_nothing(hostile: Hostile, browser, path: str) -> None:
    page = browser.get(path)
    assert page.status_code in (200, 404), (path, page.text[:300])
    assert BOB not in page.text
    assert "bob-s" not in page.text.replace("bob-s", "", path.count("bob-s") * 4) or (
        "bob-s" in path  # a query of one's own typing is shown back
    )
    assert str(hostile.memory.root) not in page.text


def test_the_learnings_page_links_only_to_pages_the_user_may_open(hostile: Hostile, browser):
    import re

    page = browser.get("/learnings")
    assert page.status_code == 200
    links = set(re.findall(r'href="(/sessions/[^"]+)"', page.text))
    for link in links:
        opened = browser.get(link.replace("&amp;", "&"))
        assert opened.status_code == 200, link
        assert BOB not in opened.text


@pytest.mark.parametrize(
    "segment",
    [
        "%2e%2e",
        "%2E%2e",
        "%2e",
        "bob-s%00",
        "BOB-S",
        "bob-s.",
        "bob%E2%80%8B-s",
        "bob-s%20",
        "bob-s%0a",
    ],
)
def test_a_session_segment_of_odd_bytes_reaches_no_other_users_session(
    hostile: Hostile, browser, segment: str
) -> None:
    page = browser.get(f"/sessions/{segment}")
    assert page.status_code in (400, 404), (segment, page.text[:300])
    assert BOB not in page.text and str(hostile.memory.root) not in page.text
    with hostile.client("user") as http:
        answer = http.post(f"/v1/sessions/{segment}/replay", json={})
    assert answer.status_code in (400, 404), (segment, answer.text)
    assert BOB not in answer.text and str(hostile.memory.root) not in answer.text


def test_sign_in_sets_a_strict_http_only_cookie_and_sign_out_is_no_link(hostile: Hostile):
    with httpx.Client(base_url=hostile.url, timeout=60) as client:
        signed = client.post(
            "/login", data={"token": hostile.world.tokens["user"]}, headers={"Origin": hostile.url}
        )
        cookie = signed.headers["set-cookie"].lower()
        assert "httponly" in cookie and "samesite=strict" in cookie
        assert client.get("/logout").status_code == 405  # an <img> cannot sign out
        foreign = client.post("/logout", headers={"Origin": "http://127.0.0.1:1"})
        assert foreign.status_code == 403
        no_origin = client.post("/logout", headers={"Sec-Fetch-Site": "cross-site"})
        assert no_origin.status_code == 403
        assert client.get("/").status_code == 200  # still signed in
        own = client.post("/logout", headers={"Origin": hostile.url})
        assert own.status_code == 303 and own.headers["location"] == "/login"
        assert client.get("/", follow_redirects=False).status_code == 303  # signed out: to /login


@pytest.mark.parametrize(
    "headers",
    [
        {"Origin": "null"},
        {"Sec-Fetch-Site": "same-site"},
        {"Sec-Fetch-Site": "cross-site"},
        {},
        {"Origin": "http://127.0.0.1"},  # no port: another origin than ours
    ],
)
def test_a_sign_in_not_from_our_own_page_is_refused(hostile: Hostile, headers) -> None:
    with httpx.Client(base_url=hostile.url, timeout=60) as client:
        answer = client.post(
            "/login", data={"token": hostile.world.tokens["other"]}, headers=headers
        )
        assert answer.status_code == 403, (headers, answer.text)
        assert COOKIE not in answer.headers.get("set-cookie", "")


# ---------------------------------------------------------------------------- scope headers


def test_a_user_token_naming_another_user_in_its_header_stays_itself(hostile: Hostile) -> None:
    with hostile.client("user", **{"X-Airsspec-User": "bob"}) as http:
        assert http.post("/v1/sessions/bob-s/replay", json={}).status_code == 404
        listed = http.get("/v1/sessions").text
        hits = http.post("/v1/search", json={"query": "canary plan"}).text
    assert "bob-s" not in listed and BOB not in listed and BOB not in hits


def test_an_admin_narrowed_twice_is_narrowed_to_one_user(hostile: Hostile) -> None:
    token = hostile.world.tokens["admin"]
    headers = [
        ("Authorization", f"Bearer {token}"),
        ("X-Airsspec-User", "alice"),
        ("X-Airsspec-User", "bob"),
    ]
    with httpx.Client(base_url=hostile.url, timeout=60) as http:
        answer = http.get("/v1/sessions", headers=headers)
    assert answer.status_code in (200, 400), answer.text
    assert not ("alice-s" in answer.text and "bob-s" in answer.text)


@pytest.mark.parametrize(
    "value",
    ["%2e%2e", "..", "%2Fbob", "bob%00", "bob%2F..%2Falice", "%ff", "a" * 5000, "%20bob", "*"],
)
def test_a_scope_header_that_is_not_a_name_is_refused(hostile: Hostile, value: str) -> None:
    for principal in ("admin", "user"):
        for header in ("X-Airsspec-User", "X-Airsspec-Agent", "X-Airsspec-Project"):
            if principal == "user" and header == "X-Airsspec-User":
                continue  # a user's token ignores it
            with hostile.client(principal, **{header: value}) as http:
                answer = http.get("/v1/sessions")
            assert answer.status_code == 400, (principal, header, value, answer.text)
            assert answer.headers["content-type"] == api.PROBLEM


def test_an_overlong_header_is_answered_without_a_server_error(hostile: Hostile) -> None:
    with hostile.client("user", **{"X-Airsspec-Agent": "a" * 200_000}) as http:
        try:
            answer = http.get("/v1/sessions")
        except httpx.TransportError:  # the connection closed by the HTTP parser: fine
            return
    assert 400 <= answer.status_code < 500


def test_a_raw_non_ascii_scope_header_is_refused_not_read_as_latin1(hostile: Hostile) -> None:
    token = hostile.world.tokens["user"]
    headers = [
        (b"Authorization", f"Bearer {token}".encode()),
        (b"X-Airsspec-Agent", "jü".encode()),
    ]
    with httpx.Client(base_url=hostile.url, timeout=60) as http:
        answer = http.get("/v1/sessions", headers=headers)
    assert answer.status_code == 400, answer.text


# ---------------------------------------------------------------------------- bodies and paths


def chunks(size: int) -> Iterator[bytes]:
    block = b"x" * 1024 * 1024
    sent = 0
    while sent < size:
        yield block
        sent += len(block)


@pytest.mark.parametrize("path", ["/login", "/mcp", "/v1/sessions/alice-s/events"])
def test_a_chunked_body_beyond_the_limit_is_a_clean_413(hostile: Hostile, path: str) -> None:
    headers = {"Origin": hostile.url, "Content-Type": "application/x-www-form-urlencoded"}
    if path != "/login":
        headers = {"Content-Type": "application/json", **MCP_ACCEPT}
    before = ac.log_size(hostile.world.log_dir)
    with hostile.client(None if path == "/login" else "user", **headers) as http:
        try:
            answer = http.post(path, content=chunks(api.MAX_BODY + 2 * 1024 * 1024))
        except httpx.RemoteProtocolError:  # cut off before the whole body was sent: fine
            answer = None
    if answer is not None:
        assert answer.status_code == 413, (path, answer.status_code, answer.text[:200])
        assert answer.headers["content-type"] == api.PROBLEM
    assert ac.log_size(hostile.world.log_dir) == before


@pytest.mark.parametrize(
    "path",
    [
        "/v1/health%2F..%2Fsessions",
        "/static%2F..%2Fv1%2Fsessions",
        "/static/..%2F..%2Fv1%2Fsessions",
        "/login%2F..%2Fv1%2Fsessions",
        "/v1/healthz",
        "/v1/openapi.json",
        "/sessions/alice-s",
    ],
)
def test_no_open_path_prefix_lets_a_request_without_a_token_through(
    hostile: Hostile, path: str
) -> None:
    with hostile.client(None) as http:
        answer = http.get(path, follow_redirects=False)
    assert answer.status_code in (303, 401, 404), (path, answer.status_code)
    assert ALICE not in answer.text and "alice-s" not in answer.text


def test_openapi_and_error_documents_name_no_path_nor_owner(hostile: Hostile) -> None:
    root = str(hostile.memory.root)
    with hostile.client("user") as http:
        spec = http.get("/v1/openapi.json")
        missing = http.post("/v1/sessions/bob-s/replay", json={})
        absent = http.post("/v1/sessions/nobody-s/replay", json={})
        status = http.get("/v1/status")
        verify = http.post("/v1/verify", json={})
        wrong = http.post("/v1/sessions/bob-s/events", json={"events": [{"type": "nope"}]})
    assert spec.status_code == 200 and root not in spec.text
    assert missing.status_code == absent.status_code == 404
    assert missing.json()["detail"].replace("bob-s", "nobody-s") == absent.json()["detail"]
    for answer in (missing, status, verify, wrong):
        assert root not in answer.text and BOB not in answer.text
    assert "bob-s" not in status.text and "bob-s" not in verify.text


# ---------------------------------------------------------------------------- local files


def test_a_unix_socket_is_never_reachable_by_others_even_for_a_moment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[int] = []
    chmod = os.chmod

    def watched(path: Any, mode: int, *args: Any, **kwargs: Any) -> None:
        seen.append(stat.S_IMODE(os.stat(path).st_mode))
        chmod(path, mode, *args, **kwargs)

    monkeypatch.setattr("airsspec.serve.app.os.chmod", watched)
    previous = os.umask(0o002)  # a group-writable umask, as many distributions' users have
    try:
        sock = bind("127.0.0.1", 0, str(tmp_path / "s.sock"))
    finally:
        os.umask(previous)
    try:
        assert stat.S_IMODE(os.stat(tmp_path / "s.sock").st_mode) == 0o600
        assert all(mode & 0o077 == 0 for mode in seen), [oct(m) for m in seen]
    finally:
        sock.close()


def test_the_discovery_file_is_the_owners_alone(hostile: Hostile) -> None:
    path = write_state(hostile.served, {"url": hostile.url, "socket": None})
    try:
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert path.stat().st_uid == os.getuid()
    finally:
        path.unlink()


# ---------------------------------------------------------------------------- light client


@pytest.mark.parametrize(
    "argv",
    [
        ["context", "alice-s", "--budget", "800"],
        ["query", "secret canary plan of alice", "--json"],
        ["search", "secret canary plan of alice", "--json"],
        ["context", "airsspec.memory", "--budget", "800", "--json"],
    ],
)
def test_the_light_client_as_another_user_reads_nothing_of_alice(
    hostile: Hostile, monkeypatch: pytest.MonkeyPatch, capsys, argv: list[str]
) -> None:
    path = write_state(hostile.served, {"url": hostile.url, "socket": None})
    monkeypatch.setenv("AIRSSPEC_USER", "bob")
    monkeypatch.delenv("AIRSSPEC_TOKEN", raising=False)
    monkeypatch.delenv("AIRSSPEC_NO_SERVER", raising=False)
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(b"")))
    try:
        code = light.dispatch(["-w", str(hostile.memory.root), *argv])
    finally:
        path.unlink()
    out = capsys.readouterr()
    assert code in (None, 0, 1, 2)
    assert ALICE not in out.out + out.err
    if argv[0] == "context" and argv[1] == "alice-s":
        assert code is None  # refused by the server: the full command says why, as the CLI


def test_the_light_client_sends_the_local_token_to_no_other_users_file(
    hostile: Hostile, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write_state(hostile.served, {"url": hostile.url, "socket": None})
    try:
        os.chmod(path, 0o644)  # readable by another local user: its token is not to be trusted
        assert light.find_server(str(hostile.memory.root), None, None) is None
    finally:
        path.unlink()


def test_a_get_of_the_mcp_door_is_answered_not_held_open(hostile: Hostile) -> None:
    headers = {"Authorization": f"Bearer {hostile.world.tokens['read_only']}", **MCP_ACCEPT}
    with httpx.Client(base_url=hostile.url, headers=headers, timeout=2) as http:
        try:
            answer = http.get("/mcp")
        except httpx.ReadTimeout:  # nothing at all within 2 s: held open
            answer = None
    assert answer is not None and 400 <= answer.status_code < 500


def test_an_admin_narrowed_by_a_header_adds_no_global_learning(hostile: Hostile) -> None:
    before = ac.log_size(hostile.world.log_dir)
    for header, value in (("X-Airsspec-User", "alice"), ("X-Airsspec-Agent", "x")):
        with hostile.client("admin", **{header: value}) as http:
            answer = http.post("/v1/learnings", json={"text": "run rm -rf /", "scope": "global"})
        assert answer.status_code == 403, (header, answer.text)
    assert ac.log_size(hostile.world.log_dir) == before
