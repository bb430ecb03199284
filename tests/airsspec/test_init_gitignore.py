"""``airsspec init`` keeps what is derived or secret out of git: a real ``git check-ignore``
agrees that the tiers, the state (keys) and the server's tokens are ignored and the log is not;
a ``.gitignore`` the user already has is left as it is."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.support.cli import run_cli

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


def ignored(repo: Path, *paths: str) -> set[str]:
    done = subprocess.run(
        ["git", "check-ignore", "--no-index", *paths],
        cwd=repo,
        capture_output=True,
        text=True,
        check=False,
    )
    return set(done.stdout.split())


def test_init_ignores_the_derived_and_secret_folders_not_the_log(tmp_path: Path) -> None:
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    done = run_cli("init", str(tmp_path), "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["gitignore_written"] is True
    ws = ".airsspec"
    paths = [
        f"{ws}/knowledge/library/history-001.md",
        f"{ws}/state/keys/k1",
        f"{ws}/auth/tokens.json",
        f"{ws}/contexts/agent/s1.jsonl",
    ]
    assert ignored(tmp_path, *paths) == set(paths[:3])


def test_a_gitignore_of_the_users_is_kept(tmp_path: Path) -> None:
    assert run_cli("init", str(tmp_path), cwd=tmp_path).returncode == 0
    mine = tmp_path / ".airsspec" / ".gitignore"
    mine.write_text("*\n", encoding="utf-8")
    again = run_cli("init", str(tmp_path), "--json", cwd=tmp_path)
    assert json.loads(again.stdout)["gitignore_written"] is False
    assert mine.read_text(encoding="utf-8") == "*\n"


def test_init_writes_no_gitignore_through_a_link(tmp_path: Path) -> None:
    """A repository may commit the workspace's ``.gitignore`` as a link to a file that does not
    exist (anywhere this user may write): ``init`` wrote its text there. A link is kept as it
    is, as a file of the user's would be, and nothing is created where it points."""
    target = tmp_path / "elsewhere" / "planted"
    target.parent.mkdir()
    (tmp_path / "clone" / ".airsspec").mkdir(parents=True)
    (tmp_path / "clone" / ".airsspec" / ".gitignore").symlink_to(target)
    done = run_cli("init", "--json", cwd=tmp_path / "clone")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["gitignore_written"] is False
    assert not target.exists() and not target.is_symlink()


def test_init_names_where_a_linked_workspace_folder_leads(tmp_path: Path) -> None:
    """A workspace folder that is a link (a repository may commit one) puts the log where it
    points: ``init`` says where, beside the name it was given."""
    target = tmp_path / "elsewhere"
    target.mkdir()
    (tmp_path / "clone").mkdir()
    (tmp_path / "clone" / ".airsspec").symlink_to(target, target_is_directory=True)
    done = run_cli("init", cwd=tmp_path / "clone")
    assert done.returncode == 0, done.stderr
    assert f"workspace ready at .airsspec ({target.resolve()})" in done.stdout.decode()
    plain = run_cli("init", str(tmp_path / "plain"), cwd=tmp_path)
    assert "(" not in plain.stdout.decode().splitlines()[-1]
