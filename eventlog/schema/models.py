"""The envelopes, and the models and registries derived from the catalog of event types.

Every type declared in ``eventlog.schema.catalog`` becomes, by ``derive``, an input event
(its fields on the ``Event`` envelope, ``type`` defaulting to its name: ``UserEvent``) and a
stored record (its fields on the ``Record`` envelope, ``type`` required: ``UserRecord``), and
takes its place in the registries. ``SCHEMA`` is what this version's catalog derives; nothing
here names an event type.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, create_model, field_validator

from eventlog.ids import normalize_ts
from eventlog.schema.catalog import CATALOG, OMIT_NONE, Category, EventType, omitted_when_none

SCHEMA_VERSION = 2
"""2 added the memory-management types of sessions and learnings (``session_started`` ...
``restored``); a version-1 reader keeps them as ``UnknownRecord``."""

_HOME = "eventlog.schema"  # where the derived models are found by name (pickle, JSON schema)

Meta = dict[str, Any]


class Frozen(BaseModel):
    """A value read, never changed, that refuses a key it does not declare (a misspelt key is
    an error, never ignored): settings sections, seals, tool inputs."""

    model_config = ConfigDict(frozen=True, extra="forbid")


class Origin(BaseModel):
    """Where an imported record came from, with its exact source bytes (UTF-8), so the source
    can be re-exported byte for byte: ``prefix`` are the bytes between the previous record and
    this one (JSON arrays), ``suffix`` the bytes after the last record of an import."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    format: str
    source: str
    index: int = Field(ge=0)
    sha256: str
    text: str
    prefix: str = ""
    suffix: str | None = None


class Redaction(BaseModel):
    """One secret replaced at append: where (dotted path), what kind, and its SHA-256 prefix."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    path: str
    kind: str
    sha256: str


class Event(BaseModel):
    """Base of what callers append. ``id`` and ``ts`` are assigned unless given."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    type: str
    id: Annotated[str | None, OMIT_NONE] = Field(default=None, min_length=1, max_length=200)
    ts: Annotated[str | None, OMIT_NONE] = None
    meta: Annotated[Meta | None, OMIT_NONE] = None
    origin: Annotated[Origin | None, OMIT_NONE] = None

    @field_validator("ts")
    @classmethod
    def _utc_rfc3339(cls, value: str | None) -> str | None:
        return None if value is None else normalize_ts(value)


IMPORTER_FIELDS = frozenset({"origin"})
"""Fields of an input event only importers (and airsspec's own writers) set: ``append``
refuses them, so a hand-written ``origin`` can never pass for an imported record."""


class Record(BaseModel):
    """Envelope shared by every stored record."""

    model_config = ConfigDict(frozen=True, extra="allow", defer_build=True)

    v: int
    id: str
    session: str
    seq: int = Field(ge=1)
    ts: str
    type: str
    prev: str | None
    hash: str
    meta: Meta | None = None
    origin: Origin | None = None
    batch: tuple[int, int] | None = None
    redacted: tuple[Redaction, ...] | None = None


class UnknownRecord(Record):
    """A record whose ``type`` this version does not know; every field is kept."""


def _class_name(kind: str) -> str:
    """``session_started`` -> ``SessionStarted``."""
    return kind.title().replace("_", "")


def event_model(declared: EventType) -> type[Event]:
    """The input event of a declared type: its fields on the ``Event`` envelope."""
    who = "a caller" if declared.writer is None else "airsspec"
    return create_model(
        f"{_class_name(declared.name)}Event",
        __base__=(declared.fields, Event),
        __module__=_HOME,
        __doc__=f"A ``{declared.name}`` event as {who} appends it.",
        type=(Literal[declared.name], declared.name),
    )


def record_model(declared: EventType) -> type[Record]:
    """The stored record of a declared type: its fields on the ``Record`` envelope."""
    return create_model(
        f"{_class_name(declared.name)}Record",
        __base__=(declared.fields, Record),
        __module__=_HOME,
        __doc__=f"A stored ``{declared.name}`` record.",
        type=(Literal[declared.name], ...),
    )


@dataclass(frozen=True, eq=False)
class Schema:
    """Everything derived from one catalog of event types (``derive``); compared and hashed by
    identity, so the validators built from it can be cached per schema."""

    catalog: Mapping[str, EventType]
    events: dict[str, type[Event]]
    """Type -> input event model, of every type (``INPUT_TYPES``)."""
    records: dict[str, type[Record]]
    """Type -> stored record model, of every type (``RECORD_TYPES``)."""
    system: dict[str, str]
    """Type -> its writer, of the types only airsspec appends (``SYSTEM_TYPES``)."""
    memory: dict[str, str]
    """Type -> its writer, of the memory-management types (``MEMORY_TYPES``)."""
    messages: tuple[str, ...]
    """The message types, in declaration order (``MESSAGE_TYPES``)."""
    conversation: frozenset[str]
    """The messages and the foreign records kept beside them (``CONVERSATION_TYPES``)."""
    omit_when_none: tuple[str, ...]
    """Optional input fields left out of a stored record when None (``OMIT_NONE``)."""

    def models(self) -> dict[str, type[BaseModel]]:
        """Every derived model by its class name (``UserEvent``, ``UserRecord`` ...)."""
        derived = [*self.events.values(), *self.records.values()]
        return {model.__name__: model for model in derived}


def derive(catalog: Mapping[str, EventType]) -> Schema:
    """The models and registries of the types declared in ``catalog``."""

    def named(*categories: Category) -> list[str]:
        return [t.name for t in catalog.values() if t.category in categories]

    system = {t.name: t.writer for t in catalog.values() if t.writer is not None}
    return Schema(
        catalog=catalog,
        events={name: event_model(t) for name, t in catalog.items()},
        records={name: record_model(t) for name, t in catalog.items()},
        system=system,
        memory={name: system[name] for name in named(Category.MEMORY)},
        messages=tuple(named(Category.MESSAGE)),
        conversation=frozenset(named(Category.MESSAGE, Category.IMPORTED)),
        omit_when_none=omitted_when_none([Event, *(t.fields for t in catalog.values())]),
    )


SCHEMA = derive(CATALOG)
"""This version's schema."""
