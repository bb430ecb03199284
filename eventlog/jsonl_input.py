"""Parse a JSONL stream of input events, validating every line before anything is appended.

Errors name the source, the line number and the field, and all invalid lines are reported at once,
so a user fixes a file in one pass. Blank lines are ignored.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from eventlog.errors import InexactJSONError, InvalidEventError, InvalidInputError, LineError
from eventlog.exact_json import loads_exact
from eventlog.jsonl_lines import jsonl_lines
from eventlog.prepare import checked_input

if TYPE_CHECKING:
    from eventlog.schema import Event


def parse_event_lines(data: bytes, source: str) -> list[Event | dict[str, Any]]:
    """Parse and validate every line; return the validated events (``append_many`` checks
    a plainly valid dict again without pydantic, and takes a model as validated) or raise
    ``InvalidInputError``."""
    events: list[Event | dict[str, Any]] = []
    errors: list[LineError] = []
    for number, line in enumerate(jsonl_lines(data), start=1):
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
            events.append(checked_input(value))
        except InvalidEventError as exc:
            errors.append(LineError(number, exc.field, exc.message))
    if errors:
        raise InvalidInputError(source, errors)
    return events
