"""The light client: hooks and the CLI's hot commands through a running ``airsspec serve``.

A command started by a hook or an agent pays for Python's start-up and for what it imports;
loading the log's models, the settings and the tiers costs more than the work itself. When a
server runs for the workspace, ``dispatch`` sends the command there instead, importing only a
few modules of the standard library: ``hook``, ``append``, ``context``, ``search`` (``query``),
``sessions``, ``status``, ``replay`` and ``learnings list``; text answers are printed by the
full command's renderers (``airsspec.render``), so both paths print the same lines. It
finds the server by the workspace's discovery file (``state/serve.json``, written by the
server, mode 0600, holding its address and a token for local clients); a file whose pid is
dead is ignored.

Whatever the fast path cannot do exactly as the full command would, it leaves to it (returns
None): no server, an option it does not know, input that is not JSON, or a request the server
refuses as invalid (the full command then prints its own message; nothing was written, since
an append is all or none). ``AIRSSPEC_NO_SERVER=1`` turns the fast path off.

The scope the CLI takes from AIRSSPEC_USER/AGENT/PROJECT travels in ``X-Airsspec-User/-Agent/
-Project`` headers, percent-encoded UTF-8 (a header's bytes are read as latin-1: a name outside
ASCII sent raw would arrive as another name). Input lines end at ``\n`` only, as the full
command's (``eventlog.jsonl_lines``).
"""

from __future__ import annotations

import io
import json
import os
import stat
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from airsspec.arguments import whole_number
from airsspec.discovery import find_config

if TYPE_CHECKING:  # imported when a server is found: a command without one never connects
    import socket
    from collections.abc import Callable

STATE = os.path.join("state", "serve.json")
TIMEOUT_S = 120.0


class Server:
    """A running server, as its discovery file describes it.

    Requests are written on a plain socket (HTTP/1.1, one request per connection): the
    standard library's ``http.client`` imports the ``email`` package, which alone costs a hook
    a good part of Python's own start-up."""

    def __init__(self, info: dict, folder: str = "") -> None:
        self.url = str(info["url"])
        self.socket = info.get("socket")
        self.token = os.environ.get("AIRSSPEC_TOKEN") or info.get("token")
        self.folder = folder  # the workspace folder, as this machine names it
        self.answered = False  # whether a request of this command was answered (it ran)

    def _connect(self) -> socket.socket:
        import socket

        if self.socket:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.settimeout(TIMEOUT_S)
            sock.connect(self.socket)
            return sock
        host, _, port = self.url.split("://", 1)[1].rpartition(":")
        # as bytes (getaddrinfo takes them; typeshed says str only): a str host is encoded with
        # the idna codec, a module of its own to import
        address = (host.strip("[]").encode("ascii"), int(port))
        return socket.create_connection(address, TIMEOUT_S)  # type: ignore[arg-type]

    def request(self, method: str, path: str, body: object = None) -> tuple[int, object]:
        """Send one request; the status and the decoded JSON answer."""
        data = b"" if body is None else json.dumps(body).encode()
        scope = "".join(
            f"X-Airsspec-{name}: {quoted(value)}\r\n"
            for name in ("User", "Agent", "Project")
            if (value := os.environ.get(f"AIRSSPEC_{name.upper()}", ""))
        )  # the scope the CLI would take from the same variables (the server checks them)
        head = (
            f"{method} {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n"
            f"Authorization: Bearer {self.token}\r\nContent-Type: application/json\r\n"
            f"{scope}Content-Length: {len(data)}\r\n\r\n"
        )
        with self._connect() as sock:
            sock.sendall(head.encode() + data)
            chunks = []
            while chunk := sock.recv(65536):
                chunks.append(chunk)
        answer = b"".join(chunks)
        header, _, payload = answer.partition(b"\r\n\r\n")
        try:
            status = int(header.split(b" ", 2)[1])
        except (IndexError, ValueError) as exc:
            raise _client_error(f"not an HTTP answer: {answer[:80]!r}") from exc
        if b"transfer-encoding: chunked" in header.lower():
            raise _client_error("a chunked answer (this client reads whole answers)")
        # every route answers JSON: a 503 that is not is uvicorn's own, at max_connections,
        # and nothing of the command ran, unless an earlier request of it was answered (an
        # append's, before asking for its records): the full command would run it again
        busy, self.answered = status == 503 and not self.answered, True
        try:
            return status, json.loads(payload or b"null")
        except ValueError as exc:
            if busy:
                raise _Busy from exc
            raise _client_error(f"answered {status}, not JSON: {payload[:80]!r}") from exc


class _Busy(Exception):
    """The server held ``[serve] max_connections`` connections and refused the command's first
    request before any route read it: nothing ran, so the full command runs it."""


_UNRESERVED = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-~")


def quoted(value: str) -> str:
    """``value``'s UTF-8 percent-encoded as ``urllib.parse.quote(value, safe="")`` does (the
    server decodes it with ``unquote``), without importing ``urllib``. A value that is not
    valid text (a lone surrogate from undecodable environment bytes) keeps its bytes: the
    server refuses it as a name."""
    data = value.encode("utf-8", "surrogateescape")
    return "".join(chr(b) if b in _UNRESERVED else f"%{b:02X}" for b in data)


def _client_error(message: str) -> OSError:
    """A ``ClientError``, its module imported only when one is raised (a hook's start-up
    does not pay for every error class)."""
    from airsspec.errors import ClientError

    return ClientError(message)


def _alive(pid: object) -> bool:
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: the pid was reused, ours is gone
        return False
    return True


def _workspace(workspace: str | None, config: str | None, start: str | None = None) -> str:
    """The workspace folder the CLI would open (the same rules, without loading settings),
    looking for ``airsspec.toml`` from ``start`` (default: the current folder) up."""
    if workspace is not None:
        return workspace
    if config is None:
        found = find_config(Path(os.path.abspath(start or os.getcwd())))
        config = None if found is None else str(found)
    path = os.environ.get("AIRSSPEC_WORKSPACE_PATH")
    if config is None:
        return os.path.join(os.getcwd(), path or ".airsspec")
    if path is None:
        from airsspec.tomlfile import read_toml

        section = read_toml(config).get("workspace", {})
        path = section.get("path", ".airsspec") if isinstance(section, dict) else None
        if not isinstance(path, str):  # the full command names the mistake
            raise ValueError(f"{config}: [workspace] path is not text")
    return os.path.join(os.path.dirname(os.path.abspath(config)), path)


def find_server(
    workspace: str | None = None, config: str | None = None, start: str | None = None
) -> Server | None:
    """The server running for the workspace, or None."""
    try:
        folder = _workspace(workspace, config, start)
        # Not through a link, and only as the server writes it: this user's, 0600. A file
        # someone else could write would send the token (AIRSSPEC_TOKEN too) where it says.
        fd = os.open(os.path.join(folder, STATE), os.O_RDONLY | os.O_NOFOLLOW)
        with open(fd, encoding="utf-8") as file:
            st = os.fstat(file.fileno())
            if st.st_uid != os.getuid() or st.st_mode & 0o077 or not stat.S_ISREG(st.st_mode):
                return None
            info = json.load(file)
    except (OSError, ValueError):
        return None
    if not isinstance(info, dict) or not _alive(info.get("pid")) or "url" not in info:
        return None
    if not _local(info):
        return None
    return Server(info, os.path.realpath(folder))


def _local(info: dict) -> bool:
    """Whether the discovery file names a server of this machine: a Unix socket of this user,
    or a url on a loopback address (``airsspec serve`` writes no other)."""
    where = info.get("socket")
    if where:
        try:
            st = os.stat(str(where))
        except OSError:
            return False
        return st.st_uid == os.getuid() and stat.S_ISSOCK(st.st_mode)
    url = str(info["url"])
    if not url.startswith("http://"):
        return False
    host = url[7:].rpartition(":")[0]
    if host in ("localhost", "[::1]"):
        return True
    parts = host.split(".")
    return (
        len(parts) == 4
        and parts[0] == "127"
        and all(p.isdigit() and len(p) <= 3 and int(p) < 256 for p in parts)
    )


# ---------------------------------------------------------------------------- commands


def _parse(argv: list[str]) -> dict | None:
    """The options of a command the fast path serves, or None for anything else (a number
    read as the full command reads it: one it refuses is left to it)."""
    known: dict[str, dict[str, Callable[[str], object] | None]] = {
        "hook": {"--budget": whole_number, "--recall": whole_number},
        "append": {"--json": None},
        "sessions": {"--json": None},
        "status": {"--json": None},
        "replay": {"--from": whole_number, "--until": str, "--meta": None, "--json": None},
        "learnings": {"--session": str, "--all": None, "--json": None},
        "context": {"--budget": whole_number, "--query": str, "--format": str, "--json": None},
        "query": {
            "-k": whole_number,
            "--session": str,
            "--since": str,
            "--until": str,
            "--kind": list,
            "--json": None,
        },
    }
    known["search"] = known["query"]  # one command by two names
    parsed: dict = {"workspace": None, "config": None, "args": []}
    items = iter(argv)
    command = None
    for item in items:
        try:
            if command is None and item in ("-w", "--workspace", "-c", "--config"):
                parsed["workspace" if item in ("-w", "--workspace") else "config"] = next(items)
            elif command is None and item in known:
                command = item
            elif command is not None and item in known[command]:
                kind = known[command][item]
                if kind is None:
                    parsed[item] = True
                elif kind is list:
                    parsed.setdefault(item, []).append(next(items))
                else:
                    parsed[item] = kind(next(items))
            elif command is not None and (item == "-" or not item.startswith("-")):
                parsed["args"].append(item)
            else:
                return None
        except (StopIteration, ValueError):
            return None
    parsed["command"] = command
    if command is None or (parsed["workspace"] and parsed["config"]):
        return None  # -w with -c: the full command checks that they agree
    return parsed


def _stdin() -> bytes | None:
    """Standard input's bytes, left readable again for the full command if it runs after."""
    if sys.stdin is None:
        return None
    raw = sys.stdin.buffer.read()
    sys.stdin = io.TextIOWrapper(io.BytesIO(raw))
    return raw


def _fail(detail: object, code: int) -> int:
    print(f"airsspec: error: {detail}", file=sys.stderr)
    return code


class _StdoutClosed(Exception):
    """Standard output was closed by its reader (``| head``): the command's work is done,
    only its output is unwanted; never a failure of the server."""


def _out(text: str) -> None:
    """``text`` on standard output, flushed now: a closed pipe is noticed here, where it can
    be told from a failure of the connection to the server, not at the interpreter's exit."""
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except BrokenPipeError as exc:
        raise _StdoutClosed from exc


def _quiet() -> int:
    """After a closed standard output: the rest of the output goes nowhere, and the command
    exits 0, as the full command does (Python's own flush at exit would fail again)."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return 0


def _print(value: object) -> None:
    _out(json.dumps(value, indent=2, ensure_ascii=False) + "\n")


def _hook(server: Server, opts: dict) -> int | None:
    query = "&".join(
        f"{name}={opts[f'--{name}']}" for name in ("budget", "recall") if f"--{name}" in opts
    )
    path = f"/v1/hooks/{opts['args'][0]}" + (f"?{query}" if query else "")
    status, answer = server.request("POST", path, opts["payload"])
    if status == 403 and os.environ.get("AIRSSPEC_TOKEN"):
        return None  # a token may not have the server read files: the full command reads them
    if status != 200 or not isinstance(answer, dict):  # a hook never blocks Claude Code
        return _fail(answer.get("detail") if isinstance(answer, dict) else answer, 1)
    _out(answer["stdout"])  # what the hook command prints
    return 0


def _append(server: Server, opts: dict) -> int | None:
    if not 1 <= len(opts["args"]) <= 2:
        return None
    if opts["args"][1:] in ([], ["-"]):
        raw = _stdin()
    else:
        try:
            with open(opts["args"][1], "rb") as file:
                raw = file.read()
        except OSError:
            return None  # the full command names the file and the problem
    if raw is None:
        return None
    events = []
    from eventlog.jsonl_lines import jsonl_lines

    for line in jsonl_lines(raw):  # as the full command splits: the same records
        if line.strip():
            try:
                events.append(json.loads(line))
            except ValueError:
                return None
    if not events:
        return None
    session = opts["args"][0]
    status, answer = server.request("POST", f"/v1/sessions/{session}/events", {"events": events})
    if status != 200 or not isinstance(answer, dict):
        return None  # the full command validates and says what is wrong, line by line
    if opts.get("--json"):
        _, records = server.request(
            "POST",
            f"/v1/sessions/{session}/replay",
            {"from_seq": answer["seqs"][0], "limit": len(events)},
        )
        _print(records)
    else:
        first, last = answer["seqs"][0], answer["seqs"][-1]
        span = f"seq {first}" if first == last else f"seq {first}-{last}"
        _out(f"appended {answer['appended']} record(s) to {session} ({span})\n")
    return 0


def _context(server: Server, opts: dict) -> int | None:
    if len(opts["args"]) != 1:
        return None
    session = opts["args"][0]
    body: dict[str, object] = {"query": opts.get("--query"), "format": opts.get("--format", "text")}
    if "--budget" in opts:  # else the server's default, the full command's too
        body["budget"] = opts["--budget"]
    status, answer = server.request("POST", f"/v1/sessions/{session}/context", body)
    if status != 200 or not isinstance(answer, dict):
        return None
    truncated = answer.get("truncated") or []
    if truncated:  # as the full command says it
        cut = ", ".join(f"#{seq}" for seq in truncated)
        print(f"airsspec: note: shown cut to fit the budget: {cut}", file=sys.stderr)
    if opts.get("--json") or body["format"] != "text":
        key = "context" if body["format"] == "text" else "messages"
        head = {"session": answer["session"], "budget": answer["budget"], "truncated": truncated}
        _print({**head, "parts": answer.get("parts"), key: answer["context"]})
        return 0
    _out(f"{_printable(answer['context'])}\n")
    return 0


def _printable(text: str) -> str:
    """``text`` escaped as the full command escapes stored text (``eventlog.render.printable``),
    that module imported only when ``text`` holds a character it may escape (it loads the event
    models): every such character is one ``str.isprintable`` refuses."""
    if all(line.replace("\t", "").isprintable() for line in text.split("\n")):
        return text
    from eventlog.render import printable  # rare: control characters

    return printable(text)


def _query(server: Server, opts: dict) -> int | None:
    if len(opts["args"]) != 1:
        return None
    body = {
        "query": opts["args"][0],
        "k": opts.get("-k", 10),
        "session": opts.get("--session"),
        "since": opts.get("--since"),
        "until": opts.get("--until"),
        "kinds": opts.get("--kind"),
        "detail": True,  # the full provenance the command prints, not the agent tool's short one
    }
    status, answer = server.request("POST", "/v1/search", body)
    if status != 200 or not isinstance(answer, dict):
        return None
    if opts.get("--json"):
        _print(answer)
        return 0
    from airsspec.render import hits_text  # the full command's renderer

    _out(hits_text(answer, _printable))
    for warning in answer["warnings"]:
        print(f"warning: {warning}", file=sys.stderr)
    return 0


def _sessions(server: Server, opts: dict) -> int | None:
    if opts["args"]:
        return None
    status, answer = server.request("GET", "/v1/sessions")
    if status != 200 or not isinstance(answer, list):
        return None
    if opts.get("--json"):
        _print(answer)
        return 0
    if not answer or any(info.get("problem") for info in answer):
        return None  # the full command names the log folder, or escapes the problem it reports
    from airsspec.render import sessions_text  # the full command's renderer

    _out(sessions_text(answer))
    return 0


def _status(server: Server, opts: dict) -> int | None:
    if opts["args"]:
        return None
    status, answer = server.request("GET", "/v1/overview")
    if status != 200 or not isinstance(answer, dict):
        return None
    answer = {"workspace": server.folder, **answer}  # the server names no path of its own
    if opts.get("--json"):
        _print(answer)
        return 0
    from airsspec.render import status_text  # the full command's renderer

    _out(status_text(answer))
    return 0


def _replay(server: Server, opts: dict) -> int | None:
    if len(opts["args"]) != 1:
        return None
    session, from_seq = opts["args"][0], opts.get("--from", 1)
    body = {"until": opts.get("--until"), "stored": bool(opts.get("--json"))}
    body["meta"] = bool(opts.get("--meta"))
    while from_seq is not None:  # a page at a time: the server answers at most its limit
        status, answer = server.request(
            "POST", f"/v1/sessions/{session}/transcript", {**body, "from_seq": from_seq}
        )
        if status != 200 or not isinstance(answer, dict):
            if from_seq == opts.get("--from", 1):
                return None  # nothing shown yet: the full command says what is wrong
            return _fail(answer.get("detail") if isinstance(answer, dict) else answer, 1)
        _out("".join(f"{line}\n" for line in answer["lines"]))
        from_seq = answer["next"]
    return 0


def _learnings(server: Server, opts: dict) -> int | None:
    if opts["args"] not in ([], ["list"]):
        return None  # another action: the full command runs it
    status, answer = server.request(
        "POST", "/v1/learnings/query", {"reader": opts.get("--session")}
    )
    if status != 200 or not isinstance(answer, dict):
        return None
    from airsspec.render import learnings_shown, learnings_text  # the full command's

    shown = learnings_shown(answer["learnings"], every=bool(opts.get("--all")))
    if opts.get("--json"):
        _print({"now": answer["now"], "learnings": shown})
    else:
        _out(learnings_text(answer["now"], shown, _printable))
    return 0


def _trusted(start: str | None) -> bool:
    """Whether a hook run from ``start`` (default: the current folder) may go to a server:
    the nearest ``airsspec.toml`` is one this user trusted (``airsspec.trust``), as the full
    command asks; with none, the full command does nothing. A folder that cannot be looked
    at (a name too long, no permission) is the full command's to report, in one line."""
    try:
        found = find_config(Path(os.path.abspath(os.path.expanduser(start or os.getcwd()))))
    except OSError:
        return False
    if found is None:
        return False
    from airsspec import trust

    return trust.trusted(found)


def dispatch(argv: list[str]) -> int | None:
    """Run ``argv`` through a running server; None when the full command must run it."""
    if os.environ.get("AIRSSPEC_NO_SERVER"):
        return None
    opts = _parse(argv)
    if opts is None:
        return None
    start = None
    if opts["command"] == "hook":  # the payload names the project the hook runs in
        try:
            opts["payload"] = json.loads(_stdin() or b"{}")
        except (ValueError, RecursionError):
            return None
        if not isinstance(opts["payload"], dict) or len(opts["args"]) != 1:
            return None
        cwd = opts["payload"].get("cwd")
        start = cwd if isinstance(cwd, str) and cwd else None
        if opts["workspace"] is None and opts["config"] is None and not _trusted(start):
            return None  # the full command leaves a config this user did not trust alone
    server = find_server(opts["workspace"], opts["config"], start)
    if server is None:
        return None
    handler = {
        **{"hook": _hook, "append": _append, "context": _context, "replay": _replay},
        "learnings": _learnings,
        **{"query": _query, "search": _query, "sessions": _sessions, "status": _status},
    }
    try:
        return handler[opts["command"]](server, opts)
    except _StdoutClosed:
        return _quiet()
    except (ConnectionRefusedError, FileNotFoundError, _Busy):
        return None  # nothing was sent or read: the server went away or is full, the full
        # command does it
    except (OSError, ValueError) as exc:  # sent: running it again could repeat it
        return _fail(f"airsspec serve at {server.socket or server.url}: {exc}", 1)
