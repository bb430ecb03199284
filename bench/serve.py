"""``airsspec serve`` under load: what one warm process gives agents and hooks.

1. Requests/s, p50 and p99 of append, context and search over HTTP with 1, 8 and 32 concurrent
   clients (each a keep-alive connection of its own), next to the same call made the way it is
   made without a server: one ``airsspec`` process per call (``AIRSSPEC_NO_SERVER=1``).
2. A hook (``airsspec hook import`` with its JSON on stdin, as Claude Code runs it) and an
   ``airsspec append`` through the server, next to ``python -c pass`` and to the same commands
   without a server, in the same run.
3. Time from an append to a search that finds it, while 8 other clients keep appending.

    python bench/serve.py [--requests 200] [--embedder minilm|hash]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from http.client import HTTPConnection
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.common import median_seconds, print_table  # noqa: E402

PY = sys.executable
WORDS = [
    *("parser", "upload", "limit", "bucket", "token", "cache"),
    *("index", "retry", "schema", "migration", "deploy"),
]


def start(workspace: Path, env: dict[str, str]) -> tuple[subprocess.Popen, dict]:
    proc = subprocess.Popen(
        [PY, "-m", "airsspec", "-w", str(workspace), "serve", "--port", "0"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    state = workspace / "state" / "serve.json"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if state.exists():
            info = json.loads(state.read_text())
            try:
                if call(info, "GET", "/v1/health")[0] == 200:
                    return proc, info
            except OSError:
                pass
        time.sleep(0.05)
    proc.kill()
    raise SystemExit("the server did not start")


def call(info: dict, method: str, path: str, body: object = None, conn=None):
    own = conn is None
    conn = conn or HTTPConnection(info["url"].split("://")[1], timeout=300)
    headers = {"Authorization": f"Bearer {info['token']}", "Content-Type": "application/json"}
    conn.request(method, path, None if body is None else json.dumps(body), headers)
    response = conn.getresponse()
    data = json.loads(response.read() or b"null")
    if own:
        conn.close()
    return response.status, data


def event(i: int) -> dict:
    text = " ".join(WORDS[(i * 7 + j) % len(WORDS)] for j in range(12))
    return {"type": "user" if i % 2 else "assistant", "content": f"step {i}: {text}"}


def requests_for(op: str, client: int, i: int) -> tuple[str, str, dict]:
    session = f"load-{client % 8}"
    if op == "append":
        return "POST", f"/v1/sessions/{session}/events", {"events": [event(i)]}
    if op == "context":
        return "POST", f"/v1/sessions/seed-{client % 4}/context", {"budget": 2000}
    return "POST", "/v1/search", {"query": f"{WORDS[i % len(WORDS)]} retry", "k": 5}


def load(info: dict, op: str, clients: int, total: int) -> tuple[float, float, float]:
    """(requests/s, p50 ms, p99 ms) of ``total`` requests shared by ``clients`` threads."""
    latencies: list[float] = []
    lock = threading.Lock()
    per = max(1, total // clients)

    def worker(client: int) -> None:
        conn = HTTPConnection(info["url"].split("://")[1], timeout=300)
        mine = []
        for i in range(per):
            method, path, body = requests_for(op, client, client * per + i)
            started = time.perf_counter()
            status, _ = call(info, method, path, body, conn)
            mine.append(time.perf_counter() - started)
            assert status == 200, (op, status)
        conn.close()
        with lock:
            latencies.extend(mine)

    threads = [threading.Thread(target=worker, args=(c,)) for c in range(clients)]
    started = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - started
    latencies.sort()
    p99 = latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))]
    return len(latencies) / wall, statistics.median(latencies) * 1000, p99 * 1000


def cli_seconds(workspace: Path, env: dict, op: str, repeats: int) -> float:
    """Median seconds of the same call as one CLI process, without the server."""
    env = {**env, "AIRSSPEC_NO_SERVER": "1"}
    args = {
        "append": (["append", "cli-base"], json.dumps(event(1)).encode()),
        "context": (["context", "seed-0", "--budget", "2000"], None),
        "search": (["query", "parser retry", "-k", "5", "--json", "--stale"], None),
    }[op]
    command = [PY, "-m", "airsspec", "-w", str(workspace), *args[0]]
    return median_seconds(
        lambda: subprocess.run(command, input=args[1], env=env, capture_output=True, check=True),
        repeats,
    )


def hook_rows(workspace: Path, env: dict, repeats: int) -> list[list[object]]:
    transcript = workspace.parent / "transcript.jsonl"
    line = {
        "type": "user",
        "uuid": "u1",
        "sessionId": "hook",
        "timestamp": "2026-11-01T10:00:01.000Z",
        "message": {"role": "user", "content": "Please add rate limiting"},
    }
    transcript.write_text(json.dumps(line) + "\n")
    payload = json.dumps({"session_id": "hook", "transcript_path": str(transcript)}).encode()
    hook = [PY, "-m", "airsspec", "-w", str(workspace), "hook", "import"]
    append = [PY, "-m", "airsspec", "-w", str(workspace), "append", "bench-append"]
    line = json.dumps(event(1)).encode() + b"\n"
    alone = {"AIRSSPEC_NO_SERVER": "1"}
    commands = {  # name: (argv, extra environment, standard input)
        "python -c pass (baseline)": ([PY, "-c", "pass"], {}, b""),
        "hook import via airsspec serve": (hook, {}, payload),
        "hook import without a server": (hook, alone, payload),
        "append via airsspec serve": (append, {}, line),
        "append without a server": (append, alone, line),
    }
    times: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(repeats):  # interleaved: the machine's load drifts alike for all of them
        for name, (command, extra, stdin) in commands.items():
            started = time.perf_counter()
            subprocess.run(
                command, input=stdin, env={**env, **extra}, capture_output=True, check=True
            )
            times[name].append(time.perf_counter() - started)
    medians = {name: statistics.median(values) for name, values in times.items()}
    bare = medians["python -c pass (baseline)"]
    return [[name, value * 1000, value / bare] for name, value in medians.items()]


def searchable(info: dict, rounds: int) -> tuple[float, float]:
    """Median and worst seconds from an append to a search that finds it, under 8 appenders."""
    stop = threading.Event()

    def appender(client: int) -> None:
        conn = HTTPConnection(info["url"].split("://")[1], timeout=300)
        i = 0
        while not stop.is_set():
            call(info, "POST", f"/v1/sessions/bg-{client}/events", {"events": [event(i)]}, conn)
            i += 1
        conn.close()

    threads = [threading.Thread(target=appender, args=(c,)) for c in range(8)]
    for t in threads:
        t.start()
    took = []
    try:
        for _ in range(rounds):
            marker = f"marker{uuid.uuid4().hex[:12]}"
            body = {"events": [{"type": "user", "content": f"the code word is {marker}"}]}
            started = time.perf_counter()
            call(info, "POST", "/v1/sessions/probe/events", body)
            while True:
                _, found = call(info, "POST", "/v1/search", {"query": marker, "k": 3})
                if any(marker in hit["text"] for hit in found["hits"]):
                    break
                time.sleep(0.02)
            took.append(time.perf_counter() - started)
    finally:
        stop.set()
        for t in threads:
            t.join()
    return statistics.median(took), max(took)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--requests", type=int, default=192, help="requests per row")
    parser.add_argument("--repeats", type=int, default=7, help="runs per process timing")
    parser.add_argument("--embedder", default="minilm", choices=("minilm", "hash"))
    args = parser.parse_args()
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "AIRSSPEC_COLD_EMBEDDER": args.embedder,
        "AIRSSPEC_LOG_DURABILITY": "batch",
    }
    with tempfile.TemporaryDirectory() as tmp:
        workspace = Path(tmp) / "ws"
        subprocess.run(
            [PY, "-m", "airsspec", "init", tmp], env=env, check=True, capture_output=True
        )
        workspace = Path(tmp) / ".airsspec"
        for s in range(4):
            lines = "\n".join(json.dumps(event(i)) for i in range(60)).encode()
            subprocess.run(
                [PY, "-m", "airsspec", "-w", str(workspace), "append", f"seed-{s}"],
                input=lines,
                env={**env, "AIRSSPEC_NO_SERVER": "1"},
                check=True,
                capture_output=True,
            )
        proc, info = start(workspace, env)
        try:
            rows = []
            for op in ("append", "context", "search"):
                single = cli_seconds(workspace, env, op, args.repeats) * 1000
                for clients in (1, 8, 32):
                    rate, p50, p99 = load(info, op, clients, args.requests)
                    rows.append([op, clients, rate, p50, p99, single, single / p50])
            print_table(
                f"HTTP API ({args.embedder} embedder, durability batch, {args.requests} "
                "requests per row); baseline: one airsspec process per call, no server",
                ["op", "clients", "req/s", "p50 ms", "p99 ms", "CLI ms (baseline)", "CLI / p50"],
                rows,
            )
            print_table(
                f"Hook and append latency, one process each (median of {args.repeats})",
                ["command", "ms", "x python -c pass"],
                hook_rows(workspace, env, args.repeats),
            )
            median, worst = searchable(info, 5)
            print_table(
                "Append to searchable, with 8 clients appending (background indexer)",
                ["median s", "worst s"],
                [[median, worst]],
            )
        finally:
            proc.terminate()
            proc.wait(60)


if __name__ == "__main__":
    main()
