"""What an append stores, before it is encoded: input events validated in one call per batch
(``prepare_events``, ``validate_input``), types and fields only the system or importers write
refused, canonical JSON's limits checked, secrets redacted and content sealed
(``bodies_to_append``). Every log appends through it, so all store the same bytes.

Plainly valid input is checked by the catalog's emitted plain checks (``eventlog.fast_input``),
without importing pydantic; whatever they do not accept is validated by pydantic, which
decides (and words every error), so both give the same bodies."""

from __future__ import annotations

import sys
from collections.abc import Iterable
from itertools import repeat
from operator import itemgetter
from typing import TYPE_CHECKING, Any

from eventlog.canonical import batch_json, refuse_deep
from eventlog.errors import InvalidEventError, field_of
from eventlog.exact_json import MAX_DEPTH
from eventlog.fast_input import IMPORTER_FIELDS, SYSTEM_TYPES
from eventlog.layout import check_writer
from eventlog.plain import input_bodies

if TYPE_CHECKING:
    from pydantic import ValidationError

    from eventlog.schema import Event


def _error_text(err: Any) -> str:
    reason = "unknown field" if err["type"] == "extra_forbidden" else err["msg"]
    return f"field '{field_of(err)}': {reason}"


def _refuse_system(bodies: list[dict[str, Any]], system: bool, imported: bool = False) -> None:
    # One C-level membership pass per importer field (there is one: ``origin``), not a set
    # operation per body: this runs on every batch.
    given = dict.__contains__
    if not (system or imported) and any(
        any(map(given, bodies, repeat(field))) for field in IMPORTER_FIELDS
    ):
        index, body = next(
            (i, b) for i, b in enumerate(bodies) if not IMPORTER_FIELDS.isdisjoint(b)
        )
        field = min(IMPORTER_FIELDS.intersection(body))
        raise InvalidEventError(
            "set only by 'airsspec import' (it names the source record an event was imported "
            "from); leave it out",
            index=index,
            field=field,
        )
    if system or SYSTEM_TYPES.keys().isdisjoint(map(itemgetter("type"), bodies)):
        return
    for index, body in enumerate(bodies):
        kind = body["type"]
        if kind in SYSTEM_TYPES:
            raise InvalidEventError(
                f"{kind!r} events are written by airsspec itself (the {SYSTEM_TYPES[kind]}), "
                "never appended or imported",
                index=index,
                field="type",
            )


def _invalid(exc: ValidationError) -> InvalidEventError:
    """The first invalid event of a batch, as ``InvalidEventError`` naming its fields."""
    from eventlog.schema import validation

    errors = exc.errors()
    index = int(errors[0]["loc"][0])  # a batch's errors start at the item's position
    mine = [err for err in errors if err["loc"][:1] == (index,)]
    first = mine[0]
    if first["type"] in ("union_tag_invalid", "union_tag_not_found"):
        kind = first["input"].get("type") if isinstance(first["input"], dict) else None
        return InvalidEventError(validation.unknown_type(kind), index=index, field="type")
    if first["type"] == "model_attributes_type":
        return InvalidEventError("an event must be a JSON object", index=index)
    located = [{**err, "loc": err["loc"][2:]} for err in mine]  # drop (index, tag)
    parts = [_error_text(err) for err in located]
    if len(parts) == 1:
        return InvalidEventError(
            parts[0].split(": ", 1)[1], index=index, field=field_of(located[0])
        )
    return InvalidEventError("; ".join(parts), index=index)


def prepare_events(
    events: Iterable[Event | dict[str, Any]], *, system: bool = False, imported: bool = False
) -> list[dict[str, Any]]:
    """Validate input events (dicts in one batch call; ``Event`` models were validated when
    they were made) and return their body fields, without the envelope.

    Raises ``InvalidEventError`` for the first invalid event, naming its index and field; a type
    in ``SYSTEM_TYPES`` is refused unless ``system`` is set, a field in ``IMPORTER_FIELDS``
    unless ``imported`` (or ``system``) is. Nesting deeper than ``MAX_DEPTH`` is refused
    when the batch is encoded (``append_many``), on the JSON it encodes anyway.
    """
    items = events if isinstance(events, list) else list(events)
    bodies = input_bodies(items) if items and _plain_first() else None
    if bodies is None:
        bodies = _validated(items)
    _refuse_system(bodies, system, imported)
    return bodies


def _plain_first() -> bool:
    """Whether to try the plain checks first: until pydantic's input validator is built in
    this process. Once it is (a long process that validated an unusual event), it is the
    faster of the two, by a fifth of a microsecond an event, and gives the same bodies."""
    validation = sys.modules.get("eventlog.schema.validation")
    return validation is None or not validation.input_built()


def _validated(items: list[Any]) -> list[dict[str, Any]]:
    """``prepare_events``'s bodies of ``items`` by pydantic: dicts in one batch call, ``Event``
    models as they were validated when made."""
    from pydantic import ValidationError

    from eventlog.schema import Event, validation

    kinds = set(map(type, items))
    if kinds == {dict}:
        try:
            return validation.input_bodies(items)
        except ValidationError as exc:
            raise _invalid(exc) from exc
    if len(models := [e for e in items if isinstance(e, Event)]) == len(items):
        return validation.event_bodies(models)  # models need no validation
    # a mix (or not events at all): validate all but the models
    raw = [i for i, e in enumerate(items) if not isinstance(e, Event)]
    try:
        validated = validation.input_bodies([items[i] for i in raw])
    except ValidationError as exc:
        error = _invalid(exc)
        raise InvalidEventError(error.message, index=raw[error.index], field=error.field) from exc
    given = iter(validated)
    return [validation.event_bodies([e])[0] if isinstance(e, Event) else next(given) for e in items]


def checked_input(
    event: dict[str, Any], *, system: bool = False, imported: bool = False
) -> Event | dict[str, Any]:
    """One input event checked as ``validate_input`` checks it: the dict itself when the plain
    checks accept it (``append_many`` checks it again, as cheaply), else its validated model;
    raises ``InvalidEventError`` as ``prepare_events`` does."""
    bodies = input_bodies([event])
    if bodies is None:
        return validate_input(event, system=system, imported=imported)
    _refuse_system(bodies, system, imported)
    refuse_deep(bodies)
    return event


def validate_input(
    event: Event | dict[str, Any], *, system: bool = False, imported: bool = False
) -> Event:
    """One input event as its validated model (what ``append_many`` then takes without
    validating again); raises ``InvalidEventError`` as ``prepare_events`` does."""
    from pydantic import ValidationError

    from eventlog.schema import Event, validation

    if isinstance(event, Event):
        model = event
    else:
        try:
            (model,) = validation.input_adapter().validate_python([event])
        except ValidationError as exc:
            raise _invalid(exc) from exc
    body = validation.event_bodies([model])
    _refuse_system(body, system, imported)
    refuse_deep(body)
    return model


def bodies_to_append(
    log: Any,
    session: str,
    events: Iterable[Event | dict[str, Any]],
    system: bool,
    keep_secrets: bool,
    imported: bool = False,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]] | None]:
    """What an append of ``events`` to ``session`` stores, before encoding: the bodies,
    validated (``prepare_events``), refused if canonical JSON cannot hold them or they nest too
    deep, redacted by ``log.redactor`` unless ``keep_secrets``, and sealed by ``log.sealer``;
    with them, the bodies as they were before sealing (None when nothing was sealed)."""
    check_writer(session, system=system)
    bodies = prepare_events(events, system=system, imported=imported)
    if not bodies:
        return [], None
    data = batch_json(bodies, MAX_DEPTH)  # refuses what canonical JSON cannot hold
    if log.redactor is not None and not keep_secrets:
        log.redactor.redact_all(bodies, data)
    clear = None
    if log.sealer is not None and log.sealer.mode != "off":  # before encoding: the chain
        # covers the ciphertext (a sealer that is off only opens what was sealed before)
        clear = [dict(body) for body in bodies]
        log.sealer.seal_all(session, bodies)
    return bodies, clear
