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

``Memory`` is a thin composition: each call is a service's, over this memory's ``Kernel``
(``airsspec.kernel``: the log, the projections, freshness, the access gate), and no service
calls back into ``Memory``. What crosses sessions is composed as services: ``memory.sessions``
(list, start, phase, end, info), ``memory.learnings`` (list, add, confirm, reject, gc, archive,
restore, reextract, health), ``memory.scopes`` (the gate: owners, what a scope may see,
guards), ``memory.files`` (the ``/memories`` tree of Claude's memory tool, every version kept)
and ``memory.captures`` (Messages API calls as sent, rebuilt byte for byte). The log's own
calls (``replay``, ``verify``, ``seal``, ``import_transcripts``, ``export``) live in
``airsspec.memory.records``; the search calls in ``airsspec.memory.search``; hot, history and
context in ``airsspec.memory.context`` over ``projections.context``.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from airsspec.config import DEFAULT_PATH
from airsspec.discovery import CONFIG_NAME, find_config
from airsspec.errors import (
    AirsspecError,
    InvalidQueryError,
    NotAWorkspaceError,
    SessionExistsError,
    SessionMovedError,
)
from airsspec.kernel import Kernel
from airsspec.kernel.freshness import PROJECTIONS
from airsspec.kernel.gate import Gate
from airsspec.memory import facts as _facts
from airsspec.memory import projecting as _projecting
from airsspec.memory import records as _records
from airsspec.memory import search as _search
from airsspec.memory.capture import Captures
from airsspec.memory.context import Context
from airsspec.memory.delegation import delegate, delegate_as
from airsspec.memory.files import MemoryFiles
from airsspec.memory.learnings import Learnings
from airsspec.memory.sessions import Sessions
from airsspec.memory.visual import Visual
from airsspec.workspace import Part, Workspace, init_workspace
from eventlog.layout import Layout, validate_session_id
from eventlog.log import check_after
from projections.scopes import Scope

if TYPE_CHECKING:  # the parts below load when a call needs them: the CLI stays quick
    from collections.abc import Mapping

    from airsspec.forgetting import Forgotten
    from airsspec.trust import Routing
    from compactor.summarizers import Summarizer
    from eventlog.log import StoredRecords
    from eventlog.schema import CompactionRecord, Event, Record
    from projections.analytics import Analytics, QueryResult
    from projections.context import Built
    from projections.visual_context import Page

logger = logging.getLogger(__name__)


# What a delegated call runs on (``delegate``'s ``to``), and the context's two answers.


def _kernel(memory: Memory) -> Kernel:
    return memory.kernel


def _context(memory: Memory) -> Context:
    return memory._context


def _visual(memory: Memory) -> Visual:
    return memory._visual


def _text(built: Built) -> str | list[dict[str, Any]]:
    """What ``session`` should see next, within ``budget`` tokens, as text or as a
    ``messages`` list for the Anthropic or OpenAI SDK (``projections.context`` owns the
    budget: memory block, earlier sessions' summaries, recalled passages with ``query``,
    then the session's summary and newest messages). What the memory block gave is
    recorded (a ``memory_accessed`` event), so the same call later may rank learnings
    differently; otherwise the result is a function of the log. The newest message is
    never lost (cut with a marker if it must be: ``elided_seqs`` finds it); in an API
    format the session's thoughts are left out unless ``thoughts``. With ``images``
    (format anthropic), other sessions moved to the visual tier come as image blocks
    within the budget (``projections.visual_context``)."""
    return built.context


def _parts(built: Built) -> tuple[str | list[dict[str, Any]], Mapping[str, int]]:
    """``context``, and the tokens each of its parts took, by name in their order
    (``projections.context.PARTS``: memory, facts, earlier, recalled, history), counted
    when first read."""
    return built.context, built.parts


class Memory:
    """An agent memory: the frozen log of a workspace and every projection derived from it,
    read and written as ``scope`` (see the module). A thin composition: each call is a
    service's over this memory's ``Kernel``."""

    def __init__(
        self,
        workspace: Workspace,
        scope: Scope | None = None,
        summarizer: Summarizer | None = None,
        *,
        read_only: bool = False,
    ) -> None:
        self._bind(Kernel(workspace, scope, read_only=read_only, summarizer=summarizer), True)

    def _bind(self, kernel: Kernel, owns_workspace: bool) -> None:
        self.kernel = kernel
        self._owns_workspace = owns_workspace
        self.scopes: Gate = kernel.gate
        self.sessions = Sessions(kernel)
        self.learnings = Learnings(kernel)
        self.files = MemoryFiles(kernel)
        self.captures = Captures(kernel)
        self._context = Context(kernel)
        self._visual = Visual(kernel)

    @classmethod
    def over(cls, kernel: Kernel) -> Memory:
        """A memory over ``kernel`` (a view: closing it leaves the workspace open)."""
        memory = cls.__new__(cls)
        memory._bind(kernel, False)
        return memory

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
        scope = Scope(user, agent, project).as_reader()  # before anything is opened
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
        return cls(workspace, scope, summarizer)

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
        scope = Scope(user, agent, project).as_reader()
        folder = Path(root)
        if not Layout.is_workspace(folder):
            raise NotAWorkspaceError(f"{folder}: not an airsspec workspace (run airsspec init)")
        return cls(Workspace.open(folder), scope)

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
        here = Path.cwd() if start is None else Path(start)
        found = cls.find_config(here)
        if found is not None:
            return cls.open(config=found, user=user, agent=agent, project=project)
        return cls.open(here / DEFAULT_PATH, user=user, agent=agent, project=project)

    @staticmethod
    def find_config(start: str | Path) -> Path | None:
        """The ``airsspec.toml`` in ``start`` or the nearest folder above it (None: none)."""
        return find_config(Path(start))

    @staticmethod
    def init(path: str | Path = ".") -> tuple[Path, bool]:
        """Create a workspace and a commented ``airsspec.toml`` in ``path``; return the
        config's path and whether it was written (an existing config is never replaced).
        A config written here is trusted for the Claude Code hooks (``Memory.trust``)."""
        return init_workspace(Path(path))

    @staticmethod
    def trust(config: str | Path) -> Routing:
        """Let the Claude Code hooks act on ``config`` with where it sends what is captured as
        it is now (its workspace folder, ``[storage]``, key store): what was trusted
        (``airsspec.trust``; ``SettingsError`` when the trusted file is not this user's
        alone)."""
        from airsspec import trust

        return trust.trust(config)

    @staticmethod
    def trusted(config: str | Path) -> bool:
        """Whether this user trusted ``config`` with the routing it has now."""
        from airsspec import trust

        return trust.trusted(config)

    @staticmethod
    def revoke_trust(config: str | Path) -> bool:
        """Trust ``config`` no more; whether it was trusted."""
        from airsspec import trust

        return trust.revoke(config)

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
    def workspace(self) -> Workspace:
        """The open workspace (settings, folders, the log)."""
        return self.kernel.workspace

    @property
    def scope(self) -> Scope:
        """The scope this memory reads and writes as (empty: an admin's)."""
        return self.kernel.scope

    @property
    def read_only(self) -> bool:
        """Whether this memory writes nothing (a read-only principal)."""
        return self.kernel.read_only

    root = Part(lambda w: w.root, "The workspace folder.")
    settings = Part(lambda w: w.settings, "The workspace's settings (``airsspec.toml``, frozen).")
    state_dir = Part(
        lambda w: w.state_dir, "The folder of projector state, locks and caches (``state/``)."
    )
    sources_dir = Part(
        lambda w: w.sources_dir,
        "The folder of documents the user adds for the cold projection (``sources/``).",
    )
    log_dir = Part(
        lambda w: w.log_dir,
        "The folder of the sessions' logs (with ``[storage] url``, the log is the bucket's and "
        "this folder unused: its synced cache is ``workspace.log.log_dir``).",
    )

    token_counter = delegate(Kernel.token_counter, to=_kernel)

    def scoped(
        self,
        user: str | None = None,
        agent: str | None = None,
        project: str | None = None,
        *,
        read_only: bool = False,
    ) -> Memory:
        """A view of this memory read and written as the scope named (``scopes.view``);
        ``read_only``: a view that writes nothing (``memory.scopes``). A view narrows: naming
        a value this memory's scope names otherwise is a ``ScopeError``. It shares this
        memory's workspace and caches; closing it leaves the workspace open."""
        scope = self.scopes.narrow(user, agent, project)
        return Memory.over(self.kernel.view(scope, read_only=read_only))

    # ------------------------------------------------------------------ the log

    def append(
        self,
        session: str,
        event: Event | dict[str, Any],
        *,
        project: bool = True,
        after: int | None = None,
    ) -> Record:
        """Append one event; return the stored record (see ``append_many``)."""
        return self.append_many(session, [event], project=project, after=after)[0]

    def append_many(
        self,
        session: str,
        events: Iterable[Event | dict[str, Any]],
        *,
        project: bool = True,
        after: int | None = None,
    ) -> StoredRecords:
        """Append events atomically (all or none); return the stored records, in order (each
        made a model when read: ``StoredRecords.seq`` reads a seq without one). The
        session's hot projection is current after, unless ``project`` is false (then
        ``project`` or the daemon brings it). A scoped memory refuses (``ScopeError``) a
        session owned by someone else, and records its scope first in a session it creates
        (a ``session_started`` event, in the same batch). ``after``: only if the session's
        last record is seq ``after`` (0: a session with none), checked as the records are
        written; else ``SessionMovedError`` and nothing is written (what was read decided
        the append: another writer's records since would change it).

        Once the records are stored the append has succeeded: if bringing the hot projection
        current then fails (a full disk, say), that is logged as a warning, not raised, since a
        caller that saw an error would append the records again; it catches up later."""
        kernel = self.kernel
        log = kernel.log
        validate_session_id(session)
        after = check_after(after)
        if opening := kernel.gate.opening(session):
            from eventlog.prepare import prepare_events

            bodies = prepare_events(list(events))  # refuses system types, names the index
            if after:  # made after a record of a session that has none
                raise SessionMovedError(session, after, 0)
            try:  # only as the session's first records, checked under its lock
                records = log.append_many(session, [*opening, *bodies], system=True, new=True)
            except SessionExistsError:  # another writer created it first: is it ours?
                kernel.gate.guard(session, writing=True)
                if after is not None:  # made after none: it has records now
                    raise SessionMovedError(session, after, log.head(session).seq) from None
                return self._then_hot(session, log.append_many(session, bodies), project)
            kernel.owners_seen[session] = (kernel.scope, records.seq(-1))
            return self._then_hot(session, records[len(opening) :], project)
        records = log.append_many(session, events, after=after)
        return self._then_hot(session, records, project)

    def _then_hot(self, session: str, records: StoredRecords, project: bool) -> StoredRecords:
        if project:
            try:
                self.kernel.written("append", session, warn=True)
            except (OSError, AirsspecError) as exc:
                logger.warning(
                    "%s: appended, but the hot projection was not updated: %s", session, exc
                )
        return records

    has_session = delegate(Kernel.has_session, to=_kernel)
    check_session = delegate(Kernel.check_session, to=_kernel)
    replay = delegate(_records.replay, to=_kernel)
    verify = delegate(_records.verify, to=_kernel)
    seal = delegate(_records.seal, to=_kernel)
    import_transcripts = delegate(_records.import_transcripts, to=_kernel)
    export = delegate(_records.export, to=_kernel)
    export_parquet = delegate(_records.export_parquet, to=_kernel)
    register_sources = delegate(Kernel.register_sources, to=_kernel)

    # ------------------------------------------------------------------ projections

    project = delegate(Kernel.project, to=_kernel)
    rebuild = delegate(_projecting.rebuild, to=_kernel)

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

    status = delegate(Kernel.status, to=_kernel)
    embedder_problem = delegate(Kernel.embedder_problem, to=_kernel)

    def warm_up(self) -> None:
        """Load the embedder now, so the first search is as quick as the others (one that
        cannot load is left: searches degrade and say so themselves)."""
        try:
            self.workspace.embedder().embed(["warm up"])
        except Exception as exc:  # any failure here only delays the first query
            logger.debug("embedder warm-up failed: %s", exc)

    @staticmethod
    def models_status() -> dict[str, str]:
        """Where models live and whether each embedding model can run (``ready``, or why not;
        ``mpnet``, the opt-in one, is not loaded to say so)."""
        from airsspec.errors import EmbedderUnavailable
        from projections import mpnet
        from projections.embedders import make_embedder, models_dir

        problem = None
        try:
            make_embedder("minilm").check()
        except EmbedderUnavailable as exc:
            problem = str(exc)
        models = models_dir()
        return {
            "models_dir": str(models),
            "minilm": problem or "ready",
            "mpnet": mpnet.status(models),
        }

    @staticmethod
    def fetch_models() -> Path:
        """Fetch the embedding model's tokenizer (SHA-256 checked); where it is."""
        from projections.embedders import fetch_tokenizer

        return fetch_tokenizer()

    hot = delegate(Context.hot, to=_context)
    history = delegate(Context.history, to=_context)
    library = delegate(_projecting.library, to=_kernel)
    library_file = delegate(_projecting.library_file, to=_kernel)

    context = delegate_as(Context.build, to=_context, then=_text, name="context")
    context_parts = delegate_as(Context.build, to=_context, then=_parts, name="context_parts")
    memory_block = delegate(Context.memory_block, to=_context)
    facts = delegate(_facts.facts, to=_kernel)

    # ------------------------------------------------------------------ search

    search = delegate(_search.search, to=_kernel)
    query_memory = delegate(_search.query_memory, to=_kernel)
    search_now = delegate(_search.search_now, to=_kernel)

    # ------------------------------------------------------------------ processes

    def run_policies(self, session: str) -> dict[str, list[Record]]:
        """Run each process that writes derived events (the compactor, then the learnings
        extractor) on ``session`` when it is due, and after a compaction the visual policy
        (``visualize``); what each appended."""
        from airsspec.errors import CompactionBusyError, NothingToCompactError

        appended: dict[str, list[Record]] = {}
        for name in ("compact", "extract"):
            try:
                records = self.kernel.run_policy(name, session, force=False)
            except (NothingToCompactError, CompactionBusyError):
                continue
            if records:
                appended[name] = records
        # the warm part grew: its oldest sessions may move
        if appended.get("compact") and (moved := self.visualize()):
            appended["visualize"] = [*moved]
        return appended

    def compact(self, session: str, *, force: bool = False) -> CompactionRecord | None:
        """Compact ``session`` if its hot window is over budget (or ``force``); return the
        compaction record, or None when it was within budget. Hot and warm follow at once."""
        records = self.kernel.run_policy("compact", session, force=force)
        from eventlog.schema import CompactionRecord, typed

        return typed(CompactionRecord, records[0]) if records else None

    visualize = delegate(Visual.visualize, to=_visual)

    def pages(self, session: str | None = None) -> list[Page]:
        """The visual tier's PNG pages (``projections.visual_context.Page``: session, library
        number, file, bytes, image tokens) this memory may read; only ``session``'s if given."""
        return [p for p in self._visual.pages() if session is None or p.session == session]

    load_context = delegate(Visual.load_context, to=_visual)

    def forget(
        self, *, user: str | None = None, session: str | None = None, by: str | None = None
    ) -> Forgotten:
        """Forget ``user`` or ``session``: destroy its keys, record a ``forgotten`` event
        (``by``: who asked) and purge every derived copy (``airsspec.forgetting``). Needs
        ``[privacy] encrypt``; raises ``ForgetError`` otherwise."""
        from airsspec.forgetting import forget

        return forget(self.kernel, user=user, session=session, by=by)

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


__all__ = ["PROJECTIONS", "Memory"]
