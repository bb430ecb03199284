"""The MCP server: a workspace's memory as tools for any MCP client, over stdio (``airsspec mcp``)
or streamable HTTP (``airsspec serve``, at ``/mcp``).

Built on the official MCP Python SDK (``MCPServer``). The tools are the operations of
``airsspec.serve.ops``, declared there once for the HTTP API too: name, description, input
schema with bounds and descriptions, and annotations (``readOnlyHint``; no tool is destructive:
every write appends to the log). Unknown arguments are refused. A caller's mistake (a bad
argument, an unknown session) comes back as a tool error the model can read; the server keeps
running. Over stdio every call goes through one ``Memory``, kept open for the life of the
server, so the embedder stays loaded and queries are warm; over HTTP the caller's token decides
which user's view of the memory a call sees (``airsspec.serve``).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.tools import Tool
from mcp_types import ToolAnnotations
from pydantic import ConfigDict

from airsspec.errors import AirsspecError
from airsspec.serve.ops import OPS, Op

INSTRUCTIONS = (
    "Long-term memory of this agent workspace: an append-only, hash-chained log of every "
    "message, thought, tool call and result, with summaries of compacted history, learnings "
    "and searchable documents. Use query_memory to find facts, decisions and results from "
    "earlier; context for what a session should see next; append to record events."
)

# How a tool call runs: (operation, validated arguments, the request's context) -> result.
Runner = Callable[[Op, Any, Context], Any]


def _tool(op: Op, run: Runner) -> Tool:
    """The MCP tool of ``op``: its parameters as the SDK sees them, unknown keys refused."""

    def call(ctx: Context, **values: Any) -> Any:
        arguments = op.arguments.model_construct(**values)  # validated by the SDK already
        try:
            return run(op, arguments, ctx)
        except AirsspecError as exc:
            raise ToolError(str(exc)) from exc

    params = [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in op.parameters]
    ctx = inspect.Parameter("ctx", inspect.Parameter.KEYWORD_ONLY, annotation=Context)
    returns = inspect.signature(op.fn, eval_str=True).return_annotation
    call.__signature__ = inspect.Signature([ctx, *params], return_annotation=returns)  # type: ignore[attr-defined]
    call.__annotations__ = {p.name: p.annotation for p in params} | {
        "ctx": Context,
        "return": returns,
    }
    call.__name__ = op.name
    tool = Tool.from_function(
        call,
        name=op.name,
        description=op.description,
        annotations=ToolAnnotations(
            readOnlyHint=op.read_only,
            destructiveHint=False,
            idempotentHint=op.read_only,
            openWorldHint=False,
        ),
    )
    loose = tool.fn_metadata.arg_model
    strict = type(loose.__name__, (loose,), {"model_config": ConfigDict(extra="forbid")})
    tool.fn_metadata.arg_model = strict  # the SDK validates with it: unknown keys refused
    tool.parameters = strict.model_json_schema(by_alias=True)
    return tool


def build_server(run: Runner) -> MCPServer:
    """An MCP server whose tools are the operations, each run by ``run``."""
    return MCPServer(
        "airsspec-memory",
        instructions=INSTRUCTIONS,
        tools=[_tool(op, run) for op in OPS],
        log_level="WARNING",
    )


def serve(memory: Any) -> None:
    """Serve ``memory`` over stdio until the client closes the connection."""
    memory.warm_up()  # the first query as quick as the others

    def run(op: Op, arguments: Any, ctx: Context) -> Any:
        if op.name == "query_memory":  # no indexer runs beside stdio: catch the cold tier up
            memory.project(("cold",))
        return op.call(memory, arguments)

    build_server(run).run("stdio")
