"""One declaration per event type: the catalog declares each type once, and its input event,
stored record, registries, validators and JSON schema are all derived from that declaration."""

from __future__ import annotations

import re
from typing import Annotated

import pytest
from pydantic import BaseModel

import eventlog.schema as schema
from eventlog.schema import (
    CATALOG,
    CONVERSATION_TYPES,
    INPUT_TYPES,
    MEMORY_TYPES,
    MESSAGE_TYPES,
    RECORD_TYPES,
    SYSTEM_TYPES,
    Category,
    Event,
    Record,
    UnknownEventTypeError,
    UnknownRecord,
    derive,
    event_type,
    input_adapter,
    input_bodies,
    parse_record,
    validate_event,
)
from eventlog.schema.catalog import OMIT_NONE
from tests.conftest import REPO

SCHEMA_SOURCES = sorted((REPO / "eventlog" / "schema").glob("*.py"))
CODE = [REPO / part for part in ("eventlog", "projections", "compactor", "airsspec", "bench")]


def test_each_event_type_is_declared_once_and_named_nowhere_else_in_the_schema() -> None:
    texts = {path.name: path.read_text(encoding="utf-8") for path in SCHEMA_SOURCES}
    for name in CATALOG:
        assert texts["catalog.py"].count(f'@event_type("{name}"') == 1, name
        assert [  # records.py is emitted from the catalog (test_schema_emit holds it current)
            file
            for file, text in texts.items()
            if f'"{name}"' in text and file not in ("catalog.py", "records.py")
        ] == [], name


def test_every_model_and_registry_is_derived_from_the_declarations() -> None:
    assert list(INPUT_TYPES) == list(RECORD_TYPES) == list(CATALOG)
    for name, declared in CATALOG.items():
        event, record = INPUT_TYPES[name], RECORD_TYPES[name]
        assert issubclass(event, declared.fields) and issubclass(event, Event)
        assert issubclass(record, declared.fields) and issubclass(record, Record)
        own = set(declared.fields.model_fields)
        assert set(event.model_fields) == own | set(Event.model_fields)
        assert set(record.model_fields) == own | set(Record.model_fields)
        assert event.model_fields["type"].default == name
        assert getattr(schema, event.__name__) is event  # importable by its derived name
        assert getattr(schema, record.__name__) is record
    assert {n: t.writer for n, t in CATALOG.items() if t.writer is not None} == SYSTEM_TYPES
    assert {
        n: SYSTEM_TYPES[n] for n, t in CATALOG.items() if t.category == "memory"
    } == MEMORY_TYPES
    assert tuple(n for n, t in CATALOG.items() if t.category == "message") == MESSAGE_TYPES
    assert {*MESSAGE_TYPES, "imported"} == CONVERSATION_TYPES


def test_a_type_declared_in_a_copy_of_the_catalog_gets_every_derived_form() -> None:
    catalog = dict(CATALOG)
    before = dict(CATALOG)

    @event_type("weather", Category.MESSAGE, catalog=catalog)
    class _Weather(BaseModel):
        forecast: str
        rain: Annotated[float | None, OMIT_NONE] = None

    @event_type("forecast_checked", Category.MEMORY, writer="forecaster", catalog=catalog)
    class _ForecastChecked(BaseModel):
        station: str

    derived = derive(catalog)
    assert before == CATALOG  # the copy only
    event, record = derived.events["weather"], derived.records["weather"]
    assert (event.__name__, record.__name__) == ("WeatherEvent", "WeatherRecord")
    assert derived.events["forecast_checked"].__name__ == "ForecastCheckedEvent"
    assert derived.messages == (*MESSAGE_TYPES, "weather")
    assert derived.conversation == CONVERSATION_TYPES | {"weather"}
    assert derived.system == {**SYSTEM_TYPES, "forecast_checked": "forecaster"}
    assert derived.memory == {**MEMORY_TYPES, "forecast_checked": "forecaster"}
    assert "rain" in derived.omit_when_none and "rain" not in schema.SCHEMA.omit_when_none
    assert {"WeatherEvent", "WeatherRecord"} <= set(derived.models())

    given = [{"type": "weather", "forecast": "sun", "rain": None}]
    assert input_bodies(given, schema=derived) == [{"type": "weather", "forecast": "sun"}]
    assert input_adapter(schema=derived).validate_python(given)[0] == event(forecast="sun")
    assert "WeatherEvent" in input_adapter(schema=derived).json_schema()["$defs"]
    assert validate_event(given[0], schema=derived) == event(forecast="sun")
    with pytest.raises(UnknownEventTypeError, match=r"allowed: .*weather"):
        validate_event({"type": "hail"}, schema=derived)
    with pytest.raises(UnknownEventTypeError):
        validate_event(given[0])  # this version's schema knows no such type

    line = (
        b'{"v":2,"id":"e1","session":"s","seq":1,"ts":"2026-01-01T00:00:00Z","type":"weather",'
        b'"prev":null,"hash":"h","forecast":"sun"}'
    )
    assert type(parse_record(line, schema=derived)) is record
    assert type(parse_record(line)) is UnknownRecord

    with pytest.raises(TypeError, match="declared twice"):
        event_type("weather", Category.MESSAGE, catalog=catalog)(_Weather)


def test_the_message_types_are_spelled_only_by_their_declarations() -> None:
    """No tuple, list or set in the code spells the message types again: they import
    ``MESSAGE_TYPES`` (or ``CONVERSATION_TYPES``), derived from the declarations."""
    spelled = re.compile(r'"user",\s*"assistant",\s*"thought",\s*"action",\s*"observation"')
    found = [
        f"{path.relative_to(REPO)}:{text[: match.start()].count(chr(10)) + 1}"
        for root in CODE
        for path in sorted(root.rglob("*.py"))
        if path.name != "settings_table.py"  # emitted from the settings models (--check holds it)
        for text in [path.read_text(encoding="utf-8")]
        for match in spelled.finditer(text)
        # the commented airsspec.toml shows the default; test_checkout_config holds it equal
        if not text[: match.start()].endswith("\n# message_types = [")
    ]
    assert found == []
