"""A context as a ``messages`` list, ready for the Anthropic or the OpenAI chat API.

``context`` chooses what a session sees (memory, summaries, recalled passages, newest
messages) within a token budget; this module only lays that choice out as the API expects.
A pure function of its input: the context's leading text (the memory block and summaries), the
recalled passages with their provenance, the hot entries chosen, and their records (for a tool
call's name and arguments and the call a tool output answers).

- Anthropic (``anthropic.types.MessageParam``): the leading text and the recalled passages are
  the first user message's first text blocks; then the turns, roles alternating (consecutive
  turns of one role share a message). A tool call is an assistant ``tool_use`` block and its
  output the next user message's ``tool_result`` block with the same id, results first.
- OpenAI (``ChatCompletionMessageParam``): the leading text and the recalled passages are one
  ``system`` message; a tool call is an entry of the assistant message's ``tool_calls`` and its
  output a ``role: "tool"`` message with that ``tool_call_id``, right after it.

Tool call ids are ``call_`` and a hash of the call's record id (29 characters: under the 40
the OpenAI API accepts, unique and the same on every build). Thoughts (``thought`` records)
are the agent's own notes, not speech: left out unless asked for. The list is never empty (an
API refuses an empty ``messages``): with nothing chosen, one user message says so.

Invariant: every tool call in the output has its result where the API requires it, and every
result its call; a call or output whose partner is outside the window (or that the API could
not accept where it stands) is given as plain text instead, so nothing chosen is dropped.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import orjson

if TYPE_CHECKING:
    from eventlog.schema import Record
    from projections.hot import HotEntry

MessageFormat = Literal["anthropic", "openai"]
_NOT_ID = re.compile(r"[^A-Za-z0-9_-]")
_ASSISTANT_TYPES = frozenset({"assistant", "thought", "action"})


@dataclass(slots=True)
class _Item:
    """One turn, placed: text of a role, a tool call or a tool result."""

    role: Literal["user", "assistant"]
    text: str
    call: str | None = None  # the call's id (a call, or the call a result answers)
    name: str = ""
    arguments: dict[str, Any] | None = None
    is_error: bool = False
    paired: bool = False

    @property
    def is_call(self) -> bool:
        return self.call is not None and self.role == "assistant"

    @property
    def is_result(self) -> bool:
        return self.call is not None and self.role == "user"


def build_messages(
    format: MessageFormat,
    *,
    lead: Sequence[str],
    recalled: str,
    entries: Sequence[HotEntry],
    records: Mapping[int, Record],
    thoughts: bool = False,
) -> list[dict[str, Any]]:
    """The ``messages`` of a context in ``format``: ``lead`` (memory block, summaries) and
    ``recalled`` first, then ``entries`` (hot entries, oldest first) as turns; ``thought``
    entries only with ``thoughts``."""
    preamble = [text for text in (*lead, recalled) if text]
    shown = [e for e in entries if thoughts or e.type != "thought"]
    groups = _pair(_groups([_item(entry, records.get(entry.seq)) for entry in shown]))
    messages = _anthropic(preamble, groups) if format == "anthropic" else _openai(preamble, groups)
    if not any(m["role"] == "user" for m in messages):  # an API refuses a request without one
        content = "(no context)"
        messages.append(
            {"role": "user", "content": [{"type": "text", "text": content}]}
            if format == "anthropic"
            else {"role": "user", "content": content}
        )
    return messages


def tool_id(event_id: str) -> str:
    """The API id of the tool call recorded as ``event_id``: short, stable, unique."""
    return "call_" + hashlib.blake2b(event_id.encode(), digest_size=12).hexdigest()


def _tool_name(name: str) -> str:
    return _NOT_ID.sub("_", name)[:64] or "tool"


def _item(entry: HotEntry, record: Record | None) -> _Item:
    from eventlog.schema import ActionRecord, ObservationRecord

    plain = entry.type in ("user", "assistant")  # the others say what they are
    text = entry.text if plain else f"[{entry.type}] {entry.text}"
    if isinstance(record, ActionRecord):
        # an elided call keeps its elided text: the arguments whole would break the budget
        arguments = record.params if not entry.elided else {"elided": entry.text}
        return _Item("assistant", text, tool_id(entry.id), _tool_name(record.tool), arguments)
    if isinstance(record, ObservationRecord) and record.action_id:
        return _Item("user", entry.text, tool_id(record.action_id), is_error=record.is_error)
    role: Literal["user", "assistant"] = "assistant" if entry.type in _ASSISTANT_TYPES else "user"
    return _Item(role, text)


def _groups(items: list[_Item]) -> list[tuple[str, list[_Item]]]:
    """Consecutive items of one role, together."""
    groups: list[tuple[str, list[_Item]]] = []
    for item in items:
        if groups and groups[-1][0] == item.role:
            groups[-1][1].append(item)
        else:
            groups.append((item.role, [item]))
    return groups


def _pair(groups: list[tuple[str, list[_Item]]]) -> list[tuple[str, list[_Item]]]:
    """Mark each call whose result is in the very next (user) group, and that result; the
    others stay unpaired and are given as text."""
    for index, (role, items) in enumerate(groups):
        if role != "assistant" or index + 1 >= len(groups):
            continue
        results = {i.call: i for i in groups[index + 1][1] if i.is_result and not i.paired}
        for item in items:
            if item.is_call and item.call in results:
                item.paired = results[item.call].paired = True
    return groups


def _text_of(item: _Item) -> str:
    if item.is_result:  # an output whose call is out of sight: say what it is
        return f"[tool result{' (error)' if item.is_error else ''}] {item.text}"
    return item.text


def _anthropic(preamble: list[str], groups: list[tuple[str, list[_Item]]]) -> list[dict]:
    messages: list[dict[str, Any]] = []
    if preamble or (groups and groups[0][0] == "assistant"):
        lead = preamble or ["[the conversation so far]"]
        messages.append({"role": "user", "content": [{"type": "text", "text": t} for t in lead]})
    for role, items in groups:
        blocks: list[dict[str, Any]] = []
        results: list[dict[str, Any]] = []
        for item in items:
            if item.paired and item.is_call:
                blocks.append(
                    {
                        "type": "tool_use",
                        "id": item.call,
                        "name": item.name,
                        "input": item.arguments or {},
                    }
                )
            elif item.paired:
                results.append(
                    {
                        "type": "tool_result",
                        "tool_use_id": item.call,
                        "content": item.text,
                        "is_error": item.is_error,
                    }
                )
            else:
                blocks.append({"type": "text", "text": _text_of(item)})
        content = results + blocks  # tool results come first in a user message
        if messages and messages[-1]["role"] == role:  # the lead and a first user turn
            messages[-1]["content"] += content
        else:
            messages.append({"role": role, "content": content})
    return messages


def _openai(preamble: list[str], groups: list[tuple[str, list[_Item]]]) -> list[dict]:
    messages: list[dict[str, Any]] = []
    if preamble:
        messages.append({"role": "system", "content": "\n\n".join(preamble)})
    for role, items in groups:
        texts = [_text_of(i) for i in items if not i.paired]
        if role == "assistant":
            message: dict[str, Any] = {"role": "assistant", "content": "\n".join(texts) or None}
            calls = [
                {
                    "id": i.call,
                    "type": "function",
                    "function": {
                        "name": i.name,
                        "arguments": orjson.dumps(i.arguments or {}).decode(),
                    },
                }
                for i in items
                if i.paired
            ]
            if calls:
                message["tool_calls"] = calls
            messages.append(message)
            continue
        # tool outputs right after the assistant message that called them, then the user's text
        for item in items:
            if item.paired:
                messages.append({"role": "tool", "tool_call_id": item.call, "content": item.text})
        if texts:
            messages.append({"role": "user", "content": "\n".join(texts)})
    return messages
