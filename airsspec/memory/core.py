"""``Memory``: the one object every door (CLI, MCP server, HTTP server, hooks, daemon) goes through.

    from airsspec.memory import Memory

    with Memory.open(".", create=True) as memory:
        memory.append("s1", {"type": "user", "content": "Add rate limiting to the API"})
        print(memory.context("s1", budget=2000))
        print(memory.search("rate limiting", k=3))

Every call validates its input as the CLI does and raises an ``AirsspecError`` subclass for a
caller's mistake (``NotAWorkspaceError``, ``InvalidEventError``, ``InvalidQueryError``...).

Append, through every door, brings the session's hot projection current before it returns
(folded in this process, a few records), so ``context`` shows what was just appended; a caller
that asks ``project=False`` leaves it to ``project`` and the daemon. The other projections
follow in ``project``, ``search`` (cold) and ``compact``, or in the daemon.

What crosses sessions is composed as services: ``memory.sessions`` (list, start, phase, end,
info), ``memory.learnings`` (list, add, confirm, reject, gc, archive, restore, reextract, health)
and ``memory.scopes`` (views, owners, guards). The log's own calls (``replay``, ``verify``,
``seal``, ``import_transcripts``, ``export``) live in ``airsspec.memory.records``; the search
calls in ``airsspec.memory.search``; the context budget in ``projections.context``.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from airsspec.errors import (
    AirsspecError,
    InvalidQueryError,
    NoSuchSessionError,
    NotAWorkspaceError,
    SessionExistsError,
)
from airsspec.memory import projecting as _projecting
from airsspec.memory import records as _records
from airsspec.memory import search as _search
from airsspec.memory.learnings import Learnings
from airsspec.memory.scopes import Scopes
from airsspec.memory.sessions import Sessions
from airsspec.settings import CONFIG_NAME
from airsspec.workspace import TIERS as PROJECTIONS
from airsspec.workspace import Workspace, init_workspace
from eventlog.bound import Bound
from eventlog.layout import Layout, validate_session_id
from eventlog.schema import MEMORY_SESSION
from projections.context import FORMATS as CONTEXT_FORMATS
from projections.context import ContextFormat
from projections.scopes import Scope

if TYPE_CHECKING:  # the parts below load when a call needs them: the CLI stays quick
    from airsspec.daemon import Daemon
    from airsspec.forgetting import Forgotten
    from compactor.compactor import Compactor
    from compactor.extractor import Extractor
    from compactor.summarizers import Summarizer
    from eventlog.schema import Event, Record
    from projections.analytics import Analytics, QueryResult
    from projections.hot import HotWindow
    from projections.memory_tool import QueryMemoryInput
    from projections.status import TierStatus
    from projections.tokens import TokenCounter

logger = logging.getLogger(__name__)


class Memory:
    """An agent memory: the frozen log of a workspace and every projection derived from it,
    read and written as ``scope`` (see the module)."""

    def __init__(
        self,
        workspace: Workspace,
        scope: Scope | None = None,
        summarizer: Summarizer | None = None,
        *,
        read_only: bool = False,
    ) -> None:
        self.workspace = workspace
        self.scope = scope or Scope()
        self.read_only = read_only  # a read-only principal: no write, no access record
        self._summarizer = summarizer  # the compactor's, over [compactor] summarizer
        self._policies: dict[str, Compactor | Extractor] = {}
        self._owners_seen: dict[str, tuple[Scope, int]] = {}  # session -> (owner, at head)
        self._owns_workspace = True
        self.scopes = Scopes(self)
        self.sessions = Sessions(self)
        self.learnings = Learnings(self)

    def _view(self, scope: Scope, *, read_only: bool = False) -> Memory:
        """This memory's workspace, resources and caches, read and written as ``scope``
        (read-only when this memory is, or ``read_only``)."""
        read_only = self.read_only or read_only
        view = type(self)(self.workspace, scope, self._summarizer, read_only=read_only)
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
        summarizer: Summarizer | None = None,
    ) -> Memory:
        """Open the workspace at ``path``: a folder holding ``airsspec.toml``, or a workspace
        folder itself (``.airsspec``). With ``create``, a missing one is initialised there.
        ``user``, ``agent`` and ``project`` are the caller's scope (``memory.scopes``).
        ``keys``: where data keys live, over ``[privacy] keys`` (a key store, or a KMS
        callback: ``eventlog.keystores``). ``summarizer``: what compaction summarizes with
        (your own model's client: ``compactor.summarizers.Summarizer``), over
        ``[compactor] summarizer``.

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
        return cls(workspace, Scope(user, agent, project), summarizer)

    @classmethod
    def open_workspace(
        cls,
        root: str | Path,
        *,
        user: str | None = None,
        agent: str | None = None,
        project: str | None = None,
    ) -> Memory:
        """Open the workspace folder ``root`` itself (``-w``), with default settings;
        ``NotAWorkspaceError`` when it holds none of a workspace's folders."""
        folder = Path(root)
        if not Layout.is_workspace(folder):
            raise NotAWorkspaceError(f"{folder}: not an airsspec workspace (run airsspec init)")
        return cls(Workspace.open(folder), Scope(user, agent, project))

    @classmethod
    def discover(
        cls,
        start: str | Path | None = None,
        *,
        user: str | None = None,
        agent: str | None = None,
        project: str | None = None,
    ) -> Memory:
        """The workspace of the ``airsspec.toml`` found from ``start`` (default: the current
        folder) upwards; else the default workspace folder under ``start``."""
        from airsspec.settings import WorkspaceSettings

        here = Path.cwd() if start is None else Path(start)
        scope = {"user": user, "agent": agent, "project": project}
        found = cls.find_config(here)
        if found is not None:
            return cls.open(config=found, **scope)
        return cls.open(here / WorkspaceSettings().path, **scope)

    @staticmethod
    def find_config(start: str | Path) -> Path | None:
        """The ``airsspec.toml`` in ``start`` or the nearest folder above it (None: none)."""
        from airsspec.settings import find_config

        return find_config(Path(start))

    @staticmethod
    def init(path: str | Path = ".") -> tuple[Path, bool]:
        """Create a workspace and a commented ``airsspec.toml`` in ``path``; return the
        config's path and whether it was written (an existing config is never replaced)."""
        return init_workspace(Path(path))

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

    @property
    def settings(self) -> Any:
        """The workspace's settings (``airsspec.toml``, frozen)."""
        return self.workspace.settings

    @property
    def state_dir(self) -> Path:
        """The folder of projector state, locks and caches (``state/``)."""
        return self.workspace.state_dir

    @property
    def sources_dir(self) -> Path:
        """The folder of documents the user adds for the cold projection (``sources/``)."""
        return self.workspace.sources_dir

    @property
    def log_dir(self) -> Path:
        """The folder of the sessions' logs (on a bucket: its synced cache)."""
        return self.workspace.log_dir

    def token_counter(self) -> TokenCounter:
        """The workspace's token counter (the tokenizer every budget is counted with)."""
        return self.workspace.token_counter()

    def scoped(
        self,
        user: str | None = None,
        agent: str | None = None,
        project: str | None = None,
        *,
        read_only: bool = False,
    ) -> Memory:
        """A view of this memory read and written as the scope named (``scopes.view``);
        ``read_only``: a view that writes nothing (``memory.scopes``)."""
        return self.scopes.view(user, agent, project, read_only=read_only)

    # ------------------------------------------------------------------ the log

    def append(
        self, session: str, event: Event | dict[str, Any], *, project: bool = True
    ) -> Record:
        """Append one event; return the stored record (see ``append_many``)."""
        return self.append_many(session, [event], project=project)[0]

    def append_many(
        self,
        session: str,
        events: Iterable[Event | dict[str, Any]],
        *,
        project: bool = True,
    ) -> list[Record]:
        """Append events atomically (all or none); return the stored records, in order. The
        session's hot projection is current after, unless ``project`` is false (then
        ``project`` or the daemon brings it). A scoped memory refuses (``ScopeError``) a
        session owned by someone else, and records its scope first in a session it creates
        (a ``session_started`` event, in the same batch).

        Once the records are stored the append has succeeded: if bringing the hot projection
        current then fails (a full disk, say), that is logged as a warning, not raised, since a
        caller that saw an error would append the records again; it catches up later."""
        log = self.workspace.log
        validate_session_id(session)
        if opening := self.scopes.opening(session):
            from eventlog.prepare import prepare_events

            bodies = prepare_events(list(events))  # refuses system types, names the index
            try:  # only as the session's first records, checked under its lock
                records = list(log.append_many(session, [*opening, *bodies], system=True, new=True))
            except SessionExistsError:  # another writer created it first: is it ours?
                self.scopes.guard(session, writing=True)
                return self._then_hot(session, list(log.append_many(session, bodies)), project)
            self._owners_seen[session] = (self.scope, records[-1].seq)
            return self._then_hot(session, records[len(opening) :], project)
        return self._then_hot(session, list(log.append_many(session, events)), project)

    def _then_hot(self, session: str, records: list[Record], project: bool) -> list[Record]:
        if project:
            try:
                self.project(("hot",), sessions=[session])
            except (OSError, AirsspecError) as exc:
                logger.warning(
                    "%s: appended, but the hot projection was not updated: %s",
                    session,
                    exc,
                )
        return records

    def _system_append(self, session: str, events: list[dict[str, Any]]) -> list[Record]:
        """Append derived or lifecycle events (system types), then fold hot and learnings."""
        self.scopes.writable()
        records = list(self.workspace.log.append_many(session, events, system=True))
        self.project(("hot", "learnings"), sessions=[session], warn=False)
        return records

    def _memory_event(self, event: dict[str, Any]) -> Record:
        """Append an event to the workspace's own log."""
        return self._system_append(MEMORY_SESSION, [event])[0]

    def has_session(self, session: str) -> bool:
        """Whether ``session`` (a valid id, else ``InvalidSessionIdError``) has a log here
        that this memory may read (another user's is answered as none)."""
        return self._logged(session) and self.scopes.reads_session(session)

    def _logged(self, session: str) -> bool:
        """Whether ``session`` (a valid id) has a log here, whoever asks: what a write
        decides on (append to it or create it) before the gate has its say."""
        validate_session_id(session)
        return session in self.workspace.log.sessions()

    def check_session(self, session: str) -> str:
        """``session`` if it names a session of this workspace that this memory's scope may
        read; else ``InvalidSessionIdError``, ``NoSuchSessionError`` or ``ScopeError``."""
        if not self._logged(session):
            raise NoSuchSessionError(f"no session {session!r} in this workspace")
        self.scopes.guard(session)
        return session

    replay = _records.replay

    verify = _records.verify

    seal = _records.seal

    import_transcripts = _records.import_transcripts

    export = _records.export

    export_parquet = _records.export_parquet

    register_sources = _projecting.register_sources

    # ------------------------------------------------------------------ projections

    project = _projecting.project

    rebuild = _projecting.rebuild

    def status(self) -> list[TierStatus]:
        """Items, size, lag and what is degraded, for every projection (the sessions named
        behind: those this memory may read)."""
        from dataclasses import replace

        from projections.status import tier_status

        found = [tier_status(self.workspace.log, p) for p in self.workspace.projectors()]
        if (shown := self.scopes.visible()) is None:
            return found
        return [
            replace(t, behind_sessions=[s for s in t.behind_sessions if s in shown]) for t in found
        ]

    def overview(self) -> dict[str, Any]:
        """The workspace at a glance (what ``airsspec status`` shows): the log's sessions,
        records, bytes and unreadable sessions (with why), every projection's ``status`` and
        what is degraded, the embedder included."""
        from dataclasses import asdict

        infos = self.sessions.list()
        tiers = self.status()
        degraded = [f"{t.tier}: {d}" for t in tiers for d in t.degraded]
        if embedder := self.embedder_problem():
            degraded.append(f"cold: {embedder}")
        return {
            "workspace": str(self.root),
            "log": {
                "sessions": len(infos),
                "records": sum(i.records for i in infos),
                "bytes": sum(i.bytes for i in infos),
                "unreadable": {i.session: i.problem for i in infos if i.problem},
            },
            "tiers": [asdict(t) for t in tiers],
            "degraded": degraded,
        }

    def embedder_problem(self) -> str | None:
        """Why the cold projection's embedder cannot run here (None when it can)."""
        from airsspec.errors import EmbedderUnavailable

        try:
            self.workspace.embedder().check()
        except EmbedderUnavailable as exc:
            return str(exc)
        return None

    def warm_up(self) -> None:
        """Load the embedder now, so the first search is as quick as the others (one that
        cannot load is left: searches degrade and say so themselves)."""
        try:
            self.workspace.embedder().embed(["warm up"])
        except Exception as exc:  # any failure here only delays the first query
            logger.debug("embedder warm-up failed: %s", exc)

    @staticmethod
    def models_status() -> dict[str, str]:
        """Where models live and whether the embedding model can run (``ready``, or why not)."""
        from airsspec.errors import EmbedderUnavailable
        from projections.embedders import make_embedder, models_dir

        problem = None
        try:
            make_embedder("minilm").check()
        except EmbedderUnavailable as exc:
            problem = str(exc)
        return {"models_dir": str(models_dir()), "minilm": problem or "ready"}

    @staticmethod
    def fetch_models() -> Path:
        """Fetch the embedding model's tokenizer (SHA-256 checked); where it is."""
        from projections.embedders import fetch_tokenizer

        return fetch_tokenizer()

    def hot(self, session: str, *, fresh: bool = True) -> HotWindow:
        """The hot window of ``session``, brought up to date first unless ``fresh`` is false
        (then as last saved); in a folder written by ``rebuild(as_of=...)``, which holds
        projections without a log, as saved there. ``NoSuchSessionError`` when there is none;
        ``CorruptLogError`` naming file and line when its log cannot be read."""
        logged = self._logged(session)
        if logged:
            self.check_session(session)  # the gate, whether fresh or as last saved
        if not logged or not fresh:
            window = self.workspace.load_hot(session)
            if window is None:
                raise NoSuchSessionError(f"no session {session!r} in this workspace")
            return window
        (report,) = self.project(("hot",), sessions=[session], warn=False)
        report.raise_failed()
        window = self.workspace.load_hot(session)
        assert window is not None
        return window

    def history(self, session: str, budget: int) -> str:
        """The session's latest summary and newest messages within ``budget`` tokens (the
        last part of ``context``)."""
        self.hot(session)
        return self.workspace.format_history(session, budget)

    library = _projecting.library

    library_file = _projecting.library_file

    def context(
        self, session: str, budget: int, *, query: str | None = None, format: ContextFormat = "text"
    ) -> str | list[dict[str, Any]]:
        """What ``session`` should see next, within ``budget`` tokens, as text or as a
        ``messages`` list for the Anthropic or OpenAI SDK (``projections.context`` owns the
        budget: memory block, earlier sessions' summaries, recalled passages with ``query``,
        then the session's summary and newest messages). What the memory block gave is
        recorded (a ``memory_accessed`` event), so the same call later may rank learnings
        differently; otherwise the result is a function of the log."""
        from airsspec.memory.context import build

        if budget < 1:
            raise InvalidQueryError(f"budget must be at least 1 token (got {budget})")
        if format not in CONTEXT_FORMATS:
            raise InvalidQueryError(f"format must be text, anthropic or openai (got {format!r})")
        return build(self, session, budget, query=query, format=format)

    def memory_block(self, session: str, budget: int, *, query: str | None = None) -> str:
        """The memory part of ``context`` alone (task and phase, anchors, learnings), within
        the share of ``budget`` that ``context`` gives it; the access is recorded."""
        from airsspec.memory.context import memory_block

        return memory_block(self, session, budget, query=query)

    # ------------------------------------------------------------------ search

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
        """The ``k`` best passages (messages, summaries, sources, learnings) with provenance,
        the shape of ``airsspec query --json``. ``fresh`` brings the cold projection up to
        date first. Only what ``scope`` (default: this memory's; it narrows) may see."""
        request = _search.request(
            query,
            k=k,
            session=session,
            kinds=kinds,
            since=Bound.time(since, "since"),
            until=Bound.time(until, "until"),
        )
        return self.query_memory(request, fresh=fresh, scope=scope)

    def query_memory(
        self,
        request: QueryMemoryInput | dict[str, Any],
        *,
        fresh: bool = True,
        scope: Scope | None = None,
    ) -> dict[str, Any]:
        """``search`` for a ``query_memory`` tool call (a ``QueryMemoryInput``, or its
        fields as a dict, validated here: ``InvalidQueryError`` naming the field)."""
        return _search.query_memory(self, request, fresh=fresh, scope=scope)

    def search_now(
        self,
        query: str,
        *,
        k: int = 10,
        session: str | None = None,
        kinds: Iterable[str] | None = None,
        since: str | None = None,
        until: str | None = None,
    ) -> dict[str, Any]:
        """``search`` without waiting for the cold projection: what is indexed, plus a
        full-text scan of the records not indexed yet (``unindexed`` counts them)."""
        return _search.search_now(
            self, query, k=k, session=session, kinds=kinds, since=since, until=until
        )

    # ------------------------------------------------------------------ processes

    def _policy(self, name: str, session: str, force: bool) -> list[Record]:
        """Run one process that appends derived events (``compact`` or ``extract``: each has
        ``due`` and ``run``) on ``session``, then bring the projections that read it current."""
        if name not in self._policies:
            made = (
                self.workspace.compactor(self._summarizer)
                if name == "compact"
                else self.workspace.extractor()
            )
            self._policies[name] = made
        self.scopes.guard_writes(session)  # derived events are written to the session
        records = self._policies[name].run(session, force=force)
        follow = ("hot", "warm") if name == "compact" else ("hot", "learnings")
        self.project(follow, sessions=[session], warn=False)
        return records

    def run_policies(self, session: str) -> dict[str, list[Record]]:
        """Run each process that writes derived events (the compactor, then the learnings
        extractor) on ``session`` when it is due; what each appended."""
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

    def forget(
        self, *, user: str | None = None, session: str | None = None, by: str | None = None
    ) -> Forgotten:
        """Forget ``user`` or ``session``: destroy its keys, record a ``forgotten`` event
        (``by``: who asked) and purge every derived copy (``airsspec.forgetting``). Needs
        ``[privacy] encrypt``; raises ``ForgetError`` otherwise."""
        from airsspec.forgetting import forget

        return forget(self, user=user, session=session, by=by)

    def analytics(self, parquet_source: str | None = None, sql: str | None = None) -> Analytics:
        """The SQL views, holding only the sessions this memory's scope may read; the
        ``sessions`` view names each one's user, agent and project."""
        analytics = self.workspace.analytics(parquet_source, sql=sql)
        allowed = self.scopes.visible()
        if allowed is not None:
            analytics.restrict(allowed)
        return analytics

    def sql(self, query: str, *, parquet: str | None = None) -> tuple[QueryResult, list[str]]:
        """A read-only SQL query over the views (refused before anything loads when it is not
        read-only); the result and what was left out (unreadable sessions)."""
        from projections.analytics import check_read_only

        check_read_only(query)
        analytics = self.analytics(parquet, sql=query)
        try:
            return analytics.query(query), list(analytics.skipped)
        finally:
            analytics.close()

    def report(self, name: str, *, parquet: str | None = None) -> QueryResult:
        """The named report (``REPORTS``: tools, sessions, tokens) over the views."""
        from airsspec.reports import REPORTS, run_report

        if name not in REPORTS:
            raise InvalidQueryError(f"unknown report {name!r}; available: {', '.join(REPORTS)}")
        analytics = self.analytics(parquet, sql=REPORTS[name])
        try:
            return run_report(analytics, name)
        finally:
            analytics.close()

    def daemon(self, *, debounce_ms: int = 20) -> Daemon:
        """The ``watch`` daemon over this memory (``acquire``, ``run``, ``release``)."""
        from airsspec.daemon import Daemon

        return Daemon(self, debounce_ms=debounce_ms)

    def watch(self, *, debounce_ms: int = 20) -> None:
        """Keep every projection current as agents append, until SIGINT or SIGTERM (one
        daemon per workspace: ``DaemonBusyError`` naming the holder when one already runs)."""
        daemon = self.daemon(debounce_ms=debounce_ms)
        daemon.acquire()
        try:
            daemon.run()
        finally:
            daemon.release()


__all__ = ["PROJECTIONS", "Memory"]
