"""The event schema: what an agent appends (``*Event``) and what the log stores (``*Record``).

Each event type is declared once, in ``catalog`` (its name, its fields, its category, who may
append it); its input event and stored record models, the registries below and the validators
are derived from that declaration (``models``, ``validation``), so adding a type is adding one
declaration. The derived models are named after their type (``session_started`` ->
``SessionStartedEvent``, ``SessionStartedRecord``) and importable from here.

A stored record is an envelope (``v``, ``id``, ``session``, ``seq``, ``ts``, ``type``, ``prev``,
``hash``, optional ``meta``, ``batch`` and ``redacted``) plus the fields of its type. Records are
frozen. The record models allow extra fields, and ``UnknownRecord`` takes any ``type`` this
version does not know, so a record written by a newer version is preserved on read, never
dropped; its hash is always checked against the raw parsed JSON, never against a re-dump of
the model.

Input events are strict: an unknown field or type is an error, so a typo never reaches the log.

``redacted`` lists the secrets replaced at append (see ``secrets``); the caller cannot set it.

``batch`` is ``[i, n]`` on every record of a multi-record ``append_many`` (1-based ``i``). It lets
recovery recognise a batch cut short by a crash and quarantine all of it, keeping batches atomic.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from eventlog.kinds import FactKind, LearningKind, LearningScope, LearningSource
from eventlog.layout import MEMORY_SESSION as MEMORY_SESSION  # the workspace's own log
from eventlog.schema import records
from eventlog.schema.catalog import (
    CATALOG,
    BackendInfo,
    Category,
    ChunkSummary,
    EventType,
    Evidence,
    ExtractorInfo,
    Fact,
    SummarizerInfo,
    event_type,
)
from eventlog.schema.envelopes import (
    IMPORTER_FIELDS,
    Event,
    Frozen,
    Meta,
    Origin,
    Record,
    Redaction,
    UnknownRecord,
)
from eventlog.schema.models import SCHEMA, SCHEMA_VERSION, Schema, derive
from eventlog.schema.validation import (
    UnknownEventTypeError,
    event_bodies,
    input_adapter,
    input_bodies,
    parse_record,
    record_from_dict,
    record_validator,
    unknown_type,
    validate_event,
)

if TYPE_CHECKING:
    from eventlog.schema.records import *  # noqa: F403  UserEvent, UserRecord ... (emitted)


def __getattr__(name: str) -> Any:
    """``UserEvent``, ``UserRecord`` ...: the emitted classes, each made on first use (then
    kept here, so a function importing one by name pays a dictionary lookup the next time)."""
    if name in records.__all__:
        return globals().setdefault(name, getattr(records, name))
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


INPUT_TYPES: Mapping[str, type[Event]] = SCHEMA.events
"""Type -> the input event model, of every type a caller or airsspec may append."""

RECORD_TYPES: Mapping[str, type[Record]] = SCHEMA.records
"""Type -> the stored record model, of every type this version knows."""

SYSTEM_TYPES: dict[str, str] = SCHEMA.system
"""Event types only airsspec's own writers append (type -> writer); ``append`` and ``import``
refuse them, so a hand-typed compaction can never reach the library or the hot window."""

MEMORY_TYPES: dict[str, str] = SCHEMA.memory
"""The memory-management types (schema version 2) and the part of airsspec that writes each."""

MESSAGE_TYPES: tuple[str, ...] = SCHEMA.messages
"""The message types (a turn of the conversation), in declaration order: what the hot window
counts as messages by default, and what analytics and the extractor's detectors read."""

CONVERSATION_TYPES: frozenset[str] = SCHEMA.conversation
"""The message types and ``imported`` (foreign records kept beside them): what a session's
user and agent said or did, as the learnings projector and the extractor read it."""

STATE_TYPES: frozenset[str] = SCHEMA.state
"""The types an agent framework's adapter appends to keep its state on the log (an agents SDK
session's pops and clears, a graph's store items and checkpoints: ``airsspec.integrations``)."""

_R = TypeVar("_R", bound=Record)


def typed(kind: type[_R], record: Record) -> _R:
    """``record`` as the catalog's record class ``kind``, the class the log gives back for
    that type (so a caller's type checker sees its fields); ``TypeError`` for another."""
    if not isinstance(record, kind):
        raise TypeError(f"expected a {kind.__name__}, got a {type(record).__name__}")
    return record


_OMIT_WHEN_NONE: tuple[str, ...] = SCHEMA.omit_when_none
"""Optional fields left out of a stored record rather than stored as null."""

__all__ = [  # the derived names (UserEvent ..., emitted in ``records``) last
    "CATALOG",
    "CONVERSATION_TYPES",
    "IMPORTER_FIELDS",
    "INPUT_TYPES",
    "MEMORY_SESSION",
    "MEMORY_TYPES",
    "MESSAGE_TYPES",
    "RECORD_TYPES",
    "SCHEMA",
    "SCHEMA_VERSION",
    "STATE_TYPES",
    "SYSTEM_TYPES",
    "BackendInfo",
    "Category",
    "ChunkSummary",
    "Event",
    "EventType",
    "Evidence",
    "Fact",
    "FactKind",
    "ExtractorInfo",
    "LearningKind",
    "LearningScope",
    "LearningSource",
    "Meta",
    "Frozen",
    "Origin",
    "Record",
    "Redaction",
    "Schema",
    "SummarizerInfo",
    "UnknownEventTypeError",
    "UnknownRecord",
    "derive",
    "event_bodies",
    "event_type",
    "input_adapter",
    "input_bodies",
    "parse_record",
    "record_from_dict",
    "record_validator",
    "typed",
    "unknown_type",
    "validate_event",
    *records.__all__,
]
