"""Fixtures of the server's tests: a memory and a served one (a module may give its own
``memory``: other settings, another folder, records already in it)."""

from __future__ import annotations

from pathlib import Path

import pytest

from airsspec.memory import Memory
from airsspec.serve.app import serving
from airsspec.serve.core import Served


@pytest.fixture
def memory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """A new workspace in ``tmp_path/ws`` with the hash embedder (no model to load)."""
    monkeypatch.setenv("AIRSSPEC_COLD_EMBEDDER", "hash")
    with Memory.open(tmp_path / "ws", create=True) as memory:
        yield memory


@pytest.fixture
def server(memory: Memory):
    """(url, served) of a server with no background work (each test drives what it needs)."""
    served = Served(memory, local_user="owner", background=False)
    with serving(served) as where:
        yield where["url"], served
