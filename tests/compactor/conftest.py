"""A small workspace whose settings make compaction easy to reason about."""

from __future__ import annotations

from pathlib import Path

import pytest

from airsspec.workspace import Workspace, init_workspace

SMALL = """
[memory]
hot_window_size = 6
hot_token_budget = 100000
chunk_size = 2
[compactor]
summarizer = "extractive"
"""


@pytest.fixture
def small_ws(tmp_path: Path):
    init_workspace(tmp_path)
    (tmp_path / "airsspec.toml").write_text(SMALL)
    with Workspace.open(config=tmp_path / "airsspec.toml") as ws:
        yield ws


def users(n: int, start: int = 0) -> list[dict]:
    return [
        {"type": "user", "content": f"Message number {i}: keep file src/mod{i}.py in mind."}
        for i in range(start, start + n)
    ]
