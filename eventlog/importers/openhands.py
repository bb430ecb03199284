"""OpenHands trajectories (a JSON array of events) to events.

Messages become ``user`` or ``assistant`` by their source, other actions ``action`` (the action
name as the tool, its args as params), observations that answer such an action (``cause``)
``observation`` linked to it; state changes, placeholder observations and anything else become
``imported`` events.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from eventlog.importers.sources import Unit

FORMAT = "openhands"


def session_name(path: Path) -> str:
    """The session id a source file becomes."""
    return path.stem


def _is_tool_action(obj: dict[str, Any]) -> bool:
    action = obj.get("action")
    return bool(action) and action not in ("message", "change_agent_state")


def to_events(units: list[Unit], session: str) -> list[dict[str, Any]]:
    # Only an observation caused by a tool action is that action's result; the placeholder
    # ("null") observations that answer messages or state changes are kept as imported events.
    """Events for the units of one source, in order."""
    tool_actions = {
        u.obj.get("id"): f"{session}:{u.index}" for u in units if _is_tool_action(u.obj)
    }
    events = []
    for unit in units:
        obj = unit.obj
        meta = {
            "openhands_id": obj.get("id"),
            "source": obj.get("source"),
            "cause": obj.get("cause"),
        }
        action, observation = obj.get("action"), obj.get("observation")
        event: dict[str, Any]
        if action == "message":
            text = (obj.get("args") or {}).get("content") or obj.get("message", "")
            event = {
                "type": "user" if obj.get("source") == "user" else "assistant",
                "content": str(text),
            }
        elif _is_tool_action(obj):
            event = {"type": "action", "tool": str(action), "params": obj.get("args") or {}}
        elif observation and obj.get("cause") in tool_actions:
            extras = obj.get("extras") or {}
            failed = observation == "error" or extras.get("exit_code") not in (None, 0)
            event = {
                "type": "observation",
                "result": obj.get("content", ""),
                "action_id": tool_actions[obj["cause"]],
                "is_error": failed,
            }
        else:
            event = {
                "type": "imported",
                "kind": f"{'action' if action else 'observation'}:{action or observation}",
                "text": str(obj.get("message", "")),
            }
        if isinstance(obj.get("timestamp"), str):
            stamp = obj["timestamp"]
            event["ts"] = (
                stamp if stamp.endswith(("Z", "z")) or "+" in stamp[10:] else stamp + "Z"
            )  # OpenHands writes naive UTC times
        event["meta"] = {k: v for k, v in meta.items() if v is not None}
        events.append(event)
    return events
