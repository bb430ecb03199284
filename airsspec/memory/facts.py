"""Facts, a service of the facade (``Memory.facts``): what sessions decided, required, changed,
fixed and left open, with validity in time (``projections.facts``).

Read only through the gate: a scoped memory sees the facts of the sessions it may read, never
another user's. ``as_of`` answers a question about the past with the facts that held then; a
query ranks them (BM25 over kind, key and text).
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any, get_args

from airsspec.errors import InvalidQueryError
from eventlog.bound import Bound
from eventlog.kinds import FactKind
from projections.facts import search, timeline

if TYPE_CHECKING:
    from airsspec.kernel import Kernel
    from projections.facts import HeldFact
    from projections.scopes import Scope

FACT_KINDS: tuple[str, ...] = get_args(FactKind)
"""The kinds of fact, in the catalog's order (``eventlog.schema.FactKind``)."""


def held(kernel: Kernel, *, scope: Scope | None = None, as_of: str | None = None) -> list[HeldFact]:
    """Every fact of the sessions ``scope`` (default: the kernel's; it narrows, never widens)
    may read, as it held at ``as_of`` (None: now), oldest first."""
    kernel.fresh("facts")
    states = kernel.projector("learnings").states()
    return timeline(states, visible=kernel.gate.visible(scope), as_of=as_of)


def facts(
    kernel: Kernel,
    query: str | None = None,
    *,
    as_of: str | datetime | None = None,
    kinds: list[str] | None = None,
    history: bool = False,
    k: int | None = None,
) -> dict[str, Any]:
    """The facts sessions' consolidations recorded (decisions, requirements, files, errors
    and fixes, tasks, facts about the user) that this memory's scope may read, as they
    held at ``as_of`` (default: now): the current ones, or with ``history`` the superseded
    ones too, each marked with when it stopped holding and which record changed it; every
    fact names the records (session, seq) it came from. With ``query``, the best
    matching first; ``kinds`` narrows, ``k`` caps."""
    unknown = [kind for kind in kinds or () if kind not in FACT_KINDS]
    if unknown:
        raise InvalidQueryError(
            f"kind: unknown {', '.join(unknown)}; use one of {', '.join(FACT_KINDS)}"
        )
    when = Bound.time(as_of, "as_of")
    found = held(kernel, as_of=when)
    chosen = [f for f in found if (history or f.current) and (not kinds or f.kind in kinds)]
    if query:
        chosen = search(chosen, query, k or len(chosen))
    elif k is not None:
        chosen = chosen[-k:]
    return {"as_of": when, "facts": [f.to_json() for f in chosen]}
