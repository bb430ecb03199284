"""The order learnings reach a prompt in: the user's rules, then what the user said, then what
was inferred; scores only order learnings of the same standing, and an inferred learning needs
evidence from two sessions (or a confirmation) before it is loaded at all."""

from __future__ import annotations

from pathlib import Path

import pytest

from eventlog.schema import MEMORY_SESSION
from projections.policies import LearningSettings
from tests.projections.test_learnings import World, by_id, learning, ts

RULE = "Never use default exports; use named exports."


@pytest.fixture
def world(tmp_path: Path) -> World:
    return World(tmp_path)


def _accessed(world: World, ids: list[str], times: int, day: float) -> None:
    event = {
        "type": "memory_accessed",
        "learning_ids": ids,
        "purpose": "context",
        "reader": "s9",
        "ts": ts(day),
    }
    world.add(MEMORY_SESSION, *[event] * times)


def _inferred_in_two_sessions(world: World, n: int, day: float) -> list[str]:
    """``n`` inferred learnings, each stated in sessions a and b (so each is loaded)."""
    ids = []
    for i in range(n):
        text = f"rerun flaky{i} suite{i} with seed{i}"
        world.add("a", learning(f"La{i:02d}", text, day, explicit=False, kind="decision"))
        world.add("b", learning(f"Lb{i:02d}", text, day, explicit=False, kind="decision"))
        ids.append(f"La{i:02d}")
    return ids


def test_access_counts_never_lift_an_inferred_learning_over_a_user_rule(world: World) -> None:
    world.add(MEMORY_SESSION, learning("Lrule", RULE, 0, source="user", kind="correction"))
    inferred = _inferred_in_two_sessions(world, 12, 50)
    _accessed(world, inferred, 20, 50)  # returned in 20 contexts each: the most "popular"
    assessment = world.assess(50, reader="s9", settings=LearningSettings(hot_items=3))
    rule = by_id(assessment, "Lrule")
    assert all(
        by_id(assessment, i).priority > rule.priority for i in inferred
    )  # scores favour them
    order = assessment.prompt_order()
    assert order[0].id == "Lrule" and (rule.standing, rule.loaded) == (0, True)
    assert {a.standing for a in order[1:]} == {2}


def test_said_by_the_user_outranks_inferred_in_every_tier(world: World) -> None:
    world.add("u", learning("Lsaid", "always pin dependency versions", 0, kind="preference"))
    inferred = _inferred_in_two_sessions(world, 3, 0)
    _accessed(world, inferred, 20, 0)
    assessment = world.assess(0, reader="u", settings=LearningSettings(hot_items=1))
    hot = assessment.level("hot")  # only one fits: the one the user said
    assert [a.id for a in hot] == ["Lsaid"]
    assert all(by_id(assessment, i).level == "warm" for i in inferred)  # moved down, not out
    assert assessment.prompt_order()[0].id == "Lsaid"


def test_an_inferred_learning_needs_two_sessions_or_a_confirmation(world: World) -> None:
    text = "the sandbox checkout is per process so LiveView tests need shared mode"
    world.add("s1", learning("L1", text, 0, explicit=False, kind="error_fix"))
    once = by_id(world.assess(0, reader="s1"), "L1")
    assert (once.seen_in, once.level, once.status) == (1, "cold", "active")  # searchable only
    world.add(
        MEMORY_SESSION,
        {"type": "learning_feedback", "learning_id": "L1", "verdict": "confirmed", "ts": ts(1)},
    )
    confirmed = by_id(world.assess(1, reader="s1"), "L1")
    assert (confirmed.standing, confirmed.loaded) == (0, True)


def test_the_same_inference_in_a_second_session_makes_it_loadable(world: World) -> None:
    text = "always run mix ash.codegen before writing migrations"
    world.add("s1", learning("L1", text, 0, explicit=False, kind="decision"))
    world.add("s1", learning("L2", text, 1, explicit=False, kind="decision"))  # same session
    assert by_id(world.assess(1), "L1").level == "cold"
    world.add("s2", learning("L3", text, 2, explicit=False, kind="decision"))
    a = by_id(world.assess(2), "L1")
    assert (a.seen_in, a.mentions, a.loaded) == (2, 3, True)
    assert by_id(world.assess(2), "L3").status == "merged"


def test_an_explicit_recall_loads_an_inferred_learning_for_that_session(world: World) -> None:
    world.add(
        "s1", learning("L1", "git push needs set-upstream on new branches", 0, explicit=False)
    )
    world.add(
        MEMORY_SESSION,
        {
            "type": "memory_accessed",
            "learning_ids": ["L1"],
            "purpose": "recall",
            "reader": "s2",
            "ts": ts(1),
        },
    )
    assert by_id(world.assess(1, reader="s2"), "L1").level == "hot"
    assert by_id(world.assess(1, reader="s3"), "L1").level == "cold"


def test_the_order_is_a_function_of_the_facts_and_the_moment(world: World) -> None:
    world.add(MEMORY_SESSION, learning("Lrule", RULE, 0, source="user", kind="correction"))
    _accessed(world, _inferred_in_two_sessions(world, 4, 0), 5, 0)
    first = [(a.id, a.level, a.priority) for a in world.assess(3, reader="s9").prompt_order()]
    again = [(a.id, a.level, a.priority) for a in world.assess(3, reader="s9").prompt_order()]
    assert first == again and first[0][0] == "Lrule"


def test_the_same_error_fix_seen_in_two_sessions_is_loaded(world: World) -> None:
    fix = "mix test failed (no secret_key_base for the endpoint); passed after changing test.exs"
    world.add("s1", learning("L1", fix, 0, explicit=False, kind="error_fix"))
    world.add("s2", learning("L2", fix, 1, explicit=False, kind="error_fix"))
    world.add("s2", learning("L3", "never use default exports", 1, kind="preference"))
    assessment = world.assess(1)
    a = by_id(assessment, "L1")
    assert (a.seen_in, a.loaded, by_id(assessment, "L2").status) == (2, True, "merged")
    assert by_id(assessment, "L3").status == "active"  # other kinds never merge with it
