"""The event schema: what an agent appends (``*Event``) and what the log stores (``*Record``).

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

from functools import cache
from typing import Annotated, Any, Literal, Union, get_args

import orjson
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, field_validator
from pydantic_core import SchemaValidator, core_schema

from eventlog.errors import UnknownEventTypeError
from eventlog.ids import normalize_ts
from eventlog.layout import MEMORY_SESSION as MEMORY_SESSION  # the workspace's own log

SCHEMA_VERSION = 2
"""2 added the memory-management types of sessions and learnings (``session_started`` ...
``restored``); a version-1 reader keeps them as ``UnknownRecord``."""


Meta = dict[str, Any]


class _UserPayload(BaseModel):
    content: str


class _AssistantPayload(BaseModel):
    content: str


class _ThoughtPayload(BaseModel):
    content: str


class _ActionPayload(BaseModel):
    tool: str = Field(min_length=1)
    params: dict[str, Any] = Field(default_factory=dict)


class _ObservationPayload(BaseModel):
    result: Any
    action_id: str | None = None
    is_error: bool = False


class ChunkSummary(BaseModel):
    """One chunk of a compaction: the seq range it covers and its summary."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    from_seq: int = Field(ge=1)
    to_seq: int = Field(ge=1)
    messages: int = Field(ge=1)
    summary: str
    tokens: int = Field(ge=0)


class BackendInfo(BaseModel):
    """Which backend wrote derived events, and whether it stood in for another (and why)."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    backend: str
    model: str
    fallback_from: str | None = None
    fallback_error: str | None = None


class SummarizerInfo(BackendInfo):
    """Which summarizer produced a compaction, and whether it stood in for another."""

    prompt_version: str


class _CompactionPayload(BaseModel):
    """Everything needed to write ``history-NNN.md`` without calling any summarizer again."""

    library_no: int = Field(ge=1)
    from_seq: int = Field(ge=1)
    to_seq: int = Field(ge=1)
    first_hash: str
    last_hash: str
    messages: int = Field(ge=1)
    chunks: list[ChunkSummary] = Field(min_length=1)
    summary: str
    summary_tokens: int = Field(ge=0)
    previous_library_no: int | None = None
    summarizer: SummarizerInfo
    tokens_before: int = Field(ge=0)
    tokens_after: int = Field(ge=0)
    reason: str


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


class _ImportedPayload(BaseModel):
    """A foreign record this version does not map to a message type (kept, never dropped)."""

    kind: str
    text: str = ""


_ScopeValue = Annotated[str, Field(min_length=1, max_length=200)]


class _ScopeFields(BaseModel):
    """Whose memory a record belongs to (``projections.scopes``): left out when not named."""

    user: _ScopeValue | None = None
    agent: _ScopeValue | None = None
    project: _ScopeValue | None = None


class _SessionStartedPayload(_ScopeFields):
    task: str | None = None
    phase: str | None = None


class _SessionEndedPayload(BaseModel):
    status: str = Field(min_length=1, max_length=200)


class _PhaseChangedPayload(BaseModel):
    phase: str = Field(min_length=1, max_length=200)


LearningKind = Literal["correction", "preference", "pattern", "decision", "error_fix", "anchor"]
"""What a learning is: a correction the user made, a preference ("always/never/prefer"), a
pattern seen, a decision taken, an error and its fix, or an identity anchor (the first
interaction, what the user says about themself or the project's ground rules: kept verbatim)."""
LearningScope = Literal["session", "project", "global"]
LearningSource = Literal["extractive", "anthropic", "user"]


class Evidence(BaseModel):
    """A record a learning came from."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    session: str
    seq: int = Field(ge=1)
    hash: str


class ExtractorInfo(BackendInfo):
    """Which extractor read a range of records, and whether it stood in for another."""

    version: str


class _LearningPayload(_ScopeFields):
    learning_id: str = Field(min_length=1, max_length=200)
    kind: LearningKind
    text: str = Field(min_length=1, max_length=20_000)
    scope: LearningScope
    evidence: list[Evidence] = Field(default_factory=list)
    source: LearningSource
    explicit: bool = False  # stated by the user (not inferred from the agent's work)


class _ExtractedPayload(BaseModel):
    """An extractor read ``from_seq..to_seq``; the learnings it found are appended with it."""

    from_seq: int = Field(ge=1)
    to_seq: int = Field(ge=1)
    extractor: ExtractorInfo
    learnings: int = Field(ge=0)


class _LearningFeedbackPayload(BaseModel):
    learning_id: str = Field(min_length=1)
    verdict: Literal["confirmed", "rejected", "superseded"]
    by: str | None = None  # the learning that supersedes it
    reason: str = ""


class _MemoryAccessedPayload(BaseModel):
    learning_ids: list[str]  # what was returned
    matched: list[str] = Field(default_factory=list)  # those that matched the task or query
    purpose: Literal["context", "recall"]
    reader: str  # the session (or tool) the learnings were given to
    query: str | None = None


class _ArchivedPayload(BaseModel):
    learning_ids: list[str] = Field(min_length=1)
    reason: str


class _RestoredPayload(BaseModel):
    learning_id: str = Field(min_length=1)


class _SourceIndexedPayload(BaseModel):
    path: str = Field(min_length=1)  # under sources/, with "/" between folders
    size: int | None = Field(default=None, ge=0)  # None: the file was removed
    sha256: str | None = Field(default=None, pattern=r"^[0-9a-f]{64}$")


class _ForgottenPayload(BaseModel):
    """A subject was forgotten (``airsspec forget``): its keys destroyed, its copies purged."""

    subject: Literal["user", "session"]
    name: str = Field(min_length=1, max_length=200)  # whom: the user or session id
    by: str = Field(min_length=1, max_length=200)  # who asked
    sessions: list[str] = Field(default_factory=list)  # the sessions it covered
    keys: list[str] = Field(default_factory=list)  # the ids of the keys destroyed


# --------------------------------------------------------------------------- input events


class Event(BaseModel):
    """Base of what callers append. ``id`` and ``ts`` are assigned unless given."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    type: str
    id: str | None = Field(default=None, min_length=1, max_length=200)
    ts: str | None = None
    meta: Meta | None = None
    origin: Origin | None = None

    @field_validator("ts")
    @classmethod
    def _utc_rfc3339(cls, value: str | None) -> str | None:
        return None if value is None else normalize_ts(value)


class UserEvent(_UserPayload, Event):
    """A ``user`` event as a caller appends it."""

    type: Literal["user"] = "user"


class AssistantEvent(_AssistantPayload, Event):
    """A ``assistant`` event as a caller appends it."""

    type: Literal["assistant"] = "assistant"


class ThoughtEvent(_ThoughtPayload, Event):
    """A ``thought`` event as a caller appends it."""

    type: Literal["thought"] = "thought"


class ActionEvent(_ActionPayload, Event):
    """A ``action`` event as a caller appends it."""

    type: Literal["action"] = "action"


class ObservationEvent(_ObservationPayload, Event):
    """A ``observation`` event as a caller appends it."""

    type: Literal["observation"] = "observation"


class CompactionEvent(_CompactionPayload, Event):
    """A ``compaction`` event as a caller appends it."""

    type: Literal["compaction"] = "compaction"


class ImportedEvent(_ImportedPayload, Event):
    """A ``imported`` event as a caller appends it."""

    type: Literal["imported"] = "imported"


class SessionStartedEvent(_SessionStartedPayload, Event):
    """A ``session_started`` event as airsspec appends it."""

    type: Literal["session_started"] = "session_started"


class SessionEndedEvent(_SessionEndedPayload, Event):
    """A ``session_ended`` event as airsspec appends it."""

    type: Literal["session_ended"] = "session_ended"


class PhaseChangedEvent(_PhaseChangedPayload, Event):
    """A ``phase_changed`` event as airsspec appends it."""

    type: Literal["phase_changed"] = "phase_changed"


class LearningEvent(_LearningPayload, Event):
    """A ``learning`` event as airsspec appends it."""

    type: Literal["learning"] = "learning"


class ExtractedEvent(_ExtractedPayload, Event):
    """A ``extracted`` event as airsspec appends it."""

    type: Literal["extracted"] = "extracted"


class LearningFeedbackEvent(_LearningFeedbackPayload, Event):
    """A ``learning_feedback`` event as airsspec appends it."""

    type: Literal["learning_feedback"] = "learning_feedback"


class MemoryAccessedEvent(_MemoryAccessedPayload, Event):
    """A ``memory_accessed`` event as airsspec appends it."""

    type: Literal["memory_accessed"] = "memory_accessed"


class ArchivedEvent(_ArchivedPayload, Event):
    """A ``archived`` event as airsspec appends it."""

    type: Literal["archived"] = "archived"


class RestoredEvent(_RestoredPayload, Event):
    """A ``restored`` event as airsspec appends it."""

    type: Literal["restored"] = "restored"


class SourceIndexedEvent(_SourceIndexedPayload, Event):
    """A ``source_indexed`` event as airsspec appends it."""

    type: Literal["source_indexed"] = "source_indexed"


class ForgottenEvent(_ForgottenPayload, Event):
    """A ``forgotten`` event as airsspec appends it."""

    type: Literal["forgotten"] = "forgotten"


MEMORY_TYPES: dict[str, str] = {
    "session_started": "session API",
    "session_ended": "session API",
    "phase_changed": "session API",
    "learning": "learnings API",
    "extracted": "extractor",
    "learning_feedback": "learnings API",
    "memory_accessed": "context builder",
    "archived": "housekeeping",
    "restored": "housekeeping",
    "source_indexed": "source registry",
    "forgotten": "privacy API",
}
"""The memory-management types (schema version 2) and the part of airsspec that writes each."""

SYSTEM_TYPES: dict[str, str] = {"compaction": "compactor", **MEMORY_TYPES}
"""Event types only airsspec's own writers append (type -> writer); ``append`` and ``import``
refuse them, so a hand-typed compaction can never reach the library or the hot window."""

IMPORTER_FIELDS = frozenset({"origin"})
"""Fields of an input event only importers (and airsspec's own writers) set: ``append``
refuses them, so a hand-written ``origin`` can never pass for an imported record."""

INPUT_TYPES: dict[str, type[Event]] = {
    "user": UserEvent,
    "assistant": AssistantEvent,
    "thought": ThoughtEvent,
    "action": ActionEvent,
    "observation": ObservationEvent,
    "compaction": CompactionEvent,
    "imported": ImportedEvent,
    "session_started": SessionStartedEvent,
    "session_ended": SessionEndedEvent,
    "phase_changed": PhaseChangedEvent,
    "learning": LearningEvent,
    "extracted": ExtractedEvent,
    "learning_feedback": LearningFeedbackEvent,
    "memory_accessed": MemoryAccessedEvent,
    "archived": ArchivedEvent,
    "restored": RestoredEvent,
    "source_indexed": SourceIndexedEvent,
    "forgotten": ForgottenEvent,
}


# --------------------------------------------------------------------------- stored records


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


class UserRecord(_UserPayload, Record):
    """A stored ``user`` record."""

    type: Literal["user"]


class AssistantRecord(_AssistantPayload, Record):
    """A stored ``assistant`` record."""

    type: Literal["assistant"]


class ThoughtRecord(_ThoughtPayload, Record):
    """A stored ``thought`` record."""

    type: Literal["thought"]


class ActionRecord(_ActionPayload, Record):
    """A stored ``action`` record."""

    type: Literal["action"]


class ObservationRecord(_ObservationPayload, Record):
    """A stored ``observation`` record."""

    type: Literal["observation"]


class CompactionRecord(_CompactionPayload, Record):
    """A stored ``compaction`` record."""

    type: Literal["compaction"]


class ImportedRecord(_ImportedPayload, Record):
    """A stored ``imported`` record."""

    type: Literal["imported"]


class SessionStartedRecord(_SessionStartedPayload, Record):
    """A stored ``session_started`` record."""

    type: Literal["session_started"]


class SessionEndedRecord(_SessionEndedPayload, Record):
    """A stored ``session_ended`` record."""

    type: Literal["session_ended"]


class PhaseChangedRecord(_PhaseChangedPayload, Record):
    """A stored ``phase_changed`` record."""

    type: Literal["phase_changed"]


class LearningRecord(_LearningPayload, Record):
    """A stored ``learning`` record."""

    type: Literal["learning"]


class ExtractedRecord(_ExtractedPayload, Record):
    """A stored ``extracted`` record."""

    type: Literal["extracted"]


class LearningFeedbackRecord(_LearningFeedbackPayload, Record):
    """A stored ``learning_feedback`` record."""

    type: Literal["learning_feedback"]


class MemoryAccessedRecord(_MemoryAccessedPayload, Record):
    """A stored ``memory_accessed`` record."""

    type: Literal["memory_accessed"]


class ArchivedRecord(_ArchivedPayload, Record):
    """A stored ``archived`` record."""

    type: Literal["archived"]


class RestoredRecord(_RestoredPayload, Record):
    """A stored ``restored`` record."""

    type: Literal["restored"]


class SourceIndexedRecord(_SourceIndexedPayload, Record):
    """A stored ``source_indexed`` record."""

    type: Literal["source_indexed"]


class ForgottenRecord(_ForgottenPayload, Record):
    """A stored ``forgotten`` record."""

    type: Literal["forgotten"]


class UnknownRecord(Record):
    """A record whose ``type`` this version does not know; every field is kept."""


RECORD_TYPES: dict[str, type[Record]] = {
    "user": UserRecord,
    "assistant": AssistantRecord,
    "thought": ThoughtRecord,
    "action": ActionRecord,
    "observation": ObservationRecord,
    "compaction": CompactionRecord,
    "imported": ImportedRecord,
    "session_started": SessionStartedRecord,
    "session_ended": SessionEndedRecord,
    "phase_changed": PhaseChangedRecord,
    "learning": LearningRecord,
    "extracted": ExtractedRecord,
    "learning_feedback": LearningFeedbackRecord,
    "memory_accessed": MemoryAccessedRecord,
    "archived": ArchivedRecord,
    "restored": RestoredRecord,
    "source_indexed": SourceIndexedRecord,
    "forgotten": ForgottenRecord,
}


@cache
def _record_adapter() -> TypeAdapter[Any]:
    """Built on first use (a command that only appends never needs it)."""
    members = tuple(RECORD_TYPES.values())
    return TypeAdapter(Annotated[Union[members], Field(discriminator="type")])  # noqa: UP007


def record_validator() -> Any:
    """The fast validator of known record types (``validate_json(line) -> Record``); raises
    ``ValidationError`` for anything else, including unknown types (use ``parse_record``)."""
    return _record_adapter().validator.validate_json


def parse_record(line: bytes | str) -> Record:
    """Validate one stored line (JSON) into its record model.

    Raises ``ValidationError`` (or ``ValueError`` for bad JSON) when the line is not a record.
    """
    try:
        return _record_adapter().validate_json(line)
    except ValidationError as exc:
        errors = exc.errors()
        if any(err["type"] == "union_tag_invalid" for err in errors):
            return UnknownRecord.model_validate_json(line)
        if errors[0]["type"] == "json_invalid" and "recursion" in errors[0]["msg"]:
            return _parse_deep(line)
        raise


def _parse_deep(line: bytes | str) -> Record:
    """A record nested deeper than pydantic's JSON parser goes (200 levels), stored before
    input was limited to ``MAX_DEPTH``: parsed by orjson (1,024 levels) and validated as
    Python, so it stays readable, verifiable and replayable."""
    data = orjson.loads(line)
    try:
        return _record_adapter().validate_python(data)
    except ValidationError as exc:
        if any(err["type"] == "union_tag_invalid" for err in exc.errors()):
            return UnknownRecord.model_validate(data)
        raise


def record_from_dict(data: dict[str, Any]) -> Record:
    """Build a record model from an already-validated body (used right after writing)."""
    return _model_validator(RECORD_TYPES.get(data["type"], UnknownRecord))(data)


@cache
def _model_validator(cls: type[BaseModel]) -> Any:
    """``cls.model_validate`` without its Python wrapper (a third of a small record's cost);
    the models defer building, so the first call builds it."""
    cls.model_rebuild()
    return cls.__pydantic_validator__.validate_python


@cache
def input_adapter() -> TypeAdapter[list[Event]]:
    """Validates a whole batch of input events in one call (``validate_python``) and dumps the
    models back to dicts in one call (``dump_python``)."""
    members = tuple(INPUT_TYPES.values())
    return TypeAdapter(list[Annotated[Union[members], Field(discriminator="type")]])  # noqa: UP007


_OMIT_WHEN_NONE = ("id", "ts", "meta", "action_id", "origin", *_ScopeFields.model_fields)
"""Optional fields left out of a stored record rather than stored as null."""


def _holds_model(annotation: Any) -> bool:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return True
    return any(_holds_model(arg) for arg in get_args(annotation))


@cache
def _nested_fields() -> dict[str, dict[str, Any]]:
    """For each input type, the fields whose values may hold models (``origin``, ``chunks``
    ...), with the serializer that dumps them."""
    return {
        kind: {
            name: TypeAdapter(field.annotation).serializer.to_python
            for name, field in cls.model_fields.items()
            if _holds_model(field.annotation)
        }
        for kind, cls in INPUT_TYPES.items()
    }


@cache
def _nested_names() -> frozenset[str]:
    """The fields of any input type whose values may hold models."""
    return frozenset(name for fields in _nested_fields().values() for name in fields)


def _as_bodies(validated: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Validated input fields (fresh dicts, changed in place) as the bodies the log stores:
    nested models dumped as pydantic's serializer dumps them, None-valued optional fields
    left out (two C-speed tests pass over a body with neither, the common case)."""
    nested, disjoint = _nested_fields(), _nested_names().isdisjoint
    for fields in validated:
        if disjoint(fields) and None not in fields.values():
            continue
        for name, dump in nested[fields["type"]].items():
            if fields.get(name):
                fields[name] = dump(fields[name])
        _drop_none(fields)
    return validated


def _drop_none(fields: dict[str, Any]) -> None:
    """Leave out the optional fields given as None (``_OMIT_WHEN_NONE``)."""
    if None in fields.values():
        for name in _OMIT_WHEN_NONE:
            if name in fields and fields[name] is None:
                del fields[name]


def event_bodies(models: list[Event]) -> list[dict[str, Any]]:
    """Validated input events as the bodies the log stores (no envelope yet), optional fields
    that are None left out (``_OMIT_WHEN_NONE``). A property test holds them equal to what
    pydantic's serializer gives."""
    return _as_bodies([model.__dict__.copy() for model in models])


def _without_none(schema: Any) -> Any:
    """``schema`` with its ``nullable`` layer removed (under a field validator too)."""
    if schema["type"] == "nullable":
        return schema["schema"]
    if schema["type"].startswith("function-") and "schema" in schema:
        return {**schema, "schema": _without_none(schema["schema"])}
    raise TypeError(f"expected a nullable schema, got {schema['type']}")


def _dict_schema(cls: type[BaseModel], none_given: bool) -> Any:
    """``cls``'s own core schema, rewritten to validate into the body the log stores, as a
    plain dict (a typed dict with the same fields, validators, defaults and extra-field rule):
    making a model per event only to copy its fields back cost a third of an append. Values
    that may hold models are dumped as pydantic's serializer dumps them, as each is validated.
    The optional fields in ``_OMIT_WHEN_NONE`` are left out when not given, as the log stores
    them; unless ``none_given``, one given as None is refused (the common case's validator:
    ``input_bodies`` falls back to the other, then drops them)."""
    cls.model_rebuild()
    schema = cls.__pydantic_core_schema__
    if schema["type"] != "model" or schema["schema"]["type"] != "model-fields":
        raise TypeError(f"{cls.__name__}: expected a plain model schema, got {schema['type']}")
    nested = _nested_fields()[cls.model_fields["type"].default]
    fields = {}
    for name, field in schema["schema"]["fields"].items():
        inner = field["schema"]
        if field.get("serialization_exclude") or field.get("validation_alias"):
            raise TypeError(f"{cls.__name__}.{name}: excluded or aliased fields are not handled")
        has_default = inner["type"] == "default"
        omitted = has_default and name in _OMIT_WHEN_NONE and inner.get("default", ...) is None
        if omitted:
            inner = inner["schema"] if none_given else _without_none(inner["schema"])
        if name in nested:
            inner = core_schema.no_info_after_validator_function(nested[name], inner)
        fields[name] = core_schema.typed_dict_field(inner, required=not has_default)
    return core_schema.typed_dict_schema(fields, config=schema.get("config"))


@cache
def _input_validator(none_given: bool) -> SchemaValidator:
    """One validator for a batch of input dicts, derived from the event models."""
    choices = {kind: _dict_schema(cls, none_given) for kind, cls in INPUT_TYPES.items()}
    union = core_schema.tagged_union_schema(choices, discriminator="type")
    return SchemaValidator(core_schema.list_schema(union))


def input_bodies(items: list[Any]) -> list[dict[str, Any]]:
    """Validate a batch of input events (dicts, in one call) and return the bodies the log
    stores, equal to ``event_bodies`` of the same events as models; raises
    ``ValidationError`` as ``input_adapter`` does, with the same error locations.

    The first validator refuses an optional field given as None, so what it returns is
    stored as it is; a batch it refuses is validated again by one that takes them (and
    raises the errors of an invalid batch), and its Nones are dropped."""
    try:
        return _input_validator(none_given=False).validate_python(items)
    except ValidationError:
        validated = _input_validator(none_given=True).validate_python(items)
    for fields in validated:
        _drop_none(fields)
    return validated


def validate_event(data: Event | dict[str, Any]) -> Event:
    """Validate one input event (a dict or an ``Event``); raise ``ValidationError``/``KeyError``."""
    if isinstance(data, Event):
        return data
    kind = data.get("type") if isinstance(data, dict) else None
    if not isinstance(kind, str) or kind not in INPUT_TYPES:
        allowed = ", ".join(sorted(INPUT_TYPES))
        raise UnknownEventTypeError(
            f"unknown event type {kind!r}; allowed: {allowed}"
            if kind is not None
            else f"missing 'type'; allowed: {allowed}"
        )
    return INPUT_TYPES[kind].model_validate(data)


MESSAGE_TYPES_DEFAULT = ("user", "assistant", "thought", "action", "observation")
