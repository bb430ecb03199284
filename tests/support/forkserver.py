"""An ``airsspec`` command for shell scripts under test that starts from an already imported CLI.

The docs test runs each example as written in ``bash``, where ``airsspec`` is a program on the
``PATH`` that pipes, ``$(...)``, ``&`` and ``kill`` treat as any other. Starting Python and
importing the CLI for each of its hundred commands was most of that test's time. Here
``airsspec`` is a tiny client (``python -IS``, nothing of the project imported) that hands
its argv, working directory, environment and its three standard streams (the file descriptors
themselves) to a server process holding the CLI imported; the server forks a process that runs
the command on those streams as ``python -m airsspec`` would (``airsspec.__main__.run``) and
reports how it ended. Every command is still a process of its own, with its own exit status;
a signal sent to the client (``kill $SERVER``) is passed on to the command.

Only modules that start no thread are imported before the fork (``PREIMPORTED``): the server
stays single-threaded (lancedb starts threads when imported, so each command that needs it
imports it itself).
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

CLIENT = """\
import json, os, signal, socket, struct, sys
sock = socket.socket(socket.AF_UNIX)
sock.connect({socket!r})
request = json.dumps([{prefix!r} + sys.argv[1:], os.getcwd(), dict(os.environ)]).encode()
socket.send_fds(sock, [struct.pack("!I", len(request)) + request], [0, 1, 2])
stream = sock.makefile("rb")
pid = int(stream.readline())
for number in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
    signal.signal(number, lambda number, frame: os.kill(pid, number))
status = int(stream.readline())
if os.WIFSIGNALED(status):
    signal.signal(os.WTERMSIG(status), signal.SIG_DFL)
    os.kill(os.getpid(), os.WTERMSIG(status))
sys.exit(os.waitstatus_to_exitcode(status))
"""


PYTHON = "--python-example"  # the first argument of ``python-example CODE`` (see ``_run``)

# What most commands import first: the CLI, the facade and what validates and counts (the event
# catalog, DuckDB, the token counter). None starts a thread when imported (lancedb, pyarrow and
# numpy do: each command that needs them imports them itself); ``_serve`` checks it.
PREIMPORTED = (
    "airsspec.__main__",
    "airsspec.client",
    "airsspec.cli",
    "airsspec.memory.core",
    "eventlog.schema.catalog",
    "projections.tokens",
    "tiktoken",
    "duckdb",
)


def _serve(path: str) -> None:
    """Accept clients on ``path`` until killed: per client, a watcher process forks the
    command, tells the client its pid, waits for it and tells how it ended."""
    import importlib

    for module in PREIMPORTED:
        importlib.import_module(module)
    threads = len(os.listdir("/proc/self/task"))
    if threads != 1:  # a thread's locks would be copied held into every command
        raise SystemExit(f"the fork server has {threads} threads after its imports: fork is unsafe")

    listener = socket.socket(socket.AF_UNIX)
    listener.bind(path)
    listener.listen(64)
    print("ready", flush=True)
    signal.signal(signal.SIGCHLD, _reap)
    while True:
        conn, _ = listener.accept()
        if os.fork() == 0:
            listener.close()
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            _watch(conn)
        conn.close()


def _reap(number: int, frame: object) -> None:
    """Collect the watchers that ended (their time is then counted in this process's)."""
    with contextlib.suppress(ChildProcessError):
        while os.waitpid(-1, os.WNOHANG)[0]:
            pass


def _watch(conn: socket.socket) -> None:
    """One client: receive its request and streams, run the command in a child, report."""
    import json
    import struct

    head, fds, _, _ = socket.recv_fds(conn, 1 << 20, 3)
    (size,) = struct.unpack("!I", head[:4])
    body = head[4:]
    while len(body) < size:
        body += conn.recv(size - len(body))
    argv, cwd, environ = json.loads(body)
    pid = os.fork()
    if pid == 0:
        conn.close()
        _run(argv, cwd, environ, fds)
    for fd in fds:
        os.close(fd)
    conn.sendall(f"{pid}\n".encode())
    _, status = os.waitpid(pid, 0)
    conn.sendall(f"{status}\n".encode())
    os._exit(0)


def _run(argv: list[str], cwd: str, environ: dict[str, str], fds: list[int]) -> None:
    """The command, in this forked process, as a new ``airsspec`` process would run it."""
    code = 1
    try:
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
            os.close(fd)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        os.chdir(cwd)
        os.environ.clear()
        os.environ.update(environ)
        sys.stdin = open(0, encoding="utf-8", closefd=False)  # noqa: SIM115
        sys.stdout = open(1, "w", encoding="utf-8", closefd=False)  # noqa: SIM115
        sys.stderr = open(2, "w", encoding="utf-8", errors="backslashreplace", closefd=False)  # noqa: SIM115
        from airsspec.__main__ import run

        try:
            if argv[:1] == [PYTHON]:  # an example's code, as ``python -c CODE`` runs it
                sys.argv = ["-c", *argv[2:]]
                exec(compile(argv[1], "<string>", "exec"), {"__name__": "__main__"})
                code = 0
            else:
                sys.argv = ["airsspec", *argv]
                code = run()
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
            if isinstance(exc.code, str):
                print(exc.code, file=sys.stderr)
    except BaseException:
        import traceback

        traceback.print_exc()
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
        with contextlib.suppress(Exception):
            sys.stderr.flush()
        os._exit(code)


@contextlib.contextmanager
def airsspec_on_path(folder: Path, env: dict[str, str]) -> Iterator[Path]:
    """A folder holding the ``airsspec`` client, its server running with ``env``; the folder
    goes first on a ``PATH``. On leaving, the server and every command it started (one process
    group) are killed."""
    folder.mkdir(parents=True, exist_ok=True)
    path = str(folder / "cli.sock")
    server = subprocess.Popen(
        [sys.executable, "-m", "tests.support.forkserver", path],
        env=env,
        stdout=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        assert server.stdout is not None and server.stdout.readline() == b"ready\n"
        for name, prefix in (("airsspec", []), ("python-example", [PYTHON])):
            client = folder / name
            script = CLIENT.format(socket=path, prefix=prefix)
            client.write_text(f"#!{sys.executable} -IS\n{script}")
            client.chmod(0o755)
        yield folder
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(server.pid, signal.SIGKILL)
        server.wait(timeout=60)


if __name__ == "__main__":
    _serve(sys.argv[1])
