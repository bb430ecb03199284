"""Freshness, declared once: what each read needs current, which projections follow each write.

A read names what it reads (``kernel.fresh("learnings")``) and a write what it wrote
(``kernel.written("compact", session)``); no service picks projections by hand.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Literal

from airsspec.errors import InvalidQueryError
from airsspec.workspace import TIERS as PROJECTIONS

Read = Literal[
    "window",
    "owners",
    "learnings",
    "facts",
    "library",
    "earlier",
    "search",
    "tokens",
    "memory_files",
    "pages",
]
Write = Literal["append", "system", "compact", "extract", "memory_files", "visualize"]

NEEDS: Mapping[Read, tuple[str, ...]] = {
    "window": ("hot",),  # a session's hot window: hot, history, the end of a context
    "owners": ("learnings",),  # who owns each session (the gate's input)
    "learnings": ("learnings",),  # the learnings as they stand, a session's task and phase
    "facts": ("learnings",),  # the facts consolidations recorded (``projections.facts``)
    "library": ("warm",),  # the warm library's files
    "earlier": ("hot", "warm"),  # other sessions' latest summaries (a context's middle)
    "search": ("cold",),  # the cold index
    "tokens": ("tokens",),  # token counts (export parquet)
    "memory_files": ("memory_files",),  # the /memories trees
    "pages": ("warm", "visual"),  # the visual tier's pages (a context with images)
}
"""What each read needs current: the one declaration of freshness for reads."""

FOLLOWS: Mapping[Write, tuple[str, ...]] = {
    "append": ("hot",),  # an agent's events: its next context shows them
    "system": ("hot", "learnings"),  # lifecycle and memory events: owners, task, learnings
    "compact": ("hot", "warm"),  # a summary: the window starts after it, the library holds it
    "extract": ("hot", "learnings"),  # learnings and the extracted mark
    "memory_files": ("memory_files",),  # a /memories change: the next command reads it
    "visualize": ("visual",),  # a session moved to images: its page is rendered
}
"""Which projections follow which write, folded before the write returns (the daemon brings
the rest: tokens and cold after every change)."""


def chosen(projections: Iterable[str] | str) -> tuple[str, ...]:
    """The projections named (``all``: every one); ``InvalidQueryError`` for an unknown one."""
    names = (projections,) if isinstance(projections, str) else tuple(projections)
    if "all" in names:
        return PROJECTIONS
    unknown = [t for t in names if t not in PROJECTIONS]
    if unknown:
        raise InvalidQueryError(
            f"unknown projection(s) {', '.join(unknown)}; available: {', '.join(PROJECTIONS)}, all"
        )
    return names
