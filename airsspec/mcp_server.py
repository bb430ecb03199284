"""The MCP server: a workspace's memory as tools for any MCP client, over stdio (``airsspec mcp``)
or streamable HTTP (``airsspec serve``, at ``/mcp``).

Built on the official MCP Python SDK (``MCPServer``). The tools are the operations of
``airsspec.serve.ops``, declared there once for the HTTP API too: name, description, input schema
with bounds and descriptions, and annotations (``readOnlyHint``, and ``destructiveHint`` for the
two that destroy something: ``forget``, ``revoke_token``; every other write appends). Unknown
arguments are refused. A caller's mistake (a bad argument, an unknown session) comes back as a
one-line tool error the model can read (the field and what is wrong with it); the server keeps
running. A caller who may only read (a read-only token over HTTP) is listed only the tools that
read. The server reports the package's version. Over stdio every call goes through one ``Memory``,
kept open for the life of the server, so the embedder stays loaded and queries are warm; over HTTP
the caller's token decides which user's view of the memory a call sees (``airsspec.serve``).

The end of the input ends a stdio server only once every request read has been answered (or
cancelled by the client): ``printf '...' | airsspec mcp`` gets all its answers, where the SDK's
own stdio transport would cancel calls still running when the input closes. Calls run at once
(the SDK gives each a thread), but over stdio one that writes is answered before any call read
after it starts (``_Order``): a query piped after an append sees what it appended.
"""

from __future__ import annotations

import functools
import inspect
import os
import sys
from collections import Counter, deque
from collections.abc import AsyncIterator, Callable
from io import TextIOWrapper
from typing import Any

import anyio
import orjson
import pydantic_core
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.tools import Tool
from mcp.server.stdio import stdio_server
from mcp.shared.dispatcher import coerce_request_id
from mcp.shared.jsonrpc_dispatcher import cancelled_request_id_from_params
from mcp_types import (
    INVALID_REQUEST,
    JSONRPCError,
    JSONRPCNotification,
    JSONRPCRequest,
    JSONRPCResponse,
    ListToolsResult,
    RequestId,
    ToolAnnotations,
    jsonrpc_message_adapter,
)
from pydantic import ValidationError, create_model
from typing_extensions import override

import airsspec
from airsspec.errors import AirsspecError, InexactJSONError, validation_problem
from airsspec.memory import loads_exact
from airsspec.serve.ops import OPS, Op

INSTRUCTIONS = (
    "Long-term memory of this agent workspace: an append-only, hash-chained log of every "
    "message, thought, tool call and result, with summaries of compacted history, learnings "
    "and searchable documents. Use query_memory to find facts, decisions and results from "
    "earlier; context for what a session should see next; append to record events."
)

# How a tool call runs: (operation, validated arguments, the request's context) -> result.
Runner = Callable[[Op, Any, Context], Any]
# Whether the caller of a request (the SDK's request context) may write: is listed the writes.
Writer = Callable[[Any], bool]


class _Tool(Tool):
    """The SDK's tool, whose refusal of the arguments is one line naming the field (the SDK's
    own is pydantic's many-line report ending in a url)."""

    @override
    async def run(
        self, arguments: dict[str, Any], context: Any, convert_result: bool = False
    ) -> Any:
        """Run the tool; a refusal of ``arguments`` said in one line."""
        try:
            return await super().run(arguments, context, convert_result)
        except ToolError as exc:
            if isinstance(exc.__cause__, ValidationError):
                said = validation_problem(exc.__cause__, "arguments")
                raise ToolError(f"{self.name}: {said}") from exc.__cause__
            raise


def _tool(op: Op, run: Runner, order: _Order | None = None) -> Tool:
    """The MCP tool of ``op``, run by ``run`` in a worker thread: the operation's tool
    (``_described``) with this server's function; with ``order``, started in its turn."""

    async def call(ctx: Context, **values: Any) -> Any:
        arguments = op.arguments.model_construct(**values)  # validated by the SDK already
        if order is not None:
            await order.turn(coerce_request_id(ctx.request_id), not op.read_only)
        try:
            return await anyio.to_thread.run_sync(run, op, arguments, ctx)
        except AirsspecError as exc:
            raise ToolError(str(exc)) from exc

    return _described(op).model_copy(update={"fn": call, "is_async": True})


@functools.cache
def _described(op: Op) -> Tool:
    """``op`` as the SDK sees a tool: its parameters (unknown keys refused), their schema and
    its annotations, with no function to run. Made once per operation in a process: the SDK's
    reading of a signature builds pydantic models (most of a server's start-up)."""

    def unset(ctx: Context, **values: Any) -> Any:
        raise NotImplementedError(f"{op.name}: a described tool, given no function to run")

    params = [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in op.parameters]
    ctx = inspect.Parameter("ctx", inspect.Parameter.KEYWORD_ONLY, annotation=Context)
    returns = inspect.signature(op.fn, eval_str=True).return_annotation
    unset.__signature__ = inspect.Signature([ctx, *params], return_annotation=returns)  # type: ignore[attr-defined]
    unset.__annotations__ = {p.name: p.annotation for p in params} | {
        "ctx": Context,
        "return": returns,
    }
    unset.__name__ = op.name
    tool = _Tool.from_function(
        unset,
        name=op.name,
        description=op.description,
        annotations=ToolAnnotations(
            readOnlyHint=op.read_only,
            destructiveHint=op.destructive,
            idempotentHint=op.read_only,
            openWorldHint=False,
        ),
    )
    loose = tool.fn_metadata.arg_model
    # the SDK validates with this one: unknown keys refused
    tool.fn_metadata.arg_model = create_model(
        loose.__name__, __base__=loose, __cls_kwargs__={"extra": "forbid"}
    )
    tool.parameters = tool.fn_metadata.arg_model.model_json_schema(by_alias=True)
    return tool


class _Order:
    """Over stdio, the calls that write in the order they were read: a call is started (given
    a thread) only once every call that writes and was read before it has been answered, so a
    query piped after an append sees what it appended (the SDK starts every call at once).
    Calls that only read do not wait for each other, and a call waiting holds no thread. Its
    methods run in the event loop: ``read`` as a line is read, ``answered`` as an answer is
    written (or the call cancelled), ``turn`` before a call runs."""

    def __init__(self) -> None:
        self._read = 0  # tool calls read so far
        # (id, whether it writes) -> the numbers read: a write and a read sharing an id (a
        # client's mistake) each take their own, so a write never waits for itself
        self._arrived: dict[tuple[RequestId, bool], deque[int]] = {}
        self._writing: dict[RequestId, deque[int]] = {}  # the writes not answered, by id
        self._pending: set[int] = set()  # their numbers
        self._changed: anyio.Event | None = None  # set when a write is answered

    WRITES = frozenset(op.name for op in OPS if not op.read_only)

    def read(self, request_id: RequestId, tool: str) -> None:
        writes = tool in self.WRITES
        number, self._read = self._read, self._read + 1
        self._arrived.setdefault((request_id, writes), deque()).append(number)
        if writes:
            self._writing.setdefault(request_id, deque()).append(number)
            self._pending.add(number)

    def answered(self, request_id: RequestId) -> None:
        if (writing := self._writing.get(request_id)) is None:
            return
        self._pending.discard(writing.popleft())
        if not writing:
            del self._writing[request_id]
        if self._changed is not None:
            self._changed.set()
            self._changed = None

    async def turn(self, request_id: RequestId, writes: bool) -> None:
        """Return once the writes read before this call are answered."""
        arrived = self._arrived.get((request_id, writes))
        if not arrived:
            return
        number = arrived.popleft()
        if not arrived:
            del self._arrived[(request_id, writes)]
        while any(w < number for w in self._pending):
            if self._changed is None:
                self._changed = anyio.Event()
            await self._changed.wait()


class _Unanswered:
    """The requests read from the input and not yet answered on the output, counted by id as
    the SDK correlates them (``"7"`` and ``7`` are one id). A line is read as the SDK's
    transport reads it: one it takes for a notification (an id that is null, a float, an
    object) or refuses (no ``jsonrpc``, ``params`` not an object) is never answered, so never
    waited for."""

    def __init__(self, order: _Order | None = None) -> None:
        self.ids: Counter[RequestId] = Counter()
        self.none_left: anyio.Event | None = None  # set once ``ids`` empties, at the end
        self.order = order

    @staticmethod
    def _message(line: str) -> Any:
        try:
            return jsonrpc_message_adapter.validate_json(line, by_name=False)
        except ValueError:  # the SDK answers what it cannot read as it always does
            return None

    def read(self, line: str) -> None:
        message = self._message(line)
        if isinstance(message, JSONRPCRequest):
            self.ids[coerce_request_id(message.id)] += 1
            if self.order is not None and message.method == "tools/call":
                tool = (message.params or {}).get("name")
                self.order.read(coerce_request_id(message.id), str(tool))
        elif (
            isinstance(message, JSONRPCNotification) and message.method == "notifications/cancelled"
        ):
            self.answered(cancelled_request_id_from_params(message.params))  # never answered

    def written(self, line: str) -> None:
        message = self._message(line)
        if isinstance(message, JSONRPCResponse | JSONRPCError) and message.id is not None:
            self.answered(message.id)

    def answered(self, request_id: RequestId | None) -> None:
        if request_id is not None:
            key = coerce_request_id(request_id)
            if self.order is not None:
                self.order.answered(key)
            if self.ids[key] > 1:  # the same id twice in flight: each is answered
                self.ids[key] -= 1
            else:
                self.ids.pop(key, None)
        if not self.ids and self.none_left is not None:
            self.none_left.set()

    async def drained(self) -> None:
        """Return once every request read has been answered."""
        if self.ids:
            self.none_left = anyio.Event()
            await self.none_left.wait()


def inexact(message: bytes | str, *, notifications: bool = False) -> bytes | None:
    """What answers a message a parser would read otherwise than it was sent (a key given
    twice in one object: the SDK keeps one of the two values, silently; an integer beyond 64
    bits; ``NaN``, ``Infinity`` or ``1e400``, no JSON, which the SDK's parser reads as floats;
    over stdio a byte that is not UTF-8, read as U+FFFD), refused as every door refuses it
    (``loads_exact``): a JSON-RPC error naming the request's id (null when it has none an
    answer can hold), or ``b""`` for a notification (over stdio none is answered; over HTTP,
    ``notifications``, the refusal is an error too); None for any other message, which the
    SDK reads and answers as it always does (its parse error for one that is not JSON to it
    either)."""
    if isinstance(message, str) and (at := _escaped(message)) is not None:
        sent = message.encode("utf-8", "surrogateescape")
        problem = f"not UTF-8 (byte {ord(message[at]) - 0xDC00:#04x}, character {at})"
        value = _read(sent.decode("utf-8", "replace"))
    else:
        try:
            loads_exact(message, max_depth=None)
        except InexactJSONError as exc:
            problem, value = str(exc), _read(message)
        except ValueError as exc:
            value = _read(message)
            if value is _UNREAD:  # not JSON to the SDK either: its parse error answers it
                return None
            # NaN, Infinity, a number beyond a double: not JSON; the SDK reads them as floats
            problem = (
                "not JSON as sent (NaN, Infinity and numbers beyond a double's range are no "
                f"JSON numbers): {exc}"
            )
        else:
            return None
    if isinstance(value, dict) and "id" not in value and not notifications:
        return b""
    error = {"code": INVALID_REQUEST, "message": f"Invalid request: {problem}"}
    return orjson.dumps({"jsonrpc": "2.0", "id": _request_id(value), "error": error})


_UNREAD = object()


def _escaped(line: str) -> int | None:
    """Where ``line``, read with ``surrogateescape``, holds a byte that was not UTF-8."""
    try:
        line.encode("utf-8")
    except UnicodeEncodeError as exc:
        return exc.start
    return None


def _request_id(value: Any) -> RequestId | None:
    """The id an answer to ``value`` names: its own when a string or an integer an answer can
    hold (64 bits), else null (none, NaN, an object...)."""
    ident = value.get("id") if isinstance(value, dict) else None
    if isinstance(ident, str) or (type(ident) is int and -(2**63) <= ident < 2**64):
        return ident
    return None


def _read(message: bytes | str) -> Any:
    """``message`` as the SDK's parser reads it (``_UNREAD`` when it does not)."""
    try:
        return pydantic_core.from_json(message)
    except ValueError:
        return _UNREAD


class _Input:
    """The input's lines, whose end waits until every request read is answered; a line a
    parser would read otherwise than it was sent is answered here (``inexact``), never read."""

    def __init__(self, lines: Any, unanswered: _Unanswered, wire: Any) -> None:
        self.lines = lines
        self.unanswered = unanswered
        self.wire = wire  # the output's: a write is one whole line, as the SDK's are

    async def __aiter__(self) -> AsyncIterator[str]:
        async for line in self.lines:
            if (refused := inexact(line)) is not None:
                if refused:
                    await self.wire.write(refused.decode() + "\n")
                    await self.wire.flush()
                continue
            self.unanswered.read(line)
            yield line
        await self.unanswered.drained()


class _Output:
    """The output: what is written is noted as answered once it is on its way."""

    def __init__(self, wire: Any, unanswered: _Unanswered) -> None:
        self.wire = wire
        self.unanswered = unanswered

    async def write(self, line: str) -> None:
        await self.wire.write(line)
        self.unanswered.written(line)

    async def flush(self) -> None:
        await self.wire.flush()


class _Server(MCPServer):
    """The SDK's server, whose stdio transport lets calls still running answer after the
    input ends, and whose list of tools is the caller's (``writes``: whether they may
    write; every tool when not given)."""

    writes: Writer | None = None
    order: _Order | None = None  # over stdio: the writes in the order read

    @override
    async def _handle_list_tools(self, ctx: Any, params: Any) -> ListToolsResult:
        """The tools this request's caller may call."""
        tools = await self.list_tools()
        if self.writes is not None and not self.writes(ctx):
            tools = [t for t in tools if t.annotations is not None and t.annotations.read_only_hint]
        return ListToolsResult(tools=tools)

    @override
    async def run_stdio_async(self) -> None:
        """Serve over stdin and stdout; fd 1 points at stderr meanwhile, so stray output of a
        library misses the wire (as the SDK's own transport does)."""
        unanswered = _Unanswered(self.order)
        wire_fd = os.dup(1)
        os.dup2(2, 1)
        wire = TextIOWrapper(os.fdopen(wire_fd, "wb", closefd=False), encoding="utf-8")
        # a byte that is not UTF-8 kept as it came, for ``inexact`` to refuse its line
        lines = TextIOWrapper(sys.stdin.buffer, encoding="utf-8", errors="surrogateescape")
        # threads of their own: running calls may hold every thread of the pool, and the
        # input and the answers must still be read and written
        reading, writing = anyio.CapacityLimiter(1), anyio.CapacityLimiter(1)
        output = _Output(anyio.wrap_file(wire, limiter=writing), unanswered)
        try:
            async with stdio_server(
                stdin=_Input(anyio.wrap_file(lines, limiter=reading), unanswered, output.wire),  # type: ignore[arg-type]
                stdout=output,  # type: ignore[arg-type]
            ) as (read, write):
                lowlevel = self._lowlevel_server
                await lowlevel.run(read, write, lowlevel.create_initialization_options())
        finally:
            wire.flush()
            os.dup2(wire_fd, 1)
            os.close(wire_fd)


def build_server(
    run: Runner, writes: Writer | None = None, order: _Order | None = None
) -> MCPServer:
    """An MCP server whose tools are the operations, each run by ``run``; a caller for whom
    ``writes`` says no is listed only the reads; ``order``: the stdio calls' (``_Order``)."""
    server = _Server(
        "airsspec-memory",
        instructions=INSTRUCTIONS,
        version=airsspec.__version__,
        tools=[_tool(op, run, order) for op in OPS],
        log_level="WARNING",
    )
    server.writes = writes
    server.order = order
    return server


def serve(memory: Any) -> None:
    """Serve ``memory`` over stdio until the client closes the connection."""
    memory.warm_up()  # the first query as quick as the others
    order = _Order()

    def run(op: Op, arguments: Any, ctx: Context) -> Any:
        if op.name == "query_memory":  # no indexer runs beside stdio: catch the cold tier up
            memory.project(("cold",))
        return op.call(memory, arguments)

    build_server(run, order=order).run("stdio")
