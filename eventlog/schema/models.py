"""The envelopes, and the models and registries derived from the catalog of event types.

Every type declared in ``eventlog.schema.catalog`` becomes, by ``derive``, an input event
(its fields on the ``Event`` envelope, ``type`` defaulting to its name: ``UserEvent``) and a
stored record (its fields on the ``Record`` envelope, ``type`` required: ``UserRecord``), and
takes its place in the registries. ``SCHEMA`` is what this version's catalog derives; nothing
here names an event type.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Generic, Literal, TypeVar

from pydantic import BaseModel, create_model

from eventlog.schema import records
from eventlog.schema.catalog import (
    CATALOG,
    Category,
    EventType,
    class_name,
    event_doc,
    omitted_when_none,
    record_doc,
)
from eventlog.schema.envelopes import Event, Record

SCHEMA_VERSION = 2
"""2 added the memory-management types of sessions and learnings (``session_started`` ...
``restored``); a version-1 reader keeps them as ``UnknownRecord``."""

_HOME = "eventlog.schema"  # where the derived models are found by name (pickle, JSON schema)


def event_model(declared: EventType, module: str = _HOME) -> type[Event]:
    """The input event of a declared type: its fields on the ``Event`` envelope."""
    return _derived(declared, Event, event_doc(declared), declared.name, module)


def record_model(declared: EventType, module: str = _HOME) -> type[Record]:
    """The stored record of a declared type: its fields on the ``Record`` envelope."""
    return _derived(declared, Record, record_doc(declared), ..., module)


_E = TypeVar("_E", bound=BaseModel)


def _derived(
    declared: EventType, envelope: type[_E], doc: str, default: Any, module: str
) -> type[_E]:
    """The class named ``<Type><Envelope>``: the declared fields first (as emitted), on
    ``envelope``, ``type`` the declared name (``default``: its default, or ``...``)."""
    return create_model(
        f"{class_name(declared.name)}{envelope.__name__}",
        __base__=(declared.fields, envelope),  # type: ignore[arg-type]  # fields first
        __module__=module,
        __doc__=doc,
        type=(Literal[declared.name], default),  # type: ignore[arg-type]  # a run-time Literal
    )


def emitted_class(name: str, module: str) -> type[Event] | type[Record]:
    """The class ``records.py`` declares as ``name`` (``UserEvent``, ``UserRecord`` ...),
    made as the statement written there makes it, in ``module``: what that module's
    ``__getattr__`` gives on first use."""
    for declared in CATALOG.values():
        stem = class_name(declared.name)
        if name == f"{stem}Event":
            return event_model(declared, module)
        if name == f"{stem}Record":
            return record_model(declared, module)
    raise AttributeError(f"module {module!r} has no attribute {name!r}")


_M = TypeVar("_M")


class Derived(Mapping[str, type[_M]], Generic[_M]):
    """Type -> a derived class, in the catalog's order, each made on first use: a command
    that reads a few types makes a few classes (a pydantic class costs about half a
    millisecond to make, and the catalog derives seventy)."""

    def __init__(self, catalog: Mapping[str, EventType], make: Callable[[EventType], Any]):
        self._catalog, self._make, self._made = catalog, make, dict[str, type[_M]]()

    def __getitem__(self, kind: str) -> type[_M]:
        made = self._made.get(kind)
        if made is None:  # threads asking at once each make one: all are given the first
            made = self._made.setdefault(kind, self._make(self._catalog[kind]))
        return made

    def __iter__(self) -> Iterator[str]:
        return iter(self._catalog)

    def __len__(self) -> int:
        return len(self._catalog)

    def __contains__(self, kind: object) -> bool:
        return kind in self._catalog


@dataclass(frozen=True, eq=False)
class Schema:
    """Everything derived from one catalog of event types (``derive``); compared and hashed by
    identity, so the validators built from it can be cached per schema."""

    catalog: Mapping[str, EventType]
    events: Mapping[str, type[Event]]
    """Type -> input event model, of every type (``INPUT_TYPES``)."""
    records: Mapping[str, type[Record]]
    """Type -> stored record model, of every type (``RECORD_TYPES``)."""
    system: dict[str, str]
    """Type -> its writer, of the types only airsspec appends (``SYSTEM_TYPES``)."""
    memory: dict[str, str]
    """Type -> its writer, of the memory-management types (``MEMORY_TYPES``)."""
    messages: tuple[str, ...]
    """The message types, in declaration order (``MESSAGE_TYPES``)."""
    conversation: frozenset[str]
    """The messages and the foreign records kept beside them (``CONVERSATION_TYPES``)."""
    state: frozenset[str]
    """An agent framework's state kept on the log (``STATE_TYPES``)."""
    omit_when_none: tuple[str, ...]
    """Optional input fields left out of a stored record when None (``OMIT_NONE``)."""

    def models(self) -> dict[str, type[BaseModel]]:
        """Every derived model by its class name (``UserEvent``, ``UserRecord`` ...)."""
        derived = [*self.events.values(), *self.records.values()]
        return {model.__name__: model for model in derived}


def derive(catalog: Mapping[str, EventType], *, emitted: ModuleType | None = None) -> Schema:
    """The models and registries of the types declared in ``catalog``: a type's classes are
    taken from ``emitted`` (the module ``eventlog.schema.emit`` wrote) when it holds them,
    made anew otherwise (a copy of the catalog in a test, a type declared but not yet
    emitted: ``tests/eventlog/test_schema_emit.py`` says to run the emitter)."""

    def made(t: EventType, kind: str, make: Callable[[EventType], type[Any]]) -> Any:
        found = getattr(emitted, f"{class_name(t.name)}{kind}", None)
        return found if found is not None else make(t)

    def named(*categories: Category) -> list[str]:
        return [t.name for t in catalog.values() if t.category in categories]

    system = {t.name: t.writer for t in catalog.values() if t.writer is not None}
    return Schema(
        catalog=catalog,
        events=Derived(catalog, lambda t: made(t, "Event", event_model)),
        records=Derived(catalog, lambda t: made(t, "Record", record_model)),
        system=system,
        memory={name: system[name] for name in named(Category.MEMORY)},
        messages=tuple(named(Category.MESSAGE)),
        conversation=frozenset(named(Category.MESSAGE, Category.IMPORTED)),
        state=frozenset(named(Category.STATE)),
        omit_when_none=omitted_when_none([Event, *(t.fields for t in catalog.values())]),
    )


SCHEMA = derive(CATALOG, emitted=records)
"""This version's schema."""
