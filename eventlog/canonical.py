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
from typing import Any

import orjson

from eventlog.errors import EventLogError

_OPTIONS = orjson.OPT_SORT_KEYS


class NotCanonicalizableError(EventLogError, ValueError):
    """The value cannot be expressed as canonical JSON (NaN, integers beyond 64 bits, ...)."""


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


def expected_line(record: dict[str, Any]) -> tuple[bytes, str]:
    """The stored line a parsed record must have, and the hash its body gives."""
    body = {k: v for k, v in record.items() if k != "hash"}
    return encode_record(body)
