"""Importers: bring other tools' agent transcripts into the log, losslessly and idempotently.

- Lossless: every imported event keeps its source record's exact text in ``origin`` (with the
  bytes around it), so ``export_session`` reproduces the source, byte for byte.
- Idempotent: a source's records are identified by position and SHA-256; re-importing a file
  appends only the records whose position the session does not hold yet (a live transcript
  that grew), and a record that changed since it was imported is refused, never silently
  rewritten. A file named twice in one import (directly, through its folder, through a link)
  is read once. ``origin`` is set only here: ``append`` refuses it.
- All or nothing: every file is parsed, mapped and validated, and every conflict checked, before
  anything is appended; a bad line is reported as ``file:line`` and the log is left as it was.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from eventlog.errors import (
    ImportFailedError,
    InexactJSONError,
    InvalidEventError,
    InvalidSessionIdError,
    SessionExistsError,
    SourceError,
)
from eventlog.exact_json import loads_exact
from eventlog.importers import claude_code, locomo, openhands
from eventlog.importers.sources import Unit, json_array_units, jsonl_units, origin
from eventlog.kinds import FORMATS
from eventlog.layout import check_writer, validate_session_id
from eventlog.log import Log
from eventlog.prepare import validate_input

if TYPE_CHECKING:  # the models are only named: listing FORMATS (a command's help) builds none
    from eventlog.schema import Event, Record


@dataclass
class _Plan:
    session: str
    source: str
    units: list[Unit]
    events: list[dict[str, Any]]  # as mapped from the units
    path: str = ""
    done: frozenset[int] = frozenset()  # positions of the records already imported
    valid: list[Event] = field(default_factory=list)  # the events, validated (``_finish``)


_PREFIX_MAX = 64
_PREFIX = re.compile(rf"[A-Za-z0-9][A-Za-z0-9._-]{{0,{_PREFIX_MAX - 1}}}")


@dataclass(frozen=True)
class ImportOptions:
    """How transcripts are imported. ``prefix`` starts every session id made from a file name.
    Secrets are redacted (when the log has a redactor) and reported in each result, unless
    ``keep_secrets``: only then does ``export_session`` give back the source byte for byte.
    ``live``: transcripts may still be written to (a hook imports while the agent runs), so an
    unfinished last line is left for the next import."""

    prefix: str = ""
    keep_secrets: bool = False
    live: bool = False

    def __post_init__(self) -> None:
        # the prefix is taken as given or refused: never cleaned or cut as a file's name is
        if self.prefix and not _PREFIX.fullmatch(self.prefix):
            raise InvalidSessionIdError(
                f"session prefix {self.prefix!r}: use 1-{_PREFIX_MAX} letters, digits, '.', '_' "
                "or '-', starting with a letter or digit (it begins every imported session id, "
                "which keeps room for the file's name)"
            )


@dataclass(frozen=True)
class ImportResult:
    """What one import did to one session: records appended, skipped, and secrets redacted
    (``seq path (kind)`` each)."""

    session: str
    source: str
    appended: int
    already_imported: int
    redacted: list[str] = field(default_factory=list)


def _session_id(prefix: str, name: str, source: str) -> str:
    cleaned = re.sub(r"[^A-Za-z0-9._-]", "-", f"{prefix}{name}").strip(".-") or "imported"
    try:
        return validate_session_id(cleaned[:128])
    except ValueError as exc:
        raise SourceError(source, None, str(exc)) from exc


def _check_session(log: Log, session: str, source: str, existing: dict[str, str]) -> None:
    """Refuse, before anything is appended, a session the log would refuse: a reserved name
    (in any case), a new id equal to an existing one ignoring case (``existing``: the log's
    sessions by their case-folded ids), or a new id shaped like a secret. Refused by the
    append instead, the files imported before it would stay in the log."""
    try:
        check_writer(session, system=False)
        same = existing.get(session.casefold())
        if same is not None and same != session:
            raise SourceError(
                source,
                None,
                f"would become session {session!r}, and session {same!r} differs from it "
                "only in case",
            )
        if log.redactor is not None and same is None:
            log.redactor.refuse_secret_id(session)
    except SourceError:
        raise
    except ValueError as exc:
        raise SourceError(source, None, str(exc)) from exc


def _files(fmt: str, paths: Iterable[Path]) -> list[Path]:
    """The files under ``paths``, each once (compared resolved, links followed)."""
    found: list[Path] = []
    for path in paths:
        if path.is_dir():
            pattern = "*.jsonl" if fmt == "claude-code" else "*.json"
            found += sorted(p for p in path.rglob(pattern) if p.is_file())
        elif path.is_file():
            found.append(path)
        elif path.exists():  # a FIFO, a device, a socket
            raise SourceError(str(path), None, "not a regular file or a folder")
        else:
            raise SourceError(str(path), None, "no such file or directory")
    seen: set[Path] = set()
    unique = []
    for path in found:
        if path.resolve() not in seen:
            seen.add(path.resolve())
            unique.append(path)
    return unique


def _plans_for_file(fmt: str, path: Path, prefix: str, live: bool = False) -> list[_Plan]:
    try:  # listed a moment ago: it may be gone, or unreadable, by now
        source, data = path.name, path.read_bytes()
    except OSError as exc:
        raise SourceError(str(path), None, exc.strerror or str(exc)) from exc
    if fmt == "claude-code":
        units = jsonl_units(data, str(path), live=live)
        session = _session_id(prefix, claude_code.session_name(path), str(path))
        return [_Plan(session, source, units, claude_code.to_events(units, session))]
    if fmt == "openhands":
        units = json_array_units(data, str(path))
        session = _session_id(prefix, openhands.session_name(path), str(path))
        return [_Plan(session, source, units, openhands.to_events(units, session))]
    try:
        document = loads_exact(data)
    except InexactJSONError as exc:
        raise SourceError(str(path), None, str(exc)) from exc
    except ValueError as exc:
        raise SourceError(str(path), None, f"invalid JSON: {exc}") from exc
    plans = []
    for name, units, start, raw_date in locomo.sessions(document, str(path)):
        session = _session_id(prefix, name, str(path))
        plans.append(_Plan(session, source, units, locomo.to_events(units, start, raw_date)))
    return plans


def _finish(fmt: str, path: Path, plan: _Plan) -> None:
    """Give every event its id and origin, and validate it (errors name file and line); the
    plan then holds the validated events, which ``append_many`` takes as they are."""
    for unit, event in zip(plan.units, plan.events, strict=True):
        event["id"] = f"{plan.session}:{unit.index}"
        event["origin"] = origin(fmt, plan.source, unit)
        try:
            plan.valid.append(validate_input(event, imported=True))
        except InvalidEventError as exc:
            where = f"record {unit.index + 1}" if unit.line == 0 else None
            message = f"{where}: {exc}" if where else str(exc)
            raise SourceError(str(path), unit.line or None, message) from exc


def _already_imported(log: Log, plan: _Plan, fmt: str, path: Path) -> frozenset[int]:
    """The positions of the plan's records the session holds; refuse if any of them changed."""
    if plan.session not in log.sessions():
        return frozenset()
    origins = [loc.record.origin for loc in log.read(plan.session) if loc.record.origin]
    other = next((o for o in origins if (o.format, o.source) != (fmt, plan.source)), None)
    if other is not None:  # two sources whose names (or a copy's content) make one id
        raise SourceError(
            str(path),
            None,
            f"would become session {plan.session!r}, which holds records imported from "
            f"{other.source!r} ({other.format}): sessions never merge; import it with a "
            "--session-prefix",
        )
    stored = [o for o in origins if (o.format, o.source) == (fmt, plan.source)]
    for held in stored:
        if held.index >= len(plan.units):
            raise SourceError(
                str(path),
                None,
                f"has {len(plan.units)} records but "
                f"{held.index + 1} were imported before: the source shrank",
            )
        unit = plan.units[held.index]
        if unit.sha256 != held.sha256:
            raise SourceError(
                str(path),
                unit.line or None,
                f"record {held.index + 1} changed "
                "since it was imported; refusing to import a rewritten history",
            )
    return frozenset(held.index for held in stored)


def import_paths(
    log: Log,
    fmt: str,
    paths: Iterable[Path | str],
    options: ImportOptions | None = None,
    opening: Callable[[str], list[dict[str, Any]]] | None = None,
) -> list[ImportResult]:
    """Import every file under ``paths`` as ``options`` say; all of it, or (on any error)
    nothing. Two files that would become one session (same name in two folders) are refused:
    sessions never merge.

    ``opening(session)``, asked for every session that receives records before anything is
    appended, may refuse it (by raising) or name events to write first in its batch (a
    scoped caller's ``session_started`` in a session the import creates).
    """
    options = options or ImportOptions()
    keep_secrets = options.keep_secrets  # what every append below is told
    if fmt not in FORMATS:
        raise SourceError(fmt, None, f"unknown format; known formats: {', '.join(FORMATS)}")
    errors: list[SourceError] = []
    planned: list[_Plan] = []
    try:
        files = _files(fmt, [Path(p) for p in paths])
    except SourceError as exc:
        raise ImportFailedError([exc]) from exc
    existing = {s.casefold(): s for s in log.sessions()}
    for path in files:
        try:
            plans = _plans_for_file(fmt, path, options.prefix, options.live)
            for plan in plans:
                plan.path = str(path)
                _check_session(log, plan.session, str(path), existing)
                _finish(fmt, path, plan)
                plan.done = _already_imported(log, plan, fmt, path)
            planned += plans
        except SourceError as exc:
            errors.append(exc)
    first_of: dict[str, _Plan] = {}  # by session id case-folded: one file on some systems
    for plan in planned:
        earlier = first_of.setdefault(plan.session.casefold(), plan)
        if earlier is plan:
            continue
        if earlier.path == plan.path:  # two conversations of one LoCoMo file
            message = f"would become session {plan.session!r} twice: sessions never merge"
        else:
            message = (
                f"would become session {plan.session!r}, as {earlier.path} does: import them "
                "separately with different --session-prefix values"
            )
        errors.append(SourceError(plan.path, None, message))
    if errors:
        raise ImportFailedError(errors)
    news = {
        p.session: [e for u, e in zip(p.units, p.valid, strict=True) if u.index not in p.done]
        for p in planned
    }
    first = {s: opening(s) for s, new in news.items() if opening and new}
    results = []
    for plan in planned:
        new = news[plan.session]
        stored: Sequence[Record]
        if first.get(plan.session):
            batch: list[Event | dict[str, Any]] = [*first[plan.session], *new]
            try:  # only as the session's first records (checked under its lock)
                stored = log.append_many(
                    plan.session, batch, keep_secrets=keep_secrets, system=True, new=True
                )
                stored = stored[len(first[plan.session]) :]
            except SessionExistsError:  # created meanwhile: ``opening`` refuses another's
                assert opening is not None
                if opening(plan.session):
                    raise  # an existing session has no opening
                stored = log.append_many(
                    plan.session, new, keep_secrets=keep_secrets, imported=True
                )
        else:
            stored = (
                log.append_many(plan.session, new, keep_secrets=keep_secrets, imported=True)
                if new
                else []
            )
        redacted = [
            f"seq {r.seq} {where.path} ({where.kind})" for r in stored for where in r.redacted or ()
        ]
        skipped = len(plan.units) - len(new)
        results.append(ImportResult(plan.session, plan.source, len(new), skipped, redacted))
    return results


def export_session(log: Log, fmt: str, session: str) -> bytes:
    """The source records of ``session`` as they were imported, byte for byte."""
    origins = [
        loc.record.origin
        for loc in log.read(session)
        if loc.record.origin is not None and loc.record.origin.format == fmt
    ]
    if not origins:
        raise SourceError(session, None, f"no records imported from {fmt} in this session")
    sources = sorted({o.source for o in origins})
    if len(sources) > 1:
        raise SourceError(session, None, f"records from several sources: {', '.join(sources)}")
    if fmt == "locomo":
        return ("[" + ", ".join(o.text for o in origins) + "]").encode("utf-8")
    last = max(origins, key=lambda o: o.index)
    body = "".join(o.prefix + o.text for o in sorted(origins, key=lambda o: o.index))
    return (body + (last.suffix or "")).encode("utf-8")
