"""A workspace's folders are its own: a symbolic link at any folder of the layout (or at a tier's
folder inside ``state/``, or at DuckDB's temp folder) is refused with one error line when the
workspace is opened, and nothing is read or written through it."""

from __future__ import annotations

from pathlib import Path

import pytest

from airsspec.memory import Memory
from eventlog.errors import UnsafePathError
from projections.analytics import Analytics
from tests.conftest import snapshot
from tests.support.cli import run_cli

HASH = {"AIRSSPEC_COLD_EMBEDDER": "hash"}


def _workspace(root: Path) -> Path:
    with Memory.open(root, create=True) as memory:
        memory.append("alpha", {"type": "user", "content": "alpha walrus note"})
    (root / ".airsspec" / "state" / "tmp" / "duckdb").mkdir(parents=True, exist_ok=True)
    return root


def _link_away(folder: Path, outside: Path) -> Path:
    """Move ``folder`` out of the workspace and leave a link to it in its place."""
    outside.parent.mkdir(parents=True, exist_ok=True)
    folder.rename(outside)
    folder.symlink_to(outside, target_is_directory=True)
    return outside


@pytest.mark.parametrize(
    "folder",
    [
        "contexts",
        "contexts/agent",
        "knowledge",
        "knowledge/vectors",
        "sources",
        "state",
        "state/hot",
        "state/tmp/duckdb",
    ],
)
@pytest.mark.parametrize("command", [["status"], ["sql", "SELECT count(*) FROM events"]])
def test_a_linked_workspace_folder_is_refused_in_one_line(
    tmp_path: Path, folder: str, command: list[str]
) -> None:
    root = _workspace(tmp_path / "project")
    outside = _link_away(root / ".airsspec" / folder, tmp_path / "outside" / folder)
    before = snapshot(outside)
    result = run_cli(*command, cwd=root, env=HASH)
    assert result.returncode == 2, result.stdout
    assert b"Traceback" not in result.stderr
    lines = result.stderr.decode().splitlines()
    assert lines == [
        f"airsspec: error: {root / '.airsspec' / folder}: is a symbolic link; "
        "refusing to follow it out of the workspace"
    ]
    assert snapshot(outside) == before


def test_sql_cannot_read_outside_through_a_linked_duckdb_temp_folder(tmp_path: Path) -> None:
    root = _workspace(tmp_path / "project")
    secret = tmp_path / "secret"
    secret.mkdir()
    (secret / "token.txt").write_text("TOP-SECRET\n")
    temp = root / ".airsspec" / "state" / "tmp" / "duckdb"
    temp.rmdir()
    temp.symlink_to(secret, target_is_directory=True)
    result = run_cli("sql", f"SELECT content FROM read_text('{temp}/token.txt')", cwd=root)
    assert result.returncode == 2
    assert b"TOP-SECRET" not in result.stdout + result.stderr


@pytest.mark.parametrize("linked", ["folder", "parent"])
def test_analytics_refuses_a_linked_temp_folder_and_makes_nothing_through_it(
    tmp_path: Path, linked: str
) -> None:
    log_dir = tmp_path / "ws" / "contexts" / "agent"
    log_dir.mkdir(parents=True)
    outside = tmp_path / "outside"
    outside.mkdir()
    tmp = tmp_path / "ws" / "state" / "tmp"
    if linked == "folder":
        tmp.mkdir(parents=True)
        (tmp / "duckdb").symlink_to(outside, target_is_directory=True)
    else:
        tmp.parent.mkdir(parents=True)
        tmp.symlink_to(outside, target_is_directory=True)
    with pytest.raises(UnsafePathError, match="is a symbolic link"):
        Analytics(log_dir, temp_dir=tmp / "duckdb")
    assert list(outside.iterdir()) == []


def test_init_writes_no_config_through_a_dangling_link(tmp_path: Path) -> None:
    """A cloned repository may commit ``airsspec.toml`` as a link to a file that does not exist
    (anywhere this user may write): ``init`` followed it and created that file. It is refused in
    one line, nothing is created there or in the project, and a link to a config is read."""
    project, target = tmp_path / "clone", tmp_path / "elsewhere" / "planted.toml"
    project.mkdir()
    target.parent.mkdir()
    (project / "airsspec.toml").symlink_to(target)
    before = snapshot(tmp_path)
    result = run_cli("init", cwd=project, env=HASH)
    err = result.stderr.decode()
    assert result.returncode == 2 and result.stdout == b""
    assert err.startswith("airsspec: error:") and err.count("\n") == 1 and "does not exist" in err
    assert not target.exists() and snapshot(tmp_path) == before
    target.write_text("[workspace]\npath = '.airsspec'\n")
    assert run_cli("init", cwd=project, env=HASH).returncode == 0  # a config it reads
    assert target.read_text() == "[workspace]\npath = '.airsspec'\n"


@pytest.mark.parametrize("folder", ["contexts", "knowledge", "contexts/agent", "state"])
@pytest.mark.parametrize("door", ["cli", "api"])
def test_init_makes_nothing_through_a_linked_folder_of_the_workspace(
    tmp_path: Path, folder: str, door: str
) -> None:
    """A cloned repository may commit a folder of the workspace (``.airsspec/contexts``...) as
    a link to a folder elsewhere: ``init`` (and ``Memory.open(create=True)``) made the layout's
    folders through it (``agent/`` there) before the open refused it. It is refused before
    anything is made, in one line: nothing is created where it points, nor in the project."""
    project, outside = tmp_path / "clone", tmp_path / "outside"
    outside.mkdir()
    (project / ".airsspec" / folder).parent.mkdir(parents=True)
    (project / ".airsspec" / folder).symlink_to(outside, target_is_directory=True)
    before = snapshot(tmp_path)
    if door == "cli":
        result = run_cli("init", cwd=project, env=HASH)
        assert result.returncode == 2 and result.stdout == b""
        assert result.stderr.decode().splitlines() == [
            f"airsspec: error: {Path('.airsspec') / folder}: is a symbolic link; "
            "refusing to follow it out of the workspace"
        ]
    else:
        with pytest.raises(UnsafePathError, match="is a symbolic link"):
            Memory.open(project, create=True)
    assert list(outside.iterdir()) == []
    assert snapshot(tmp_path) == before
