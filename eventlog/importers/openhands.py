"""OpenHands trajectories (a JSON array of events) to events.

Messages become ``user`` or ``assistant`` by their source, other actions ``action`` (the action
name as the tool, its args as params), observations that answer such an action (``cause``)
``observation`` linked to it; state changes, placeholder observations and anything else become
``imported`` events.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from eventlog.importers.sources import Unit

FORMAT = "openhands"


def session_name(path: Path) -> str:
    """The session id a source file becomes."""
    return path.stem


_OFFSET = re.compile(r"(?:[Zz]|[+-]\d\d:\d\d)$")


def _is_tool_action(obj: dict[str, Any]) -> bool:
    action = obj.get("action")
    return bool(action) and action not in ("message", "change_agent_state")


def _ref(value: Any) -> int | str | None:
    """An OpenHands event id (or ``cause``) that can link an observation to its action: an
    integer or a string (one of another type links nothing; ``true`` is not the id 1)."""
    return value if type(value) in (int, str) else None


def _table(value: Any) -> dict[str, Any]:
    """A field that holds an object (``args``, ``extras``); anything else as none."""
    return value if isinstance(value, dict) else {}


def to_events(units: list[Unit], session: str) -> list[dict[str, Any]]:
    # Only an observation caused by a tool action is that action's result; the placeholder
    # ("null") observations that answer messages or state changes are kept as imported events.
    """Events for the units of one source, in order."""
    tool_actions = {
        _ref(u.obj.get("id")): f"{session}:{u.index}" for u in units if _is_tool_action(u.obj)
    }
    tool_actions.pop(None, None)
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
            text = _table(obj.get("args")).get("content") or obj.get("message", "")
            event = {
                "type": "user" if obj.get("source") == "user" else "assistant",
                "content": text,  # as given: one that is not text is refused, not its repr
            }
        elif _is_tool_action(obj):
            event = {"type": "action", "tool": str(action), "params": obj.get("args") or {}}
        elif observation and _ref(obj.get("cause")) in tool_actions:
            extras = _table(obj.get("extras"))
            failed = observation == "error" or extras.get("exit_code") not in (None, 0)
            event = {
                "type": "observation",
                "result": obj.get("content", ""),
                "action_id": tool_actions[_ref(obj["cause"])],
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
            # OpenHands writes naive UTC times; one with an offset is taken as it is
            event["ts"] = stamp if _OFFSET.search(stamp) else stamp + "Z"
        event["meta"] = {k: v for k, v in meta.items() if v is not None}
        events.append(event)
    return events
