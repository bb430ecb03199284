"""The S3 bucket of the tests (and of the benchmarks and the demo): a moto server on
loopback, run in a process of its own (``python tests/support/s3.py PORT``), a new bucket per
test, the ``[storage]`` section naming it, and the two machines' writers of the object-log
test.

The server serves one request at a time: see ``serve_moto``."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

KEYS = {"access_key_id": "testing", "secret_access_key": "testing", "region": "us-east-1"}


@contextlib.contextmanager
def moto_server() -> Iterator[tuple[str, int]]:
    """A moto S3 server on a free loopback port: its endpoint and pid. Stopped on exit."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(
        [sys.executable, str(Path(__file__).resolve()), str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    endpoint = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                urllib.request.urlopen(endpoint + "/moto-api/", timeout=1).read()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("the moto server did not start") from None
                time.sleep(0.05)
        yield endpoint, proc.pid
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def serve_moto(port: int) -> None:
    """moto's S3 server on 127.0.0.1, one request at a time. moto checks a write's condition
    (``If-None-Match``, ``If-Match``) and then writes, without a lock: two creates of one key
    arriving together could both succeed (the likely cause of one acknowledged record missing
    from one of three unserialized 60 s runs of ``--writers-check``), which no store that
    enforces the condition allows. Serialized, the condition holds."""
    import threading

    from moto.moto_server.werkzeug_app import (
        DomainDispatcherApplication,
        MotoRequestHandler,
        create_backend_app,
    )
    from werkzeug.serving import run_simple

    os.environ.setdefault("MOTO_PORT", str(port))
    app = DomainDispatcherApplication(create_backend_app)
    lock = threading.Lock()

    def serialized(environ: dict, start_response: Any) -> list[bytes]:
        with lock:
            return list(app(environ, start_response))

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    run_simple("127.0.0.1", port, serialized, threaded=True, request_handler=MotoRequestHandler)


def storage_section(url: str, endpoint: str) -> str:
    """The ``[storage]`` section of an ``airsspec.toml`` naming bucket ``url`` on the moto
    server at ``endpoint``."""
    return (
        f'[storage]\nurl = "{url}"\nendpoint = "{endpoint}"\nregion = "{KEYS["region"]}"\n'
        f'access_key_id = "{KEYS["access_key_id"]}"\n'
        f'secret_access_key = "{KEYS["secret_access_key"]}"\n'
    )


def new_bucket(endpoint: str) -> str:
    """Create an empty bucket; its url (with a prefix)."""
    name = f"b-{uuid.uuid4().hex[:12]}"
    urllib.request.urlopen(urllib.request.Request(f"{endpoint}/{name}", method="PUT"))
    return f"s3://{name}/bench"


def two_machines(url: str, endpoint: str, folder: Path, seconds: float) -> dict[str, list]:
    """Run 2 machines (caches under ``folder``) x 2 writer processes appending to a shared
    and a private session each for ``seconds``; every record acknowledged, by session, as
    (seq, id). A writer that fails raises ``RuntimeError``."""
    repo = Path(__file__).resolve().parents[2]
    cmd = [sys.executable, "-m", "tests.eventlog.test_object_store", url, endpoint]
    names = [(m, w) for m in "AB" for w in "12"]
    procs = [
        subprocess.Popen(
            [*cmd, str(folder / f"machine-{m}"), str(seconds), f"{m}{w}"],
            cwd=repo,
            stdout=subprocess.PIPE,
            env={**os.environ, "PYTHONPATH": str(repo)},
        )
        for m, w in names
    ]
    acked: dict[str, list[tuple[int, str]]] = {}
    for (machine, writer), proc in zip(names, procs, strict=True):
        out = proc.communicate(timeout=seconds + 120)[0]
        if proc.returncode != 0:
            raise RuntimeError(f"writer {machine}{writer} exited with {proc.returncode}")
        for line in out.decode().splitlines():
            session, seq, id_ = line.split()
            acked.setdefault(session, []).append((int(seq), id_))
    return acked


if __name__ == "__main__":
    serve_moto(int(sys.argv[1]))
