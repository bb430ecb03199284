"""Closing a workspace gives back what its parts opened: the embedding cache's SQLite database
(and its ``-wal``/``-shm`` files) included, whichever thread used it."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from airsspec.memory import Memory

pytestmark = pytest.mark.skipif(
    not Path("/proc/self/fd").is_dir(), reason="needs /proc/self/fd to list open descriptors"
)


def _open_on(path: Path) -> list[str]:
    """The files under ``path``'s name (the database, its -wal and -shm) this process holds."""
    found = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:  # the listing's own descriptor, closed meanwhile
            continue
        if target.startswith(str(path)):
            found.append(target)
    return found


@pytest.mark.parametrize("in_thread", [False, True], ids=["same-thread", "other-thread"])
def test_a_closed_workspace_leaves_no_descriptor_on_its_embedding_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, in_thread: bool
) -> None:
    monkeypatch.setenv("AIRSSPEC_COLD_EMBEDDER", "hash")
    Memory.init(tmp_path)
    memory = Memory.open(tmp_path)
    memory.append("s", {"type": "user", "content": "the zebra crossing by the school"})
    if in_thread:  # a server or daemon projects in a worker thread; close runs in this one
        worker = threading.Thread(target=memory.project)
        worker.start()
        worker.join()
    else:
        memory.project()
    cache = memory.workspace.layout.embedding_cache_path
    assert _open_on(cache), "the cold projection did not keep its cache open"
    memory.close()
    assert _open_on(cache) == []
