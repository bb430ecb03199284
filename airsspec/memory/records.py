"""The log's own calls on the facade: replay, verify (with seals), seal, import and export.

Each reads or appends through the workspace's log and checks the caller's scope first: a
scoped memory replays, verifies and exports only sessions it may read, and is refused a
whole-log export. A file a call writes (a seal, an export, a past rebuild) must be outside the
workspace folder, links followed: written there it could overwrite a session's log or a
projection's files (``OutputInsideWorkspaceError``).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from airsspec.errors import (
    InvalidQueryError,
    OutputInsideWorkspaceError,
    ScopeError,
    VerifyFailedError,
)
from airsspec.memory.learnings import Learnings
from eventlog.bound import Bound
from eventlog.layout import MEMORY_SESSION

if TYPE_CHECKING:
    from airsspec.kernel import Kernel
    from eventlog.importers import ImportResult
    from eventlog.seal import Seal
    from eventlog.verify import SessionReport, VerifyReport


@dataclass(frozen=True)
class Verified:
    """What ``verify`` found: the log's report, the seal it was checked against (if any) and
    the problems of projections' outputs (when asked)."""

    report: VerifyReport
    sealed_at: str | None = None
    warnings: list[str] = field(default_factory=list)  # about the seal (unsigned, say)
    projection_problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """Every session verified, and no projection is degraded."""
        return self.report.ok and not self.projection_problems

    @property
    def records(self) -> int:
        """Records verified."""
        return self.report.records

    @property
    def sessions(self) -> list[SessionReport]:
        """Each session's report (its problem, warnings, quarantined bytes)."""
        return self.report.sessions


def outside(kernel: Kernel, value: str | Path, option: str) -> Path:
    """``value`` resolved, refused (``OutputInsideWorkspaceError``) when it is the workspace
    folder or under it, or is no name this system can hold (a lone surrogate)."""
    try:
        target, root = Path(value).resolve(), kernel.root.resolve()
    except (UnicodeEncodeError, ValueError) as exc:
        raise OutputInsideWorkspaceError(
            f"{option} {value!r}: not a path this system can name ({exc})"
        ) from exc
    if target == root or root in target.parents:
        raise OutputInsideWorkspaceError(
            f"{option} {value}: inside the workspace {root}; write outside it (the log and "
            "the projections live there)"
        )
    return target


def replay(
    kernel: Kernel,
    session: str,
    *,
    from_seq: int = 1,
    until: Bound | int | str | datetime | None = None,
    raw: bool = False,
    plain: bool = False,
) -> Iterator[Any]:
    """The records of ``session`` from ``from_seq`` up to ``until`` (a seq or a time);
    with ``raw``, each with its exact stored line (bytes, no newline); with ``plain``, a
    record may be its checked stored dict (``EventLog.read``), for a caller that shows it."""
    kernel.check_session(session)
    bound = None if until is None else Bound.parse(until, "until")
    return _replayed(kernel, session, from_seq, bound, raw, plain)


def _replayed(
    kernel: Kernel, session: str, from_seq: int, bound: Bound | None, raw: bool, plain: bool
) -> Iterator[Any]:
    gate = kernel.gate
    # the workspace's own log reaches a user as its filtered view (``Scopes.reads_record``)
    readable = (
        Learnings(kernel).readable() if session == MEMORY_SESSION and not gate.admin else None
    )
    plain = plain and readable is None  # the filter reads models
    for located in kernel.log.read(session, from_seq=from_seq, plain=plain):
        record = located.record
        if bound is not None and bound.passed(record):
            return
        if readable is not None and not gate.reads_record(record, readable):
            continue
        yield (record, located.raw) if raw else record


def _load_seal(against: str | Path | Seal, key: bytes | None) -> tuple[Seal, list[str]]:
    from eventlog.seal import Seal, load_seal

    if isinstance(against, Seal):
        return against, []
    try:
        data = Path(against).read_bytes()
    except OSError as exc:
        raise InvalidQueryError(f"against {against}: {exc.strerror}") from exc
    return load_seal(data, key)


def verify(
    kernel: Kernel,
    sessions: Iterable[str] | None = None,
    *,
    against: str | Path | Seal | None = None,
    key: bytes | None = None,
    projections: bool = False,
) -> Verified:
    """Check every record, the hash chains and the heads; with ``against`` (a seal, or
    the path of one written by ``seal``; ``key``: the key it was signed with), also that
    nothing sealed earlier was cut or rewritten; with ``projections``, that every
    projection's outputs are what was written (``status``'s degraded list)."""
    from eventlog.verify import verify as verify_log

    if key is not None and against is None:
        raise InvalidQueryError("key goes with against (the seal it signed)")
    seal, notes = _load_seal(against, key) if against is not None else (None, [])
    if sessions is None and (visible := kernel.gate.visible()) is not None:
        sessions = sorted(visible)
    chosen = list(sessions) if sessions is not None else None
    for session in chosen if kernel.scope.named and chosen else ():
        kernel.check_session(session)  # another user's is missing, as a missing one is
    sealed = seal.anchors() if seal is not None else None
    report = verify_log(kernel.log, chosen, sealed)
    problems = (
        [f"{t.tier}: {d}" for t in kernel.status() for d in t.degraded] if projections else []
    )
    return Verified(report, seal.sealed_at if seal else None, notes, problems)


def seal(kernel: Kernel, target: str | Path | None = None, *, key: bytes | None = None) -> Seal:
    """A seal of every session's head (of a scoped memory: every session its scope may read),
    verified first (``VerifyFailedError`` naming the sessions that fail); written as JSON to
    ``target`` when given (outside the workspace, else ``OutputInsideWorkspaceError``).
    ``key`` signs it (16+ bytes)."""
    from eventlog.seal import make_seal
    from eventlog.verify import verify as verify_log

    path = outside(kernel, target, "target") if target is not None else None
    if key is not None and len(key) < 16:
        raise InvalidQueryError(f"key: a key needs at least 16 bytes (got {len(key)})")
    visible = kernel.gate.visible()  # None: every session
    chosen = sorted(visible) if visible is not None else None
    report = verify_log(kernel.log, chosen)
    if not report.ok:
        bad = ", ".join(s.session for s in report.sessions if s.problem)
        raise VerifyFailedError(f"not sealed: verify fails for {bad}")
    made = make_seal(kernel.log, key, chosen)
    if path is not None:
        path.write_text(made.model_dump_json(indent=2, exclude_none=True) + "\n", "utf-8")
    return made


def import_transcripts(
    kernel: Kernel,
    fmt: str,
    paths: Iterable[str | Path],
    *,
    prefix: str = "",
    keep_secrets: bool = False,
    live: bool = False,
) -> list[ImportResult]:
    """Import agent transcripts (``FORMATS``: lossless, idempotent, all or nothing); what
    each session received. ``live``: a transcript still being written keeps its unfinished
    last line for the next import. Imports into one workspace take turns."""
    from compactor.compactor import file_lock
    from eventlog.importers import ImportOptions, import_paths

    with file_lock(kernel.workspace.layout.lock_path("import"), wait=True, holder="import"):
        return import_paths(
            kernel.log,
            fmt,
            [Path(p) for p in paths],
            ImportOptions(prefix, keep_secrets, live),
            opening=kernel.gate.opening,
        )


def export(kernel: Kernel, session: str, fmt: str, target: str | Path | None = None) -> bytes:
    """An imported ``session`` in its source format ``fmt``, byte for byte; written to
    ``target`` too when given (outside the workspace)."""
    from eventlog.importers import export_session

    path = outside(kernel, target, "target") if target is not None else None
    kernel.check_session(session)
    data = export_session(kernel.log, fmt, session)
    if path is not None:
        path.write_bytes(data)
    return data


def export_parquet(kernel: Kernel, target: str | Path) -> int:
    """The whole log as Parquet under ``target`` (partitioned by session date), with
    token counts; how many records were written. A scoped memory is refused."""
    from projections.analytics import export_parquet as write_parquet

    if kernel.scope.named:
        raise ScopeError(
            f"export parquet holds every session; a memory scoped to {kernel.scope} cannot write it"
        )
    path = outside(kernel, target, "target")
    kernel.fresh("tokens")
    log_dir = kernel.log.log_dir  # on a bucket: its synced cache
    return write_parquet(log_dir, kernel.workspace.layout.tier_dir("tokens"), path)
