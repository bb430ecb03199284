"""A bound on a session's history: a seq or a time, the one type every "up to" takes.

``replay --until``, ``rebuild --as-of``, ``Memory.replay(until=...)``, ``Memory.rebuild(as_of=...)``
and the ``now`` of learnings all name a point in the log the same way: a seq (an ``int``, or
text of digits as a command line gives it) or a time (RFC 3339 text with an offset, or an aware
``datetime``), normalised to UTC as records store it. A record is past the bound when its seq
is greater than the seq, or its ``ts`` later than the time: the bound itself is included.
A value that is neither is one ``InvalidBoundError`` naming the option it came from.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from eventlog.errors import InvalidBoundError
from eventlog.ids import format_ts, normalize_ts


@dataclass(frozen=True, slots=True)
class Bound:
    """A seq or a normalised UTC time (exactly one of them) up to which a session is read."""

    seq: int | None = None
    ts: str | None = None

    def __post_init__(self) -> None:
        if (self.seq is None) == (self.ts is None):
            raise InvalidBoundError("a bound is a seq or a time")

    @classmethod
    def parse(cls, value: int | str | datetime | Bound, name: str, *, seq: bool = True) -> Bound:
        """``value`` as a bound, or ``InvalidBoundError`` (``name: problem``). ``seq=False``
        takes times only (a digit string is then read as a time, and refused)."""
        if isinstance(value, Bound):
            if value.seq is not None and not seq:
                raise InvalidBoundError(f"{name}: a time is needed, not a seq")
            return value
        if seq and isinstance(value, int) and not isinstance(value, bool):
            return cls(seq=value)
        if seq and isinstance(value, str) and value.isascii() and value.isdigit():
            try:
                return cls(seq=int(value))
            except ValueError:  # past the digits Python converts (sys.get_int_max_str_digits)
                message = f"{name}: a seq of {len(value)} digits is more than any here"
                raise InvalidBoundError(message) from None
        try:
            if isinstance(value, datetime):
                if value.tzinfo is None:
                    raise ValueError("a datetime needs a time zone (use datetime.now(UTC))")
                return cls(ts=format_ts(value))
            if not isinstance(value, str):
                raise ValueError(f"{value!r} is not a time")
            return cls(ts=normalize_ts(value))
        except (ValueError, OverflowError) as exc:
            raise InvalidBoundError(f"{name}: {exc}") from exc

    @classmethod
    def time(cls, value: str | datetime | None, name: str) -> str | None:
        """``value`` as a normalised UTC time (None stays None), or ``InvalidBoundError``."""
        return None if value is None else cls.parse(value, name, seq=False).ts

    def passed(self, record: Any) -> bool:
        """Whether ``record`` (anything with ``seq`` and ``ts``) lies past this bound."""
        if self.seq is not None:
            return bool(record.seq > self.seq)
        return bool(record.ts > self.ts)  # normalised UTC text compares as the times do

    def __str__(self) -> str:
        return str(self.seq) if self.seq is not None else str(self.ts)
