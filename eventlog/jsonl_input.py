"""Parse a JSONL stream of input events, validating every line before anything is appended.

Errors name the source, the line number and the field, and all invalid lines are reported at once,
so a user fixes a file in one pass. Blank lines are ignored.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from eventlog.errors import InvalidEventError
from eventlog.exact_json import InexactJSONError, loads_exact
from eventlog.log import validate_input
from eventlog.schema import Event


@dataclass(frozen=True, slots=True)
class LineError:
    """One invalid input line: its number, field and problem."""

    line: int
    field: str | None
    message: str


class InvalidInputError(InvalidEventError):
    """One or more lines of a JSONL input are not valid events."""

    def __init__(self, source: str, errors: list[LineError]) -> None:
        self.source = source
        self.errors = errors
        first = errors[0]
        super().__init__(first.message, index=first.line - 1, field=first.field)

    def __reduce__(self) -> tuple[Any, ...]:
        return type(self), (self.source, self.errors)

    def lines(self) -> list[str]:
        """``source:line: field 'f': message`` for every invalid line."""
        out = []
        for err in self.errors:
            where = f" field '{err.field}':" if err.field else ""
            out.append(f"{self.source}:{err.line}:{where} {err.message}")
        return out


def parse_event_lines(data: bytes, source: str) -> list[Event]:
    """Parse and validate every line; return the validated events (``append_many`` does not
    validate them again) or raise ``InvalidInputError``."""
    events: list[Event] = []
    errors: list[LineError] = []
    for number, line in enumerate(data.split(b"\n"), start=1):  # JSONL lines end at \n only
        if not line.strip():
            continue
        try:
            value = loads_exact(line)
        except InexactJSONError as exc:
            errors.append(LineError(number, None, str(exc)))
            continue
        except ValueError as exc:
            errors.append(LineError(number, None, f"invalid JSON: {exc}"))
            continue
        if not isinstance(value, dict):
            errors.append(LineError(number, None, "an event must be a JSON object"))
            continue
        try:
            events.append(validate_input(value))
        except InvalidEventError as exc:
            errors.append(LineError(number, exc.field, exc.message))
    if errors:
        raise InvalidInputError(source, errors)
    return events
