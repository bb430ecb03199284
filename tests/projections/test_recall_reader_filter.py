"""A scoped reader's filter (``recall._where``) is answered from the cold table's scalar
indexes, and keeps exactly what the reader may read: its sessions, the learnings it may see,
the workspace's documents and its own, never another user's; whatever the search (nearest
neighbours, full text), the rows it lets through are those the rule names, row for row."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from projections.cold import ColdStore
from projections.recall import _keeps, _nearest, _text_rows, _where
from projections.units import Unit

SESSIONS = ("alice-1", "bob-1", "team-1", "team-2")
# the edges of the prefix ranges: "users" itself, names just past "users/" and "users/bob/"
SOURCES = (
    "notes.md",
    "users.md",
    "users0.md",
    "usersa/x.md",
    "users/alice/plan.md",
    "users/bob/plan.md",
    "users/bob2/plan.md",
    "users/bo/plan.md",
    "users/bob.md",
    "zeta.md",
)
LEARNINGS = ("alice-1:7:0", "bob-1:7:0", "team-1:7:0", "airsspec.memory:3:0")
DIM = 8


def units() -> list[Unit]:
    made = [
        Unit(f"{s}:{seq}:0", "message", "user", f"{s} says hello {seq}", session=s)
        for s in SESSIONS
        for seq in range(1, 6)
    ]
    made += [
        Unit(u, "learning", "decision", f"hello learning {u}", session=u.rsplit(":", 2)[0])
        for u in LEARNINGS
    ]
    made += [Unit(f"src:{p}:0", "source", "document", f"hello {p}", source=p) for p in SOURCES]
    return made


@pytest.fixture(scope="module")
def table(tmp_path_factory: pytest.TempPathFactory) -> object:
    store = ColdStore(tmp_path_factory.mktemp("cold"), "test", DIM)
    made = units()
    rng = np.random.default_rng(0)
    vectors = [(v / np.linalg.norm(v)).astype("float32") for v in rng.normal(size=(len(made), DIM))]
    store.add(made, list(vectors), [""] * len(made))
    store.maintain(ann_min_rows=10_000)
    opened = store.dataset()  # the read path: pylance
    assert opened is not None
    indexed = {i.field_names[0] for i in opened.describe_indices()}
    assert {"session", "kind", "unit_id", "source"} <= indexed  # what the filter tests
    return opened


def allowed(unit: Unit, sessions: set[str], user: str | None, learnings: set[str] | None) -> bool:
    """The rule, in Python: what the filter must keep."""
    if unit.kind == "learning":
        return learnings is None or unit.unit_id in learnings or unit.session in sessions
    if unit.kind == "source":
        assert unit.source is not None
        mine = user is not None and unit.source.startswith(f"users/{user}/")
        return user is None or not unit.source.startswith("users/") or mine
    return unit.session in sessions


READERS = [
    ({"team-1", "team-2", "bob-1"}, "bob", {"bob-1:7:0", "team-1:7:0"}),
    ({"team-1", "team-2"}, "(team)", {"team-1:7:0"}),
    ({"alice-1", "team-1"}, "alice", set()),
    (set(), "carol", set()),
    ({"team-2"}, None, {"airsspec.memory:3:0"}),
    ({"team-1"}, "bob", None),  # every learning
    (set(), None, set()),
    # a unit id of another kind among the learnings: only a learning is kept by its id
    ({"team-1"}, "alice", {"bob-1:3:0", "team-2:7:0", "airsspec.memory:3:0"}),
]


@pytest.mark.parametrize(("sessions", "user", "learnings"), READERS)
def test_a_scoped_search_keeps_exactly_what_its_reader_may_read(
    table: object, sessions: set[str], user: str | None, learnings: set[str]
) -> None:
    where = _where(None, None, None, None, sessions, user, learnings)
    assert "starts_with" not in where and "NULL" not in where  # index-only tests
    expected = {u.unit_id for u in units() if allowed(u, sessions, user, learnings)}
    total = len(units())
    query = np.ones(DIM, dtype="float32") / np.sqrt(DIM)
    near = _nearest(table, query, where, total, exact=False)["unit_id"].to_pylist()
    text = _text_rows(table, "hello", where, total)["unit_id"].to_pylist()
    assert set(near) == expected
    assert set(text) == expected
    others = {u.unit_id for u in units()} - expected
    assert not others & set(near) and not others & set(text)
    # the same rule tested on a row, for a search filtered after its cut: row for row
    every = table.to_table(columns=["unit_id", "session", "kind", "source"]).to_pylist()  # type: ignore[attr-defined]
    assert {r["unit_id"] for r in every if _keeps(sessions, user, learnings)(r)} == expected


def test_another_users_rows_never_reach_a_scoped_memorys_search(tmp_path: Path) -> None:
    """Through ``Memory``: bob's search for words alice's session, learning and document hold
    returns none of them, and the team's session and the workspace's document are found."""
    from airsspec.memory import Memory
    from airsspec.workspace import init_workspace

    init_workspace(tmp_path)
    (tmp_path / "airsspec.toml").write_text('[cold]\nembedder = "hash"\n')
    private = tmp_path / ".airsspec" / "sources" / "users"
    for user in ("alice", "bob"):
        (private / user).mkdir(parents=True)
        (private / user / "plan.md").write_text(f"# Plan\nzebra migration notes of {user}\n")
    (tmp_path / ".airsspec" / "sources" / "team.md").write_text("# Team\nzebra migration for all\n")
    with Memory.open(tmp_path) as admin:
        admin.scoped(user="alice").append("a1", {"type": "user", "content": "zebra migration A"})
        admin.scoped(user="bob").append("b1", {"type": "user", "content": "zebra migration B"})
        admin.append("t1", {"type": "user", "content": "zebra migration for the team"})
        admin.scoped(user="alice").learnings.add("Always run the zebra migration dry", session="a1")
        admin.project()
        everything = admin.search("zebra migration", k=50)["hits"]
        assert {h["session"] for h in everything} >= {"a1", "b1", "t1"}
        hits = admin.scoped(user="bob").search("zebra migration", k=50, fresh=False)["hits"]
    sessions = {h["session"] for h in hits if h["session"]}
    documents = {h["source"] for h in hits if h["kind"] == "source"}
    assert "a1" not in sessions and {"b1", "t1"} <= sessions
    assert documents == {"team.md", "users/bob/plan.md"}
    assert not [h for h in hits if "alice" in (h["source"] or "") or "dry" in h["text"]]
