"""The light client: with ``airsspec serve`` running, hooks and the hot CLI commands go to it
without loading the heavy modules, and print what the full commands print; with no server (or
a dead one's discovery file) the commands run as they always did."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import threading
from pathlib import Path
from unittest import mock

import pytest

from airsspec import cli as full_cli
from airsspec.client import STATE
from airsspec.memory import CONTEXT_BUDGET, Memory
from airsspec.serve.app import serving, state_path
from airsspec.serve.core import Served
from eventlog.layout import Layout
from tests.conftest import REPO
from tests.support.cli import run_cli

# airsspec.cli: the full command's package (its ``__init__`` imports argparse and logging); the
# renderers the light client shares with it are a module of their own (``airsspec.render``)
HEAVY = ("pydantic", "eventlog.schema", "airsspec.memory", "airsspec.cli", "argparse")


def heavy(names) -> list[str]:
    """The heavy modules among ``names``."""
    return [n for n in names if any(n == h or n.startswith(h + ".") for h in HEAVY)]


@pytest.fixture
def workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("AIRSSPEC_COLD_EMBEDDER", "hash")
    with Memory.open(tmp_path, create=True) as memory:
        memory.append_many("s1", [{"type": "user", "content": "add rate limiting"}])
        memory.project(("cold",))
        yield memory


def airsspec(memory: Memory, *args: str, stdin: bytes = b"", server: bool = True):
    """Run the command; returns (exit code, stdout, stderr, what it imported or ran).

    With the server, in a process of its own (``-X importtime``): the subject is what the light
    client imports, the modules it leaves out. Without (``server=False``), the full command it is
    compared with, in this process (``run_cli``): the last item is then whether the full CLI's
    ``main`` ran, in place of its modules."""
    if not server:
        return full_command(memory.root, *args, stdin=stdin)
    env = {**os.environ, "PYTHONPATH": str(REPO), "AIRSSPEC_COLD_EMBEDDER": "hash"}
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "airsspec", "-w", str(memory.root), *args],
        input=stdin,
        capture_output=True,
        env=env,
        timeout=120,
        check=False,
    )
    err = done.stderr.decode()
    imported = {line.split("|")[-1].strip() for line in err.splitlines() if "import time:" in line}
    shown = "\n".join(line for line in err.splitlines() if "import time:" not in line)
    return done.returncode, done.stdout.decode(), shown, imported


def full_command(root: Path, *args: str, stdin: bytes = b"", cwd: Path | None = None):
    """The full command (``AIRSSPEC_NO_SERVER``) run in this process: (exit code, stdout,
    stderr, whether ``airsspec.cli.main`` ran, i.e. no server answered it)."""
    env = {"AIRSSPEC_NO_SERVER": "1", "AIRSSPEC_COLD_EMBEDDER": "hash"}
    argv = ("-w", str(root), *args) if cwd is None else args
    with mock.patch.object(full_cli, "main", wraps=full_cli.main) as main:
        done = run_cli(*argv, cwd=cwd or root, stdin=stdin, env=env)
    shown = "\n".join(done.stderr.decode().splitlines())  # its lines, as ``airsspec`` gives them
    return done.returncode, done.stdout.decode(), shown, main.called


@pytest.fixture
def served(workspace: Memory):
    with serving(Served(workspace, local_user="owner", background=False), discover=True):
        yield workspace


def test_the_client_loads_none_of_the_heavy_modules() -> None:
    code = "import sys, airsspec.client; print(sorted(sys.modules))"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, env=env, check=True)
    names = json.loads(loaded.stdout.decode().replace("'", '"'))
    assert not heavy(names)
    assert "http.client" not in names  # it brings the email package


@pytest.mark.slow
def test_hot_commands_through_the_server_print_what_the_full_commands_print(served) -> None:
    for args, stdin in [
        (("context", "s1", "--budget", "100"), b""),
        (("context", "s1", "--budget", "100", "--json"), b""),
        (("context", "s1", "--json"), b""),  # no budget: the one default of every door
        (("hook", "session-start"), json.dumps({"session_id": "new"}).encode()),
    ]:
        fast = airsspec(served, *args, stdin=stdin)
        full = airsspec(served, *args, stdin=stdin, server=False)
        assert fast[:3] == full[:3], args
        assert not heavy(fast[3]), args  # it went to the server
        assert full[3], args  # the full command ran
        if args == ("context", "s1", "--json"):
            assert json.loads(fast[1])["budget"] == CONTEXT_BUDGET == 4000
    appended = airsspec(served, "append", "s1", stdin=b'{"type": "user", "content": "more"}\n')
    assert appended[:2] == (0, "appended 1 record(s) to s1 (seq 2)\n")
    assert not heavy(appended[3])
    assert [r.content for r in served.replay("s1")] == ["add rate limiting", "more"]
    found = airsspec(served, "query", "rate limiting", "--json")
    assert json.loads(found[1])["hits"][0]["text"] == "add rate limiting"
    searched = airsspec(served, "search", "rate limiting", "--json")  # query's newer name
    assert json.loads(searched[1])["hits"][0]["text"] == "add rate limiting"
    assert not heavy(searched[3])  # it went to the server too


@pytest.mark.slow
def test_a_refused_append_is_reported_by_the_full_command_and_writes_nothing(served) -> None:
    bad = b'{"type": "user", "content": "fine"}\n{"type": "nope"}\n'
    fast = airsspec(served, "append", "s1", stdin=bad)
    full = airsspec(served, "append", "s1", stdin=bad, server=False)
    assert fast[:3] == full[:3]
    assert fast[0] == 2 and "<stdin>:2" in fast[2]
    assert len(list(served.replay("s1"))) == 1


@pytest.mark.slow
def test_a_number_the_full_command_refuses_is_not_taken_through_the_server(served) -> None:
    """The light client reads a number as the full command does (the digits 0-9 alone): one
    only Python's ``int`` takes is left to the full command, which refuses it (it was served
    as that number); a plain one is answered by the server."""
    for args in (
        ("context", "s1", "--budget", " 100"),
        ("replay", "s1", "--from", "+1"),
        ("search", "rate limiting", "-k", "\u0661"),
    ):
        fast = airsspec(served, *args)
        full = airsspec(served, *args, server=False)
        assert fast[:3] == full[:3], args
        assert fast[0] == 2 and "digits 0-9" in fast[2], (args, fast[2])
        assert heavy(fast[3]), args  # the full command ran, not the server
    plain = airsspec(served, "replay", "s1", "--from", "1")
    assert plain[0] == 0 and "add rate limiting" in plain[1] and not heavy(plain[3])


@pytest.mark.slow
def test_a_server_at_max_connections_leaves_the_command_to_the_full_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AIRSSPEC_COLD_EMBEDDER", "hash")
    monkeypatch.setenv("AIRSSPEC_SERVE_MAX_CONNECTIONS", "1")
    with Memory.open(tmp_path, create=True) as memory:
        memory.append_many("s1", [{"type": "user", "content": "add rate limiting"}])
        expected = airsspec(memory, "status", "--json", server=False)
        assert expected[0] == 0
        with serving(Served(memory, local_user="owner", background=False), discover=True) as at:
            host, port = at["url"].removeprefix("http://").rsplit(":", 1)
            head = f"GET /v1/health HTTP/1.1\r\nHost: {host}:{port}\r\n"
            with socket.create_connection((host, int(port)), 30) as held:
                held.sendall(f"{head}\r\n".encode())
                got = b""
                while not got.endswith(b"}"):  # answered: its head, its JSON body
                    got += held.recv(65536)
                held.sendall(head.encode())  # then part of its next head: held open
                code, out, err, imported = airsspec(memory, "status", "--json")
                served = airsspec(memory, "status", "--json")  # still full: the same again
            assert (code, out) == expected[:2], err
            assert "airsspec.cli" in imported  # the server refused it, the full command ran
            assert served[:2] == expected[:2]
            again = airsspec(memory, "status", "--json")  # the held connection closed
            assert again[:2] == expected[:2] and "airsspec.cli" not in again[3]


def _request_of(conn: socket.socket) -> bytes:
    """One whole HTTP request read from ``conn`` (its head, then Content-Length bytes)."""
    data = b""
    while b"\r\n\r\n" not in data:
        data += conn.recv(65536)
    head, _, body = data.partition(b"\r\n\r\n")
    length = re.search(rb"(?i)content-length: *(\d+)", head)
    assert length is not None
    while len(body) < int(length.group(1)):
        body += conn.recv(65536)
    return data


@pytest.mark.slow
def test_a_503_after_the_append_was_answered_never_appends_it_again(served) -> None:
    """``append --json`` asks twice: the append, then its records. A 503 that is not JSON on
    the second (the server full by then, or anything answering there) is an error: the append
    was done, so the full command never runs it again."""
    path = state_path(served)
    info = json.loads(path.read_text())
    real = info["url"].removeprefix("http://").rsplit(":", 1)
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]

    def proxy() -> None:  # the first request to the server, every later one answered 503
        with listener:
            conn, _ = listener.accept()
            with conn, socket.create_connection((real[0], int(real[1])), 30) as upstream:
                upstream.sendall(_request_of(conn))
                while chunk := upstream.recv(65536):
                    conn.sendall(chunk)
            conn, _ = listener.accept()
            with conn:
                _request_of(conn)
                conn.sendall(b"HTTP/1.1 503 Service Unavailable\r\nconnection: close\r\n\r\nbusy")

    thread = threading.Thread(target=proxy, daemon=True)
    thread.start()
    path.unlink()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as out:
        json.dump({**info, "url": f"http://127.0.0.1:{port}"}, out)
    event = b'{"type": "user", "content": "said once"}\n'
    code, out, err, imported = airsspec(served, "append", "s1", "--json", stdin=event)
    thread.join(30)
    assert not thread.is_alive()
    assert [r.content for r in served.replay("s1")] == ["add rate limiting", "said once"]
    assert code == 1 and out == "" and "airsspec.cli" not in imported, err
    assert err.startswith("airsspec: error: ") and "503" in err and len(err.splitlines()) == 1


@pytest.mark.slow
def test_a_dead_servers_discovery_file_is_ignored(workspace: Memory) -> None:
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, check=True
    )
    state = state_path(workspace)
    state.write_text(
        json.dumps(
            {"url": "http://127.0.0.1:9", "pid": int(dead.stdout), "token": "x", "socket": None}
        )
    )
    code, out, err, imported = airsspec(workspace, "context", "s1", "--budget", "100")
    assert (code, err) == (0, "") and "add rate limiting" in out
    assert "airsspec.cli.common" in imported  # the full command ran (the client imports none)


@pytest.mark.slow
def test_a_hook_finds_the_server_of_the_project_its_payload_names(served, tmp_path) -> None:
    payload = json.dumps({"session_id": "abc", "cwd": str(served.root.parent)}).encode()
    env = {**os.environ, "PYTHONPATH": str(REPO), "AIRSSPEC_COLD_EMBEDDER": "hash"}
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    fast = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "airsspec", "hook", "SessionStart"],
        cwd=elsewhere,
        input=payload,
        env=env,
        capture_output=True,
        timeout=120,
        check=False,
    )
    full = full_command(served.root, "hook", "SessionStart", stdin=payload, cwd=elsewhere)
    assert fast.returncode == full[0] == 0
    assert fast.stdout.decode() == full[1] and full[1]
    loaded = {line.split("|")[-1].strip() for line in fast.stderr.decode().splitlines()}
    assert not heavy(loaded) and full[3]  # the server answered; the full command ran


@pytest.mark.slow
def test_stored_control_characters_are_escaped_as_the_full_command_does(served) -> None:
    served.append_many("s1", [{"type": "user", "content": "red \x1b[31malert\x1b[0m\u202e"}])
    fast = airsspec(served, "context", "s1", "--budget", "200")
    full = airsspec(served, "context", "s1", "--budget", "200", server=False)
    assert fast[:3] == full[:3] and "\\x1b[31m" in fast[1]
    assert "\x1b" not in fast[1] and "\u202e" not in fast[1]


@pytest.mark.slow
def test_text_search_and_sessions_are_answered_by_the_server_as_the_full_command_prints(
    served,
) -> None:
    for args in (("sessions",), ("sessions", "--json"), ("search", "rate limiting")):
        fast = airsspec(served, *args)
        full = airsspec(served, *args, server=False)
        assert not heavy(fast[3]), args  # the server answered it
        assert full[3], args
        timing = re.compile(r", [0-9.]+ ms\)")  # how long this search took, on either side
        assert timing.sub(" ms)", fast[1]) == timing.sub(" ms)", full[1]), args
        assert fast[0] == full[0] == 0 and fast[2] == full[2] == "", args
    assert "add rate limiting" in fast[1] and fast[1].startswith("1 hit(s) for 'rate limiting'")


@pytest.mark.slow
def test_append_of_a_file_and_of_dash_goes_to_the_server(served, tmp_path_factory) -> None:
    events = tmp_path_factory.mktemp("input") / "events.jsonl"
    events.write_bytes(b'{"type": "user", "content": "from a file"}\n')
    by_file = airsspec(served, "append", "s1", str(events))
    by_dash = airsspec(served, "append", "s1", "-", stdin=b'{"type": "user", "content": "dash"}\n')
    assert by_file[:3] == (0, "appended 1 record(s) to s1 (seq 2)\n", "")
    assert by_dash[:3] == (0, "appended 1 record(s) to s1 (seq 3)\n", "")
    assert not heavy(by_file[3]) and not heavy(by_dash[3])  # the server appended them
    missing = airsspec(served, "append", "s1", str(events.with_name("none.jsonl")))
    assert missing[0] == 2 and "none.jsonl" in missing[2]  # the full command says what
    assert [r.content for r in served.replay("s1")][1:] == ["from a file", "dash"]


@pytest.mark.slow
def test_a_scoped_user_sees_through_the_server_only_what_the_full_command_shows(
    served, monkeypatch: pytest.MonkeyPatch
) -> None:
    served.sessions.start("alices", user="alice")
    served.append_many("alices", [{"type": "user", "content": "alice's rate limiting notes"}])
    served.sessions.start("bobs", user="bob")
    monkeypatch.setenv("AIRSSPEC_USER", "bob")
    for args in (("sessions", "--json"), ("search", "rate limiting", "--json")):
        fast = airsspec(served, *args)
        full = airsspec(served, *args, server=False)
        assert not heavy(fast[3]), args  # the server answered, for bob only
        assert "alices" not in fast[1] and "alice's" not in fast[1], args
        if args[0] == "sessions":
            assert fast[:3] == full[:3]
            assert "bobs" in fast[1]
    served.append_many("alices", [{"type": "user", "content": "more"}], project=False)
    status = (
        airsspec(served, "status", "--json"),
        airsspec(served, "status", "--json", server=False),
    )
    assert status[0][:3] == status[1][:3] and not heavy(status[0][3])
    assert "alices" not in status[0][1]  # alice's session is behind, not shown to bob
    for args in (("replay", "alices"), ("replay", "alices", "--json")):
        fast, full = airsspec(served, *args), airsspec(served, *args, server=False)
        assert fast[:3] == full[:3] and fast[0] != 0, args  # refused, as the full command says
        assert "alice's" not in fast[1] + fast[2], args


@pytest.mark.slow
def test_status_replay_and_learnings_are_answered_by_the_server_byte_for_byte(served) -> None:
    (action,) = served.append_many("s1", [{"type": "action", "tool": "grep", "params": {}}])
    answer = {"type": "observation", "action_id": action.id, "result": "found"}
    served.append_many("s1", [{**answer, "meta": {"k": "v" * 120}}])
    served.append_many("s1", [{"type": "user", "content": f"note {i}"} for i in range(1200)])
    served.learnings.add("always run the linter before a commit")
    served.learnings.add("prefer small pull requests, " + "long " * 30, kind="decision")
    for args in (
        ("status",),
        ("status", "--json"),
        ("replay", "s1"),
        ("replay", "s1", "--json"),
        ("replay", "s1", "--from", "2", "--until", "3", "--meta"),
        ("replay", "s1", "--until", "2099-01-01T00:00:00Z"),
        ("learnings",),
        ("learnings", "list", "--all", "--json"),
        ("learnings", "list", "--session", "s1"),
    ):
        fast = airsspec(served, *args)
        full = airsspec(served, *args, server=False)
        assert not heavy(fast[3]) and full[3], args  # the server answered it
        now = re.compile(r'(as of |"now": ")[0-9T:.Z-]+')  # when each was asked: learnings'
        assert now.sub("now", fast[1]) == now.sub("now", full[1]), args
        assert fast[0] == full[0] == 0 and fast[2] == full[2] == "" and fast[1], args
    replayed = airsspec(served, "replay", "s1", "--json")[1].splitlines()
    assert len(replayed) == 1203 and json.loads(replayed[-1])["content"] == "note 1199"
    shown = airsspec(served, "replay", "s1", "--from", "2", "--until", "3", "--meta")[1]
    assert "(answers #2)" in shown and "v" * 120 in shown


def test_the_client_looks_for_the_discovery_file_where_the_server_writes_it(
    workspace: Memory,
) -> None:
    """The client spells ``state/serve.json`` itself (importing the layout would cost every
    light command its imports): it must name the path ``Layout`` gives the server."""
    assert state_path(workspace) == Layout(workspace.root).serve_info_path
    assert workspace.root / STATE == state_path(workspace)
