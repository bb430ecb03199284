"""Forgetting and the cold tier's record of its files (``state/cold.files.json``): a forget
removes the table's old versions (they hold the rows just deleted), and records that it did,
so the deep check finds nothing missing and the next ``project`` resumes instead of rebuilding
the tier from zero."""

from __future__ import annotations

from pathlib import Path

import pytest

from airsspec import Memory
from tests.conftest import init_encrypted


def _cold(memory: Memory):
    (cold,) = memory.workspace.projectors(("cold",))
    return cold


@pytest.mark.parametrize("subject", ["user", "session"])
def test_after_a_forget_verify_tiers_passes_and_project_does_not_rebuild_cold(
    tmp_path: Path, offline: None, subject: str
) -> None:
    init_encrypted(tmp_path)
    document = tmp_path / ".airsspec" / "sources" / "users" / "ana" / "notes.md"
    document.parent.mkdir(parents=True)
    document.write_text("# Notes\n\nthe vault sits in eu-west.\n")
    with Memory.open(tmp_path) as memory:
        for batch in range(3):  # several versions, and index files, for the cleanup to remove
            memory.scoped(user="ana").append_many(
                "a1", [{"type": "user", "content": f"ana {batch} says {i}"} for i in range(8)]
            )
            memory.scoped(user="ben").append_many(
                "b1", [{"type": "user", "content": f"ben zebra {batch} {i}"} for i in range(8)]
            )
            memory.project()
        assert memory.verify(projections=True).projection_problems == []
        epoch = _cold(memory).store.epoch
        if subject == "user":
            memory.forget(user="ana")
        else:
            memory.scoped(user="ana").forget(session="a1")

        assert memory.verify(projections=True).projection_problems == []
        kept = (memory.root / "state" / "cold" / "b1.json").read_bytes()
        reports = memory.project(deep=True)
        assert _cold(memory).store.epoch == epoch  # the same table: not rebuilt
        assert not [
            o for r in reports for o in r.outcomes if r.projector == "cold" and o.rebuilt_because
        ]
        assert (memory.root / "state" / "cold" / "b1.json").read_bytes() == kept
        assert [h["session"] for h in memory.search("ben zebra", k=3)["hits"]] == ["b1"] * 3


def test_a_forget_where_the_embedder_cannot_run_leaves_no_record_of_the_files_it_removed(
    tmp_path: Path, offline: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without an embedder the cold tier goes whole (``project`` rebuilds it once one runs):
    its record of files goes with it, or the deep check names every file as missing."""
    init_encrypted(tmp_path)
    with Memory.open(tmp_path) as memory:
        memory.scoped(user="ana").append("a1", {"type": "user", "content": "ana says"})
        memory.scoped(user="ben").append("b1", {"type": "user", "content": "ben zebra"})
        memory.project()
        assert (memory.root / "state" / "cold.files.json").exists()
        monkeypatch.setattr(Memory, "embedder_problem", lambda self: "no model here")
        memory.forget(user="ana")
        monkeypatch.undo()
        assert memory.verify(projections=True).projection_problems == []
        memory.project(deep=True)
        assert [h["session"] for h in memory.search("ben zebra", k=1)["hits"]] == ["b1"]
        assert memory.verify(projections=True).projection_problems == []
