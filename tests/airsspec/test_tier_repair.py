"""Derived files are checked against what was written: a deleted or edited library file or hot
state is reported by status and repaired by project, byte for byte, never served as edited. An
edit that keeps the file's size and mtime is found too: its content's SHA-256 is recorded."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from airsspec import Memory
from bench.common import use_extractive_summarizer
from tests.conftest import run_cli, snapshot

pytestmark = pytest.mark.slow  # each test projects with the real embedder, or kills


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A compacted session, its hot window and its library file: made in this process (what
    is tested is what the commands below make of damage, not how the workspace came to be)."""
    config, _ = Memory.init(tmp_path)
    use_extractive_summarizer(config)
    with Memory.open(tmp_path) as memory:
        memory.append_many(
            "alpha",
            [
                {"type": "user", "content": f"alpha decision {i}: keep the API stable"}
                for i in range(12)
            ],
        )
        memory.compact("alpha", force=True)
        memory.project(("hot", "warm"))
    return tmp_path


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


TARGETS = {"warm": "knowledge/library/history-001.md", "hot": "state/hot/alpha.json"}


@pytest.mark.parametrize("how", ["delete", "edit", "garbage", "stealth"])
def test_a_damaged_derived_file_is_reported_and_repaired(project: Path, how: str) -> None:
    ws = project / ".airsspec"
    before = snapshot(ws / "knowledge" / "library") | snapshot(ws / "state" / "hot")
    for target in TARGETS.values():  # a library file and a hot window, each on its own
        _damage(ws / target, how)
    status = json.loads(run_cli("status", "--json", cwd=project).stdout)
    for tier in TARGETS:
        assert f"{tier}: alpha: its output was deleted or changed" in "\n".join(status["degraded"])
    checked = run_cli("verify", "--tiers", cwd=project)
    assert checked.returncode == 1
    for tier in TARGETS:
        assert f"FAIL tier {tier}".encode() in checked.stdout, checked.stdout
    repaired = run_cli("project", cwd=project, env={"AIRSSPEC_COLD_EMBEDDER": "hash"})
    assert repaired.returncode == 0, repaired.stderr
    assert repaired.stdout.count(b"rebuilt alpha") >= 2, repaired.stdout
    after = snapshot(ws / "knowledge" / "library") | snapshot(ws / "state" / "hot")
    assert {k: v for k, v in after.items() if k in before} == before
    assert run_cli("verify", "--tiers", cwd=project).returncode == 0
    hot = run_cli("hot", "alpha", "--budget", "400", cwd=project)
    assert b"OMEGA" not in hot.stdout and b"alpha decision 11" in hot.stdout


@pytest.mark.parametrize("how", ["delete", "garbage"])
def test_a_damaged_cold_index_is_rebuilt_by_project(project: Path, how: str) -> None:
    """A filter on the cold table reads its scalar index: a damaged index file made every
    catch-up (and so every fresh query) fail. The indexes are dropped and made again."""
    env = {"AIRSSPEC_COLD_EMBEDDER": "hash"}
    assert run_cli("project", cwd=project, env=env).returncode == 0
    table = project / ".airsspec" / "knowledge" / "vectors" / "units.lance"
    index_files = sorted(table.glob("_indices/*/page_data.lance"))
    assert index_files  # the session column's BTree index
    _damage(index_files[0], how)
    assert run_cli("append", "alpha", cwd=project, stdin=b'{"type": "user", "content": "new"}')
    repaired = run_cli("project", cwd=project, env=env)
    assert repaired.returncode == 0, repaired.stderr
    assert b"indexes are rebuilt" in repaired.stderr and b"Traceback" not in repaired.stderr
    found = run_cli("query", "alpha decision", "--json", cwd=project, env=env)
    assert found.returncode == 0, found.stderr
    assert json.loads(found.stdout)["hits"]
    assert run_cli("project", cwd=project, env=env).stderr == b""  # nothing left to repair
