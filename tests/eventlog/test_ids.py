"""Event ids: UUIDv7 text, unique and increasing within a process, never repeated by a fork."""

from __future__ import annotations

import os
import time
import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from eventlog import ids
from eventlog.ids import new_event_ids


def _check(made: list[str]) -> None:
    assert made == sorted(made) and len(set(made)) == len(made)
    for text in made:
        value = uuid.UUID(text)
        assert str(value) == text and value.version == 7 and value.variant == uuid.RFC_4122


@given(st.lists(st.integers(1, 300), min_size=1, max_size=30))
def test_ids_increase_across_calls_of_any_size(counts: list[int]) -> None:
    made = [i for count in counts for i in new_event_ids(count)]
    assert len(made) == sum(counts)
    _check(made)


def test_ids_within_one_millisecond_count_up_and_carry(monkeypatch: pytest.MonkeyPatch) -> None:
    """A frozen clock keeps every call in one millisecond: ids count up from the first, across
    the boundary of the last 12 hex digits, and carry into the digits before."""
    now = time.time_ns()
    monkeypatch.setattr(ids.time, "time_ns", lambda: now)
    monkeypatch.setattr(ids, "_last", (now // 1_000_000 << ids._RAND_BITS) | ((1 << 48) - 3))
    made = new_event_ids(2) + new_event_ids(1) + new_event_ids(3)
    _check(made)
    lows = [int(text.replace("-", "")[-12:], 16) for text in made]
    assert lows == [(1 << 48) - 2, (1 << 48) - 1, 0, 1, 2, 3]
    assert len({text[:-12] for text in made}) == 2  # the carry changed the digits before


@given(st.integers(0, (1 << 48) - 1), st.integers(1, 9000))
def test_the_ids_of_one_call_are_consecutive_values(low: int, count: int) -> None:
    """One call's ids are one start counting up by one, whichever runs of cached text (the
    ids that share all but their last three digits) they cross."""
    now = time.time_ns()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(ids.time, "time_ns", lambda: now)
        patch.setattr(ids, "_last", (now // 1_000_000 << ids._RAND_BITS) | low)
        made = new_event_ids(count)
    _check(made)
    values = [uuid.UUID(text).int for text in made]
    assert values == [values[0] + step for step in range(count)]


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_does_not_repeat_its_parents_ids(monkeypatch: pytest.MonkeyPatch) -> None:
    """Parent and child in the same millisecond (the clock is frozen for both): without a fresh
    random start the child would hand out exactly the parent's next ids."""
    now = time.time_ns()
    monkeypatch.setattr(ids.time, "time_ns", lambda: now)
    new_event_ids(5)
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report its ids and leave without running pytest's teardown
        try:
            os.write(write, ",".join(new_event_ids(5)).encode())
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as pipe:
        child = pipe.read().decode().split(",")
    assert os.waitpid(pid, 0)[1] == 0
    parent = new_event_ids(5)
    assert len(child) == 5 and not set(child) & set(parent)
    _check(child)
    _check(parent)
