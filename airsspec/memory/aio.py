"""``AsyncMemory``: ``Memory`` for asyncio code, generated from it so it cannot fall behind.

Every public method of ``Memory`` and of its services (``sessions``, ``learnings``,
``scopes``) has an async twin of the same name and signature, built here by walking the
classes: the twin runs the call in a worker thread (``asyncio.to_thread``), so the event loop
never blocks on the log or a projection. A call that returns an iterator (``replay``) is read
to the end in that thread and returns a list; a call that returns a ``Memory`` (``open``,
``scoped``...) returns an ``AsyncMemory`` over it. Properties (``root``, ``scope``...) read
through. ``tests/airsspec/test_async_memory.py`` checks that no public call is missing.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable, Iterator
from functools import partial
from typing import Any

from airsspec.memory.core import Memory
from airsspec.memory.learnings import Learnings
from airsspec.memory.scopes import Scopes
from airsspec.memory.sessions import Sessions

SERVICES: dict[str, type] = {"sessions": Sessions, "learnings": Learnings, "scopes": Scopes}
"""The services of ``Memory``, by attribute name."""


def public_calls(cls: type) -> dict[str, Any]:
    """The public methods of ``cls`` (plain, class and static), as stored on the class."""
    found: dict[str, Any] = {}
    for klass in reversed(cls.__mro__[:-1]):  # object's own methods are not calls
        for name, value in vars(klass).items():
            if name.startswith("_"):
                continue
            if isinstance(value, (classmethod, staticmethod)) or inspect.isfunction(value):
                found[name] = value
    return found


def _settled(result: Any) -> Any:
    """``result`` as a coroutine may hand it back: an iterator read to the end (the thread
    that made it reads it), a ``Memory`` wrapped as an ``AsyncMemory``."""
    if isinstance(result, Memory):
        return AsyncMemory(result)
    if isinstance(result, Iterator):
        return list(result)
    return result


async def _run(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    return await asyncio.to_thread(lambda: _settled(partial(fn, *args, **kwargs)()))


def _twin(owner: str, name: str, stored: Any) -> Any:
    """The async twin of ``owner.name`` (``stored``: as it is stored on the class)."""
    fn = stored.__func__ if isinstance(stored, (classmethod, staticmethod)) else stored
    doc = f"``{owner}.{name}`` as a coroutine (run in a worker thread)."
    if isinstance(stored, classmethod):

        async def of_class(cls: type, *args: Any, **kwargs: Any) -> Any:
            return await _run(getattr(Memory, name), *args, **kwargs)

        made: Any = of_class
    elif isinstance(stored, staticmethod):

        async def of_nothing(*args: Any, **kwargs: Any) -> Any:
            return await _run(getattr(Memory, name), *args, **kwargs)

        made = of_nothing
    else:

        async def of_instance(self: Any, *args: Any, **kwargs: Any) -> Any:
            return await _run(getattr(self._target, name), *args, **kwargs)

        made = of_instance
    made.__name__ = made.__qualname__ = name
    made.__doc__ = doc
    made.__signature__ = inspect.signature(fn)
    made.__wrapped_call__ = fn  # what it mirrors (the signature test reads it)
    if isinstance(stored, classmethod):
        return classmethod(made)
    if isinstance(stored, staticmethod):
        return staticmethod(made)
    return made


def _passthrough(name: str) -> property:
    return property(
        lambda self: getattr(self._target, name), doc=f"``Memory.{name}``, read through."
    )


def _async_class(cls: type, doc: str, extra: dict[str, Any] | None = None) -> type:
    namespace: dict[str, Any] = {"__doc__": doc, "__module__": __name__}
    for name, stored in public_calls(cls).items():
        namespace[name] = _twin(cls.__name__, name, stored)
    for klass in cls.__mro__:
        for name, value in vars(klass).items():
            if isinstance(value, property) and not name.startswith("_"):
                namespace.setdefault(name, _passthrough(name))
    namespace.update(extra or {})
    return type(f"Async{cls.__name__}", (), namespace)


def _service_init(self: Any, target: Any) -> None:
    self._target = target


ASYNC_SERVICES: dict[str, type] = {
    attr: _async_class(
        cls,
        f"``Memory.{attr}`` for asyncio: every call of ``{cls.__name__}`` as a coroutine.",
        {"__init__": _service_init},
    )
    for attr, cls in SERVICES.items()
}


def _memory_init(self: Any, memory: Memory) -> None:
    """Wrap an open ``Memory``."""
    self._target = memory
    self.memory = memory
    for attr, service in ASYNC_SERVICES.items():
        setattr(self, attr, service(getattr(memory, attr)))


async def _aenter(self: Any) -> Any:
    return self


async def _aexit(self: Any, *exc: object) -> None:
    await self.close()


def _scope(self: Any) -> Any:
    return self._target.scope


AsyncMemory: type = _async_class(
    Memory,
    "``Memory`` for asyncio code: every call as a coroutine run in a worker thread (see the "
    "module); ``async with await AsyncMemory.open(...) as memory`` closes it at the end.",
    {
        "__init__": _memory_init,
        "__aenter__": _aenter,
        "__aexit__": _aexit,
        "scope": property(_scope, doc="``Memory.scope``, read through."),
    },
)
