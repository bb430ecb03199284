"""Hostile readers and forgetting: a reader scoped to one user reaches nothing of another
user's sessions through any door, and a key file the store does not own is never trusted."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from airsspec import Memory
from eventlog.crypto import FileKeyStore, KeyStoreError, key_id
from tests.conftest import run_cli

ENV = {"AIRSSPEC_COLD_EMBEDDER": "hash", "ANTHROPIC_API_KEY": ""}


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in ENV.items():
        monkeypatch.setenv(name, value)


def _two_users(root: Path) -> None:
    assert run_cli("init", str(root), cwd=root, env=ENV).returncode == 0
    with Memory.open(root) as memory:
        ana, ben = memory.scoped(user="ana"), memory.scoped(user="ben")
        ana.append_many(
            "a1", [{"type": "user", "content": f"ANACANARY {i} tabs"} for i in range(40)]
        )
        ana.compact("a1", force=True)
        ben.append_many("b1", [{"type": "user", "content": f"ben zebra {i}"} for i in range(40)])
        ben.compact("b1", force=True)


def test_a_scoped_reader_neither_lists_nor_reads_another_users_library_file(
    tmp_path: Path, env: None
) -> None:
    _two_users(tmp_path)
    as_ben = {**ENV, "AIRSSPEC_USER": "ben"}
    listed = run_cli("library", "--json", cwd=tmp_path, env=as_ben)
    assert listed.returncode == 0 and b'"a1"' not in listed.stdout and b'"b1"' in listed.stdout
    with Memory.open(tmp_path) as memory:
        files = {e["session"]: e["library_no"] for e in memory.library_entries()}
    shown = run_cli("library", "--show", str(files["a1"]), cwd=tmp_path, env=as_ben)
    assert shown.returncode != 0 and b"ANACANARY" not in shown.stdout + shown.stderr
    assert shown.stderr.decode().startswith("airsspec: error:")
    own = run_cli("library", "--show", str(files["b1"]), cwd=tmp_path, env=as_ben)
    assert own.returncode == 0 and b"zebra" in own.stdout


def test_a_key_file_replaced_by_a_symlink_is_refused_not_followed(tmp_path: Path) -> None:
    store = FileKeyStore(tmp_path / "keys")
    kid = key_id("user:ana")
    store.key(kid, create=True)
    elsewhere = tmp_path / "elsewhere.key"
    elsewhere.write_bytes(b"k" * 32)
    path = tmp_path / "keys" / f"{kid}.key"
    path.unlink()
    os.symlink(elsewhere, path)
    with pytest.raises(KeyStoreError, match="a symlink stands"):
        FileKeyStore(tmp_path / "keys").key(kid, create=False)
    with pytest.raises(KeyStoreError, match="a symlink stands"):
        FileKeyStore(tmp_path / "keys").destroy(kid)
    assert elsewhere.read_bytes() == b"k" * 32  # the target was neither used nor touched
