"""Shared fixtures: a fresh log per test, and the real CLI run in this process (``run_cli``) or
in a process of its own (``run_process``, ``kill_runs_at_random``)."""

from __future__ import annotations

import gc
import json
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import settings

from eventlog.log import EventLog
from tests.support.cli import freeze_if_imported

REPO = Path(__file__).resolve().parent.parent
SHARED_DATA = REPO.parent / "shared" / "data"

# Property tests give the same verdict on every run of `make test`: examples come from a seed fixed
# per test (derandomize) and from the explicit @example cases, never from a database left by an
# earlier run. `make fuzz` (HYPOTHESIS_PROFILE=fuzz) explores with random seeds and more examples;
# what it finds is added to the test as an explicit @example.
# Under fuzz every property test runs FUZZ_SCALE times the examples it replays: the profile's
# max_examples covers tests that name none, and a test's own ``@settings(max_examples=N)`` (which
# overrides any profile) is scaled at collection (``pytest_collection_modifyitems``).
PROFILE = os.environ.get("HYPOTHESIS_PROFILE", "replay")
FUZZ_SCALE = int(os.environ.get("HYPOTHESIS_FUZZ_SCALE", "10"))
# No deadline: how long an example takes on a loaded machine is no verdict (benchmarks time).
settings.register_profile("replay", derandomize=True, database=None, print_blob=True, deadline=None)
settings.register_profile("fuzz", derandomize=False, print_blob=True, max_examples=100 * FUZZ_SCALE)
settings.load_profile(PROFILE)

# AIRSSPEC_COUNT_SUBPROCESSES=FILE appends one line per process a test starts (its argv), to
# measure how many the suite launches (the in-process CLI helper exists to keep that low).
if _COUNT := os.environ.get("AIRSSPEC_COUNT_SUBPROCESSES"):
    _popen_init = subprocess.Popen.__init__

    def _counted_init(self, args, *rest, **kwargs):  # type: ignore[no-untyped-def]
        with open(_COUNT, "a") as out:
            out.write(
                json.dumps(
                    [str(a) for a in args] if isinstance(args, list | tuple) else [str(args)]
                )
                + "\n"
            )
        _popen_init(self, args, *rest, **kwargs)

    subprocess.Popen.__init__ = _counted_init  # type: ignore[method-assign]


# AIRSSPEC_COUNT_CPU=FILE appends one line per test (to FILE.WORKER): its id, wall seconds and
# CPU seconds of this process and of the child processes it waited for (setup and teardown
# included), to find where the suite's time goes on a machine others load (CPU, not wall).
_CPU = os.environ.get("AIRSSPEC_COUNT_CPU")


@pytest.fixture(scope="session", autouse=True)
def _cache_folder(tmp_path_factory: pytest.TempPathFactory) -> None:
    """The user's cache and config folders of the run (``XDG_CACHE_HOME``,
    ``XDG_CONFIG_HOME``), so the parsed configs of the thousands of workspaces the tests make
    (``airsspec.tomlfile``) and the configs trusted for the hooks (``airsspec.trust``) never
    reach the real ones."""
    os.environ["XDG_CACHE_HOME"] = str(tmp_path_factory.mktemp("xdg-cache"))
    os.environ["XDG_CONFIG_HOME"] = str(tmp_path_factory.mktemp("xdg-config"))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None):
    """Each test: what it imported for the first time is frozen once it is over (see
    ``freeze_if_imported``); under AIRSSPEC_COUNT_CPU, its line is written."""
    modules = len(sys.modules)
    if not _CPU:
        yield
        freeze_if_imported(modules)
        return
    before, started = _cpu_seconds(), time.monotonic()
    yield
    freeze_if_imported(modules)
    after = _cpu_seconds()
    line = {"id": item.nodeid, "wall": time.monotonic() - started}
    line |= {"self": after[0] - before[0], "children": after[1] - before[1]}
    with open(f"{_CPU}.{os.environ.get('PYTEST_XDIST_WORKER', 'main')}", "a") as out:
        out.write(json.dumps(line) + "\n")


def _cpu_seconds() -> tuple[float, float]:
    import resource

    own, waited = (
        resource.getrusage(resource.RUSAGE_SELF),
        resource.getrusage(resource.RUSAGE_CHILDREN),
    )
    return own.ru_utime + own.ru_stime, waited.ru_utime + waited.ru_stime


def pytest_collection_finish(session: pytest.Session) -> None:
    """What collection imported (every test module, the libraries they import: about 600,000
    objects) lives as long as the worker: ``gc.freeze`` takes it out of every later collection.
    A full collection (``run_cli`` makes one after each command, as a process's exit would
    close what it left) then walks what the tests made: about 15 ms in place of 360."""
    import gc

    gc.collect()
    gc.freeze()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Files holding a slow test run first: ``make test``'s workers take whole files in
    collection order (``--dist loadfile``), so a long file collected last would run alone at
    the end while the others idle. Under the fuzz profile, also scale each property
    test's own ``max_examples`` by FUZZ_SCALE."""
    slow = {item.path for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: item.path not in slow)  # stable: each file keeps its order
    if PROFILE == "fuzz":
        _scale_examples(items)


def _scale_examples(items: list[pytest.Item]) -> None:
    """Hypothesis reads a test's settings when it runs, from the attribute ``@settings`` sets."""
    profile = settings.get_profile("fuzz")
    for item in items:
        test = getattr(getattr(item, "obj", None), "__func__", getattr(item, "obj", None))
        own = getattr(test, "_hypothesis_internal_use_settings", None)
        if not hasattr(test, "hypothesis") or own is None:
            continue
        if own.max_examples < profile.max_examples:
            test._hypothesis_internal_use_settings = settings(
                own, max_examples=own.max_examples * FUZZ_SCALE
            )


@pytest.fixture
def log_dir(tmp_path: Path) -> Path:
    return tmp_path / "ws" / "contexts" / "agent"


@pytest.fixture
def log(log_dir: Path):
    with EventLog(log_dir, durability="off") as event_log:
        yield event_log


def kill_runs_at_random(
    *args: str,
    cwd: Path,
    runs: int,
    delay: tuple[float, float],
    seed: int,
    env=None,
    progress: Callable[[], int] | None = None,
) -> int:
    """Start ``python -m airsspec ARGS`` ``runs`` times and SIGKILL each run still going after a
    random delay in ``delay`` seconds (the delay only picks where the kill lands; nothing waits
    on it). With ``progress`` (a count the work raises as it commits, such as a table's
    versions), ``delay`` counts steps instead: each run is killed once ``progress()`` has grown
    by a random number of steps in it, so a kill lands mid-run however fast the machine is.
    Returns how many runs were killed."""
    rng = random.Random(seed)
    kills = 0
    for _ in range(runs):
        proc = subprocess.Popen(
            [sys.executable, "-m", "airsspec", *args],
            cwd=cwd,
            env={**os.environ, **(env or {})},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        if progress is None:
            time.sleep(rng.uniform(*delay))
        else:
            target = progress() + rng.randint(int(delay[0]), int(delay[1]))
            wait_for(lambda t=target, p=proc: progress() >= t or p.poll() is not None, 120)
        if proc.poll() is None:
            started = children(proc.pid)
            proc.send_signal(signal.SIGKILL)
            kills += 1
            proc.wait(timeout=60)
            assert wait_for(
                lambda s=started: not any(Path(f"/proc/{c}").exists() for c in s), 10
            ), f"processes {started} outlived the killed {args[0]}"
        proc.wait(timeout=60)
    return kills


def children(pid: int) -> list[int]:
    """The child processes of ``pid`` (Linux; empty elsewhere or once it is gone)."""
    try:
        return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except (FileNotFoundError, ProcessLookupError):
        return []


def wait_for(condition, seconds: float) -> bool:
    """Poll ``condition`` until it holds or ``seconds`` pass (a deadline, not a delay)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.01)
    return bool(condition())


def claude_transcript(path: Path, text: str) -> Path:
    """A one-message Claude Code transcript at ``path`` (its session is the file's name)."""
    record = {
        "type": "user",
        "uuid": "u1",
        "sessionId": path.stem,
        "timestamp": "2026-11-01T10:00:01.000Z",
        "message": {"role": "user", "content": text},
    }
    path.write_text(json.dumps(record) + "\n")
    return path


# What a read keeps on disk of the files it read (``projections.files.KeptOnDisk``, the cold
# table's verified files, each tier's output digests and index verdicts): written by any read
# once the files are a second old, so whether a test's read writes them depends on the
# machine's speed; they hold nothing the files do not.
KEPT_BY_READS = frozenset({"sessions.json", "hot.counts.json", "cold.files.verified.json"})


def kept_by_reads(path: Path) -> bool:
    """Whether ``path`` is one of the files a read keeps (``KEPT_BY_READS``, each tier's
    ``*.digests.json`` and ``*.checked.json``) in a workspace's ``state/caches``."""
    return path.parent.parts[-2:] == ("state", "caches") and (
        path.name in KEPT_BY_READS or path.name.endswith((".digests.json", ".checked.json"))
    )


def snapshot(folder: Path) -> dict[str, bytes]:
    """Every file's bytes under ``folder``, to prove a failed command changed nothing. An
    empty ``*.lock`` file is left out: taking a lock (an import's turn) holds no content; so
    is what a read keeps of the files it read (``KEPT_BY_READS`` in ``state/caches``).
    Garbage is collected first: a memory view dropped earlier closes its embedding cache when
    collected, which checkpoints the SQLite file, at whatever moment the collector runs."""
    gc.collect()
    return {
        str(p.relative_to(folder)): p.read_bytes()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
        and not (p.suffix == ".lock" and p.stat().st_size == 0)
        and not kept_by_reads(p)
    }


@pytest.fixture(scope="module")
def moto_endpoint():
    """A moto S3 server on 127.0.0.1 (tests marked ``s3``), stopped (and checked gone) at
    teardown."""
    pytest.importorskip(
        "moto", reason="moto[server] is not installed (pip install 'airsspec-memory[s3]')"
    )
    pytest.importorskip(
        "obstore", reason="obstore is not installed (pip install 'airsspec-memory[s3]')"
    )
    from tests.support.s3 import moto_server

    with moto_server() as (endpoint, pid):
        started = [pid, *children(pid)]
        yield endpoint
    assert wait_for(lambda: not any(Path(f"/proc/{p}").exists() for p in started), 10)


def bucket_config(root: Path, url: str | None, endpoint: str, text: str = "") -> Path:
    """``root/airsspec.toml`` holding ``text`` and, with ``url``, a ``[storage]`` section naming
    the moto bucket ``url`` at ``endpoint`` (without: the workspace's own folder)."""
    from tests.support.s3 import storage_section

    if url is not None:
        text += storage_section(url, endpoint)
    root.mkdir(parents=True, exist_ok=True)
    (root / "airsspec.toml").write_text(text)
    return root / "airsspec.toml"


@pytest.fixture
def bucket_url(moto_endpoint: str) -> str:
    """A new, empty bucket (and a prefix in it)."""
    from tests.support.s3 import new_bucket

    return new_bucket(moto_endpoint)


def init_workspace(root: Path) -> Path:
    """What ``airsspec init ROOT`` makes (the commented config and the workspace's folders),
    made in this process, for tests whose subject comes after it (the command itself is run
    by ``test_cli_log`` and the README's examples)."""
    from airsspec import Memory

    config, _ = Memory.init(root)
    Memory.open(config=config).close()
    return root


def init_encrypted(root: Path, mode: str = "user") -> Path:
    """``init_workspace`` with ``[privacy] encrypt = MODE`` (what ``forget`` shreds)."""
    init_workspace(root)
    with (root / "airsspec.toml").open("a") as config:
        config.write(f'\n[privacy]\nencrypt = "{mode}"\n')
    return root


OFFLINE = {"AIRSSPEC_COLD_EMBEDDER": "hash", "ANTHROPIC_API_KEY": ""}


@pytest.fixture
def offline(monkeypatch: pytest.MonkeyPatch) -> None:
    """No model to load, no API to call, and no user in the environment."""
    for name, value in OFFLINE.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("AIRSSPEC_USER", raising=False)


# The first request of an MCP session over stdio, as a client sends it.
MCP_INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "tests", "version": "1"},
    },
}
