"""``AsyncMemory``: ``Memory`` for asyncio code, every call a coroutine.

Each twin (``AsyncMemory``, ``AsyncLearnings``...) is a ``Twin`` of its target, declared once:
every public call of the target it does not state itself is made from the call by ``awaited``
when the class is, which keeps the call's name, docstring and parameters (``ParamSpec``; for
mypy, the project's plugin ``airsspec.mypy_plugin`` gives the made calls the same types, so a
type checker checks an awaited call as it checks the call itself) and runs it in a worker
thread (``asyncio.to_thread``), so the event loop never blocks on the log or a projection. The
special cases are stated: a call that returns an iterator (``replay``) is read to a list there;
one that returns a ``Memory`` (``scoped``, ``over``) returns an ``AsyncMemory``; the class and
static methods (the openers). ``AsyncMemory.open(...)`` is awaited
(``memory = await AsyncMemory.open(p)``) or used directly with ``async with`` (closed at the
end). A test fails when a public call of ``Memory`` or of its services has no twin.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable, Coroutine, Generator, Iterable
from typing import (
    TYPE_CHECKING,
    Any,
    Concatenate,
    Generic,
    ParamSpec,
    TypeVar,
    get_args,
    get_origin,
    overload,
)

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


class Twin(Generic[T]):
    """The async twin of a ``T`` (``class AsyncLearnings(Twin[Learnings])``): every public
    call of ``T`` that the twin's class does not state itself is ``awaited`` on the target,
    made when the class is (``__init_subclass__``). A class or static method of ``T`` is the
    twin's to state (a twin without one is refused). mypy sees the made calls through the
    project's plugin (``airsspec.mypy_plugin``): each with ``T``'s parameters, its result a
    coroutine's."""

    _target: T

    def __init__(self, target: T) -> None:
        self._target = target

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        bases = [b for b in vars(cls).get("__orig_bases__", ()) if get_origin(b) is Twin]
        if not bases:  # a twin's subclass: its calls are made already
            return
        (target,) = get_args(bases[0])
        for name, call in _public_calls(target).items():
            if hasattr(cls, name):
                continue
            if not inspect.isfunction(call):
                raise TypeError(f"{cls.__name__} must state {target.__name__}.{name} itself")
            setattr(cls, name, awaited(call))

    if TYPE_CHECKING:  # the made calls: their types are the plugin's

        def __getattr__(self, name: str) -> Any: ...


def _public_calls(cls: type) -> dict[str, Any]:
    """The public calls of ``cls`` (plain, class and static methods), as stored on it."""
    found: dict[str, Any] = {}
    for klass in reversed(cls.__mro__[:-1]):  # object's own methods are not calls
        for name, value in vars(klass).items():
            callable_ = inspect.isfunction(value) or isinstance(value, classmethod | staticmethod)
            if callable_ and not name.startswith("_"):
                found[name] = value
    return found


class AsyncSessions(Twin[Sessions]):
    """``Memory.sessions`` for asyncio: every call of ``Sessions`` as a coroutine."""


class AsyncLearnings(Twin[Learnings]):
    """``Memory.learnings`` for asyncio: every call of ``Learnings`` as a coroutine."""


class AsyncGate(Twin[Gate]):
    """``Memory.scopes`` for asyncio: every call of ``Gate`` as a coroutine."""

    admin = _Through(Gate.admin)
    scope = _Through(Gate.scope)


class AsyncMemoryFiles(Twin[MemoryFiles]):
    """``Memory.files`` for asyncio: every call of ``MemoryFiles`` as a coroutine."""


class AsyncCaptures(Twin[Captures]):
    """``Memory.captures`` for asyncio: every call of ``Captures`` as a coroutine."""


class AsyncMemory(Twin[Memory]):
    """``Memory`` for asyncio code (see the module)."""

    def __init__(self, target: Memory) -> None:
        super().__init__(target)
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
    trust = staticmethod(_static(Memory.trust, _as_is))
    trusted = staticmethod(_static(Memory.trusted, _as_is))
    revoke_trust = staticmethod(_static(Memory.revoke_trust, _as_is))
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
    scoped = awaited_as(Memory.scoped, _async)
    replay = awaited_as(Memory.replay, _list)


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


__all__ = ["AsyncMemory", "Twin", "awaited", "awaited_as"]
