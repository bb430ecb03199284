"""JSON input that is stored exactly as given, or refused.

Parsers quietly change some JSON: orjson reads an integer beyond 64 bits as a float
(``18446744073709551616`` -> ``1.8446744073709552e+19``), Python's ``json`` accepts ``NaN`` and
``Infinity``, and deep nesting ends in ``RecursionError``. Canonical JSON (and so the log) holds
integers in [-2**63, 2**64), finite floats, and at most ``MAX_DEPTH`` levels of nesting; anything
else is refused here, with a message saying what and why, before it could be stored as something
else.

``MAX_DEPTH`` is the one nesting limit of input: a JSONL line (``append``), an event given to the
Python API or over MCP, a record mapped by an importer. It stays well below the depth the stored
record's readers parse (200 levels), so whatever is stored can be read, verified and replayed.
"""

from __future__ import annotations

import json
import re
from array import array
from itertools import accumulate
from typing import Any

import orjson

from eventlog.errors import InexactJSONError
from eventlog.native import lines

_LONG_INT = re.compile(r"\d{19,}")
_LONG_INT_BYTES = re.compile(rb"\d{19,}")
_LOW, _HIGH = -(2**63), 2**64

MAX_DEPTH = 100
"""Objects and arrays nested in one another in one event (the event itself is level 1)."""
_OPENERS = (b"{", b"[")
_NOT_BRACKETS = bytes(c for c in range(256) if c not in b"{}[]")
_STEPS = bytes.maketrans(b"{[}]", b"\x01\x01\xff\xff")  # +1 and -1 as signed bytes


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


def too_deep(value: Any, limit: int = MAX_DEPTH) -> str | None:
    """The top-level key (or index) under which ``value`` nests deeper than ``limit`` levels
    (``value`` itself is level 1; ``""`` for a container when ``limit`` is below 1), else
    ``None``."""
    if isinstance(value, dict):
        tops: Any = value.items()
    elif isinstance(value, list | tuple):
        tops = enumerate(value)
    else:
        return None
    if limit < 1:
        return ""
    for top, child in tops:
        stack = [(child, 2)]
        while stack:
            item, depth = stack.pop()
            if isinstance(item, dict):
                children: Any = item.values()
            elif isinstance(item, list | tuple):
                children = item
            else:
                continue
            if depth > limit:
                return str(top)
            stack += [(c, depth + 1) for c in children if isinstance(c, dict | list | tuple)]
    return None


def depth_error(key: str, limit: int = MAX_DEPTH) -> str:
    """The message for input nested deeper than ``limit`` (``key`` from ``too_deep``)."""
    where = f" (under {key!r})" if key else ""
    return f"nested more than {limit} levels deep{where}; flatten it or send it as a string"


def _outside_strings(data: bytes) -> bytes:
    """The JSON ``data`` with its strings cut out (their escapes first, so an escaped quote
    does not end one)."""
    if b"\\" in data:
        data = data.replace(b"\\\\", b"").replace(b'\\"', b"")
    return b"".join(data.split(b'"')[::2])


def json_shape_py(data: bytes) -> tuple[int, bool]:
    """How deep the JSON ``data`` nests (a scalar 0, ``{}`` 1), and whether a ``null`` is in
    it outside strings, in C-speed passes: strings cut out (their escapes first, so an
    escaped quote does not end one), every byte but the brackets dropped, and the running
    balance of what is left maximised."""
    outside = _outside_strings(data)
    null = b"n" in outside  # outside strings, an n can only begin null
    if not any(map(outside.__contains__, _OPENERS)):
        return 0, null
    return max(accumulate(array("b", outside.translate(_STEPS, _NOT_BRACKETS)))), null


# The extension's pass (None without it, or with one built before it had the pass).
_native_shape = getattr(lines, "json_shape", None)
json_shape = json_shape_py if _native_shape is None else _native_shape
"""``json_shape_py``, in one pass of the extension's when it is built (strings skipped at
``memchr`` speed: a batch of messages costs a few microseconds)."""


def bytes_too_deep(data: bytes, count: int = 1, limit: int = MAX_DEPTH) -> bool:
    """Whether one of ``count`` JSON values encoded in ``data`` nests deeper than ``limit``:
    the depth ``json_shape`` finds (of a list of them when ``count`` > 1) decides, exactly.
    Without the extension, a value D levels deep opens at least D containers, so few enough
    openers (two C-speed counts, cheaper than ``json_shape_py``'s passes) rule it out first."""
    if _native_shape is None and sum(map(data.count, _OPENERS)) - count < limit:
        return False
    return json_shape(data)[0] - (count > 1) > limit


def scan_list(data: bytes, count: int, limit: int | None) -> tuple[bool, bool]:
    """Of ``data``, the JSON of a list of ``count`` values: whether it may hold a ``null``, and
    whether one of the values nests deeper than ``limit`` (``None``: not asked). With the
    extension, one exact pass answers both; without, a search for ``null`` (which a string
    spelling it matches too) and ``bytes_too_deep``."""
    if _native_shape is None:
        return b"null" in data, limit is not None and bytes_too_deep(data, count + 1, limit)
    depth, null = _native_shape(data)
    return null, limit is not None and depth - 1 > limit  # the list is one level


def first_too_deep(
    values: list[Any], data: bytes | None = None, limit: int = MAX_DEPTH
) -> tuple[int, str] | None:
    """The index of the first of ``values`` nested deeper than ``limit``, and the key
    ``too_deep`` gives, else ``None``. ``data``, the values' JSON as one list (encoded here
    when not given), rules out most batches; only a batch it leaves in doubt is walked."""
    if data is None:
        try:
            data = orjson.dumps(values)
        except (orjson.JSONEncodeError, TypeError):
            data = None  # deeper than the encoder goes, or not JSON (refused where encoded)
    if data is not None and not bytes_too_deep(data, len(values) + 1, limit):
        return None
    for index, value in enumerate(values):
        key = too_deep(value, limit)
        if key is not None:
            return index, key
    return None


def loads_exact(data: bytes | str, max_depth: int | None = MAX_DEPTH) -> Any:
    """Parse JSON (orjson's speed in the common case); raise ``InexactJSONError`` for values
    that would not be stored as given or nest deeper than ``max_depth`` (``None``: a
    document whose records are checked one by one), ``ValueError`` for JSON that does not
    parse."""
    try:
        value = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        if "recursion" in str(exc).lower() or "depth limit" in str(exc).lower():
            raise InexactJSONError(depth_error("", max_depth or 1024)) from exc
        raise
    digits = _LONG_INT_BYTES.search(data) if isinstance(data, bytes) else _LONG_INT.search(data)
    if digits:  # possibly beyond 64 bits, which orjson turned into a float
        try:
            exact_decoder().decode(data.decode("utf-8") if isinstance(data, bytes) else data)
        except RecursionError as exc:
            raise InexactJSONError(depth_error("", max_depth or 1024)) from exc
    raw = data if isinstance(data, bytes) else data.encode("utf-8", "surrogatepass")
    if (
        max_depth is not None
        and bytes_too_deep(raw, 1, max_depth)
        and (path := too_deep(value, max_depth)) is not None
    ):
        raise InexactJSONError(depth_error(path, max_depth))
    if (key := duplicate_key(raw, value)) is not None:
        raise InexactJSONError(
            f"key {key!r} is given twice in one object; only one of its values could be "
            "stored: give each key once"
        )
    return value


_COLON_ESCAPE = re.compile(rb"\\u003[aA]")


def duplicate_key(data: bytes, value: Any) -> str | None:
    """The first key an object of the JSON ``data`` (parsed: ``value``) holds twice, else
    ``None``. A parser keeps one of the two values, silently. Each key of the source is
    followed by one colon outside strings, and so is each key of ``value`` encoded again: a
    count that differs is a key that was dropped. Two C-speed counts decide when no string
    spells a colon as an escape (then each string keeps its colons); else colons outside
    strings are counted. Only a source found to hold one is parsed again, to name the key."""
    if b":" not in data:
        return None
    try:
        again = orjson.dumps(value)
    except orjson.JSONEncodeError:  # deeper than the encoder goes (255 levels): scan it
        return _first_duplicate(data)
    if _COLON_ESCAPE.search(data) is None:
        if data.count(b":") == again.count(b":"):
            return None
    elif _outside_strings(data).count(b":") == _outside_strings(again).count(b":"):
        return None
    return _first_duplicate(data)


# A string (its escapes kept) or a character that shapes the document; what lies between
# (numbers, literals, blanks) is skipped.
_TOKENS = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"|[{}\[\]:]', re.DOTALL)


def _first_duplicate(data: bytes) -> str | None:
    """The first key an object of the JSON ``data`` (which parses) holds twice, else None: its
    tokens read in one pass with a stack of each open object's keys, never recursing (a
    document may nest as deep as the parser reads, 1024 levels)."""
    objects: list[set[str] | None] = []  # None: an array
    last = b'""'
    for match in _TOKENS.finditer(data):
        token = match.group()
        if token == b"{":
            objects.append(set())
        elif token == b"[":
            objects.append(None)
        elif token in (b"}", b"]"):
            if objects:
                objects.pop()
        elif token == b":":
            keys = objects[-1] if objects else None
            if keys is not None:
                key = json.loads(last)
                if key in keys:
                    return str(key)
                keys.add(key)
        else:
            last = token
    return None
