"""``AsyncMemory``: ``Memory`` for asyncio code, every call a coroutine.

Each twin is made from its call (``Memory.append``, ``Memory.sessions.start``...) by
``awaited``, which keeps the call's name, docstring and parameters (``ParamSpec``: a type
checker checks an awaited call as it checks the call itself) and runs it in a worker thread
(``asyncio.to_thread``), so the event loop never blocks on the log or a projection. A call that
returns an iterator (``replay``) is read to a list there; one that returns a ``Memory``
(``scoped``, ``over``) returns an ``AsyncMemory``. ``AsyncMemory.open(...)`` is awaited
(``memory = await AsyncMemory.open(p)``) or used directly with ``async with`` (closed at the
end). Every public call of ``Memory`` and of its services is listed here by name (a test
fails when one has no twin).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Generator, Iterable
from typing import Any, Concatenate, Generic, ParamSpec, TypeVar, overload

from airsspec.kernel.gate import Gate
from airsspec.memory.capture import Captures
from airsspec.memory.core import Memory
from airsspec.memory.delegation import like
from airsspec.memory.files import MemoryFiles
from airsspec.memory.learnings import Learnings
from airsspec.memory.sessions import Sessions

P = ParamSpec("P")
R = TypeVar("R")
S = TypeVar("S")
T = TypeVar("T")


def _as_is(result: T) -> T:
    return result


def _shown(then: Callable[..., Any]) -> Any:
    """The result a twin shows: the call's (None), or what ``then`` makes of it."""
    return None if then is _as_is else then.__annotations__["return"]


def awaited_as(
    call: Callable[Concatenate[S, P], R], then: Callable[[R], T]
) -> Callable[Concatenate[Any, P], Coroutine[Any, Any, T]]:
    """The coroutine method that runs ``call`` on the twin's target in a worker thread, and
    ``then`` on its result there."""

    async def method(self: Any, *args: P.args, **kwargs: P.kwargs) -> T:
        return await asyncio.to_thread(lambda: then(call(self._target, *args, **kwargs)))

    return like(method, call, returns=_shown(then))


def awaited(
    call: Callable[Concatenate[S, P], R],
) -> Callable[Concatenate[Any, P], Coroutine[Any, Any, R]]:
    """``awaited_as`` with the call's own result."""
    return awaited_as(call, _as_is)


def _static(call: Callable[P, R], then: Callable[[R], T]) -> Callable[P, Coroutine[Any, Any, T]]:
    """The coroutine function (a ``staticmethod``'s) that runs ``call`` in a worker thread."""

    async def function(*args: P.args, **kwargs: P.kwargs) -> T:
        return await asyncio.to_thread(lambda: then(call(*args, **kwargs)))

    return like(function, call, bound=False, returns=_shown(then))


def _opener(call: Callable[P, Memory]) -> Callable[P, _Opening]:
    """The opener (a ``staticmethod``'s) that gives an ``_Opening`` of what ``call`` opens."""

    def function(*args: P.args, **kwargs: P.kwargs) -> _Opening:
        return _Opening(lambda: call(*args, **kwargs))

    return like(function, call, bound=False, returns="_Opening")


class _Through(Generic[T]):
    """A property of the target, read through (its docstring)."""

    def __init__(self, prop: Callable[[Any], T]) -> None:
        self.__doc__ = prop.__doc__

    def __set_name__(self, owner: type, name: str) -> None:
        self._name = name

    @overload
    def __get__(self, twin: None, owner: type | None = None) -> _Through[T]: ...

    @overload
    def __get__(self, twin: object, owner: type | None = None) -> T: ...

    def __get__(self, twin: Any, owner: type | None = None) -> _Through[T] | T:
        if twin is None:  # on the class: the descriptor, for help() and inspect
            return self
        value: T = getattr(twin._target, self._name)
        return value

    def __set__(self, twin: object, value: object) -> None:
        raise AttributeError(f"read-only: {self._name} is read through")


def _list(items: Iterable[T]) -> list[T]:
    return list(items)


def _async(memory: Memory) -> AsyncMemory:
    return AsyncMemory(memory)


class AsyncSessions:
    """``Memory.sessions`` for asyncio: every call of ``Sessions`` as a coroutine."""

    def __init__(self, target: Sessions) -> None:
        self._target = target

    assign = awaited(Sessions.assign)
    end = awaited(Sessions.end)
    info = awaited(Sessions.info)
    list = awaited(Sessions.list)
    names = awaited(Sessions.names)
    phase = awaited(Sessions.phase)
    start = awaited(Sessions.start)


class AsyncLearnings:
    """``Memory.learnings`` for asyncio: every call of ``Learnings`` as a coroutine."""

    def __init__(self, target: Learnings) -> None:
        self._target = target

    add = awaited(Learnings.add)
    archive = awaited(Learnings.archive)
    confirm = awaited(Learnings.confirm)
    edit = awaited(Learnings.edit)
    extract = awaited(Learnings.extract)
    feedback = awaited(Learnings.feedback)
    gc = awaited(Learnings.gc)
    get = awaited(Learnings.get)
    health = awaited(Learnings.health)
    list = awaited(Learnings.list)
    owners = awaited(Learnings.owners)
    reextract = awaited(Learnings.reextract)
    reject = awaited(Learnings.reject)
    restore = awaited(Learnings.restore)


class AsyncGate:
    """``Memory.scopes`` for asyncio: every call of ``Gate`` as a coroutine."""

    def __init__(self, target: Gate) -> None:
        self._target = target

    admin = _Through(Gate.admin)
    scope = _Through(Gate.scope)
    guard = awaited(Gate.guard)
    guard_admin = awaited(Gate.guard_admin)
    guard_learning = awaited(Gate.guard_learning)
    guard_writes = awaited(Gate.guard_writes)
    memory_tree = awaited(Gate.memory_tree)
    narrow = awaited(Gate.narrow)
    narrowed = awaited(Gate.narrowed)
    opening = awaited(Gate.opening)
    own_session = awaited(Gate.own_session)
    owner = awaited(Gate.owner)
    owners = awaited(Gate.owners)
    reader = awaited(Gate.reader)
    reads_record = awaited(Gate.reads_record)
    reads_session = awaited(Gate.reads_session)
    records_access = awaited(Gate.records_access)
    reports = awaited(Gate.reports)
    visible = awaited(Gate.visible)
    writable = awaited(Gate.writable)
    writes = awaited(Gate.writes)


class AsyncMemoryFiles:
    """``Memory.files`` for asyncio: every call of ``MemoryFiles`` as a coroutine."""

    def __init__(self, target: MemoryFiles) -> None:
        self._target = target

    clear = awaited(MemoryFiles.clear)
    create = awaited(MemoryFiles.create)
    delete = awaited(MemoryFiles.delete)
    history = awaited(MemoryFiles.history)
    insert = awaited(MemoryFiles.insert)
    read = awaited(MemoryFiles.read)
    rename = awaited(MemoryFiles.rename)
    str_replace = awaited(MemoryFiles.str_replace)
    tree = awaited(MemoryFiles.tree)
    view = awaited(MemoryFiles.view)
    write = awaited(MemoryFiles.write)


class AsyncCaptures:
    """``Memory.captures`` for asyncio: every call of ``Captures`` as a coroutine."""

    def __init__(self, target: Captures) -> None:
        self._target = target

    conversation = awaited(Captures.conversation)
    record = awaited(Captures.record)
    request = awaited(Captures.request)


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

    # open: awaited, or with ``async with``
    open = staticmethod(_opener(Memory.open))
    open_workspace = staticmethod(_opener(Memory.open_workspace))
    discover = staticmethod(_opener(Memory.discover))
    over = staticmethod(_static(Memory.over, _async))
    find_config = staticmethod(_static(Memory.find_config, _as_is))
    init = staticmethod(_static(Memory.init, _as_is))
    models_status = staticmethod(_static(Memory.models_status, _as_is))
    fetch_models = staticmethod(_static(Memory.fetch_models, _as_is))
    close = awaited(Memory.close)

    workspace = _Through(Memory.workspace)
    scope = _Through(Memory.scope)
    read_only = _Through(Memory.read_only)
    root = Memory.root  # the workspace's parts, read through ``workspace`` as Memory's are
    settings = Memory.settings
    state_dir = Memory.state_dir
    sources_dir = Memory.sources_dir
    log_dir = Memory.log_dir
    token_counter = awaited(Memory.token_counter)
    scoped = awaited_as(Memory.scoped, _async)

    # the log
    append = awaited(Memory.append)
    append_many = awaited(Memory.append_many)
    has_session = awaited(Memory.has_session)
    check_session = awaited(Memory.check_session)
    replay = awaited_as(Memory.replay, _list)
    verify = awaited(Memory.verify)
    seal = awaited(Memory.seal)
    import_transcripts = awaited(Memory.import_transcripts)
    export = awaited(Memory.export)
    export_parquet = awaited(Memory.export_parquet)
    register_sources = awaited(Memory.register_sources)

    # projections
    project = awaited(Memory.project)
    rebuild = awaited(Memory.rebuild)
    status = awaited(Memory.status)
    overview = awaited(Memory.overview)
    embedder_problem = awaited(Memory.embedder_problem)
    warm_up = awaited(Memory.warm_up)
    hot = awaited(Memory.hot)
    history = awaited(Memory.history)
    library = awaited(Memory.library)
    library_file = awaited(Memory.library_file)
    context = awaited(Memory.context)
    context_parts = awaited(Memory.context_parts)
    memory_block = awaited(Memory.memory_block)
    facts = awaited(Memory.facts)

    # search
    search = awaited(Memory.search)
    query_memory = awaited(Memory.query_memory)
    search_now = awaited(Memory.search_now)

    # processes
    run_policies = awaited(Memory.run_policies)
    compact = awaited(Memory.compact)
    visualize = awaited(Memory.visualize)
    pages = awaited(Memory.pages)
    load_context = awaited(Memory.load_context)
    forget = awaited(Memory.forget)
    analytics = awaited(Memory.analytics)
    sql = awaited(Memory.sql)
    report = awaited(Memory.report)


class _Opening:
    """A memory being opened: awaited, the ``AsyncMemory``; with ``async with``, the
    ``AsyncMemory``, closed at the end of the block."""

    def __init__(self, opener: Callable[[], Memory]) -> None:
        self._opener = opener
        self._opened: AsyncMemory | None = None

    async def _open(self) -> AsyncMemory:
        return AsyncMemory(await asyncio.to_thread(self._opener))

    def __await__(self) -> Generator[Any, None, AsyncMemory]:
        return self._open().__await__()

    async def __aenter__(self) -> AsyncMemory:
        self._opened = await self._open()
        return self._opened

    async def __aexit__(self, *exc: object) -> None:
        if self._opened is not None:
            await self._opened.close()


__all__ = ["AsyncMemory", "awaited", "awaited_as"]
