"""Event ids and timestamps.

Ids are UUIDv7 strings (RFC 9562): 48 bits of Unix milliseconds, then random bits. Within one
process they are strictly increasing: the first id of a millisecond starts from fresh random
bits, and the ones after it in the same millisecond (or while the clock went back) count up from
it (RFC 9562's "monotonic random" method), so sorting ids sorts events by creation time.
Timestamps are UTC RFC 3339 with microseconds and a ``Z`` suffix, so comparing the strings
compares the times.
"""

from __future__ import annotations

import os
import random
import re
import threading
import time
from datetime import UTC, datetime

_lock = threading.Lock()
_random = random.Random()  # ids need uniqueness, not secrecy
_last = 0  # the last candidate handed out: (millis << 74) | 74 random bits
_RAND_BITS = 74
_RAND_MASK = (1 << _RAND_BITS) - 1
_LOW62 = (1 << 62) - 1
_RUN_BITS = 12  # a run: the candidates that share all but their last three hex digits
_RUN_MASK = (1 << _RUN_BITS) - 1
_LAST_DIGITS = [f"{low:03x}" for low in range(1 << _RUN_BITS)]
# The last run's text (``_run_prefix``): (candidate >> _RUN_BITS, the text before its digits).
_prefix: tuple[int, str] = (-1, "")


def _after_fork_in_child() -> None:
    global _last
    _random.seed()  # a forked child must not repeat its parent's ids: a fresh random start
    _last = 0


os.register_at_fork(after_in_child=_after_fork_in_child)

_TS_RE = re.compile(r"^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d{1,9})?([Zz]|[+-]\d{2}:\d{2})$")


def new_event_ids(count: int) -> list[str]:
    """Return ``count`` new, process-monotonic UUIDv7 strings: consecutive values from one
    start (unique, and sorted as they were made)."""
    global _last
    millis = time.time_ns() // 1_000_000
    with _lock:
        if millis > _last >> _RAND_BITS:  # a new millisecond: a fresh random start
            first = (millis << _RAND_BITS) | _random.getrandbits(_RAND_BITS)
        else:
            first = _last + 1
        _last = first + count - 1
    if count == 1:
        return [_run_prefix(first) + _LAST_DIGITS[first & _RUN_MASK]]
    ids: list[str] = []
    candidate, end = first, first + count
    while candidate < end:  # the ids of a run: its prefix joined to each of their last digits
        run_end = min(end, ((candidate >> _RUN_BITS) + 1) << _RUN_BITS)
        low = candidate & _RUN_MASK
        ids += map(_run_prefix(candidate).__add__, _LAST_DIGITS[low : low + run_end - candidate])
        candidate = run_end
    return ids


def _run_prefix(candidate: int) -> str:
    """The text of ``candidate``'s id before its last three hex digits (the low 12 bits, which
    alone differ within its run); cached, since the ids after it share it."""
    global _prefix
    high = candidate >> _RUN_BITS
    cached = _prefix
    if cached[0] != high:
        cached = _prefix = (high, _format(candidate)[:-3])
    return cached[1]


def _format(candidate: int) -> str:
    """The UUIDv7 text of a (millis << 74 | random) candidate."""
    millis, rand = candidate >> _RAND_BITS, candidate & _RAND_MASK
    # 48 bits ms | 4 bits version (7) | 12 bits rand_a | 2 bits variant | 62 bits rand_b
    value = (millis << 80) | (0x7 << 76) | ((rand >> 62) << 64) | (0b10 << 62) | (rand & _LOW62)
    h = f"{value:032x}"
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def new_event_id() -> str:
    """Return a new, process-monotonic UUIDv7 string."""
    return new_event_ids(1)[0]


def format_ts(moment: datetime) -> str:
    """``moment`` as UTC ``YYYY-MM-DDTHH:MM:SS.ffffffZ``, the year always four digits
    (``strftime("%Y")`` leaves years before 1000 unpadded, and then the strings no longer sort
    as the times do)."""
    m = moment.astimezone(UTC)
    return (
        f"{m.year:04d}-{m.month:02d}-{m.day:02d}T{m.hour:02d}:{m.minute:02d}:{m.second:02d}"
        f".{m.microsecond:06d}Z"
    )


_second: tuple[int, str] = (-1, "")  # the last whole second formatted, and its text


def utc_now() -> str:
    """Now, formatted as ``format_ts`` does (the whole-second part is formatted once a
    second: this runs on every append)."""
    global _second
    micros = time.time_ns() // 1000
    second, fraction = divmod(micros, 1_000_000)
    cached = _second
    if cached[0] != second:
        cached = _second = (second, time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second)))
    return f"{cached[1]}.{fraction:06d}Z"


def parse_ts(text: str) -> datetime:
    """Parse an RFC 3339 timestamp with an explicit offset; raise ValueError otherwise."""
    if not _TS_RE.match(text):
        raise ValueError(f"not an RFC 3339 timestamp with a UTC offset: {text!r}")
    normalized = text.upper().replace(" ", "T").replace("Z", "+00:00")
    # datetime accepts at most 6 fractional digits.
    normalized = re.sub(r"(\.\d{6})\d+", r"\1", normalized)
    try:
        return datetime.fromisoformat(normalized)
    except ValueError as exc:  # a day or a year that does not exist (year 0, February 30)
        raise ValueError(f"{text!r}: {exc}") from exc


def normalize_ts(text: str) -> str:
    """Return ``text`` as UTC ``YYYY-MM-DDTHH:MM:SS.ffffffZ``; ``ValueError`` for a time that
    is not RFC 3339 or falls outside years 1-9999 once converted to UTC."""
    try:
        return format_ts(parse_ts(text))
    except OverflowError as exc:
        raise ValueError(f"{text!r} falls outside years 1-9999 once converted to UTC") from exc
