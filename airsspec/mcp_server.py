"""The MCP server (``airsspec mcp``): a workspace's memory as tools for any MCP client, over stdio.

Built on the official MCP Python SDK (``MCPServer``). Every tool goes through one ``Memory``, kept
open for the life of the server, so the embedder stays loaded and queries are warm. A caller's
mistake (a bad argument, an unknown session) comes back as a tool error the model can read; the
server keeps running.

Tools: ``query_memory``, ``context``, ``append``, ``replay``, ``sessions``, ``health``.
"""

from __future__ import annotations

import contextlib
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

from airsspec.memory import Memory
from eventlog.errors import AirsspecError
from projections.memory_tool import MAX_K
from projections.units import UnitKind

INSTRUCTIONS = (
    "Long-term memory of this agent workspace: an append-only, hash-chained log of every "
    "message, thought, tool call and result, with summaries of compacted history and searchable "
    "documents. Use query_memory to find facts, decisions and results from earlier; context for "
    "what a session should see next; append to record events."
)


def _guard(call: Any) -> Any:
    try:
        return call()
    except AirsspecError as exc:
        raise ToolError(str(exc)) from exc


def build_server(memory: Memory) -> MCPServer:
    """An MCP server whose tools answer from ``memory``."""
    server = MCPServer("airsspec-memory", instructions=INSTRUCTIONS)

    @server.tool()
    def query_memory(
        query: str,
        k: int = 10,
        session: str | None = None,
        since: str | None = None,
        until: str | None = None,
        kinds: list[UnitKind] | None = None,
    ) -> dict[str, Any]:
        """Search everything this agent has seen or done, including history compacted out of
        the context window: messages, tool calls and results, summaries, added documents.
        Returns the best passages (at most 100), each with session, seq range, time and ids."""
        if not 1 <= k <= MAX_K:
            raise ToolError(f"k must be between 1 and {MAX_K} (got {k})")
        return _guard(
            lambda: memory.search(
                query, k=k, session=session, since=since, until=until, kinds=kinds
            )
        )

    @server.tool()
    def context(session: str, budget: int = 4000, query: str | None = None) -> str:
        """What a session should see next within ``budget`` tokens: its latest summary and its
        newest messages; with ``query``, recalled passages not already visible come first. A new
        session (or one not yet summarised) starts with what the latest other sessions left."""
        return _guard(lambda: memory.context(session, budget, query=query))

    @server.tool()
    def append(session: str, events: list[dict[str, Any]]) -> dict[str, Any]:
        """Append events to a session's log, atomically (all or none). Each event is an object
        with a type: user/assistant/thought (content), action (tool, params), observation
        (result, action_id, is_error); optional meta."""
        records = _guard(lambda: memory.append_many(session, events))
        return {
            "session": session,
            "appended": len(records),
            "seqs": [r.seq for r in records],
            "ids": [r.id for r in records],
        }

    @server.tool()
    def replay(
        session: str, from_seq: int = 1, until_seq: int | None = None, limit: int = 200
    ) -> list[dict[str, Any]]:
        """The records of a session as stored (at most ``limit``), from ``from_seq``."""
        if limit < 1:
            raise ToolError(f"limit must be at least 1 (got {limit})")

        def read() -> list[dict[str, Any]]:
            out = []
            for record in memory.replay(session, from_seq=from_seq, until=until_seq):
                out.append(record.model_dump(mode="json", exclude_none=True))
                if len(out) == limit:
                    break
            return out

        return _guard(read)

    @server.tool()
    def sessions() -> list[dict[str, Any]]:
        """Every session: records, first and last time, bytes."""
        return [
            {
                "session": i.session,
                "records": i.records,
                "first_ts": i.first_ts,
                "last_ts": i.last_ts,
                "bytes": i.bytes,
            }
            for i in _guard(memory.sessions)
        ]

    @server.tool()
    def health() -> dict[str, Any]:
        """Every tier's items, lag and what is degraded; ``ok`` is false when anything is."""
        tiers = _guard(memory.status)
        degraded = [f"{t.tier}: {d}" for t in tiers for d in t.degraded]
        return {
            "ok": not degraded and all(t.lag_records == 0 for t in tiers),
            "tiers": [
                {"tier": t.tier, "items": t.items, "lag_records": t.lag_records} for t in tiers
            ],
            "degraded": degraded,
        }

    return server


def serve(memory: Memory) -> None:
    """Serve ``memory`` over stdio until the client closes the connection."""
    # Load the model now, so the first query is as quick as the others. An embedder that
    # cannot load degrades queries, which say so themselves.
    with contextlib.suppress(Exception):
        memory.workspace.embedder().embed(["warm up"])
    build_server(memory).run("stdio")
