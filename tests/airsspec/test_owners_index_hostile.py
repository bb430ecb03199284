"""The learnings owners index (``state/learnings.owners.json``) under attack: a session
reassigned while a reader's process keeps its caches, and an index file damaged or holding
values of the wrong shape. The index is a cache of the states: whatever it holds, the gate's
answer is the one the states give, and a damaged index is never a traceback."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from airsspec import Memory

ENV = {"AIRSSPEC_COLD_EMBEDDER": "hash", "ANTHROPIC_API_KEY": ""}


@pytest.fixture
def memory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    for name, value in ENV.items():
        monkeypatch.setenv(name, value)
    with Memory.open(tmp_path, create=True) as opened:
        opened.scoped(user="alice").append("a1", {"type": "user", "content": "alice zebrafish"})
        yield opened


def _index(memory: Memory) -> Path:
    found = list(memory.workspace.root.rglob("learnings.owners.json"))
    assert len(found) == 1, found
    return found[0]


def test_a_session_reassigned_moves_between_long_lived_readers(memory: Memory) -> None:
    alice, bob = memory.scoped(user="alice"), memory.scoped(user="bob")
    assert "a1" in alice.scopes.owners() and "a1" not in bob.scopes.owners()
    assert [h["session"] for h in alice.search("zebrafish")["hits"]] == ["a1"]  # caches primed
    with Memory.open(memory.workspace.root) as other:  # another opener, same process
        other.sessions.assign("a1", user="bob")
    assert "a1" in bob.scopes.owners()
    assert "a1" not in alice.scopes.owners()
    assert alice.search("zebrafish")["hits"] == []
    assert [h["session"] for h in bob.search("zebrafish")["hits"]] == ["a1"]


@pytest.mark.parametrize(
    "owner", ["bob", ["bob"], 7, None, {"user": 7}, {"user": "Al ice"}, {"user": "alice", "x": 1}]
)
def test_an_index_owner_of_the_wrong_shape_is_read_again_from_the_state(
    memory: Memory, owner: object
) -> None:
    alice, bob = memory.scoped(user="alice"), memory.scoped(user="bob")
    assert "a1" in alice.scopes.owners()
    path = _index(memory)
    index = orjson.loads(path.read_bytes())
    index["a1"][1] = owner
    path.write_bytes(orjson.dumps(index))
    assert "a1" in alice.scopes.owners()
    assert "a1" not in bob.scopes.owners()
    assert orjson.loads(path.read_bytes())["a1"][1] == {"user": "alice"}  # written again
