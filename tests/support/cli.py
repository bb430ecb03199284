"""The ``airsspec`` command run in the test's own process: what a user's run prints and
returns, without paying Python's start-up and the project's imports on every call.

``run_cli`` runs what the installed command runs (``airsspec.__main__.run``: the light client
when a server answers for the workspace, else the full CLI) with the given arguments, working
directory, environment and standard input, and gives back its exit code and the bytes it
wrote on standard output and error, like ``subprocess.run(..., capture_output=True)``. What a
run changes in the process is put back after it: the working directory, ``os.environ``,
``sys.argv``, ``sys.path``, the standard streams, signal handlers and the logging set-up a
command (``watch``, ``serve``) configures for itself; and what the run left open for the
garbage collector (an SQLite connection in a reference cycle) is collected, closed as a
process's exit would close it, before the test looks at the files.

Tests whose subject is the process itself (kills, signals, forks, a closed standard stream,
imports at start-up, the installed entry point) run it with ``run_process``.
"""

from __future__ import annotations

import contextlib
import gc
import io
import logging
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

# Handlers a command may install (``serve`` and the daemon stop on these).
SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGPIPE)


@dataclass(frozen=True)
class Result:
    """What one run of the command did (the fields of ``subprocess.CompletedProcess``)."""

    args: list[str]
    returncode: int
    stdout: bytes = field(repr=False)
    stderr: bytes = field(repr=False)


class _Output(io.TextIOWrapper):
    """A standard stream writing into memory, readable once the run is over (closing it, as
    a command that closes its standard output does, keeps what was written)."""

    def __init__(self, errors: str) -> None:
        self.raw_bytes = io.BytesIO()
        super().__init__(self.raw_bytes, encoding="utf-8", errors=errors, write_through=True)

    def close(self) -> None:
        self.flush()

    def value(self) -> bytes:
        self.flush()
        return self.raw_bytes.getvalue()


@contextlib.contextmanager
def _process_state(cwd: Path, env: Mapping[str, str] | None, argv: list[str]) -> Iterator[None]:
    """The process as a new ``airsspec`` process would find it, put back afterwards."""
    saved_cwd, saved_environ = os.getcwd(), dict(os.environ)
    saved_argv, saved_path = sys.argv[:], sys.path[:]
    saved_streams = (sys.stdin, sys.stdout, sys.stderr)
    saved_signals = {sig: signal.getsignal(sig) for sig in SIGNALS}
    root = logging.getLogger()
    saved_logging = (root.handlers[:], root.level, logging.root.manager.disable)
    try:
        root.handlers = []  # pytest's log capture: a new process has none (see _WarningLine)
        os.chdir(cwd)
        os.environ.update(env or {})
        sys.argv = ["airsspec", *argv]
        yield
    finally:
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_environ)
        sys.argv, sys.path[:] = saved_argv, saved_path
        sys.stdin, sys.stdout, sys.stderr = saved_streams
        for sig, action in saved_signals.items():
            signal.signal(sig, action)
        for handler in root.handlers:
            if handler not in saved_logging[0]:
                handler.close()
        root.handlers[:] = saved_logging[0]
        root.setLevel(saved_logging[1])
        logging.disable(saved_logging[2])


def run_cli(
    *args: str,
    cwd: Path,
    stdin: bytes | None = None,
    env: Mapping[str, str] | None = None,
) -> Result:
    """Run ``airsspec ARGS`` in this process, as ``python -m airsspec ARGS`` would run in
    ``cwd`` with ``env`` added to the environment and ``stdin`` as its input (none: empty)."""
    from airsspec.__main__ import run

    if threading.current_thread() is not threading.main_thread():
        raise RuntimeError("run_cli changes the process's state: call it from the main thread")
    argv = [str(a) for a in args]
    modules = len(sys.modules)
    stdout, stderr = _Output("strict"), _Output("backslashreplace")
    with _process_state(Path(cwd), env, argv):
        sys.stdin = io.TextIOWrapper(io.BytesIO(stdin or b""), encoding="utf-8")
        sys.stdout, sys.stderr = stdout, stderr
        try:
            code = run()
        except SystemExit as exc:  # argparse's usage errors, --help, --version
            code = _exit_code(exc.code, stderr)
        with contextlib.suppress(ValueError):  # flushed as the interpreter does at exit
            stdout.flush()
        gc.collect()  # what the run left to be collected is closed now, as at a process's exit
        freeze_if_imported(modules)
    return Result(argv, code, stdout.value(), stderr.value())


def freeze_if_imported(modules: int) -> None:
    """Modules imported for the first time since ``len(sys.modules)`` was ``modules``
    (lancedb, DuckDB, the embedder...) live as long as the process: ``gc.freeze`` takes them,
    and whatever else is alive now, out of every later full collection, which would otherwise
    walk them all again (90 ms a collection once a worker has imported the cold tier)."""
    if len(sys.modules) > modules:
        gc.collect()
        gc.freeze()


def _exit_code(code: object, stderr: _Output) -> int:
    """The status ``sys.exit(code)`` gives the process (a message is printed, status 1)."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=stderr)
    return 1


def run_process(
    *args: str,
    cwd: Path,
    stdin: bytes | None = None,
    env: Mapping[str, str] | None = None,
    timeout: float = 120,
) -> subprocess.CompletedProcess[bytes]:
    """Run ``python -m airsspec ARGS`` in a process of its own, the way a user would: for
    tests of the process itself (what it imports, how it ends, its standard streams)."""
    return subprocess.run(
        [sys.executable, "-m", "airsspec", *map(str, args)],
        cwd=cwd,
        input=stdin,
        capture_output=True,
        env={**os.environ, **(env or {})},
        timeout=timeout,
        check=False,
    )
