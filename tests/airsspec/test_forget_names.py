"""Forgetting removes only what it names: a user is a checked name (``eventlog.names``), never a
path; the folder of a user's documents is derived inside ``sources/users/`` with links refused,
by ``forget`` and by every machine that follows a ``forgotten`` event recorded in the log."""

from __future__ import annotations

import gc
import hashlib
import logging
import shutil
from pathlib import Path

import pytest

from airsspec import Memory
from airsspec.kernel.purge import follow
from eventlog.crypto import key_id
from eventlog.errors import InvalidNameError
from eventlog.schema import MEMORY_SESSION
from tests.conftest import init_workspace
from tests.support.cli import run_cli

ENV = {"AIRSSPEC_COLD_EMBEDDER": "hash", "ANTHROPIC_API_KEY": ""}
HOSTILE = ["../..", "../../../..", ".", "a/../../b", "x y", "Ana", "", "ana\x00"]


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in ENV.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("AIRSSPEC_USER", raising=False)


def _workspace(root: Path) -> Path:
    init_workspace(root)
    with (root / "airsspec.toml").open("a") as f:
        f.write('\n[privacy]\nencrypt = "user"\n')
    return root


def _digests(*folders: Path) -> dict[str, str]:
    """The SHA-256 of every file under ``folders`` (links listed, never followed)."""
    found = {}
    for folder in folders:
        for path in sorted(folder.rglob("*")):
            if path.is_symlink():
                found[str(path)] = f"link to {path.readlink()}"
            elif path.is_file():
                found[str(path)] = hashlib.sha256(path.read_bytes()).hexdigest()
    return found


def _planted(tmp_path: Path, hostile: str) -> tuple[Path, Path]:
    """A workspace holding ana's session and a key for user ``hostile`` (as a workspace written
    before names were checked may hold), so a forget of ``hostile`` gets past 'nothing is
    recorded'; and a canary folder beside it."""
    ws, canary = tmp_path / "ws", tmp_path / "canary"
    canary.mkdir()
    (canary / "keep.txt").write_text("beside the workspace\n")
    _workspace(ws)
    with Memory.open(ws) as memory:
        memory.scoped(user="ana").append("a1", {"type": "user", "content": "ana's own"})
        memory.project(("hot",))
        memory.workspace.log.sealer.keys.key(key_id(f"user:{hostile}"), create=True)
    return ws, canary


@pytest.mark.parametrize("flag", ["--user", "--by", "AIRSSPEC_USER"])
def test_forget_refuses_a_user_that_is_a_path_in_one_line_and_changes_no_byte(
    tmp_path: Path, flag: str
) -> None:
    """(``AIRSSPEC_USER='../..' airsspec forget --user '../..'``: a user forgetting themself.)"""
    ws, canary = _planted(tmp_path, "../../../..")
    before = _digests(tmp_path)
    args = ["--user", "../../../.."] if flag != "--by" else ["--user", "ana", "--by", "../.."]
    env = {**ENV, "AIRSSPEC_USER": "../../../.."} if flag == "AIRSSPEC_USER" else ENV
    refused = run_cli("forget", *args, cwd=ws, env=env)
    said = refused.stderr.decode()
    assert refused.returncode == 2, said
    assert said.startswith("airsspec: error:") and said.count("\n") == 1, said
    assert ("--by" if flag == "--by" else "--user") in said and "invalid name" in said
    assert _digests(tmp_path) == before
    assert (canary / "keep.txt").read_text() == "beside the workspace\n"


@pytest.mark.parametrize("hostile", HOSTILE)
def test_the_forget_api_refuses_every_name_that_is_not_one(
    tmp_path: Path, env: None, hostile: str
) -> None:
    ws, _ = _planted(tmp_path, hostile)
    before = _digests(tmp_path)
    with Memory.open(ws) as memory:
        with pytest.raises(InvalidNameError, match="user"):
            memory.forget(user=hostile)
        with pytest.raises(InvalidNameError, match="by"):
            memory.forget(user="ana", by=hostile)
    assert {k: v for k, v in _digests(tmp_path).items() if "/caches/" not in k} == {
        k: v for k, v in before.items() if "/caches/" not in k
    }


def test_forget_refuses_a_linked_users_folder_and_deletes_nothing_outside(
    tmp_path: Path, env: None
) -> None:
    ws = _workspace(tmp_path / "ws")
    outside = tmp_path / "outside"
    (outside / "ana").mkdir(parents=True)
    (outside / "ana" / "canary.md").write_text("not the workspace's\n")
    sources = ws / ".airsspec" / "sources"
    sources.mkdir(parents=True, exist_ok=True)
    (sources / "users").symlink_to(outside, target_is_directory=True)
    with Memory.open(ws) as memory:
        memory.scoped(user="ana").append("a1", {"type": "user", "content": "CANARY of ana"})
        memory.project(("hot",))
    logs = _digests(ws / ".airsspec" / "contexts")

    refused = run_cli("forget", "--user", "ana", cwd=ws, env=ENV)
    said = refused.stderr.decode()
    assert refused.returncode != 0 and said.count("\n") == 1, said
    assert said.startswith("airsspec: error:") and "symbolic link" in said and "users" in said
    assert (outside / "ana" / "canary.md").read_text() == "not the workspace's\n"
    assert _digests(ws / ".airsspec" / "contexts") == logs  # refused before anything changed
    with Memory.open(ws) as memory:
        assert [r.content for r in memory.replay("a1") if r.type == "user"] == ["CANARY of ana"]


def _plant_forgotten(memory: Memory, name: str, sessions: list[str] | None = None) -> None:
    """A ``forgotten`` event as another machine (or a hand-edited log) may have recorded it."""
    event = {
        "type": "forgotten",
        "subject": "user",
        "name": name,
        "by": "dpo",
        "sessions": sessions or [],
        "keys": [],
    }
    memory.workspace.log.append_many(MEMORY_SESSION, [event], system=True)


@pytest.mark.parametrize("hostile", ["../..", "../../..", "x/../../.."])
def test_a_follower_skips_a_forgotten_event_whose_name_is_not_one(
    tmp_path: Path, env: None, caplog: pytest.LogCaptureFixture, hostile: str
) -> None:
    ws, canary = tmp_path / "ws", tmp_path / "canary"
    canary.mkdir()
    (canary / "keep.txt").write_text("beside the workspace\n")
    _workspace(ws)
    document = ws / ".airsspec" / "sources" / "users" / "ben" / "notes.md"
    document.parent.mkdir(parents=True)
    document.write_text("# Ben\n\nben's notes\n")
    with Memory.open(ws) as memory:
        memory.scoped(user="ben").append("b1", {"type": "user", "content": "ben's own"})
        memory.project()
        _plant_forgotten(memory, hostile)
        mark = memory.workspace.layout.forgotten_path
        # the catch-ups' projectors hold the embedding cache, closed (its WAL folded into the
        # database) when the garbage collector frees them: now, not between the digests
        gc.collect()
        before = {k: v for k, v in _digests(tmp_path).items() if k != str(mark)}
        with caplog.at_level(logging.WARNING, logger="airsspec.forgetting"):
            assert follow(memory.kernel) == []
        assert "not followed" in caplog.text and "invalid name" in caplog.text
        assert {k: v for k, v in _digests(tmp_path).items() if k != str(mark)} == before
        caplog.clear()
        assert follow(memory.kernel) == []  # skipped once, not warned at every read
        assert not caplog.records
        assert [r.content for r in memory.replay("b1") if r.type == "user"] == ["ben's own"]
    assert document.read_text() == "# Ben\n\nben's notes\n"


def test_a_follower_removes_nothing_through_a_linked_users_folder(
    tmp_path: Path, env: None, caplog: pytest.LogCaptureFixture
) -> None:
    ws = _workspace(tmp_path / "ws")
    outside = tmp_path / "outside"
    (outside / "ana").mkdir(parents=True)
    (outside / "ana" / "canary.md").write_text("not the workspace's\n")
    with Memory.open(ws) as memory:
        memory.scoped(user="ana").append("a1", {"type": "user", "content": "CANARY of ana"})
        memory.project(("hot",))
        memory.forget(user="ana")
        memory.workspace.layout.forgotten_path.unlink()  # as a machine that never looked
        users = memory.workspace.sources_dir / "users"
        shutil.rmtree(users, ignore_errors=True)
        users.parent.mkdir(parents=True, exist_ok=True)
        users.symlink_to(outside, target_is_directory=True)
        with caplog.at_level(logging.WARNING, logger="airsspec.forgetting"):
            follow(memory.kernel)
        assert "symbolic link" in caplog.text
        assert (outside / "ana" / "canary.md").read_text() == "not the workspace's\n"
        assert (
            not (memory.root / "state" / "hot" / "a1.json").exists()
            or b"CANARY" not in (memory.root / "state" / "hot" / "a1.json").read_bytes()
        )
        users.unlink()  # once the link is gone, the event is followed to its end
        caplog.clear()
        assert "a1" in follow(memory.kernel)
        assert follow(memory.kernel) == []


def test_a_folder_under_sources_users_that_is_not_a_name_is_skipped_alone(
    tmp_path: Path, env: None, caplog: pytest.LogCaptureFixture
) -> None:
    """A document's owner is the name of its folder under ``sources/users/``: a folder whose
    name is not one (upper case, a space) is not indexed, and warned, and every other document
    still is (one bad folder used to stop them all)."""
    ws = _workspace(tmp_path / "ws")
    users = ws / ".airsspec" / "sources" / "users"
    (users / "Bad Name").mkdir(parents=True)
    (users / "Bad Name" / "x.md").write_text("# X\n\nthe zebra sleeps standing\n")
    (users / "ana").mkdir()
    (users / "ana" / "notes.md").write_text("# Notes\n\nthe vault sits in eu-west\n")
    with Memory.open(ws) as memory, caplog.at_level(logging.WARNING):
        memory.project()
        assert "Bad Name" in caplog.text and "invalid name" in caplog.text
        hits = memory.search("vault eu-west", k=3)["hits"]
        assert hits and hits[0]["source"] == "users/ana/notes.md"
        assert not [h for h in memory.search("zebra sleeps", k=5)["hits"] if h.get("source")]
