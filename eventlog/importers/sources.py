"""Splitting a source file into records with their exact bytes.

A unit is one record of the source: its position, its exact text, the bytes between it and the
previous record (``prefix``), and for the last one the bytes after it (``suffix``). Joining
``prefix + text`` of every unit and the last ``suffix`` gives back the file, byte for byte.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from eventlog.errors import InexactJSONError, SourceError
from eventlog.exact_json import exact_decoder, loads_exact


@dataclass(frozen=True, slots=True)
class Unit:
    """One record of a source: position, exact text, and the bytes around it."""

    index: int
    line: int  # 1-based line where the record starts, for messages
    text: str
    obj: Any
    prefix: str = ""
    suffix: str | None = None

    @property
    def sha256(self) -> str:
        """The SHA-256 of the record's exact text."""
        return hashlib.sha256(self.text.encode("utf-8")).hexdigest()


def _decode(data: bytes, source: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise SourceError(source, line, f"not UTF-8: {exc.reason}") from exc


def _lines(text: str) -> list[str]:
    """The lines of a JSONL text, each with its ``\n``: split on ``\n`` only, since JSON
    strings may hold U+2028, U+2029 and U+0085, which ``str.splitlines`` also splits on."""
    parts = text.split("\n")
    return [part + "\n" for part in parts[:-1]] + ([parts[-1]] if parts[-1] else [])


def jsonl_units(data: bytes, source: str, *, live: bool = False) -> list[Unit]:
    """One unit per line; each line must be a JSON object. Line endings stay in ``text``.

    ``live``: the file may still be written to, so a last line without its newline is left for
    the next import instead of being refused."""
    if live and data and not data.endswith(b"\n"):
        data = data[: data.rfind(b"\n") + 1]
    units: list[Unit] = []
    for number, text in enumerate(_lines(_decode(data, source)), start=1):
        if not text.strip():
            raise SourceError(source, number, "blank line in a JSONL transcript")
        try:
            obj = loads_exact(text)
        except InexactJSONError as exc:
            raise SourceError(source, number, str(exc)) from exc
        except ValueError as exc:
            raise SourceError(source, number, f"invalid JSON: {exc}") from exc
        if not isinstance(obj, dict):
            raise SourceError(source, number, "a record must be a JSON object")
        units.append(Unit(len(units), number, text, obj))
    return units


def json_array_units(data: bytes, source: str) -> list[Unit]:
    """One unit per element of a top-level JSON array, with the exact bytes around each."""
    text = _decode(data, source)
    decoder = exact_decoder()
    try:
        loads_exact(text)
    except InexactJSONError as exc:
        raise SourceError(source, None, str(exc)) from exc
    except ValueError as exc:
        raise SourceError(source, None, f"invalid JSON: {exc}") from exc
    start = len(text) - len(text.lstrip())
    if not text.startswith("[", start):
        raise SourceError(source, 1, "expected a JSON array")
    units: list[Unit] = []
    pos, gap_start = start + 1, 0
    while True:
        while pos < len(text) and text[pos] in " \t\r\n":
            pos += 1
        if text[pos] == "]":
            break
        obj, end = decoder.raw_decode(text, pos)
        if not isinstance(obj, dict):
            line = text.count("\n", 0, pos) + 1
            raise SourceError(source, line, f"record {len(units) + 1} is not a JSON object")
        units.append(
            Unit(
                len(units),
                text.count("\n", 0, pos) + 1,
                text[pos:end],
                obj,
                prefix=text[gap_start:pos],
            )
        )
        pos = gap_start = end
        while text[pos] in " \t\r\n":
            pos += 1
        if text[pos] == ",":
            pos += 1
    if units:
        last = units[-1]
        units[-1] = Unit(last.index, last.line, last.text, last.obj, last.prefix, text[gap_start:])
    return units


def origin(fmt: str, source: str, unit: Unit) -> dict[str, Any]:
    """The ``origin`` field of an imported event: format, file, position, exact text."""
    data: dict[str, Any] = {
        "format": fmt,
        "source": source,
        "index": unit.index,
        "sha256": unit.sha256,
        "text": unit.text,
    }
    if unit.prefix:
        data["prefix"] = unit.prefix
    if unit.suffix is not None:
        data["suffix"] = unit.suffix
    return data
