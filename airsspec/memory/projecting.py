"""Rebuilding projections, and reading the library: services over a ``Kernel``.

A projection is a fold of the log (hot, warm, tokens, learnings, cold: ``PROJECTIONS``);
bringing one current is the kernel's (``Kernel.catch_up``, freshness declared in
``airsspec.kernel.freshness``). A rebuild folds all of the log again (up to a point in the past
with ``as_of``, into a folder outside the workspace).
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from airsspec.errors import InvalidQueryError, ScopeError
from airsspec.kernel.freshness import PROJECTIONS, chosen
from airsspec.kernel.purge import follow
from airsspec.memory.records import outside
from eventlog.bound import Bound

if TYPE_CHECKING:
    from airsspec.kernel import Kernel
    from projections.engine import Progress, RunReport


def rebuild(
    kernel: Kernel,
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

    if not kernel.gate.admin or kernel.read_only:
        raise ScopeError(
            "a rebuild replays every user's sessions (a past one copies them out): "
            f"only an admin rebuilds (not a memory scoped to {kernel.scope or 'read only'})"
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
        reports = rebuild(kernel, others, jobs=jobs, progress=progress) if others else []
        return [*reports, rebuild_cold(kernel, address)]
    log = kernel.log
    if as_of is None:
        if out is not None:
            raise InvalidQueryError("out goes with as_of (a live rebuild writes in place)")
        follow(kernel, fresh=True)
        if "cold" in names:
            kernel.register_sources()
        return Runner(log, kernel.workspace.projectors(names), progress, jobs=jobs).rebuild()
    if out is None:
        raise InvalidQueryError("as_of needs out: the folder to write the past projections into")
    target = outside(kernel, out, "out")
    projectors = kernel.workspace.projectors(names, root=target)
    return Runner(log, projectors, progress, jobs=jobs).rebuild(Bound.parse(as_of, "as_of").passed)


def library(kernel: Kernel) -> list[dict[str, Any]]:
    """The library (the warm projection's ``history-NNN.md`` files, with session and
    range) of the sessions this memory's scope may read, ordered by number."""
    kernel.fresh("library")
    warm = kernel.projector("warm")
    allowed = kernel.gate.visible()
    return [e for e in warm.entries() if allowed is None or e["session"] in allowed]


def library_file(kernel: Kernel, number: int) -> tuple[dict[str, Any], str] | None:
    """Library file ``number``: its entry and text (None: no such file, or one of a session
    this memory's scope may not read: the two are answered alike)."""
    from projections.warm import library_file_name

    warm = kernel.projector("warm")
    name = library_file_name(number)
    kernel.fresh("library")
    entry = next((e for e in warm.entries() if e["file"] == name), None)
    path = warm.library_dir / name
    if entry is None and kernel.scope.named:
        return None  # a file no fold names has no owner a scoped reader could match
    allowed = kernel.gate.visible()
    if entry is not None and allowed is not None and entry["session"] not in allowed:
        return None  # another user's: as if there were no such file
    if not path.exists():
        return None
    return entry or {}, path.read_text(encoding="utf-8")
