"""Claude's memory tool (``{"type": "memory_20250818", "name": "memory"}``) over airsspec memory.

``MemoryTool`` and ``AsyncMemoryTool`` subclass the Anthropic SDK's ``BetaAbstractMemoryTool``
and ``BetaAsyncAbstractMemoryTool``: give one to ``client.beta.messages.tool_runner(tools=[...])``
and every ``view``, ``create``, ``str_replace``, ``insert``, ``delete`` and ``rename`` Claude
issues runs on ``memory.files``, the ``/memories`` tree of the memory's user and project kept on
the log (every version with its agent and ``actor``, ``history``, ``as_of``, ``forget``). The
answers are the reference filesystem backend's strings; a refused command (a bad path, an
``old_str`` not found, a file changed by another writer meanwhile) comes back to Claude as an
error result (``ToolError``) it can read and correct, never as an exception of the loop.

    from anthropic import Anthropic
    from airsspec.integrations.anthropic_memory import MemoryTool

    tool = MemoryTool(memory.scoped(user="ana", agent="claude"), actor="claude-sonnet-5-5")
    runner = Anthropic().beta.messages.tool_runner(
        model="claude-sonnet-5-5", max_tokens=1024, tools=[tool],
        messages=[{"role": "user", "content": "Remember that I prefer tabs."}],
    )
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, TypeVar

from anthropic.lib.tools import (
    BetaAbstractMemoryTool,
    BetaAsyncAbstractMemoryTool,
    BetaFunctionToolResultType,
    ToolError,
)
from anthropic.types.beta import (
    BetaCacheControlEphemeralParam,
    BetaMemoryTool20250818CreateCommand,
    BetaMemoryTool20250818DeleteCommand,
    BetaMemoryTool20250818InsertCommand,
    BetaMemoryTool20250818RenameCommand,
    BetaMemoryTool20250818StrReplaceCommand,
    BetaMemoryTool20250818ViewCommand,
)
from anyio.to_thread import run_sync
from pydantic import BaseModel, ValidationError

from airsspec.errors import BadInputError, ConflictError, ForbiddenError, NotFoundError
from airsspec.memory import Memory

T = TypeVar("T")
REFUSED = (BadInputError, NotFoundError, ConflictError, ForbiddenError)
"""What a command may be refused with: answered to Claude as an error result. Any other
error (the log cannot be written, say) is the caller's, raised."""


def _answer(call: Callable[[], T]) -> T:
    try:
        return call()
    except REFUSED as exc:
        raise ToolError(str(exc)) from exc


_COMMANDS: dict[str, type[BaseModel]] = {
    "view": BetaMemoryTool20250818ViewCommand,
    "create": BetaMemoryTool20250818CreateCommand,
    "str_replace": BetaMemoryTool20250818StrReplaceCommand,
    "insert": BetaMemoryTool20250818InsertCommand,
    "delete": BetaMemoryTool20250818DeleteCommand,
    "rename": BetaMemoryTool20250818RenameCommand,
}


def _parsed(given: object) -> Any:
    """The command a tool_use block's input names, its fields checked against the SDK's
    model (the SDK's own ``call`` builds it unchecked: a missing or mistyped field failed
    inside the service); ``ToolError`` naming what is wrong."""
    name = given.get("command") if isinstance(given, dict) else None
    model = _COMMANDS.get(name) if isinstance(name, str) else None
    if model is None:
        raise ToolError(f"Unknown memory command {name!r}: one of {', '.join(_COMMANDS)}")
    try:
        return model.model_validate(given)
    except ValidationError as exc:
        error = exc.errors()[0]
        field = ".".join(str(part) for part in error["loc"])
        raise ToolError(f"Invalid {name} command: field {field!r}: {error['msg']}") from exc


class _Change(Protocol):
    """What a change of ``memory.files`` answers: its ``message`` is the tool's result."""

    @property
    def message(self) -> str: ...


class _Commands:
    """The six commands and ``clear_all_memory`` on one memory's ``files``, as strings: the
    sync tool's methods, and what the async tool runs in a worker thread."""

    def __init__(
        self,
        memory: Memory,
        *,
        actor: str | None = None,
        cache_control: BetaCacheControlEphemeralParam | None = None,
    ) -> None:
        # the SDK tool's own (sync or async) is next in the tool's MRO
        super().__init__(cache_control=cache_control)  # type: ignore[call-arg]
        self.files, self.actor = memory.files, actor

    def _change(self, call: Callable[..., _Change], *args: Any) -> str:
        """The message of the change ``call`` makes with ``args``, by this tool's actor."""
        return _answer(lambda: call(*args, actor=self.actor).message)

    def view(self, command: BetaMemoryTool20250818ViewCommand) -> str:
        return _answer(lambda: self.files.view(command.path, command.view_range))

    def create(self, command: BetaMemoryTool20250818CreateCommand) -> str:
        return self._change(self.files.create, command.path, command.file_text)

    def str_replace(self, command: BetaMemoryTool20250818StrReplaceCommand) -> str:
        return self._change(self.files.str_replace, command.path, command.old_str, command.new_str)

    def insert(self, command: BetaMemoryTool20250818InsertCommand) -> str:
        return self._change(
            self.files.insert, command.path, command.insert_line, command.insert_text
        )

    def delete(self, command: BetaMemoryTool20250818DeleteCommand) -> str:
        return self._change(self.files.delete, command.path)

    def rename(self, command: BetaMemoryTool20250818RenameCommand) -> str:
        return self._change(self.files.rename, command.old_path, command.new_path)

    def clear_all_memory(self) -> str:
        return self._change(self.files.clear)


class MemoryTool(_Commands, BetaAbstractMemoryTool):
    """Claude's memory tool over ``memory.files`` (see the module). ``actor`` is recorded
    with every change (the model, say), beside the memory's agent."""

    def call(self, input: object) -> BetaFunctionToolResultType:
        """Run the command of a tool_use block's ``input`` (checked: ``_parsed``)."""
        return self.execute(_parsed(input))


def _in_thread(name: str) -> Callable[..., Any]:
    """The async command ``name``: ``_Commands``' own, run in a worker thread."""

    async def command(self: AsyncMemoryTool, *args: Any) -> str:
        call: Callable[..., str] = getattr(_Commands, name)
        return await run_sync(call, self, *args)

    command.__name__ = command.__qualname__ = name
    return command


class AsyncMemoryTool(_Commands, BetaAsyncAbstractMemoryTool):
    """``MemoryTool`` for the async client's tool runner: each command runs in a worker
    thread (the log's writes block), so the event loop never waits on a disk."""

    async def call(self, input: object) -> BetaFunctionToolResultType:
        """Run the command of a tool_use block's ``input`` (checked: ``_parsed``)."""
        return await self.execute(_parsed(input))

    view = _in_thread("view")
    create = _in_thread("create")
    str_replace = _in_thread("str_replace")
    insert = _in_thread("insert")
    delete = _in_thread("delete")
    rename = _in_thread("rename")
    clear_all_memory = _in_thread("clear_all_memory")
