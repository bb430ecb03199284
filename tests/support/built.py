"""A workspace built once for a module and copied for each test: a fixture whose workspace
takes seconds to build (many sessions, a compaction, a seal) gives every test a fresh copy of
it, each test's changes its own. A workspace is self-contained (its keys, states, indexes
and tables live under its folder, by relative paths), so a copy opens as the original does;
only the tiers' records of their files name the files' inodes, and the first read of a copy
writes the copy's (a test that snapshots the folder projects the copy first)."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest


def built_once(env: dict[str, str], build: Callable[[Path], None]) -> Any:
    """A module-scoped fixture: a folder ``build`` filled once, with ``env`` set meanwhile."""

    @pytest.fixture(scope="module")
    def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
        folder = tmp_path_factory.mktemp("built")
        with pytest.MonkeyPatch.context() as patch:
            for name, value in env.items():
                patch.setenv(name, value)
            build(folder)
        return folder

    return built


def copy_of(built: Path, to: Path, monkeypatch: pytest.MonkeyPatch, env: dict[str, str]) -> Path:
    """``built``'s files copied into ``to`` (times kept), with ``env`` set for the test; ``to``."""
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    shutil.copytree(built, to, symlinks=True, dirs_exist_ok=True)
    return to
