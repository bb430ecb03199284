"""Session lifecycle, a service of the facade (``memory.sessions``): list, start, phase, end, info.

Every change is an event in the session's own log (``session_started``, ``phase_changed``,
``session_ended``); nothing is ever deleted. A session's owner is the first scope recorded in
it (``kernel.gate``); starting it again as another owner is refused.
"""

from __future__ import annotations

import builtins
from dataclasses import asdict
from functools import partial
from typing import TYPE_CHECKING, Any

from airsspec.errors import CorruptLogError, LearningError, ScopeError, UnsafePathError
from airsspec.memory.consolidation import consolidate
from airsspec.memory.learnings import Learnings
from eventlog.layout import MEMORY_SESSION, session_path, validate_session_id
from projections.files import KeptOnDisk, ParsedOnce
from projections.scopes import Scope

if TYPE_CHECKING:
    from airsspec.kernel import Kernel
    from eventlog.log import Log, SessionInfo
    from eventlog.schema import (
        PhaseChangedRecord,
        SessionAssignedRecord,
        SessionEndedRecord,
        SessionStartedRecord,
    )


# Each session's info, kept once a second old while its log file is unchanged: a server
# lists every session for each ``status``, ``sessions`` and search (a locked read of both ends
# of every log: 101 of them at 10k records).
_INFOS: ParsedOnce[SessionInfo] = ParsedOnce(settle_ns=1_000_000_000)


def _info(log: Log, session: str, kept: KeptOnDisk[SessionInfo]) -> SessionInfo:
    """``log.info(session)``, read again only when the session's log file changed: kept in
    this process, and across processes in ``kept`` (a new process's ``sessions`` at 1M
    records read both ends of 5,000 logs)."""
    path = session_path(log.log_dir, session)
    read = partial(log.info, session)
    try:  # an entry naming another session is not this one's: read again
        return _INFOS.get(path, partial(kept.get, path, read, lambda i: i.session == session))
    except FileNotFoundError:  # gone meanwhile: as the log says it
        return log.info(session)


def _kept_info(data: object) -> SessionInfo:
    """A session's info as kept on disk; an entry that is not one (a count that is not a
    non-negative int, a time that is not a string or null, a ``problem``: only infos read
    whole are kept) raises ``TypeError``, and the log is read again."""
    from eventlog.log import SessionInfo

    if not isinstance(data, dict) or set(data) != _INFO_FIELDS:
        raise TypeError("not a session's info")
    counts, times = (data["records"], data["bytes"]), (data["first_ts"], data["last_ts"])
    if (
        not isinstance(data["session"], str)
        or any(type(n) is not int or n < 0 for n in counts)
        or any(t is not None and not isinstance(t, str) for t in times)
        or data["problem"] is not None
    ):
        raise TypeError("not a session's info")
    return SessionInfo(**data)


_INFO_FIELDS = {"session", "records", "first_ts", "last_ts", "bytes", "problem"}


class Sessions:
    """The sessions of one open workspace, as its kernel's scope sees them (see the module)."""

    def __init__(self, kernel: Kernel) -> None:
        self._kernel = kernel

    def list(self) -> list[SessionInfo]:
        """Every session this memory's scope may read: records, first and last time, bytes;
        a session whose log cannot be read is listed with its ``problem``."""
        from eventlog.log import SessionInfo

        kernel = self._kernel
        log = kernel.log
        visible = kernel.gate.visible()
        kept = KeptOnDisk(kernel.workspace.layout.caches_dir / "sessions.json", asdict, _kept_info)
        infos = []
        for name in log.sessions():
            if visible is not None and name not in visible:
                continue
            try:
                infos.append(_info(log, name, kept))
            except (CorruptLogError, UnsafePathError, ValueError) as exc:
                size = (log.log_dir / f"{name}.jsonl").stat().st_size
                infos.append(SessionInfo(name, 0, None, None, size, problem=str(exc)))
        kept.save()
        return infos

    def names(self) -> builtins.list[str]:
        """The ids of every session this memory's scope may read, the workspace's own log
        among them for an unscoped memory (nothing is read but the folder listing)."""
        kernel = self._kernel
        visible = kernel.gate.visible()
        names = kernel.log.sessions()
        return [n for n in names if visible is None or n in visible]

    def _phase(self, phase: str | None) -> str:
        cfg = self._kernel.settings.learnings
        chosen = cfg.default_phase if phase is None else phase
        if chosen not in cfg.phases:
            raise LearningError(f"unknown phase {chosen!r}; configured: {', '.join(cfg.phases)}")
        return chosen

    def start(
        self,
        session: str,
        *,
        task: str | None = None,
        phase: str | None = None,
        user: str | None = None,
        agent: str | None = None,
        project: str | None = None,
    ) -> SessionStartedRecord:
        """Record that ``session`` starts, with its task and phase (default: the first
        configured) and its owner: ``user``, ``agent`` and ``project``, each defaulting to
        this memory's scope. A new session is created; an existing one resumes (its owner
        is the first one recorded: another scope is refused with ``ScopeError``)."""
        kernel = self._kernel
        validate_session_id(session)
        if session == MEMORY_SESSION:
            raise LearningError(f"{MEMORY_SESSION!r} is the workspace's own log")
        chosen = self._phase(phase)
        given = Scope(user, agent, project)
        owner = kernel.scope.within(given)
        for name, value in given.to_fields().items():
            if getattr(kernel.scope, name) not in (None, value):
                raise ScopeError(
                    f"a memory scoped to {kernel.scope} cannot start a session as {name}={value}"
                )
        if kernel.logged(session):
            kernel.gate.guard(session, writing=True)
            recorded = kernel.gate.owner(session)
            if recorded.named and owner.named and not owner.matches(recorded):
                raise ScopeError(f"session {session!r} is owned by {recorded}")
        event = {
            "type": "session_started",
            "task": task,
            "phase": chosen,
            **owner.to_fields(),
        }
        from eventlog.schema import SessionStartedRecord, typed

        return typed(SessionStartedRecord, kernel.system_append(session, [event])[0])

    def assign(
        self,
        session: str,
        *,
        user: str,
        agent: str | None = None,
        project: str | None = None,
    ) -> SessionAssignedRecord:
        """Give ``session`` to a new owner (``user``, and ``agent``/``project`` when named):
        a ``session_assigned`` event in its log, so the change is recorded, never made in
        place. Only an admin (an unscoped memory) assigns (``ScopeError`` otherwise)."""
        kernel = self._kernel
        owner = Scope(user, agent, project)
        if not owner.user:
            raise LearningError("assign: name the user the session is given to")
        if not kernel.gate.admin:
            raise ScopeError(
                f"only an admin assigns sessions (not a memory scoped to {kernel.scope})"
            )
        kernel.check_session(session)
        kernel.gate.guard(session, writing=True)
        assigned = {"type": "session_assigned", **owner.to_fields()}
        from eventlog.schema import SessionAssignedRecord, typed

        return typed(SessionAssignedRecord, kernel.system_append(session, [assigned])[0])

    def phase(self, session: str, phase: str) -> PhaseChangedRecord:
        """Move ``session`` to ``phase`` (one of the configured phases)."""
        kernel = self._kernel
        kernel.check_session(session)
        kernel.gate.guard(session, writing=True)
        event = {"type": "phase_changed", "phase": self._phase(phase)}
        from eventlog.schema import PhaseChangedRecord, typed

        return typed(PhaseChangedRecord, kernel.system_append(session, [event])[0])

    def end(
        self, session: str, *, status: str = "done", once: bool = False
    ) -> SessionEndedRecord | None:
        """Record that ``session`` ended with ``status``; its remaining records are read by the
        extractor at once, and its hot learnings become warm. ``once``: only if it has not
        ended since it last started (None then); callers ending one session at once (two hooks
        for one SessionEnd) take turns, so it is recorded once."""
        from compactor.compactor import file_lock

        kernel = self._kernel
        kernel.check_session(session)
        kernel.gate.guard(session, writing=True)
        lock = kernel.workspace.layout.lock_path("session-end")
        with file_lock(lock, wait=True, holder="session end"):
            if once and self.info(session).get("ended") is not None:
                return None
            ended = {"type": "session_ended", "status": status}
            from eventlog.schema import SessionEndedRecord, typed

            record = typed(SessionEndedRecord, kernel.system_append(session, [ended])[0])
        Learnings(kernel).extract(session)
        consolidate(kernel, session)
        return record

    def info(self, session: str) -> dict[str, Any]:
        """Task, phase (with its guidance), status, times, files changed, decisions and
        discoveries of ``session``."""
        kernel = self._kernel
        kernel.check_session(session)
        assessment = Learnings(kernel).list()
        info = dict(assessment.sessions.get(session, {}))
        mine = [a for a in assessment.learnings if a.session == session]
        info["decisions"] = [a.text for a in mine if a.kind == "decision"]
        info["discoveries"] = [a.text for a in mine if a.kind in ("pattern", "error_fix")]
        phase = info.get("phase")
        info["guidance"] = kernel.settings.learnings.phases.get(phase or "", None)
        return {"session": session, **info}
