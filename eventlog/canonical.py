"""Canonical JSON and record hashing.

Canonical JSON is UTF-8, keys sorted at every depth, no insignificant whitespace, floats in
shortest round-trip form (orjson's encoder). A record's ``hash`` is the SHA-256 (hex) of the
canonical JSON of the record without its ``hash`` key; ``prev`` is included, which chains a
session's records.

A stored line is the canonical JSON of the record body with ``"hash"`` appended as the last key,
then ``\\n``. The line is therefore a pure function of the body: ``verify`` recomputes it and
compares bytes, so any change to a stored byte is detected, even one that parses to the same value.
"""

from __future__ import annotations

import hashlib
import json
import math
from typing import Any

import orjson

from eventlog.errors import EventLogError

_OPTIONS = orjson.OPT_SORT_KEYS


class NotCanonicalizableError(EventLogError, ValueError):
    """The value cannot be expressed as canonical JSON (NaN, integers beyond 64 bits, ...).

    From ``encode_records``, ``index`` is the body's position and ``field`` the dotted path of
    the value when one can be named."""

    def __init__(self, message: str, *, index: int = 0, field: str | None = None) -> None:
        super().__init__(message)
        self.message, self.index, self.field = message, index, field


def canonical_json(value: Any) -> bytes:
    """Return the canonical JSON encoding of ``value``."""
    try:
        return orjson.dumps(value, option=_OPTIONS)
    except (orjson.JSONEncodeError, TypeError) as exc:
        raise NotCanonicalizableError(str(exc)) from exc


def hash_bytes(canonical: bytes) -> str:
    """The SHA-256 (hex) of canonical bytes."""
    return hashlib.sha256(canonical).hexdigest()


def encode_record(body: dict[str, Any]) -> tuple[bytes, str]:
    """Encode a record body (no ``hash`` key) to its stored line; return (line, hash).

    On the append path of every record: the two steps above are inlined here."""
    try:
        canonical = orjson.dumps(body, option=_OPTIONS)
    except (orjson.JSONEncodeError, TypeError) as exc:
        raise NotCanonicalizableError(str(exc)) from exc
    if canonical == b"{}":
        raise NotCanonicalizableError("a record cannot be empty")
    digest = hashlib.sha256(canonical).hexdigest()
    return b'%s,"hash":"%s"}\n' % (canonical[:-1], digest.encode("ascii")), digest


def encode_records(bodies: list[dict[str, Any]], prev: str | None) -> tuple[bytes, str | None]:
    """Encode consecutive record bodies (no ``prev`` or ``hash`` keys yet) as stored lines,
    chained: each body gets ``prev`` (the hash of the one before it; the first gets ``prev``)
    and, once encoded, its ``hash``. Returns the lines joined and the last hash.

    ``encode_record``'s steps, inlined in one loop: this is every append's inner loop. NaN and
    infinities (which the encoder would write as ``null``) are refused, never rewritten."""
    dumps, sha256, option = orjson.dumps, hashlib.sha256, _OPTIONS
    lines = []
    for index, body in enumerate(bodies):
        body["prev"] = prev
        try:
            canonical = dumps(body, option=option)
        except (orjson.JSONEncodeError, TypeError) as exc:
            raise NotCanonicalizableError(str(exc), index=index) from exc
        prev = sha256(canonical).hexdigest()
        body["hash"] = prev
        lines.append(b'%s,"hash":"%s"}\n' % (canonical[:-1], prev.encode("ascii")))
    data = b"".join(lines)
    if b"null" in data:  # one search per batch; a null may be a NaN the encoder rewrote
        for index, line in enumerate(lines):
            if b"null" in line:
                try:  # the standard library's C encoder refuses them; find the field in Python
                    json.dumps(bodies[index], allow_nan=False)
                except (ValueError, TypeError):
                    _refuse_non_finite(bodies[index], index)
    return data, prev


def _refuse_non_finite(value: Any, index: int, path: str = "") -> None:
    if isinstance(value, float) and not math.isfinite(value):
        raise NotCanonicalizableError(
            "NaN and infinite numbers are not JSON", index=index, field=path or None
        )
    if isinstance(value, dict):
        for key, item in value.items():
            _refuse_non_finite(item, index, f"{path}.{key}" if path else str(key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            _refuse_non_finite(item, index, f"{path}.{i}" if path else str(i))


def expected_line(record: dict[str, Any]) -> tuple[bytes, str]:
    """The stored line a parsed record must have, and the hash its body gives."""
    body = {k: v for k, v in record.items() if k != "hash"}
    return encode_record(body)
