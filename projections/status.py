"""Health of the projections: per tier its size, items, and lag behind the log.

Lag is the number of records in the log that a tier has not folded yet. A session whose saved
state cannot be read, or no longer matches the log, is listed as degraded (the next ``project``
rebuilds it). So is each damaged file a tier's sessions share (the cold table's), named, and
a session whose log cannot be read (a stray file among the logs): the others are unaffected.

Asked for the sessions one reader may see, the lag, the sessions behind and the degraded ones
are theirs alone, and the tier's items and bytes (every user's) are not given: a count of what
others hold, watched over time, would tell what they do.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any

from eventlog.errors import CorruptLogError, UnsafePathError
from eventlog.log import Log
from eventlog.recovery import TailState
from projections.checkpoints import Checkpoint, log_tail, record_at
from projections.engine import OUTPUT_CHANGED
from projections.fold import Projector


@dataclass
class TierStatus:
    """One tier's size, items, lag and what is degraded (``bytes`` and ``items``: None when
    asked for some sessions only, see the module)."""

    tier: str
    bytes: int | None
    items: int | None
    sessions: int
    lag_records: int
    behind_sessions: list[str] = field(default_factory=list)
    degraded: list[str] = field(default_factory=list)


def log_heads(log: Log, sessions: Collection[str] | None = None) -> dict[str, TailState | None]:
    """Each session's last complete record in the log (None: its log cannot be read), of every
    session or of ``sessions`` only: what every tier's lag is measured against, read once for
    all of them."""
    heads: dict[str, TailState | None] = {}
    for session in log.sessions():
        if sessions is not None and session not in sessions:
            continue
        try:
            heads[session] = log_tail(log, session)
        except (CorruptLogError, UnsafePathError):  # the log's own listing names the problem
            heads[session] = None
    return heads


def tier_status(
    log: Log,
    projector: Projector[Any],
    sessions: Collection[str] | None = None,
    heads: dict[str, TailState | None] | None = None,
    matches: dict[tuple[Any, ...], str | None] | None = None,
) -> TierStatus:
    """The status of ``projector``'s tier against the log: of every session, or of ``sessions``
    only (one reader's; see the module). ``heads``: ``log_heads(log, sessions)``, read now when
    not given; ``matches``: where each checkpoint stands against the log (``record_at``),
    filled as they are read, shared by the tiers of one status (their checkpoints are mostly
    the same)."""
    heads = log_heads(log, sessions) if heads is None else heads
    matches = {} if matches is None else matches
    store = projector.state_store
    manifest = store.read_manifest()
    if sessions is None:
        status = TierStatus(
            projector.name,
            store.disk_bytes(),
            projector.item_count(),
            len(store.sessions()),
            0,
        )
    else:
        status = TierStatus(
            projector.name, None, None, len(set(store.sessions()) & set(sessions)), 0
        )
    status.degraded += [f"{problem} (project repairs it)" for problem in store.damage()]
    kept = store.digests_kept()
    for session, head in heads.items():
        if head is None:
            status.degraded.append(f"{session}: not projected: its log cannot be read")
            continue
        cached = manifest.get(session)
        checkpoint = cached.checkpoint if cached else None
        if store.output_changed(session, cached, deep=True, kept=kept):
            status.degraded.append(f"{session}: {OUTPUT_CHANGED} (project repairs it)")
        if checkpoint is None:
            loaded = store.load(session)
            checkpoint = loaded[1] if loaded else None
        if checkpoint is None:
            lag = head.seq
        elif (reason := _matched(log, session, checkpoint, matches)) is not None:
            status.degraded.append(f"{session}: {reason}")
            lag = head.seq
        else:
            lag = head.seq - checkpoint.seq
        if lag:
            status.lag_records += lag
            status.behind_sessions.append(session)
    kept.save()
    return status


def _matched(
    log: Log,
    session: str,
    checkpoint: Checkpoint,
    matches: dict[tuple[Any, ...], str | None],
) -> str | None:
    """``record_at(log, session, checkpoint)``, read once for every tier of a status."""
    key = (session, checkpoint.seq, checkpoint.hash, checkpoint.end)  # quicker than its hash
    if key not in matches:
        matches[key] = record_at(log, session, checkpoint)
    return matches[key]
