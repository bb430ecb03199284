"""The learnings tier: a fold of the log, and the tiers, scores and conflicts read from it."""

from __future__ import annotations

import itertools
import subprocess
import sys
from pathlib import Path

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from eventlog.log import EventLog
from eventlog.schema import MEMORY_SESSION
from projections.engine import Runner, stop_after
from projections.learning_rules import assess, gc_candidates
from projections.learnings import LearningsProjector
from projections.policies import LearningSettings
from projections.state_store import JsonStore
from tests.conftest import snapshot
from tests.support.spy import calls


def ts(day: float) -> str:
    from datetime import datetime, timedelta

    moment = datetime(2026, 1, 1) + timedelta(days=day)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def learning(lid: str, text: str, day: float, **fields) -> dict:
    return {
        "type": "learning",
        "learning_id": lid,
        "kind": fields.pop("kind", "preference"),
        "text": text,
        "scope": fields.pop("scope", "project"),
        "source": fields.pop("source", "extractive"),
        "explicit": fields.pop("explicit", True),  # said by the user (inferred ones need evidence)
        "ts": ts(day),
        **fields,
    }


class World:
    """A log, its learnings tier, and assessments of it."""

    def __init__(self, root: Path) -> None:
        self.log = EventLog(root / "log", durability="off")
        self.out = root / "learnings"

    def add(self, session: str, *events: dict) -> None:
        self.log.append_many(session, list(events), system=True)

    def assess(self, day: float, **kwargs):
        projector = LearningsProjector(self.out)
        Runner(self.log, [projector]).catch_up()
        return assess(projector.states(), ts(day), **kwargs)


@pytest.fixture
def world(tmp_path: Path) -> World:
    return World(tmp_path)


def by_id(assessment, lid: str):
    found = assessment.by_id(lid)
    assert found is not None, lid
    return found


# ------------------------------------------------------------------ formulas


def test_confidence_and_priority_formulas_on_fixed_inputs(world: World) -> None:
    world.add("s1", learning("La", "never use default exports", 0, explicit=True))
    a = by_id(world.assess(0), "La")
    # 0.30 * 1/3 + 0.25 * recency 1 + 0.25 * said by the user 0.6 + 0.20 * consistency 1
    assert a.confidence == pytest.approx(0.7)
    assert a.priority == round(0.7 * 50 + 0 * 30 + 1 * 20)

    world.add(
        MEMORY_SESSION,
        {"type": "learning_feedback", "learning_id": "La", "verdict": "confirmed", "ts": ts(0)},
    )
    for _ in range(20):
        world.add(
            MEMORY_SESSION,
            {
                "type": "memory_accessed",
                "learning_ids": ["La"],
                "purpose": "context",
                "reader": "s9",
                "ts": ts(0),
            },
        )
    a = by_id(world.assess(30), "La")
    recency = 0.5 ** (30 / 30)
    assert a.confidence == pytest.approx(0.30 / 3 + 0.25 * recency + 0.25 * 1.0 + 0.20)
    assert a.access_count == 20
    assert a.priority == round(a.confidence * 50 + 1.0 * 30 + 0.5 ** (30 / 7) * 20)


# ------------------------------------------------------------------ promotion and demotion


def test_a_sessions_own_learning_is_hot_until_it_ends_then_warm(world: World) -> None:
    world.add(
        "s1",
        {"type": "session_started", "task": "api", "ts": ts(0)},
        learning("La", "always run the linter", 0),
    )
    assert by_id(world.assess(0, reader="s1"), "La").level == "hot"
    assert by_id(world.assess(0, reader="s2"), "La").level == "warm"
    world.add("s1", {"type": "session_ended", "status": "done", "ts": ts(1)})
    assert by_id(world.assess(1, reader="s1"), "La").level == "warm"  # hot -> warm at its end
    assert by_id(world.assess(0.5, reader="s1"), "La").level == "hot"  # as it was before


def test_session_scoped_learnings_go_cold_when_the_session_ends(world: World) -> None:
    world.add(
        "s1",
        learning("La", "use the staging database here", 0, scope="session"),
        {"type": "session_ended", "status": "done", "ts": ts(1)},
    )
    assert by_id(world.assess(1, reader="s1"), "La").level == "cold"


def test_warm_goes_cold_after_warm_days_without_a_match(world: World) -> None:
    world.add(
        "s1",
        learning("La", "always run the linter", 0),
        {"type": "session_ended", "status": "done", "ts": ts(0)},
    )
    assert by_id(world.assess(29), "La").level == "warm"
    assert by_id(world.assess(31), "La").level == "cold"


def test_a_match_promotes_cold_to_warm_and_warm_to_hot(world: World) -> None:
    world.add(
        "s1",
        learning("La", "never use default exports in modules", 0),
        learning("Lb", "always pin dependency versions", 0),
        {"type": "session_ended", "status": "done", "ts": ts(0)},
    )
    cue = "refactor the module exports"
    assert by_id(world.assess(10, reader="s2", cue=cue), "La").level == "hot"  # warm -> hot
    assert by_id(world.assess(10, reader="s2", cue=cue), "Lb").level == "warm"  # no match
    cold = world.assess(60, reader="s2", cue=cue)
    assert by_id(cold, "La").level == "warm"  # cold -> warm on a match
    assert by_id(cold, "Lb").level == "cold"
    # the match, once recorded, keeps it warm for warm_days more
    world.add(
        MEMORY_SESSION,
        {
            "type": "memory_accessed",
            "learning_ids": ["La"],
            "matched": ["La"],
            "purpose": "context",
            "reader": "s2",
            "ts": ts(60),
        },
    )
    assert by_id(world.assess(80), "La").level == "warm"


def test_explicit_recall_promotes_cold_to_hot_for_that_session(world: World) -> None:
    world.add(
        "s1",
        learning("La", "always pin dependency versions", 0),
        {"type": "session_ended", "status": "done", "ts": ts(0)},
    )
    assert by_id(world.assess(60, reader="s3"), "La").level == "cold"
    world.add(
        MEMORY_SESSION,
        {
            "type": "memory_accessed",
            "learning_ids": ["La"],
            "purpose": "recall",
            "reader": "s3",
            "ts": ts(60),
        },
    )
    assert by_id(world.assess(60, reader="s3"), "La").level == "hot"
    assert by_id(world.assess(100, reader="s4"), "La").level == "cold"  # only for s3


def test_rejection_sends_hot_to_cold_and_out_of_every_load(world: World) -> None:
    world.add("s1", learning("La", "always use tabs", 0))
    assert by_id(world.assess(0, reader="s1"), "La").level == "hot"
    world.add(
        MEMORY_SESSION,
        {"type": "learning_feedback", "learning_id": "La", "verdict": "rejected", "ts": ts(1)},
    )
    a = by_id(world.assess(1, reader="s1", cue="tabs"), "La")
    assert (a.status, a.level, a.loaded) == ("rejected", "cold", False)


def test_hot_capacity_keeps_the_best_and_moves_the_rest_to_warm(world: World) -> None:
    world.add("s1", *[learning(f"L{i:02d}", f"keep{i} module{i} tidy{i}", 0) for i in range(25)])
    assessment = world.assess(0, reader="s1", settings=LearningSettings(hot_items=20))
    assert len(assessment.level("hot")) == 20
    assert len(assessment.level("warm")) == 5


def test_anchors_are_hot_for_every_reader_and_session_anchors_only_for_theirs(world: World) -> None:
    world.add(
        "s1",
        learning("Lp", "I am a backend engineer", 0, kind="anchor"),
        learning("Ls", "Build the users API", 0, kind="anchor", scope="session"),
        {"type": "session_ended", "status": "done", "ts": ts(0)},
    )
    later = world.assess(400, reader="s2")
    assert by_id(later, "Lp").level == "hot"
    assert by_id(later, "Ls").level == "cold"
    assert by_id(world.assess(400, reader="s1"), "Ls").level == "hot"


# ------------------------------------------------------------------ conflicts


def test_compatible_statements_merge(world: World) -> None:
    world.add(
        "s1",
        learning("La", "never use default exports", 0),
        learning("Lb", "Never use default exports!", 2),
    )
    assessment = world.assess(2)
    assert by_id(assessment, "La").mentions == 2
    assert by_id(assessment, "Lb").status == "merged"
    (c,) = assessment.conflicts
    assert (c.resolution, c.winner, c.open) == ("merged", "La", False)


def test_recency_wins(world: World) -> None:
    world.add(
        "s1",
        learning("La", "always use default exports", 0),
        learning("Lb", "never use default exports", 1),
    )
    (c,) = world.assess(1).conflicts
    assert (c.learning_a, c.learning_b, c.resolution, c.winner, c.reason) == (
        "La",
        "Lb",
        "superseded",
        "Lb",
        "recency wins",
    )
    assert by_id(world.assess(1), "La").status == "superseded"


def test_explicit_beats_inferred_and_the_newer_loser_leaves_it_open(world: World) -> None:
    world.add(
        "s1",
        learning("La", "always use default exports", 0, source="user"),
        learning("Lb", "never use default exports", 1, explicit=False),
    )
    (c,) = world.assess(1).conflicts
    assert (c.winner, c.reason, c.open) == ("La", "explicit beats inferred", True)
    world.add(
        MEMORY_SESSION,
        {"type": "learning_feedback", "learning_id": "Lb", "verdict": "confirmed", "ts": ts(2)},
    )
    (c,) = world.assess(2).conflicts  # both explicit now: recency decides, nothing open
    assert (c.winner, c.reason, c.open) == ("Lb", "recency wins", False)


def test_project_specific_beats_global(world: World) -> None:
    world.add(
        "s1",
        learning("La", "always use default exports", 0, scope="project"),
        learning("Lb", "never use default exports", 1, scope="global"),
    )
    (c,) = world.assess(1).conflicts
    assert (c.winner, c.reason) == ("La", "project-specific beats global")


# ------------------------------------------------------------------ housekeeping


def test_archive_and_restore_change_what_is_loaded(world: World) -> None:
    world.add("s1", learning("La", "always run the linter", 0))
    world.add(
        MEMORY_SESSION, {"type": "archived", "learning_ids": ["La"], "reason": "t", "ts": ts(1)}
    )
    assert by_id(world.assess(1, reader="s1"), "La").loaded is False
    world.add(MEMORY_SESSION, {"type": "restored", "learning_id": "La", "ts": ts(2)})
    assert by_id(world.assess(2, reader="s1"), "La").loaded is True


def test_gc_takes_rejected_superseded_and_long_inactive_cold_ones(world: World) -> None:
    world.add(
        "s1",
        learning("La", "always use default exports", 0),
        learning("Lb", "never use default exports", 1),
        learning("Lc", "prefer small functions", 0),
        learning("Ld", "I am a backend engineer", 0, kind="anchor"),
        {"type": "session_ended", "status": "done", "ts": ts(1)},
    )
    cfg = LearningSettings()
    assert set(gc_candidates(world.assess(10), cfg)) == {"La"}
    assert set(gc_candidates(world.assess(120), cfg)) == {"La", "Lb", "Lc"}  # anchors stay


def test_an_edit_changes_text_and_scope_from_its_time_on_and_lists_its_actor(
    world: World,
) -> None:
    world.add("s1", learning("La", "always run the linter", 0))
    world.add(
        MEMORY_SESSION,
        {"type": "learning_feedback", "learning_id": "La", "verdict": "confirmed", "ts": ts(1)}
        | {"actor": "carol", "reason": "agreed"},
        {"type": "learning_edited", "learning_id": "La", "text": "run ruff before a commit"}
        | {"actor": "dave", "reason": "sharper", "ts": ts(2)},
        {"type": "learning_edited", "learning_id": "La", "scope": "session"}
        | {"actor": "erin", "ts": ts(3)},
    )
    before = by_id(world.assess(1.5), "La")
    assert (before.text, before.scope) == ("always run the linter", "project")
    edited = by_id(world.assess(2.5), "La")
    assert (edited.text, edited.scope) == ("run ruff before a commit", "project")
    now = by_id(world.assess(4), "La")
    assert (now.text, now.scope) == ("run ruff before a commit", "session")
    assert [(c["action"], c["actor"]) for c in now.curation] == [
        ("confirmed", "carol"),
        ("edited", "dave"),
        ("edited", "erin"),
    ]
    assert now.curation[1]["text"] == "run ruff before a commit" and "text" not in now.curation[2]


def test_an_edit_of_a_learning_no_one_recorded_changes_nothing(world: World) -> None:
    world.add("s1", learning("La", "always run the linter", 0))
    world.add(
        MEMORY_SESSION,
        {
            "type": "learning_edited",
            "learning_id": "Lz",
            "text": "ghost",
            "actor": "u",
            "ts": ts(1),
        },
    )
    assessed = world.assess(2)
    assert [(a.id, a.text, a.curation) for a in assessed.learnings] == [
        ("La", "always run the linter", [])
    ]


# ------------------------------------------------------------------ the fold


memory_events = st.one_of(
    st.builds(lambda t: {"type": "user", "content": t}, st.text(max_size=30)),
    st.builds(
        lambda p: {"type": "action", "tool": "Edit", "params": {"file_path": p}},
        st.sampled_from(["a.py", "b.py"]),
    ),
    st.builds(
        lambda t, k: {
            "type": "learning",
            "learning_id": f"L{abs(hash(t)) % 97}",
            "kind": k,
            "text": t or "x",
            "scope": "project",
            "source": "extractive",
        },
        st.text(min_size=1, max_size=30),
        st.sampled_from(["preference", "decision"]),
    ),
    st.builds(
        lambda t, u: (
            {"type": "session_started", "task": t, "phase": "discover"} | ({"user": u} if u else {})
        ),
        st.text(max_size=20),
        st.sampled_from([None, "u", "v", "*"]),
    ),
    st.just({"type": "session_ended", "status": "done"}),
    st.builds(
        lambda i: {"type": "learning_feedback", "learning_id": f"L{i}", "verdict": "rejected"},
        st.integers(0, 96),
    ),
    st.builds(
        lambda i, t, scope, who: {
            "type": "learning_edited",
            "learning_id": f"L{i}",
            "actor": who,
            **({"text": t} if t else {}),
            **({"scope": scope} if scope or not t else {"scope": "session"}),
        },
        st.integers(0, 96),
        st.text(max_size=20),
        st.sampled_from([None, "session", "global"]),
        st.sampled_from(["u", "v"]),
    ),
    st.builds(
        lambda i: {
            "type": "memory_accessed",
            "learning_ids": [f"L{i}"],
            "purpose": "context",
            "reader": "a",
        },
        st.integers(0, 96),
    ),
)


def project_in_cuts(root: Path, items: list, cuts: list[int], *, read: bool = False) -> None:
    """Append ``items`` (session, event) in the batches ``cuts`` makes, the ``incremental``
    projection caught up after each (its states read then, with ``read``), then a ``rebuilt``
    one folded from zero."""
    log = EventLog(root / "log", durability="off")
    bounds = sorted({0, len(items), *(c for c in cuts if c < len(items))})
    for lo, hi in itertools.pairwise(bounds):
        for session, event in items[lo:hi]:
            log.append_many(session, [event], system=True)
        Runner(EventLog(root / "log"), [LearningsProjector(root / "incremental")]).catch_up()
        if read:  # read, and kept, at every cut
            LearningsProjector(root / "incremental").states()
            LearningsProjector(root / "incremental").owners()
    Runner(EventLog(root / "log"), [LearningsProjector(root / "rebuilt")]).rebuild()


@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    items=st.lists(
        st.tuples(st.sampled_from(["a", "b", MEMORY_SESSION]), memory_events),
        min_size=1,
        max_size=40,
    ),
    cuts=st.lists(st.integers(0, 40), max_size=5),
)
def test_incremental_equals_rebuild(tmp_path_factory: pytest.TempPathFactory, items, cuts) -> None:
    root = tmp_path_factory.mktemp("learn")
    project_in_cuts(root, items, cuts)
    assert snapshot(root / "incremental") == snapshot(root / "rebuilt")
    assert snapshot(root / "rebuilt")  # not vacuous: something was written


def test_as_of_gives_the_tiers_of_that_moment(world: World, tmp_path: Path) -> None:
    world.add(
        "s1",
        learning("La", "always use default exports", 0),
        {"type": "session_ended", "status": "done", "ts": ts(0)},
    )
    world.add("s2", learning("Lb", "never use default exports", 5))
    world.add(
        MEMORY_SESSION,
        {"type": "learning_feedback", "learning_id": "Lb", "verdict": "rejected", "ts": ts(6)},
    )
    past = LearningsProjector(tmp_path / "past")
    Runner(world.log, [past]).rebuild(stop_after(ts=ts(3)))
    then = assess(past.states(), ts(3))
    assert [(a.id, a.level, a.status) for a in then.learnings] == [("La", "warm", "active")]
    # the live tier read at that moment gives the same
    live = world.assess(3)
    assert [(a.id, a.level, a.status) for a in live.learnings] == [("La", "warm", "active")]
    now = world.assess(6)
    # a rejected learning contradicts nothing: the older one stands
    assert by_id(now, "Lb").status == "rejected" and by_id(now, "La").status == "active"


owner_events = st.one_of(
    st.builds(lambda u: {"type": "session_started", "user": u}, st.sampled_from(["alice", "bob"])),
    st.builds(lambda u: {"type": "session_assigned", "user": u}, st.sampled_from(["alice", "bob"])),
    st.just({"type": "user", "content": "hello"}),
)


@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    items=st.lists(
        st.tuples(st.sampled_from(["a", "b", "c"]), owner_events), min_size=1, max_size=30
    ),
    cuts=st.lists(st.integers(0, 30), max_size=5),
)
def test_the_states_read_between_catch_ups_equal_a_rebuilds(
    tmp_path_factory: pytest.TempPathFactory, items, cuts
) -> None:
    """``states()`` (the gate's owners, the learnings) keeps what it read while the manifest
    records a state file unchanged: read after every catch-up of an incremental projection,
    it gives what a rebuild's states read once give, owners included."""
    root = tmp_path_factory.mktemp("owners")
    project_in_cuts(root, items, cuts, read=True)

    def owners(folder: Path) -> dict[str, object]:
        return {s.session: s.info.get("owner") for s in LearningsProjector(folder).states()}

    def stored(folder: Path) -> list[object]:
        return sorted((s.session, repr(s)) for s in LearningsProjector(folder).states())

    assert owners(root / "incremental") == owners(root / "rebuilt")
    assert stored(root / "incremental") == stored(root / "rebuilt")
    assert set(owners(root / "rebuilt")) == {session for session, _ in items}
    indexed = LearningsProjector(root / "incremental").owners()
    assert indexed == {s: o or {} for s, o in owners(root / "rebuilt").items()}
    assert indexed == LearningsProjector(root / "rebuilt").owners()


def test_a_new_process_reads_the_owners_from_their_index(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The owners and states indexes answer without reading a state while the manifest records
    every state unchanged; a session folded since is read from its state, and the indexes
    follow."""
    import projections.learnings as learnings
    import projections.state_index as state_index

    log = EventLog(tmp_path / "log", durability="off")
    for name, user in (("a", "alice"), ("b", "bob"), ("c", None)):
        log.append_many(name, [{"type": "session_started", "user": user}], system=True)
    Runner(log, [LearningsProjector(tmp_path / "l")]).catch_up()
    assert LearningsProjector(tmp_path / "l").owners() == {
        "a": {"user": "alice"},
        "b": {"user": "bob"},
        "c": {},
    }
    assert len(LearningsProjector(tmp_path / "l").states()) == 3
    monkeypatch.setattr(state_index, "_PARSED", state_index.ParsedOnce())  # a new process
    monkeypatch.setattr(learnings, "_LOADED", {})
    loads = calls(monkeypatch, JsonStore, "load")
    assert LearningsProjector(tmp_path / "l").owners()["b"] == {"user": "bob"}
    assert loads == []
    states = LearningsProjector(tmp_path / "l").states()
    assert [s.info.get("owner") for s in states] == [{"user": "alice"}, {"user": "bob"}, None]
    assert loads == []  # the states index too
    log.append_many("b", [{"type": "session_assigned", "user": "alice"}], system=True)
    Runner(log, [LearningsProjector(tmp_path / "l")]).catch_up(sessions=["b"])
    loads.clear()
    assert LearningsProjector(tmp_path / "l").owners()["b"] == {"user": "alice"}
    assert loads == ["b"]
    loads.clear()
    assert LearningsProjector(tmp_path / "l").owners()["b"] == {"user": "alice"} and not loads
    monkeypatch.setattr(learnings, "_LOADED", {})
    monkeypatch.setattr(state_index, "FOLLOW_AT", 1)  # the index follows each state read
    states = LearningsProjector(tmp_path / "l").states()
    assert [s.info.get("owner") for s in states][1] == {"user": "alice"}
    assert loads == ["b"]
    monkeypatch.setattr(learnings, "_LOADED", {})
    assert len(LearningsProjector(tmp_path / "l").states()) == 3 and loads == ["b"]


def test_the_states_index_is_written_again_once_enough_states_were_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A process that reads back each session it changes (a server) does not write the index
    of every session after each change: it is written once ``FOLLOW_AT`` states were read from
    their files; until then a new process reads those few from their states."""
    import projections.learnings as learnings
    import projections.state_index as state_index

    log = EventLog(tmp_path / "log", durability="off")
    names = [f"s{n}" for n in range(state_index.FOLLOW_AT + 1)]
    for name in names:
        log.append_many(name, [{"type": "session_started", "user": "alice"}], system=True)
    Runner(log, [LearningsProjector(tmp_path / "l")]).catch_up()
    LearningsProjector(tmp_path / "l").states()
    path = tmp_path / "l.states.json"
    written = path.stat().st_ino

    def change(sessions: list[str]) -> None:
        for name in sessions:
            log.append_many(name, [{"type": "session_assigned", "user": "bob"}], system=True)
        Runner(log, [LearningsProjector(tmp_path / "l")]).catch_up(sessions=sessions)
        states = LearningsProjector(tmp_path / "l").states()
        assert {s.session for s in states if s.info["owner"] == {"user": "bob"}} >= set(sessions)

    change(names[:1])
    assert path.stat().st_ino == written  # one read back: the index waits
    monkeypatch.setattr(learnings, "_LOADED", {})  # a new process reads that one from its state
    assert LearningsProjector(tmp_path / "l").states()[0].info["owner"] == {"user": "bob"}
    change(names[1 : state_index.FOLLOW_AT])
    assert path.stat().st_ino != written  # FOLLOW_AT waiting: written again
    index = orjson.loads(path.read_bytes())
    owners = {s: entry[1]["info"]["owner"] for s, entry in index.items()}
    assert owners == {
        **{name: {"user": "bob"} for name in names[: state_index.FOLLOW_AT]},
        names[-1]: {"user": "alice"},
    }


def test_a_purged_session_leaves_the_indexes(tmp_path: Path) -> None:
    """Forgetting purges a session's state: its owner (a user's name) and its facts leave the
    owners and states indexes too."""
    log = EventLog(tmp_path / "log", durability="off")
    for name, user in (("a", "alice"), ("b", "bob")):
        log.append_many(name, [{"type": "session_started", "user": user}], system=True)
    Runner(log, [LearningsProjector(tmp_path / "l")]).catch_up()
    projector = LearningsProjector(tmp_path / "l")
    assert set(projector.owners()) == {"a", "b"}
    assert {s.session for s in projector.states()} == {"a", "b"}
    indexes = [tmp_path / "l.owners.json", tmp_path / "l.states.json"]
    assert all(b"bob" in index.read_bytes() for index in indexes)
    projector.purge(["b"])
    for index in indexes:
        assert b"bob" not in index.read_bytes() and b"alice" in index.read_bytes()


def test_a_states_index_entry_written_by_hand_is_read_from_its_state(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An entry of the states index whose owner is not one the fold records (a null owner
    would make the session everyone's) is not trusted: the state is read again."""
    import projections.learnings as learnings
    import projections.state_index as state_index

    log = EventLog(tmp_path / "log", durability="off")
    log.append_many("a", [{"type": "session_started", "user": "alice"}], system=True)
    Runner(log, [LearningsProjector(tmp_path / "l")]).catch_up()
    LearningsProjector(tmp_path / "l").states()
    path = tmp_path / "l.states.json"
    index = orjson.loads(path.read_bytes())
    index["a"][1]["info"]["owner"] = None
    path.write_bytes(orjson.dumps(index))
    monkeypatch.setattr(learnings, "_LOADED", {})  # a new process
    monkeypatch.setattr(state_index, "_PARSED", state_index.ParsedOnce())
    (state,) = LearningsProjector(tmp_path / "l").states()
    assert state.info["owner"] == {"user": "alice"}


def _files_holding(root: Path, needle: bytes) -> list[str]:
    return sorted(p.name for p in root.rglob("*") if p.is_file() and needle in p.read_bytes())


def test_a_session_dropped_by_the_tier_leaves_the_indexes(tmp_path: Path) -> None:
    """A session whose log is gone is dropped by the next catch-up, and a rebuild drops every
    session: their learnings' text and owner leave the indexes with their states, though no
    state is read after (the index was written again only once states were read)."""
    log = EventLog(tmp_path / "log", durability="off")
    for name, user in (("a", "alice"), ("b", "bob")):
        events = [
            {"type": "session_started", "user": user},
            learning(f"l{name}", f"ZEBRA-{name}", 1),
        ]
        log.append_many(name, events, system=True)
    Runner(log, [LearningsProjector(tmp_path / "l")]).catch_up()
    LearningsProjector(tmp_path / "l").states()
    LearningsProjector(tmp_path / "l").owners()
    assert _files_holding(tmp_path, b"ZEBRA-b") == ["b.json", "b.jsonl", "l.states.json"]
    next(tmp_path.glob("log/**/b.jsonl")).unlink()
    Runner(log, [LearningsProjector(tmp_path / "l")]).catch_up()
    assert _files_holding(tmp_path, b"ZEBRA-b") == []
    assert _files_holding(tmp_path, b"bob") == []  # the manifest does not name b either
    assert {s.session for s in LearningsProjector(tmp_path / "l").states()} == {"a"}
    Runner(log, [LearningsProjector(tmp_path / "l")]).rebuild()
    assert not (tmp_path / "l.states.json").exists() and not (tmp_path / "l.owners.json").exists()
    assert [s.session for s in LearningsProjector(tmp_path / "l").states()] == ["a"]


# a reader in a process of its own: catches up the sessions named on each line, then reads
# the states (the index waits for FOLLOW_AT of them read from their files)
READER = """
import sys
from pathlib import Path
from eventlog.log import EventLog
from projections.engine import Runner
from projections.learnings import LearningsProjector
root = Path(sys.argv[1])
log = EventLog(root / "log", durability="off")
for line in sys.stdin:
    Runner(log, [LearningsProjector(root / "l")]).catch_up(sessions=line.split())
    print(" ".join(s.session for s in LearningsProjector(root / "l").states()), flush=True)
"""


def test_a_state_another_process_dropped_is_not_written_back_to_the_index(
    tmp_path: Path,
) -> None:
    """A reader waiting to write a session's state into the index (``FOLLOW_AT``) while
    another process drops it (its log removed) does not write it back when it writes the
    index: the session's text is nowhere on disk."""
    import projections.state_index as state_index

    log = EventLog(tmp_path / "log", durability="off")
    names = [f"s{n}" for n in range(state_index.FOLLOW_AT - 1)]
    log.append_many("b", [learning("lb", "ZEBRA-b", 1)], system=True)
    for name in names:
        log.append_many(name, [{"type": "session_started", "user": "alice"}], system=True)
    Runner(log, [LearningsProjector(tmp_path / "l")]).catch_up()
    LearningsProjector(tmp_path / "l").states()  # the index, every session in it
    reader = subprocess.Popen(
        [sys.executable, "-c", READER, str(tmp_path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert reader.stdin is not None and reader.stdout is not None

    def read_in_reader(sessions: list[str]) -> list[str]:
        for name in sessions:
            log.append_many(name, [learning(f"x{name}", f"more of {name}", 2)], system=True)
        reader.stdin.write(" ".join(sessions) + "\n")
        reader.stdin.flush()
        return reader.stdout.readline().split()

    try:
        assert "b" in read_in_reader(["b"])  # b read from its state: waiting to be indexed
        next(tmp_path.glob("log/**/b.jsonl")).unlink()
        log = EventLog(tmp_path / "log", durability="off")  # one that lists the sessions now
        Runner(log, [LearningsProjector(tmp_path / "l")]).catch_up()  # drops b
        assert _files_holding(tmp_path, b"ZEBRA-b") == []
        assert read_in_reader(names) == names  # FOLLOW_AT read: the index is written
        index = orjson.loads((tmp_path / "l.states.json").read_bytes())
        assert set(index) == set(names)
        assert _files_holding(tmp_path, b"ZEBRA-b") == []
    finally:
        reader.stdin.close()
        assert reader.wait(timeout=60) == 0


def test_a_learning_written_into_the_states_index_by_hand_is_found_by_a_deep_check(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An index entry keeps the identity of the state it was read from, so one edited by hand
    with that identity kept (a learning injected, an owner changed) is taken for the state
    while the state is unchanged: a deep catch-up (``project``, ``verify --tiers``) reads every
    indexed state, finds the entries that differ and deletes the indexes; the log's learnings
    are read again."""
    import projections.learnings as learnings
    import projections.state_index as state_index

    log = EventLog(tmp_path / "log", durability="off")
    log.append_many("a", [{"type": "session_started", "user": "alice"}], system=True)
    log.append_many("a", [learning("la", "tabs", 1)], system=True)
    Runner(log, [LearningsProjector(tmp_path / "l")]).catch_up()
    LearningsProjector(tmp_path / "l").states()
    LearningsProjector(tmp_path / "l").owners()
    for name, edit in (
        ("states", lambda v: v["learnings"].append({**v["learnings"][0], "text": "INJECTED"})),
        ("owners", lambda v: v.update(user="mallory")),
    ):
        path = tmp_path / f"l.{name}.json"
        index = orjson.loads(path.read_bytes())
        edit(index["a"][1])
        path.write_bytes(orjson.dumps(index))
    monkeypatch.setattr(learnings, "_LOADED", {})  # a new process
    monkeypatch.setattr(state_index, "_PARSED", state_index.ParsedOnce())
    (state,) = LearningsProjector(tmp_path / "l").states()
    assert [a["text"] for a in state.learnings] == ["tabs", "INJECTED"]  # taken for the state
    assert LearningsProjector(tmp_path / "l").owners() == {"a": {"user": "mallory"}}
    problems = LearningsProjector(tmp_path / "l").state_store.damage()
    assert problems == [
        "l.owners.json: a's entry is not its state's",
        "l.states.json: a's entry is not its state's",
    ]
    (report,) = Runner(log, [LearningsProjector(tmp_path / "l")], deep=True).catch_up()
    assert all(o.rebuilt_because is None for o in report.outcomes)  # repaired: the indexes go
    (state,) = LearningsProjector(tmp_path / "l").states()
    assert [a["text"] for a in state.learnings] == ["tabs"]
    assert LearningsProjector(tmp_path / "l").owners() == {"a": {"user": "alice"}}
    assert LearningsProjector(tmp_path / "l").state_store.damage() == []
