"""Validating what is appended and what is read, with validators derived from a ``Schema``.

Input events are strict: an unknown field or type is an error, so a typo never reaches the log.
A stored line of a type this version does not know is kept as an ``UnknownRecord``. Every
function takes the schema to validate against (this version's, ``SCHEMA``, unless given);
validators are built on first use and cached per schema, so a command that only appends never
builds the record validator.
"""

from __future__ import annotations

from functools import cache
from typing import Annotated, Any, Union, get_args

import orjson
from pydantic import BaseModel, Field, TypeAdapter, ValidationError
from pydantic_core import SchemaValidator, core_schema

from eventlog.errors import UnknownEventTypeError as UnknownEventTypeError  # re-exported
from eventlog.schema.envelopes import Event, Record, UnknownRecord
from eventlog.schema.models import SCHEMA, Schema


def unknown_type(kind: Any, *, schema: Schema = SCHEMA) -> str:
    """What is said of an input event whose ``type`` is ``kind`` (None: missing), which names
    no type of ``schema``."""
    allowed = ", ".join(sorted(schema.events))
    if kind is None:
        return f"missing 'type'; allowed: {allowed}"
    return f"unknown event type {kind!r}; allowed: {allowed}"


# --------------------------------------------------------------------------- stored records


@cache
def _record_adapter(schema: Schema) -> TypeAdapter[Record]:
    members = tuple(schema.records.values())
    union: Any = Union[members]  # noqa: UP007  # a union of the schema's types, known at run time
    return TypeAdapter(Annotated[union, Field(discriminator="type")])


# Bytes of stored lines a process reads by type before it validates with the union of every
# record type: the union's one call per line is faster than dispatching by type in Python
# (about 1 us a line); building it (about 0.15 s) pays for itself over some 100k lines, and
# a process that has read this much is a long one (a projection, a verify).
UNION_PAST = 4 << 20
_read_by_type = 0  # bytes this process gave the typed validator so far


def record_validator(*, schema: Schema = SCHEMA, reading: int | None = None) -> Any:
    """The fast validator of known record types (``validate_json(line) -> Record``) for a read
    of ``reading`` bytes (None: unknown, a long read); raises ``ValidationError`` for anything
    else, including unknown types (use ``parse_record``).

    A short read (a command replaying a session, a hot window) validates each line by its own
    type's model, whose validator is built on first use: a stored line is canonical JSON (keys
    sorted, ``hash`` last), so its ``type`` is the last ``"type":"`` in it. A session of a few
    types builds a few validators, not the union of the whole catalog, which is most of a short
    command's time. A guess that names no known type, or whose model refuses the line, falls
    back to the union, which decides. A long read, any once the process has read
    ``UNION_PAST`` bytes so, and any once the union is built, uses the union."""
    global _read_by_type
    built = _record_adapter.cache_info().currsize > 0
    if built or reading is None or _read_by_type + reading > UNION_PAST:
        return _record_adapter(schema).validator.validate_json
    _read_by_type += reading
    return _typed_validator(schema)


@cache
def _typed_validator(schema: Schema) -> Any:
    records = schema.records
    marker = b'"type":"'
    skip = len(marker)
    by_type: dict[bytes, Any] = {}

    def validate_json(line: bytes) -> Record:
        at = line.rfind(marker)
        kind = line[at + skip : line.find(b'"', at + skip)] if at >= 0 else b""
        validate = by_type.get(kind)
        if validate is None:
            model = records.get(kind.decode(errors="replace"))
            if model is None:
                return _record_adapter(schema).validator.validate_json(line)  # type: ignore[no-any-return]
            model.model_rebuild()
            validate = by_type[kind] = model.__pydantic_validator__.validate_json
        try:
            return validate(line)  # type: ignore[no-any-return]
        except ValidationError:
            return _record_adapter(schema).validator.validate_json(line)  # type: ignore[no-any-return]

    return validate_json


def parse_record(line: bytes | str, *, schema: Schema = SCHEMA) -> Record:
    """Validate one stored line (JSON) into its record model.

    Raises ``ValidationError`` (or ``ValueError`` for bad JSON) when the line is not a record.
    """
    try:
        return _record_adapter(schema).validate_json(line)
    except ValidationError as exc:
        errors = exc.errors()
        if any(err["type"] == "union_tag_invalid" for err in errors):
            return UnknownRecord.model_validate_json(line)
        if errors[0]["type"] == "json_invalid" and "recursion" in errors[0]["msg"]:
            return _parse_deep(line, schema)
        raise


def _parse_deep(line: bytes | str, schema: Schema) -> Record:
    """A record nested deeper than pydantic's JSON parser goes (200 levels), stored before
    input was limited to ``MAX_DEPTH``: parsed by orjson (1,024 levels) and validated as
    Python, so it stays readable, verifiable and replayable."""
    data = orjson.loads(line)
    try:
        return _record_adapter(schema).validate_python(data)
    except ValidationError as exc:
        if any(err["type"] == "union_tag_invalid" for err in exc.errors()):
            return UnknownRecord.model_validate(data)
        raise


def record_from_dict(data: dict[str, Any], *, schema: Schema = SCHEMA) -> Record:
    """Build a record model from an already-validated body (used right after writing)."""
    record: Record = _model_validator(schema.records.get(data["type"], UnknownRecord))(data)
    return record


@cache
def _model_validator(cls: type[BaseModel]) -> Any:
    """``cls.model_validate`` without its Python wrapper (a third of a small record's cost);
    the models defer building, so the first call builds it."""
    cls.model_rebuild()
    return cls.__pydantic_validator__.validate_python


# --------------------------------------------------------------------------- input events


@cache
def _input_adapter(schema: Schema) -> TypeAdapter[list[Event]]:
    members = tuple(schema.events.values())
    union: Any = Union[members]  # noqa: UP007  # a union of the schema's types, known at run time
    return TypeAdapter(list[Annotated[union, Field(discriminator="type")]])


def input_adapter(*, schema: Schema = SCHEMA) -> TypeAdapter[list[Event]]:
    """Validates a whole batch of input events in one call (``validate_python``) and dumps the
    models back to dicts in one call (``dump_python``)."""
    return _input_adapter(schema)


def _holds_model(annotation: Any) -> bool:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return True
    return any(_holds_model(arg) for arg in get_args(annotation))


@cache
def _nested_fields(schema: Schema) -> dict[str, dict[str, Any]]:
    """For each input type, the fields whose values may hold models (``origin``, ``chunks``
    ...), with the serializer that dumps them."""
    return {
        kind: {
            name: TypeAdapter(
                Any if field.annotation is None else field.annotation
            ).serializer.to_python
            for name, field in cls.model_fields.items()
            if _holds_model(field.annotation)
        }
        for kind, cls in schema.events.items()
    }


@cache
def _nested_names(schema: Schema) -> frozenset[str]:
    """The fields of any input type whose values may hold models."""
    return frozenset(name for fields in _nested_fields(schema).values() for name in fields)


def _drop_none(fields: dict[str, Any], omit: tuple[str, ...]) -> None:
    """Leave out the optional fields given as None (``omit``: ``Schema.omit_when_none``)."""
    if None in fields.values():
        for name in omit:
            if name in fields and fields[name] is None:
                del fields[name]


def event_bodies(models: list[Event], *, schema: Schema = SCHEMA) -> list[dict[str, Any]]:
    """Validated input events as the bodies the log stores (no envelope yet), optional fields
    that are None left out (``Schema.omit_when_none``): nested models dumped as pydantic's
    serializer dumps them (two C-speed tests pass over a body with neither, the common case).
    A property test holds them equal to what pydantic's serializer gives."""
    bodies = [model.__dict__.copy() for model in models]
    nested, disjoint = _nested_fields(schema), _nested_names(schema).isdisjoint
    for fields in bodies:
        if disjoint(fields) and None not in fields.values():
            continue
        for name, dump in nested[fields["type"]].items():
            if fields.get(name):
                fields[name] = dump(fields[name])
        _drop_none(fields, schema.omit_when_none)
    return bodies


def _without_none(schema: Any) -> Any:
    """``schema`` with its ``nullable`` layer removed (under a field validator too)."""
    if schema["type"] == "nullable":
        return schema["schema"]
    if schema["type"].startswith("function-") and "schema" in schema:
        return {**schema, "schema": _without_none(schema["schema"])}
    raise TypeError(f"expected a nullable schema, got {schema['type']}")


def _dict_schema(cls: type[BaseModel], none_given: bool, schema: Schema) -> Any:
    """``cls``'s own core schema, rewritten to validate into the body the log stores, as a
    plain dict (a typed dict with the same fields, validators, defaults and extra-field rule):
    making a model per event only to copy its fields back cost a third of an append. Values
    that may hold models are dumped as pydantic's serializer dumps them, as each is validated.
    The optional fields in ``omit_when_none`` are left out when not given, as the log stores
    them; unless ``none_given``, one given as None is refused (the common case's validator:
    ``input_bodies`` falls back to the other, then drops them)."""
    cls.model_rebuild()
    core = cls.__pydantic_core_schema__
    if core["type"] != "model" or core["schema"]["type"] != "model-fields":
        raise TypeError(f"{cls.__name__}: expected a plain model schema, got {core['type']}")
    nested = _nested_fields(schema)[cls.model_fields["type"].default]
    fields = {}
    for name, field in core["schema"]["fields"].items():
        inner = field["schema"]
        if field.get("serialization_exclude") or field.get("validation_alias"):
            raise TypeError(f"{cls.__name__}.{name}: excluded or aliased fields are not handled")
        has_default = inner["type"] == "default"
        omit = has_default and name in schema.omit_when_none and inner.get("default", ...) is None
        if omit:
            inner = inner["schema"] if none_given else _without_none(inner["schema"])
        if name in nested:  # dumped as given; a default (inside) is stored as it is filled
            dump = nested[name]
            if inner["type"] == "default":
                inner = {
                    **inner,
                    "schema": core_schema.no_info_after_validator_function(dump, inner["schema"]),
                }
            else:
                inner = core_schema.no_info_after_validator_function(dump, inner)
        fields[name] = core_schema.typed_dict_field(inner, required=not has_default)
    return core_schema.typed_dict_schema(fields, config=core.get("config"))


@cache
def _input_validator(schema: Schema, none_given: bool) -> SchemaValidator:
    """One validator for a batch of input dicts, derived from the event models."""
    choices = {kind: _dict_schema(cls, none_given, schema) for kind, cls in schema.events.items()}
    union = core_schema.tagged_union_schema(choices, discriminator="type")
    return SchemaValidator(core_schema.list_schema(union))


def input_built() -> bool:
    """Whether ``input_bodies``' validator is built in this process (for some schema)."""
    return _input_validator.cache_info().currsize > 0


def input_bodies(items: list[Any], *, schema: Schema = SCHEMA) -> list[dict[str, Any]]:
    """Validate a batch of input events (dicts, in one call) and return the bodies the log
    stores, equal to ``event_bodies`` of the same events as models; raises
    ``ValidationError`` as ``input_adapter`` does, with the same error locations.

    The first validator refuses an optional field given as None, so what it returns is
    stored as it is; a batch it refuses is validated again by one that takes them (and
    raises the errors of an invalid batch), and its Nones are dropped."""
    validated: list[dict[str, Any]]
    try:
        validated = _input_validator(schema, False).validate_python(items)
        return validated
    except ValidationError:
        validated = _input_validator(schema, True).validate_python(items)
    for fields in validated:
        _drop_none(fields, schema.omit_when_none)
    return validated


def validate_event(data: Event | dict[str, Any], *, schema: Schema = SCHEMA) -> Event:
    """Validate one input event (a dict or an ``Event``); raise ``ValidationError`` or
    ``UnknownEventTypeError``."""
    if isinstance(data, Event):
        return data
    kind = data.get("type") if isinstance(data, dict) else None
    if not isinstance(kind, str) or kind not in schema.events:
        raise UnknownEventTypeError(unknown_type(kind, schema=schema))
    return schema.events[kind].model_validate(data)
