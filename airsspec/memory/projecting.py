"""Bringing projections current, rebuilding them, and reading the library, for ``Memory``.

A projection is a fold of the log (hot, warm, tokens, learnings, cold: ``PROJECTIONS``); the
``Runner`` of ``projections.engine`` folds what each has not seen, or, for a rebuild, all of it
(up to a point in the past with ``as_of``, into a folder outside the workspace). A cold
projection whose embedder cannot load is skipped with a warning: search degrades to full text
and says so. A session whose log is damaged is skipped and named; the others are current.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from airsspec.errors import AirsspecError, InvalidQueryError, ScopeError
from airsspec.forgetting import follow
from airsspec.memory.records import outside
from airsspec.workspace import TIERS as PROJECTIONS
from eventlog.bound import Bound
from eventlog.schema import MEMORY_SESSION

if TYPE_CHECKING:
    import threading

    from airsspec.memory.core import Memory
    from projections.engine import Progress, RunReport

logger = logging.getLogger(__name__)


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


def project(
    memory: Memory,
    projections: Iterable[str] | str = PROJECTIONS,
    *,
    sessions: Iterable[str] | None = None,
    jobs: int = 1,
    progress: Progress | None = None,
    warn: bool = True,
    cancel: threading.Event | None = None,
    deep: bool = False,
) -> list[RunReport]:
    """Bring ``projections`` up to the head of the log (only ``sessions``, when given).
    A cold projection whose embedder cannot load is left as it is, with a warning (search
    degrades to full-text and says so). A session whose log is damaged is skipped, with a
    warning unless ``warn`` is false (the reports name it either way). Setting ``cancel``
    stops after the record being folded, with what was done saved. ``deep`` reads every
    output file and repairs one whose content differs from what was written. A ``forget``
    run on another machine sharing the log is followed here (``airsspec.forgetting``). The
    reports name only sessions this memory may read (``memory.scopes``)."""
    reports = catch_up(
        memory,
        projections,
        sessions=sessions,
        jobs=jobs,
        progress=progress,
        warn=warn,
        cancel=cancel,
        deep=deep,
    )
    return memory.scopes.reports(reports)


def catch_up(
    memory: Memory,
    projections: Iterable[str] | str = PROJECTIONS,
    *,
    sessions: Iterable[str] | None = None,
    jobs: int = 1,
    progress: Progress | None = None,
    warn: bool = True,
    cancel: threading.Event | None = None,
    deep: bool = False,
) -> list[RunReport]:
    """What ``project`` does, its reports unfiltered, whoever asks: the access gate's own
    reads (who owns what) run here, below the gate."""
    from projections.engine import Runner

    names = chosen(projections)
    if "cold" in names and (problem := memory.embedder_problem()):
        logger.warning("the cold projection was not updated: %s", problem)
        names = tuple(t for t in names if t != "cold")
    if "cold" in names:
        follow(memory, fresh=True)  # first: a forgotten user's documents are not registered
    registered = "cold" in names and not memory.read_only and register_sources(memory)
    if registered and sessions is not None:
        sessions = {*sessions, MEMORY_SESSION}
    projectors = memory.workspace.projectors(names)
    runner = Runner(memory.workspace.log, projectors, progress, jobs=jobs, cancel=cancel, deep=deep)
    reports = runner.catch_up(sessions=sessions)
    follow(memory)  # a ``forget`` run on another machine sharing the log is applied here too
    for report in reports if warn else ():
        for outcome in report.failed:
            logger.warning(
                "%s: skipped %s (its log is damaged; the other sessions are current): %s",
                report.projector,
                outcome.session,
                outcome.failed,
            )
    return reports


def rebuild(
    memory: Memory,
    projections: Iterable[str] | str = PROJECTIONS,
    *,
    as_of: Bound | int | str | datetime | None = None,
    out: str | Path | None = None,
    jobs: int = 1,
    progress: Progress | None = None,
    engine: str = "local",
    address: str | None = None,
) -> list[RunReport]:
    """Delete ``projections`` and replay the log; with ``as_of`` (a seq or a time),
    materialise them as they were then into ``out`` (a folder outside the workspace)
    instead. With ``engine="ray"`` the cold projection is rebuilt on Ray (at ``address``,
    else on a local Ray started for the run), the others here."""
    from projections.engine import Runner

    if not memory.scopes.admin or memory.read_only:
        raise ScopeError(
            "a rebuild replays every user's sessions (a past one copies them out): "
            f"only an admin rebuilds (not a memory scoped to {memory.scope or 'read only'})"
        )
    names = chosen(projections)
    if engine not in ("local", "ray"):
        raise InvalidQueryError(f"engine must be local or ray (got {engine!r})")
    if address is not None and engine != "ray":
        raise InvalidQueryError("address goes with engine ray")
    if engine == "ray" and as_of is not None:
        raise InvalidQueryError("engine ray rebuilds the live cold projection; as_of runs here")
    if engine == "ray" and out is None and "cold" in names:
        from airsspec.ray_engine import rebuild_cold

        others = tuple(t for t in names if t != "cold")
        reports = rebuild(memory, others, jobs=jobs, progress=progress) if others else []
        return [*reports, rebuild_cold(memory, address)]
    log = memory.workspace.log
    if as_of is None:
        if out is not None:
            raise InvalidQueryError("out goes with as_of (a live rebuild writes in place)")
        follow(memory, fresh=True)
        if "cold" in names:
            register_sources(memory)
        return Runner(log, memory.workspace.projectors(names), progress, jobs=jobs).rebuild()
    if out is None:
        raise InvalidQueryError("as_of needs out: the folder to write the past projections into")
    target = outside(memory, out, "out")
    projectors = memory.workspace.projectors(names, root=target)
    return Runner(log, projectors, progress, jobs=jobs).rebuild(Bound.parse(as_of, "as_of").passed)


def register_sources(memory: Memory) -> list[str]:
    """Append a ``source_indexed`` event for each document under ``sources/`` added,
    changed or removed since its last event; the paths (a damaged own log: a warning)."""
    from projections.sources import register_sources as register

    ws = memory.workspace
    try:
        records = register(ws.log, ws.sources_dir, ws.state_dir / "sources.json")
    except AirsspecError as exc:
        logger.warning("documents under sources/ not registered: %s", exc)
        return []
    return [record.path for record in records]


def library(memory: Memory) -> list[dict[str, Any]]:
    """The library (the warm projection's ``history-NNN.md`` files, with session and
    range) of the sessions this memory's scope may read, ordered by number."""
    memory.project(("warm",))
    (warm,) = memory.workspace.projectors(("warm",))
    allowed = memory.scopes.visible()
    return [e for e in warm.entries() if allowed is None or e["session"] in allowed]


def library_file(memory: Memory, number: int) -> tuple[dict[str, Any], str] | None:
    """Library file ``number``: its entry and text (None: no such file, or one of a session
    this memory's scope may not read: the two are answered alike)."""
    from projections.warm import library_file_name

    (warm,) = memory.workspace.projectors(("warm",))
    name = library_file_name(number)
    memory.project(("warm",))
    entry = next((e for e in warm.entries() if e["file"] == name), None)
    path = warm.library_dir / name
    if entry is None and memory.scope.named:
        return None  # a file no fold names has no owner a scoped reader could match
    allowed = memory.scopes.visible()
    if entry is not None and allowed is not None and entry["session"] not in allowed:
        return None  # another user's: as if there were no such file
    if not path.exists():
        return None
    return entry or {}, path.read_text(encoding="utf-8")
