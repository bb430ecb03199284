"""Damage is named and repaired, never shown as a traceback: a chart file named for no image
format, damaged cold-tier files, stray and corrupt files among the logs. Each case is one
``airsspec: error:`` (or warning) line, the other sessions unaffected, and ``project`` repairs
what is derived."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from unittest import mock

import pytest

from airsspec import Memory
from tests.support.cli import run_cli

pytestmark = pytest.mark.slow  # each test projects with the real embedder, or kills

HASH = {"AIRSSPEC_COLD_EMBEDDER": "hash"}


def _workspace(root: Path, projected: tuple[str, ...] = ()) -> Path:
    """Two sessions, appended (and ``projected``, the cold tier with the hash embedder) in this
    process: the damage below, and what the commands make of it, is what is tested."""
    root.mkdir(parents=True, exist_ok=True)
    Memory.init(root)
    with mock.patch.dict(os.environ, HASH), Memory.open(root) as memory:
        for name, n in (("alpha", 12), ("beta", 6)):
            memory.append_many(
                name,
                [
                    {"type": "user", "content": f"{name} walrus note {i} on the lexer"}
                    for i in range(n)
                ],
            )
        if projected:
            memory.project(projected)
    return root


def _one_error_line(stderr: bytes) -> str:
    text = stderr.decode()
    assert "Traceback" not in text and "panicked" not in text, text
    errors = [line for line in text.splitlines() if line.startswith("airsspec: error:")]
    assert len(errors) == 1, text
    return errors[0]


def test_a_chart_named_for_no_image_format_is_refused_in_one_line(tmp_path: Path) -> None:
    root = _workspace(tmp_path)
    refused = run_cli("report", "sessions", "--plot", "x.jsonl", cwd=root)
    assert refused.returncode == 2
    assert "x.jsonl" in _one_error_line(refused.stderr)
    assert not (root / "x.jsonl").exists()
    written = run_cli("report", "sessions", "--plot", "chart.svg", cwd=root)
    assert written.returncode == 0, written.stderr
    assert b"<svg" in (root / "chart.svg").read_bytes()[:400]


def _xor_lance_files(table: Path, under: str) -> list[Path]:
    """Flip every seventh byte of each Lance file under ``table/under`` (in place)."""
    damaged = sorted((table / under).rglob("*.lance"))
    for path in damaged:
        data = bytearray(path.read_bytes())
        for i in range(0, len(data), 7):
            data[i] ^= 0xFF
        path.write_bytes(bytes(data))
    assert damaged
    return damaged


TABLE = Path(".airsspec/knowledge/vectors/units.lance")


def test_damaged_cold_files_are_named_and_project_rebuilds_them(tmp_path: Path) -> None:
    root = _workspace(tmp_path, projected=("all",))
    damaged = _xor_lance_files(root / TABLE, "data")
    status = run_cli("status", cwd=root, env=HASH)
    assert status.returncode == 0 and b"Traceback" not in status.stderr
    named = status.stdout.decode().splitlines()[-1]
    assert all(f"data/{p.name}: changed after it was written" in named for p in damaged), named
    verify = run_cli("verify", "--tiers", cwd=root, env=HASH)
    assert verify.returncode == 1
    assert f"FAIL tier cold: {TABLE.relative_to('.airsspec')}/data/" in verify.stdout.decode()
    query = run_cli("query", "walrus lexer", cwd=root, env=HASH)
    assert query.returncode == 0, query.stderr
    assert b"Traceback" not in query.stderr and b"panicked" not in query.stderr
    assert b"walrus note" in query.stdout and b"warning:" in query.stderr  # degraded, said so
    project = run_cli("project", cwd=root, env=HASH)
    assert project.returncode == 0, project.stderr
    rebuilt = [line for line in project.stdout.decode().splitlines() if "rebuilt" in line]
    assert len(rebuilt) == 1, rebuilt  # its sessions named once, with the reason
    assert rebuilt[0].startswith("cold: rebuilt ") and "alpha" in rebuilt[0]
    assert ": the tier's files were damaged" in rebuilt[0]
    assert run_cli("status", cwd=root, env=HASH).stdout.endswith(b"degraded: nothing\n")
    again = run_cli("query", "walrus lexer", cwd=root, env=HASH)
    assert b"(hybrid" in again.stdout and again.stderr == b""


def test_sessions_rebuilt_for_one_reason_are_one_line_naming_at_most_five() -> None:
    from airsspec.cli.common import rebuilt_lines
    from projections.engine import RunReport, SessionOutcome

    damaged = [SessionOutcome(f"s{i}", rebuilt_because="damaged") for i in range(7)]
    report = RunReport("cold", [*damaged, SessionOutcome("t", rebuilt_because="settings")])
    report.outcomes.append(SessionOutcome("u", applied=3))  # not rebuilt: not named
    assert rebuilt_lines(report) == [
        "cold: rebuilt 7 sessions (s0, s1, s2, s3, s4 and others): damaged",
        "cold: rebuilt t: settings",
    ]
    assert rebuilt_lines(RunReport("hot", damaged[:2])) == ["hot: rebuilt s0, s1: damaged"]


@pytest.mark.parametrize("command", ["query", "project"])
def test_a_copy_of_a_workspace_with_damaged_cold_files_is_repaired_not_a_traceback(
    tmp_path: Path, command: str
) -> None:
    original = _workspace(tmp_path / "original", projected=("all",))
    _xor_lance_files(original / TABLE, ".")
    root = tmp_path / "copy"
    shutil.copytree(original, root)  # new inodes: every session's output is projected again
    args = ["query", "walrus lexer"] if command == "query" else ["project"]
    result = run_cli(*args, cwd=root, env=HASH)
    assert result.returncode == 0, result.stderr.decode()[-2000:]
    assert b"Traceback" not in result.stderr and b"panicked" not in result.stderr
    # (query brings only the cold tier up to date: the others still say they were copied)
    degraded = run_cli("status", cwd=root, env=HASH).stdout.splitlines()[-1]
    assert b"cold:" not in degraded, degraded
    answer = run_cli("query", "walrus lexer", cwd=root, env=HASH)
    assert b"(hybrid" in answer.stdout and b"walrus note" in answer.stdout


LOGS = Path(".airsspec/contexts/agent")


def test_a_stray_file_among_the_logs_is_named_and_the_other_sessions_are_unaffected(
    tmp_path: Path,
) -> None:
    root = _workspace(tmp_path, projected=("all",))
    (root / LOGS / "stray.jsonl").write_bytes(b"not a record at all\n")
    status = run_cli("status", cwd=root, env=HASH)
    assert status.returncode == 0, status.stderr
    assert b"unreadable: stray: " in status.stdout and b"stray.jsonl" in status.stdout
    assert b"hot: stray: not projected: its log cannot be read" in status.stdout
    health = run_cli("health", cwd=root, env=HASH)
    assert b"Traceback" not in health.stderr and b"airsspec: error" not in health.stderr
    assert b"stray: not projected" in health.stdout  # needs a person: named, exit 1
    hot = run_cli("hot", "alpha", cwd=root, env=HASH)
    assert hot.returncode == 0 and b"alpha walrus note 11" in hot.stdout


@pytest.mark.parametrize("projected", [False, True], ids=["fresh", "stale-window"])
@pytest.mark.parametrize(
    "command",
    [["hot", "alpha"], ["context", "alpha", "--budget", "500"], ["compact", "--force", "alpha"]],
    ids=lambda c: c[0],
)
def test_a_corrupt_middle_line_is_named_by_file_and_line(
    tmp_path: Path, command: list[str], projected: bool
) -> None:
    # a hot window from before the damage must not be shown as current
    root = _workspace(tmp_path, projected=("hot",) if projected else ())
    log = root / LOGS / "alpha.jsonl"
    lines = log.read_bytes().splitlines(keepends=True)
    log.write_bytes(b"".join([*lines[:2], b'{"this is": not json\n', *lines[3:]]))
    damaged = log.read_bytes()
    result = run_cli(*command, cwd=root, env=HASH)
    assert result.returncode == 1
    error = _one_error_line(result.stderr)
    assert "alpha.jsonl" in error and "line 3" in error, error
    assert log.read_bytes() == damaged
    other = run_cli(*[("beta" if part == "alpha" else part) for part in command], cwd=root)
    assert other.returncode == 0, other.stderr
    assert b"beta walrus note" in other.stdout or b"history-001.md" in other.stdout


def test_compacting_every_session_names_a_damaged_one_and_compacts_the_others(
    tmp_path: Path,
) -> None:
    root = _workspace(tmp_path)
    (root / LOGS / "stray.jsonl").write_bytes(b"not a record at all\n")
    result = run_cli("compact", "--force", cwd=root, env=HASH)
    assert result.returncode == 1
    assert "stray.jsonl" in _one_error_line(result.stderr)
    assert b"alpha: history-001.md" in result.stdout and b"beta: history-002.md" in result.stdout


def test_a_missing_cold_file_is_named_and_project_rebuilds_the_tier(tmp_path: Path) -> None:
    root = _workspace(tmp_path, projected=("all",))
    gone = sorted((root / TABLE / "data").glob("*.lance"))[0]
    gone.unlink()
    status = run_cli("status", cwd=root, env=HASH)
    assert f"data/{gone.name}: missing (project repairs it)".encode() in status.stdout
    project = run_cli("project", cwd=root, env=HASH)
    assert project.returncode == 0 and b"Traceback" not in project.stderr
    assert run_cli("status", cwd=root, env=HASH).stdout.endswith(b"degraded: nothing\n")


class PanicException(BaseException):  # what pyo3 raises for a Rust panic (by name)
    pass


def test_a_lance_panic_is_wrapped_as_damage_but_an_interrupt_is_not() -> None:
    from eventlog.errors import ColdDamagedError
    from projections.cold import damage_named

    expected = r"units\.lance: index out of bounds"
    with pytest.raises(ColdDamagedError, match=expected) as caught, damage_named("units.lance"):
        raise PanicException("index out of bounds")
    assert isinstance(caught.value.__cause__, PanicException)
    with pytest.raises(KeyboardInterrupt), damage_named("units.lance"):
        raise KeyboardInterrupt
    with pytest.raises(OSError) as refused, damage_named("units.lance"):
        raise RuntimeError("LanceError(IO): No space left on device (os error 28)")
    assert refused.value.errno == 28 and not isinstance(refused.value, ColdDamagedError)


def test_a_digest_kept_between_reads_never_hides_a_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A server answers every ``status`` from digests kept while each file's size, times and
    inode are unchanged (``projections.table_files.digest_of``). A file changed in place, its
    mtime put back, is named all the same (the write changed its ctime), as hashing every file
    again names it."""
    from projections import table_files

    monkeypatch.setattr(table_files._DIGESTS, "_settle_ns", 0)  # keep them at once
    root = _workspace(tmp_path, projected=("all",))

    def damage(memory: Memory) -> list[str]:
        return [d for tier in memory.status() for d in tier.degraded if "after it was" in d]

    def hashed_again(memory: Memory) -> list[str]:
        files = memory.kernel.projector("cold").files
        known = files.read()[1]
        table = files.table_dir
        return [n for n, d in known.items() if table_files.sha256_of(table / n) != d]

    with mock.patch.dict(os.environ, HASH), Memory.open(root) as memory:
        assert damage(memory) == [] == hashed_again(memory)
        assert damage(memory) == []  # the second answer from the kept digests
        data = sorted((root / TABLE / "data").rglob("*.lance"))[0]
        times = data.stat()
        _xor_lance_files(root / TABLE, "data")
        os.utime(data, ns=(times.st_atime_ns, times.st_mtime_ns))
        named = damage(memory)
        assert any(f"data/{data.name}: changed after it was written" in d for d in named), named
        assert f"data/{data.name}" in hashed_again(memory)


def test_a_new_process_reads_no_table_file_found_equal_before_and_still_names_a_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Which files a check found equal to their digests is kept beside the record, with their
    size, times and inode then (``cold.files.verified.json``): the next process's ``status``
    reads none of them again (at 1M records it read 6 GB), and a file changed in place, its
    mtime put back, is named all the same (the write changed its ctime)."""
    from projections import files, table_files

    monkeypatch.setattr(files, "KEPT_SETTLE_NS", 0)  # kept on disk at once
    root = _workspace(tmp_path, projected=("all",))
    read: list[str] = []
    hashed = table_files.sha256_of
    monkeypatch.setattr(table_files, "sha256_of", lambda p: read.append(str(p)) or hashed(p))

    def damage() -> list[str]:
        table_files._DIGESTS._kept.clear()  # a new process: nothing kept in memory
        with mock.patch.dict(os.environ, HASH), Memory.open(root) as memory:
            return [d for tier in memory.status() for d in tier.degraded if "after it was" in d]

    assert damage() == [] and read  # the first check reads the table's files
    assert (root / ".airsspec" / "state" / "caches" / "cold.files.verified.json").is_file()
    read.clear()
    assert damage() == [] and read == []  # the next one, none
    data = sorted((root / TABLE / "data").rglob("*.lance"))[0]
    times = data.stat()
    _xor_lance_files(root / TABLE, "data")
    os.utime(data, ns=(times.st_atime_ns, times.st_mtime_ns))
    assert data.stat().st_mtime_ns == times.st_mtime_ns and data.stat().st_size == times.st_size
    named = damage()
    assert any(f"data/{data.name}: changed after it was written" in d for d in named), named
    assert str(data) in read


def test_a_table_file_changed_while_a_check_reads_it_is_named_by_the_next_check(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A check reads a file whole (a data file of a large table: seconds) and then noted the
    size, times and inode it found after the read as verified: a file changed in place while
    it was read (its mtime put back, its ctime over a second old by the end of the read) was
    noted with the changed file's values, and no later check read it again. What is noted is
    what the file was before the read, so the next check reads it again and names it."""
    from projections import files, table_files

    monkeypatch.setattr(files, "KEPT_SETTLE_NS", 0)  # kept on disk at once
    root = _workspace(tmp_path, projected=("all",))
    data = sorted((root / TABLE / "data").rglob("*.lance"))[0]
    hashed = table_files.sha256_of
    changed: list[str] = []

    def read_then_changed(path: str | Path) -> str:
        digest = hashed(path)  # the bytes as they were, equal to the record
        if Path(path) == data and not changed:  # changed in place as the read ends
            times = data.stat()
            with open(data, "r+b") as held:
                first = held.read(1)
                held.seek(0)
                held.write(bytes([first[0] ^ 0xFF]))
            os.utime(data, ns=(times.st_atime_ns, times.st_mtime_ns))
            changed.append(str(path))
        return digest

    monkeypatch.setattr(table_files, "sha256_of", read_then_changed)

    def damage() -> list[str]:
        table_files._DIGESTS._kept.clear()  # a new process: nothing kept in memory
        with mock.patch.dict(os.environ, HASH), Memory.open(root) as memory:
            return [d for tier in memory.status() for d in tier.degraded if "after it was" in d]

    assert damage() == [] and changed  # read as it was, changed as the read ended
    named = damage()
    assert any(f"data/{data.name}: changed after it was written" in d for d in named), named
