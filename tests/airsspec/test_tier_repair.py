"""Derived files are checked against what was written: a deleted or edited library file or hot
state is reported by status and repaired by project, byte for byte, never served as edited. An
edit that keeps the file's size and mtime is found too: its content's SHA-256 is recorded."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from airsspec import Memory
from tests.conftest import snapshot
from tests.support.cli import run_cli
from tests.support.logs import use_extractive_summarizer

pytestmark = pytest.mark.slow  # each test projects with the real embedder, or kills


HOW = ("delete", "edit", "garbage", "stealth")


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A compacted session, its hot window and its library file: made in this process (what
    is tested is what the commands below make of damage, not how the workspace came to be)."""
    _workspace(tmp_path, ["alpha"])
    return tmp_path


def _workspace(root: Path, sessions: list[str]) -> dict[str, str]:
    """A workspace in ``root`` holding each session compacted and projected (hot and warm):
    the name of each session's library file."""
    config, _ = Memory.init(root)
    use_extractive_summarizer(config)
    library = root / ".airsspec" / "knowledge" / "library"
    made_by = {}
    with Memory.open(root) as memory:
        for session in sessions:
            before = set(library.glob("history-*.md"))
            memory.append_many(
                session,
                [
                    {"type": "user", "content": f"alpha decision {i}: keep the API stable"}
                    for i in range(12)
                ],
            )
            memory.compact(session, force=True)
            memory.project(("hot", "warm"))
            (made,) = set(library.glob("history-*.md")) - before
            made_by[session] = made.name
    return made_by


def _damage(path: Path, how: str) -> None:
    if how == "delete":
        path.unlink()
    elif how == "edit":
        path.write_text(path.read_text().replace("alpha", "OMEGA INJECTED"))
    elif how == "stealth":  # same size, same inode, mtime put back
        st = path.stat()
        path.write_text(path.read_text().replace("alpha", "OMEGA"))
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
        assert path.stat().st_size == st.st_size and path.stat().st_mtime_ns == st.st_mtime_ns
    else:
        path.write_bytes(b"garbage")


def test_a_damaged_derived_file_is_reported_and_repaired(tmp_path: Path) -> None:
    """Each kind of damage on its own session (its library file and its hot window): each is
    named by status and verify, and one project repairs them all, byte for byte."""
    libraries = _workspace(tmp_path, [f"s-{how}" for how in HOW])
    ws = tmp_path / ".airsspec"
    before = snapshot(ws / "knowledge" / "library") | snapshot(ws / "state" / "hot")
    targets = {}
    for how in HOW:
        session = f"s-{how}"
        targets[session] = {
            "warm": ws / "knowledge" / "library" / libraries[session],
            "hot": ws / "state" / "hot" / f"{session}.json",
        }
        for target in targets[session].values():
            _damage(target, how)
    status = "\n".join(json.loads(run_cli("status", "--json", cwd=tmp_path).stdout)["degraded"])
    checked = run_cli("verify", "--tiers", cwd=tmp_path)
    assert checked.returncode == 1
    for session, files in targets.items():
        for tier in files:
            assert f"{tier}: {session}: its output was deleted or changed" in status, status
            assert f"FAIL tier {tier}: {session}".encode() in checked.stdout, checked.stdout
    repaired = run_cli("project", cwd=tmp_path, env={"AIRSSPEC_COLD_EMBEDDER": "hash"})
    assert repaired.returncode == 0, repaired.stderr
    rebuilt = [line for line in repaired.stdout.decode().splitlines() if " rebuilt " in line]
    for tier in ("hot", "warm"):  # each tier names every session it rebuilt, on one line
        named = next(line for line in rebuilt if line.startswith(f"{tier}: rebuilt "))
        assert all(session in named for session in targets), rebuilt
    after = snapshot(ws / "knowledge" / "library") | snapshot(ws / "state" / "hot")
    assert {k: v for k, v in after.items() if k in before} == before
    assert run_cli("verify", "--tiers", cwd=tmp_path).returncode == 0
    for session in targets:
        hot = run_cli("hot", session, "--budget", "400", cwd=tmp_path)
        assert b"OMEGA" not in hot.stdout and b"alpha decision 11" in hot.stdout


def test_a_damaged_cold_index_is_rebuilt_by_project(project: Path) -> None:
    """A filter on the cold table reads its scalar index: a damaged index file made every
    catch-up (and so every fresh query) fail. The indexes are dropped and made again, once
    for a deleted file, then again for one overwritten."""
    env = {"AIRSSPEC_COLD_EMBEDDER": "hash"}
    assert run_cli("project", cwd=project, env=env).returncode == 0
    table = project / ".airsspec" / "knowledge" / "vectors" / "units.lance"
    for how in ("delete", "garbage"):
        index_files = sorted(table.glob("_indices/*/page_data.lance"))
        assert index_files  # the session column's BTree index
        _damage(index_files[0], how)
        line = f'{{"type": "user", "content": "new after {how}"}}'.encode()
        assert run_cli("append", "alpha", cwd=project, stdin=line).returncode == 0
        repaired = run_cli("project", cwd=project, env=env)
        assert repaired.returncode == 0, repaired.stderr
        assert b"indexes are rebuilt" in repaired.stderr and b"Traceback" not in repaired.stderr
        found = run_cli("query", f"new after {how}", "--json", cwd=project, env=env)
        assert found.returncode == 0, found.stderr
        assert json.loads(found.stdout)["hits"][0]["text"] == f"new after {how}"
        assert run_cli("project", cwd=project, env=env).stderr == b""  # nothing left to repair
