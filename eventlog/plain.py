"""Input events and stored records as plain dicts, checked without pydantic.

``input_bodies`` runs the checks emitted from the catalog (``eventlog.fast_input``) on an
append's input, so an append of plainly valid events imports no pydantic (``eventlog.prepare``).

A stored line is what the record models wrote, so a command that prints a session (``replay``)
need not build a model per line: ``stored_record`` loads the line with orjson and checks it
with the checks emitted from the catalog (``eventlog.fast_input``, the same ones an append's
input passes) plus the stored envelope's fields. The dict it returns has the body's defaults
filled in as the model would have them. Anything the checks are not certain of (an unknown
type, an extra key, a sealed body, a value pydantic would coerce) returns None: the caller
validates that line with the models, so a corrupt line is refused as before.
"""

from __future__ import annotations

from typing import Any

import orjson

from eventlog.fast_input import CHECKS, ENVELOPE, SCHEMA_VERSION
from eventlog.field_check import ABSENT, REFUSED, Check

_Checks = tuple[tuple[str, Check], ...]
_PLANS: dict[tuple[str, tuple[str, ...]], _Checks] = {}
_MAX_PLANS = 4096  # distinct (type, keys) remembered: a few per type in practice


def _plan(kind: str, keys: tuple[str, ...]) -> _Checks | None:
    """The checks of an event of type ``kind`` whose keys are ``keys``: the envelope's fields'
    it gives (one it does not give stores nothing), then the type's own; None when a key is
    none of the type's. Remembered, so an event pays only for the envelope's fields it has."""
    known = CHECKS.get(kind)
    if known is None or not known[0].issuperset(keys):
        return None
    checks = tuple(check for check in ENVELOPE if check[0] in keys) + known[1]
    if len(_PLANS) < _MAX_PLANS:
        _PLANS[kind, keys] = checks
    return checks


def input_bodies(items: list[Any]) -> list[dict[str, Any]] | None:
    """The bodies of ``items`` (input events) when every one is a dict the checks accept;
    None as soon as one is not (the caller validates the batch with pydantic)."""
    bodies = []
    for item in items:
        if type(item) is not dict:
            return None
        kind = item.get("type")
        if type(kind) is not str:
            return None
        keys = tuple(item)
        checks = _PLANS.get((kind, keys))
        if checks is None and (checks := _plan(kind, keys)) is None:
            return None
        body: dict[str, Any] = {"type": kind}  # the checks fill in the rest, in order
        for name, field in checks:
            value = field(item.get(name, ABSENT))
            if value is REFUSED:
                return None
            if value is not ABSENT:
                body[name] = value
        bodies.append(body)
    return bodies


class Stored(dict[str, Any]):
    """A stored record as its dict, its fields also read as attributes (``record.seq``), so
    code written for the models (bounds, the reader's checks) reads it unchanged; a field the
    line omits reads as None, as the models' optional fields default."""

    __slots__ = ()

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return self.get(name)


_STORED = ("v", "session", "seq", "ts", "prev", "hash", "batch", "origin")
"""The envelope fields a stored record has beyond its input event's."""


def _origin_ok(origin: Any) -> bool:
    """``origin`` as ``eventlog.schema.envelopes.Origin`` stores it (no coercion)."""
    if type(origin) is not dict or not origin.keys() <= _ORIGIN_KEYS:
        return False
    index = origin.get("index")
    suffix = origin.get("suffix")
    return (
        all(type(origin.get(k)) is str for k in ("format", "source", "sha256", "text"))
        and type(index) is int
        and index >= 0
        and type(origin.get("prefix", "")) is str
        and (suffix is None or type(suffix) is str)
    )


_ORIGIN_KEYS = frozenset({"format", "source", "index", "sha256", "text", "prefix", "suffix"})


def stored_record(line: bytes) -> Stored | None:
    """The record stored as ``line``, with its body's defaults, when every field is plainly
    valid; None when only the models can tell (raises ``orjson.JSONDecodeError`` on bad
    JSON)."""
    data = orjson.loads(line)
    if type(data) is not dict:
        return None
    seq, prev, batch = data.get("seq"), data.get("prev"), data.get("batch")
    if not (
        data.get("v") == SCHEMA_VERSION
        and type(data.get("session")) is str
        and type(seq) is int
        and seq >= 1
        and type(data.get("ts")) is str
        and type(data.get("hash")) is str
        and type(data.get("id")) is str
        and (prev is None or type(prev) is str)
        and (
            batch is None
            or (type(batch) is list and len(batch) == 2 and all(type(b) is int for b in batch))
        )
        and ("origin" not in data or _origin_ok(data["origin"]))
    ):
        return None
    bodies = input_bodies([{k: v for k, v in data.items() if k not in _STORED}])
    if bodies is None:
        return None
    record = Stored(data)
    record.update(bodies[0])
    if batch is not None:
        record["batch"] = tuple(batch)
    return record


def modelled(record: Any) -> Any:
    """``record`` as its model: a ``Stored`` dict is made one (pydantic imported then), a
    model is itself. For the fold or display of a type the plain path does not cover."""
    if not isinstance(record, Stored):
        return record
    from eventlog.schema import validation

    return validation.record_from_dict(dict(record))
