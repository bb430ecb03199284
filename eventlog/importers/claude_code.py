"""Claude Code transcripts (``~/.claude/projects/<project>/<session>.jsonl``, subagents in
``<session>/subagents/``) to events.

One event per transcript line. User text becomes ``user``, assistant text ``assistant``,
thinking ``thought``, tool_use ``action`` and tool_result ``observation``, linked to its action
through the tool_use id. A message the user typed while the agent was busy (a queue operation
``enqueue``) is a ``user`` message too, with ``meta.kind = "queued"``. The uuid/parentUuid tree,
sidechains, the message id, model and token usage go into ``meta``. A compaction
(``compact_boundary``, then the ``isCompactSummary`` user record) is kept as such. Everything not
mapped (progress, snapshots, other queue operations, types that do not exist yet) becomes an
``imported`` event of that kind.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from eventlog.importers.sources import Unit

FORMAT = "claude-code"
_TREE_KEYS = ("uuid", "parentUuid", "isSidechain", "agentId", "sessionId", "cwd", "gitBranch")


def session_name(path: Path) -> str:
    """The transcript's session id; a subagent's is ``<parent>.<agent file>``."""
    if path.parent.name == "subagents":
        return f"{path.parent.parent.name}.{path.stem}"
    return path.stem


def _blocks(message: Any) -> list[dict[str, Any]]:
    content = message.get("content") if isinstance(message, dict) else None
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []


def _result_text(content: Any) -> Any:
    if isinstance(content, list):
        texts = [b["text"] for b in content if isinstance(b, dict) and "text" in b]
        if len(texts) == len(content) and all(isinstance(t, str) for t in texts):
            return "\n".join(texts)
    return content


def _joined(texts: list[Any]) -> Any:
    """The texts of a message's blocks as one; the first that is not a string when one is not
    (refused as the event's ``content``, never stored as its repr)."""
    odd = [t for t in texts if not isinstance(t, str)]
    return odd[0] if odd else "\n".join(texts)


def _tool_id(value: Any) -> str | None:
    """A tool_use id that can link an action and its result: a string (an id of another type,
    kept in ``meta`` as given, links nothing)."""
    return value if isinstance(value, str) else None


def to_events(units: list[Unit], session: str) -> list[dict[str, Any]]:
    """Events for the units of one source, in order."""
    action_of_tool_use: dict[str, str] = {}
    events = []
    for unit in units:
        obj = unit.obj
        kind = obj.get("type")
        meta = {k: obj[k] for k in _TREE_KEYS if k in obj}
        message = obj.get("message")
        if isinstance(message, dict):
            meta.update({k: message[k] for k in ("id", "model", "usage") if k in message})
        blocks = _blocks(message)
        block = blocks[0] if len(blocks) == 1 else None
        event: dict[str, Any]
        if kind == "user" and block and block.get("type") == "tool_result":
            failed = block.get("is_error")
            event = {
                "type": "observation",
                "result": _result_text(block.get("content")),
                # as given (absent: false): a value that is not a boolean is refused, never
                # stored as one ("false" is truthy)
                "is_error": False if failed is None else failed,
                "action_id": action_of_tool_use.get(_tool_id(block.get("tool_use_id")) or ""),
            }
            meta["tool_use_id"] = block.get("tool_use_id")
        elif kind == "user" and blocks and all(b.get("type") == "text" for b in blocks):
            event = {"type": "user", "content": _joined([b.get("text", "") for b in blocks])}
            if obj.get("isCompactSummary"):
                meta["kind"] = "compact_summary"
        elif (
            kind == "queue-operation"
            and obj.get("operation") == "enqueue"
            and isinstance(obj.get("content"), str)
        ):
            # typed by the user while the agent was busy: a user message like any other
            event = {"type": "user", "content": obj["content"]}
            meta["kind"] = "queued"
        elif kind == "assistant" and block and block.get("type") == "text":
            event = {"type": "assistant", "content": block.get("text", "")}
        elif kind == "assistant" and block and block.get("type") == "thinking":
            event = {"type": "thought", "content": block.get("thinking", "")}
        elif kind == "assistant" and block and block.get("type") == "tool_use":
            event = {
                "type": "action",
                "tool": block.get("name") or "unknown",
                "params": block.get("input")
                if isinstance(block.get("input"), dict)
                else {"input": block.get("input")},
            }
            meta["tool_use_id"] = block.get("id")
            if (tool_id := _tool_id(block.get("id"))) is not None:
                action_of_tool_use[tool_id] = f"{session}:{unit.index}"
        else:
            subtype = obj.get("subtype")
            label = f"{kind}:{subtype}" if subtype else str(kind)
            text = obj.get("content") if isinstance(obj.get("content"), str) else ""
            if subtype == "compact_boundary":
                meta["compactMetadata"] = obj.get("compactMetadata")
                text = text or "conversation compacted"
            event = {"type": "imported", "kind": label, "text": text}
        stamp = obj.get("timestamp")
        if stamp is None and isinstance(obj.get("snapshot"), dict):  # file-history-snapshot
            stamp = obj["snapshot"].get("timestamp")
        if isinstance(stamp, str):
            event["ts"] = stamp
        event["meta"] = {k: v for k, v in meta.items() if v is not None}
        events.append(event)
    _borrow_times(events)
    return events


def _borrow_times(events: list[dict[str, Any]]) -> None:
    """A record with no time of its own (a snapshot, a queue operation) takes the time of the
    record before it (or, at the start, after it): a time from the source, never the import's,
    so a session's times stay in order."""
    known = [e.get("ts") for e in events]
    previous = next((t for t in known if t is not None), None)
    for event in events:
        if event.get("ts") is None and previous is not None:
            event["ts"] = previous
        previous = event.get("ts", previous)
