"""Facts with validity in time: a fold of ``facts_recorded`` events (incremental equals
rebuild), read as of a time, a later fact of the same owner, kind and key superseding an
earlier one without erasing it."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from eventlog.log import EventLog
from projections.engine import Runner
from projections.facts import HeldFact, search, timeline
from projections.learnings import LearningsProjector
from tests.conftest import snapshot
from tests.projections.test_learnings import ts


def recorded(*facts: tuple[str, str, str, float], ended: bool = False, to_seq: int = 1) -> dict:
    """A ``facts_recorded`` event of (kind, key, text, day) facts, each from record #1."""
    return {
        "type": "facts_recorded",
        "from_seq": 1,
        "to_seq": to_seq,
        "extractor": {"backend": "rules", "model": "rules", "version": "t"},
        "facts": [
            {
                "kind": kind,
                "key": key,
                "text": text,
                "ended": ended,
                "evidence": [{"session": "x", "seq": 1, "hash": "h"}],
                "since": ts(day),
            }
            for kind, key, text, day in facts
        ],
    }


def started(user: str) -> dict:
    return {"type": "session_started", "user": user}


def read(log: EventLog, out: Path, as_of: float | None = None) -> list[HeldFact]:
    projector = LearningsProjector(out)
    Runner(log, [projector]).catch_up()
    return timeline(projector.states(), visible=None, as_of=None if as_of is None else ts(as_of))


@pytest.fixture
def log(tmp_path: Path) -> EventLog:
    return EventLog(tmp_path / "log", durability="off")


def test_a_later_fact_supersedes_and_the_past_keeps_the_earlier(
    log: EventLog, tmp_path: Path
) -> None:
    log.append_many(
        "s1", [recorded(("decision", "accounts table", "Use Postgres.", 0))], system=True
    )
    log.append_many("s2", [recorded(("decision", "Accounts  Table", "Use MySQL.", 5))], system=True)
    now = read(log, tmp_path / "p")
    old, new = now
    assert (old.text, old.current, old.until) == ("Use Postgres.", False, ts(5))
    assert old.superseded_by == ("x", 1)  # the record the later fact came from
    assert (new.text, new.current, new.until) == ("Use MySQL.", True, None)
    then = read(log, tmp_path / "p", as_of=3)
    assert [(f.text, f.current) for f in then] == [("Use Postgres.", True)]
    assert read(log, tmp_path / "p", as_of=-1) == []


def test_a_finished_task_ends_the_open_one(log: EventLog, tmp_path: Path) -> None:
    log.append_many(
        "s1", [recorded(("task", "add rate limiting", "Add rate limiting.", 0))], system=True
    )
    log.append_many(
        "s2",
        [recorded(("task", "add rate limiting", "Add rate limiting.", 2), ended=True)],
        system=True,
    )
    held = read(log, tmp_path / "p")
    assert [(f.current, f.ended) for f in held] == [(False, False), (False, True)]
    assert [f.current for f in read(log, tmp_path / "p", as_of=1)] == [True]


def test_one_owners_fact_never_supersedes_anothers(log: EventLog, tmp_path: Path) -> None:
    log.append_many("a", [started("alice"), recorded(("user", "name", "I am Al.", 0))], system=True)
    log.append_many("b", [started("bob"), recorded(("user", "name", "I am Bo.", 1))], system=True)
    held = read(log, tmp_path / "p")
    assert [(f.owner, f.current) for f in held] == [
        ({"user": "alice"}, True),
        ({"user": "bob"}, True),
    ]
    visible = timeline(LearningsProjector(tmp_path / "p").states(), visible={"a"}, as_of=None)
    assert [f.text for f in visible] == ["I am Al."]


def test_search_ranks_by_words(log: EventLog, tmp_path: Path) -> None:
    log.append_many(
        "s",
        [
            recorded(
                ("requirement", "emails", "Emails must be lowercased.", 0),
                ("decision", "queue", "Send the welcome email from the job queue.", 0),
            )
        ],
        system=True,
    )
    held = read(log, tmp_path / "p")
    assert [f.key for f in search(held, "lowercased emails", 5)] == ["emails"]


facts_events = st.builds(
    lambda kind, key, day, ended: recorded((kind, key, f"{kind} {key} {day}", day), ended=ended),
    st.sampled_from(["decision", "task", "user"]),
    st.sampled_from(["a", "b", "c"]),
    st.integers(0, 9),
    st.booleans(),
)
any_events = st.one_of(
    facts_events,
    st.builds(lambda t: {"type": "user", "content": t}, st.text(max_size=20)),
    st.builds(started, st.sampled_from(["u", "v"])),
)


@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    items=st.lists(st.tuples(st.sampled_from(["s1", "s2"]), any_events), min_size=1, max_size=30),
    cuts=st.lists(st.integers(0, 30), max_size=4),
    as_of=st.one_of(st.none(), st.integers(0, 9)),
)
def test_incremental_equals_rebuild(tmp_path_factory, items, cuts, as_of) -> None:
    root = tmp_path_factory.mktemp("facts")
    log = EventLog(root / "log", durability="off")
    bounds = sorted({0, len(items), *(c for c in cuts if c < len(items))})
    incremental = LearningsProjector(root / "incremental")
    for lo, hi in itertools.pairwise(bounds):
        for session, event in items[lo:hi]:
            log.append_many(session, [event], system=True)
        Runner(EventLog(root / "log"), [incremental]).catch_up()
    rebuilt = LearningsProjector(root / "rebuilt")
    Runner(EventLog(root / "log"), [rebuilt]).rebuild()
    assert snapshot(root / "incremental") == snapshot(root / "rebuilt")
    when = None if as_of is None else ts(as_of)
    held = timeline(rebuilt.states(), visible=None, as_of=when)
    assert timeline(incremental.states(), visible=None, as_of=when) == held
    recorded_facts = sum(len(e["facts"]) for _, e in items if e["type"] == "facts_recorded")
    assert len(timeline(rebuilt.states(), visible=None, as_of=None)) == recorded_facts
    # at most one current fact per owner, kind and key; every other one ended or superseded
    current = [(tuple(f.owner.items()), f.kind, f.key) for f in held if f.current]
    assert len(current) == len(set(current))
