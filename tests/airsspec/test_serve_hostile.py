"""``airsspec serve`` against a hostile caller: a token reaches only its user's memory by every
route, server files stay the server's, a browser page of another origin cannot act with the
viewer's cookie, a body too large is refused before it is held, and the light client sends its
token only to a server its own user started on this machine."""

from __future__ import annotations

import contextlib
import io
import json
import os
import socket
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx2 as httpx
import pytest

from airsspec import client as light
from airsspec.memory import Memory
from airsspec.serve import api, core
from airsspec.serve.app import COOKIE, check_exposure, serving
from airsspec.serve.app import write_state as write_discovery
from airsspec.serve.core import MAX_VIEWS, Served
from airsspec.serve.tokens import TokenStore
from eventlog.errors import ServeError
from tests.conftest import claude_transcript as transcript
from tests.conftest import snapshot
from tests.support.tls import TLS

SECRET = "the owner's secret plan"
EVENTS = [{"type": "user", "content": SECRET}]


@pytest.fixture
def tokens(memory: Memory) -> dict[str, str]:
    store = TokenStore(memory.root)
    return {"alice": store.create("alice")[1], "bob": store.create("bob")[1]}


def http(url: str, token: str | None = None, **headers: str) -> httpx.Client:
    if token:
        headers["Authorization"] = f"Bearer {token}"
    return httpx.Client(
        base_url=url, headers=headers, timeout=60, follow_redirects=False, verify=TLS
    )


def test_a_tokens_hook_cannot_make_the_server_read_its_files(server, tmp_path, tokens) -> None:
    url, _ = server
    owned = transcript(tmp_path / "owners.jsonl", SECRET)  # a file only the server may read
    payload = {"session_id": "owners", "transcript_path": str(owned), "cwd": str(tmp_path)}
    with http(url, tokens["bob"]) as bob:
        for event in ("import", "Stop", "PostToolUse", "SessionStart"):
            refused = bob.post(f"/v1/hooks/{event}", json={**payload, "source": "resume"})
            assert refused.status_code == 403, (event, refused.text)
        assert SECRET not in bob.post("/v1/sessions/owners/replay", json={}).text
        assert bob.post("/v1/search", json={"query": SECRET}).json()["hits"] == []


def test_a_hook_sent_with_a_users_token_falls_back_to_the_full_command(
    memory, tmp_path, tokens, monkeypatch
) -> None:
    owned = transcript(tmp_path / "mine.jsonl", "my own prompt")
    payload = json.dumps({"session_id": "mine", "transcript_path": str(owned)}).encode()
    monkeypatch.setenv("AIRSSPEC_TOKEN", tokens["bob"])
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(payload)))
    served = Served(memory, local_user="owner", background=False)
    with serving(served, discover=True):
        assert light.dispatch(["-w", str(memory.root), "hook", "Stop"]) is None
    assert sys.stdin.read() == payload.decode()  # left for the full command to read


@contextlib.contextmanager
def signed_in(url: str, token: str) -> Iterator[httpx.Client]:
    """A browser signed in to the viewer with ``token`` (by the sign-in form, as a person)."""
    with http(url) as browser:
        answer = browser.post("/login", data={"token": token}, headers={"Origin": url})
        assert answer.status_code == 303 and COOKIE in browser.cookies, answer.text
        yield browser


def test_the_viewers_cookie_does_not_authenticate_the_api(server, tokens) -> None:
    url, _ = server  # a page of another local port is the same site: SameSite does not stop it
    with signed_in(url, tokens["alice"]) as browser:
        assert browser.get("/").status_code == 200  # the viewer: yes
        written = browser.post(
            "/v1/sessions/csrf/events",
            content=json.dumps({"events": EVENTS}),
            headers={"Content-Type": "text/plain"},
        )
        assert written.status_code == 401, written.text
        assert browser.post("/mcp", json={}).status_code == 401
        forged = browser.post(  # as a browser sends it: with the page's origin
            "/v1/sessions/csrf/events",
            content=json.dumps({"events": EVENTS}),
            headers={"Content-Type": "text/plain", "Origin": "http://127.0.0.1:1"},
        )
        assert forged.status_code == 403, forged.text


def test_a_name_rebound_to_loopback_reaches_nothing(server, tokens) -> None:
    url, _ = server  # a page of evil.example whose name now resolves to 127.0.0.1
    port = url.rsplit(":", 1)[1]
    for name in ("evil.example", "127.0.0.1.evil.example", "localhost.evil.example"):
        with http(url, tokens["alice"], Host=f"{name}:{port}") as rebound:
            assert rebound.get("/v1/health").status_code == 403, name
            assert rebound.get("/v1/sessions").status_code == 403, name
    for host in (f"localhost:{port}", f"127.0.0.1:{port}", "localhost", f"127.1.2.3:{port}"):
        with http(url, tokens["alice"], Host=host) as local:
            assert local.get("/v1/sessions").status_code == 200, host


def test_a_form_of_another_origin_cannot_sign_in_or_out(server, tokens) -> None:
    url, _ = server
    with http(url) as browser:
        forged = browser.post(
            "/login", data={"token": tokens["bob"]}, headers={"Origin": "http://127.0.0.1:1"}
        )
        assert forged.status_code == 403 and COOKIE not in forged.cookies
        own = browser.post("/login", data={"token": tokens["bob"]}, headers={"Origin": url})
        assert own.status_code == 303 and COOKIE in own.cookies


def test_a_token_in_the_query_string_is_for_the_viewers_sign_in_only(server, tokens) -> None:
    url, _ = server  # a url's token ends up in logs and histories: the API never takes it
    with http(url) as anyone:
        assert anyone.get(f"/v1/sessions?token={tokens['alice']}").status_code == 401


def test_signing_out_is_a_form_not_a_link(server, tokens) -> None:
    url, _ = server
    with signed_in(url, tokens["alice"]) as browser:
        assert browser.get("/logout").status_code == 405  # an <img src> of any page
        assert browser.get("/").status_code == 200


def test_the_viewers_cookie_is_never_the_token(server, tokens) -> None:
    url, _ = server  # a browser sends a host's cookies to every port of it: any other local
    # server a page leads the browser to reads them, and the token would open the API and /mcp
    with signed_in(url, tokens["alice"]) as browser:
        held = browser.cookies[COOKIE]
        assert tokens["alice"] not in held and held not in tokens["alice"]
        with http(url, held) as thief:  # what another port saw, sent as a bearer token
            assert thief.get("/v1/sessions").status_code == 401
            assert thief.post("/mcp", json={}).status_code == 401


def test_signing_out_ends_the_sign_in_wherever_its_cookie_went(server, tokens) -> None:
    url, _ = server
    with signed_in(url, tokens["alice"]) as browser, http(url) as copy:
        copy.cookies.set(COOKIE, browser.cookies[COOKIE])  # read by a server of another port
        assert copy.get("/").status_code == 200
        assert browser.post("/logout", headers={"Origin": url}).status_code == 303
        assert copy.get("/").status_code == 303  # to the sign-in page
        assert browser.get("/").status_code == 303


def test_a_revoked_token_signs_its_browser_out(server, memory, tokens) -> None:
    url, _ = server
    with signed_in(url, tokens["bob"]) as browser:
        assert browser.get("/").status_code == 200
        store = TokenStore(memory.root)
        store.revoke(next(e.id for e in store.entries() if e.user == "bob"))
        assert browser.get("/").status_code == 303


def test_a_sign_in_ends_after_its_time(memory, tokens, monkeypatch) -> None:
    served = Served(memory, local_user="owner", background=False)
    now = [1000.0]
    monkeypatch.setattr(core, "monotonic", lambda: now[0])
    held = served.sign_in(tokens["alice"])
    assert served.signed_in(held) == tokens["alice"]
    now[0] += core.SIGN_IN_SECONDS + 1
    assert served.signed_in(held) is None
    assert served.signed_in("made-up") is None and served.signed_in("") is None


def test_signing_in_again_and_again_ends_only_ones_own_oldest_sign_ins(memory, tokens) -> None:
    """A token holds at most ``SIGN_INS_PER_TOKEN`` sign-ins (its oldest ends): a user who
    signs in thousands of times never signs another user out."""
    served = Served(memory, local_user="owner", background=False)
    bobs = served.sign_in(tokens["bob"])
    alices = [served.sign_in(tokens["alice"]) for _ in range(core.SIGN_INS_PER_TOKEN * 40)]
    assert served.signed_in(bobs) == tokens["bob"]
    kept = [h for h in alices if served.signed_in(h) is not None]
    assert kept == alices[-core.SIGN_INS_PER_TOKEN :]


def test_a_connection_that_never_finishes_its_request_head_is_closed(
    memory, tokens, monkeypatch
) -> None:
    """A client that opens a connection and sends nothing, or part of a head, or the part of
    its next head after an answer, is closed once ``HEAD_SECONDS`` have passed (uvicorn alone
    held such a connection without end); a whole request on another connection is answered
    meanwhile."""
    from airsspec.serve import app

    monkeypatch.setattr(app, "HEAD_SECONDS", 0.5)
    served = Served(memory, local_user="owner", background=False)
    with serving(served) as where:
        host, port = where["url"].removeprefix("http://").rsplit(":", 1)
        request = f"GET /v1/health HTTP/1.1\r\nHost: {host}:{port}\r\n\r\n".encode()

        def connection(first: bytes) -> socket.socket:
            held = socket.create_connection((host, int(port)))
            held.settimeout(30)  # the test's bound: the server closes it long before
            if first:
                held.sendall(first)
            return held

        silent = connection(b"")
        partial = connection(f"GET / HTTP/1.1\r\nHost: {host}:{port}\r\nX-a: ".encode())
        after = connection(request)
        answer = b""
        while not answer.endswith(b"}"):  # the whole answer: its head, then its JSON body
            answer += after.recv(65536)
        assert answer.startswith(b"HTTP/1.1 200 ")  # answered, kept alive
        after.sendall(b"GET /v1/health HTTP/1.1\r\n")  # and the next head never finishes
        with http(where["url"]) as anyone:
            assert anyone.get("/v1/health").status_code == 200
        for held in (silent, partial, after):
            with held:
                assert held.recv(65536) == b""  # closed by the server, nothing answered


def test_a_request_beyond_max_connections_is_answered_503(tmp_path, monkeypatch) -> None:
    """With ``[serve] max_connections`` connections open (each answered once, then holding
    part of its next head), a request on one more is answered 503 and closed; the held ones
    are answered as ever, and once they are closed a new connection is answered again."""
    monkeypatch.setenv("AIRSSPEC_COLD_EMBEDDER", "hash")
    monkeypatch.setenv("AIRSSPEC_SERVE_MAX_CONNECTIONS", "2")
    with Memory.open(tmp_path / "ws", create=True) as memory:
        served = Served(memory, local_user="owner", background=False)
        with serving(served) as where:
            host, port = where["url"].removeprefix("http://").rsplit(":", 1)
            head = f"GET /v1/health HTTP/1.1\r\nHost: {host}:{port}\r\n"

            def answer(conn: socket.socket, until_closed: bool) -> bytes:
                got = b""
                while chunk := conn.recv(65536):
                    got += chunk
                    if not until_closed and got.endswith(b"}"):  # its head, its JSON body
                        break
                return got

            def ask(text: str) -> bytes:
                with socket.create_connection((host, int(port)), 30) as conn:
                    conn.sendall(text.encode())
                    return answer(conn, until_closed=True)

            held: list[socket.socket] = []
            try:
                for _ in range(2):
                    conn = socket.create_connection((host, int(port)), 30)
                    held.append(conn)
                    conn.sendall(f"{head}\r\n".encode())
                    # answered: the server holds it (kept alive), then part of the next head
                    assert answer(conn, until_closed=False).startswith(b"HTTP/1.1 200 ")
                    conn.sendall(head.encode())
                refused = ask(f"{head}Connection: close\r\n\r\n")
                assert refused.startswith(b"HTTP/1.1 503 "), refused[:200]
                assert b"connection: close" in refused.lower()
                for conn in held:  # each one's head finished: answered, then closed by the
                    conn.sendall(b"Connection: close\r\n\r\n")  # server (its count dropped)
                    assert answer(conn, until_closed=True).startswith(b"HTTP/1.1 200 ")
            finally:
                for conn in held:
                    conn.close()
            again = ask(f"{head}Connection: close\r\n\r\n")
            assert again.startswith(b"HTTP/1.1 200 "), again[:200]


def test_a_body_trickled_in_is_answered_408_and_closed(memory, tokens, monkeypatch) -> None:
    """A body whose next part has not arrived ``BODY_SECONDS`` after the one before, on the
    sign-in form (open to anyone) and on the API, is answered 408 and its connection closed;
    nothing is appended. A stream's wait for its client (no body) is never timed."""
    from airsspec.serve import app

    monkeypatch.setattr(app, "BODY_SECONDS", 0.5)
    served = Served(memory, local_user="owner", background=False)
    before = snapshot(memory.log_dir)
    with serving(served) as where:
        host, port = where["url"].removeprefix("http://").rsplit(":", 1)
        origin = f"http://{host}:{port}"
        sent = (
            ("/login", "", "application/x-www-form-urlencoded", b"token=airs_"),
            ("/v1/sessions/s1/events", tokens["alice"], "application/json", b'{"events": ['),
        )
        for path, auth, kind, part in sent:
            with socket.create_connection((host, int(port))) as held:
                held.settimeout(30)  # the test's bound: the server answers long before
                head = (
                    f"POST {path} HTTP/1.1\r\nHost: {host}:{port}\r\nOrigin: {origin}\r\n"
                    f"Authorization: Bearer {auth}\r\nContent-Type: {kind}\r\n"
                    "Content-Length: 100\r\n\r\n"
                )
                held.sendall(head.encode() + part)  # and the rest never comes
                answer = b""
                while chunk := held.recv(65536):  # until the server closes it
                    answer += chunk
            assert answer.startswith(b"HTTP/1.1 408 "), (path, answer[:200])
            assert b"nothing more arrived" in answer and b"connection: close" in answer.lower()
    assert snapshot(memory.log_dir) == before


def test_a_body_trickled_a_byte_at_a_time_is_answered_408_and_closed(
    memory, tokens, monkeypatch
) -> None:
    """A body whose every part comes within ``BODY_SECONDS`` of the one before, but whose
    whole comes slower than ``MIN_BODY_RATE`` (a byte now and then, on the sign-in form open
    to anyone), is answered 408 and closed too: each part's bound alone held it without end."""
    from airsspec.serve import app

    monkeypatch.setattr(app, "BODY_SECONDS", 0.5)
    monkeypatch.setattr(app, "MIN_BODY_RATE", 100)
    served = Served(memory, local_user="owner", background=False)
    with serving(served) as where:
        host, port = where["url"].removeprefix("http://").rsplit(":", 1)
        origin = f"http://{host}:{port}"
        with socket.create_connection((host, int(port))) as held:
            head = (
                f"POST /login HTTP/1.1\r\nHost: {host}:{port}\r\nOrigin: {origin}\r\n"
                "Content-Type: application/x-www-form-urlencoded\r\n"
                "Content-Length: 100000\r\n\r\n"
            )
            held.sendall(head.encode())
            held.settimeout(0.2)
            answer = b""
            deadline = time.monotonic() + 10  # the test's bound: cut within a second
            while not answer and time.monotonic() < deadline:
                try:
                    held.sendall(b"t")  # a byte every 0.2 s: each part well in time
                    answer = held.recv(65536)
                except TimeoutError:
                    continue
                except OSError:
                    break
            cut = bool(answer)  # answered while the bytes still came
            held.settimeout(30)
            with contextlib.suppress(OSError):
                while chunk := held.recv(65536):
                    answer += chunk
    assert cut, "still reading a body trickled in after 10 s"
    assert answer.startswith(b"HTTP/1.1 408 "), answer[:200]
    assert b"connection: close" in answer.lower()


def test_a_body_too_large_is_refused_before_it_is_read(server, tokens) -> None:
    url, _ = server
    with http(url, tokens["alice"]) as alice:
        big = b'{"events": [' + b" " * (api.MAX_BODY + 1) + b"]}"
        refused = alice.post("/v1/sessions/s1/events", content=big)
        assert refused.status_code == 413, refused.text[:200]
        mcp = alice.post("/mcp", content=big, headers={"Accept": "application/json"})
        assert mcp.status_code == 413

        def chunks():
            for _ in range(api.MAX_BODY // 65536 + 2):
                yield b" " * 65536

        chunked = alice.post("/v1/sessions/s1/events", content=chunks())  # no length given
        assert chunked.status_code == 413, chunked.text[:200]
    with http(url) as anyone:  # the sign-in form is open to anyone
        assert anyone.post("/login", content=big).status_code == 413
    with http(url, tokens["alice"]) as alice:
        deep = b"[" * 100_000 + b"]" * 100_000
        assert alice.post("/v1/sessions/s1/events", content=deep).status_code == 400


@pytest.mark.parametrize(
    "request_bytes",
    [
        b"GET /v1/sessions HTTP/1.1\r\nAuthorization: Bearer \xe9\xe9\r\n",
        b"GET /?token=%C3%A9 HTTP/1.1\r\n",
        b"GET / HTTP/1.1\r\nCookie: airsspec_token=\xe9\r\n",
    ],
)
def test_a_token_that_is_not_ascii_is_refused_not_a_server_error(server, request_bytes) -> None:
    url, _ = server
    port = int(url.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port), 30) as conn:
        conn.sendall(request_bytes + b"Host: 127.0.0.1\r\nConnection: close\r\n\r\n")
        answer = b""
        while chunk := conn.recv(65536):
            answer += chunk
    status = int(answer.split(b" ", 2)[1])
    assert status in (303, 401), answer[:200]


def test_a_hooks_budget_out_of_bounds_is_refused(server) -> None:
    url, served = server
    with http(url, served.local_token) as owner:
        for budget in ("-5", "99999999999999999999999"):
            answer = owner.post(
                f"/v1/hooks/SessionStart?budget={budget}", json={"session_id": "s1"}
            )
            assert answer.status_code == 400, (budget, answer.text)


def test_scopes_a_caller_invents_are_not_all_kept(server, tokens) -> None:
    url, served = server
    with http(url, tokens["bob"]) as bob:
        for n in range(MAX_VIEWS + 20):
            answer = bob.get("/v1/sessions", headers={"X-Airsspec-Agent": f"agent-{n}"})
            assert answer.status_code == 200
    assert len(served._views) <= MAX_VIEWS


def test_scope_holds_for_every_route_and_spelling(server, memory, tokens) -> None:
    url, _ = server
    with http(url, tokens["alice"]) as alice:
        assert alice.post("/v1/sessions/s1/events", json={"events": EVENTS}).status_code == 200
    spellings = ["s1", "S1", "%73%31", "..%2fs1", "s1%00", "airsspec.memory"]
    with http(url, tokens["bob"], **{"X-Airsspec-User": "alice"}) as bob:
        for name in spellings:
            for op in ("replay", "context"):
                answer = bob.post(f"/v1/sessions/{name}/{op}", json={"budget": 100})
                assert SECRET not in answer.text, (name, op)
                assert answer.status_code < 500 and "Traceback" not in answer.text
            page = bob.get(f"/sessions/{name}")
            assert SECRET not in page.text and "Traceback" not in page.text
        for path in ("/", "/search?q=secret", "/learnings", "/verify", "/v1/sessions"):
            assert SECRET not in bob.get(path).text and "s1" not in bob.get(path).text, path
        for path in ("/v1/verify", "/v1/search"):
            answer = bob.post(path, json={"query": "secret plan"})
            assert SECRET not in answer.text, path
        assert bob.post("/v1/sessions/s1/replay", json={}).status_code in (403, 404)
        appended = bob.post("/v1/sessions/s1/events", json={"events": EVENTS})
        assert appended.status_code == 404  # alice's: as if it were not there


def test_pages_forbid_framing_and_scripts_of_other_origins(server, tokens) -> None:
    url, _ = server
    with http(url, tokens["alice"]) as alice:
        page = alice.get("/")
    assert page.headers["x-frame-options"] == "DENY"
    assert "script-src 'self'" in page.headers["content-security-policy"]
    assert page.headers["x-content-type-options"] == "nosniff"


def test_a_name_that_starts_like_loopback_is_beyond_it(memory: Memory) -> None:
    served = Served(memory, local_user="owner", background=False)
    with pytest.raises(ServeError):  # it may resolve anywhere: tokens needed, as for any host
        check_exposure(served, "127.0.0.1.evil.example", None)
    check_exposure(served, "127.0.0.2", None)


def write_state(memory: Memory, info: dict, mode: int = 0o600) -> Path:
    path = memory.workspace.state_dir / "serve.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(info))
    os.chmod(path, mode)
    return path


def test_the_client_ignores_a_discovery_file_off_loopback(memory: Memory) -> None:
    base = {"pid": os.getpid(), "token": "airs_local_x", "socket": None}
    for url in ("http://10.1.2.3:80", "http://example.com:8750", "http://0.0.0.0:8750"):
        write_state(memory, {**base, "url": url})
        assert light.find_server(str(memory.root)) is None, url
    write_state(memory, {**base, "url": "http://127.0.0.1:8750"})
    assert light.find_server(str(memory.root)) is not None  # the file as the server writes it


def test_the_client_ignores_a_discovery_file_others_could_write(memory: Memory, tmp_path) -> None:
    info = {"pid": os.getpid(), "token": "airs_local_x", "url": "http://127.0.0.1:8750"}
    path = write_state(memory, info, 0o666)
    assert light.find_server(str(memory.root)) is None  # anyone may have written it
    elsewhere = tmp_path / "planted.json"
    elsewhere.write_text(json.dumps(info))
    os.chmod(elsewhere, 0o600)
    path.unlink()
    path.symlink_to(elsewhere)
    assert light.find_server(str(memory.root)) is None  # a link: not the server's own file


def test_the_client_ignores_a_discovery_file_whose_pid_is_another_users(
    memory: Memory, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_state(memory, {"pid": 4242, "token": "t", "url": "http://127.0.0.1:8750"})

    def kill(pid: int, sig: int) -> None:
        raise PermissionError(1, "Operation not permitted")  # the pid is another user's now

    monkeypatch.setattr(light.os, "kill", kill)
    assert light.find_server(str(memory.root)) is None


def test_the_discovery_file_is_written_through_no_planted_link(memory, tmp_path) -> None:
    served = Served(memory, local_user="owner", background=False)
    target = tmp_path / "victim.txt"
    target.write_text("untouched\n")
    state = memory.workspace.state_dir
    state.mkdir(parents=True, exist_ok=True)
    (state / f"serve.json.{os.getpid()}.tmp").symlink_to(target)
    path = write_discovery(served, {"url": "http://127.0.0.1:1", "socket": None})
    assert target.read_text() == "untouched\n"
    assert not path.is_symlink() and path.stat().st_mode & 0o777 == 0o600
    assert json.loads(path.read_text())["token"] == served.local_token


def test_the_client_reports_a_garbage_answer_without_a_traceback(memory, capsys) -> None:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    port = listener.getsockname()[1]
    import threading

    def answer() -> None:
        conn, _ = listener.accept()
        conn.recv(65536)
        conn.sendall(b"HTTP/1.1 200 OK\r\n\r\n<html>not json")
        conn.close()

    thread = threading.Thread(target=answer, daemon=True)
    thread.start()
    write_state(memory, {"pid": os.getpid(), "token": "t", "url": f"http://127.0.0.1:{port}"})
    code = light.dispatch(["-w", str(memory.root), "query", "x", "--json"])
    thread.join(10)
    listener.close()
    assert code == 1 and "airsspec: error:" in capsys.readouterr().err
