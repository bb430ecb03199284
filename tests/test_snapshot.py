"""``tests.conftest.snapshot``, which the tests of refused commands compare: it leaves out only
what a read keeps of the files it read (``state/caches``), never a file of the same name
elsewhere (a user's document, a log's folder)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import snapshot


def test_a_snapshot_leaves_out_what_reads_keep_in_state_caches(tmp_path: Path) -> None:
    kept = tmp_path / ".airsspec" / "state" / "caches" / "sessions.json"
    kept.parent.mkdir(parents=True)
    kept.write_bytes(b"{}")
    before = snapshot(tmp_path)
    kept.write_bytes(b'{"a": 1}')
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize(
    "where",
    [
        ".airsspec/sources/caches/sessions.json",  # a document
        ".airsspec/contexts/caches/hot.counts.json",
        "caches/cold.files.verified.json",  # the project's own file
    ],
)
def test_a_snapshot_holds_a_file_named_as_a_kept_one_elsewhere(tmp_path: Path, where: str) -> None:
    path = tmp_path / where
    path.parent.mkdir(parents=True)
    path.write_bytes(b"one")
    before = snapshot(tmp_path)
    path.write_bytes(b"two")
    assert snapshot(tmp_path) != before
