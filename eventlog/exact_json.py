"""JSON input that is stored exactly as given, or refused.

Parsers quietly change some JSON: orjson reads an integer beyond 64 bits as a float
(``18446744073709551616`` -> ``1.8446744073709552e+19``), Python's ``json`` accepts ``NaN`` and
``Infinity``, and deep nesting ends in ``RecursionError``. Canonical JSON (and so the log) holds
integers in [-2**63, 2**64), finite floats, and nesting of reasonable depth; anything else is
refused here, with a message saying what and why, before it could be stored as something else.
"""

from __future__ import annotations

import json
import re
from typing import Any

import orjson

from eventlog.errors import EventLogError

_LONG_INT = re.compile(r"\d{19,}")
_LONG_INT_BYTES = re.compile(rb"\d{19,}")
_LOW, _HIGH = -(2**63), 2**64


class InexactJSONError(EventLogError, ValueError):
    """JSON that cannot be stored exactly (a number out of range, NaN, too deep)."""


def _exact_int(text: str) -> int:
    value = int(text)
    if not _LOW <= value < _HIGH:
        raise InexactJSONError(
            f"integer {text} does not fit in 64 bits, so it cannot be stored exactly "
            "(send it as a string)"
        )
    return value


def _refuse_constant(name: str) -> Any:
    raise InexactJSONError(f"{name} is not a JSON number")


def exact_decoder() -> json.JSONDecoder:
    """A ``json.JSONDecoder`` (for ``raw_decode``) that refuses what cannot be kept exactly."""
    return json.JSONDecoder(parse_int=_exact_int, parse_constant=_refuse_constant)


def loads_exact(data: bytes | str) -> Any:
    """Parse JSON (orjson's speed in the common case); raise ``InexactJSONError`` for values
    that would not be stored as given, ``ValueError`` for JSON that does not parse."""
    try:
        value = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        if "recursion" in str(exc).lower():
            raise InexactJSONError("nested too deeply (more than 1,024 levels)") from exc
        raise
    digits = _LONG_INT_BYTES if isinstance(data, bytes) else _LONG_INT
    if digits.search(data):  # possibly beyond 64 bits, which orjson turned into a float
        try:
            exact_decoder().decode(data.decode("utf-8") if isinstance(data, bytes) else data)
        except RecursionError as exc:
            raise InexactJSONError("nested too deeply") from exc
    return value
