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
- ``AsyncMemory`` (``aio``): each call of the above as a coroutine, made from it by ``awaited``.
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

if TYPE_CHECKING:
    from airsspec.memory.aio import AsyncMemory as AsyncMemory
    from airsspec.memory.core import PROJECTIONS as PROJECTIONS
    from airsspec.memory.core import Memory as Memory
    from airsspec.memory.facts import FACT_KINDS as FACT_KINDS
    from airsspec.memory.learnings import LEVELS as LEVELS
    from airsspec.memory.learnings import parse_duration as parse_duration
    from airsspec.memory.records import Verified as Verified
    from airsspec.memory.records import outside as outside
    from airsspec.memory.search import SCAN_LIMIT as SCAN_LIMIT
    from airsspec.reports import REPORTS as REPORTS
    from airsspec.reports import plot_format as plot_format
    from airsspec.reports import plot_report as plot_report
    from eventlog.bound import Bound as Bound
    from eventlog.exact_json import loads_exact as loads_exact
    from eventlog.ids import normalize_ts as normalize_ts
    from eventlog.jsonl_input import parse_event_lines as parse_event_lines
    from eventlog.kinds import FORMATS as FORMATS
    from eventlog.layout import LOG_SUFFIX as LOG_SUFFIX
    from eventlog.layout import validate_session_id as validate_session_id
    from eventlog.log import SessionInfo as SessionInfo
    from eventlog.names import check_name as check_name
    from eventlog.render import format_record as format_record
    from eventlog.render import printable as printable
    from eventlog.render import replay_lines as replay_lines
    from eventlog.schema import INPUT_TYPES as INPUT_TYPES
    from eventlog.schema import MEMORY_SESSION as MEMORY_SESSION
    from eventlog.schema import SYSTEM_TYPES as SYSTEM_TYPES
    from eventlog.schema import CompactionRecord as CompactionRecord
    from eventlog.schema import Event as Event
    from eventlog.schema import FactKind as FactKind
    from eventlog.schema import LearningKind as LearningKind
    from eventlog.schema import LearningScope as LearningScope
    from eventlog.schema import Record as Record
    from projections.agent_items import ITEM_KEY as ITEM_KEY
    from projections.agent_items import item_event as item_event
    from projections.agent_items import items as agent_items
    from projections.analytics import QueryResult as QueryResult
    from projections.context import BUDGET as CONTEXT_BUDGET
    from projections.context import FORMATS as CONTEXT_FORMATS
    from projections.context import shares as context_shares
    from projections.engine import RunReport as RunReport
    from projections.fitting import elided_seqs as elided_seqs
    from projections.graph_state import StoredItem as StoredItem
    from projections.graph_state import Thread as Thread
    from projections.graph_state import fold_store as fold_store
    from projections.graph_state import fold_thread as fold_thread
    from projections.memory_tool import MAX_K as SEARCH_MAX_K
    from projections.memory_tool import QUERY_MEMORY_TOOL as QUERY_MEMORY_TOOL
    from projections.memory_tool import QUERY_MEMORY_TOOL_OPENAI as QUERY_MEMORY_TOOL_OPENAI
    from projections.memory_tool import QueryMemoryInput as QueryMemoryInput
    from projections.memory_tool import compact_answer as compact_answer
    from projections.scopes import ENV_NAMES as ENV_NAMES
    from projections.scopes import Scope as Scope
    from projections.tokens import TokenCounter as TokenCounter
    from projections.units import UNIT_KINDS as UNIT_KINDS

# Where each name beside the errors is declared: imported when first named, so a command pays
# only for the parts of the facade it uses (``Memory`` loads the settings, the kernel and the
# event catalog; ``QueryResult`` DuckDB; ``AsyncMemory`` asyncio). The ``TYPE_CHECKING`` imports
# above show type checkers the same names (a test holds the two lists equal).
_LAZY: dict[str, tuple[str, str]] = {
    "AsyncMemory": ("airsspec.memory.aio", "AsyncMemory"),
    "PROJECTIONS": ("airsspec.memory.core", "PROJECTIONS"),
    "Memory": ("airsspec.memory.core", "Memory"),
    "FACT_KINDS": ("airsspec.memory.facts", "FACT_KINDS"),
    "LEVELS": ("airsspec.memory.learnings", "LEVELS"),
    "parse_duration": ("airsspec.memory.learnings", "parse_duration"),
    "Verified": ("airsspec.memory.records", "Verified"),
    "outside": ("airsspec.memory.records", "outside"),
    "SCAN_LIMIT": ("airsspec.memory.search", "SCAN_LIMIT"),
    "REPORTS": ("airsspec.reports", "REPORTS"),
    "plot_format": ("airsspec.reports", "plot_format"),
    "plot_report": ("airsspec.reports", "plot_report"),
    "Bound": ("eventlog.bound", "Bound"),
    "loads_exact": ("eventlog.exact_json", "loads_exact"),
    "normalize_ts": ("eventlog.ids", "normalize_ts"),
    "parse_event_lines": ("eventlog.jsonl_input", "parse_event_lines"),
    "FORMATS": ("eventlog.kinds", "FORMATS"),
    "LOG_SUFFIX": ("eventlog.layout", "LOG_SUFFIX"),
    "validate_session_id": ("eventlog.layout", "validate_session_id"),
    "SessionInfo": ("eventlog.log", "SessionInfo"),
    "check_name": ("eventlog.names", "check_name"),
    "format_record": ("eventlog.render", "format_record"),
    "printable": ("eventlog.render", "printable"),
    "replay_lines": ("eventlog.render", "replay_lines"),
    "INPUT_TYPES": ("eventlog.schema", "INPUT_TYPES"),
    "MEMORY_SESSION": ("eventlog.schema", "MEMORY_SESSION"),
    "SYSTEM_TYPES": ("eventlog.schema", "SYSTEM_TYPES"),
    "CompactionRecord": ("eventlog.schema", "CompactionRecord"),
    "Event": ("eventlog.schema", "Event"),
    "FactKind": ("eventlog.schema", "FactKind"),
    "LearningKind": ("eventlog.schema", "LearningKind"),
    "LearningScope": ("eventlog.schema", "LearningScope"),
    "Record": ("eventlog.schema", "Record"),
    "ITEM_KEY": ("projections.agent_items", "ITEM_KEY"),
    "item_event": ("projections.agent_items", "item_event"),
    "agent_items": ("projections.agent_items", "items"),
    "CONTEXT_BUDGET": ("projections.context", "BUDGET"),
    "CONTEXT_FORMATS": ("projections.context", "FORMATS"),
    "context_shares": ("projections.context", "shares"),
    "elided_seqs": ("projections.fitting", "elided_seqs"),
    "StoredItem": ("projections.graph_state", "StoredItem"),
    "Thread": ("projections.graph_state", "Thread"),
    "fold_store": ("projections.graph_state", "fold_store"),
    "fold_thread": ("projections.graph_state", "fold_thread"),
    "SEARCH_MAX_K": ("projections.memory_tool", "MAX_K"),
    "QUERY_MEMORY_TOOL": ("projections.memory_tool", "QUERY_MEMORY_TOOL"),
    "QUERY_MEMORY_TOOL_OPENAI": ("projections.memory_tool", "QUERY_MEMORY_TOOL_OPENAI"),
    "QueryMemoryInput": ("projections.memory_tool", "QueryMemoryInput"),
    "compact_answer": ("projections.memory_tool", "compact_answer"),
    "ENV_NAMES": ("projections.scopes", "ENV_NAMES"),
    "Scope": ("projections.scopes", "Scope"),
    "TokenCounter": ("projections.tokens", "TokenCounter"),
    "UNIT_KINDS": ("projections.units", "UNIT_KINDS"),
    "QueryResult": ("projections.analytics", "QueryResult"),
    "RunReport": ("projections.engine", "RunReport"),
}


def __getattr__(name: str) -> Any:
    """A name of ``_LAZY``, imported from its module on first use (then kept here)."""
    try:
        module, attribute = _LAZY[name]
    except KeyError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
    import importlib

    value = getattr(importlib.import_module(module), attribute)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    """The facade's names, loaded or not."""
    return sorted({*globals(), *_LAZY})


__all__ = [
    "CONTEXT_BUDGET",
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
    "SEARCH_MAX_K",
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
    "loads_exact",
    "normalize_ts",
    "outside",
    "parse_duration",
    "parse_event_lines",
    "plot_format",
    "plot_report",
    "printable",
    "replay_lines",
    "validate_session_id",
    "validation_problem",
]
