"""Learnings, a service of the facade (``memory.learnings``): what crosses sessions.

list, get, add, confirm/reject (``feedback``), edit, extract, gc, archive, restore, reextract,
health. A learning's priority band is its ``level``: hot (in every prompt of its session), warm
(loaded when relevant), cold (searchable only); ``projections.learning_rules`` decides it from
the log. Every change is an event: feedback and edits (each with its actor), archives, restores
and what each context build returned go to the workspace's own log; nothing is ever deleted.
Reading never writes, except that a context build or an explicit recall records what it
returned (an access: priority counts them).
A scoped memory changes only learnings within its scope (``Gate.guard_learning``).
"""

from __future__ import annotations

import builtins
import re
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from airsspec.errors import LearningError, ScopeError
from eventlog.bound import Bound
from eventlog.ids import parse_ts, utc_now
from eventlog.layout import MEMORY_SESSION
from projections.scopes import Scope

if TYPE_CHECKING:
    from airsspec.kernel import Kernel
    from eventlog.schema import (
        LearningEditedRecord,
        LearningFeedbackRecord,
        LearningRecord,
        Record,
        RestoredRecord,
    )
    from projections.learning_rules import Assessed, Assessment

_DURATION = re.compile(r"^(\d+)\s*([smhdw])$")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}
LEVELS: tuple[str, ...] = ("hot", "warm", "cold")
"""A learning's levels, from always loaded to searchable only."""


def parse_duration(text: str) -> timedelta:
    """``30d``, ``12h``, ``2w``... as a timedelta; ``LearningError`` for anything else."""
    match = _DURATION.match(text.strip().lower())
    if not match:
        raise LearningError(f"duration {text!r}: use a number and s, m, h, d or w (e.g. 30d)")
    return timedelta(**{_UNITS[match.group(2)]: int(match.group(1))})


def _now(value: str | datetime | None) -> str:
    """``value`` as a normalised time (``InvalidBoundError`` naming ``now``); None: now."""
    return Bound.time(value, "now") or utc_now()


class Learnings:
    """The learnings of one open workspace, as its kernel's scope sees them (see the module)."""

    def __init__(self, kernel: Kernel) -> None:
        self._kernel = kernel

    def list(
        self,
        *,
        reader: str | None = None,
        cue: str = "",
        now: str | datetime | None = None,
        scope: Scope | None = None,
    ) -> Assessment:
        """Every learning as it stands at ``now`` (default: the current time) for ``reader``
        (a session: its task and ``cue`` decide what is relevant) that ``scope`` may see
        (default: this memory's, narrowed to ``reader``'s owner; an argument narrows).
        A ``reader`` logged here must be a session this memory may read
        (``Kernel.check_reader``)."""
        from projections.learning_rules import assess

        kernel = self._kernel
        if reader is not None:
            kernel.check_reader(reader)
        when = _now(now)
        kernel.fresh("learnings")
        projector = kernel.projector("learnings")
        states = projector.states()
        if scope is None:
            owners = {s.session: s.info.get("owner") for s in states}
            scope = kernel.scope.within(Scope.of(owners.get(reader or "")))
        else:
            scope = kernel.gate.narrowed(scope)
        assessment = assess(
            states,
            when,
            scope=scope,
            reader=reader,
            cue=cue,
            settings=kernel.settings.learnings,
            count_tokens=kernel.token_counter().count,
        )
        if now is None:  # as they stand
            kernel.keep(("seen", scope), assessment.learnings)
        return assessment

    def seen(self, scope: Scope) -> builtins.list[Assessed]:
        """The learnings ``scope`` may see as they stand, for what does not depend on who
        reads or the cue (each one's text, unit and status: what a search filters by): within
        one read (``Kernel.reading``), those of the last assessment made for ``scope``."""
        return self._kernel.once(("seen", scope), lambda: self.list(scope=scope).learnings)

    def get(self, learning_id: str, *, reader: str | None = None) -> Assessed:
        """One learning by id (or an unambiguous prefix); with ``reader``, record that this
        session recalled it explicitly (cold -> hot for that session)."""
        kernel = self._kernel
        found = self.list().by_id(learning_id)
        if found is None:
            raise LearningError(f"no learning {learning_id!r} (see airsspec learnings list)")
        if reader is not None:
            kernel.check_session(reader)
        if reader is not None and kernel.gate.records_access():
            kernel.memory_event(
                {
                    **kernel.scope.to_fields(),
                    "type": "memory_accessed",
                    "learning_ids": [found.id],
                    "purpose": "recall",
                    "reader": reader,
                }
            )
            found = self.list(reader=reader).by_id(found.id) or found
        return found

    def owners(self) -> dict[str, Scope]:
        """Who owns each learning (by id) this memory may read: the scope recorded with it,
        else its session's owner (the learnings projection as it stands)."""
        kernel = self._kernel
        owners = {item["id"]: owner for item, owner in self._owned()}
        if kernel.gate.admin:
            return owners
        return {i: o for i, o in owners.items() if kernel.scope.reads(o)}

    def readable(self) -> set[str]:
        """The ids of the learnings this memory's scope may read, as its assessment gives them
        (its owners', and those an admin shared with ``scope="global"``, by the scope their
        last edit gave): the learnings whose verdicts, edits, archives and restores its view of
        the workspace's own log shows (``Gate.reads_record``)."""
        if self._kernel.gate.admin:
            return {item["id"] for item, _ in self._owned()}
        return {a.id for a in self.list(scope=self._kernel.gate.narrowed(None)).learnings}

    def _owned(self) -> Iterator[tuple[dict[str, Any], Scope]]:
        """Each folded learning (the projection's item) with its owner: the scope recorded
        with it, else its session's owner."""
        kernel = self._kernel
        kernel.fresh("learnings")
        for state in kernel.projector("learnings").states():
            session_owner = Scope.of(state.info.get("owner"))
            for item in state.learnings:
                yield item, Scope.of(item.get("owner")) or session_owner

    def _changeable(self, learning_id: str, doing: str) -> Assessed:
        """The learning ``learning_id`` names, if this memory's scope may change it."""
        found = self.get(learning_id)
        owner = self.owners().get(found.id, Scope())
        self._kernel.gate.guard_learning(found, owner, doing)
        return found

    def add(
        self,
        text: str,
        *,
        kind: str = "preference",
        scope: str = "project",
        session: str | None = None,
    ) -> LearningRecord:
        """Record a learning the user states directly (source ``user``: explicit, confirmed);
        in ``session``'s log when given, else in the workspace's own log. ``scope`` is where
        it applies: session, project or global (a global one reaches every reader)."""
        kernel = self._kernel
        if not text.strip():
            raise LearningError("a learning needs some text")
        try:
            text.encode()  # before its id is made of it
        except UnicodeEncodeError as exc:  # bytes of a command line that are not UTF-8
            raise LearningError(f"text: not valid UTF-8: {exc.reason}") from exc
        if scope == "global" and not kernel.gate.admin:
            raise ScopeError(
                f"a global learning reaches every user: only an admin adds one "
                f"(a memory scoped to {kernel.scope} cannot)"
            )
        if session is not None:
            kernel.gate.guard_writes(session)
        from compactor.extractor import learning_id

        home = session or MEMORY_SESSION
        owner = {} if session else kernel.scope.to_fields()  # a session's owner owns its own
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
        # the log validates kind and scope
        from eventlog.schema import LearningRecord, typed

        return typed(LearningRecord, kernel.system_append(home, [event])[0])

    def feedback(
        self, learning_id: str, verdict: str, *, reason: str = "", by: str | None = None
    ) -> LearningFeedbackRecord:
        """Confirm or reject a learning (``verdict``: confirmed or rejected), recorded with
        its actor (``by``, else this memory's user, else the login name). A rejected
        learning never reaches a prompt again, unless a later confirmation restores it. A
        learning outside this memory's scope is refused (``ScopeError``)."""
        if verdict not in ("confirmed", "rejected"):
            raise LearningError(f"verdict must be confirmed or rejected (got {verdict!r})")
        doing = "confirm" if verdict == "confirmed" else "reject"
        found = self._changeable(learning_id, doing)
        event = {
            "type": "learning_feedback",
            "learning_id": found.id,
            "verdict": verdict,
            "reason": reason,
            "actor": self._kernel.asker(by),
        }
        from eventlog.schema import LearningFeedbackRecord, typed

        return typed(LearningFeedbackRecord, self._kernel.memory_event(event))

    def confirm(
        self, learning_id: str, *, reason: str = "", by: str | None = None
    ) -> LearningFeedbackRecord:
        """``feedback(learning_id, "confirmed")``."""
        return self.feedback(learning_id, "confirmed", reason=reason, by=by)

    def reject(
        self, learning_id: str, *, reason: str = "", by: str | None = None
    ) -> LearningFeedbackRecord:
        """``feedback(learning_id, "rejected")``."""
        return self.feedback(learning_id, "rejected", reason=reason, by=by)

    def edit(
        self,
        learning_id: str,
        *,
        text: str | None = None,
        scope: str | None = None,
        reason: str = "",
        by: str | None = None,
    ) -> LearningEditedRecord:
        """Curate a learning: from now on it reads ``text`` and applies at ``scope``
        (session, project or global; None: unchanged), recorded as a ``learning_edited``
        event with its actor (``by``, else this memory's user, else the login name). What was
        first recorded stays in the log. Only a learning within this memory's scope is
        changed (``ScopeError``), only an admin makes one global, and an edit that changes
        nothing is refused (``LearningError``)."""
        kernel = self._kernel
        kernel.gate.writable()
        found = self._changeable(learning_id, "edit")
        if text is not None and not text.strip():
            raise LearningError("text: a learning needs some text")
        if scope == "global" and found.scope != "global" and not kernel.gate.admin:
            raise ScopeError(
                f"a global learning reaches every user: only an admin makes one global "
                f"(a memory scoped to {kernel.scope} cannot)"
            )
        changed = {
            name: value
            for name, value in (("text", text), ("scope", scope))
            if value is not None and value != getattr(found, name)
        }
        if not changed:
            raise LearningError(f"learning {found.id} already reads so: give a new text or scope")
        event = {"type": "learning_edited", "learning_id": found.id, **changed}
        event |= {"reason": reason, "actor": kernel.asker(by)}
        # the log validates text and scope
        from eventlog.schema import LearningEditedRecord, typed

        return typed(LearningEditedRecord, kernel.memory_event(event))

    def extract(self, session: str, *, force: bool = False) -> builtins.list[Record]:
        """Run the learnings extractor on ``session`` if it is due (or ``force``); return what
        it appended (learnings, then the ``extracted`` mark)."""
        from airsspec.errors import CompactionBusyError

        try:
            return self._kernel.run_policy("extract", session, force=force)
        except CompactionBusyError:
            return []  # another process is extracting this session

    # ------------------------------------------------------------------ housekeeping

    def gc(self, *, dry_run: bool = False, now: str | datetime | None = None) -> dict[str, str]:
        """Archive what should no longer be loaded (rejected, superseded, merged, and cold
        learnings inactive for ``gc_days``); return id -> why. With ``dry_run``, only say.
        A scoped memory archives only learnings within its scope."""
        from projections.learning_rules import gc_candidates

        kernel = self._kernel
        assessment = self.list(now=now)
        chosen = gc_candidates(assessment, kernel.settings.learnings)
        mine = self._mine(assessment)
        chosen = {i: why for i, why in chosen.items() if mine(i)}
        if chosen and not dry_run:
            event = {"type": "archived", "learning_ids": sorted(chosen), "reason": "gc"}
            kernel.memory_event(event)
        return chosen

    def _mine(self, assessment: Assessment) -> Callable[[str], bool]:
        """Whether this memory may change a learning of ``assessment`` (by id): the gate's
        rule (``Gate.changes_learning``); an unscoped memory any."""
        gate = self._kernel.gate
        if not self._kernel.scope.named:
            return lambda _: True
        owners = self.owners()

        def mine(learning_id: str) -> bool:
            found = assessment.by_id(learning_id)
            owner = owners.get(learning_id, Scope())
            return found is not None and gate.changes_learning(found, owner)

        return mine

    def archive(
        self, older_than: str | timedelta, *, now: str | datetime | None = None
    ) -> builtins.list[str]:
        """Archive every learning (anchors aside) with no activity for ``older_than`` (a
        timedelta, or ``30d``, ``12h``...); a scoped kernel, only those within its scope."""
        age = parse_duration(older_than) if isinstance(older_than, str) else older_than
        assessment = self.list(now=now)
        limit = parse_ts(assessment.now) - age
        mine = self._mine(assessment)
        chosen = sorted(
            a.id
            for a in assessment.learnings
            if a.kind != "anchor"
            and a.status != "archived"
            and parse_ts(a.last_activity) < limit
            and mine(a.id)
        )
        if chosen:
            reason = f"inactive for more than {older_than}"
            event = {"type": "archived", "learning_ids": chosen, "reason": reason}
            self._kernel.memory_event(event)
        return chosen

    def restore(self, learning_id: str) -> RestoredRecord:
        """Bring an archived learning back to what it was before (``ScopeError`` for one
        outside this memory's scope)."""
        found = self._changeable(learning_id, "restore")
        if found.status != "archived":
            raise LearningError(f"learning {found.id} is not archived (it is {found.status})")
        restored = {"type": "restored", "learning_id": found.id}
        from eventlog.schema import RestoredRecord, typed

        return typed(RestoredRecord, self._kernel.memory_event(restored))

    def reextract(
        self, out: str | Path, *, summarizer: str | None = None, extractor: str | None = None
    ) -> dict[str, Any]:
        """Replay the log into ``out`` with another summarizer and/or extractor and return what
        changed: summaries and learnings added, removed, changed (``airsspec.memory.reextract``).
        The live projections and the log are untouched."""
        from airsspec.memory.reextract import reextract

        kernel = self._kernel
        return reextract(kernel, out, summarizer=summarizer, extractor=extractor)

    def health(self, *, now: str | datetime | None = None) -> dict[str, Any]:
        """Capacity used per level, pending promotions and demotions, open conflicts, every
        projection's lag and what is degraded; ``attention`` lists what needs a person (empty
        when all is well). Read-only: nothing is projected first, so lag is what the daemon
        has not done yet."""
        from airsspec.memory.health import health

        return health(self._kernel, _now(now))
