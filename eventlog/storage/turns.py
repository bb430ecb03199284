"""Turns: a queue that bounds how often a writer of a busy shared session can lose its seq.

Writers of one session race for each seq (whoever creates the key of seq N owns seq N), and
the race is not fair: a writer whose cache is behind (one that joined late, or fetches slowly)
must first fetch what it lost to, while the others append again. So a writer that lost
``LOSSES_BEFORE_QUEUING`` races in a row queues: it creates ``log/{session}/wait-{ms}-{id}``
(an empty object; keys sort by the client's clock, then at random) and rewrites the session's
head under ``If-Match``, the same seq and hash naming its marker (``turn``: other bytes, so
another ETag; the same bytes would keep theirs), so every other writer's next head update is
refused and it starts listing the session before each append (``ObjectStoreLog``'s contended
mode); it does so again at each race it loses while queued. The listing they already make to
find the session's end shows the markers, since a marker's key sorts after every batch key: no
extra request. A writer that sees a live marker
ahead of its own (or any, if it has none) does not append: it polls the session with jittered
exponential backoff until the markers ahead are gone. The writer of the first marker appends,
and deletes its marker once its batch is stored.

The guarantee, for K writers of one session: once a writer's marker is the first, every other
writer stores at most two more batches before it (one already in flight, and one begun before
it saw the refused head update), so it loses at most 2(K-1) more races. A marker older than
``MARKER_TTL_S`` (its writer's clock) is ignored, so a writer that died queued holds nobody up
for longer; clock skew between machines changes only the order of the queue, never which
records are stored. Safety never rests on turns: a seq is still taken only by creating its key.
"""

from __future__ import annotations

import time
import uuid

LOSSES_BEFORE_QUEUING = 3
MARKER_TTL_S = 10.0
PREFIX = "wait-"


def marker_name() -> str:
    """A new marker's name (the last part of its key): the time, then a random id."""
    return f"{PREFIX}{time.time_ns() // 1_000_000:013d}-{uuid.uuid4().hex[:12]}"


def live(names: list[str], now_ms: int | None = None) -> list[str]:
    """The markers among ``names`` that have not expired, in queue order."""
    now_ms = time.time_ns() // 1_000_000 if now_ms is None else now_ms
    alive = []
    for name in names:
        digits = name[len(PREFIX) :].split("-", 1)[0]
        if digits.isdigit() and now_ms - int(digits) < MARKER_TTL_S * 1000:
            alive.append(name)
    return sorted(alive)


def ahead(names: list[str], mine: str | None) -> bool:
    """Whether a live marker is ahead of ``mine`` (of any writer's, with no marker)."""
    queue = live(names)
    return bool(queue) and queue[0] != mine


def backoff(round_: int) -> float:
    """The pause before poll ``round_`` (0, 1, ...): doubling from 2 ms up to 50 ms, jittered
    over [0.5, 1] of it so pollers do not move in step."""
    import random

    return float(min(0.002 * 2**round_, 0.05) * random.uniform(0.5, 1.0))
