"""What crosses sessions, on the facade: session lifecycle, learnings, housekeeping and health.

``Memory`` inherits these calls (``memory.start_session(...)``, ``memory.learnings()``...). Every
change is an event: a session's lifecycle goes to its own log; feedback, archives, restores and
what each context build returned go to the workspace's own log (``airsspec.memory``); nothing is
ever deleted. Reading never writes, except that a context build records what it returned (an
access: the priority formula counts them).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from airsspec.errors import LearningError, ScopeError
from eventlog.bound import Bound
from eventlog.ids import parse_ts, utc_now
from eventlog.layout import validate_session_id
from eventlog.schema import MEMORY_SESSION
from projections.scopes import Scope

if TYPE_CHECKING:
    from airsspec.workspace import Workspace
    from eventlog.importers import ImportResult
    from eventlog.schema import Record
    from projections.learning_rules import Assessed, Assessment

_DURATION = re.compile(r"^(\d+)\s*([smhdw])$")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


def parse_duration(text: str) -> timedelta:
    """``30d``, ``12h``, ``2w``... as a timedelta; ``LearningError`` for anything else."""
    match = _DURATION.match(text.strip().lower())
    if not match:
        raise LearningError(f"duration {text!r}: use a number and s, m, h, d or w (e.g. 30d)")
    return timedelta(**{_UNITS[match.group(2)]: int(match.group(1))})


def _moment(value: str | datetime | None) -> str:
    """``value`` as a normalised time (``InvalidBoundError`` naming ``now``); None: now."""
    return Bound.time(value, "now") or utc_now()


class SessionsAndLearnings:
    """The cross-session calls of ``Memory`` (see the module)."""

    workspace: Workspace
    scope: Scope

    if TYPE_CHECKING:  # provided by Memory

        def check_session(self, session: str) -> str: ...
        def owner(self, session: str) -> Scope: ...
        def _policy(self, name: str, session: str, force: bool) -> list[Record]: ...
        def project(self, tiers: Any = ..., **kwargs: Any) -> Any: ...
        def status(self) -> Any: ...
        def reader_scope(self, session: str) -> Scope: ...
        def _opening(self, session: str) -> list[dict[str, Any]]: ...
        def _narrowed(self, scope: Scope | None) -> Scope: ...
        def _memory_block(
            self, session: str, budget: int, query: str | None, reader: Scope
        ) -> tuple[str, dict[str, bool]]: ...
        def _record_access(
            self, session: str, given: dict[str, bool], query: str | None
        ) -> None: ...

    # ------------------------------------------------------------------ sessions

    def _system_append(self, session: str, events: list[dict[str, Any]]) -> list[Record]:
        records = list(self.workspace.log.append_many(session, events, system=True))
        self.project(("hot", "learnings"), sessions=[session], warn=False)
        return records

    def _phase(self, phase: str | None) -> str:
        phases = self.workspace.settings.learnings.phases
        chosen = phase or self.workspace.settings.learnings.default_phase
        if chosen not in phases:
            raise LearningError(f"unknown phase {chosen!r}; configured: {', '.join(phases)}")
        return chosen

    def start_session(
        self,
        session: str,
        *,
        task: str | None = None,
        phase: str | None = None,
        user: str | None = None,
        agent: str | None = None,
        project: str | None = None,
    ) -> Record:
        """Record that ``session`` starts, with its task and phase (default: the first
        configured) and its owner: ``user``, ``agent`` and ``project``, each defaulting to
        this memory's scope. A new session is created; an existing one resumes (its owner
        is the first one recorded: another scope is refused with ``ScopeError``)."""
        validate_session_id(session)
        if session == MEMORY_SESSION:
            raise LearningError(f"{MEMORY_SESSION!r} is the workspace's own log")
        owner = self.scope.within(Scope(user, agent, project))
        for name, value in Scope(user, agent, project).to_fields().items():
            if getattr(self.scope, name) not in (None, value):
                raise ScopeError(
                    f"a memory scoped to {self.scope} cannot start a session as {name}={value}"
                )
        if session in self.workspace.log.sessions():
            self.check_session(session)
            recorded = self.owner(session)
            if recorded.named and owner.named and not owner.matches(recorded):
                raise ScopeError(f"session {session!r} is owned by {recorded}")
        event = {
            "type": "session_started",
            "task": task,
            "phase": self._phase(phase),
            **owner.to_fields(),
        }
        return self._system_append(session, [event])[0]

    def set_phase(self, session: str, phase: str) -> Record:
        """Move ``session`` to ``phase`` (one of the configured phases)."""
        self.check_session(session)
        return self._system_append(
            session, [{"type": "phase_changed", "phase": self._phase(phase)}]
        )[0]

    def end_session(
        self, session: str, *, status: str = "done", once: bool = False
    ) -> Record | None:
        """Record that ``session`` ended with ``status``; its remaining records are read by the
        extractor at once, and its hot learnings become warm. ``once``: only if it has not
        ended since it last started (None then); callers ending one session at once (two hooks
        for one SessionEnd) take turns, so it is recorded once."""
        from compactor.compactor import file_lock

        self.check_session(session)
        lock = self.workspace.state_dir / "session-end.lock"
        with file_lock(lock, wait=True, holder="session end"):
            if once and self.session_info(session).get("ended") is not None:
                return None
            ended = {"type": "session_ended", "status": status}
            record = self._system_append(session, [ended])[0]
        self.extract(session)
        return record

    def session_info(self, session: str) -> dict[str, Any]:
        """Task, phase (with its guidance), status, times, files changed, decisions and
        discoveries of ``session``."""
        self.check_session(session)
        assessment = self.learnings()
        info = dict(assessment.sessions.get(session, {}))
        mine = [a for a in assessment.learnings if a.session == session]
        info["decisions"] = [a.text for a in mine if a.kind == "decision"]
        info["discoveries"] = [a.text for a in mine if a.kind in ("pattern", "error_fix")]
        phase = info.get("phase")
        info["guidance"] = self.workspace.settings.learnings.phases.get(phase or "", None)
        return {"session": session, **info}

    def import_transcripts(
        self,
        fmt: str,
        paths: Iterable[str | Path],
        *,
        prefix: str = "",
        keep_secrets: bool = False,
        live: bool = False,
    ) -> list[ImportResult]:
        """Import agent transcripts (``eventlog.importers``: lossless, idempotent, all or
        nothing); what each session received. ``live``: a transcript still being written keeps
        its unfinished last line for the next import. Imports into one workspace take turns
        (a lock under ``state/``): two at once would both append what is new."""
        from compactor.compactor import file_lock
        from eventlog.importers import import_paths

        with file_lock(self.workspace.state_dir / "import.lock", wait=True, holder="import"):
            return import_paths(
                self.workspace.log,
                fmt,
                paths,
                prefix,
                keep_secrets=keep_secrets,
                live=live,
                opening=self._opening,
            )

    def memory_block(self, session: str, budget: int, *, query: str | None = None) -> str:
        """The memory part of ``context`` alone (task and phase, anchors, learnings), within
        the share of ``budget`` that ``context`` gives it, with none of the session's messages
        or summaries; the access is recorded as ``context`` records it."""
        validate_session_id(session)
        if session in self.workspace.log.sessions():
            self.check_session(session)  # a scoped memory's own sessions only
        block, given = self._memory_block(session, budget, query, self.reader_scope(session))
        if given:
            self._record_access(session, given, query)
        return block

    # ------------------------------------------------------------------ learnings

    def extract(self, session: str, *, force: bool = False) -> list[Record]:
        """Run the learnings extractor on ``session`` if it is due (or ``force``); return what
        it appended (learnings, then the ``extracted`` mark)."""
        from airsspec.errors import CompactionBusyError

        try:
            return self._policy("extract", session, force)
        except CompactionBusyError:
            return []  # another process is extracting this session

    def learnings(
        self,
        *,
        reader: str | None = None,
        cue: str = "",
        now: str | datetime | None = None,
        scope: Scope | None = None,
    ) -> Assessment:
        """Every learning as it stands at ``now`` (default: the current time) for ``reader``
        (a session: its task and ``cue`` decide what is relevant) that ``scope`` may see
        (default: this memory's, narrowed to ``reader``'s owner)."""
        from projections.learning_rules import assess

        moment = _moment(now)
        self.project(("learnings",), warn=False)
        (projector,) = self.workspace.projectors(("learnings",))
        counter = self.workspace.token_counter()
        states = projector.states()
        if scope is None:
            owners = {s.session: s.info.get("owner") for s in states}
            scope = self.scope.within(Scope.of(owners.get(reader or "")))
        else:
            scope = self._narrowed(scope)  # an argument narrows, never widens
        return assess(
            states,
            moment,
            scope=scope,
            reader=reader,
            cue=cue,
            settings=self.workspace.settings.learnings,
            count_tokens=counter.count,
        )

    def learning(self, learning_id: str, *, reader: str | None = None) -> Assessed:
        """One learning by id (or an unambiguous prefix); with ``reader``, record that this
        session recalled it explicitly (cold -> hot for that session)."""
        assessment = self.learnings()
        found = assessment.by_id(learning_id)
        if found is None:
            raise LearningError(f"no learning {learning_id!r} (see airsspec learnings list)")
        if reader is not None:
            self.check_session(reader)
            self._memory_event(
                {
                    "type": "memory_accessed",
                    "learning_ids": [found.id],
                    "purpose": "recall",
                    "reader": reader,
                }
            )
            found = self.learnings(reader=reader).by_id(found.id) or found
        return found

    def _memory_event(self, event: dict[str, Any]) -> Record:
        return self._system_append(MEMORY_SESSION, [event])[0]

    def add_learning(
        self,
        text: str,
        *,
        kind: str = "preference",
        scope: str = "project",
        session: str | None = None,
    ) -> Record:
        """Record a learning the user states directly (source ``user``: explicit, confirmed);
        in ``session``'s log when given, else in the workspace's own log."""
        if not text.strip():
            raise LearningError("a learning needs some text")
        if session is not None:
            self.check_session(session)
        from compactor.extractor import learning_id

        home = session or MEMORY_SESSION
        owner = {} if session else self.scope.to_fields()  # a session's owner owns its own
        event = {
            **owner,
            "type": "learning",
            "learning_id": learning_id(home, 0, kind, f"{text}\0{utc_now()}"),
            "kind": kind,
            "text": text,
            "scope": scope,
            "source": "user",
            "explicit": True,
        }
        return self._system_append(home, [event])[0]  # the log validates kind and scope

    def feedback(self, learning_id: str, verdict: str, *, reason: str = "") -> Record:
        """Confirm or reject a learning (``verdict``: confirmed or rejected). A rejected
        learning never reaches a prompt again, unless a later confirmation restores it."""
        if verdict not in ("confirmed", "rejected"):
            raise LearningError(f"verdict must be confirmed or rejected (got {verdict!r})")
        found = self.learning(learning_id)
        event = {
            "type": "learning_feedback",
            "learning_id": found.id,
            "verdict": verdict,
            "reason": reason,
        }
        return self._memory_event(event)

    # ------------------------------------------------------------------ housekeeping

    def gc(self, *, dry_run: bool = False, now: str | datetime | None = None) -> dict[str, str]:
        """Archive what should no longer be loaded (rejected, superseded, merged, and cold
        learnings inactive for ``gc_days``); return id -> why. With ``dry_run``, only say."""
        from projections.learning_rules import gc_candidates

        chosen = gc_candidates(self.learnings(now=now), self.workspace.settings.learnings)
        if chosen and not dry_run:
            event = {"type": "archived", "learning_ids": sorted(chosen), "reason": "gc"}
            self._memory_event(event)
        return chosen

    def archive(
        self, older_than: str | timedelta, *, now: str | datetime | None = None
    ) -> list[str]:
        """Archive every learning (anchors aside) with no activity for ``older_than``."""
        age = parse_duration(older_than) if isinstance(older_than, str) else older_than
        assessment = self.learnings(now=now)
        limit = parse_ts(assessment.now) - age
        chosen = sorted(
            a.id
            for a in assessment.learnings
            if a.kind != "anchor" and a.status != "archived" and parse_ts(a.last_activity) < limit
        )
        if chosen:
            reason = f"inactive for more than {older_than}"
            self._memory_event({"type": "archived", "learning_ids": chosen, "reason": reason})
        return chosen

    def restore(self, learning_id: str) -> Record:
        """Bring an archived learning back to what it was before."""
        found = self.learning(learning_id)
        if found.status != "archived":
            raise LearningError(f"learning {found.id} is not archived (it is {found.status})")
        return self._memory_event({"type": "restored", "learning_id": found.id})

    def reextract(
        self, out: str | Path, *, summarizer: str | None = None, extractor: str | None = None
    ) -> dict[str, Any]:
        """Replay the log into ``out`` with another summarizer and/or extractor and return what
        changed: summaries and learnings added, removed, changed (``airsspec.reextract``). The
        live tiers and the log are untouched."""
        from airsspec.reextract import reextract

        return reextract(self, out, summarizer=summarizer, extractor=extractor)  # type: ignore[arg-type]

    def health(self, *, now: str | datetime | None = None) -> dict[str, Any]:
        """Capacity used per tier, pending promotions and demotions, open conflicts, lag and
        what is degraded; ``attention`` lists what needs a person (empty when all is well).
        Read-only: nothing is projected first, so lag is what the daemon has not done yet."""
        from projections.learning_rules import assess, content_words, gc_candidates, matches

        cfg = self.workspace.settings.learnings
        moment = _moment(now)
        (projector,) = self.workspace.projectors(("learnings",))
        states = projector.states()
        assessment = assess(states, moment, settings=cfg, scope=self.scope)
        tiers = self.status()
        active = [a for a in assessment.learnings if a.status == "active"]
        horizon = parse_ts(moment) - timedelta(days=max(0.0, cfg.warm_days - 7))
        demote_soon = [a.id for a in assessment.tier("warm") if parse_ts(a.last_match) < horizon]
        words = {a.id: content_words(a.text) for a in active if a.tier != "hot"}
        promote = set()
        for session, info in assessment.sessions.items():
            if info.get("task") and not info.get("ended"):
                cue = content_words(info["task"])
                promote |= {
                    a.id
                    for a in active
                    if a.id in words and a.session != session and matches(words[a.id], cue)
                }
        conflicts = [c.to_json() for c in assessment.conflicts if c.resolution == "superseded"]
        open_conflicts = [c for c in conflicts if c["open"]]
        attention = [
            f"open conflict: {c['winner']} (older) overrules "
            f"{c['learning_b'] if c['winner'] == c['learning_a'] else c['learning_a']}: "
            f"{c['reason']}; confirm or reject one"
            for c in open_conflicts
        ]
        for t in tiers:
            if t.lag_records:
                attention.append(f"{t.tier}: {t.lag_records} record(s) not projected yet")
            attention += [f"{t.tier}: degraded: {d}" for d in t.degraded]
        counts = {name: len(assessment.tier(name)) for name in ("hot", "warm", "cold")}
        return {
            "now": moment,
            "capacity": {
                "hot": {"items": counts["hot"], "limit": cfg.hot_items},
                "warm": {"items": counts["warm"], "limit": cfg.warm_items},
                "cold": {"items": counts["cold"], "limit": None},
                "archived": sum(a.status == "archived" for a in assessment.learnings),
            },
            "pending": {
                "promotions": sorted(promote),
                "demotions": sorted(demote_soon),
                "gc": sorted(gc_candidates(assessment, cfg)),
            },
            "conflicts": conflicts,
            "open_conflicts": len(open_conflicts),
            "tiers": [
                {"tier": t.tier, "lag": t.lag_records, "degraded": t.degraded} for t in tiers
            ],
            "attention": attention,
        }
