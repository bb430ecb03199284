"""A bound is one type: a seq or a normalised UTC time, parsed the same way from a command line
and from the library, inclusive, with one error naming where the value came from."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from types import SimpleNamespace

import pytest

from eventlog.bound import Bound
from eventlog.errors import InvalidBoundError, InvalidQueryError


def test_a_seq_is_an_int_or_ascii_digits_and_a_time_is_normalised_to_utc() -> None:
    assert Bound.parse(3, "until") == Bound.parse("3", "--until") == Bound(seq=3)
    plus_two = datetime(2026, 1, 2, 5, 0, tzinfo=timezone(timedelta(hours=2)))
    expected = Bound(ts="2026-01-02T03:00:00.000000Z")
    assert Bound.parse("2026-01-02T05:00:00+02:00", "as_of") == expected
    assert Bound.parse(plus_two, "as_of") == expected
    assert Bound.parse(expected, "as_of") is expected
    assert str(expected) == "2026-01-02T03:00:00.000000Z" and str(Bound(seq=7)) == "7"


def test_a_bound_includes_its_own_point() -> None:
    at = SimpleNamespace(seq=3, ts="2026-01-02T03:00:00.000000Z")
    later = SimpleNamespace(seq=4, ts="2026-01-02T03:00:00.000001Z")
    for bound in (Bound(seq=3), Bound(ts=at.ts)):
        assert not bound.passed(at) and bound.passed(later)


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("yesterday", "not an RFC 3339 timestamp"),
        ("³", "not an RFC 3339 timestamp"),  # a digit, but not one a seq is written with
        (datetime(2026, 1, 1), "needs a time zone"),
        ("0001-01-01T00:00:00+01:00", "outside years 1-9999"),
        (True, "is not a time"),
    ],
)
def test_a_value_that_is_no_bound_is_one_error_naming_its_option(
    value: object, problem: str
) -> None:
    with pytest.raises(InvalidBoundError, match=f"^--until: .*{problem}"):
        Bound.parse(value, "--until")  # type: ignore[arg-type]
    assert issubclass(InvalidBoundError, InvalidQueryError)  # what Memory's callers catch


def test_a_time_only_bound_refuses_a_seq() -> None:
    assert Bound.time(None, "now") is None
    assert Bound.time(datetime(2026, 1, 1, tzinfo=UTC), "now") == "2026-01-01T00:00:00.000000Z"
    with pytest.raises(InvalidBoundError, match=r"^since: "):
        Bound.time("12", "since")
    with pytest.raises(InvalidBoundError):
        Bound()
