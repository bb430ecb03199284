"""The kernel: the open workspace as the services see it.

``Memory`` (``airsspec.memory.core``) is a facade composed of services (sessions, learnings,
records, search, context, forgetting, compaction, reextract); each service takes a ``Kernel``
and uses only its public methods, never ``Memory``. The rules:

- **a service never imports ``Memory``** and never calls back into it (the import contract of
  ``pyproject.toml`` enforces it); a service that needs another builds it over the same kernel;
- **access is decided in one place**, the gate (``kernel.gate``, ``airsspec.kernel.gate``), on
  identities validated once (``eventlog.names``, ``eventlog.layout.validate_session_id``);
- **freshness is declared once** (``NEEDS`` and ``FOLLOWS`` below): a read names what it reads
  (``kernel.fresh("learnings")``) and the kernel brings the projections that answer it current;
  a write names what it wrote (``kernel.written("compact", session)``) and the projections that
  follow it are folded;
- **derived copies are purged by their own projection** (``airsspec.kernel.purge``): forgetting
  asks each projection's store to drop sessions, and the cold store compacts its own versions.

A kernel is read and written as its ``scope`` (a ``Scope``: empty for an admin) and may be
read-only; ``view`` gives another scope over the same workspace and caches.
"""

from __future__ import annotations

import inspect
import logging
import threading
from collections.abc import Callable, Hashable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Concatenate, Literal, ParamSpec, TypeVar, cast

from airsspec.errors import AirsspecError, NoSuchSessionError
from airsspec.kernel.freshness import FOLLOWS, NEEDS, Read, Write, chosen
from airsspec.kernel.gate import Gate
from airsspec.workspace import TIERS as PROJECTIONS
from airsspec.workspace import Part
from eventlog.layout import MEMORY_SESSION
from projections.scopes import Scope

if TYPE_CHECKING:
    from airsspec.workspace import Workspace
    from compactor.compactor import Compactor
    from compactor.extractor import Extractor
    from compactor.summarizers import Summarizer
    from eventlog.log import Log, StoredRecords
    from eventlog.schema import Record
    from projections.engine import Progress, RunReport
    from projections.status import TierStatus
    from projections.tokens import TokenCounter

logger = logging.getLogger(__name__)
P = ParamSpec("P")
T = TypeVar("T")


def _gated(
    catch_up: Callable[Concatenate[Kernel, P], list[RunReport]],
) -> Callable[Concatenate[Kernel, P], list[RunReport]]:
    """``Kernel.project``: ``catch_up`` with its parameters, its reports filtered through the
    kernel's gate (the one place where what a scope may read of them is decided)."""

    def project(kernel: Kernel, *args: P.args, **kwargs: P.kwargs) -> list[RunReport]:
        """Bring ``projections`` up to the head of the log (only ``sessions``, when given);
        the reports name only sessions this memory may read (``Kernel.catch_up``)."""
        return kernel.gate.reports(catch_up(kernel, *args, **kwargs))

    project.__qualname__ = "Kernel.project"
    project.__signature__ = inspect.signature(catch_up)  # type: ignore[attr-defined]
    return project


@dataclass
class _Shared:
    """What every view of one open workspace shares: caches and the processes it built."""

    owners_seen: dict[str, tuple[Scope, int]] = field(default_factory=dict)
    policies: dict[str, Any] = field(default_factory=dict)


class Kernel:
    """One open workspace, read and written as ``scope`` (see the module)."""

    def __init__(
        self,
        workspace: Workspace,
        scope: Scope | None = None,
        *,
        read_only: bool = False,
        summarizer: Summarizer | None = None,
        shared: _Shared | None = None,
    ) -> None:
        self.workspace = workspace
        self.scope = scope or Scope()
        self.read_only = read_only  # a read-only principal: no write, no access record
        self.summarizer = summarizer  # the compactor's, over [compactor] summarizer
        self._shared = shared or _Shared()
        self._reading = threading.local()  # the projections a read in this thread brought
        self.gate = Gate(self)

    def view(self, scope: Scope, *, read_only: bool = False) -> Kernel:
        """The same workspace and caches, read and written as ``scope`` (read-only when this
        kernel is, or ``read_only``)."""
        return Kernel(
            self.workspace,
            scope,
            read_only=self.read_only or read_only,
            summarizer=self.summarizer,
            shared=self._shared,
        )

    # ------------------------------------------------------------------ the workspace

    @property
    def log(self) -> Log:
        """The workspace's log: the folder's, or a bucket's (both offer ``eventlog.log.Log``,
        what the projections and the log's tools take)."""
        return self.workspace.log

    root = Part(lambda w: w.root, "The workspace folder.")
    settings = Part(lambda w: w.settings, "The workspace's settings (``airsspec.toml``, frozen).")

    @property
    def owners_seen(self) -> dict[str, tuple[Scope, int]]:
        """The gate's cache: session -> (owner, the session's head when it was read)."""
        return self._shared.owners_seen

    def token_counter(self) -> TokenCounter:
        """The workspace's token counter (the tokenizer every budget is counted with)."""
        return self.workspace.token_counter()

    def projector(self, name: str) -> Any:
        """The projector of projection ``name``."""
        (projector,) = self.workspace.projectors((name,))
        return projector

    # ------------------------------------------------------------------ sessions

    def logged(self, session: str) -> bool:
        """Whether ``session`` (a valid id, else ``InvalidSessionIdError``) has a log here,
        whoever asks (one ``stat``): what a write decides on before the gate has its say."""
        return self.log.has(session)

    def has_session(self, session: str) -> bool:
        """Whether ``session`` (a valid id, else ``InvalidSessionIdError``) has a log here
        that this scope may read (another user's is answered as none)."""
        return self.logged(session) and self.gate.reads_session(session)

    def check_session(self, session: str) -> str:
        """``session`` if it names a session of this workspace that this scope may read;
        else ``InvalidSessionIdError``, ``NoSuchSessionError`` or ``ScopeError``."""
        if not self.logged(session):
            raise NoSuchSessionError(f"no session {session!r} in this workspace")
        self.gate.guard(session)
        return session

    def check_reader(self, session: str) -> None:
        """Refuse ``session`` as the session a read is made for (its briefing, its learnings
        ranked) when it has a log this scope may not read; one not logged yet is a session
        about to start, read for as its principal's (``Gate.reader``)."""
        if self.logged(session):
            self.gate.guard(session)

    # ------------------------------------------------------------------ freshness

    def catch_up(
        self,
        projections: Iterable[str] | str = PROJECTIONS,
        *,
        sessions: Iterable[str] | None = None,
        jobs: int = 1,
        progress: Progress | None = None,
        warn: bool = True,
        cancel: threading.Event | None = None,
        deep: bool = False,
    ) -> list[RunReport]:
        """Bring ``projections`` to the head of the log (only ``sessions``, when given),
        whoever asks (the reports unfiltered: the gate's own reads run here). A cold
        projection whose embedder cannot load is left, with a warning (search degrades to
        full text and says so); a session whose log is damaged is skipped (warned unless
        ``warn`` is false; the reports name it). ``cancel`` stops after the record being
        folded; ``deep`` reads every output file and repairs one that differs. A ``forget``
        run on another machine sharing the log is followed here (``airsspec.kernel.purge``)."""
        from airsspec.kernel.purge import follow
        from projections.engine import Glance, Runner

        names = chosen(projections)
        done = getattr(self._reading, "done", None)  # inside ``reading``: each once
        if done is not None:
            names = tuple(t for t in names if t not in done)
            if sessions is None:
                done.update(names)
            if not names:
                return []
        if "cold" in names and (problem := self.embedder_problem()):
            logger.warning("the cold projection was not updated: %s", problem)
            names = tuple(t for t in names if t != "cold")
        if "cold" in names:
            follow(self, fresh=True)  # first: a forgotten user's documents are not registered
        registered = "cold" in names and not self.read_only and self.register_sources()
        if registered and sessions is not None:
            sessions = {*sessions, MEMORY_SESSION}
        projectors = self.workspace.projectors(names)
        if registered:
            self._wrote(MEMORY_SESSION)
        glance = None if sessions is not None else self.once(("glance",), Glance)  # per read
        runner = Runner(
            self.log, projectors, progress, jobs=jobs, cancel=cancel, deep=deep, glance=glance
        )
        reports = runner.catch_up(sessions=sessions)
        follow(self)  # a ``forget`` run on another machine sharing the log is applied here
        for report in reports if warn else ():
            for outcome in report.failed:
                logger.warning(
                    "%s: skipped %s (its log is damaged; the other sessions are current): %s",
                    report.projector,
                    outcome.session,
                    outcome.failed,
                )
        return reports

    @contextmanager
    def reading(self) -> Iterator[None]:
        """A read made of several reads (a context build, a search): within the block, each
        projection is brought current once, by the first read that needs all of it; a
        record appended meanwhile is left to the next read, as one appended just after."""
        if getattr(self._reading, "done", None) is not None:
            yield  # an outer read holds the block
            return
        self._reading.done, self._reading.kept = set(), {}
        try:
            yield
        finally:
            self._reading.done = self._reading.kept = None

    def once(self, key: Hashable, make: Callable[[], T]) -> T:
        """Within ``reading``, what ``make`` gives for ``key``, made by the first read that
        asks (the projections are current once in the block: what is derived from them is
        too); outside it, made at each call."""
        kept: dict[Hashable, Any] | None = getattr(self._reading, "kept", None)
        if kept is None:
            return make()
        if key not in kept:
            kept[key] = make()
        return cast("T", kept[key])

    def keep(self, key: Hashable, value: T) -> T:
        """Within ``reading``, ``value`` is what ``once`` gives for ``key`` from now on."""
        kept: dict[Hashable, Any] | None = getattr(self._reading, "kept", None)
        if kept is not None:
            kept[key] = value
        return value

    project = _gated(catch_up)

    def fresh(
        self, read: Read, sessions: Iterable[str] | None = None, *, warn: bool = False
    ) -> list[RunReport]:
        """Bring what ``read`` needs (``NEEDS``) current, for ``sessions`` (default: all)."""
        return self.project(NEEDS[read], sessions=sessions, warn=warn)

    def written(self, write: Write, session: str, *, warn: bool = False) -> list[RunReport]:
        """Fold the projections that follow ``write`` (``FOLLOWS``) for ``session``."""
        self._wrote(session)
        return self.project(FOLLOWS[write], sessions=[session], warn=warn)

    def _wrote(self, session: str) -> None:
        """Within ``reading``, ``session`` was written to by this read: its log is looked at
        anew by the read's later catch-ups (``Glance``), which fold what it wrote."""
        kept: dict[Hashable, Any] | None = getattr(self._reading, "kept", None)
        glance = None if kept is None else kept.get(("glance",))
        if glance is not None:
            glance.identities.pop(session, None)
            if session not in (glance.sessions or ()):
                glance.sessions = None

    def register_sources(self) -> list[str]:
        """Append a ``source_indexed`` event for each document under ``sources/`` added,
        changed or removed since its last event; the paths (a damaged own log: a warning)."""
        from projections.sources import register_sources as register

        layout = self.workspace.layout
        try:
            records = register(self.log, layout.sources_dir, layout.sources_registry_path)
        except AirsspecError as exc:
            logger.warning("documents under sources/ not registered: %s", exc)
            return []
        return [record.path for record in records]

    def status(self) -> list[TierStatus]:
        """Items, size, lag and what is degraded, for every projection; for a scoped kernel,
        of the sessions it may read only, without the tier's items and bytes (every user's)."""
        from projections.status import log_heads, tier_status

        shown = self.gate.visible()
        heads = log_heads(self.log, shown)  # once for every tier
        matches: dict[Any, str | None] = {}  # each checkpoint against the log: once too
        projectors = self.workspace.projectors()
        return [tier_status(self.log, p, shown, heads, matches) for p in projectors]

    def embedder_problem(self) -> str | None:
        """Why the cold projection's embedder cannot run here (None when it can)."""
        from airsspec.errors import EmbedderUnavailable

        try:
            self.workspace.embedder().check()
        except EmbedderUnavailable as exc:
            return str(exc)
        return None

    # ------------------------------------------------------------------ system writes

    def system_append(
        self,
        session: str,
        events: list[dict[str, Any]],
        *,
        write: Write = "system",
        keep_secrets: bool = False,
    ) -> StoredRecords:
        """Append lifecycle or derived events (system types: the gate decided the write
        already), then fold what follows them (``FOLLOWS[write]``). ``keep_secrets``: stored
        exactly, unredacted (a captured API body, which must stay byte for byte). The records
        are made models when read (a caller that reads none builds none)."""
        self.gate.writable()
        log = self.log
        records = log.append_many(session, events, system=True, keep_secrets=keep_secrets)
        self.written(write, session)
        return records

    def asker(self, by: str | None = None) -> str:
        """Who asks for a change that records its asker (a forget, a learning's verdict or
        edit): ``by``, else this kernel's user, else the login name; a name
        (``eventlog.names``) whichever it is."""
        import getpass

        from eventlog.names import check_name

        if by is not None:
            return check_name(by, "by")
        if self.scope.user is not None:
            return self.scope.user
        return check_name(getpass.getuser(), "the login name (name who asks with --by)")

    def memory_event(self, event: dict[str, Any]) -> Record:
        """Append an event to the workspace's own log."""
        return self.system_append(MEMORY_SESSION, [event])[0]

    def policy(self, name: Literal["compact", "extract"]) -> Compactor | Extractor:
        """The process that appends derived events (``compact`` or ``extract``: each has
        ``due`` and ``run``), built once per open workspace."""
        policies = self._shared.policies
        if name not in policies:
            ws = self.workspace
            policies[name] = ws.compactor(self.summarizer) if name == "compact" else ws.extractor()
        made: Compactor | Extractor = policies[name]
        return made

    def run_policy(
        self, name: Literal["compact", "extract"], session: str, *, force: bool
    ) -> list[Record]:
        """Run ``policy(name)`` on ``session`` (a write the gate checks), then fold what
        follows it."""
        self.gate.guard_writes(session)  # derived events are written to the session
        records: list[Record] = self.policy(name).run(session, force=force)
        self.written(name, session)
        return records


__all__ = ["FOLLOWS", "NEEDS", "PROJECTIONS", "Kernel", "Read", "Write", "chosen"]
