"""``Memory``: the one object a user imports; the CLI, the daemon and the MCP server go through it.

    from airsspec import Memory

    with Memory.open(".", create=True) as memory:
        memory.append("s1", {"type": "user", "content": "Add rate limiting to the API"})
        print(memory.context("s1", budget=2000))
        print(memory.search("rate limiting", k=3))

Every call validates its input as the CLI does and raises an ``AirsspecError`` subclass for a
caller's mistake (``NotAWorkspaceError``, ``InvalidEventError``, ``InvalidQueryError``...). After
``append`` the hot tier of that session is current (folded in this process, a few records), so
``context`` shows what was just appended; the other tiers follow in ``project``, ``search`` (the
cold tier) and ``compact``, or in the daemon. ``AsyncMemory`` offers the same calls as coroutines.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import ValidationError

from airsspec.errors import (
    AirsspecError,
    InvalidQueryError,
    NoSuchSessionError,
    NotAWorkspaceError,
    ScopeError,
    SessionExistsError,
    field_of,
)
from airsspec.scoped import ScopedAccess
from airsspec.sessions import SessionsAndLearnings
from airsspec.settings import CONFIG_NAME
from airsspec.workspace import TIERS, Workspace, init_workspace
from eventlog.bound import Bound
from eventlog.layout import Layout, validate_session_id
from eventlog.schema import MEMORY_SESSION
from projections.scopes import Scope

if TYPE_CHECKING:  # the parts below load when a call needs them: the CLI stays quick
    import threading

    from airsspec.forgetting import Forgotten
    from compactor.compactor import Compactor
    from compactor.extractor import Extractor
    from eventlog.log import SessionInfo
    from eventlog.schema import Event, Record
    from eventlog.verify import VerifyReport
    from projections.engine import Progress, RunReport
    from projections.hot import HotWindow
    from projections.memory_tool import QueryMemoryInput
    from projections.status import TierStatus

ContextFormat = Literal["text", "anthropic", "openai"]
logger = logging.getLogger(__name__)


class Memory(ScopedAccess, SessionsAndLearnings):
    """An agent memory: the frozen log of a workspace and every tier projected from it, what
    crosses its sessions (``airsspec.sessions``: lifecycle, learnings, health), and whose
    memory it reads (``airsspec.scoped``: ``scope``, ``scoped``)."""

    def __init__(self, workspace: Workspace, scope: Scope | None = None) -> None:
        self.workspace = workspace
        self.scope = scope or Scope()
        self._policies: dict[str, Compactor | Extractor] = {}
        self._owners_seen: dict[str, Scope] = {}
        self._owns_workspace = True

    def _view(self, scope: Scope) -> Memory:
        """This memory's workspace, resources and caches, read and written as ``scope``."""
        view = Memory(self.workspace, scope)
        view._policies, view._owners_seen = self._policies, self._owners_seen
        view._owns_workspace = False
        return view

    # ------------------------------------------------------------------ open and close

    @classmethod
    def open(
        cls,
        path: str | Path = ".",
        *,
        create: bool = False,
        config: str | Path | None = None,
        user: str | None = None,
        agent: str | None = None,
        project: str | None = None,
        keys: Any = None,
    ) -> Memory:
        """Open the workspace at ``path``: a folder holding ``airsspec.toml``, or a workspace
        folder itself (``.airsspec``). With ``create``, a missing one is initialised there.
        ``user``, ``agent`` and ``project`` are the caller's scope (``airsspec.scoped``).
        ``keys``: where data keys live, over ``[privacy] keys`` (a key store, or a KMS
        callback: ``eventlog.keystores``).

        Raises ``NotAWorkspaceError`` (creating nothing) when there is none and ``create`` is
        false, and ``SettingsError`` for a bad ``airsspec.toml``.
        """
        folder = Path(path)
        if config is not None:
            workspace = Workspace.open(config=config)
        elif (folder / CONFIG_NAME).is_file():
            workspace = Workspace.open(config=folder / CONFIG_NAME)
        elif Layout.is_workspace(folder):
            workspace = Workspace.open(folder)
        elif not create:
            raise NotAWorkspaceError(
                f"{folder}: not an airsspec workspace (run airsspec init, or open with create=True)"
            )
        else:
            workspace = Workspace.open(config=init_workspace(folder)[0])
        workspace.keys = keys
        return cls(workspace, Scope(user, agent, project))

    def close(self) -> None:
        """Flush and close the log (a ``with`` block does this); a ``scoped`` view leaves
        the workspace it shares open."""
        if self._owns_workspace:
            self.workspace.close()

    def __enter__(self) -> Memory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def root(self) -> Path:
        """The workspace folder."""
        return self.workspace.root

    # ------------------------------------------------------------------ the log

    def append(self, session: str, event: Event | dict[str, Any]) -> Record:
        """Append one event; return the stored record. The session's hot tier is current after."""
        return self.append_many(session, [event])[0]

    def append_many(
        self, session: str, events: Iterable[Event | dict[str, Any]], *, hot: bool = True
    ) -> list[Record]:
        """Append events atomically (all or none); return the stored records, in order; the
        session's hot tier follows unless ``hot`` is false (the ``append`` command leaves
        every tier to ``project`` and the daemon). A scoped memory refuses (``ScopeError``) a
        session owned by someone else, and records its scope first in a session it creates
        (a ``session_started`` event, in the same batch).

        Once the records are stored the append has succeeded: if bringing the hot tier
        current then fails (a full disk, say), that is logged as a warning, not raised, since
        a caller that saw an error would append the records again; the tier catches up at the
        next call that reads it."""
        log = self.workspace.log
        validate_session_id(session)
        if opening := self._opening(session):
            from eventlog.log import prepare_events

            bodies = prepare_events(list(events))  # refuses system types, names the index
            try:  # only as the session's first records, checked under its lock
                records = list(log.append_many(session, [*opening, *bodies], system=True, new=True))
            except SessionExistsError:  # another writer created it first: is it ours?
                self._guard(session, writing=True)
                return self._then_hot(session, list(log.append_many(session, bodies)), hot)
            self._owners_seen[session] = self.scope
            return self._then_hot(session, records[len(opening) :], hot)
        return self._then_hot(session, list(log.append_many(session, events)), hot)

    def _then_hot(self, session: str, records: list[Record], hot: bool) -> list[Record]:
        if hot:
            try:
                self.project(("hot",), sessions=[session])
            except (OSError, AirsspecError) as exc:
                logger.warning(
                    "%s: appended, but the hot tier was not updated: %s",
                    session,
                    exc,
                )
        return records

    def sessions(self) -> list[SessionInfo]:
        """Every session: records, first and last time, bytes; a session whose log cannot be
        read is listed with its ``problem`` (the others are unaffected)."""
        from airsspec.errors import CorruptLogError, UnsafePathError
        from eventlog.log import SessionInfo

        log = self.workspace.log
        visible = self.visible_sessions()
        infos = []
        for name in log.sessions():
            if visible is not None and name not in visible:
                continue
            try:
                infos.append(log.info(name))
            except (CorruptLogError, UnsafePathError, ValueError) as exc:
                size = (log.log_dir / f"{name}.jsonl").stat().st_size
                infos.append(SessionInfo(name, 0, None, None, size, problem=str(exc)))
        return infos

    def check_session(self, session: str) -> str:
        """``session`` if it names a session of this workspace that this memory's scope may
        read; else ``InvalidSessionIdError``, ``NoSuchSessionError`` or ``ScopeError``."""
        validate_session_id(session)
        if session not in self.workspace.log.sessions():
            raise NoSuchSessionError(f"no session {session!r} in {self.workspace.log_dir}")
        self._guard(session)
        return session

    def replay(
        self, session: str, *, from_seq: int = 1, until: int | str | datetime | None = None
    ) -> Iterator[Record]:
        """The records of ``session`` from ``from_seq`` up to ``until`` (a seq or a time)."""
        self.check_session(session)
        bound = None if until is None else Bound.parse(until, "until")
        for located in self.workspace.log.read(session, from_seq=from_seq):
            record = located.record
            if bound is not None and bound.passed(record):
                return
            yield record

    def verify(self, sessions: Iterable[str] | None = None) -> VerifyReport:
        """Check every record, the hash chains and the heads (see ``eventlog.verify``)."""
        from eventlog.verify import verify

        if sessions is None and (visible := self.visible_sessions()) is not None:
            sessions = sorted(visible)
        chosen = list(sessions) if sessions is not None else None
        for session in chosen if self.scope.named and chosen else ():
            self._guard(session)
        return verify(self.workspace.log, chosen)

    # ------------------------------------------------------------------ tiers

    def _tiers(self, tiers: Iterable[str] | str) -> tuple[str, ...]:
        chosen = (tiers,) if isinstance(tiers, str) else tuple(tiers)
        if "all" in chosen:
            return TIERS
        unknown = [t for t in chosen if t not in TIERS]
        if unknown:
            raise InvalidQueryError(
                f"unknown tier(s) {', '.join(unknown)}; available: {', '.join(TIERS)}, all"
            )
        return chosen

    def project(
        self,
        tiers: Iterable[str] | str = TIERS,
        *,
        sessions: Iterable[str] | None = None,
        jobs: int = 1,
        progress: Progress | None = None,
        warn: bool = True,
        cancel: threading.Event | None = None,
        deep: bool = False,
    ) -> list[RunReport]:
        """Bring ``tiers`` up to the head of the log (only ``sessions``, when given). A cold
        tier whose embedder cannot load is left as it is, with a warning (search degrades to
        full-text and says so). A session whose log is damaged is skipped, with a warning
        unless ``warn`` is false (the reports name it either way). Setting ``cancel`` stops
        the catch-up after the record being folded, with what was done saved. ``deep`` reads
        every output file and repairs one whose content differs from what was written, even
        when its size and mtime were kept (the ``project`` command does this)."""
        from projections.engine import Runner

        chosen = self._tiers(tiers)
        if "cold" in chosen and (problem := self.embedder_problem()):
            logger.warning("the cold tier was not updated: %s", problem)
            chosen = tuple(t for t in chosen if t != "cold")
        if "cold" in chosen and self.register_sources() and sessions is not None:
            sessions = {*sessions, MEMORY_SESSION}
        projectors = self.workspace.projectors(chosen)
        runner = Runner(
            self.workspace.log, projectors, progress, jobs=jobs, cancel=cancel, deep=deep
        )
        reports = runner.catch_up(sessions=sessions)
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
        self,
        tiers: Iterable[str] | str = TIERS,
        *,
        as_of: Bound | int | str | datetime | None = None,
        out: str | Path | None = None,
        jobs: int = 1,
        progress: Progress | None = None,
        engine: str = "local",
        address: str | None = None,
    ) -> list[RunReport]:
        """Delete ``tiers`` and replay the log; with ``as_of``, materialise them as they were
        at that seq or time into ``out`` (a folder outside the workspace) instead. With
        ``engine="ray"`` the cold tier is rebuilt on Ray (``airsspec.ray_engine``; at
        ``address``, else on a local Ray started for the run), the other tiers here."""
        from projections.engine import Runner

        chosen = self._tiers(tiers)
        if engine == "ray" and as_of is None and out is None and "cold" in chosen:
            from airsspec.ray_engine import rebuild_cold

            others = tuple(t for t in chosen if t != "cold")
            reports = self.rebuild(others, jobs=jobs, progress=progress) if others else []
            return [*reports, rebuild_cold(self, address)]
        if as_of is None:
            if out is not None:
                raise InvalidQueryError("out goes with as_of (a live rebuild writes in place)")
            if "cold" in chosen:
                self.register_sources()
            projectors = self.workspace.projectors(chosen)
            return Runner(self.workspace.log, projectors, progress, jobs=jobs).rebuild()
        if out is None:
            raise InvalidQueryError("as_of needs out: the folder to write the past tiers into")
        target, live = Path(out).resolve(), self.root.resolve()
        if target == live or live in target.parents:
            raise InvalidQueryError(f"{target} is inside the workspace; choose a folder outside")
        stop = Bound.parse(as_of, "as_of").passed
        projectors = self.workspace.projectors(chosen, root=target)
        return Runner(self.workspace.log, projectors, progress, jobs=jobs).rebuild(stop)

    def register_sources(self) -> list[str]:
        """Append a ``source_indexed`` event for each document under ``sources/`` added,
        changed or removed since its last event (the cold tier indexes documents from these
        events); returns the paths. A damaged log of airsspec's own session is a warning:
        the documents are registered on a later call."""
        from projections.sources import register_sources

        try:
            records = register_sources(
                self.workspace.log,
                self.workspace.sources_dir,
                self.workspace.state_dir / "sources.json",
            )
        except AirsspecError as exc:
            logger.warning("documents under sources/ not registered: %s", exc)
            return []
        return [record.path for record in records]

    def embedder_problem(self) -> str | None:
        """Why the cold tier's embedder cannot run here (None when it can)."""
        from airsspec.errors import EmbedderUnavailable

        try:
            self.workspace.embedder().check()
        except EmbedderUnavailable as exc:
            return str(exc)
        return None

    def status(self) -> list[TierStatus]:
        """Items, size, lag and what is degraded, for every tier."""
        from projections.status import tier_status

        return [tier_status(self.workspace.log, p) for p in self.workspace.projectors()]

    def hot(self, session: str) -> HotWindow:
        """The hot window of ``session`` (brought up to date first); ``CorruptLogError``
        naming the file and line when its log cannot be read."""
        self.check_session(session)
        (report,) = self.project(("hot",), sessions=[session], warn=False)
        report.raise_failed()
        window = self.workspace.load_hot(session)
        assert window is not None
        return window

    def context(
        self, session: str, budget: int, *, query: str | None = None, format: ContextFormat = "text"
    ) -> str | list[dict[str, Any]]:
        """What ``session`` should see next, within ``budget`` tokens, as text or as a
        ``messages`` list for the Anthropic or OpenAI SDK. Deterministic for a given log.

        In order: the session's memory (its task and phase, identity anchors verbatim, and
        the hot and relevant warm learnings, within ``context_share`` of the budget); for a
        session with no summary yet (or no record at all: an agent starting fresh), the latest
        summaries of the ``context_other_sessions`` most recent other sessions (at most a third
        of the budget); with ``query``, the best recalled passages not already visible (at
        most half of what is left); then the session's own summary and newest messages in the
        rest. Nothing is cut inside a message, a bullet or a token. What the memory part gave
        is recorded (a ``memory_accessed`` event), so the same call later may rank learnings
        differently; otherwise the result is a function of the log.
        """
        if budget < 1:
            raise InvalidQueryError(f"budget must be at least 1 token (got {budget})")
        if format not in ("text", "anthropic", "openai"):
            raise InvalidQueryError(f"format must be text, anthropic or openai (got {format!r})")
        validate_session_id(session)
        window = self.hot(session) if session in self.workspace.log.sessions() else None
        reader = self.reader_scope(session)
        counter = self.workspace.token_counter()
        block, given = self._memory_block(session, budget, query, reader)
        parts: list[str] = [block] if block else []
        recalled = ""
        if window is None or window.summary is None:
            parts += self._earlier_sessions(session, budget // 3, reader)
        if query is not None:
            room = (budget - counter.count("\n\n".join(parts))) // 2
            visible = self.workspace.format_history(session, budget)
            for passage in self._recalled(query, visible, room, reader):  # best first
                candidate = f"{recalled}\n{passage}" if recalled else passage
                if counter.count(candidate) <= room:
                    recalled = candidate
            parts += [recalled] if recalled else []
        rest = budget - counter.count("\n\n".join(parts)) - 2
        while True:  # tokens can merge across a join: shrink until the whole fits
            history = self.workspace.format_history(session, rest) if rest > 0 else ""
            text = "\n\n".join([*parts, history] if history else parts)
            if counter.count(text) <= budget:
                break
            if not history:
                parts.pop()
            rest -= 1
        if given and block and text.startswith(block):
            self._record_access(session, given, query)
        if format == "text":
            return text
        return self._messages(format, session, window, parts, recalled, history)

    def _messages(
        self,
        format: Literal["anthropic", "openai"],
        session: str,
        window: HotWindow | None,
        parts: list[str],
        recalled: str,
        history: str,
    ) -> list[dict[str, Any]]:
        """The context ``context`` chose, as that API's ``messages``
        (``projections.context_formats``): the summary and the newest messages ``history``
        holds are split back into the summary text and the hot entries."""
        from projections.context_formats import build_messages
        from projections.hot import render_entry

        entries = list(window.uncovered) if window else []
        while entries and render_entry(entries[0]) not in history:  # the oldest that fit
            entries.pop(0)
        shown = "\n".join(render_entry(e) for e in entries)
        summary = history[: len(history) - len(shown)].strip("\n") if shown else history
        records = {}
        if entries:
            read = self.workspace.log.read(session, from_seq=entries[0].seq)
            records = {located.record.seq: located.record for located in read}
        shown_recalled = recalled if recalled and recalled in parts else ""
        lead = [p for p in parts if p is not recalled] + ([summary] if summary else [])
        return build_messages(
            format, lead=lead, recalled=shown_recalled, entries=entries, records=records
        )

    def _memory_block(
        self, session: str, budget: int, query: str | None, reader: Scope
    ) -> tuple[str, dict[str, bool]]:
        """The memory part of a context, and the learnings in it (id -> matched the cue)."""
        from projections.fitting import elide

        cfg = self.workspace.settings.learnings
        share = int(budget * cfg.context_share)
        if share < 16:
            return "", {}
        assessment = self.learnings(reader=session, cue=query or "", scope=reader)
        info = assessment.sessions.get(session, {})
        counter = self.workspace.token_counter()
        lines = ["## Memory"]
        if info.get("task") or info.get("phase"):
            phase = info.get("phase")
            guidance = cfg.phases.get(phase or "", "")
            lines.append(f"Task: {info.get('task') or '(none given)'}")
            lines.append(f"Phase: {phase}: {guidance}" if phase else "Phase: (none)")
        anchors = sorted(
            (a for a in assessment.tier("hot") if a.kind == "anchor"),
            key=lambda a: (a.session != session, a.ts, a.id),
        )
        learned = assessment.prompt_order()  # the user's rules first, whatever the scores
        given: dict[str, bool] = {}
        headed: set[str] = set()
        used = counter.count("\n".join(lines))
        candidates = [("anchor", a) for a in anchors] + [("learned", a) for a in learned]
        heading = {"anchor": "Anchors (verbatim):", "learned": "Learned (airsspec learnings):"}
        for group, a in candidates:
            if group == "anchor":
                text = elide(a.text, max(16, share // 2), counter, seq=a.seq, session=a.session)
                where = a.evidence[0]["seq"] if a.evidence else a.seq
                line = f"- [{a.session} #{where}] {text}"
            else:
                line = f"- [{a.kind} {a.id}] {a.text}"
            if group not in headed:
                line = f"{heading[group]}\n{line}"
            cost = counter.count(line) + 1
            if used + cost > share:
                continue
            headed.add(group)
            lines.append(line)
            used += cost
            given[a.id] = a.matched
        if len(lines) == 1:
            return "", {}
        return "\n".join(lines), given

    def _record_access(self, session: str, given: dict[str, bool], query: str | None) -> None:
        """Record what a context build gave ``session`` (the access count of each learning,
        and which matched its task or query: a cold one that matched becomes warm)."""
        event = {
            "type": "memory_accessed",
            "learning_ids": sorted(given),
            "matched": sorted(i for i, matched in given.items() if matched),
            "purpose": "context",
            "reader": session,
            "query": query,
        }
        self._memory_event(event)

    def _earlier_sessions(self, session: str, budget: int, reader: Scope) -> list[str]:
        """The latest summaries of the most recent other sessions ``reader`` may see, each
        within its share."""
        from projections.hot import summary_block

        count = self.workspace.settings.memory.context_other_sessions
        if count == 0 or budget <= 0:
            return []
        self.project(("hot", "warm"), warn=False)
        (warm,) = self.workspace.projectors(("warm",))
        latest: dict[str, dict[str, Any]] = {}
        visible = self.visible_sessions(reader)
        for entry in warm.entries():  # by library number: the last one of a session wins
            if entry["session"] != session and (visible is None or entry["session"] in visible):
                latest[entry["session"]] = entry
        recent = sorted(latest.values(), key=lambda e: (e["ts"], e["library_no"]), reverse=True)
        counter = self.workspace.token_counter()
        blocks = []
        for entry in recent[:count]:
            window = self.workspace.load_hot(entry["session"])
            if window is not None and window.summary is not None:
                block = summary_block(
                    window.summary, budget // count, counter, session=entry["session"]
                )
                blocks += [block] if block else []
        return blocks

    def _recalled(self, query: str, visible: str, room: int, reader: Scope) -> list[str]:
        """Passages for ``query`` that ``reader`` may see, not already in ``visible``, best
        first: as many hits as a ``room`` of that many tokens could hold (about 50 tokens
        each, 5 to 50 of them)."""
        hits = self.search(query, k=max(5, min(50, room // 50)), scope=reader)["hits"]
        passages = []
        for hit in hits:  # best first
            if hit["text"] in visible:
                continue
            where = hit["source"] or f"{hit['session']} #{hit['seq_from']}-{hit['seq_to']}"
            passages.append(f"[recalled from {where}] {hit['text']}")
        return passages

    # ------------------------------------------------------------------ search and compaction

    def search(
        self,
        query: str,
        *,
        k: int = 10,
        session: str | None = None,
        kinds: Iterable[str] | None = None,
        since: str | datetime | None = None,
        until: str | datetime | None = None,
        fresh: bool = True,
        scope: Scope | None = None,
    ) -> dict[str, Any]:
        """``query_memory``: the ``k`` best passages (messages, summaries, sources) with
        provenance, the same shape as ``airsspec query --json``. ``fresh`` brings the cold
        tier up to date first. Only what ``scope`` (default: this memory's) may see."""
        from projections.memory_tool import QueryMemoryInput

        if session is not None:
            self.check_session(session)
        try:
            request = QueryMemoryInput(
                query=query,
                k=k,
                session=session,
                since=Bound.time(since, "since"),
                until=Bound.time(until, "until"),
                kinds=list(kinds) if kinds is not None else None,
            )
        except ValidationError as exc:
            error = exc.errors()[0]
            raise InvalidQueryError(f"{field_of(error, 'query')}: {error['msg']}") from exc
        return self.query(request, fresh=fresh, scope=scope)

    def query(
        self, request: QueryMemoryInput, *, fresh: bool = True, scope: Scope | None = None
    ) -> dict[str, Any]:
        """``search`` for an already validated request (a ``query --batch`` line, a tool
        call), within ``scope`` (default: this memory's)."""
        from projections.memory_tool import run_query

        scope = self.scope if scope is None else scope
        if request.session is not None and scope.named:
            self.check_session(request.session)
            if not scope.matches(self.owner(request.session)):
                raise ScopeError(f"session {request.session!r} is outside the scope {scope}")
        if fresh:
            self.project(("cold",))
        allowed = self.visible_sessions(scope)
        answer = run_query(self.workspace.recall(), request, allowed)
        if any(hit["kind"] == "learning" for hit in answer["hits"]):
            learnings = self.learnings(scope=scope).learnings
            live = {a.id for a in learnings if a.status == "active"}
            answer["hits"] = [
                hit
                for hit in answer["hits"]
                if hit["kind"] != "learning" or (hit["meta"] or {}).get("learning_id") in live
            ]
        return answer

    def forget(
        self, *, user: str | None = None, session: str | None = None, by: str | None = None
    ) -> Forgotten:
        """Forget ``user`` or ``session``: destroy its keys, record a ``forgotten`` event
        (``by``: who asked) and purge every derived copy (``airsspec.forgetting``). Needs
        ``[privacy] encrypt``; raises ``ForgetError`` otherwise."""
        from airsspec.forgetting import forget

        return forget(self, user=user, session=session, by=by)

    def _policy(self, name: str, session: str, force: bool) -> list[Record]:
        """Run one process that appends derived events (``compact`` or ``extract``: each has
        ``due`` and ``run``) on ``session``, then bring the tiers that read it up to date."""
        if name not in self._policies:
            made = self.workspace.compactor() if name == "compact" else self.workspace.extractor()
            self._policies[name] = made
        self.check_session(session)
        records = self._policies[name].run(session, force=force)
        follow = ("hot", "warm") if name == "compact" else ("hot", "learnings")
        self.project(follow, sessions=[session], warn=False)
        return records

    def run_policies(self, session: str) -> dict[str, list[Record]]:
        """Run each process that writes derived events (the compactor, then the learnings
        extractor) on ``session`` when it is due; what each appended. A policy busy in
        another process, or with too little to work on, appends nothing."""
        from airsspec.errors import CompactionBusyError, NothingToCompactError

        appended: dict[str, list[Record]] = {}
        for name in ("compact", "extract"):
            try:
                records = self._policy(name, session, force=False)
            except (NothingToCompactError, CompactionBusyError):
                continue
            if records:
                appended[name] = records
        return appended

    def compact(self, session: str, *, force: bool = False) -> Any:
        """Compact ``session`` if its hot window is over budget (or ``force``); return the
        compaction record, or None when it was within budget. Hot and warm follow at once."""
        records = self._policy("compact", session, force)
        return records[0] if records else None


class AsyncMemory:
    """``Memory`` for asyncio code: the same calls, as coroutines run in a worker thread."""

    def __init__(self, memory: Memory) -> None:
        self.memory = memory

    @classmethod
    async def open(
        cls,
        path: str | Path = ".",
        *,
        create: bool = False,
        config: str | Path | None = None,
        **scope: str | None,
    ) -> AsyncMemory:
        """``Memory.open`` in a thread (``scope``: ``user``, ``agent``, ``project``)."""
        import asyncio

        opened = partial(Memory.open, path, create=create, config=config, **scope)
        return cls(await asyncio.to_thread(opened))

    def scoped(self, **scope: str | None) -> AsyncMemory:
        """``Memory.scoped``: a view sharing this memory's workspace."""
        return AsyncMemory(self.memory.scoped(**scope))

    async def _run(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        import asyncio

        return await asyncio.to_thread(partial(fn, *args, **kwargs))

    async def append(self, session: str, event: Event | dict[str, Any]) -> Record:
        """``Memory.append``."""
        return await self._run(self.memory.append, session, event)

    async def append_many(
        self, session: str, events: Iterable[Event | dict[str, Any]]
    ) -> list[Record]:
        """``Memory.append_many``."""
        return await self._run(self.memory.append_many, session, list(events))

    async def context(self, session: str, budget: int, **kwargs: Any) -> Any:
        """``Memory.context``."""
        return await self._run(self.memory.context, session, budget, **kwargs)

    async def search(self, query: str, **kwargs: Any) -> dict[str, Any]:
        """``Memory.search``."""
        return await self._run(self.memory.search, query, **kwargs)

    async def sessions(self) -> list[SessionInfo]:
        """``Memory.sessions``."""
        return await self._run(self.memory.sessions)

    async def replay(self, session: str, **kwargs: Any) -> list[Record]:
        """``Memory.replay``, as a list."""
        return await self._run(lambda: list(self.memory.replay(session, **kwargs)))

    async def verify(self, sessions: Iterable[str] | None = None) -> VerifyReport:
        """``Memory.verify``."""
        return await self._run(self.memory.verify, sessions)

    async def compact(self, session: str, *, force: bool = False) -> Any:
        """``Memory.compact``."""
        return await self._run(self.memory.compact, session, force=force)

    async def project(self, tiers: Iterable[str] | str = TIERS) -> list[RunReport]:
        """``Memory.project``."""
        return await self._run(self.memory.project, tiers)

    async def status(self) -> list[TierStatus]:
        """``Memory.status``."""
        return await self._run(self.memory.status)

    async def close(self) -> None:
        """``Memory.close``."""
        await self._run(self.memory.close)

    async def __aenter__(self) -> AsyncMemory:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
