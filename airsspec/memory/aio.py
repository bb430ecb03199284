"""``AsyncMemory``: ``Memory`` for asyncio code, every call written out.

Emitted from ``Memory`` and its services (``sessions``, ``learnings``, ``scopes``) by
``python -m airsspec.memory.aio_emit``; do not edit by hand (a test fails when this module falls
behind them). Each twin has the name and signature of its call and runs it in a worker thread
(``asyncio.to_thread``), so the event loop never blocks on the log or a projection; a call that
returns an iterator (``replay``) is read to a list there; one that returns a ``Memory``
(``scoped``) returns an ``AsyncMemory``. ``AsyncMemory.open(...)`` is awaited
(``memory = await AsyncMemory.open(p)``) or used directly with ``async with`` (closed at the
end).
"""

from __future__ import annotations

import asyncio
import builtins
from collections.abc import Callable, Generator
from typing import TYPE_CHECKING, Any, TypeVar

from airsspec.memory.core import Memory

if TYPE_CHECKING:
    import threading
    from collections.abc import Iterable, Mapping
    from datetime import datetime, timedelta
    from pathlib import Path

    from airsspec.forgetting import Forgotten
    from airsspec.kernel import Kernel
    from airsspec.kernel.gate import Gate
    from airsspec.memory.capture import Captures
    from airsspec.memory.files import Change, MemoryFiles
    from airsspec.memory.learnings import Learnings
    from airsspec.memory.records import Verified
    from airsspec.memory.sessions import Sessions
    from airsspec.settings import Settings
    from airsspec.workspace import Workspace
    from compactor.summarizers import Summarizer
    from eventlog.bound import Bound
    from eventlog.importers import ImportResult
    from eventlog.log import SessionInfo, StoredRecords
    from eventlog.schema import (
        CompactionRecord,
        Event,
        LearningEditedRecord,
        LearningFeedbackRecord,
        LearningRecord,
        PhaseChangedRecord,
        Record,
        RestoredRecord,
        SessionAssignedRecord,
        SessionEndedRecord,
        SessionStartedRecord,
        VisualizedRecord,
    )
    from eventlog.seal import Seal
    from projections.analytics import Analytics, QueryResult
    from projections.context import ContextFormat
    from projections.engine import Progress, RunReport
    from projections.hot import HotWindow
    from projections.learning_rules import Assessed, Assessment
    from projections.memory_files import FileVersion
    from projections.memory_tool import QueryMemoryInput
    from projections.scopes import Scope
    from projections.status import TierStatus
    from projections.tokens import TokenCounter
    from projections.visual_context import Page


class AsyncSessions:
    """``Memory.sessions`` for asyncio: every call of ``Sessions`` as a coroutine."""

    def __init__(self, target: Sessions) -> None:
        self._target = target

    async def assign(
        self, session: str, *, user: str, agent: str | None = None, project: str | None = None
    ) -> SessionAssignedRecord:
        """``Memory.sessions.assign`` as a coroutine (run in a worker thread)."""
        return await _run(
            lambda: self._target.assign(session, user=user, agent=agent, project=project)
        )

    async def end(
        self, session: str, *, status: str = "done", once: bool = False
    ) -> SessionEndedRecord | None:
        """``Memory.sessions.end`` as a coroutine (run in a worker thread)."""
        return await _run(lambda: self._target.end(session, status=status, once=once))

    async def info(self, session: str) -> dict[str, Any]:
        """``Memory.sessions.info`` as a coroutine (run in a worker thread)."""
        return await _run(lambda: self._target.info(session))

    async def list(self) -> list[SessionInfo]:
        """``Memory.sessions.list`` as a coroutine (run in a worker thread)."""
        return await _run(lambda: self._target.list())

    async def names(self) -> builtins.list[str]:
        """``Memory.sessions.names`` as a coroutine (run in a worker thread)."""
        return await _run(lambda: self._target.names())

    async def phase(self, session: str, phase: str) -> PhaseChangedRecord:
        """``Memory.sessions.phase`` as a coroutine (run in a worker thread)."""
        return await _run(lambda: self._target.phase(session, phase))

    async def start(
        self,
        session: str,
        *,
        task: str | None = None,
        phase: str | None = None,
        user: str | None = None,
        agent: str | None = None,
        project: str | None = None,
    ) -> SessionStartedRecord:
        """``Memory.sessions.start`` as a coroutine (run in a worker thread)."""
        return await _run(
            lambda: self._target.start(
                session, task=task, phase=phase, user=user, agent=agent, project=project
            )
        )


class AsyncLearnings:
    """``Memory.learnings`` for asyncio: every call of ``Learnings`` as a coroutine."""

    def __init__(self, target: Learnings) -> None:
        self._target = target

    async def add(
        self,
        text: str,
        *,
        kind: str = "preference",
        scope: str = "project",
        session: str | None = None,
    ) -> LearningRecord:
        """``Memory.learnings.add`` as a coroutine (run in a worker thread)."""
        return await _run(lambda: self._target.add(text, kind=kind, scope=scope, session=session))

    async def archive(
        self, older_than: str | timedelta, *, now: str | datetime | None = None
    ) -> builtins.list[str]:
        """``Memory.learnings.archive`` as a coroutine (run in a worker thread)."""
        return await _run(lambda: self._target.archive(older_than, now=now))

    async def confirm(
        self, learning_id: str, *, reason: str = "", by: str | None = None
    ) -> LearningFeedbackRecord:
        """``Memory.learnings.confirm`` as a coroutine (run in a worker thread)."""
        return await _run(lambda: self._target.confirm(learning_id, reason=reason, by=by))

    async def edit(
        self,
        learning_id: str,
        *,
        text: str | None = None,
        scope: str | None = None,
        reason: str = "",
        by: str | None = None,
    ) -> LearningEditedRecord:
        """``Memory.learnings.edit`` as a coroutine (run in a worker thread)."""
        return await _run(
            lambda: self._target.edit(learning_id, text=text, scope=scope, reason=reason, by=by)
        )

    async def extract(self, session: str, *, force: bool = False) -> builtins.list[Record]:
        """``Memory.learnings.extract`` as a coroutine (run in a worker thread)."""
        return await _run(lambda: self._target.extract(session, force=force))

    async def feedback(
        self, learning_id: str, verdict: str, *, reason: str = "", by: str | None = None
    ) -> LearningFeedbackRecord:
        """``Memory.learnings.feedback`` as a coroutine (run in a worker thread)."""
        return await _run(lambda: self._target.feedback(learning_id, verdict, reason=reason, by=by))

    async def gc(
        self, *, dry_run: bool = False, now: str | datetime | None = None
    ) -> dict[str, str]:
        """``Memory.learnings.gc`` as a coroutine (run in a worker thread)."""
        return await _run(lambda: self._target.gc(dry_run=dry_run, now=now))

    async def get(self, learning_id: str, *, reader: str | None = None) -> Assessed:
        """``Memory.learnings.get`` as a coroutine (run in a worker thread)."""
        return await _run(lambda: self._target.get(learning_id, reader=reader))

    async def health(self, *, now: str | datetime | None = None) -> dict[str, Any]:
        """``Memory.learnings.health`` as a coroutine (run in a worker thread)."""
        return await _run(lambda: self._target.health(now=now))

    async def list(
        self,
        *,
        reader: str | None = None,
        cue: str = "",
        now: str | datetime | None = None,
        scope: Scope | None = None,
    ) -> Assessment:
        """``Memory.learnings.list`` as a coroutine (run in a worker thread)."""
        return await _run(lambda: self._target.list(reader=reader, cue=cue, now=now, scope=scope))

    async def owners(self) -> dict[str, Scope]:
        """``Memory.learnings.owners`` as a coroutine (run in a worker thread)."""
        return await _run(lambda: self._target.owners())

    async def reextract(
        self, out: str | Path, *, summarizer: str | None = None, extractor: str | None = None
    ) -> dict[str, Any]:
        """``Memory.learnings.reextract`` as a coroutine (run in a worker thread)."""
        return await _run(
            lambda: self._target.reextract(out, summarizer=summarizer, extractor=extractor)
        )

    async def reject(
        self, learning_id: str, *, reason: str = "", by: str | None = None
    ) -> LearningFeedbackRecord:
        """``Memory.learnings.reject`` as a coroutine (run in a worker thread)."""
        return await _run(lambda: self._target.reject(learning_id, reason=reason, by=by))

    async def restore(self, learning_id: str) -> RestoredRecord:
        """``Memory.learnings.restore`` as a coroutine (run in a worker thread)."""
        return await _run(lambda: self._target.restore(learning_id))


class AsyncGate:
    """``Memory.scopes`` for asyncio: every call of ``Gate`` as a coroutine."""

    def __init__(self, target: Gate) -> None:
        self._target = target

    @property
    def admin(self) -> bool:
        """``Memory.scopes.admin``, read through."""
        return self._target.admin

    @property
    def scope(self) -> Scope:
        """``Memory.scopes.scope``, read through."""
        return self._target.scope

    async def guard(self, session: str, *, writing: bool = False) -> None:
        """``Memory.scopes.guard`` as a coroutine (run in a worker thread)."""
        return await _run(lambda: self._target.guard(session, writing=writing))

    async def guard_admin(self, doing: str) -> None:
        """``Memory.scopes.guard_admin`` as a coroutine (run in a worker thread)."""
        return await _run(lambda: self._target.guard_admin(doing))

    async def guard_learning(self, learning: Assessed, owner: Scope, doing: str) -> None:
        """``Memory.scopes.guard_learning`` as a coroutine (run in a worker thread)."""
        return await _run(lambda: self._target.guard_learning(learning, owner, doing))

    async def guard_writes(self, session: str) -> None:
        """``Memory.scopes.guard_writes`` as a coroutine (run in a worker thread)."""
        return await _run(lambda: self._target.guard_writes(session))

    async def memory_tree(self) -> str:
        """``Memory.scopes.memory_tree`` as a coroutine (run in a worker thread)."""
        return await _run(lambda: self._target.memory_tree())

    async def narrow(
        self, user: str | None = None, agent: str | None = None, project: str | None = None
    ) -> Scope:
        """``Memory.scopes.narrow`` as a coroutine (run in a worker thread)."""
        return await _run(lambda: self._target.narrow(user, agent, project))

    async def narrowed(self, scope: Scope | None) -> Scope:
        """``Memory.scopes.narrowed`` as a coroutine (run in a worker thread)."""
        return await _run(lambda: self._target.narrowed(scope))

    async def opening(self, session: str) -> list[dict[str, Any]]:
        """``Memory.scopes.opening`` as a coroutine (run in a worker thread)."""
        return await _run(lambda: self._target.opening(session))

    async def own_session(self, base: str) -> str:
        """``Memory.scopes.own_session`` as a coroutine (run in a worker thread)."""
        return await _run(lambda: self._target.own_session(base))

    async def owner(self, session: str) -> Scope:
        """``Memory.scopes.owner`` as a coroutine (run in a worker thread)."""
        return await _run(lambda: self._target.owner(session))

    async def owners(self) -> dict[str, Scope]:
        """``Memory.scopes.owners`` as a coroutine (run in a worker thread)."""
        return await _run(lambda: self._target.owners())

    async def reader(self, session: str) -> Scope:
        """``Memory.scopes.reader`` as a coroutine (run in a worker thread)."""
        return await _run(lambda: self._target.reader(session))

    async def reads_record(self, record: Record, owners: dict[str, Scope]) -> bool:
        """``Memory.scopes.reads_record`` as a coroutine (run in a worker thread)."""
        return await _run(lambda: self._target.reads_record(record, owners))

    async def reads_session(self, session: str) -> bool:
        """``Memory.scopes.reads_session`` as a coroutine (run in a worker thread)."""
        return await _run(lambda: self._target.reads_session(session))

    async def records_access(self) -> bool:
        """``Memory.scopes.records_access`` as a coroutine (run in a worker thread)."""
        return await _run(lambda: self._target.records_access())

    async def reports(self, reports: list[RunReport]) -> list[RunReport]:
        """``Memory.scopes.reports`` as a coroutine (run in a worker thread)."""
        return await _run(lambda: self._target.reports(reports))

    async def visible(self, scope: Scope | None = None) -> set[str] | None:
        """``Memory.scopes.visible`` as a coroutine (run in a worker thread)."""
        return await _run(lambda: self._target.visible(scope))

    async def writable(self) -> None:
        """``Memory.scopes.writable`` as a coroutine (run in a worker thread)."""
        return await _run(lambda: self._target.writable())

    async def writes(self, owner: Scope) -> bool:
        """``Memory.scopes.writes`` as a coroutine (run in a worker thread)."""
        return await _run(lambda: self._target.writes(owner))


class AsyncMemoryFiles:
    """``Memory.files`` for asyncio: every call of ``MemoryFiles`` as a coroutine."""

    def __init__(self, target: MemoryFiles) -> None:
        self._target = target

    async def clear(self, *, actor: str | None = None) -> Change:
        """``Memory.files.clear`` as a coroutine (run in a worker thread)."""
        return await _run(lambda: self._target.clear(actor=actor))

    async def create(self, path: str, file_text: str, *, actor: str | None = None) -> Change:
        """``Memory.files.create`` as a coroutine (run in a worker thread)."""
        return await _run(lambda: self._target.create(path, file_text, actor=actor))

    async def delete(
        self, path: str, *, content_sha256: str | None = None, actor: str | None = None
    ) -> Change:
        """``Memory.files.delete`` as a coroutine (run in a worker thread)."""
        return await _run(
            lambda: self._target.delete(path, content_sha256=content_sha256, actor=actor)
        )

    async def history(self, path: str) -> list[FileVersion]:
        """``Memory.files.history`` as a coroutine (run in a worker thread)."""
        return await _run(lambda: self._target.history(path))

    async def insert(
        self,
        path: str,
        insert_line: int,
        insert_text: str,
        *,
        content_sha256: str | None = None,
        actor: str | None = None,
    ) -> Change:
        """``Memory.files.insert`` as a coroutine (run in a worker thread)."""
        return await _run(
            lambda: self._target.insert(
                path, insert_line, insert_text, content_sha256=content_sha256, actor=actor
            )
        )

    async def read(self, path: str, *, as_of: int | str | datetime | None = None) -> FileVersion:
        """``Memory.files.read`` as a coroutine (run in a worker thread)."""
        return await _run(lambda: self._target.read(path, as_of=as_of))

    async def rename(self, old_path: str, new_path: str, *, actor: str | None = None) -> Change:
        """``Memory.files.rename`` as a coroutine (run in a worker thread)."""
        return await _run(lambda: self._target.rename(old_path, new_path, actor=actor))

    async def str_replace(
        self,
        path: str,
        old_str: str,
        new_str: str,
        *,
        content_sha256: str | None = None,
        actor: str | None = None,
    ) -> Change:
        """``Memory.files.str_replace`` as a coroutine (run in a worker thread)."""
        return await _run(
            lambda: self._target.str_replace(
                path, old_str, new_str, content_sha256=content_sha256, actor=actor
            )
        )

    async def tree(self, *, as_of: int | str | datetime | None = None) -> dict[str, FileVersion]:
        """``Memory.files.tree`` as a coroutine (run in a worker thread)."""
        return await _run(lambda: self._target.tree(as_of=as_of))

    async def view(
        self,
        path: str,
        view_range: list[int] | None = None,
        *,
        as_of: int | str | datetime | None = None,
    ) -> str:
        """``Memory.files.view`` as a coroutine (run in a worker thread)."""
        return await _run(lambda: self._target.view(path, view_range, as_of=as_of))

    async def write(
        self, path: str, text: str, *, content_sha256: str | None = None, actor: str | None = None
    ) -> Change:
        """``Memory.files.write`` as a coroutine (run in a worker thread)."""
        return await _run(
            lambda: self._target.write(path, text, content_sha256=content_sha256, actor=actor)
        )


class AsyncCaptures:
    """``Memory.captures`` for asyncio: every call of ``Captures`` as a coroutine."""

    def __init__(self, target: Captures) -> None:
        self._target = target

    async def conversation(self, session: str, *, upto: int | None = None) -> list[str]:
        """``Memory.captures.conversation`` as a coroutine (run in a worker thread)."""
        return await _run(lambda: self._target.conversation(session, upto=upto))

    async def record(
        self,
        session: str,
        request: bytes | str | dict[str, Any],
        response: bytes | str | dict[str, Any],
    ) -> list[Record]:
        """``Memory.captures.record`` as a coroutine (run in a worker thread)."""
        return await _run(lambda: self._target.record(session, request, response))

    async def request(self, session: str, n: int) -> bytes:
        """``Memory.captures.request`` as a coroutine (run in a worker thread)."""
        return await _run(lambda: self._target.request(session, n))


class AsyncMemory:
    """``Memory`` for asyncio code (see the module)."""

    def __init__(self, target: Memory) -> None:
        self._target = target
        self.sessions = AsyncSessions(target.sessions)
        self.learnings = AsyncLearnings(target.learnings)
        self.scopes = AsyncGate(target.scopes)
        self.files = AsyncMemoryFiles(target.files)
        self.captures = AsyncCaptures(target.captures)

    async def __aenter__(self) -> AsyncMemory:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    @property
    def log_dir(self) -> Path:
        """``Memory.log_dir``, read through."""
        return self._target.log_dir

    @property
    def read_only(self) -> bool:
        """``Memory.read_only``, read through."""
        return self._target.read_only

    @property
    def root(self) -> Path:
        """``Memory.root``, read through."""
        return self._target.root

    @property
    def scope(self) -> Scope:
        """``Memory.scope``, read through."""
        return self._target.scope

    @property
    def settings(self) -> Settings:
        """``Memory.settings``, read through."""
        return self._target.settings

    @property
    def sources_dir(self) -> Path:
        """``Memory.sources_dir``, read through."""
        return self._target.sources_dir

    @property
    def state_dir(self) -> Path:
        """``Memory.state_dir``, read through."""
        return self._target.state_dir

    @property
    def workspace(self) -> Workspace:
        """``Memory.workspace``, read through."""
        return self._target.workspace

    async def analytics(
        self, parquet_source: str | None = None, sql: str | None = None
    ) -> Analytics:
        """``Memory.analytics`` as a coroutine (run in a worker thread)."""
        return await _run(lambda: self._target.analytics(parquet_source, sql))

    async def append(
        self, session: str, event: Event | dict[str, Any], *, project: bool = True
    ) -> Record:
        """``Memory.append`` as a coroutine (run in a worker thread)."""
        return await _run(lambda: self._target.append(session, event, project=project))

    async def append_many(
        self, session: str, events: Iterable[Event | dict[str, Any]], *, project: bool = True
    ) -> StoredRecords:
        """``Memory.append_many`` as a coroutine (run in a worker thread)."""
        return await _run(lambda: self._target.append_many(session, events, project=project))

    async def check_session(self, session: str) -> str:
        """``Memory.check_session`` as a coroutine (run in a worker thread)."""
        return await _run(lambda: self._target.check_session(session))

    async def close(self) -> None:
        """``Memory.close`` as a coroutine (run in a worker thread)."""
        return await _run(lambda: self._target.close())

    async def compact(self, session: str, *, force: bool = False) -> CompactionRecord | None:
        """``Memory.compact`` as a coroutine (run in a worker thread)."""
        return await _run(lambda: self._target.compact(session, force=force))

    async def context(
        self,
        session: str,
        budget: int,
        *,
        query: str | None = None,
        format: ContextFormat = "text",
        images: bool = False,
        thoughts: bool = False,
    ) -> str | list[dict[str, Any]]:
        """``Memory.context`` as a coroutine (run in a worker thread)."""
        return await _run(
            lambda: self._target.context(
                session, budget, query=query, format=format, images=images, thoughts=thoughts
            )
        )

    async def context_parts(
        self,
        session: str,
        budget: int,
        *,
        query: str | None = None,
        format: ContextFormat = "text",
        images: bool = False,
        thoughts: bool = False,
    ) -> tuple[str | list[dict[str, Any]], Mapping[str, int]]:
        """``Memory.context_parts`` as a coroutine (run in a worker thread)."""
        return await _run(
            lambda: self._target.context_parts(
                session, budget, query=query, format=format, images=images, thoughts=thoughts
            )
        )

    @classmethod
    def discover(
        cls,
        start: str | Path | None = None,
        *,
        user: str | None = None,
        agent: str | None = None,
        project: str | None = None,
    ) -> _Opening:
        """``Memory.discover``, awaited or with ``async with`` (closed after)."""
        return _Opening(lambda: Memory.discover(start, user=user, agent=agent, project=project))

    async def embedder_problem(self) -> str | None:
        """``Memory.embedder_problem`` as a coroutine (run in a worker thread)."""
        return await _run(lambda: self._target.embedder_problem())

    async def export(self, session: str, fmt: str, target: str | Path | None = None) -> bytes:
        """``Memory.export`` as a coroutine (run in a worker thread)."""
        return await _run(lambda: self._target.export(session, fmt, target))

    async def export_parquet(self, target: str | Path) -> int:
        """``Memory.export_parquet`` as a coroutine (run in a worker thread)."""
        return await _run(lambda: self._target.export_parquet(target))

    async def facts(
        self,
        query: str | None = None,
        *,
        as_of: str | datetime | None = None,
        kinds: list[str] | None = None,
        history: bool = False,
        k: int | None = None,
    ) -> dict[str, Any]:
        """``Memory.facts`` as a coroutine (run in a worker thread)."""
        return await _run(
            lambda: self._target.facts(query, as_of=as_of, kinds=kinds, history=history, k=k)
        )

    @staticmethod
    async def fetch_models() -> Path:
        """``Memory.fetch_models`` as a coroutine (run in a worker thread)."""
        return await _run(lambda: Memory.fetch_models())

    @staticmethod
    async def find_config(start: str | Path) -> Path | None:
        """``Memory.find_config`` as a coroutine (run in a worker thread)."""
        return await _run(lambda: Memory.find_config(start))

    async def forget(
        self, *, user: str | None = None, session: str | None = None, by: str | None = None
    ) -> Forgotten:
        """``Memory.forget`` as a coroutine (run in a worker thread)."""
        return await _run(lambda: self._target.forget(user=user, session=session, by=by))

    async def has_session(self, session: str) -> bool:
        """``Memory.has_session`` as a coroutine (run in a worker thread)."""
        return await _run(lambda: self._target.has_session(session))

    async def history(self, session: str, budget: int) -> str:
        """``Memory.history`` as a coroutine (run in a worker thread)."""
        return await _run(lambda: self._target.history(session, budget))

    async def hot(self, session: str, *, fresh: bool = True) -> HotWindow:
        """``Memory.hot`` as a coroutine (run in a worker thread)."""
        return await _run(lambda: self._target.hot(session, fresh=fresh))

    async def import_transcripts(
        self,
        fmt: str,
        paths: Iterable[str | Path],
        *,
        prefix: str = "",
        keep_secrets: bool = False,
        live: bool = False,
    ) -> list[ImportResult]:
        """``Memory.import_transcripts`` as a coroutine (run in a worker thread)."""
        return await _run(
            lambda: self._target.import_transcripts(
                fmt, paths, prefix=prefix, keep_secrets=keep_secrets, live=live
            )
        )

    @staticmethod
    async def init(path: str | Path = ".") -> tuple[Path, bool]:
        """``Memory.init`` as a coroutine (run in a worker thread)."""
        return await _run(lambda: Memory.init(path))

    async def library(self) -> list[dict[str, Any]]:
        """``Memory.library`` as a coroutine (run in a worker thread)."""
        return await _run(lambda: self._target.library())

    async def library_file(self, number: int) -> tuple[dict[str, Any], str] | None:
        """``Memory.library_file`` as a coroutine (run in a worker thread)."""
        return await _run(lambda: self._target.library_file(number))

    async def load_context(
        self, project: str | None = None, *, session: str | None = None
    ) -> dict[str, Any]:
        """``Memory.load_context`` as a coroutine (run in a worker thread)."""
        return await _run(lambda: self._target.load_context(project, session=session))

    async def memory_block(self, session: str, budget: int, *, query: str | None = None) -> str:
        """``Memory.memory_block`` as a coroutine (run in a worker thread)."""
        return await _run(lambda: self._target.memory_block(session, budget, query=query))

    @staticmethod
    async def models_status() -> dict[str, str]:
        """``Memory.models_status`` as a coroutine (run in a worker thread)."""
        return await _run(lambda: Memory.models_status())

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
    ) -> _Opening:
        """``Memory.open``, awaited or with ``async with`` (closed after)."""
        return _Opening(
            lambda: Memory.open(
                path,
                create=create,
                config=config,
                user=user,
                agent=agent,
                project=project,
                keys=keys,
                summarizer=summarizer,
            )
        )

    @classmethod
    def open_workspace(
        cls,
        root: str | Path,
        *,
        user: str | None = None,
        agent: str | None = None,
        project: str | None = None,
    ) -> _Opening:
        """``Memory.open_workspace``, awaited or with ``async with`` (closed after)."""
        return _Opening(
            lambda: Memory.open_workspace(root, user=user, agent=agent, project=project)
        )

    @classmethod
    async def over(cls, kernel: Kernel) -> AsyncMemory:
        """``Memory.over`` as a coroutine (run in a worker thread)."""
        return AsyncMemory(await _run(lambda: Memory.over(kernel)))

    async def overview(self) -> dict[str, Any]:
        """``Memory.overview`` as a coroutine (run in a worker thread)."""
        return await _run(lambda: self._target.overview())

    async def pages(self, session: str | None = None) -> list[Page]:
        """``Memory.pages`` as a coroutine (run in a worker thread)."""
        return await _run(lambda: self._target.pages(session))

    async def project(
        self,
        projections: Iterable[str] | str = (
            "hot",
            "warm",
            "tokens",
            "learnings",
            "memory_files",
            "cold",
            "visual",
        ),
        *,
        sessions: Iterable[str] | None = None,
        jobs: int = 1,
        progress: Progress | None = None,
        warn: bool = True,
        cancel: threading.Event | None = None,
        deep: bool = False,
    ) -> list[RunReport]:
        """``Memory.project`` as a coroutine (run in a worker thread)."""
        return await _run(
            lambda: self._target.project(
                projections,
                sessions=sessions,
                jobs=jobs,
                progress=progress,
                warn=warn,
                cancel=cancel,
                deep=deep,
            )
        )

    async def query_memory(
        self,
        request: QueryMemoryInput | dict[str, Any],
        *,
        fresh: bool = True,
        scope: Scope | None = None,
    ) -> dict[str, Any]:
        """``Memory.query_memory`` as a coroutine (run in a worker thread)."""
        return await _run(lambda: self._target.query_memory(request, fresh=fresh, scope=scope))

    async def rebuild(
        self,
        projections: Iterable[str] | str = (
            "hot",
            "warm",
            "tokens",
            "learnings",
            "memory_files",
            "cold",
            "visual",
        ),
        *,
        as_of: Bound | int | str | datetime | None = None,
        out: str | Path | None = None,
        jobs: int = 1,
        progress: Progress | None = None,
        engine: str = "local",
        address: str | None = None,
    ) -> list[RunReport]:
        """``Memory.rebuild`` as a coroutine (run in a worker thread)."""
        return await _run(
            lambda: self._target.rebuild(
                projections,
                as_of=as_of,
                out=out,
                jobs=jobs,
                progress=progress,
                engine=engine,
                address=address,
            )
        )

    async def register_sources(self) -> list[str]:
        """``Memory.register_sources`` as a coroutine (run in a worker thread)."""
        return await _run(lambda: self._target.register_sources())

    async def replay(
        self,
        session: str,
        *,
        from_seq: int = 1,
        until: Bound | int | str | datetime | None = None,
        raw: bool = False,
        plain: bool = False,
    ) -> list[Any]:
        """``Memory.replay`` as a coroutine (run in a worker thread)."""
        return await _run(
            lambda: list(
                self._target.replay(session, from_seq=from_seq, until=until, raw=raw, plain=plain)
            )
        )

    async def report(self, name: str, *, parquet: str | None = None) -> QueryResult:
        """``Memory.report`` as a coroutine (run in a worker thread)."""
        return await _run(lambda: self._target.report(name, parquet=parquet))

    async def run_policies(self, session: str) -> dict[str, list[Record]]:
        """``Memory.run_policies`` as a coroutine (run in a worker thread)."""
        return await _run(lambda: self._target.run_policies(session))

    async def scoped(
        self,
        user: str | None = None,
        agent: str | None = None,
        project: str | None = None,
        *,
        read_only: bool = False,
    ) -> AsyncMemory:
        """``Memory.scoped`` as a coroutine (run in a worker thread)."""
        return AsyncMemory(
            await _run(lambda: self._target.scoped(user, agent, project, read_only=read_only))
        )

    async def seal(self, target: str | Path | None = None, *, key: bytes | None = None) -> Seal:
        """``Memory.seal`` as a coroutine (run in a worker thread)."""
        return await _run(lambda: self._target.seal(target, key=key))

    async def search(
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
        """``Memory.search`` as a coroutine (run in a worker thread)."""
        return await _run(
            lambda: self._target.search(
                query,
                k=k,
                session=session,
                kinds=kinds,
                since=since,
                until=until,
                fresh=fresh,
                scope=scope,
            )
        )

    async def search_now(
        self,
        query: str,
        *,
        k: int = 10,
        session: str | None = None,
        kinds: Iterable[str] | None = None,
        since: str | None = None,
        until: str | None = None,
    ) -> dict[str, Any]:
        """``Memory.search_now`` as a coroutine (run in a worker thread)."""
        return await _run(
            lambda: self._target.search_now(
                query, k=k, session=session, kinds=kinds, since=since, until=until
            )
        )

    async def sql(self, query: str, *, parquet: str | None = None) -> tuple[QueryResult, list[str]]:
        """``Memory.sql`` as a coroutine (run in a worker thread)."""
        return await _run(lambda: self._target.sql(query, parquet=parquet))

    async def status(self) -> list[TierStatus]:
        """``Memory.status`` as a coroutine (run in a worker thread)."""
        return await _run(lambda: self._target.status())

    async def token_counter(self) -> TokenCounter:
        """``Memory.token_counter`` as a coroutine (run in a worker thread)."""
        return await _run(lambda: self._target.token_counter())

    async def verify(
        self,
        sessions: Iterable[str] | None = None,
        *,
        against: str | Path | Seal | None = None,
        key: bytes | None = None,
        projections: bool = False,
    ) -> Verified:
        """``Memory.verify`` as a coroutine (run in a worker thread)."""
        return await _run(
            lambda: self._target.verify(sessions, against=against, key=key, projections=projections)
        )

    async def visualize(
        self, sessions: Iterable[str] | None = None, *, force: bool = False
    ) -> list[VisualizedRecord]:
        """``Memory.visualize`` as a coroutine (run in a worker thread)."""
        return await _run(lambda: self._target.visualize(sessions, force=force))

    async def warm_up(self) -> None:
        """``Memory.warm_up`` as a coroutine (run in a worker thread)."""
        return await _run(lambda: self._target.warm_up())


_T = TypeVar("_T")


async def _run(call: Callable[[], _T]) -> _T:
    return await asyncio.to_thread(call)


class _Opening:
    """A memory being opened: awaited, the ``AsyncMemory``; with ``async with``, the
    ``AsyncMemory``, closed at the end of the block."""

    def __init__(self, opener: Callable[[], Memory]) -> None:
        self._opener = opener
        self._opened: AsyncMemory | None = None

    async def _open(self) -> AsyncMemory:
        return AsyncMemory(await _run(self._opener))

    def __await__(self) -> Generator[Any, None, AsyncMemory]:
        return self._open().__await__()

    async def __aenter__(self) -> AsyncMemory:
        self._opened = await self._open()
        return self._opened

    async def __aexit__(self, *exc: object) -> None:
        if self._opened is not None:
            await self._opened.close()
