"""The frozen event log: the only source of truth of airsspec memory.

One append-only, hash-chained JSONL file per session. Records are appended (never edited or
removed), validated on read, verifiable with ``verify``, and a torn tail left by a crash is moved
to quarantine rather than dropped. See ``log`` for the append/read contract. Names are loaded on
first use, so importing one submodule (``eventlog.errors``) does not build every schema.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

AIRSSPEC_LAYER = True  # lets `import airsspec` tell this package from a namesake on the index

_HOMES = {
    "eventlog.errors": (
        "AirsspecError",
        "CorruptLogError",
        "EventLogError",
        "InvalidEventError",
        "InvalidSessionIdError",
        "LogSyncError",
        "LogWriteError",
        "UnsafePathError",
    ),
    "eventlog.log": ("Durability", "EventLog", "Located", "Log", "SessionInfo"),
    "eventlog.schema": (
        "ActionEvent",
        "ActionRecord",
        "AssistantEvent",
        "AssistantRecord",
        "Event",
        "ObservationEvent",
        "ObservationRecord",
        "Record",
        "ThoughtEvent",
        "ThoughtRecord",
        "UnknownRecord",
        "UserEvent",
        "UserRecord",
    ),
    "eventlog.verify": ("verify",),
}
_HOME_OF = {name: module for module, names in _HOMES.items() for name in names}

__all__ = sorted(_HOME_OF)


def __getattr__(name: str) -> Any:
    if name not in _HOME_OF:
        raise AttributeError(f"module 'eventlog' has no attribute {name!r}")
    return getattr(import_module(_HOME_OF[name]), name)
