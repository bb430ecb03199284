"""The frozen event log: the only source of truth of airsspec memory.

One append-only, hash-chained JSONL file per session. Records are appended (never edited or
removed), validated on read, verifiable with ``verify``, and a torn tail left by a crash is moved
to quarantine rather than dropped. See ``log`` for the append/read contract.
"""

from eventlog.errors import (
    CorruptLogError,
    EventLogError,
    InvalidEventError,
    InvalidSessionIdError,
    LogWriteError,
)
from eventlog.log import Durability, EventLog, Located, SessionInfo
from eventlog.schema import (
    ActionEvent,
    ActionRecord,
    AssistantEvent,
    AssistantRecord,
    Event,
    ObservationEvent,
    ObservationRecord,
    Record,
    ThoughtEvent,
    ThoughtRecord,
    UnknownRecord,
    UserEvent,
    UserRecord,
)
from eventlog.verify import verify

__all__ = [
    "ActionEvent",
    "ActionRecord",
    "AssistantEvent",
    "AssistantRecord",
    "CorruptLogError",
    "Durability",
    "Event",
    "EventLog",
    "EventLogError",
    "InvalidEventError",
    "InvalidSessionIdError",
    "Located",
    "LogWriteError",
    "ObservationEvent",
    "ObservationRecord",
    "Record",
    "SessionInfo",
    "ThoughtEvent",
    "ThoughtRecord",
    "UnknownRecord",
    "UserEvent",
    "UserRecord",
    "verify",
]
