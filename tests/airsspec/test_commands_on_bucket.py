"""Every command answers on a workspace whose log is in a bucket (``[storage] url``, a moto
server on loopback) exactly as on a local workspace holding the same log.

Both workspaces start from one log, byte for byte: written locally through the CLI, then copied
into the bucket as one object per session. Each command then runs as a subprocess on both, in
the order a user might (reads first, then what writes), and the two outputs are compared once
what differs by nature is masked: the workspace's path, new ids, times, hashes and durations.
Only ``serve`` is left out (it runs until stopped and answers over HTTP, through the same
``Memory``); ``mcp`` runs over stdio until its input ends; ``watch`` is started, seen to
project an append, stopped with SIGTERM and checked to leave nothing running.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.conftest import MCP_INITIALIZE, REPO, children, wait_for
from tests.support.cli import run_cli, run_process

pytestmark = [pytest.mark.s3, pytest.mark.slow]

FIXTURES = REPO / "tests" / "eventlog" / "fixtures"
EVENTS = [
    {"type": "user", "content": "The checkout test is flaky: it fails one run in five."},
    {"type": "assistant", "content": "I will rerun it with -x and read the first traceback."},
    {"type": "action", "tool": "bash", "params": {"cmd": "pytest tests/test_checkout.py -x"}},
    {"type": "observation", "result": "1 failed: TimeoutError in pay()", "is_error": True},
    {"type": "assistant", "content": "The payment stub times out; the retry budget is three."},
    {"type": "user", "content": "Always run the tests before committing, please."},
]
MCP_INPUT = b"".join(
    json.dumps(m).encode() + b"\n"
    for m in (
        MCP_INITIALIZE,
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
        {
            "jsonrpc": "2.0",
            "id": 3,
            "method": "tools/call",
            "params": {"name": "replay", "arguments": {"session": "s1"}},
        },
    )
)
HOOK_INPUT = json.dumps(
    {"session_id": "s1", "hook_event_name": "SessionStart", "source": "startup", "cwd": "."}
).encode()

# (id, arguments with {out} for a folder of the workspace's own, stdin)
COMMANDS: list[tuple[str, list[str], bytes | None]] = [
    ("verify", ["verify"], None),
    ("sessions", ["sessions"], None),
    ("replay", ["replay", "s1"], None),
    ("replay-json", ["replay", "s1", "--json"], None),
    ("seal", ["seal", "-o", "{out}/seal.json"], None),
    ("verify-against", ["verify", "--against", "{out}/seal.json"], None),
    ("export-import", ["export", "claude-code", "cc-3f1c2d4e-0000-4000-8000-000000000001"], None),
    ("export-parquet", ["export", "parquet", "{out}/parquet"], None),
    ("status-before", ["status", "--json"], None),
    ("project", ["project"], None),
    # the cold table is on the bucket: it takes no bytes on this machine's disk
    ("status", ["status", "--json"], None),
    ("hot", ["hot", "s1"], None),
    ("context", ["context", "s1", "--budget", "2000"], None),
    ("query", ["query", "flaky checkout test", "-k", "3"], None),
    ("sql", ["sql", "select session, count(*) n from events group by 1 order by 1"], None),
    ("sql-parquet", ["sql", "--parquet", "{out}/parquet", "select count(*) from events"], None),
    ("report-tools", ["report", "tools"], None),
    ("report-sessions", ["report", "sessions"], None),
    ("report-tokens", ["report", "tokens"], None),
    ("compact", ["compact", "--force", "s1"], None),
    ("library", ["library"], None),
    ("extract", ["extract", "--force"], None),
    ("learnings", ["learnings", "list", "--all"], None),
    ("learnings-add", ["learnings", "add", "Run the tests before committing"], None),
    ("health", ["health"], None),
    ("gc", ["gc", "--dry-run"], None),
    ("archive", ["archive", "--older-than", "3650d"], None),
    ("reextract", ["reextract", "--out", "{out}/reextract"], None),
    ("rebuild", ["rebuild", "--tier", "all"], None),
    ("rebuild-as-of", ["rebuild", "--as-of", "3", "--out", "{out}/as-of"], None),
    ("session-start", ["session", "start", "s4", "--task", "fix checkout"], None),
    ("session-show", ["session", "show", "s4"], None),
    ("append", ["append", "s1"], b'{"type":"user","content":"one more thing"}\n'),
    ("import", ["import", "locomo", str(FIXTURES / "locomo_small.json")], None),
    ("forget", ["forget", "--session", "s2"], None),
    ("token", ["token", "create", "--user", "ana"], None),
    ("token-list", ["token", "list"], None),
    ("hooks", ["hooks", "install", "--project", "{root}"], None),
    ("hook", ["hook", "SessionStart"], HOOK_INPUT),
    ("mcp", ["mcp"], MCP_INPUT),
    ("models", ["models", "status"], None),
    ("completion", ["completion", "bash"], None),
    ("init", ["init", "{out}/new"], None),
    ("sessions-after", ["sessions"], None),
    ("verify-after", ["verify"], None),
]

# what ``status`` counts of the cold tier on this machine's disk (a bucket's table takes none)
_COLD_BYTES = re.compile(rb'("tier": "cold",\s*"bytes": )\d+')
_MASKS = [
    (re.compile(rb"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"), b"<id>"),
    (re.compile(rb"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:?\d{2})?"), b"<ts>"),
    (re.compile(rb"\b[0-9a-f]{12,64}\b"), b"<hex>"),
    (re.compile(rb"\bL[0-9a-f]{12}\b"), b"<learning>"),
    (re.compile(rb"\bairs_[0-9a-f]{8}_[0-9A-Za-z_-]+"), b"<token>"),
    (re.compile(rb"\d{4}-\d{2}-\d{2} \d{2}:\d{2}"), b"<minute>"),
    (re.compile(rb"^[0-9a-f]{8}(?=  )", re.M), b"<token id>"),
    (re.compile(rb"\d+(\.\d+)?\s?(ms|s)\b"), b"<time>"),
]


def normal(data: bytes, root: Path) -> bytes:
    """``data`` with what differs between two runs by nature masked."""
    data = data.replace(str(root).encode(), b"<root>")
    data = _COLD_BYTES.sub(rb"\1<bytes>", data)
    for pattern, mask in _MASKS:
        data = pattern.sub(mask, data)
    return data


def config(url: str | None, endpoint: str) -> str:
    """The two workspaces' airsspec.toml: the hash embedder (no model to load), and for the
    bucket's, the ``[storage]`` section."""
    text = '[workspace]\npath = ".airsspec"\n[cold]\nembedder = "hash"\n'
    if url:
        text += (
            f'[storage]\nurl = "{url}"\nendpoint = "{endpoint}"\nregion = "us-east-1"\n'
            'access_key_id = "testing"\nsecret_access_key = "testing"\n'
        )
    return text


def copy_log_to_bucket(local_log: Path, url: str, endpoint: str, cache: Path) -> None:
    """Each session of the local log as one object chained to nothing, and its head."""
    import orjson

    from eventlog.storage.objects import ObjectStore

    store = ObjectStore(
        url, cache, endpoint=endpoint, region="us-east-1",
        access_key_id="testing", secret_access_key="testing",
    )  # fmt: skip
    for path in sorted(local_log.glob("*.jsonl")):
        session, data = path.stem, path.read_bytes()
        store.append(session, store.tail(session), data)
        last = orjson.loads(data.splitlines()[-1])
        store.set_head(session, last["seq"], last["hash"])


@pytest.fixture(scope="module")
def workspaces(moto_endpoint: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Two workspaces holding one log: ``local`` in its folder, ``bucket`` on a new bucket."""
    from tests.support.s3 import new_bucket

    url = new_bucket(moto_endpoint)
    tmp = tmp_path_factory.mktemp("commands")
    roots = {"local": tmp / "local", "bucket": tmp / "bucket"}
    for name, root in {**roots, "scratch": tmp / "scratch"}.items():
        root.mkdir()
        (root / "out").mkdir()
        bucket = url if name == "bucket" else None
        (root / "airsspec.toml").write_text(config(bucket, moto_endpoint))
    scratch = tmp / "scratch"  # writes the log; its derived tiers are left behind
    lines = b"".join(json.dumps(e).encode() + b"\n" for e in EVENTS)
    for args, stdin in (
        (["append", "s1"], lines),
        (["append", "s2"], lines[: len(lines) // 2].rsplit(b"\n", 1)[0] + b"\n"),
        (["import", "claude-code", str(FIXTURES / "claude_code_compacted.jsonl")], None),
        (["session", "start", "s3", "--task", "make checkout reliable"], None),
    ):
        done = run_cli(*args, cwd=scratch, stdin=stdin)
        assert done.returncode == 0, done.stderr
    log = scratch / ".airsspec" / "contexts" / "agent"
    assert len(list(log.glob("*.jsonl"))) == 4
    shutil.copytree(log, roots["local"] / ".airsspec" / "contexts" / "agent")
    copy_log_to_bucket(log, url, moto_endpoint, tmp / "setup-cache")
    return roots


def run_both(workspaces: dict[str, Path], args: list[str], stdin: bytes | None) -> dict:
    """Run the command in each workspace (they share nothing): per workspace (exit code,
    masked stdout, stderr)."""

    def run(root: Path) -> tuple[int, bytes, bytes]:
        argv = [a.replace("{out}", str(root / "out")).replace("{root}", str(root)) for a in args]
        if args[0] == "mcp":
            return mcp_session(root)
        done = run_cli(*argv, cwd=root, stdin=stdin)
        return done.returncode, normal(done.stdout, root), normal(done.stderr, root)

    return {name: run(root) for name, root in workspaces.items()}


def mcp_session(root: Path) -> tuple[int, bytes, bytes]:
    """``airsspec mcp`` as a client drives it: the requests sent, their input kept open until
    every answer came (the server answers as calls finish: sorted by id), then closed."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "airsspec", "mcp"],
        cwd=root,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdin is not None and proc.stdout is not None
    try:
        proc.stdin.write(MCP_INPUT)
        proc.stdin.flush()
        answers = [proc.stdout.readline() for _ in range(MCP_INPUT.count(b'"id"'))]
        proc.stdin.close()
        err = proc.stderr.read() if proc.stderr else b""
        proc.wait(timeout=60)
    finally:
        proc.kill()
    answers.sort(key=lambda line: json.loads(line)["id"])
    return proc.returncode, normal(b"".join(answers), root), normal(err, root)


@pytest.mark.parametrize(("args", "stdin"), [c[1:] for c in COMMANDS], ids=[c[0] for c in COMMANDS])
def test_each_command_on_the_bucket_answers_as_on_the_local_folder(
    workspaces: dict[str, Path], args: list[str], stdin: bytes | None
) -> None:
    results = run_both(workspaces, args, stdin)
    local, bucket = results["local"], results["bucket"]
    assert bucket == local, f"bucket:\n{bucket}\nlocal:\n{local}"


def test_the_bucket_workspace_never_wrote_a_local_log(workspaces: dict[str, Path]) -> None:
    root = workspaces["bucket"]
    assert not list(root.glob(".airsspec/contexts/agent/*.jsonl"))
    assert list(root.glob(".airsspec/state/objects/*/s1.jsonl")), "the bucket's cache holds s1"


def watch_until_projected(root: Path, writer: Path) -> set[int]:
    """Start ``watch`` in ``root``, append from the workspace ``writer``, wait until the daemon
    wrote the record into the hot window's state (read from disk: ``hot`` would project it
    itself), stop it with SIGTERM; every process it started."""
    logged = root / "out" / "watch.log"
    with logged.open("wb") as stderr:
        proc = subprocess.Popen(
            [sys.executable, "-m", "airsspec", "watch", "--log-level", "info"],
            cwd=root,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
            env={**os.environ, "PYTHONPATH": str(REPO)},
        )
    started = {proc.pid}

    def projected() -> bool:
        started.update(children(proc.pid))
        files = (root / ".airsspec" / "state" / "hot").glob("s2*")
        return any(b"watched by the daemon" in f.read_bytes() for f in files if f.is_file())

    try:  # the first catch-up is done: only following the log can bring the append in
        assert wait_for(lambda: b"watching" in logged.read_bytes(), 60), logged.read_bytes()
        line = b'{"type":"user","content":"watched by the daemon"}\n'
        added = run_process("append", "s2", cwd=writer, stdin=line)  # the daemons run at once
        assert added.returncode == 0, added.stderr
        assert wait_for(projected, 90), f"{root.name}: watch did not project the append"
    finally:
        started.update(children(proc.pid))
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
    err = logged.read_bytes()[-2000:]
    assert proc.returncode == 0, f"{root.name}: watch exited {proc.returncode}: {err!r}"
    return started


def test_watch_on_the_bucket_projects_an_append_and_stops_cleanly(
    workspaces: dict[str, Path],
) -> None:
    """Both daemons bring a new append into the hot window (on the bucket, one made by another
    machine: a workspace with its own cache), stop on SIGTERM with exit 0, and leave no process
    of theirs running; the windows then read the same."""
    other = workspaces["bucket"].parent / "bucket-b"
    other.mkdir()
    shutil.copy(workspaces["bucket"] / "airsspec.toml", other / "airsspec.toml")
    with ThreadPoolExecutor(len(workspaces)) as pool:  # the two daemons at once
        runs = {
            name: pool.submit(watch_until_projected, root, other if name == "bucket" else root)
            for name, root in workspaces.items()
        }
        started = {name: run.result() for name, run in runs.items()}
    windows = {}
    for name, root in workspaces.items():
        gone = lambda s=started[name]: not any(Path(f"/proc/{p}").exists() for p in s)  # noqa: E731
        assert wait_for(gone, 10), f"{name}: a process of watch outlived it"
        windows[name] = normal(run_cli("hot", "s2", cwd=root).stdout, root)
    assert b"watched by the daemon" in windows["local"]
    assert windows["bucket"] == windows["local"]
