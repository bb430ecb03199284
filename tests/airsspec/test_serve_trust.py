"""Whom ``airsspec serve`` trusts, and what its doors leave behind: admin and user tokens, a
token file read with the one name rule and never through a link, identities carried in headers
exactly (a name outside ASCII arrives as itself), a viewer signed in only by its own page, no
answer kept in a cache or naming a server path, one server per workspace (and ``watch`` naming
it), a socket path that is never someone's file, and the light client splitting and printing as
the full command does."""

from __future__ import annotations

import io
import json
import os
import socket
import sys
from pathlib import Path

import pytest

from airsspec import client as light
from airsspec.cli import main
from airsspec.daemon import Daemon
from airsspec.memory import Memory
from airsspec.serve.app import COOKIE, bind, claim, remove_state, serving
from airsspec.serve.core import Served
from airsspec.serve.tokens import TokenStore
from eventlog.errors import DaemonBusyError, ServeError, TokenError, UnsafePathError
from tests.airsspec.test_serve_hostile import http

EVENTS = [{"type": "user", "content": "the plan for the upload limit"}]


@pytest.fixture
def memory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("AIRSSPEC_COLD_EMBEDDER", "hash")
    for name in ("USER", "AGENT", "PROJECT", "TOKEN"):
        monkeypatch.delenv(f"AIRSSPEC_{name}", raising=False)
    with Memory.open(tmp_path / "ws", create=True) as memory:
        yield memory


def cli(memory: Memory, *argv: str) -> int:
    return main(["-w", str(memory.root), *argv])


# ---------------------------------------------------------------------------- admin tokens


def test_an_admin_token_sees_the_whole_workspace_and_a_users_token_its_own(server, memory):
    url, _ = server
    memory.append_many("unowned", EVENTS)  # written without a user: the team's
    memory.scoped(user="alice").append_many("sa", EVENTS)
    memory.scoped(user="bob").append_many("sb", EVENTS)
    store = TokenStore(memory.root)
    admin = store.create("root", admin=True)[1]
    alice = store.create("alice")[1]
    with http(url, admin) as client:
        everything = {s["session"] for s in client.get("/v1/sessions").json()}
        narrowed = client.get("/v1/sessions", headers={"X-Airsspec-User": "alice"}).json()
    with http(url, alice) as client:
        mine = {s["session"] for s in client.get("/v1/sessions").json()}
    assert everything == {"unowned", "sa", "sb"}
    assert [s["session"] for s in narrowed] == ["sa", "unowned"]
    assert mine == {"sa", "unowned"}


def test_the_servers_local_token_is_an_admin_and_the_only_local_one(memory) -> None:
    served = Served(memory, local_user="owner", background=False)
    assert served.local.admin and served.local.local
    _entry, token = TokenStore(memory.root).create("root", admin=True)
    principal = served.principal(token)
    assert principal is not None and principal.admin and not principal.local


def test_the_token_commands_make_and_list_admins(memory, capsys) -> None:
    assert cli(memory, "token", "create", "--user", "root", "--admin", "--json") == 0
    made = json.loads(capsys.readouterr().out)
    assert made["admin"] is True and made["user"] == "root"
    assert cli(memory, "token", "create", "--user", "ana") == 0
    capsys.readouterr()
    assert cli(memory, "token", "list", "--json") == 0
    listed = {e["user"]: e["admin"] for e in json.loads(capsys.readouterr().out)}
    assert listed == {"root": True, "ana": False}
    assert cli(memory, "token", "list") == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[2] for line in lines] == ["admin", "user"]


def test_a_token_file_written_before_admins_still_loads(memory) -> None:
    path = memory.root / "auth" / "tokens.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    old = {"id": "0a1b2c3d", "user": "ana", "read_only": False, "sha256": "0" * 64}
    path.write_text(json.dumps({"tokens": [{**old, "created": "2026-01-01T00:00:00Z"}]}))
    (entry,) = TokenStore(memory.root).entries()
    assert entry.user == "ana" and entry.admin is False


# ---------------------------------------------------------------------------- the token file


@pytest.mark.parametrize("user", ["../../etc", "Ana", "a b", ""])
def test_a_token_entry_whose_user_is_not_a_name_makes_the_file_damaged(
    server, memory, capsys, user
) -> None:
    url, _ = server
    store = TokenStore(memory.root)
    token = store.create("ana")[1]
    data = json.loads(store.path.read_text())
    data["tokens"].append({**data["tokens"][0], "id": "ffffffff", "user": user})
    store.path.write_text(json.dumps(data))
    with pytest.raises(TokenError, match="damaged token file"):
        store.entries()
    assert cli(memory, "token", "list") == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("airsspec: error: ")
    with http(url, token) as client:
        answer = client.get("/v1/sessions")
    assert answer.status_code == 503
    assert answer.headers["content-type"] == "application/problem+json"
    assert "token file" in answer.json()["detail"] and "damaged" in answer.json()["detail"]
    assert str(memory.root) not in answer.text


def test_a_broken_token_file_is_a_json_problem_not_a_server_error(server, memory) -> None:
    url, _ = server
    path = memory.root / "auth" / "tokens.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("{not json")
    with http(url, "airs_whatever") as client:
        answer = client.get("/v1/sessions")
        page = client.get("/", headers={"Authorization": ""})
    assert answer.status_code == 503 and answer.json()["status"] == 503
    assert page.status_code == 303  # no token at all: the sign-in page, as always


@pytest.mark.parametrize("linked", ["auth", "auth/tokens.json"])
def test_token_create_refuses_a_linked_token_file(memory, tmp_path, capsys, linked) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    if linked == "auth":
        (memory.root / "auth").symlink_to(elsewhere, target_is_directory=True)
    else:
        (memory.root / "auth").mkdir()
        (memory.root / "auth" / "tokens.json").symlink_to(elsewhere / "tokens.json")
    with pytest.raises(UnsafePathError):
        TokenStore(memory.root).create("ana")
    assert cli(memory, "token", "create", "--user", "ana") == 2
    assert capsys.readouterr().err.startswith("airsspec: error: ")
    assert list(elsewhere.iterdir()) == []


def test_a_revoke_names_a_full_id_or_a_prefix_of_six(memory) -> None:
    store = TokenStore(memory.root)
    entry = store.create("ana")[0]
    with pytest.raises(TokenError, match="at least 6"):
        store.revoke(entry.id[0])
    with pytest.raises(TokenError):
        store.revoke(entry.id[:5])
    assert len(store.entries()) == 1
    assert store.revoke(entry.id[:6]).id == entry.id
    other = store.create("ana")[0]
    assert store.revoke(other.id).id == other.id and store.entries() == []


# ---------------------------------------------------------------------------- identities


def test_a_non_ascii_user_through_the_light_client_is_recorded_exactly(
    memory, monkeypatch, capsys
) -> None:
    served = Served(memory, local_user="owner", background=False)
    monkeypatch.setenv("AIRSSPEC_USER", "josé")
    monkeypatch.setenv("AIRSSPEC_AGENT", "ağent")
    monkeypatch.setattr(
        sys, "stdin", io.TextIOWrapper(io.BytesIO(b'{"type":"user","content":"x"}'))
    )
    with serving(served, discover=True):
        assert light.dispatch(["-w", str(memory.root), "append", "s1"]) == 0
    assert "appended 1 record(s)" in capsys.readouterr().out
    owner = memory.scopes.owner("s1")
    assert (owner.user, owner.agent) == ("josé", "ağent")
    started = next(iter(memory.replay("s1")))
    assert started.user == "josé"


@pytest.mark.parametrize(
    "raw",
    [b"jos\xc3\xa9", b"..%2F..", b"%2E%2E", b"jos%E9", b"Ana", b"a%20b"],
)
def test_a_scope_header_that_is_not_an_encoded_name_is_refused(server, memory, raw) -> None:
    url, served = server
    host, port = url.removeprefix("http://").split(":")
    request = (
        b"GET /v1/sessions HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
        + f"Authorization: Bearer {served.local_token}\r\n".encode()
        + b"X-Airsspec-User: "
        + raw
        + b"\r\n\r\n"
    )
    with socket.create_connection((host, int(port)), 30) as sock:
        sock.sendall(request)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 400"), answer[:200]
    detail = json.loads(body)["detail"]
    assert "x-airsspec-user" in detail and "\n" not in detail


# ---------------------------------------------------------------------------- the viewer


def test_a_token_in_a_url_never_signs_a_browser_in(server, memory) -> None:
    url, _ = server
    token = TokenStore(memory.root).create("ana")[1]
    with http(url) as browser:
        answer = browser.get(f"/?token={token}")
        assert answer.status_code == 303 and answer.headers["location"] == "/login"
        assert COOKIE not in answer.cookies and COOKIE not in browser.cookies


def test_signing_in_is_accepted_only_from_our_own_origin(server, memory) -> None:
    url, _ = server
    token = TokenStore(memory.root).create("ana")[1]
    with http(url) as browser:  # an <img>-less, Origin-less post: a page cannot be told apart
        assert browser.post("/login", data={"token": token}).status_code == 403
        cross = {"Sec-Fetch-Site": "cross-site"}
        assert browser.post("/login", data={"token": token}, headers=cross).status_code == 403
        assert COOKIE not in browser.cookies
        same = {"Sec-Fetch-Site": "same-origin"}
        answer = browser.post("/login", data={"token": token}, headers=same)
        assert answer.status_code == 303 and COOKIE in answer.cookies
    with http(url) as browser:
        answer = browser.post("/login", data={"token": token}, headers={"Origin": url})
        assert answer.status_code == 303 and COOKIE in answer.cookies


def test_the_login_page_says_how_to_get_an_admin_token(server) -> None:
    url, _ = server
    with http(url) as browser:
        page = browser.get("/login").text
    assert "airsspec token create --user NAME --admin" in page
    assert "airsspec token create --user NAME</code>" in page


def test_no_page_or_answer_is_kept_in_a_cache(server, memory) -> None:
    url, served = server
    with http(url, served.local_token) as client:
        for path in ("/", "/learnings", "/search?q=x", "/v1/sessions", "/sessions/nope"):
            assert client.get(path).headers.get("cache-control") == "no-store", path
        assert client.post("/v1/search", json={"query": "x"}).headers["cache-control"] == "no-store"
    with http(url) as anyone:
        assert anyone.get("/login").headers.get("cache-control") == "no-store"


def test_a_missing_session_is_answered_without_a_server_path(server, memory) -> None:
    url, served = server
    with http(url, served.local_token) as client:
        page = client.get("/sessions/nope")
        api = client.post("/v1/sessions/nope/replay", json={})
    assert page.status_code == 404 and api.status_code == 404
    for answer in (page, api):
        assert str(memory.root) not in answer.text and "/contexts/" not in answer.text
    assert api.json()["detail"] == "no session 'nope' in this workspace"


# ---------------------------------------------------------------------------- one server


def test_a_second_server_on_the_workspace_refuses_naming_the_first(memory) -> None:
    first = Served(memory, local_user="owner", background=False)
    second = Served(memory, local_user="owner", background=False)
    with serving(first, discover=True) as where:
        before = (memory.state_dir / "serve.json").read_bytes()
        with pytest.raises(ServeError, match=f"pid {os.getpid()}") as refused:
            claim(second)
        assert where["url"] in str(refused.value)
        remove_state(second)  # the other server's file is not its to remove
        assert (memory.state_dir / "serve.json").read_bytes() == before
    assert not (memory.state_dir / "serve.json").exists()


def test_a_dead_servers_discovery_file_is_taken_over_saying_so(memory, caplog) -> None:
    served = Served(memory, local_user="owner", background=False)
    path = memory.state_dir / "serve.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"url": "http://127.0.0.1:1", "pid": 2**22 + 7, "token": "x"}))
    held = claim(served)
    try:
        assert "taking over" in caplog.text and str(2**22 + 7) in caplog.text
    finally:
        os.close(held)


def test_watch_beside_serve_names_the_server(memory) -> None:
    served = Served(memory, local_user="owner")
    served.start()
    try:
        assert served.background is not None and served.background.held
        with pytest.raises(DaemonBusyError, match=rf"held by airsspec serve \(pid {os.getpid()}\)"):
            Daemon(memory).acquire()
    finally:
        served.stop()
    watcher = Daemon(memory)
    watcher.acquire()
    try:
        with pytest.raises(DaemonBusyError, match="another 'airsspec watch'"):
            Daemon(memory).acquire()
    finally:
        watcher.release()


# ---------------------------------------------------------------------------- listening


def test_a_socket_path_that_holds_a_file_is_never_removed(memory, tmp_path) -> None:
    victim = tmp_path / "s1.jsonl"
    victim.write_bytes(b"a session's log\n")
    with pytest.raises(ServeError, match="not a socket"):
        bind("127.0.0.1", 0, str(victim))
    assert victim.read_bytes() == b"a session's log\n"
    folder = tmp_path / "folder"
    folder.mkdir()
    with pytest.raises(ServeError, match="not a socket"):
        bind("127.0.0.1", 0, str(folder))
    assert folder.is_dir()


def test_a_live_socket_is_refused_and_a_stale_one_replaced(tmp_path) -> None:
    path = str(tmp_path / "serve.sock")
    live = bind("127.0.0.1", 0, path)
    try:
        with pytest.raises(ServeError, match="already answers"):
            bind("127.0.0.1", 0, path)
    finally:
        live.close()  # the file stays: a server that died
    assert Path(path).exists()
    again = bind("127.0.0.1", 0, path)
    again.close()


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["serve", "--port", "99999"], "not a port"),
        (["serve", "--port", "-1"], "not a port"),
        (["serve", "--host", ""], "--host is empty"),
    ],
)
def test_serve_refuses_an_impossible_address_in_one_line(memory, capsys, argv, said) -> None:
    try:
        code = cli(memory, *argv)
    except SystemExit as exc:  # argparse's refusal
        code = exc.code
    err = capsys.readouterr().err
    assert code == 2 and said in err and err.count("\n") == 1, err
    assert not (memory.state_dir / "serve.json").exists()


def test_an_empty_host_is_refused_even_with_tokens(memory) -> None:
    with pytest.raises(ServeError, match="empty"):
        bind("", 0, None)


# ---------------------------------------------------------------------------- the light client


def test_the_light_client_splits_lines_as_the_full_command_does(memory, monkeypatch) -> None:
    served = Served(memory, local_user="owner", background=False)
    two = b'{"type":"user","content":"a"}\r{"type":"user","content":"b"}\n'
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(two)))
    with serving(served, discover=True):
        # not JSON on the full command's terms: the full command says what is wrong
        assert light.dispatch(["-w", str(memory.root), "append", "s1"]) is None
    assert "s1" not in memory.sessions.names()
    assert sys.stdin.buffer.read() == two  # left for the full command


class _Closed(io.StringIO):
    def write(self, text: str) -> int:
        raise BrokenPipeError(32, "Broken pipe")

    def fileno(self) -> int:
        return self._fd

    _fd = -1


def test_a_closed_stdout_is_not_a_server_error(memory, monkeypatch, capsys, tmp_path) -> None:
    served = Served(memory, local_user="owner", background=False)
    memory.append_many("s1", EVENTS)
    sink = tmp_path / "sink"
    with open(sink, "w") as kept:
        closed = _Closed()
        closed._fd = kept.fileno()  # what is written after the close goes nowhere
        with serving(served, discover=True):
            monkeypatch.setattr(sys, "stdout", closed)
            code = light.dispatch(["-w", str(memory.root), "query", "plan", "--json"])
            monkeypatch.undo()
    assert code == 0
    assert "error" not in capsys.readouterr().err


@pytest.mark.s3
@pytest.mark.slow
def test_a_server_on_a_bucket_projects_another_machines_append(
    tmp_path, monkeypatch, moto_endpoint, bucket_url
) -> None:
    from tests.conftest import bucket_config, wait_for

    monkeypatch.setenv("AIRSSPEC_COLD_EMBEDDER", "hash")
    here = bucket_config(tmp_path / "here", bucket_url, moto_endpoint)
    there = bucket_config(tmp_path / "there", bucket_url, moto_endpoint)
    with (
        Memory.open(config=here, create=True) as mine,
        Memory.open(config=there, create=True) as other,
    ):
        served = Served(mine, local_user="owner")
        served.start()
        try:
            assert served.background is not None and served.background.held
            other.append_many("remote", [{"type": "user", "content": "written over there"}])

            def projected() -> bool:  # read from disk: ``hot`` would project it itself
                files = (mine.state_dir / "hot").glob("remote*")
                return any(b"written over there" in f.read_bytes() for f in files if f.is_file())

            assert wait_for(projected, 60), "the server never followed the bucket"
        finally:
            served.stop()
