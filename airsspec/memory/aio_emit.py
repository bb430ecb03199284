"""Writes ``airsspec/memory/aio.py``: ``AsyncMemory``, every call of ``Memory`` and of its
services as a coroutine, written out so a type checker sees each name and signature.

    python -m airsspec.memory.aio_emit          # write the module
    python -m airsspec.memory.aio_emit --check  # exit 1 when it differs from what is written

A test runs ``--check``: adding or changing a call of ``Memory`` without emitting again fails
with this command to run. Each twin runs the call in a worker thread (``asyncio.to_thread``);
one returning an iterator returns it read to a list, one returning a ``Memory`` returns an
``AsyncMemory`` over it.
"""

from __future__ import annotations

import ast
import builtins
import inspect
import re
import sys
from pathlib import Path
from typing import Any

from airsspec.emitting import write_or_check
from airsspec.kernel.gate import Gate
from airsspec.memory.capture import Captures
from airsspec.memory.core import Memory
from airsspec.memory.files import MemoryFiles
from airsspec.memory.learnings import Learnings
from airsspec.memory.sessions import Sessions

SERVICES: dict[str, type] = {
    "sessions": Sessions,
    "learnings": Learnings,
    "scopes": Gate,
    "files": MemoryFiles,
    "captures": Captures,
}
"""The services of ``Memory``, by attribute name."""

TARGET = Path(__file__).with_name("aio.py")
_OPENERS = ("open", "open_workspace", "discover")  # awaited or used with ``async with``
_KNOWN = {"Memory", "AsyncMemory", "Any", "Callable", "builtins"}


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


def _properties(cls: type) -> dict[str, property]:
    return {
        name: value
        for klass in reversed(cls.__mro__[:-1])
        for name, value in vars(klass).items()
        if isinstance(value, property) and not name.startswith("_")
    }


def _imports() -> dict[str, str]:
    """Every name the modules of ``Memory`` and its services import or define, with the
    module it comes from (annotations are written with these names)."""
    found: dict[str, str] = {}
    for cls in (Memory, *SERVICES.values()):
        module = sys.modules[cls.__module__]
        tree = ast.parse(Path(inspect.getfile(module)).read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                for alias in node.names:
                    found.setdefault(alias.asname or alias.name, f"{node.module}:{alias.name}")
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    found.setdefault(alias.asname or alias.name, f"{alias.name}:")
            elif isinstance(node, (ast.ClassDef, ast.FunctionDef)) and node in tree.body:
                found.setdefault(node.name, f"{cls.__module__}:{node.name}")
    return found


def _annotation(text: Any) -> str:
    return "Any" if text is inspect.Parameter.empty else str(text)


def _returned(text: str) -> tuple[str, str]:
    """(the twin's return annotation, how the call's result is wrapped: "", "list", "memory")."""
    if text == "Memory":
        return "AsyncMemory", "memory"
    if text.startswith("Iterator["):
        return f"list[{text[len('Iterator[') : -1]}]", "list"
    return text, ""


def _params(signature: inspect.Signature, skip_first: bool) -> tuple[str, str]:
    """(the parameter list as written, the call's arguments)."""
    written, passed, star = [], [], False
    params = list(signature.parameters.values())[1 if skip_first else 0 :]
    for p in params:
        text = f"{p.name}: {_annotation(p.annotation)}"
        if p.default is not inspect.Parameter.empty:
            text += f" = {p.default!r}"
        if p.kind is p.KEYWORD_ONLY and not star:
            written.append("*")
            star = True
        if p.kind is p.VAR_POSITIONAL:
            text, star = f"*{p.name}: {_annotation(p.annotation)}", True
        if p.kind is p.VAR_KEYWORD:
            text = f"**{p.name}: {_annotation(p.annotation)}"
        written.append(text)
        if p.kind is p.VAR_POSITIONAL:
            passed.append(f"*{p.name}")
        elif p.kind is p.VAR_KEYWORD:
            passed.append(f"**{p.name}")
        elif p.kind is p.KEYWORD_ONLY:
            passed.append(f"{p.name}={p.name}")
        else:
            passed.append(p.name)
    return ", ".join(written), ", ".join(passed)


def _method(owner: str, name: str, stored: Any, used: set[str]) -> str:
    fn = stored.__func__ if isinstance(stored, (classmethod, staticmethod)) else stored
    signature = inspect.signature(fn)
    returns, wrap = _returned(_annotation(signature.return_annotation))
    used.update(re.findall(r"[A-Za-z_][A-Za-z_0-9]*", returns))
    for p in signature.parameters.values():
        used.update(re.findall(r"[A-Za-z_][A-Za-z_0-9]*", _annotation(p.annotation)))
    is_static = isinstance(stored, staticmethod)
    params, args = _params(signature, skip_first=not is_static)
    doc = f'"""``{owner}.{name}`` as a coroutine (run in a worker thread)."""'
    if isinstance(stored, classmethod) and name in _OPENERS:
        head = f"    @classmethod\n    def {name}(cls, {params}) -> _Opening:\n"
        doc = f'"""``{owner}.{name}``, awaited or with ``async with`` (closed after)."""'
        return f"{head}        {doc}\n        return _Opening(lambda: Memory.{name}({args}))\n"
    if isinstance(stored, classmethod):
        head, target = f"    @classmethod\n    async def {name}(cls, {params})", f"Memory.{name}"
    elif is_static:
        head, target = f"    @staticmethod\n    async def {name}({params})", f"Memory.{name}"
    else:
        self_params = f"self, {params}" if params else "self"
        head, target = f"    async def {name}({self_params})", f"self._target.{name}"
    call = f"{target}({args})"
    if wrap == "list":
        body = f"return await _run(lambda: list({call}))"
    elif wrap == "memory":
        body = f"return AsyncMemory(await _run(lambda: {call}))"
    else:
        body = f"return await _run(lambda: {call})"
    return f"{head} -> {returns}:\n        {doc}\n        {body}\n"


def _property(owner: str, name: str, prop: property, used: set[str]) -> str:
    returns = _annotation(inspect.signature(prop.fget).return_annotation)  # type: ignore[arg-type]
    used.update(re.findall(r"[A-Za-z_][A-Za-z_0-9]*", returns))
    return (
        f"    @property\n    def {name}(self) -> {returns}:\n"
        f'        """``{owner}.{name}``, read through."""\n'
        f"        return self._target.{name}\n"
    )


def _class(cls: type, name: str, owner: str, doc: str, used: set[str], extra: str = "") -> str:
    init = (
        f"    def __init__(self, target: {cls.__name__}) -> None:\n        self._target = target\n"
    )
    used.add(cls.__name__)
    parts = [f'class {name}:\n    """{doc}"""\n\n{init}{extra}']
    for attr, prop in sorted(_properties(cls).items()):
        parts.append(_property(owner, attr, prop, used))
    for attr, stored in sorted(public_calls(cls).items()):
        parts.append(_method(owner, attr, stored, used))
    return "\n".join(parts)


HEADER = '''"""``AsyncMemory``: ``Memory`` for asyncio code, every call written out.

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

'''

FOOTER = '''

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
'''


def emit() -> str:
    """The text of ``airsspec/memory/aio.py``."""
    used: set[str] = set()
    services = []
    attrs = []
    for attr, cls in SERVICES.items():
        name = f"Async{cls.__name__}"
        doc = f"``Memory.{attr}`` for asyncio: every call of ``{cls.__name__}`` as a coroutine."
        services.append(_class(cls, name, f"Memory.{attr}", doc, used))
        attrs.append(f"        self.{attr} = {name}(target.{attr})\n")
    extra = (
        "".join(attrs)
        + "\n    async def __aenter__(self) -> AsyncMemory:\n        return self\n\n"
        + "    async def __aexit__(self, *exc: object) -> None:\n        await self.close()\n\n"
    )
    memory = _class(
        Memory,
        "AsyncMemory",
        "Memory",
        "``Memory`` for asyncio code (see the module).",
        used,
        extra,
    )
    known = _imports()
    lines = []
    for name in sorted(used - _KNOWN - set(dir(builtins)) - {"None"}):
        module, _, attr = known[name].partition(":")
        lines.append(f"    from {module} import {attr}" if attr else f"    import {module}")
    typing = "if TYPE_CHECKING:\n" + "\n".join(sorted(set(lines))) + "\n\n\n"
    return HEADER + typing + "\n\n".join(services) + "\n\n" + memory + FOOTER


def main(argv: list[str] | None = None) -> int:
    """Write the module, or with ``--check`` say whether it is current (exit 1 if not)."""
    return write_or_check(TARGET, emit(), argv, "python -m airsspec.memory.aio_emit")


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
