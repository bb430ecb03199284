"""The warm library's listing index: a new process takes each session's library files from
one file while the session's state is the one indexed, reads a changed or hand-edited entry
from its state again, and a purged session leaves the index."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

import projections.state_index as state_index
import projections.warm as warm
from airsspec import Memory
from projections.state_store import JsonStore
from projections.warm import WarmProjector
from tests.support.logs import use_extractive_summarizer
from tests.support.spy import calls


@pytest.fixture
def state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A workspace of two compacted sessions, projected, its index following each state read
    (``FOLLOW_AT``: tested with the learnings' states): its ``state`` folder."""
    monkeypatch.setattr(state_index, "FOLLOW_AT", 1)
    config, _ = Memory.init(tmp_path)
    use_extractive_summarizer(config)
    with Memory.open(tmp_path) as memory:
        for session in ("alpha", "beta"):
            memory.append_many(
                session, [{"type": "user", "content": f"{session} step {i}"} for i in range(12)]
            )
            memory.compact(session, force=True)
        memory.project(("hot", "warm"))
    return tmp_path / ".airsspec" / "state"


def _projector(state: Path) -> WarmProjector:
    return WarmProjector(state / "warm", state.parent / "knowledge" / "library")


def _new_process(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Forget what this process read (as a new one would); the sessions whose state is loaded
    from now on."""
    monkeypatch.setattr(warm, "_LISTED", {})
    monkeypatch.setattr(state_index, "_PARSED", state_index.ParsedOnce())
    return calls(monkeypatch, JsonStore, "load")


def test_a_new_process_lists_the_library_from_the_index(
    state: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    entries = _projector(state).entries()
    assert {e["session"] for e in entries} == {"alpha", "beta"}
    index = orjson.loads((state / "warm.listed.json").read_bytes())
    assert set(index) == {"alpha", "beta"}
    loads = _new_process(monkeypatch)
    assert _projector(state).entries() == entries
    assert loads == []
    # an entry edited by hand to name a file outside the library is read from its state again
    index["alpha"][1][0]["file"] = "../../airsspec.toml"
    (state / "warm.listed.json").write_bytes(orjson.dumps(index))
    loads = _new_process(monkeypatch)
    assert _projector(state).entries() == entries
    assert loads == ["alpha"]


def test_a_changed_state_is_read_again(state: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = state / "warm" / "beta.json"
    path.write_bytes(path.read_bytes())  # a save replaces the file: another identity
    loads = _new_process(monkeypatch)
    assert {e["session"] for e in _projector(state).entries()} == {"alpha", "beta"}
    assert loads == ["beta"]


def test_a_purged_session_leaves_the_listing_index(state: Path) -> None:
    projector = _projector(state)
    projector.purge(["beta"])
    index = orjson.loads((state / "warm.listed.json").read_bytes())
    assert set(index) == {"alpha"}
    assert {e["session"] for e in projector.entries()} == {"alpha"}
