"""The facade: ``Memory`` and ``AsyncMemory``, and every name the doors built on them need.

The CLI, the MCP server, the HTTP server, the hooks and the daemon import ``airsspec.memory``
(and ``airsspec.errors``) and nothing below it: what they call is a ``Memory`` method or service,
and what they format with is re-exported here (value types, constants, renderers), each from
the one module that declares it.

Concepts and where they live:

- ``Memory`` (``core``): open, append, replay/verify/seal/import/export (``records``),
  project/rebuild/status, hot, history, library, context (``context`` over
  ``projections.context``), search and ``query_memory`` (``search``), compact, forget,
  analytics: each a service's call over the memory's ``Kernel`` (``airsspec.kernel``).
- ``memory.sessions`` (``sessions``): list, start, phase, end, info.
- ``memory.learnings`` (``learnings``, ``health``, ``reextract``): list, get, add, confirm,
  reject, extract, gc, archive, restore, reextract, health.
- ``memory.scopes`` (``airsspec.kernel.gate``): owners, what a scope may see, guards.
- ``AsyncMemory`` (``aio``): emitted from the above (``python -m airsspec.memory.aio_emit``).
- framework state (``projections.agent_items``, ``projections.graph_state``): the folds the
  adapters of ``airsspec.integrations`` read an agents SDK session, a graph's threads and store
  back with.

The errors the facade raises are re-exported here for convenience; they are the classes of
``airsspec.errors`` (declared once, in ``eventlog.errors``), which the doors import.

Append through every door projects the hot window before it returns, unless the caller
passes ``project=False``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from airsspec.errors import (
    InvalidEventError,
    InvalidQueryError,
    LearningError,
    NoSuchSessionError,
    NotAWorkspaceError,
    OutputInsideWorkspaceError,
    ScopeError,
    VerifyFailedError,
    validation_problem,
)
from airsspec.memory.aio import AsyncMemory
from airsspec.memory.core import PROJECTIONS, Memory
from airsspec.memory.facts import FACT_KINDS
from airsspec.memory.learnings import LEVELS, parse_duration
from airsspec.memory.records import Verified, outside
from airsspec.memory.search import SCAN_LIMIT
from airsspec.reports import REPORTS, plot_format, plot_report
from eventlog.bound import Bound
from eventlog.ids import normalize_ts
from eventlog.importers import FORMATS
from eventlog.jsonl_input import parse_event_lines
from eventlog.layout import LOG_SUFFIX, validate_session_id
from eventlog.log import SessionInfo
from eventlog.names import check_name
from eventlog.render import format_record, printable
from eventlog.schema import (
    INPUT_TYPES,
    MEMORY_SESSION,
    SYSTEM_TYPES,
    CompactionRecord,
    Event,
    FactKind,
    LearningKind,
    LearningScope,
    Record,
)
from projections.agent_items import ITEM_KEY, item_event
from projections.agent_items import items as agent_items
from projections.context import FORMATS as CONTEXT_FORMATS
from projections.context import shares as context_shares
from projections.fitting import elided_seqs
from projections.graph_state import StoredItem, Thread, fold_store, fold_thread
from projections.memory_tool import (
    QUERY_MEMORY_TOOL,
    QUERY_MEMORY_TOOL_OPENAI,
    QueryMemoryInput,
    compact_answer,
)
from projections.scopes import ENV_NAMES, Scope
from projections.tokens import TokenCounter
from projections.units import UNIT_KINDS

if TYPE_CHECKING:
    from projections.analytics import QueryResult
    from projections.engine import RunReport

# Result types whose modules load heavy libraries (DuckDB for QueryResult): loaded when named.
_LAZY = {"QueryResult": "projections.analytics", "RunReport": "projections.engine"}


def __getattr__(name: str) -> Any:
    """A type of ``_LAZY``, imported on first use."""
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "CONTEXT_FORMATS",
    "ENV_NAMES",
    "FACT_KINDS",
    "FORMATS",
    "INPUT_TYPES",
    "ITEM_KEY",
    "LEVELS",
    "LOG_SUFFIX",
    "MEMORY_SESSION",
    "PROJECTIONS",
    "QUERY_MEMORY_TOOL",
    "QUERY_MEMORY_TOOL_OPENAI",
    "REPORTS",
    "SCAN_LIMIT",
    "SYSTEM_TYPES",
    "UNIT_KINDS",
    "AsyncMemory",
    "Bound",
    "CompactionRecord",
    "Event",
    "FactKind",
    "InvalidEventError",
    "InvalidQueryError",
    "LearningError",
    "LearningKind",
    "LearningScope",
    "Memory",
    "NoSuchSessionError",
    "NotAWorkspaceError",
    "OutputInsideWorkspaceError",
    "QueryMemoryInput",
    "QueryResult",
    "Record",
    "RunReport",
    "Scope",
    "ScopeError",
    "SessionInfo",
    "StoredItem",
    "Thread",
    "TokenCounter",
    "Verified",
    "VerifyFailedError",
    "agent_items",
    "check_name",
    "compact_answer",
    "context_shares",
    "elided_seqs",
    "fold_store",
    "fold_thread",
    "format_record",
    "item_event",
    "normalize_ts",
    "outside",
    "parse_duration",
    "parse_event_lines",
    "plot_format",
    "plot_report",
    "printable",
    "validate_session_id",
    "validation_problem",
]
