"""The ``query_memory`` tool for Anthropic tool use: its definition and its handler.

``QUERY_MEMORY_TOOL`` goes in a Messages API request's ``tools`` (``QUERY_MEMORY_TOOL_OPENAI`` in
an OpenAI request's), both generated from ``QueryMemoryInput``; ``tool_result(recall, block)``
turns the model's ``tool_use`` block into the ``tool_result`` block to send back. The handler
never raises: bad input comes back as an error result the model can read and correct, and a
degraded memory answers with what works and says so in ``warnings``.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import TYPE_CHECKING, Any

import orjson
from pydantic import BaseModel, Field, ValidationError

from eventlog.errors import field_of
from eventlog.schema import Frozen
from projections.units import UnitKind

if TYPE_CHECKING:
    from projections.recall import Recall

MAX_K = 100


class QueryMemoryInput(Frozen):
    """One query: what the tool, ``query --batch`` lines and the Python API accept. The tool
    definitions below are generated from it, so the schema a model sees is this declaration."""

    query: str = Field(
        min_length=1, max_length=10_000, description="what to look for, in plain words"
    )
    k: int = Field(10, ge=1, le=MAX_K, description="how many passages to return")
    session: str | None = Field(None, description="only this session")
    since: str | None = Field(None, description="only from this RFC 3339 time on (inclusive)")
    until: str | None = Field(
        None, description="only up to this RFC 3339 time, inclusive (a passage at it is kept)"
    )
    kinds: list[UnitKind] | None = Field(
        None, description="only these kinds of passage (default: all)"
    )
    detail: bool = Field(
        False, description="each passage's full provenance (ids, hashes, time, score parts)"
    )


QUERY_MEMORY_DESCRIPTION = (
    "Search everything this agent has seen or done, including history that was compacted "
    "out of the context window: past messages, tool calls and results, summaries of older "
    "conversation, and documents the user added. Returns the best matching passages, best "
    "first, each with where it is from (session #sequence range, or file:lines) and its "
    "score in parentheses; "
    "detail=true adds time, kind, event ids and hashes. Use it when you need a fact, "
    "decision or result from earlier that is not in the current context."
)


def compact_answer(answer: dict[str, Any], detail: bool = False) -> dict[str, Any]:
    """A ``query_memory`` answer as a tool returns it: with ``detail``, whole; else the
    passages' text first and short provenance (``from``: ``session #seqs`` or
    ``source:lines``, then the score in parentheses; a text found in several places is given
    once, its places joined by "; "), and any warnings, so a model's context holds passages,
    not metadata."""
    if detail:
        return answer
    hits: list[dict[str, str]] = []
    by_text: dict[str, dict[str, str]] = {}
    for hit in answer["hits"]:
        if hit.get("source") is not None:
            where = f"{hit['source']}:{_span(hit['line_from'], hit['line_to'])}"
        else:
            where = f"{hit['session']} #{_span(hit['seq_from'], hit['seq_to'])}"
        origin = f"{where} ({hit['score']:.2f})"
        if (same := by_text.get(hit["text"])) is not None:  # the same words said twice: once,
            same["from"] += f"; {origin}"  # with both places
            continue
        by_text[hit["text"]] = {"text": hit["text"], "from": origin}
        hits.append(by_text[hit["text"]])
    compact: dict[str, Any] = {"hits": hits}
    if answer.get("warnings"):
        compact["warnings"] = answer["warnings"]
    if answer.get("unindexed"):
        compact["unindexed"] = answer["unindexed"]
    return compact


def _span(first: int | None, last: int | None) -> str:
    return f"{first}" if first == last else f"{first}-{last}"


def _clean(schema: Any) -> Any:
    """A pydantic JSON schema without its ``title`` keys (noise in a tool definition)."""
    if isinstance(schema, dict):
        return {k: _clean(v) for k, v in schema.items() if k != "title"}
    if isinstance(schema, list):
        return [_clean(v) for v in schema]
    return schema


def tool_definition(
    model: type[BaseModel], name: str, description: str, dialect: str = "anthropic"
) -> dict[str, Any]:
    """A tool definition generated from ``model``: for the Anthropic Messages API
    (``input_schema``) or for OpenAI function calling (``type: function``)."""
    schema = _clean(model.model_json_schema())
    schema.pop("description", None)  # the model's docstring is for developers, not the model
    if dialect == "anthropic":
        return {"name": name, "description": description, "input_schema": schema}
    if dialect == "openai":
        function = {"name": name, "description": description, "parameters": schema}
        return {"type": "function", "function": function}
    raise ValueError(f"unknown tool dialect {dialect!r}; use anthropic or openai")


_TOOLS = {"QUERY_MEMORY_TOOL": "anthropic", "QUERY_MEMORY_TOOL_OPENAI": "openai"}
"""The ``query_memory`` tool's definitions, for the Messages API (``QUERY_MEMORY_TOOL``) and
OpenAI function calling (``QUERY_MEMORY_TOOL_OPENAI``): made on first use (``__getattr__``),
since a JSON schema builds the model's validator, which a command that never hands the tool
to a model does not need."""

if TYPE_CHECKING:
    QUERY_MEMORY_TOOL: dict[str, Any]
    QUERY_MEMORY_TOOL_OPENAI: dict[str, Any]


def __getattr__(name: str) -> dict[str, Any]:
    dialect = _TOOLS.get(name)
    if dialect is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    made = globals()[name] = tool_definition(
        QueryMemoryInput, "query_memory", QUERY_MEMORY_DESCRIPTION, dialect
    )
    return made


def run_query(
    recall: Recall, request: QueryMemoryInput, sessions: Collection[str] | None = None
) -> dict[str, Any]:
    """Run one validated query against ``recall`` (within ``sessions`` when given: a reader
    scope's); the JSON-ready answer, compact unless the request asks for ``detail``."""
    answer = recall.query_memory(
        request.query,
        request.k,
        request.session,
        request.since,
        request.until,
        request.kinds,
        sessions,
    ).to_json()
    return compact_answer(answer, request.detail)


def tool_result(recall: Recall, tool_use: Any) -> dict[str, Any]:
    """The ``tool_result`` block answering one ``tool_use`` block (an SDK object or a dict)."""
    block = tool_use if isinstance(tool_use, dict) else tool_use.model_dump()
    try:
        content = run_query(recall, QueryMemoryInput.model_validate(block.get("input") or {}))
        is_error = False
    except ValidationError as exc:
        problems = "; ".join(f"{field_of(e, 'input')}: {e['msg']}" for e in exc.errors())
        content, is_error = {"error": f"invalid query_memory input: {problems}"}, True
    except ValueError as exc:  # a time that does not parse, say
        content, is_error = {"error": str(exc)}, True
    return {
        "type": "tool_result",
        "tool_use_id": block["id"],
        "content": orjson.dumps(content).decode(),
        "is_error": is_error,
    }
