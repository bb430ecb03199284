"""One layout: every path of a workspace derives from its root through ``Layout``, and one rule
says what is a workspace, for ``Memory.open`` and the CLI's ``-w`` alike."""

from __future__ import annotations

from pathlib import Path

import pytest

from airsspec.memory import Memory, NotAWorkspaceError
from eventlog.layout import Layout
from tests.support.cli import run_cli


def test_the_workspace_and_its_projectors_use_the_layouts_paths(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AIRSSPEC_COLD_EMBEDDER", "hash")
    with Memory.open(tmp_path, create=True) as memory:
        ws = memory.workspace
        layout = Layout(ws.root)
        assert ws.layout == layout
        assert (ws.log_dir, ws.state_dir, ws.sources_dir) == (
            layout.log_dir,
            layout.state_dir,
            layout.sources_dir,
        )
        for projector in ws.projectors(("hot", "warm", "tokens", "learnings")):
            assert projector.state_store.out_dir == layout.tier_dir(projector.name)
        (warm,) = ws.projectors(("warm",))
        assert warm.library_dir == layout.library_dir
        elsewhere = tmp_path / "as-of"
        (hot,) = ws.projectors(("hot",), root=elsewhere)
        assert hot.state_store.out_dir == Layout(elsewhere).tier_dir("hot")
        for folder in Layout.FOLDERS:
            assert (ws.root / folder).is_dir()  # init made each


def test_memory_and_the_cli_agree_on_what_is_a_workspace(tmp_path: Path) -> None:
    """A folder holding only ``state/`` (a workspace whose log is on a bucket) is one for both;
    a folder holding only ``sources/`` is one for neither."""
    bucket_shaped = tmp_path / "bucket"
    (bucket_shaped / "state").mkdir(parents=True)
    assert Layout.is_workspace(bucket_shaped)
    with Memory.open(bucket_shaped) as memory:
        assert memory.root == bucket_shaped
    assert run_cli("-w", str(bucket_shaped), "sessions", cwd=tmp_path).returncode == 0

    not_one = tmp_path / "docs"
    (not_one / "sources").mkdir(parents=True)
    assert not Layout.is_workspace(not_one)
    with pytest.raises(NotAWorkspaceError):
        Memory.open(not_one)
    refused = run_cli("-w", str(not_one), "sessions", cwd=tmp_path)
    assert refused.returncode != 0 and b"not an airsspec workspace" in refused.stderr
